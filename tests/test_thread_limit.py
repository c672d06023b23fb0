"""tfrun where threads cannot start (``RuntimeError: can't start new
thread``: the user's process limit, ``ulimit -u``, reached, which every
thread of every process of the user counts against): the run ends in one
line that says so, its record says how it ended, nothing is left running.
The limit is played by a ``threading.Thread.start`` that refuses (root is
above RLIMIT_NPROC), in a real tfrun process on the embedded master."""

import json
import os
import subprocess
import sys

import pytest
from conftest import marked_processes
from tfrun_helpers import REPO, assert_no_task_processes, exited_or_dumped
from waiting import wait_until

# tfrun, its threading.Thread.start refusing every thread once REFUSE_FROM
# says: "thread:NAME" from the first thread of that name on (that one too);
# "ready" once the run's cluster is ready (ClusterRun.wait_ready returned).
REFUSING_TFRUN = r'''
import os, sys, threading

real_start = threading.Thread.start
when = os.environ["REFUSE_FROM"]
refusing = []


def start(self):
    if when == "thread:" + self.name:
        refusing.append(True)
    if refusing:
        raise RuntimeError("can't start new thread")
    return real_start(self)


threading.Thread.start = start
if when == "ready":
    from tfmesos.core.launch import ClusterRun
    wait_ready = ClusterRun.wait_ready

    def ready(self):
        spec = wait_ready(self)
        refusing.append(True)
        return spec
    ClusterRun.wait_ready = ready
from tfmesos.cli.tfrun import run
sys.argv[0] = "tfrun"
run()
'''
ARGS = ["-w", "2", "-s", "1", "-Cw", "0.1", "-Cs", "0.1", "-Mw", "64", "-Ms", "64",
        "--no-isolation", "--", "python3", "-c", "print(1)"]


def script_env():
    """The environment of a script in the test's directory that runs
    tfrun: this checkout's tfmesos first (the script's directory is first
    on its path, not the checkout)."""
    path = [REPO] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, MESOS_MASTER="", PYTHONPATH=os.pathsep.join(path))


def refusing_tfrun(tmp_path, refuse_from, *args):
    """Run tfrun whose threads are refused from ``refuse_from`` on; (the
    finished process, its stdout, its stderr, its run.json)."""
    script = tmp_path / "refusing_tfrun.py"
    script.write_text(REFUSING_TFRUN)
    runs, tmp = tmp_path / "runs", tmp_path / "tmp"
    tmp.mkdir()
    env = dict(script_env(), REFUSE_FROM=refuse_from, TMPDIR=str(tmp),
               TFMESOS_RUNS_DIR=str(runs), PYTHONFAULTHANDLER="1")
    proc = subprocess.Popen([sys.executable, str(script), *args, *ARGS], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        exited_or_dumped(proc, 90)   # it hung in Console.drain, silent
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    records = list(runs.glob("*/run.json"))
    assert len(records) == 1, (records, err)
    def removed():   # by the master's stop, or the cleaner it leaves it to (tfrun's)
        left[:] = [name for name in os.listdir(tmp) if name.startswith("mesos-local-")]
        return not left
    left: list = []
    wait_until(removed, 30, interval=0.2,
               message=lambda: "the local master's work dir is left: %s" % left)
    return proc, out, err, json.loads(records[0].read_text())


def no_warm_interpreters():
    def none():
        return not [p for p in marked_processes() if "tfmesos.task.warm" in p[1]]
    wait_until(none, 30, interval=0.2, message="warm task interpreters survived")


def test_a_run_whose_master_cannot_start_a_thread_ends_in_one_line(tmp_path):
    proc, out, err, record = refusing_tfrun(tmp_path, "thread:local-master-loop")
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("tfrun: error: ")]
    assert errors == [line for line in err.splitlines() if "thread" in line], err
    assert len(errors) == 1, err
    assert errors[0].startswith("tfrun: error: cannot start a thread (can't start new "
                                "thread): "), err
    assert "ulimit -u" in errors[0], err
    assert record["outcome"]["status"] == "aborted", record["outcome"]
    assert record["outcome"]["message"] == "RuntimeError: can't start new thread"
    assert record["outcome"]["exit_code"] == 1
    no_warm_interpreters()
    assert_no_task_processes()


def test_a_run_that_cannot_start_threads_once_ready_records_what_tfrun_exits_with(tmp_path):
    # Its console's thread refused as it said "cluster ready": a traceback,
    # exit 1, and run.json said succeeded, exit 0.
    proc, out, err, record = refusing_tfrun(tmp_path, "ready")
    assert "Traceback" not in err
    outcome = record["outcome"]
    assert outcome["exit_code"] == proc.returncode, (outcome, err)
    assert (outcome["status"] == "succeeded") == (proc.returncode == 0), (outcome, err)
    no_warm_interpreters()
    assert_no_task_processes()


# tfrun, one of its own calls raising what it does not expect, once the
# cluster is ready (the address of TensorBoard looked up).
FAILING_TFRUN = r'''
import sys
import tfmesos.cli.tfrun as tfrun


def url_of(spec):
    raise ValueError("no URL here")


tfrun.url_of = url_of
sys.argv[0] = "tfrun"
tfrun.run()
'''


@pytest.mark.parametrize("verbose", [False, True])
def test_what_tfrun_did_not_expect_fails_the_run_in_one_line(tmp_path, verbose):
    script = tmp_path / "failing_tfrun.py"
    script.write_text(FAILING_TFRUN)
    runs = tmp_path / "runs"
    env = dict(script_env(), TFMESOS_RUNS_DIR=str(runs))
    result = subprocess.run([sys.executable, str(script), *(["-v"] if verbose else []), *ARGS],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "tfrun: error: ValueError: no URL here%s\n" % (
        "" if verbose else " (tfrun -v shows its traceback)") in result.stderr
    assert ("Traceback" in result.stderr) == verbose, result.stderr
    (record,) = [json.loads(path.read_text()) for path in runs.glob("*/run.json")]
    assert record["outcome"]["status"] == "failed", record["outcome"]
    assert record["outcome"]["message"] == "ValueError: no URL here"
    assert record["outcome"]["exit_code"] == 1
    assert_no_task_processes()
