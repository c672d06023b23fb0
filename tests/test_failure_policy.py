"""The failure policy of docs/architecture.md, row by row: ``RunEvents`` and
``Recovery`` acting on the real ``RunState`` and ``Control``, with effects
that only record (``policy_helpers``) and a fake clock — no master, no
tasks, no waiting. tests/test_run_contract.py runs scenarios of the same
kind against a real ``ClusterRun`` too."""

import re

import pytest
from addict import Dict
from policy_helpers import GRACE, MAX_ATTEMPTS, FakeRun
from run_dirs import bare_environ

from tfmesos.core.control import STOP_THEN_KILL
from tfmesos.core.events import (
    AgentLost,
    MesosFailed,
    StatusUpdate,
    TaskDisconnected,
    TaskRegistered,
)
from tfmesos.core.jobs import Job
from tfmesos.core.phase import IllegalTransition, Phase, next_phase
from tfmesos.core.reactions import GROUP_LEFT_GRACE
from tfmesos.core.restarts import RestartPolicy
from tfmesos.exceptions import ClusterError, RunKilled, SchedulerReplaced, TaskFailed

WORKERS = [Job("worker", num=2)]
PSS = [Job("chief"), Job("worker", num=2), Job("ps")]


def stopped(run):
    """The tasks the run told to stop, in order."""
    return [call[1] for call in run.calls if call[0] == "stop"]


def killed(run):
    """The task ids the run asked Mesos to kill, in order."""
    return [call[1] for call in run.calls if call[0] == "kill"]


def relaunched_everything(run):
    """A whole restart's launch: a new deadline and offers for every slot."""
    return run.calls[-2:] == [("deadline",), ("offers for",) + tuple(s.name for s in run.slots)]


# -- before the cluster is complete -----------------------------------------------------

def test_a_task_ending_before_the_cluster_is_complete_is_relaunched():
    run = FakeRun(WORKERS)
    run.status("worker:1", "TASK_FAILED", "Command exited with status 1")
    assert run.calls == [("offers for", "worker:1")]
    assert run.slots.named("worker:1").state == "PENDING"
    assert run.phase == Phase.FORMING


def test_its_attempts_spent_the_run_fails_naming_the_task_and_mesos_message():
    run = FakeRun(WORKERS)
    slot = run.slots.named("worker:1")
    for _ in range(MAX_ATTEMPTS - 1):
        run.status("worker:1", "TASK_FAILED", "Command exited with status 1")
        run.launch(slot)
    with pytest.raises(TaskFailed, match="worker:1 failed 3 times before the cluster was "
                                         "complete; last: TASK_FAILED: Command exited") as err:
        run.status("worker:1", "TASK_FAILED", "Command exited with status 1")
    assert err.value.exit_code == 1


@pytest.mark.parametrize("state, message, reason", [
    ("TASK_ERROR", "bad resources", "REASON_TASK_INVALID"),
    # an archive the local master's fetcher refuses (mesos_local archives.REFUSED)
    ("TASK_FAILED", "Failed to fetch 'http://h/tfenv.tar.gz': the local master's fetcher "
     "refuses this archive: member 'bin/python3' is a link to an absolute path",
     "REASON_CONTAINER_LAUNCH_FAILED"),
])
def test_a_failure_retrying_cannot_help_ends_the_run_at_once(state, message, reason):
    run = FakeRun(WORKERS)
    with pytest.raises(TaskFailed, match="worker:0 cannot be launched: %s: .*retrying cannot "
                                         "help" % state):
        run.status("worker:0", state, message, reason)
    assert run.calls == []


def test_a_task_away_from_the_rendezvous_before_the_cluster_is_complete_is_missing():
    run = FakeRun(WORKERS)
    slot = run.slots.named("worker:0")
    run.slots.registered(slot, "h:1")
    run.handle(TaskDisconnected(slot.task_id))
    assert slot.address is None
    run.later(GRACE + 1)          # Mesos' report of its end decides, not the grace
    assert run.calls == []


# -- after: replica mode ends, failures, losses ------------------------------------------

def test_commands_that_exit_0_are_done():
    run = FakeRun(WORKERS)
    run.running()
    run.exit("worker:0", 0)
    run.status("worker:0", "TASK_FINISHED")
    assert run.slots.named("worker:0").done and not run.slots.named("worker:1").done
    assert run.calls == []


@pytest.mark.parametrize("event, restart_on, max_restarts, outcome", [
    # a non-zero exit is the task's own failure
    (("exit", 3), "lost", 0, "fails: exited with code 3"),
    (("exit", 3), "lost", 1, "fails: exited with code 3"),
    (("exit", 3), "failure", 1, "restarts"),
    # a loss is the infrastructure's
    (("status", "TASK_LOST"), "lost", 0, "fails: ended: TASK_LOST"),
    (("status", "TASK_LOST"), "lost", 1, "restarts"),
    (("status", "TASK_FAILED", "", "REASON_AGENT_REMOVED"), "lost", 1, "restarts"),
    (("exit", 137), "lost", 1, "restarts"),          # killed by a signal we did not send
    (("exit", 137), "lost", 0, "fails: exited with code 137"),
    (("exit", 255), "lost", 1, "fails: exited with code 255"),   # no signal's code
])
def test_after_the_cluster_is_up(event, restart_on, max_restarts, outcome):
    run = FakeRun(WORKERS, policy=RestartPolicy(max_restarts, restart_on, backoff=2))
    run.running()
    def trigger():
        if event[0] == "exit":
            run.exit("worker:1", event[1])
        else:
            run.status("worker:1", *event[1:])
    if outcome.startswith("fails: "):
        with pytest.raises(TaskFailed, match=outcome[len("fails: "):]) as err:
            trigger()
        assert err.value.task == "worker:1" and run.state.failure is err.value
        assert run.phase == Phase.RUNNING and run.calls == []
    else:
        trigger()
        assert run.phase == Phase.RESTARTING and stopped(run) == ["worker:0", "worker:1"]
        assert run.record.snapshot()["restarts"][0]["task"] == "worker:1"


def test_a_whole_restart_waits_for_its_backoff_then_launches_everything_again():
    run = FakeRun(WORKERS, policy=RestartPolicy(2, "lost", backoff=2))
    run.running()
    run.status("worker:1", "TASK_LOST")
    run.status("worker:0", "TASK_KILLED")     # the restart's stop ended it
    run.later(1.9)
    assert run.phase == Phase.RESTARTING and not relaunched_everything(run)
    run.later(0.2)
    assert relaunched_everything(run)
    assert run.phase == Phase.FORMING
    assert all(slot.base == slot.attempts and slot.state == "PENDING" and slot.task_id is None
               for slot in run.slots)
    assert "restart 1 of 2" in run.notes[0]
    # the second restart waits twice as long
    for slot in run.slots:
        run.launch(slot)
    run.running()
    run.status("worker:0", "TASK_LOST")
    run.status("worker:1", "TASK_FINISHED")
    run.later(3.9)
    assert run.phase == Phase.RESTARTING and not relaunched_everything(run)
    run.later(0.2)
    assert run.phase == Phase.FORMING and relaunched_everything(run)


@pytest.mark.parametrize("when", ["in the back-off", "once relaunched", "while forming"])
def test_an_attempt_mesos_reported_lost_that_runs_again_is_killed(when):
    # Real Mesos (>= 1.5) kills no task of an agent that comes back from a
    # partition: a framework that is not PARTITION_AWARE got TASK_LOST
    # (REASON_AGENT_REMOVED, "health check timed out"), then the task's
    # state again, TASK_RUNNING with REASON_AGENT_REREGISTERED
    # (src/master/master.cpp: __removeSlave, __reregisterSlave;
    # include/mesos/v1/mesos.proto: PARTITION_AWARE). Heard during the
    # restart's back-off, it set the slot back to running and nothing killed
    # it: it ran beside its replacement (found by a review helper).
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "lost", backoff=8))
    if when != "while forming":
        run.running()
    lost = run.slots.named("worker:1").task_id
    run.status("worker:1", "TASK_LOST", "health check timed out", "REASON_AGENT_REMOVED")
    if when != "while forming":
        run.status("worker:0", "TASK_KILLED")
    if when == "once relaunched":
        run.later(8.1)
        for slot in run.slots:
            run.launch(slot)
    run.handle(StatusUpdate(Dict(task_id={"value": lost}, state="TASK_RUNNING",
                                 message="Unreachable agent re-reregistered",
                                 reason="REASON_AGENT_REREGISTERED",
                                 agent_id={"value": "agent-1"})))
    assert ("kill", lost) in run.calls
    if when == "in the back-off":
        assert run.slots.named("worker:1").state == "TASK_LOST"   # still given up
        run.later(8.1)
        assert relaunched_everything(run)


@pytest.mark.parametrize("code", [137, 255, 1, 0])
def test_tensorboard_that_ends_leaves_the_training_going(code):
    # TensorBoard killed (137), its port taken (255): the run failed with
    # 'task tensorboard:0 exited with code 137' and a hint to give it more
    # memory with a --job tensorboard:... that tfrun refuses; with
    # --max-restarts the training itself restarted (found by a review helper).
    run = FakeRun(WORKERS + [Job("tensorboard", num=1, cpus=0.5, mem=1024)],
                  policy=RestartPolicy(1, "failure"))
    run.running()
    run.exit("tensorboard:0", code)
    assert run.phase == Phase.RUNNING and run.state.failure is None
    assert not [call for call in run.calls if call[0] in ("stop", "kill", "offers for")]
    assert run.notes[-1].startswith("tensorboard:0 exited with code %d: TensorBoard stopped; "
                                    "the training goes on without it" % code), run.notes


def test_tensorboard_that_stays_unreachable_is_killed_and_the_training_goes_on():
    # Its rendezvous connection stalled (its task SIGSTOPped): 'task
    # tensorboard:0 unreachable for 40 s' failed the run (found by a review
    # helper reading ca22008).
    run = FakeRun(WORKERS + [Job("tensorboard", num=1, cpus=0.5, mem=1024)],
                  policy=RestartPolicy(1, "lost"))
    run.running()
    task_id = run.slots.named("tensorboard:0").task_id
    run.handle(TaskDisconnected(task_id, since=run.effects.clock, reason="stalled"))
    run.later(GRACE + 1)
    assert run.phase == Phase.RUNNING and run.state.failure is None
    assert ("kill", task_id) in run.calls
    assert not [call for call in run.calls if call[0] in ("stop", "offers for")]
    assert "tensorboard:0 unreachable for" in run.notes[-1], run.notes


def test_a_failure_the_restart_policy_does_not_restart_says_which_setting_would():
    # --max-restarts 1 and a command that exits 3: the run ended with no word
    # of why the restart asked for did not come (--restart-on lost, the default).
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "lost"))
    run.running()
    with pytest.raises(TaskFailed, match="exited with code 3"):
        run.exit("worker:1", 3)
    assert run.notes == ["worker:1 exited with code 3: not restarted: restarts are for lost "
                         "tasks (--restart-on lost, the default); --restart-on failure restarts "
                         "the run for a command that fails too"]
    quiet = FakeRun(WORKERS, policy=RestartPolicy(0, "lost"))   # none asked for: nothing to say
    quiet.running()
    with pytest.raises(TaskFailed):
        quiet.exit("worker:1", 3)
    assert quiet.notes == []


def test_restarts_spent_the_failure_ends_the_run():
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "lost", backoff=0))
    run.running()
    run.status("worker:1", "TASK_LOST")
    run.status("worker:0", "TASK_KILLED")
    run.later(0)
    for slot in run.slots:
        run.launch(slot)
    run.running()
    with pytest.raises(TaskFailed, match="worker:0 ended: TASK_LOST"):
        run.status("worker:0", "TASK_LOST")


def test_a_task_away_longer_than_the_grace_is_lost():
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "lost"))
    run.running()
    run.handle(TaskDisconnected(run.slots.named("worker:0").task_id))
    run.later(GRACE - 1)
    assert run.calls == []
    run.later(2)
    assert run.phase == Phase.RESTARTING and stopped(run) == ["worker:0", "worker:1"]
    assert "worker:0 lost its connection to the scheduler" in run.notes[0]


def test_a_stalled_task_is_unreachable_the_grace_after_it_was_last_heard():
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "lost"))
    run.running()
    slot = run.slots.named("worker:0")
    run.handle(TaskDisconnected(slot.task_id, since=run.effects.clock - 30, reason="stalled"))
    run.later(GRACE - 30 - 1)
    assert run.calls == []
    run.later(2)
    assert run.phase == Phase.RESTARTING   # a loss
    assert "worker:0 unreachable for 40 s (its rendezvous connection stalled)" in run.notes[0]


def test_a_task_back_within_the_grace_is_not():
    run = FakeRun(WORKERS)
    run.running()
    slot = run.slots.named("worker:0")
    run.handle(TaskDisconnected(slot.task_id))
    run.later(GRACE - 1)
    run.handle(TaskRegistered(slot.task_id, "h", slot.port))
    run.later(GRACE)
    assert run.calls == []


def test_a_replaced_attempt_that_still_runs_is_killed():
    run = FakeRun(WORKERS)
    slot = run.slots.named("worker:0")
    old = slot.task_id
    run.launch(slot)
    run.handle(StatusUpdate(Dict(task_id={"value": old}, state="TASK_RUNNING",
                                 agent_id={"value": "agent-1"})))
    assert run.calls == [("kill", old)]


def status_of(run, task_id, state):
    run.handle(StatusUpdate(Dict(task_id={"value": task_id}, state=state,
                                 agent_id={"value": "agent-1"})))


def test_a_whole_restart_kills_only_the_tasks_not_ended_in_their_stop_grace():
    # A KILL with the stop (as before) gave a command saving a checkpoint on
    # SIGTERM Mesos' 3 s, not its grace: SIGTERM to the tree, SIGKILL 3 s on.
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "failure", backoff=100))
    run.running()
    first, second = (run.slots.named(name).task_id for name in ("worker:0", "worker:1"))
    run.exit("worker:1", 3)
    assert stopped(run) == ["worker:0", "worker:1"] and not killed(run)
    status_of(run, second, "TASK_FAILED")           # worker:1 ended by itself
    run.later(STOP_THEN_KILL - 0.1)
    assert not killed(run)
    run.later(0.2)
    assert killed(run) == [first]                   # worker:0 did not end in time
    run.later(STOP_THEN_KILL)
    assert killed(run) == [first]


def test_a_whole_restart_launches_again_once_its_stopped_tasks_ended_or_were_killed():
    # Its tasks may read the checkpoint the old ones saved on their SIGTERM.
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "failure", backoff=0))
    run.running()
    first, second = (run.slots.named(name).task_id for name in ("worker:0", "worker:1"))
    run.exit("worker:1", 3)
    status_of(run, second, "TASK_FAILED")
    run.later(STOP_THEN_KILL - 0.1)
    assert run.phase == Phase.RESTARTING and not killed(run)   # worker:0 still ends
    run.later(0.2)
    assert killed(run) == [first] and run.phase == Phase.FORMING and relaunched_everything(run)


def test_the_driver_giving_up_fails_the_run():
    run = FakeRun(WORKERS)
    with pytest.raises(ClusterError, match="the Mesos driver stopped: no master"):
        run.handle(MesosFailed("no master"))


@pytest.mark.parametrize("label, killed_by", [("killed (by alice)", "alice"), ("killed", None)])
def test_a_framework_taken_over_by_tfmesos_kill_ends_the_run_as_killed(label, killed_by):
    # tfmesos kill subscribes as the run's framework with the outcome label
    # (Mesos tells the scheduler it replaced "Framework failed over").
    run = FakeRun(WORKERS, framework_outcome=lambda: label)
    run.running()
    with pytest.raises(RunKilled, match=r"^the run was %s: tfmesos kill" % re.escape(label)) \
            as info:
        run.handle(MesosFailed("Mesos master error: Framework failed over"))
    assert info.value.by == killed_by
    run.record.ended(info.value, run.phase)
    outcome = run.record.run_file().outcome
    assert (outcome.status, outcome.by, outcome.exit_code) == ("killed", killed_by, 143)
    assert run.record.outcome_text() == label


@pytest.mark.parametrize("event", ["exit 143", "exit 137", "TASK_KILLED", "removed"])
def test_a_framework_the_master_tore_down_ends_the_run_as_killed(event):
    # An operator's /master/teardown (or tfmesos kill by a principal that may
    # not subscribe as the framework): Mesos closes the subscription and
    # kills every task. Their ends came as a task failure ("exited with
    # code 143"); the master's answer to re-subscribing is "Framework has
    # been removed". Either way the run was killed, as by tfmesos kill.
    asked = []
    run = FakeRun(WORKERS, framework_removed=lambda: asked.append(1) or "")
    run.running()
    with pytest.raises(RunKilled, match=r"^the run was killed: the Mesos master tore its "
                       r"framework down \(an operator, or tfmesos kill\)") as info:
        if event.startswith("exit"):
            run.exit("worker:1", int(event.split()[1]))
        elif event == "TASK_KILLED":
            run.status("worker:1", "TASK_KILLED", "Framework removed")
        else:
            run.handle(MesosFailed("Mesos master error: Framework has been removed"))
    assert info.value.by is None and run.calls == []
    assert asked == ([] if event == "removed" else [1])
    run.record.ended(info.value, run.phase)
    outcome = run.record.run_file().outcome
    assert (outcome.status, outcome.exit_code) == ("killed", 143)
    assert run.record.outcome_text() == "killed"


@pytest.mark.parametrize("code", [143, 5])
def test_a_task_killed_while_its_framework_is_still_there_is_a_failure(code):
    # The master has the framework (a signal from elsewhere, or the task's
    # own exit): the failure policy decides, as before.
    asked = []
    run = FakeRun(WORKERS, framework_removed=lambda: asked.append(1) or None)
    run.running()
    with pytest.raises(TaskFailed, match="worker:1 exited with code %d" % code):
        run.exit("worker:1", code)
    assert asked == ([1] if code > 128 else [])


@pytest.mark.parametrize("label", [None, "succeeded", "killedx"])
def test_a_framework_another_scheduler_took_over_is_left_to_it(label):
    run = FakeRun(WORKERS, framework_outcome=lambda: label)
    run.running()
    with pytest.raises(SchedulerReplaced, match="another scheduler took the run's framework"):
        run.handle(MesosFailed("Mesos master error: Framework failed over"))
    assert run.calls == []    # no task stopped or killed: they are the new scheduler's


# -- sticky relaunch (ParameterServerStrategy workers) -----------------------------------

def sticky_run(**options):
    run = FakeRun(PSS, policy=options.pop("policy", None), sticky=("worker",), **options)
    run.running()
    return run


def test_a_sticky_worker_is_relaunched_on_its_agent_and_port_and_gets_its_role_again():
    run = sticky_run()
    slot = run.slots.named("worker:1")
    agent, port, address = slot.agent_id, slot.port, slot.address
    lost = slot.task_id
    run.status("worker:1", "TASK_LOST")
    # Mesos reported its end: a stop message, no kill; then offers again.
    assert run.calls == [("stop", "worker:1"), ("offers for", "worker:1")]
    assert ("kill", lost) not in run.calls
    assert slot.hold == (agent, port) and slot.task_id is None and slot.state == "PENDING"
    run.launch(slot, agent)
    run.handle(TaskRegistered(slot.task_id, "h", port))
    assert slot.address == address and slot.hold is None
    assert run.calls[-1] == ("publish", "worker:1")
    assert run.phase == Phase.RUNNING
    assert run.record.snapshot()["relaunches"][0]["back"] is not None


def test_a_sticky_worker_not_back_in_time_falls_back_to_a_restart():
    run = sticky_run(policy=RestartPolicy(1, "lost"), sticky_timeout=30)
    run.status("worker:1", "TASK_LOST")
    run.later(29)
    assert run.phase == Phase.RUNNING
    run.later(2)
    assert run.phase == Phase.RESTARTING
    assert "worker:1 could not be relaunched on its agent: it was not back within 30 s" \
        in run.notes[-1]


def test_a_sticky_worker_not_back_in_time_without_restarts_fails_the_run():
    run = sticky_run(sticky_timeout=30)
    run.status("worker:1", "TASK_LOST")
    with pytest.raises(TaskFailed, match="task worker:1 could not be relaunched on its agent"):
        run.later(31)


def test_a_sticky_worker_whose_agent_is_gone_falls_back_to_a_restart():
    run = sticky_run(policy=RestartPolicy(1, "lost"))
    run.status("worker:1", "TASK_LOST")
    run.handle(AgentLost("agent-1"))
    assert run.phase == Phase.RESTARTING
    assert "its agent agent-1 is gone" in run.notes[-1]


def test_a_worker_lost_with_its_agent_is_not_relaunched_there():
    run = sticky_run(policy=RestartPolicy(1, "lost"))
    run.status("worker:1", "TASK_LOST", reason="REASON_AGENT_REMOVED")
    assert ("offers for", "worker:1") not in run.calls and run.phase == Phase.RESTARTING


def test_a_sticky_worker_back_at_another_address_is_given_up():
    run = sticky_run(policy=RestartPolicy(1, "lost"))
    slot = run.slots.named("worker:1")
    run.status("worker:1", "TASK_LOST")
    run.launch(slot)
    run.handle(TaskRegistered(slot.task_id, "elsewhere", 1))
    assert run.phase == Phase.RESTARTING and "came back at elsewhere:1" in run.notes[-1]


def test_sticky_relaunches_are_bounded_by_max_attempts():
    run = sticky_run()
    slot = run.slots.named("worker:1")
    for _ in range(MAX_ATTEMPTS):
        run.status("worker:1", "TASK_LOST")
        run.launch(slot)
    with pytest.raises(TaskFailed, match="worker:1"):
        run.status("worker:1", "TASK_LOST")


def test_a_sticky_worker_that_comes_back_and_fails_again_is_relaunched_max_attempts_times():
    # Seen with an elastic torchrun that met a closed rendezvous at every
    # start: back, then exit 1, relaunched 28 times in a minute.
    run = sticky_run()
    slot = run.slots.named("worker:1")
    port = slot.port
    for attempt in range(MAX_ATTEMPTS):
        run.exit("worker:1", 1)
        assert "(relaunch %d, within 120 s)" % (attempt + 1) in run.notes[-1]
        run.launch(slot)
        run.handle(TaskRegistered(slot.task_id, "h", port))
        assert run.notes[-1] == "worker:1 is back at h:%d" % port
    with pytest.raises(TaskFailed, match="task worker:1 exited with code 1"):
        run.exit("worker:1", 1)


def test_relaunches_count_again_after_a_whole_restart():
    run = sticky_run(policy=RestartPolicy(1, "failure"))
    slot = run.slots.named("worker:1")
    port = slot.port
    for _ in range(MAX_ATTEMPTS):
        run.exit("worker:1", 1)
        run.launch(slot)
        run.handle(TaskRegistered(slot.task_id, "h", port))
    run.exit("worker:1", 1)
    assert run.phase == Phase.RESTARTING
    run.later(60)
    for one in run.slots:
        run.launch(one)
    run.running()
    run.exit("worker:1", 1)
    assert "(relaunch 1, within 120 s)" in run.notes[-1]


# The bare words of Mesos' command executor (src/launcher/executor.cpp) and,
# for a DOCKER containerizer task, of its docker executor (src/docker/executor.cpp).
EXIT_WORDS = ["Command exited with status %d", "Container exited with status %d"]


@pytest.mark.parametrize("words", EXIT_WORDS)
@pytest.mark.parametrize("first", ["exit report", "mesos update"])
def test_a_failed_command_is_worded_the_same_whichever_report_of_its_end_comes_first(
        first, words):
    # A loaded agent's TASK_FAILED may come before the task's own exit
    # report; whichever comes first fails the run.
    run = FakeRun(WORKERS)
    run.running()
    with pytest.raises(TaskFailed) as error:
        if first == "exit report":
            run.exit("worker:1", 3)
        else:
            run.status("worker:1", "TASK_FAILED", message=words % 3)
    assert str(error.value) == "task worker:1 exited with code 3"
    assert error.value.exit_code == 3


@pytest.mark.parametrize("words", EXIT_WORDS)
@pytest.mark.parametrize("first", ["exit report", "mesos update"])
def test_a_killed_command_is_lost_in_the_same_words_whichever_report_of_its_end_comes_first(
        first, words):
    # The task entry exits 128 + N when its command was killed by signal N:
    # the agent's bare "Command exited with status 137" says no more than
    # the task's own report (CI under load: Mesos' came first, and the
    # note read "was lost (TASK_FAILED: Command exited with status 137)").
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "lost", backoff=2))
    run.running()
    if first == "exit report":
        run.exit("worker:1", 137)
    else:
        run.status("worker:1", "TASK_FAILED", message=words % 137)
    assert run.phase == Phase.RESTARTING
    assert run.notes[0].startswith(
        "worker:1 was lost (its command was killed by SIGKILL, exit code 137); restarting"), \
        run.notes


def test_a_loss_mesos_says_more_of_keeps_mesos_words():
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "lost", backoff=2))
    run.running()
    run.status("worker:1", "TASK_FAILED", message="Command terminated with signal Killed")
    assert run.notes[0].startswith(
        "worker:1 was lost (TASK_FAILED: Command terminated with signal Killed); restarting"), \
        run.notes


def test_what_mesos_says_beyond_the_exit_code_stays_in_the_failure():
    run = FakeRun(WORKERS)
    run.running()
    with pytest.raises(TaskFailed) as error:
        run.status("worker:1", "TASK_FAILED",
                   message="Command exited with status 3 (the container was destroyed)")
    assert str(error.value) == ("task worker:1 exited with code 3 (TASK_FAILED: Command exited "
                                "with status 3 (the container was destroyed))")


def test_an_elastic_torchrun_that_exits_is_not_relaunched_alone_but_a_lost_one_is():
    # torchrun shuts its c10d rendezvous down when it ends with a failure
    # (torch/distributed/launcher/api.py launch_agent): a relaunch alone
    # could only meet RendezvousClosedError. A lost one (killed, its agent
    # gone) leaves the rendezvous open, and rejoins it.
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "failure"), sticky=("worker",),
                  rendezvous_host="worker:0")
    run.running()
    run.status("worker:1", "TASK_FAILED", message="Command exited with status 137")
    assert "relaunching it" in run.notes[-1] and run.phase == Phase.RUNNING
    slot = run.slots.named("worker:1")
    port = slot.port
    run.launch(slot)
    run.handle(TaskRegistered(slot.task_id, "h", port))
    run.exit("worker:1", 1)
    assert run.phase == Phase.RESTARTING and "restarting the cluster" in run.notes[-1]


def test_elastic_tasks_that_exit_while_the_rendezvous_host_is_relaunched_are_relaunched():
    # Worker 0's torchrun hosts the store: when it ends (closing it or not),
    # the store goes with it, the others' torchrun exit (no store), and a
    # relaunched worker 0 hosts a new one they can join.
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "failure"), sticky=("worker",),
                  rendezvous_host="worker:0")
    run.running()
    run.exit("worker:0", 1)
    assert "worker:0 exited with code 1; relaunching it" in run.notes[-1]
    run.exit("worker:1", 1)
    assert "worker:1 exited with code 1; relaunching it" in run.notes[-1]
    assert run.phase == Phase.RUNNING


# -- the stop wins --------------------------------------------------------------------

def test_a_stop_during_a_restart_launches_nothing_more():
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "lost", backoff=2))
    run.running()
    run.status("worker:1", "TASK_LOST")
    run.stop()
    run.later(5)
    assert ("deadline",) not in run.calls and run.phase == Phase.STOPPING
    assert all(slot.base == 0 for slot in run.slots)     # nothing was reset


def test_a_failure_during_the_stop_neither_fails_nor_restarts_the_run():
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "lost"))
    run.running()
    run.stop()
    run.exit("worker:1", 3)                    # would fail the run
    run.status("worker:0", "TASK_LOST")        # would restart it
    assert run.phase == Phase.STOPPING and run.state.failure is None
    assert stopped(run) == []


def test_a_failure_during_a_stop_that_began_in_running_is_ignored():
    run = FakeRun(WORKERS)
    run.running()
    slot = run.slots.named("worker:0")
    run.stop()
    run.handle(TaskDisconnected(slot.task_id))
    run.later(GRACE + 1)
    assert run.calls == []


# -- the phase table -----------------------------------------------------------------

@pytest.mark.parametrize("current, target, result", [
    (Phase.NEW, Phase.FORMING, Phase.FORMING),
    (Phase.FORMING, Phase.RUNNING, Phase.RUNNING),
    (Phase.RUNNING, Phase.RESTARTING, Phase.RESTARTING),
    (Phase.RESTARTING, Phase.FORMING, Phase.FORMING),
    (Phase.RUNNING, Phase.STOPPING, Phase.STOPPING),
    (Phase.STOPPING, Phase.STOPPED, Phase.STOPPED),
    (Phase.STOPPING, Phase.RESTARTING, None),     # the stop wins
    (Phase.STOPPING, Phase.FORMING, None),
    (Phase.STOPPED, Phase.RUNNING, None),
    (Phase.STOPPED, Phase.STOPPING, None),        # a second stop
    (Phase.RUNNING, Phase.FORMING, IllegalTransition),
    (Phase.NEW, Phase.RUNNING, IllegalTransition),
    (Phase.FORMING, Phase.RESTARTING, IllegalTransition),
])
def test_phase_moves(current, target, result):
    if result is IllegalTransition:
        with pytest.raises(IllegalTransition, match="cannot go from %s to %s"
                           % (current.value, target.value)):
            next_phase(current, target)
    else:
        assert next_phase(current, target) == result


def test_phases_compare_as_their_names():
    assert Phase.STOPPED == "stopped" and str(Phase.RUNNING) == "running"


def test_a_stopped_cluster_run_refuses_restarts_and_failures():
    from tfmesos.core.launch import ClusterRun
    from tfmesos.core.spec import RunSpec

    spec = RunSpec(jobs=WORKERS, mode="replica", command="true", run_dir=None)
    with pytest.raises(IllegalTransition, match="cannot go from new to running"):
        ClusterRun(spec, environ=bare_environ()).state.move(Phase.RUNNING)
    run = ClusterRun(spec, environ=bare_environ())
    run.stop()
    assert run.phase == Phase.STOPPED
    assert run.control.restart_cluster() is False and run.control.relaunch_cluster() is False
    run.control.fail(TaskFailed("task worker:0 exited with code 3"))
    assert run.failure is None     # the stop won


def test_a_failed_run_only_stops():
    run = FakeRun(WORKERS, policy=RestartPolicy(1, "failure"))
    run.running()
    run.control.fail(ClusterError("first"))
    run.control.fail(ClusterError("second"))
    assert str(run.state.failure) == "first"
    assert run.control.restart_cluster() is False and run.phase == Phase.RUNNING
    run.stop()
    assert run.phase == Phase.STOPPING


def test_a_call_refused_for_a_replaced_stream_reaches_the_run_as_taken_over():
    # The driver's side and the run's meet: a callback's call refused with
    # Mesos' 400 for a stream another subscription replaced (two `tfmesos
    # attach` at once) is what the driver says to the scheduler, and the
    # run takes it as the framework taken over, not as a failure.
    import queue

    from offers import offer

    from tfmesos.mesos import MesosSchedulerDriver, Scheduler
    from tfmesos.mesos.mock_transport import MockTransport
    said = queue.SimpleQueue()

    class Loser(Scheduler):
        def resourceOffers(self, driver, offers):
            driver.suppressOffers()

        def error(self, driver, message):
            said.put(message)
    mock = MockTransport(framework_id="fw-7")
    mock.refuse("SUPPRESS", 400, "The stream ID 'old' included in this request didn't match "
                "the stream ID currently associated with framework ID fw-7")
    driver = MesosSchedulerDriver(Loser(), {"user": "u", "name": "n"}, "mock-master:5050",
                                  transport=mock)
    driver.start()
    try:
        mock.offer(offer("o1"))
        message = said.get(timeout=10)
    finally:
        driver.abort()
    run = FakeRun(WORKERS, framework_outcome=lambda: None)
    run.running()
    with pytest.raises(SchedulerReplaced, match="another scheduler took the run's framework"):
        run.handle(MesosFailed(message))
    assert run.calls == []


# -- a torch or jax group's member that ends while the others run --------------

def test_a_group_member_that_ends_while_others_run_is_said_once():
    # A rank that exits 0 before init_process_group (or any collective)
    # left the others waiting in silence for torch's 30-min timeout.
    run = FakeRun([Job("worker", num=3)], process_group="worker")
    run.running()
    run.exit("worker:1", 0)
    run.later(GROUP_LEFT_GRACE - 1)
    assert run.notes == []                       # ranks finishing together take seconds
    run.later(2)
    run.exit("worker:2", 0)
    run.later(GROUP_LEFT_GRACE + 1)
    assert run.notes == ["worker:1 ended (exit 0) while 2 other workers of its process group "
                         "still run: a rank that leaves early makes the others wait in "
                         "init_process_group or a collective"]
    assert run.phase == Phase.RUNNING and run.state.failure is None


def test_group_members_that_end_last_or_outside_a_group_are_not_said():
    run = FakeRun([Job("worker", num=2)], process_group="worker")
    run.running()
    run.exit("worker:1", 0)
    run.later(3)
    run.exit("worker:0", 0)   # within the grace: ranks that finished together
    run.later(GROUP_LEFT_GRACE)
    # Said at every torch and JAX run that succeeded: a false alarm.
    assert run.notes == []
    plain = FakeRun([Job("worker", num=2)])   # tensorflow: no process group
    plain.running()
    plain.exit("worker:1", 0)
    assert plain.notes == []
