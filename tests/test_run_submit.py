"""``tfmesos.run`` as the libraries its users know do it (issue 35, item 7):
every task's value (a ``RunResult``, the chief's, else worker 0's, as
``.value``); ``tfmesos.submit``, a ``concurrent.futures.Future`` whose
``cancel()`` stops a running run and leaves nothing of it running; a
remote exception raised as its own type too. The functions run plain
Python (no TensorFlow)."""

import concurrent.futures
import json
import os
import pickle
import sys
import threading

import cloudpickle
import pytest
from fixtures_master import leftover_processes, local_master, make_local_master
from processes import FORK_A_CHILD_THAT_EXITS
from waiting import wait_until

import tfmesos
from tfmesos.core import function_results, function_run, run_cancel
from tfmesos.core.remote_errors import remote_error
from tfmesos.core.result_inbox import ResultInbox
from tfmesos.exceptions import RemoteTaskError, SpecError, TaskFailed

pytestmark = pytest.mark.timeout(240)

# By value, as a script's functions travel: the agents cannot import this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SMALL = {"cpus": 0.1, "mem": 128, "launch_timeout": 120, "ship": None}


def per_task(path):
    """Workers return their index (having left a file); the chief returns
    once both workers' files are there; the ps serves until stopped."""
    import os
    import time
    job, index = os.environ["TFMESOS_JOB_NAME"], int(os.environ["TFMESOS_TASK_INDEX"])
    if job == "worker":
        open(os.path.join(path, "worker-%d" % index), "w").close()
        return {"worker": index}
    if job == "ps":
        while True:
            time.sleep(0.2)
    deadline = time.monotonic() + 120
    while not all(os.path.exists(os.path.join(path, "worker-%d" % i)) for i in (0, 1)):
        if time.monotonic() > deadline:
            raise TimeoutError("the workers never came")
        time.sleep(0.05)
    return "chief"


def index_plus(offset):
    import os
    return int(os.environ["TFMESOS_TASK_INDEX"]) + offset


def runs_until_stopped(path):
    import os
    import time
    open(os.path.join(path, "started-%d" % os.getpid()), "w").close()
    while True:
        time.sleep(0.2)


def divides_by_zero_on_worker_1():
    import os
    return 1 / int(os.environ["TFMESOS_TASK_INDEX"] != "1")


def worker_values_that_cannot_come_back(size):
    import os
    import threading
    index = int(os.environ["TFMESOS_TASK_INDEX"])
    return {0: "fine", 1: b"x" * size, 2: threading.Lock()}[index]


def run_json(directory):
    with open(os.path.join(directory, "run.json"), encoding="utf-8") as handle:
        return json.load(handle)


# -- every task's value ----------------------------------------------------------


def test_every_task_returns_its_value_the_chief_s_is_value(tmp_path, monkeypatch):
    # The run ends when the chief returned; the workers it waited for get
    # END_GRACE to send theirs (generous here: the machine is loaded).
    monkeypatch.setattr(function_results, "END_GRACE", 120.0)
    result = tfmesos.run(per_task, str(tmp_path), workers=2, ps=1, chief=True,
                         run_dir=str(tmp_path / "run"), **SMALL)
    assert isinstance(result, tfmesos.RunResult)
    assert result.value == "chief" and result.value_task == "chief:0"
    assert result.values == {"chief:0": "chief", "worker:0": {"worker": 0},
                             "worker:1": {"worker": 1}}
    assert list(result) == ["chief:0", "worker:0", "worker:1"] and len(result) == 3
    assert result["worker:1"] == {"worker": 1} and dict(result) == result.values
    # The ps served until the run ended: stopped, no value, and it says so.
    assert "ps:0" not in result and list(result.missing) == ["ps:0"]
    assert result.missing["ps:0"] == ("stopped: still running when the run ended (once the "
                                      "chief returned)")
    with pytest.raises(KeyError, match="ps:0 has no value: stopped"):
        result["ps:0"]
    with pytest.raises(KeyError, match="no task 'worker:7'"):
        result["worker:7"]
    assert result.run_id == run_json(tmp_path / "run")["run_id"]
    assert repr(result).startswith("RunResult(run_id=%r, value='chief' (chief:0), values={"
                                   "'chief:0': 'chief', 'worker:0': {'worker': 0}, "
                                   % result.run_id)
    assert pickle.loads(pickle.dumps(result)) == result


def test_a_value_of_another_task_that_cannot_come_back_is_missing_not_a_failure(
        tmp_path, monkeypatch):
    monkeypatch.setattr(function_run, "MAX_OTHER_RESULTS", 2 << 20)   # 1 MiB per other task
    result = tfmesos.run(worker_values_that_cannot_come_back, 3 << 20, workers=3,
                         run_dir=str(tmp_path / "run"), **SMALL)
    assert result.value == "fine" and list(result) == ["worker:0"]
    assert result.missing["worker:1"].startswith(
        "returned a value that pickles to 3.0 MiB, over the 1.0 MiB bound of tfmesos.run's "
        "results for each task but the chief (else worker 0)")
    assert result.missing["worker:2"].startswith(
        "returned a value that cannot be pickled: TypeError: cannot pickle '_thread.lock'")
    assert run_json(tmp_path / "run")["outcome"]["status"] == "succeeded"


# -- submit ----------------------------------------------------------------------


def test_submit_then_result(tmp_path):
    called = []
    future = tfmesos.submit(index_plus, 40, workers=2, run_dir=str(tmp_path / "run"), **SMALL)
    future.add_done_callback(called.append)
    assert isinstance(future, concurrent.futures.Future)
    result = future.result(timeout=180)
    assert result.values == {"worker:0": 40, "worker:1": 41} and result.value == 40
    assert future.done() and not future.running() and not future.cancelled()
    assert future.exception() is None and called == [future]
    assert not future.cancel()   # done: its outcome stands
    assert "finished: RunResult(run_id=%r" % result.run_id in repr(future)



def test_a_submit_whose_thread_cannot_start_raises_and_leaves_nothing(tmp_path, monkeypatch):
    # No thread to be had (ulimit -u reached): the future stayed live, and
    # the exit's cancel joined a thread never started (RuntimeError), its
    # payload's directory left.
    import tempfile

    from tfmesos.core import function_submit
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real = threading.Thread.start

    def start(self):
        if self.name.startswith("tfmesos.submit("):
            raise RuntimeError("can't start new thread")
        return real(self)
    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        tfmesos.submit(index_plus, 40, workers=1, run_dir=str(tmp_path / "run"), **SMALL)
    monkeypatch.setattr(threading.Thread, "start", real)
    assert not [f for f in function_submit._live if f._thread.name.endswith("(index_plus)")]
    assert not [t for t in function_submit._working if t.name.endswith("(index_plus)")]
    assert not [name for name in os.listdir(tmp_path) if name.startswith("tfmesos-function-")]


CALLBACK_AT_EXIT = """
import sys, time, tfmesos

def one():
    return 1

def save(future):
    time.sleep(0.5)    # the program's main thread has returned from result() by now
    with open(sys.argv[1], "w") as handle:
        handle.write("saved %r" % (future.result().value,))

future = tfmesos.submit(one, workers=1, cpus=0.1, mem=128, ship=None, launch_timeout=120,
                        run_dir=sys.argv[2])
future.add_done_callback(save)
future.result()
"""


# A script's wait until its run's task runs fn (run.json says all registered).
STARTED = """
def started(run_dir):
    import json, os, time
    while True:
        try:
            with open(os.path.join(run_dir, "run.json")) as handle:
                if json.load(handle)["timings"]["all_registered"]:
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
"""


LEFT_GOING_AT_EXIT = STARTED + """
import json, os, sys, time, tfmesos

def slow():
    time.sleep(600)

future = tfmesos.submit(slow, workers=1, cpus=0.1, mem=128, ship=None, launch_timeout=120,
                        run_dir=sys.argv[1])
started(sys.argv[1])
"""


def test_a_run_the_program_left_going_at_its_exit_says_so_not_a_cancel(tmp_path):
    # Its record said "its future's cancel() stopped it": nobody called cancel().
    import subprocess
    script = tmp_path / "left.py"
    script.write_text(LEFT_GOING_AT_EXIT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "run")],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, MESOS_MASTER=""))
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads((tmp_path / "run" / "run.json").read_text())["outcome"]
    assert (outcome["status"], outcome["message"]) == (
        "interrupted", "cancelled: the program exited with the run still going")


RUN_IN_A_DAEMON_THREAD_AT_EXIT = STARTED + """
import json, os, sys, threading, time, tfmesos

def slow():
    time.sleep(600)

threading.Thread(target=lambda: tfmesos.run(slow, workers=1, cpus=0.1, mem=128, ship=None,
                                            launch_timeout=120, run_dir=sys.argv[1]),
                 daemon=True).start()
started(sys.argv[1])
sys.exit(0)
"""


@pytest.mark.waits
def test_a_run_in_a_thread_the_program_left_at_its_exit_is_cancelled(tmp_path):
    # tfmesos.run in a daemon thread at the program's end: its record said
    # "running" for good and its cgroups stayed until another master
    # started, where submit's and cluster()'s runs end interrupted (found by
    # a review helper).
    import subprocess
    script = tmp_path / "daemon.py"
    script.write_text(RUN_IN_A_DAEMON_THREAD_AT_EXIT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "run")],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, MESOS_MASTER=""))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tfmesos: the program ends: cancelling tfmesos.run(slow) in thread " in done.stderr, \
        done.stderr[-3000:]
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (record["outcome"]["status"], record["outcome"]["message"]) == (
        "interrupted", "cancelled: the program exited with the run still going")
    assert all(task["state"] in ("TASK_KILLED", "TASK_FINISHED") for task in record["tasks"])


CALLBACKS_AT_EXIT = STARTED + """
import json, os, sys, time, tfmesos

def slow():
    time.sleep(600)

def submit(name):
    return tfmesos.submit(slow, workers=1, cpus=0.1, mem=128, ship=None, launch_timeout=120,
                          run_dir=os.path.join(sys.argv[1], name))

first, second = submit("first"), submit("second")
def wait_for_the_second(future):   # a callback that waits on another run
    try:
        second.result()
    except BaseException as exc:
        print("the second:", type(exc).__name__, flush=True)
def retry(future):                 # a callback that submits a run again
    try:
        submit("retried")
    except RuntimeError as exc:
        print("retry refused:", exc, flush=True)
first.add_done_callback(wait_for_the_second)
first.add_done_callback(retry)
started(os.path.join(sys.argv[1], "first"))
started(os.path.join(sys.argv[1], "second"))
"""


def test_done_callbacks_that_wait_on_a_run_or_submit_again_do_not_hang_the_exit(tmp_path):
    # At exit, runs were cancelled one after another, each running its
    # callbacks on the main thread: a callback of the first waiting on the
    # second (not cancelled yet) hung the exit for the second's whole run,
    # and one that submitted again started a run the exit then waited out
    # (found by a review helper).
    import subprocess
    script = tmp_path / "callbacks.py"
    script.write_text(CALLBACKS_AT_EXIT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=150,
                          env=dict(os.environ, MESOS_MASTER=""))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the second: CancelledError" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "retry refused: tfmesos.submit: the program is ending: no new run starts" \
        in done.stdout, done.stdout
    for name in ("first", "second"):
        outcome = json.loads((tmp_path / name / "run.json").read_text())["outcome"]
        assert (outcome["status"], outcome["message"]) == (
            "interrupted", "cancelled: the program exited with the run still going")
    assert not (tmp_path / "retried").exists()


def test_a_done_callback_runs_to_its_end_however_soon_the_program_exits(tmp_path):
    # The run's thread was a daemon: set_result() woke result() before it
    # called the callbacks, the program ended, and the callback was cut
    # off (its file never written), where an executor's future runs it.
    import subprocess
    script = tmp_path / "callback.py"
    script.write_text(CALLBACK_AT_EXIT)
    saved = tmp_path / "saved"
    done = subprocess.run([sys.executable, str(script), str(saved), str(tmp_path / "run")],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, MESOS_MASTER=""))
    assert done.returncode == 0, done.stderr[-3000:]
    assert saved.read_text() == "saved 1"


def test_submit_then_cancel_a_long_function_leaves_nothing_running(tmp_path, local_master):
    called = []
    future = tfmesos.submit(runs_until_stopped, str(tmp_path), workers=2, master=local_master.url,
                            python=sys.executable, run_dir=str(tmp_path / "run"), **SMALL)
    future.add_done_callback(called.append)

    def started():
        return [name for name in os.listdir(tmp_path) if name.startswith("started-")]
    wait_until(lambda: len(started()) == 2, 120, message=lambda: "started: %s" % started())
    assert future.running() and not future.done() and "running" in repr(future)
    assert future.cancel() is True
    # cancel() returned once the run's tasks were told to stop and its
    # framework torn down: the future is cancelled, the tasks end.
    assert future.cancelled() and future.done() and called == [future]
    with pytest.raises(concurrent.futures.CancelledError):
        future.result()
    with pytest.raises(concurrent.futures.CancelledError):
        future.exception()
    assert future.cancel() is True   # again: still cancelled
    wait_until(lambda: not leftover_processes(local_master), 60,
               message=lambda: "left running: %s" % leftover_processes(local_master))
    state = local_master.state()
    assert state["frameworks"] == [] and len(state["completed_frameworks"]) == 1
    outcome = run_json(tmp_path / "run")["outcome"]
    assert (outcome["status"], outcome["message"]) == (
        "interrupted", "cancelled: its future's cancel() stopped it")


FORKED = FORK_A_CHILD_THAT_EXITS + """
import os, sys, time
import tfmesos

def waits_for(path):
    import os, time
    open(os.path.join(path, "started"), "w").close()
    while not os.path.exists(os.path.join(path, "go")):
        time.sleep(0.1)
    return 7

future = tfmesos.submit(waits_for, sys.argv[1], workers=1, cpus=0.1, mem=128, ship=None,
                        launch_timeout=120, run_dir=sys.argv[2], logs="none")
deadline = time.monotonic() + 120   # bounds on a hang, not timings
while not os.path.exists(os.path.join(sys.argv[1], "started")):
    assert time.monotonic() < deadline, "never started"
    time.sleep(0.1)
fork_a_child_that_exits(sys.argv[3])
open(os.path.join(sys.argv[1], "go"), "w").close()
print("parent result", future.result(timeout=120).value, flush=True)
"""


FORKED_CHILD_ASKS = """
import os, sys, time
import tfmesos

def waits_for(path):
    import os, time
    open(os.path.join(path, "started"), "w").close()
    while not os.path.exists(os.path.join(path, "go")):
        time.sleep(0.1)
    return 7

future = tfmesos.submit(waits_for, sys.argv[1], workers=1, cpus=0.1, mem=128, ship=None,
                        launch_timeout=120, run_dir=sys.argv[2], logs="none")
deadline = time.monotonic() + 120   # bounds on a hang, not timings
while not os.path.exists(os.path.join(sys.argv[1], "started")):
    assert time.monotonic() < deadline, "never started"
    time.sleep(0.1)
child = os.fork()
if child == 0:
    said = []
    said.append("cancel %r" % future.cancel())
    for call in (lambda: future.result(timeout=30), lambda: future.exception(timeout=30)):
        try:
            call()
        except Exception as exc:
            said.append("%s: %s" % (type(exc).__name__, exc))
    with open(sys.argv[3], "w") as handle:
        handle.write("\\n".join(said))
    os._exit(0)
os.waitpid(child, 0)
open(os.path.join(sys.argv[1], "go"), "w").close()
print("parent result", future.result(timeout=120).value, flush=True)
"""


def test_a_forked_childs_copy_of_a_future_neither_cancels_nor_waits_for_the_parents_run(
        tmp_path):
    # In a forked child, cancel() said True and stopped nothing; result()
    # never returned (found by a review helper).
    import subprocess
    script = tmp_path / "child_asks.py"
    script.write_text(FORKED_CHILD_ASKS)
    child_said = tmp_path / "child_said"
    done = subprocess.run([sys.executable, str(script), str(tmp_path), str(tmp_path / "run"),
                           str(child_said)], cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=200, env=dict(os.environ, MESOS_MASTER=""))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "parent result 7" in done.stdout, done.stdout
    said = child_said.read_text().splitlines()
    assert said[0] == "cancel False", said
    assert said[1].startswith("RuntimeError: the run of tfmesos.submit(waits_for) belongs to "
                              "process "), said
    assert said[1].endswith(", which started it: a forked child cannot wait for it"), said
    assert said[2].startswith("RuntimeError: "), said
    assert run_json(tmp_path / "run")["outcome"]["status"] == "succeeded"


def test_a_child_forked_while_a_submit_runs_leaves_the_run_alone(tmp_path):
    """A forked child's exit ran submit's atexit hook on the parent's runs:
    'the program ends: cancelling tfmesos.submit(...)'."""
    import subprocess
    script = tmp_path / "forked.py"
    script.write_text(FORKED)
    child_said = tmp_path / "child_said"
    done = subprocess.run([sys.executable, str(script), str(tmp_path), str(tmp_path / "run"),
                           str(child_said)], cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=200, env=dict(os.environ, MESOS_MASTER=""))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "the child ended" in done.stdout and "parent result 7" in done.stdout, done.stdout
    assert child_said.read_text() == ""
    assert run_json(tmp_path / "run")["outcome"]["status"] == "succeeded"


def test_two_submits_at_once_both_complete(tmp_path):
    first = tfmesos.submit(index_plus, 10, workers=2, run_dir=str(tmp_path / "a"), **SMALL)
    second = tfmesos.submit(index_plus, 20, workers=1, run_dir=str(tmp_path / "b"), **SMALL)
    done, pending = concurrent.futures.wait([first, second], timeout=200)
    assert not pending
    assert first.result().values == {"worker:0": 10, "worker:1": 11}
    assert second.result().values == {"worker:0": 20}
    assert first.result().run_id != second.result().run_id


def test_a_remote_exception_is_raised_as_its_own_type_through_the_future(tmp_path):
    future = tfmesos.submit(divides_by_zero_on_worker_1, workers=2,
                            run_dir=str(tmp_path / "run"), **SMALL)
    with pytest.raises(ZeroDivisionError) as caught:
        future.result(timeout=180)
    error = caught.value
    assert isinstance(error, RemoteTaskError) and error.task == "worker:1"
    assert str(error).startswith("worker:1 raised ZeroDivisionError: division by zero")
    assert error.args == ("division by zero",) and type(error.__cause__) is ZeroDivisionError
    assert future.exception() is error


def test_what_cannot_start_is_raised_by_submit_itself():
    with pytest.raises(TypeError, match=r"^tfmesos\.submit\(\) got an unexpected option "
                                        r"'wokers'; valid options: workers, ps, "):
        tfmesos.submit(index_plus, 1, wokers=2)
    with pytest.raises(SpecError, match="^tfmesos.submit: workers must be a whole number") as bad:
        tfmesos.submit(index_plus, 1, workers=-1)
    assert isinstance(bad.value, ValueError)
    with pytest.raises(TypeError, match="needs a function to run"):
        tfmesos.submit("not callable")
    with pytest.raises(SpecError, match="cannot pickle the function"):
        tfmesos.submit(index_plus, threading.Lock())


# -- pure: the result, the errors, the bound --------------------------------------


def test_a_run_result_reads_as_a_mapping_pickles_and_compares():
    result = tfmesos.RunResult({"worker:0": 1, "worker:1": [2]}, "worker:0", "7a4e0001",
                               {"ps:0": "stopped"})
    assert pickle.loads(pickle.dumps(result)) == result
    assert result != tfmesos.RunResult({"worker:0": 1, "worker:1": [3]}, "worker:0", "7a4e0001",
                                       {"ps:0": "stopped"})
    assert result != 1 and result.get("ps:0", "none") == "none"
    assert list(result.items()) == [("worker:0", 1), ("worker:1", [2])]
    with pytest.raises(TypeError):
        hash(result)
    with pytest.raises(ValueError, match="value_task 'chief:0' is none of its values' tasks"):
        tfmesos.RunResult({"worker:0": 1}, "chief:0", "7a4e0001")


def failed_with(exception):
    inbox = ResultInbox()
    data = pickle.dumps(exception)
    inbox.feed("t", {"type": "result", "status": "error", "traceback": "", "size": len(data),
                     "error": "raised %s: %s" % (type(exception).__name__, exception)})
    inbox.feed("t", {"type": "result_data", "offset": 0,
                     "data": __import__("base64").b64encode(data).decode()})
    return remote_error("worker:1", inbox.wait("t", 0), TaskFailed("x", "worker:1", None, 1))


def test_a_remote_exception_is_its_own_type_and_a_remote_task_error():
    with pytest.raises(ZeroDivisionError):
        raise failed_with(ZeroDivisionError("division by zero"))
    error = failed_with(FileNotFoundError(2, "No such file or directory", "/data/x"))
    assert isinstance(error, FileNotFoundError) and isinstance(error, RemoteTaskError)
    assert (error.errno, error.filename, error.task) == (2, "/data/x", "worker:1")
    assert type(error).__name__ == "RemoteTaskError(FileNotFoundError)"
    assert type(failed_with(FileNotFoundError(2, "again"))) is type(error)   # one class each
    copied = pickle.loads(pickle.dumps(error))
    assert type(copied) is type(error) and str(copied) == str(error) and copied.task == "worker:1"
    # MemoryError's __new__ refuses such a class: it was a RemoteTaskError alone.
    with pytest.raises(MemoryError):
        raise failed_with(MemoryError("x"))
    # A remote SystemExit must not end the caller: a RemoteTaskError alone.
    exited = failed_with(SystemExit(3))
    assert type(exited) is RemoteTaskError and type(exited.__cause__) is SystemExit


def test_the_results_kept_together_are_bounded():
    inbox = ResultInbox(limit=1000, total=1500)
    inbox.feed("t1", {"type": "result", "status": "ok", "size": 1000})
    inbox.feed("t2", {"type": "result", "status": "ok", "size": 600})
    assert inbox.wait("t2", 0).broken == ("it announced 600 bytes, over what the run's results "
                                          "kept leave of their 1500 byte bound")
    inbox.feed("t1", {"type": "result", "status": "ok", "size": 900})   # replaces its own
    assert inbox.wait("t1", 0).broken is None
    inbox.feed("t3", {"type": "result", "status": "ok", "size": 600})
    assert inbox.wait("t3", 0).broken is None


def test_where_no_thread_starts_at_exit_each_run_is_cancelled_in_turn(monkeypatch):
    # Python 3.12.0 and 3.12.1 refuse a new thread in an atexit handler:
    # cancel_live cancelled nothing there (found by a review helper); then,
    # cancelling in turn, a callback of the first that waited on the second
    # (not cancelled yet) hung the exit for good (found by the next one).
    from tfmesos.core import function_submit

    class Going(concurrent.futures.Future):
        def __init__(self, name):
            super().__init__()
            self.name, self.cancelled_for = name, None
            self._thread = threading.Thread(name="tfmesos.submit(%s)" % name)
            self._cancel = run_cancel.Cancel()

        def _cancel_for(self, why):   # as RunFuture's: cancelled, its callbacks run
            self.cancelled_for = why
            concurrent.futures.Future.cancel(self)

    def refused(self):
        raise RuntimeError("can't create new thread at interpreter shutdown")
    first, second = Going("a"), Going("b")
    seen = []

    def waits_for_the_second(future):
        try:
            second.result(timeout=10)
        except BaseException as exc:
            seen.append(type(exc).__name__)
    first.add_done_callback(waits_for_the_second)
    monkeypatch.setattr(function_submit, "_live", {first, second})
    monkeypatch.setattr(function_submit, "_working", set())
    monkeypatch.setattr(function_submit, "_exiting", False)
    monkeypatch.setattr(threading.Thread, "start", refused)
    function_submit.cancel_live()
    assert [g.cancelled_for for g in (first, second)] == [run_cancel.CANCELLED_AT_EXIT] * 2
    assert all(g._cancel.asked for g in (first, second))
    assert seen == ["CancelledError"]
