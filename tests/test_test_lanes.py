"""scripts/test.sh's background lanes stop on its ``kill -INT`` (a Ctrl-C,
a failed static check) as pytest stops on a Ctrl-C, cleaning up, instead
of running to their end while test.sh waits: a script's background job
starts with SIGINT ignored, and ``scripts/sigint_default.py`` gives it
back its default."""

import contextlib
import os
import signal
import subprocess
import sys

import conftest
from tfrun_helpers import REPO

WRAPPER = os.path.join(REPO, "scripts", "sigint_default.py")
# A Python that says its pid, then waits far longer than the test does.
SLEEPER = "import os, time; print(os.getpid(), flush=True); time.sleep(600)"


def background_job(*wrapper):
    """A Python started as a background job of a non-interactive bash (as
    test.sh starts its lanes), ``wrapper`` first; bash says its status."""
    command = " ".join([*wrapper, sys.executable, "-c", repr(SLEEPER)])
    return subprocess.Popen(["bash", "-c", "%s & wait $!; echo status $?" % command],
                            stdout=subprocess.PIPE, text=True)


def ignores_sigint(pid):
    with open("/proc/%d/status" % pid) as handle:
        mask = next(int(line.split()[1], 16) for line in handle if line.startswith("SigIgn:"))
    return bool(mask & (1 << (signal.SIGINT - 1)))


def test_a_background_job_of_a_script_ignores_sigint_unless_given_it_back():
    for wrapper, ignored in (((), True), ((sys.executable, WRAPPER), False)):
        with running(background_job(*wrapper)) as (job, pid):
            assert ignores_sigint(pid) is ignored, wrapper


def test_a_lane_started_through_the_wrapper_stops_on_sigint():
    with running(background_job(sys.executable, WRAPPER)) as (job, pid):
        os.kill(pid, signal.SIGINT)
        out, _ = job.communicate(timeout=60)   # not the sleeper's 600 s
        assert out.strip() == "status 130", out


@contextlib.contextmanager
def running(job):
    """(``job``, the pid of its sleeper); both killed at the end if they still run."""
    pid = None
    try:
        pid = int(job.stdout.readline())
        yield job, pid
    finally:
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if job.poll() is None:
            job.kill()
        job.communicate(timeout=60)


def test_test_sh_starts_both_lanes_through_the_wrapper():
    with open(os.path.join(REPO, "scripts", "test.sh")) as handle:
        script = handle.read()
    assert script.count("python3 scripts/sigint_default.py \\\n    python3 -m pytest") == 2


def test_the_wrapper_without_a_command_is_a_usage_error():
    result = subprocess.run([sys.executable, WRAPPER], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and result.stderr.startswith("usage: "), result.stderr


# Every pytest process scripts/test.sh runs at once: (lane, xdist worker).
AT_ONCE = [("", "gw0"), ("", "gw1"), ("training", ""), ("waiting", "gw0"), ("waiting", "gw1")]


def test_the_processes_that_run_at_once_draw_ports_from_windows_of_their_own(monkeypatch):
    windows = []
    for lane, worker in AT_ONCE:
        monkeypatch.delenv("TFMESOS_LOCAL_PORTS", raising=False)
        monkeypatch.setenv("TFMESOS_TEST_LANE", lane)
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        conftest._lane_ports()
        low, high = map(int, os.environ["TFMESOS_LOCAL_PORTS"].split("-"))
        # 2 ports a task, 1,000 tasks at most (README), below Linux' ephemeral ports
        assert high - low + 1 >= 2000 and 20000 <= low and high <= 30999, (lane, worker)
        windows.append(range(low, high + 1))
    for index, window in enumerate(windows):
        for other in windows[index + 1:]:
            assert not set(window) & set(other), (window, other)
