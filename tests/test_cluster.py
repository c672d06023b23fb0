"""Fine-grained mode: cluster() with real TensorFlow servers on the local master."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import marked_processes
from processes import FORK_A_CHILD_THAT_EXITS, TASK_ENTRY
from tfrun_helpers import REPO, assert_no_task_processes, finished_record

from tfmesos import ClusterError, TaskFailed, TFMesosError, cluster
from tfmesos.mesos.task_states import TERMINAL_STATES

pytestmark = pytest.mark.tensorflow
# A TensorFlow server holds about 300 MB of its own (RssAnon): the embedded
# master kills a task over its mem, as a Mesos agent with cgroups isolation does.
SMALL = {"cpus": 0.2, "mem": 1024}


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    """Run directories go to the test's temporary directory, not the checkout."""
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "tfmesos-runs"))


def run_json(directory):
    with open(os.path.join(directory, "run.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_plus_example_prints_42():
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "plus.py")],
                            capture_output=True, text=True, timeout=180,
                            env=dict(os.environ, MESOS_MASTER=""))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "42"


def test_targets_spec_and_failure_surfacing_in_the_caller(tmp_path):
    jobs = [dict(name="ps", num=1, **SMALL), dict(name="worker", num=2, **SMALL)]
    # (Mesos' "terminated with signal Terminated" read as a shell's 143: 75fee30)
    with pytest.raises(TaskFailed, match=r"worker:1 exited with code 143 \(TASK_KILLED: "):
        with cluster(jobs, master="local", run_dir=str(tmp_path / "run")) as c:
            assert c.run_dir == str(tmp_path / "run")
            assert sorted(c.targets) == ["/job:ps/task:0", "/job:worker/task:0",
                                         "/job:worker/task:1"]
            assert all(t.startswith("grpc://127.0.0.1:") for t in c.targets.values())
            assert c.spec["worker"] == [c.targets["/job:worker/task:%d" % i][7:] for i in (0, 1)]
            assert not c.finished()
            run = c._run
            slot = [s for s in run.slots if s.name == "worker:1"][0]
            run.driver.killTask({"value": slot.task_id})
            deadline = time.monotonic() + 30
            while not c.finished() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert c.finished() and isinstance(c.failure, TaskFailed)
    assert not [p for p in marked_processes() if TASK_ENTRY in p[1]]
    record = run_json(tmp_path / "run")
    # Named by its caller (core/caller.py): the jobs in the order given.
    assert record["mode"] == "fine" and record["command"] == "tfmesos.cluster(ps:1,worker:2)"
    assert record["outcome"]["status"] == "failed" and record["outcome"]["task"] == "worker:1"
    assert "worker:1 exited with code 143 (TASK_KILLED: " in record["outcome"]["message"]
    assert all(task["attempts"][0]["address"] and task["attempts"][0]["logs"] is None
               for task in record["tasks"])
    killed = [task for task in record["tasks"] if task["name"] == "worker:1"][0]
    assert killed["state"] == "TASK_KILLED"
    assert_every_attempt_ended(record)


def test_a_failure_is_recorded_at_once_the_directory_is_the_runs_alone_and_spec_ends(tmp_path):
    # A task's failure reached run.json only when the block ended: a block
    # that hung in TensorFlow on the failed server (and was killed there)
    # left "running". A second live run could take the same run directory
    # (one record lost). After the block, c.spec named stopped servers.
    jobs = [dict(name="worker", num=1, **SMALL)]
    run_dir = tmp_path / "run"
    with pytest.raises(TaskFailed):
        with cluster(jobs, master="local", run_dir=str(run_dir)) as c:
            run_id = run_json(run_dir)["run_id"]
            # (in this process its lock refuses it first: 80dcfe1)
            with pytest.raises(TFMesosError, match="the run directory %s is another run's, still "
                               "starting or running: give this run a directory of its own"
                               % run_dir):
                cluster(jobs, master="local", run_dir=str(run_dir)).__enter__()
            assert run_json(run_dir)["run_id"] == run_id
            [slot] = c._run.slots
            c._run.driver.killTask({"value": slot.task_id})
            deadline = time.monotonic() + 30
            while run_json(run_dir)["outcome"]["status"] != "failed":
                assert time.monotonic() < deadline, run_json(run_dir)["outcome"]
                time.sleep(0.1)
    with pytest.raises(ClusterError, match="this cluster's with block has ended"):
        print(c.spec)
    with pytest.raises(ClusterError):
        print(c.targets)


def test_sys_exit_0_in_the_block_is_a_run_that_succeeded(tmp_path):
    with pytest.raises(SystemExit):
        with cluster([dict(name="worker", num=1, **SMALL)], master="local",
                     run_dir=str(tmp_path / "run")):
            sys.exit(0)
    assert run_json(tmp_path / "run")["outcome"]["status"] == "succeeded"


def test_error_in_the_block_propagates_and_stops_the_tasks(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with cluster([dict(name="worker", num=1, **SMALL)], master="local",
                     run_dir=str(tmp_path / "run")):
            raise ZeroDivisionError("division by zero")   # the user's code failed
    assert not [p for p in marked_processes() if TASK_ENTRY in p[1]]
    record = run_json(tmp_path / "run")
    assert record["outcome"] == {
        "status": "failed", "message": "the with block raised ZeroDivisionError: division by zero",
        "task": None, "exit_code": None, "hint": None, "by": None}
    assert_every_attempt_ended(record)


def test_an_exception_that_cannot_be_printed_still_reaches_the_caller(tmp_path):
    # The block's exception's own __str__ raised as the run recorded it: the
    # caller got that RuntimeError from the record's code, not its exception.
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("str boom")

    with pytest.raises(Unprintable):
        with cluster([dict(name="worker", num=1, **SMALL)], master="local",
                     run_dir=str(tmp_path / "run")):
            raise Unprintable()
    assert not [p for p in marked_processes() if TASK_ENTRY in p[1]]
    assert run_json(tmp_path / "run")["outcome"]["message"] == (
        "the with block raised Unprintable: <unprintable Unprintable: its __str__ raised "
        "RuntimeError>")


@pytest.mark.waits
def test_a_server_that_could_not_register_again_is_said_to_have_lost_its_scheduler(
        tmp_path, monkeypatch):
    # The rendezvous drops the ps' connection and refuses it from then on: the
    # task tries to register again for its grace (30 s, task/connection.py),
    # then stops its server, and Mesos says TASK_FINISHED. That was reported
    # as "task ps:0 exited with code 0" (exit code 0 in the record, as
    # though the task had ended of its own accord).
    from tfmesos.core import fine_grained

    made = fine_grained.run_spec_of

    def patient(*args, **kwargs):   # the run waits longer than the task: its end decides
        return dataclasses.replace(made(*args, **kwargs), reconnect_grace=600.0)
    monkeypatch.setattr(fine_grained, "run_spec_of", patient)
    with pytest.raises(TaskFailed) as caught:
        with cluster([dict(name="ps", num=1, **SMALL)], master="local",
                     run_dir=str(tmp_path / "run")) as c:
            run = c._run
            [slot] = run.slots
            run.rendezvous.forget(slot.task_id, linger=0)
            deadline = time.monotonic() + 180
            while not c.finished() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert c.finished()
    expected = ("task ps:0 lost its connection to the scheduler and could not register "
                "again: its TensorFlow server stopped")
    assert str(caught.value) == expected
    assert (caught.value.task, caught.value.exit_code) == ("ps:0", None)
    outcome = run_json(tmp_path / "run")["outcome"]
    assert (outcome["status"], outcome["exit_code"]) == ("failed", None)
    assert outcome["message"].startswith(expected), outcome["message"]
    assert not [p for p in marked_processes() if TASK_ENTRY in p[1]]


def assert_every_attempt_ended(record):
    """A fine-grained task stopped by cluster() ends as Mesos said, else as
    stopped by cluster() (its servers send no exit frame)."""
    for task in record["tasks"]:
        for attempt in task["attempts"]:
            last = attempt["states"][-1]
            assert last["state"] in TERMINAL_STATES, attempt["states"]
            assert last["source"] in ("SOURCE_EXECUTOR", "SOURCE_AGENT", "SOURCE_MASTER",
                                      "stopped by cluster()"), last


def test_a_second_ctrl_c_as_the_block_s_run_stops_waits_for_the_stop(tmp_path, monkeypatch):
    """A Ctrl-C ends the caller's block; a second one as cluster() stops the
    run cut the stop short: run.json said the run was still running and
    its tasks outlived the caller by seconds. It now comes after the stop."""
    import signal

    from tfmesos.core.launch import ClusterRun
    real_stop = ClusterRun.stop

    def stop_with_a_second_ctrl_c(self):
        signal.raise_signal(signal.SIGINT)   # the user presses Ctrl-C again
        real_stop(self)

    monkeypatch.setattr(ClusterRun, "stop", stop_with_a_second_ctrl_c)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)   # Ctrl-C as in a script
    try:
        with pytest.raises(KeyboardInterrupt):
            with cluster([dict(name="worker", num=1, **SMALL)], master="local",
                         run_dir=str(tmp_path / "run")):
                raise KeyboardInterrupt   # the first Ctrl-C, in the caller's block
    finally:
        signal.signal(signal.SIGINT, before)
    assert not [p for p in marked_processes() if TASK_ENTRY in p[1]]
    record = run_json(tmp_path / "run")
    assert record["outcome"]["status"] == "interrupted"
    assert_every_attempt_ended(record)


def test_a_run_that_ends_well_ends_every_attempt(tmp_path):
    with cluster([dict(name="worker", num=2, **SMALL)], master="local",
                 run_dir=str(tmp_path / "run")) as c:
        assert len(c.targets) == 2
    record = run_json(tmp_path / "run")
    assert record["outcome"]["status"] == "succeeded"
    assert_every_attempt_ended(record)


# A TensorFlow that takes its time to import (as on a loaded agent: ~5 s
# of CPU), first on the tasks' PYTHONPATH (their submitter's sys.path); it
# notes a SIGTERM (the teardown's) in the file named by its argument.
SLOW_TENSORFLOW = """import os, signal, time
def _terminated(signum, frame):
    open(%r, "w").close()
    os._exit(143)
signal.signal(signal.SIGTERM, _terminated)
time.sleep(300)
"""


def test_a_block_that_ends_while_its_servers_import_tensorflow_ends_them_at_once(
        tmp_path, monkeypatch):
    """A fine-grained task told to stop while TensorFlow was still loading
    went on loading it: the block's end waited the stop's whole grace
    (~6.5 s), then the teardown killed the task, and the CPU of an import
    nobody would use was spent. It now ends at once, by itself."""
    slow, terminated = tmp_path / "slow", tmp_path / "terminated"
    (slow / "tensorflow").mkdir(parents=True)
    (slow / "tensorflow" / "__init__.py").write_text(SLOW_TENSORFLOW % str(terminated))
    monkeypatch.syspath_prepend(str(slow))
    with cluster([dict(name="ps", num=1, **SMALL)], master="local",
                 run_dir=str(tmp_path / "run")) as c:
        assert c.targets
    record = run_json(tmp_path / "run")
    assert record["outcome"]["status"] == "succeeded"
    assert_every_attempt_ended(record)
    assert_no_task_processes()
    assert not terminated.exists(), "the task was still importing TensorFlow at the teardown"


# A cluster() whose block is still open when the script ends: in a generator
# never closed, and entered without an exit.
LEFT_OPEN = """
import sys
import tfmesos
JOBS = [{"name": "worker", "num": 1, "cpus": 0.2, "mem": 1024}]

def clusters():
    with tfmesos.cluster(JOBS, master="local", run_dir=sys.argv[1]) as c:
        yield c

generator = clusters()
print("open", next(generator).spec, flush=True)
manager = tfmesos.cluster(JOBS, master="local", run_dir=sys.argv[2])
print("open", manager.__enter__().spec, flush=True)
# Entered with no name kept for the manager: the Cluster keeps it (and
# its run) alive. The garbage collector closed the generator under it: the
# run was stopped there and then, recorded "succeeded", and the Cluster
# the caller held named servers that were gone.
entered = tfmesos.cluster(JOBS, master="local", run_dir=sys.argv[3]).__enter__()
import gc
gc.collect()
print("open", entered.spec, "finished:", entered.finished(), flush=True)
"""


def test_a_cluster_still_open_when_the_program_exits_is_stopped_as_it_exits(tmp_path):
    """A cluster() left open at the end of the program was stopped only as
    the interpreter finalized (the generator closed then): the embedded
    master's calls timed out and its stop hung for ever in Thread.start,
    run.json said "running". It is now stopped at exit, as submit's runs are."""
    script = tmp_path / "left_open.py"
    script.write_text(LEFT_OPEN)
    runs = [str(tmp_path / "generator"), str(tmp_path / "entered"), str(tmp_path / "unnamed")]
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, str(script)] + runs, stdout=stdout,
                                stderr=stderr, env=dict(os.environ, MESOS_MASTER="",
                                                        PYTHONPATH=REPO, PYTHONFAULTHANDLER="1"))
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)   # faulthandler: where it hung, in err
    finally:
        if proc.poll() is None:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    said = err.read_text()
    assert proc.returncode == 0, said[-6000:]
    assert out.read_text().count("open {'worker'") == 3
    assert "finished: False" in out.read_text(), out.read_text()
    assert "Traceback" not in said and "Exception ignored" not in said, said
    for run_dir in runs:
        record = finished_record(run_dir)
        assert record is not None, "%s: run.json not finished" % run_dir
        assert record["outcome"]["status"] == "interrupted", record["outcome"]
        assert "still open" in record["outcome"]["message"]
        assert_every_attempt_ended(record)
    assert_no_task_processes()


# A process forked inside the block whose child ends (sys.exit): the child
# stops nothing of its parent's run, says nothing, and ends at once.
FORKED = FORK_A_CHILD_THAT_EXITS + """
import sys
import tfmesos
JOBS = [{"name": "worker", "num": 1, "cpus": 0.2, "mem": 1024}]
with tfmesos.cluster(JOBS, master="local", run_dir=sys.argv[1]) as c:
    fork_a_child_that_exits(sys.argv[2])
    c.check()
    print("parent: finished=%s failure=%r" % (c.finished(), c.failure), flush=True)
"""


def test_a_child_forked_in_the_block_leaves_the_parent_s_run_alone(tmp_path):
    """A forked child's exit ran cluster()'s finally on the parent's run:
    it shut the parent's rendezvous, tore its framework down (the parent
    failed with RunKilled) and hung in the master's server shutdown."""
    script = tmp_path / "forked.py"
    script.write_text(FORKED)
    run_dir, child_said = tmp_path / "run", tmp_path / "child_said"
    done = subprocess.run([sys.executable, str(script), str(run_dir), str(child_said)],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, MESOS_MASTER="", PYTHONPATH=REPO))
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert "the child ended" in done.stdout, done.stdout
    assert "parent: finished=False failure=None" in done.stdout, done.stdout
    assert child_said.read_text() == ""
    record = finished_record(str(run_dir))
    assert record is not None and record["outcome"]["status"] == "succeeded", record
    assert_no_task_processes()


def test_original_signature_and_unsupported_options_are_clear():
    import inspect
    params = list(inspect.signature(cluster).parameters)
    assert params[:13] == ["jobs", "master", "name", "quiet", "volumes", "local_task",
                           "extra_config", "protocol", "env", "role", "containerizer_type",
                           "force_pull_image", "forward_addresses"]
    from tfmesos import SpecError
    with pytest.raises(SpecError, match="protocol 'grpc\\+verbs' is not supported"):
        with cluster([{"name": "worker"}], protocol="grpc+verbs"):
            pass
    with pytest.raises(SpecError, match="local_task of the original TFMesos is not supported"):
        with cluster([{"name": "worker"}], local_task=("worker", 0)):
            pass
    with pytest.raises(SpecError, match="invalid volume"):
        with cluster([{"name": "worker"}], volumes={"relative": "/data"}):
            pass


def test_a_cluster_runs_its_block_once(tmp_path):
    """A second ``with`` on what cluster() returned is one ClusterError
    naming what to do (it was contextlib's AttributeError: args)."""
    from tfmesos import ClusterError
    c = cluster([dict(name="ps", num=1, **SMALL)], master="local",
                run_dir=str(tmp_path / "run"))
    with c as running:
        with pytest.raises(ClusterError) as nested:
            with c:
                pass
        assert str(nested.value) == (
            "this tfmesos.cluster(...) is running its with block already; make a new "
            "tfmesos.cluster(...) for another run")
        assert running.spec["ps"]
    with pytest.raises(ClusterError) as again:
        with c:
            pass
    assert str(again.value) == ("this tfmesos.cluster(...) has run its with block; make a "
                                "new tfmesos.cluster(...) for another run")


def test_a_cluster_that_could_not_start_cannot_be_entered_again():
    from tfmesos import ClusterError, SpecError
    c = cluster([{"name": "worker"}], protocol="grpc+verbs")
    with pytest.raises(SpecError):
        with c:
            pass
    with pytest.raises(ClusterError, match=r"has run its with block; make a new "):
        with c:
            pass


class _NoSuchEvent:
    """An event kind without a handler: a bug, never dropped silently."""


@pytest.mark.parametrize("bug", ["unknown event", "illegal phase move"])
def test_a_bug_in_handling_events_fails_the_with_block_within_seconds(tmp_path, bug):
    from tfmesos.core.phase import Phase
    from tfmesos.exceptions import ClusterError

    jobs = [dict(name="ps", num=1, **SMALL)]
    expected = "KeyError" if bug == "unknown event" else "IllegalTransition"
    with pytest.raises(ClusterError, match="tfmesos failed handling the run's events: %s"
                       % expected):
        with cluster(jobs, master="local", run_dir=str(tmp_path / "run")) as c:
            run = c._run
            if bug == "illegal phase move":
                run.reactions._handlers[_NoSuchEvent] = lambda event: run.state.move(Phase.NEW)
            run.events.put(_NoSuchEvent())
            started = time.monotonic()
            while not c.finished() and time.monotonic() - started < 10:
                time.sleep(0.05)
            assert c.finished(), "the watcher did not notice within 10 s"
            c.check()
    assert run_json(str(tmp_path / "run"))["outcome"]["status"] == "failed"
