"""Whole frameworks written with pymesos 0.3.15 (douban/pymesos, unchanged),
each run as a process of its own (``pymesos_framework.py``) against the
embedded master: its ``MesosSchedulerDriver`` with its own executor
(``pymesos_executor.py``, pymesos' ``MesosExecutorDriver``) exchanging
framework messages (against a ``LocalMaster``), a task group on that
executor, and a task group on Mesos' default executor (LAUNCH_GROUP through
pymesos' ``acceptOffers``) against ``mesos-local`` the command.

pymesos needs http-parser, whose C extension does not build on Python 3.11
(pymesos issue #130): scripts/test.sh unpacks both, never installed, where
TFMESOS_TEST_PYMESOS names; where it is set, a missing import fails the test.
"""

import json
import os
import subprocess
import sys

import pytest
from conftest import MARKER
from fixtures_master import leftover_processes, make_local_master, pymesos_path
from waiting import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))


def run_framework(address, pymesos_path, *args, timeout=60):
    """Runs pymesos_framework.py against the master at ``address``
    (host:port, as pymesos takes it) to its end: (exit status, its
    callbacks as dicts, stderr)."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        pymesos_path + [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p])
    process = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "pymesos_framework.py"), address, *args,
         "--timeout", str(timeout - 15)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError("pymesos framework hung:\n%s\n%s" % (out, err[-4000:])) from None
    return process.returncode, [json.loads(line) for line in out.splitlines()], err


def states(callbacks, task_id):
    return [c["state"] for c in callbacks
            if c["callback"] == "statusUpdate" and c["task_id"] == task_id]


def wait_torn_down(master, framework_id, timeout=30):
    """The framework among the master's completed ones, its executors gone."""
    def torn_down():
        state = master.state()
        return (not state["frameworks"] and framework_id in [
            f["id"] for f in state["completed_frameworks"]]) and state
    return wait_until(torn_down, timeout, message=lambda: "framework %s not torn down: %s" % (
        framework_id, master.state()))


def wait_gone(master):
    """No process of the master's tasks and executors left."""
    wait_until(lambda: not leftover_processes(master),
               message=lambda: "left over: %s" % leftover_processes(master))


def test_pymesos_framework_with_its_own_executor(make_local_master, pymesos_path):
    master = make_local_master()
    executor = "%s %s" % (sys.executable, os.path.join(HERE, "pymesos_executor.py"))
    code, callbacks, err = run_framework(master.url.split("://", 1)[1], pymesos_path,
                                         "executor", executor, "--operator")
    assert code == 0, (callbacks, err[-4000:])
    assert callbacks[0] == {"callback": "operator.connected", "connected": True}
    registered = next(c for c in callbacks if c["callback"] == "registered")
    # pymesos reads the master's /version (scheduler.py _get_version)
    assert registered["master_info"]["version"] == master.state()["version"]
    assert states(callbacks, "a") == ["TASK_RUNNING", "TASK_FINISHED"]
    assert states(callbacks, "b") == ["TASK_RUNNING", "TASK_KILLED"]
    updates = [c for c in callbacks if c["callback"] == "statusUpdate"]
    assert all(c["source"] == "SOURCE_EXECUTOR" and c["has_uuid"] for c in updates)
    messages = [c for c in callbacks if c["callback"] == "frameworkMessage"]
    assert [(m["executor_id"], m["data"]) for m in messages] == [("pm", "echo hi")]
    assert not [c for c in callbacks if c["callback"] in ("error", "executorLost", "slaveLost")]
    assert callbacks[-1] == {"callback": "stopped", "finished": True, "failed": False}
    # pymesos' MesosOperatorMasterDriver, subscribed all along, saw it all
    framework_id = registered["framework_id"]
    seen = [(c["callback"][len("operator."):], c.get("task_id") or c.get("framework_id"),
             c.get("state")) for c in callbacks if c["callback"].startswith("operator.")]
    assert [s for s in seen if s[0] != "taskUpdated"] == [
        ("connected", None, None), ("frameworkAdded", framework_id, None),
        ("taskAdded", "a", "TASK_STAGING"), ("taskAdded", "b", "TASK_STAGING"),
        ("frameworkRemoved", framework_id, None)]
    for task_id, states_ in (("a", ["TASK_RUNNING", "TASK_FINISHED"]),
                             ("b", ["TASK_RUNNING", "TASK_KILLED"])):
        assert [s[2] for s in seen if s[:2] == ("taskUpdated", task_id)] == states_
    # and its read calls, and MesosOperatorAgentDriver's at the agent's pid
    calls = next(c["results"] for c in callbacks if c["callback"] == "operatorCalls")
    assert len(calls) == 26 and all(r.startswith("ok ") for r in calls.values()), calls
    assert calls["master.getAgents"] == "ok GET_AGENTS agents=1"
    assert calls["master.getTasks"] == calls["agent.getTasks"] == "ok GET_TASKS tasks=a,b"
    assert calls["agent.getExecutors"] == "ok GET_EXECUTORS executors=pm"
    assert calls["agent.listFiles"] == "ok LIST_FILES files=stderr,stdout"
    # pymesos' stop() sent TEARDOWN: the framework is gone and so is its executor.
    state = wait_torn_down(master, registered["framework_id"])
    done = state["completed_frameworks"][0]
    assert sorted(t["id"] for t in done["completed_tasks"]) == ["a", "b"]
    wait_gone(master)


def test_pymesos_framework_sends_a_task_group_to_its_own_executor(make_local_master,
                                                                   pymesos_path):
    """LAUNCH_GROUP on a custom executor: pymesos' MesosExecutorDriver hands
    the group to its ``launchTaskGroup``, whose tasks both finish."""
    master = make_local_master()
    executor = "%s %s" % (sys.executable, os.path.join(HERE, "pymesos_executor.py"))
    code, callbacks, err = run_framework(master.url.split("://", 1)[1], pymesos_path,
                                         "executor-group", executor)
    assert code == 0, (callbacks, err[-4000:])
    for task_id in ("g1", "g2"):
        assert states(callbacks, task_id) == ["TASK_RUNNING", "TASK_FINISHED"]
    registered = next(c for c in callbacks if c["callback"] == "registered")
    wait_torn_down(master, registered["framework_id"])
    wait_gone(master)


@pytest.fixture
def mesos_local_command(tmp_path):
    """``mesos-local`` the command (``python -m mesos_local``) on a free
    port: its host:port; terminated (SIGTERM, as Ctrl-C) at the end. Its
    stderr goes to a file (a pipe read only at the end would block it once
    it wrote 64 KiB)."""
    stderr_path = tmp_path / "mesos-local.stderr"
    with open(stderr_path, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "mesos_local", "--port", "0", "--no-docker", "--cpus", "2",
             "--mem", "1024", "--gpus", "0", "--heartbeat-interval", "0.5",
             "--work-dir", str(tmp_path / "work"), "--log-level", "warning",
             "--executor-environment-variables", json.dumps({MARKER: os.environ[MARKER]})],
            stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("local Mesos master listening on "), (
            line, stderr_path.read_text(errors="replace")[-4000:])
        yield line.split()[-1].split("://", 1)[-1].rstrip("/")
    finally:
        process.terminate()
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
    assert process.returncode == 0, stderr_path.read_text(errors="replace")


def test_pymesos_framework_launches_a_task_group(mesos_local_command, pymesos_path):
    """"reader" finishes only once it read what "writer" wrote into their
    shared volume."""
    code, callbacks, err = run_framework(mesos_local_command, pymesos_path, "group")
    assert code == 0, (callbacks, err[-4000:])
    for task_id in ("writer", "reader"):
        assert states(callbacks, task_id) == ["TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"]
    # Mesos' default executor ends with its last task: FAILURE with status 0
    assert [(c["executor_id"], c["status"]) for c in callbacks
            if c["callback"] == "executorLost"] == [("group", 0)]
    assert callbacks[-1] == {"callback": "stopped", "finished": True, "failed": False}
