"""One contract, two runs: the failure scenarios of tests/test_failure_policy.py
driven through the policy's fake run (``FakeRun``: the real state and
control, recorded effects) and through a real ``ClusterRun`` whose driver
talks to an in-memory master (``RealRun``: ``MockTransport``, no master, no
tasks). Both must end in the same state: what the fake tests of the policy
say holds for the run users get."""

import pytest
from policy_helpers import GRACE, MAX_ATTEMPTS, FakeRun, RealRun

from tfmesos.core.events import TaskDisconnected
from tfmesos.core.jobs import Job
from tfmesos.core.phase import ENDING, Phase
from tfmesos.core.restarts import RestartPolicy
from tfmesos.exceptions import ClusterError, TaskFailed

WORKERS = [Job("worker", num=2, cpus=1, mem=256)]


@pytest.fixture(params=[FakeRun, RealRun], ids=["fake", "real"])
def make_run(request):
    runs = []

    def make(*args, **kwargs):
        run = request.param(*args, **kwargs)
        runs.append(run)
        return run
    yield make
    for run in runs:
        close = getattr(run, "close", None)
        if close is not None:
            close()


def slot_view(run):
    return [(s.name, s.state, s.attempts, s.base, s.task_id is None, s.address is None, s.done)
            for s in run.slots]


def test_a_task_ending_before_the_cluster_is_complete_is_relaunched(make_run):
    run = make_run(WORKERS)
    run.status("worker:1", "TASK_FAILED", "Command exited with status 1")
    assert run.phase == Phase.FORMING and run.state.failure is None
    assert [(s.name, s.state, s.attempts) for s in run.slots] == [
        ("worker:0", "TASK_RUNNING", 1), ("worker:1", "PENDING", 1)]


def test_its_attempts_spent_the_run_fails_and_the_waiting_thread_raises(make_run):
    run = make_run(WORKERS)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if attempt > 1:
            relaunch(run, "worker:1")
        if attempt < MAX_ATTEMPTS:
            run.status("worker:1", "TASK_FAILED", "Command exited with status 1")
    with pytest.raises(TaskFailed, match="worker:1 failed 3 times") as error:
        run.status("worker:1", "TASK_FAILED", "Command exited with status 1")
    assert run.state.failure is error.value and run.phase == Phase.FORMING


def relaunch(run, name):
    """A pending slot launched again (the fake by hand, the real run by an offer)."""
    slot = run.slots.named(name)
    if isinstance(run, FakeRun):
        run.launch(slot)
    else:
        run.offer()
        run._wait(lambda: slot.state == "TASK_STAGING", "%s relaunched" % name)
    run.slots.status(slot, "TASK_RUNNING", "", None)


def test_a_whole_restart_resets_every_slot_after_its_backoff(make_run):
    run = make_run(WORKERS, policy=RestartPolicy(1, "lost", backoff=2))
    run.running()
    run.status("worker:1", "TASK_LOST")
    assert run.phase == Phase.RESTARTING
    run.later(1.9)
    assert run.phase == Phase.RESTARTING
    run.later(0.2)
    assert run.phase == Phase.RESTARTING     # worker:0, told to stop, has not ended yet
    run.status("worker:0", "TASK_FINISHED")
    run.later(0)
    assert run.phase == Phase.FORMING
    assert slot_view(run) == [("worker:0", "PENDING", 1, 1, True, True, False),
                              ("worker:1", "PENDING", 1, 1, True, True, False)]


def test_a_failure_once_running_fails_the_run_and_a_later_one_changes_nothing(make_run):
    run = make_run(WORKERS, policy=RestartPolicy(1, "lost"))
    run.running()
    with pytest.raises(TaskFailed, match="task worker:1 exited with code 3") as error:
        run.exit("worker:1", 3)
    first = error.value
    with pytest.raises(TaskFailed) as again:
        run.status("worker:0", "TASK_LOST")          # would restart a running cluster
    assert again.value is first and run.state.failure is first
    assert run.phase == Phase.RUNNING                # a failed run only stops


def test_the_stop_wins_over_failures_and_restarts(make_run):
    run = make_run(WORKERS, policy=RestartPolicy(1, "lost"))
    run.running()
    run.stop()
    run.exit("worker:1", 3)
    run.status("worker:0", "TASK_LOST")
    run.later(GRACE + 1)
    assert run.phase in ENDING and run.state.failure is None
    assert all(slot.base == 0 for slot in run.slots)


def test_a_task_away_longer_than_the_grace_is_a_loss(make_run):
    run = make_run(WORKERS, policy=RestartPolicy(1, "lost"))
    run.running()
    run.handle(TaskDisconnected(run.slots.named("worker:0").task_id))
    run.later(GRACE - 1)
    assert run.phase == Phase.RUNNING
    run.later(2)
    assert run.phase == Phase.RESTARTING


def test_the_driver_giving_up_fails_the_run(make_run):
    run = make_run(WORKERS)
    if isinstance(run, FakeRun):
        from tfmesos.core.events import MesosFailed
        with pytest.raises(ClusterError, match="the Mesos driver stopped"):
            run.handle(MesosFailed("the mock master is gone"))
    else:
        run.mock.give_up()
        with pytest.raises(ClusterError, match="the Mesos driver stopped: .*mock master is gone"):
            run.handle_until(lambda event: False, "the driver's failure")
    assert isinstance(run.state.failure, ClusterError)


def test_a_failure_the_stop_sees_before_the_record_does_is_the_outcome():
    """cluster()'s watcher thread fails the run (``state.fail``) and only
    then records it; the caller, whose block ends as soon as the cluster
    is ``finished()``, may stop the run in between. The stop's outcome is
    the failure, never "succeeded" (test_cluster saw that on a loaded CI
    machine: a killed worker's run recorded as succeeded)."""
    run = RealRun(WORKERS, mode="fine")
    try:
        run.running()
        failure = TaskFailed("task worker:1 ended: TASK_KILLED", task="worker:1",
                             state="TASK_KILLED")
        run.run.state.fail(failure)      # the watcher's first half only
        run.stop()
        assert run.run.failure is failure
        assert (run.record.outcome_status, run.record.outcome_text()) == (
            "failed", "failed (worker:1): task worker:1 ended: TASK_KILLED")
    finally:
        run.close()


def test_a_run_whose_process_was_stopped_long_says_so_with_the_failure_that_followed():
    # Ctrl-Z for two minutes, then fg: the tasks, hearing nothing from tfrun
    # for 60 s, had stopped their commands; the run said only "task ps:0
    # exited with code 143" (143: a kill, by the README), no word of why
    # (found by a review helper).
    run = RealRun(WORKERS)
    try:
        run.running()
        run.later(0.5)
        assert run.run._pauses.note() is None
        run.clock.now += 110                  # this process did not run meanwhile
        with pytest.raises(TaskFailed) as caught:
            run.exit("worker:0", 143)
        run.run.record.ended(caught.value, "running")   # as the run's wait records it
        note = run.run._pauses.note()
        assert note == ("tfrun itself did not run for 110 s (stopped: Ctrl-Z, SIGSTOP?): a "
                        "task that hears nothing from its scheduler for 60 s stops its command")
        assert run.run.record.hint == note
    finally:
        run.close()


def hint_after_losing_the_master(code, found_again=False, later=0.0):
    """The hint of worker:0's exit ``code`` while the run's master is lost
    (``found_again``: it re-subscribed first)."""
    from tfmesos.core.events import MesosDisconnected, Subscribed
    run = RealRun(WORKERS)
    try:
        run.running()
        run.handle(MesosDisconnected())
        if found_again:
            run.handle(Subscribed(None, again=True))
        run.later(later)
        with pytest.raises(TaskFailed) as caught:
            run.exit("worker:0", code)
        run.run.record.ended(caught.value, "running")   # as the run's wait records it
        return run.run.record.hint or ""
    finally:
        run.close()


def test_a_failure_while_the_master_was_lost_says_so():
    # `tfmesos local-master` stopped (SIGTERM) under a run: its agent
    # stopped the tasks, and the run said only "task worker:0 exited with
    # code 143" (a kill, by the README; found by a review helper).
    assert hint_after_losing_the_master(143, later=3) == (
        "tfrun had lost its Mesos master (mock-master:5050) 3 s before and had not found it "
        "again: a tfmesos local-master that stops (Ctrl-C, SIGTERM) stops its tasks")
    # A command's own failure meanwhile is not the master's; found again,
    # the failure is the task's own.
    assert "lost its Mesos master" not in hint_after_losing_the_master(1)
    assert "lost its Mesos master" not in hint_after_losing_the_master(143, found_again=True)


def test_a_ps_that_exits_0_while_workers_run_is_said_when_a_worker_then_fails():
    # A ps serves until the run ends (TensorFlow's server.join()): one that
    # exited 0 mid-run went unmentioned, and the workers' failure that
    # followed came without its cause (found by a review helper).
    run = RealRun([Job("ps", num=1, cpus=1, mem=256)] + WORKERS)
    try:
        run.running()
        run.exit("ps:0", 0)
        assert run.notes == []
        with pytest.raises(TaskFailed):
            run.exit("worker:0", 1)
        assert run.notes == ["ps:0 had exited with code 0 while 2 workers ran: a ps task "
                             "serves until the run ends (TensorFlow's server.join()), so a "
                             "worker that needs it finds it gone"]
    finally:
        run.close()
    # Every task of a command that ends exits 0, the ps among the first
    # (tfrun -w 2 -s 1 -- true): nothing to say (it said that ps:0 "exited
    # with code 0 while 2 workers still run" after every such run).
    ended_well = RealRun([Job("ps", num=1, cpus=1, mem=256)] + WORKERS)
    try:
        ended_well.running()
        ended_well.exit("ps:0", 0)
        ended_well.exit("worker:0", 0)
        ended_well.exit("worker:1", 0)
        assert ended_well.notes == []
    finally:
        ended_well.close()
    stopped = RealRun([Job("ps", num=1, cpus=1, mem=256)] + WORKERS)
    try:                              # stopped by the run (a restart, its end): nothing to say
        stopped.running()
        from tfmesos.core.events import TaskExited
        slot = stopped.slots.named("ps:0")
        stopped.handle(TaskExited(slot.task_id, 0, stopped=True))
        assert stopped.notes == []
    finally:
        stopped.close()
    ended = RealRun([Job("ps", num=1, cpus=1, mem=256)] + WORKERS)
    try:                              # after the workers: nothing to say
        ended.running()
        ended.exit("worker:0", 0)
        ended.exit("worker:1", 0)
        assert ended.notes == []
    finally:
        ended.close()


def test_the_pause_said_is_the_one_the_failure_followed():
    # An early 300-s stop, then a 62-s one: the hint said 300 s (the
    # longest of the run; found by a review helper).
    from tfmesos.core.pauses import PauseWatch
    now = [0.0]
    watch = PauseWatch(lambda: now[0])
    for gap in (300.0, 1.0, 62.0):
        began = watch.step_began()
        now[0] += gap
        watch.step_ended(began, 0.0)
    assert watch.note().startswith("tfrun itself did not run for 62 s")
