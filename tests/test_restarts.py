"""The restart policy: what counts as an infrastructure loss, back-off, limits."""

import pytest

from tfmesos.core.restarts import RestartPolicy, failure_cause
from tfmesos.exceptions import SpecError


@pytest.mark.parametrize("status, cause", [
    (dict(state="TASK_LOST", reason="REASON_AGENT_REMOVED"), "lost"),
    (dict(state="TASK_GONE"), "lost"),
    (dict(state="TASK_UNREACHABLE"), "lost"),
    (dict(state="TASK_FAILED", reason="REASON_CONTAINER_LIMITATION_MEMORY"), "lost"),
    (dict(state="TASK_FAILED", message="Command terminated with signal Killed"), "lost"),
    (dict(state="TASK_FAILED", exit_code=137), "lost"),
    (dict(state="TASK_FAILED", message="Command exited with status 3", exit_code=3), "failure"),
    # Above 128 + the highest signal (64): a command's own code, as sys.exit(-1)'s
    # 255; it was "killed by signal 127" and restarted as lost (found by a
    # review helper).
    (dict(state="TASK_FAILED", message="Command exited with status 255", exit_code=255),
     "failure"),
    (dict(state="TASK_FAILED", exit_code=200), "failure"),
    (dict(state="TASK_FAILED", exit_code=128 + 64), "lost"),   # SIGRTMAX
    (dict(state="TASK_FINISHED", exit_code=0), None),
    (dict(state="TASK_ERROR", message="invalid"), "failure"),
])
def test_failure_cause(status, cause):
    assert failure_cause(**status) == cause


def test_lost_restarts_only_infrastructure_losses():
    policy = RestartPolicy(max_restarts=2)
    assert policy.allows(0, "lost") and policy.allows(1, "lost")
    assert not policy.allows(2, "lost")                 # restarts stop at N
    assert not policy.allows(0, "failure")              # exit 3 is the job's own failure
    assert not policy.allows(0, None)


def test_failure_restarts_any_non_zero_exit():
    policy = RestartPolicy(max_restarts=1, restart_on="failure")
    assert policy.allows(0, "failure") and policy.allows(0, "lost")
    assert not policy.allows(1, "failure")


def test_no_restarts_by_default():
    assert not RestartPolicy().allows(0, "lost")


def test_backoff_doubles_up_to_its_cap():
    policy = RestartPolicy(max_restarts=9, backoff=2.0, max_backoff=10.0)
    assert [policy.delay(k) for k in range(5)] == [2.0, 4.0, 8.0, 10.0, 10.0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(max_restarts=-1), "max_restarts"), (dict(max_restarts=True), "max_restarts"),
    (dict(restart_on="always"), "restart_on"), (dict(backoff=-1), "backoff")])
def test_bad_policies_are_refused(kwargs, match):
    with pytest.raises(SpecError, match=match):
        RestartPolicy(**kwargs)
