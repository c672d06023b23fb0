"""Tasks lost with their agent, also while tfmesos is disconnected from the
master: Mesos drops the master-generated TASK_LOST of a disconnected
framework, so only reconciliation tells (docs/reconciliation.md)."""

import time

import pytest
from fixtures_master import FAST, leftover_processes
from waiting import wait_until

from tfmesos.core.jobs import Job
from tfmesos.core.launch import ClusterRun
from tfmesos.core.spec import RunSpec
from tfmesos.exceptions import TaskFailed


@pytest.fixture
def running():
    runs = []

    def start():
        run = ClusterRun(RunSpec(jobs=[Job("worker", cpus=0.1, mem=64)], launch_timeout=60,
                                 mode="replica", command="sleep 60", master="local",
                                 local_master=dict(FAST)))
        runs.append(run)
        run.start()
        run.wait_ready()
        return run, run.slots[0]
    yield start
    for run in runs:
        master = run.local_master
        run.stop()
        wait_until(lambda master=master: not leftover_processes(master),
                   message=lambda master=master: "left: %s" % leftover_processes(master))


def _fails_with_lost(run, within):
    started = time.monotonic()
    with pytest.raises(TaskFailed, match="task worker:0 ended: TASK_LOST") as raised:
        run.wait_finished()
    assert time.monotonic() - started < within
    return raised.value


def test_agent_removed_mid_run_fails_the_run_in_seconds(running):
    run, slot = running()
    run.local_master.remove_agent(slot.agent_id)
    failure = _fails_with_lost(run, within=20)   # not after the 40 s reconnect grace
    assert failure.task == "worker:0" and failure.state == "TASK_LOST"


def test_agent_removed_while_disconnected_is_found_by_reconciliation(running):
    run, slot = running()
    master = run.local_master
    master.drop_subscription(run.scheduler.framework_id)
    master.remove_agent(slot.agent_id)   # its TASK_LOST goes nowhere: we are away
    failure = _fails_with_lost(run, within=30)
    assert "Reconciliation" in str(failure)
