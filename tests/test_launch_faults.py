"""The launcher's failure policy under faults of the driver and of the
rendezvous: a failing scheduler callback, a task whose rendezvous connection
drops or stalls (and comes back, or does not), Mesos' word of a task's end
coming before the task's own last frames are read."""

import threading
import time

import pytest
from fixtures_master import make_local_master
from run_dirs import bare_environ

from tfmesos.core import rendezvous, runtime, scheduler
from tfmesos.core.events import TaskDisconnected, TaskRegistered
from tfmesos.core.jobs import Job
from tfmesos.core.launch import ClusterRun
from tfmesos.core.spec import RunSpec
from tfmesos.exceptions import ClusterError, DriverAborted, TaskFailed, TFMesosError
from tfmesos.mesos.task_states import TERMINAL_STATES

TINY = dict(cpus=0.1, mem=64)


def test_failing_callback_aborts_the_run_at_once_and_tears_the_framework_down(
        make_local_master, monkeypatch):
    master = make_local_master()
    problem = TFMesosError("cannot tell which local address tasks can reach")

    def broken_build_task(*args, **kwargs):
        raise problem
    monkeypatch.setattr(runtime, "build_task", broken_build_task)
    run = ClusterRun(RunSpec(jobs=[Job("worker", **TINY)], launch_timeout=120, mode="replica",
                             command="true", master=master.url), environ=bare_environ())
    try:
        run.start()
        started = time.monotonic()
        with pytest.raises(ClusterError, match="failed handling OFFERS: TFMesosError: cannot "
                                               "tell which local address") as raised:
            run.wait_ready()
        assert time.monotonic() - started < 30   # at once, not at the launch timeout (120 s)
        # The run failed because the driver aborted, because the callback raised.
        assert isinstance(raised.value.__cause__, DriverAborted)
        assert raised.value.__cause__.__cause__ is problem
        framework_id = run.scheduler.framework_id
    finally:
        run.stop()
    # TEARDOWN reached the master: the framework is gone now, not after its
    # failover timeout.
    state = master.state()
    assert framework_id in [f["id"] for f in state["completed_frameworks"]]
    assert framework_id not in [f["id"] for f in state["frameworks"]]


def _running(command, grace):
    run = ClusterRun(RunSpec(jobs=[Job("worker", **TINY)], launch_timeout=60, mode="replica",
                             command=command, master="local", reconnect_grace=grace),
                     environ=bare_environ())
    run.start()
    run.wait_ready()
    return run, run.slots[0]


def test_a_task_that_stays_away_from_the_rendezvous_fails_the_run():
    run, slot = _running("sleep 20", grace=1.0)
    try:
        run.events.put(TaskDisconnected(slot.task_id))
        started = time.monotonic()
        with pytest.raises(TaskFailed, match="worker:0 lost its connection to the scheduler "
                                             "and did not come back within 1 s"):
            run.wait_finished()
        assert 1.0 <= time.monotonic() - started < 15   # before the task's sleep 20 ends
    finally:
        run.stop()


@pytest.mark.waits
def test_a_task_that_comes_back_within_the_grace_period_keeps_running():
    run, slot = _running("sleep 3", grace=1.5)
    try:
        run.events.put(TaskDisconnected(slot.task_id))
        run.events.put(TaskRegistered(slot.task_id, "127.0.0.1", 1))
        assert run.wait_finished() == 0
    finally:
        run.stop()


def test_a_stalled_task_fails_the_grace_period_after_it_was_last_heard():
    run, slot = _running("sleep 30", grace=8.0)
    try:
        started = time.monotonic()
        run.events.put(TaskDisconnected(slot.task_id, since=started - 7.0, reason="stalled"))
        with pytest.raises(TaskFailed, match=r"^task worker:0 unreachable for 8 s \(its "
                                             r"rendezvous connection stalled\)$"):
            run.wait_finished()
        # Counted from when it was last heard (7 s before), not from the event.
        assert time.monotonic() - started < 7.0
    finally:
        run.stop()



def test_a_failed_task_s_last_output_comes_before_its_failure_when_mesos_tells_first(
        monkeypatch):
    # A loaded machine: Mesos' TASK_FAILED reaches the driver before the
    # rendezvous reads the task's last frames. Here the relay reads nothing
    # until that update went through the scheduler.
    told = threading.Event()
    status_update, relay = scheduler.TFMesosScheduler.statusUpdate, rendezvous.Rendezvous._relay

    def told_first(self, driver, update):
        status_update(self, driver, update)
        if update.state in TERMINAL_STATES:
            told.set()

    def relay_once_told(self, link):
        told.wait(120)
        relay(self, link)
    monkeypatch.setattr(scheduler.TFMesosScheduler, "statusUpdate", told_first)
    monkeypatch.setattr(rendezvous.Rendezvous, "_relay", relay_once_told)
    # No bound cuts the wait short (raising=False: the test runs on a tree without it too).
    monkeypatch.setattr(rendezvous, "REPORTS_WAIT", 120.0, raising=False)
    shown = []
    run = ClusterRun(RunSpec(jobs=[Job("worker", **TINY)], launch_timeout=60, mode="replica",
                             command="echo 'ValueError: boom' >&2; exit 1", master="local"),
                     environ=bare_environ(), on_log=lambda slot, stream, text: shown.append(text))
    try:
        run.start()
        run.wait_ready()
        with pytest.raises(TaskFailed, match="^task worker:0 exited with code 1$"):
            run.wait_finished()
        assert told.is_set()
        # What the task said was shown before its failure was told.
        assert "ValueError: boom\n" in shown
    finally:
        told.set()   # a relay still waiting reads on: nothing waits 120 s after a failure
        run.stop()
