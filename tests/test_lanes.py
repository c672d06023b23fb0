"""scripts/test.sh's serial lanes (training, waiting) write pytest's output
to a log: a pytest that a test ended (an in-process task's os._exit(0),
once, unseen) left a log without its summary and exit code 0, and CI
passed without the rest of the lane. ``summarised`` (scripts/test.sh)
fails the suite then; here against real pytest runs."""

import os
import subprocess
import sys

from tfrun_helpers import REPO

TESTS = '''
import os

def test_one():
    pass

def test_that_ends_the_process():
    if os.environ.get("END_IT"):
        os._exit(0)

def test_three():
    pass
'''


def _lane(tmp_path, end_it):
    (tmp_path / "test_lane.py").write_text(TESTS)
    log = tmp_path / "lane.log"
    with open(log, "w") as out:
        code = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-p", "no:xdist", str(tmp_path)],
                              stdout=out, stderr=subprocess.STDOUT, cwd=str(tmp_path),
                              env=dict(os.environ, END_IT="1" if end_it else ""),
                              timeout=120).returncode
    script = os.path.join(REPO, "scripts", "test.sh")
    check = ('eval "$(sed -n \'/^summarised() {/,/^}/p\' "$1")"; status=0; '
             'summarised "$2" waiting; echo "status=$status"')
    said = subprocess.run(["bash", "-c", check, "lane", script, str(log)], capture_output=True,
                          text=True, timeout=60)
    return code, said.stdout


def test_a_lane_whose_pytest_a_test_ended_fails_the_suite(tmp_path):
    code, said = _lane(tmp_path, end_it=True)
    assert code == 0       # what the lane's own exit code said
    assert said == ("scripts/test.sh: the waiting lane's pytest ended without its summary "
                    "line: a test ended its process; its tests did not all run\nstatus=1\n")


def test_a_lane_that_ran_all_its_tests_passes(tmp_path):
    code, said = _lane(tmp_path, end_it=False)
    assert (code, said) == (0, "status=0\n")
