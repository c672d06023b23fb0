"""A LAUNCH whose answer never comes (the call timed out: a loaded master, a
slow network) may still have been carried out. Its tasks stay the run's
attempts and Mesos is asked of them, so that the run neither drops their
registrations (and waits for them in vain) nor leaves them running unseen:
a run of 210 tasks once hung so, 29 tasks short, on a loaded machine."""

import time

import pytest
from fixtures_master import make_local_master
from policy_helpers import RealRun
from run_dirs import bare_environ

from tfmesos.core.jobs import Job
from tfmesos.core.launch import ClusterRun
from tfmesos.core.spec import RunSpec
from tfmesos.exceptions import TaskFailed
from tfmesos.mesos import driver as mesos_driver
from tfmesos.mesos.task_states import TERMINAL_STATES


def reconciled(real):
    return [item["task_id"]["value"] for call in real.mock.calls_of("RECONCILE")
            for item in call["reconcile"].get("tasks", [])]


def test_tasks_of_an_unanswered_launch_that_arrived_register_and_the_cluster_forms():
    real = RealRun([Job("worker", num=2)], unanswered_launch=True)
    try:
        ids = [slot.task_id for slot in real.slots]
        assert ids == ["tfmesos.%s.worker.%d.1" % (real.run.run_id, i) for i in range(2)]
        assert sorted(reconciled(real)) == sorted(ids)   # Mesos is asked of them at once
        real.running()   # their registrations are taken: the cluster forms
        assert [slot.attempts for slot in real.slots] == [1, 1]
        assert len(real.mock.calls_of("ACCEPT")) == 1   # not launched twice
    finally:
        real.close()


def test_tasks_of_an_unanswered_launch_that_never_arrived_are_launched_again():
    real = RealRun([Job("worker", num=2)], unanswered_launch=False)
    try:
        assert real.mock.calls_of("ACCEPT") == []
        for slot in real.slots:   # Mesos' answer to the reconciliation
            real.update(slot.name, "TASK_LOST", "Reconciliation: Task is unknown",
                        reason="REASON_RECONCILIATION")
        assert [slot.state for slot in real.slots] == ["PENDING", "PENDING"]
        real.offer()
        for slot in real.slots:
            real._wait(lambda slot=slot: slot.attempts == 2, "%s launched again" % slot.name)
        real.running()
        assert len(real.mock.calls_of("ACCEPT")) == 1
    finally:
        real.close()



def test_launches_mesos_never_got_do_not_use_up_the_task_s_attempts():
    """A master that keeps timing out: each lost launch is launched again,
    more often than ``max_attempts`` (3) allows failures; an attempt Mesos
    knew of (it ran, then failed) counts as ever."""
    real = RealRun([Job("worker", num=1)], unanswered_launch=False)
    try:
        for attempt in range(1, 6):
            slot = real.slots[0]
            assert slot.attempts == attempt
            real.update("worker:0", "TASK_LOST", "Reconciliation: Task is unknown",
                        reason="REASON_RECONCILIATION")
            assert real.phase == "forming" and slot.state == "PENDING"
            real.mock.lose_answer("ACCEPT", arrives=False)
            real.offer()
            real._wait(lambda slot=slot, attempt=attempt: slot.attempts == attempt + 1,
                       "launched again")
        assert real.slots[0].attempts - real.slots[0].base == 1   # none counted but this one
        for _ in range(2):   # launched, then failed: these count
            real.update("worker:0", "TASK_RUNNING")
            real.update("worker:0", "TASK_LOST", "Reconciliation: Task is unknown",
                        reason="REASON_RECONCILIATION")
            real.offer()
            real._wait(lambda: real.slots[0].state != "PENDING", "launched again")
        real.update("worker:0", "TASK_RUNNING")
        with pytest.raises(TaskFailed, match="worker:0 failed 3 times before the cluster"):
            real.update("worker:0", "TASK_LOST", "Reconciliation: Task is unknown",
                        reason="REASON_RECONCILIATION")
    finally:
        real.close()

def test_an_attempt_mesos_said_was_lost_that_runs_after_all_is_killed_not_taken():
    """Mesos answered the reconciliation with TASK_LOST, then carried the
    launch out after all: that attempt is a replaced one, killed; the slot
    still waits for its new attempt."""
    real = RealRun([Job("worker", num=1)], unanswered_launch=False)
    try:
        first = real.slots[0].task_id
        real.update("worker:0", "TASK_LOST", "Reconciliation: Task is unknown",
                    reason="REASON_RECONCILIATION")
        real.update("worker:0", "TASK_RUNNING", task_id=first)
        assert [call["kill"]["task_id"]["value"] for call in real.mock.calls_of("KILL")] \
            == [first]
        assert (real.slots[0].state, real.slots[0].task_id) == ("PENDING", None)
    finally:
        real.close()

class LateAccepts:
    """The embedded master takes each ACCEPT ``delay`` seconds after it came
    (a master too loaded to get to it in time): the driver has given up on
    the answer by then."""

    def __init__(self, master, delay):
        self.calls = 0
        handle = master._calls.handle

        def late(call, stream_id, principal=None):
            if call.get("type") == "ACCEPT":
                self.calls += 1
                if self.calls == 1:
                    time.sleep(delay)
            return handle(call, stream_id, principal)
        master._calls.handle = late


def live_tasks(master):
    state = master.state()
    return [task["id"] for framework in state["frameworks"] + state["completed_frameworks"]
            for task in framework["tasks"] if task["state"] not in TERMINAL_STATES]


@pytest.mark.integration
@pytest.mark.waits
def test_a_launch_the_embedded_master_carries_out_after_the_driver_gave_up_on_it(
        make_local_master, monkeypatch):
    """The embedded master, real tasks. Mesos, asked at once, does not know
    the tasks yet (TASK_LOST): they are launched again; the first attempts,
    launched later, are killed as replaced attempts. The cluster forms, runs
    its command and ends; nothing is left running. (Before: the late tasks'
    registrations were refused, and the run waited until its launch timeout.)"""
    master = make_local_master()
    late = LateAccepts(master, delay=2.0)
    monkeypatch.setattr(mesos_driver, "CALL_TIMEOUT", 0.5)
    run = ClusterRun(RunSpec(jobs=[Job("worker", num=2, cpus=0.1, mem=64)],
                             launch_timeout=30, mode="replica", command="true",
                             master=master.url), environ=bare_environ())
    try:
        run.start()
        run.wait_ready()
        assert run.wait_finished() == 0
        # Launched again once Mesos said it did not know them ([2, 2]); on a
        # loaded machine Mesos may be asked only after the late launch ran
        # ([1, 1]): either way each slot ran one attempt to its end.
        assert [slot.attempts for slot in run.slots] in ([2, 2], [1, 1], [1, 2], [2, 1])
        assert late.calls >= 1
    finally:
        run.stop()
    assert live_tasks(master) == []


# -- the scheduler task of a detached run (tfrun --detach, tfmesos attach) ------------

def _launcher_on_mock(arrives):
    from offers import offer

    from tfmesos.core.scheduler_task import SchedulerLauncher
    from tfmesos.mesos import MesosSchedulerDriver
    from tfmesos.mesos.mock_transport import MockTransport

    mock = MockTransport()
    if arrives is None:   # the launch is answered, the suppression after it is not
        mock.lose_answer("SUPPRESS")
    else:
        mock.lose_answer("ACCEPT", arrives=arrives)
    launcher = SchedulerLauncher(
        lambda assignment, framework: {"task_id": {"value": "tfmesos.r1.scheduler.1"},
                                       "agent_id": {"value": assignment.agent_id}}, 0.1, 64)
    driver = MesosSchedulerDriver(launcher, {"user": "u", "name": "n"}, "mock-master:5050",
                                  transport=mock)
    driver.start()
    mock.offer(offer("o1", agent="agent-1"))
    return mock, launcher, driver


def _update(mock, state, **fields):
    mock.update({"task_id": {"value": "tfmesos.r1.scheduler.1"}, "state": state,
                 "agent_id": {"value": "agent-1"}, "source": "SOURCE_MASTER", **fields})


def test_a_scheduler_task_whose_launch_went_unanswered_is_asked_of_not_given_up():
    mock, launcher, driver = _launcher_on_mock(arrives=True)
    try:
        deadline = time.monotonic() + 10
        while not mock.calls_of("RECONCILE") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [item["task_id"]["value"] for item in mock.calls_of("RECONCILE")[0]["reconcile"]
                ["tasks"]] == ["tfmesos.r1.scheduler.1"]
        _update(mock, "TASK_RUNNING")
        assert launcher.events.get(timeout=10) == ("running",)   # not ("error", ...)
    finally:
        driver.abort()


def test_a_scheduler_task_s_suppress_without_an_answer_does_not_end_the_launch():
    """Its launch went out; the SUPPRESS after it got no answer (the master
    is slow or gone a moment): the task runs and takes over all the same."""
    mock, launcher, driver = _launcher_on_mock(arrives=None)
    try:
        _update(mock, "TASK_RUNNING")
        assert launcher.events.get(timeout=10) == ("running",)   # not ("error", ...)
    finally:
        driver.abort()


def test_a_scheduler_task_mesos_never_got_ends_the_launch_with_mesos_word():
    mock, launcher, driver = _launcher_on_mock(arrives=False)
    try:
        _update(mock, "TASK_LOST", message="Reconciliation: Task is unknown",
                reason="REASON_RECONCILIATION")
        assert launcher.events.get(timeout=10) == (
            "ended", "TASK_LOST", "Reconciliation: Task is unknown")
    finally:
        driver.abort()


# -- asking for offers again while the master cannot be reached ---------------------------

@pytest.mark.parametrize("failure", ["no answer", "503"])
def test_a_relaunch_whose_revive_fails_waits_and_asks_again_not_fails_the_run(failure):
    """A task ended before the cluster was complete while the master could
    not be reached (its REVIVE timed out, or the driver was re-subscribing):
    the run waited on, asked again with its periodic reconciliation, and
    launched the task when offers came. Before, the REVIVE's error left the
    run's loop: the whole run failed with a MesosConnectionError."""
    from tfmesos.core.reactions import RECONCILE_INTERVAL

    real = RealRun([Job("worker", num=2)])
    try:
        if failure == "503":   # a master that does not lead (src/master/http.cpp)
            real.mock.refuse("REVIVE", 503, "Not the leading master")
        else:
            real.mock.lose_answer("REVIVE", arrives=False)
        real.update("worker:0", "TASK_FAILED", "Command exited with status 1")
        assert real.phase == "forming" and real.state.failure is None
        assert real.slots[0].state == "PENDING" and real.mock.calls_of("REVIVE") == []
        real.mock.answer("REVIVE")
        real.later(RECONCILE_INTERVAL + 1)
        assert len(real.mock.calls_of("REVIVE")) == 1   # asked again
        real.later(RECONCILE_INTERVAL + 1)
        assert len(real.mock.calls_of("REVIVE")) == 1   # once is enough
        real.offer()
        real._wait(lambda: real.slots[0].attempts == 2, "worker:0 launched again")
        real.update("worker:0", "TASK_RUNNING")
        real.running()
    finally:
        real.close()


def test_a_revive_that_failed_is_carried_by_the_next_subscription():
    """The driver's next SUBSCRIBE says which roles are suppressed: a REVIVE
    that could not be sent must not leave its roles there, or a
    re-subscribed framework would get no offer at all."""
    from tfmesos.exceptions import MesosCallError
    from tfmesos.mesos import MesosSchedulerDriver, Scheduler
    from tfmesos.mesos.mock_transport import MockTransport

    mock = MockTransport()
    driver = MesosSchedulerDriver(Scheduler(), {"user": "u", "name": "n"}, "mock-master:5050",
                                  transport=mock)
    driver.start()
    try:
        deadline = time.monotonic() + 10
        while not driver.connected and time.monotonic() < deadline:
            time.sleep(0.01)
        driver.suppressOffers()
        assert mock._opened().suppressed_roles == {"*"}
        mock.refuse("REVIVE", 403, "Framework is not subscribed")
        with pytest.raises(MesosCallError):
            driver.reviveOffers()
        assert mock._opened().suppressed_roles == set()
    finally:
        driver.abort()
