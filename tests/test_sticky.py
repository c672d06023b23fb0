"""Sticky relaunch of a ParameterServerStrategy worker (same index, agent
and port) and its fall-backs, on the embedded master; ``cluster()``'s whole
restart. ClusterRun drives plain shell commands where TensorFlow is not the
point."""

import os
import stat
import sys
import time

import pytest
from offers import offer
from recovery_helpers import kill_task, task_processes
from tfrun_helpers import assert_no_task_processes

from mesos_local import AgentSpec
from tfmesos import cluster
from tfmesos.core.fine_grained import Watcher
from tfmesos.core.jobs import Job
from tfmesos.core.launch import ClusterRun
from tfmesos.core.placement import TaskRequest, place
from tfmesos.core.restarts import RestartPolicy
from tfmesos.core.spec import RunSpec
from tfmesos.exceptions import TaskFailed

TINY = dict(cpus=0.1, mem=64)


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "tfmesos-runs"))


def test_held_ports_go_only_to_the_request_pinned_to_them():
    offers = [offer("o1", agent="a1", ports=[(31000, 31002)]),
              offer("o2", agent="a2", ports=[(31000, 31002)])]
    plain = [TaskRequest(i, 1, 64) for i in range(3)]
    pinned = TaskRequest("sticky", 1, 64, agent_id="a2", fixed_port=31001)
    placement = place(plain + [pinned], offers, {"a2": {31001}})
    ports = {(a.agent_id, a.port): a.request.key for group in placement.launches.values()
             for a in group}
    assert ports[("a2", 31001)] == "sticky"
    assert not placement.unplaced
    # Elsewhere, or without the port in the offer, a pinned request does not fit.
    away = TaskRequest("sticky", 1, 64, agent_id="a3", fixed_port=31001)
    assert place([away], offers, {"a3": {31001}}).unplaced == [away]
    gone = TaskRequest("sticky", 1, 64, agent_id="a1", fixed_port=31005)
    assert place([gone], offers, {"a1": {31005}}).unplaced == [gone]


def start_run(recovery, python=None, agents=None):
    """chief:0 + worker:0,1 sleeping, watched in the background; ``recovery``:
    RunSpec settings (restart_policy, sticky_jobs, sticky_timeout)."""
    jobs = [Job("chief", **TINY), Job("worker", num=2, **TINY)]
    options = {"agents": agents} if agents else {}
    run = ClusterRun(RunSpec(launch_timeout=60, python=python, jobs=jobs, mode="replica",
                             command="sleep 600", master="local", local_master=options,
                             **recovery))
    run.start()
    run.wait_ready()
    Watcher(run).start()
    return run


def wait_for(predicate, run, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate(run.record.snapshot()):
        assert run.failure is None, run.failure
        assert time.monotonic() < deadline, run.record.snapshot()
        time.sleep(0.1)
    return run.record.snapshot()


def attempts_of(data, name):
    return [task["attempts"] for task in data["tasks"] if task["name"] == name][0]


def test_a_lost_worker_comes_back_at_its_address_and_the_rest_keeps_running():
    run = start_run(dict(sticky_jobs=("worker",)))
    try:
        address = run.cluster_spec["worker"][0]
        kill_task("worker", 0)
        data = wait_for(lambda d: d["relaunches"] and d["relaunches"][0]["back"], run)
        [relaunch] = data["relaunches"]
        assert relaunch["task"] == "worker:0" and relaunch["cause"] == "lost"
        assert relaunch["address"] == address and relaunch["message"].startswith(
            "worker:0 was lost (TASK_FAILED: Command terminated with signal Killed)")
        attempts = attempts_of(data, "worker:0")
        assert [a["address"] for a in attempts] == [address, address]
        assert attempts[0]["agent_id"] == attempts[1]["agent_id"]
        assert len(attempts_of(data, "chief:0")) == len(attempts_of(data, "worker:1")) == 1
        assert data["restarts"] == [] and run.cluster_spec["worker"][0] == address
        assert set(task_processes("worker", 0).values()) == {2}   # the relaunch runs
    finally:
        run.stop()
    assert_no_task_processes()


def slow_second_start(tmp_path):
    """An interpreter whose second start of worker:0 hangs (a relaunch that
    never registers)."""
    script = tmp_path / "python"
    script.write_text(
        "#!/bin/sh\ncase \"$TFMESOS_TASK_ID\" in *.worker.0.2) exec sleep 600;; esac\n"
        "exec %s \"$@\"\n" % sys.executable)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


@pytest.mark.waits
def test_a_worker_not_back_in_time_fails_the_run_without_restarts(tmp_path):
    run = start_run(dict(sticky_jobs=("worker",), sticky_timeout=2),
                    python=slow_second_start(tmp_path))
    try:
        kill_task("worker", 0)
        deadline = time.monotonic() + 30
        while run.failure is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert isinstance(run.failure, TaskFailed)
        assert str(run.failure) == ("task worker:0 could not be relaunched on its agent: "
                                    "it was not back within 2 s")
    finally:
        run.stop()
    assert_no_task_processes()


def test_a_worker_whose_agent_is_gone_falls_back_to_a_whole_restart():
    agents = [AgentSpec(cpus=1, mem=1024, ports=((31100 + 10 * i, 31109 + 10 * i),))
              for i in range(2)]
    run = start_run(dict(restart_policy=RestartPolicy(1, backoff=0.2), sticky_jobs=("worker",)),
                    agents=agents)
    try:
        gone = [s for s in run.slots if s.name == "worker:0"][0].agent_id
        run.local_master.remove_agent(gone)
        data = wait_for(lambda d: d["restarts"] and run.phase == "running"
                        and all(s.address for s in run.slots), run)
        assert [r["cause"] for r in data["restarts"]] == ["lost"]
        assert data["relaunches"] == []      # no agent to go back to
        assert "Agent has been marked gone" in data["restarts"][0]["message"]
        assert all(s.agent_id != gone for s in run.slots)
        assert {a["restart"] for a in attempts_of(data, "chief:0")} == {0, 1}
    finally:
        run.stop()
    assert_no_task_processes()


@pytest.mark.tensorflow
def test_cluster_restarts_every_server_when_the_ps_is_lost(tmp_path):
    jobs = [dict(name="ps", num=1, cpus=0.2, mem=1024), dict(name="worker", num=1, cpus=0.2,
                                                              mem=1024)]
    with cluster(jobs, master="local", max_restarts=1, restart_backoff=0.1,
                 run_dir=str(tmp_path / "run")) as c:
        assert c.restarts == 0
        kill_task("ps", 0)
        deadline = time.monotonic() + 60
        while c.restarts == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        spec = c.wait_ready(timeout=60)
        assert c.restarts == 1 and sorted(spec) == ["ps", "worker"]
        # (a set: TensorFlow forks helpers while it loads)
        assert set(task_processes("ps", 0).values()) == {2}
        assert set(task_processes("worker", 0).values()) == {2}
    assert_no_task_processes()
    assert os.path.isfile(tmp_path / "run" / "run.json")
