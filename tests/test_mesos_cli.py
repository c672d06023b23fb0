"""``mesos-cli`` (PyPI avmesos-cli, not written by this project) reads a
running tfrun's agents, framework and tasks from the embedded master
(started tolerant, as Mesos), through the endpoints it uses: ``/slaves``,
``/master/frameworks/``, ``/tasks?order=asc&limit=-1``."""

import json
import os
import subprocess
import sys

import pytest
from fixtures_master import make_local_master, small_agent
from tfrun_helpers import SMALL, start_tfrun

pytest.importorskip("avmesos.cli")


def mesos_cli(home, *args):
    """Run ``mesos-cli ARGS`` with ``home`` as HOME (its config there); stdout."""
    result = subprocess.run([sys.executable, "-m", "avmesos.cli.mesos-cli", *args],
                            cwd=str(home), env=dict(os.environ, HOME=str(home)),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


def running_tasks(state):
    return [t for f in state["frameworks"] for t in f["tasks"] if t["state"] == "TASK_RUNNING"]


def test_mesos_cli_lists_the_agents_framework_and_tasks_of_a_tfrun(make_local_master, tmp_path):
    master = make_local_master(strict=False, agents=[small_agent(cpus=4, mem=4096)])
    home = tmp_path / "home"
    (home / ".mesos").mkdir(parents=True)
    (home / ".mesos" / "config.toml").write_text(
        '[master]\naddress = "127.0.0.1:%d"\n' % master.port)
    done = tmp_path / "done"
    wait = "while [ ! -e %s ]; do sleep 0.2; done" % done   # until the test has read them
    with start_tfrun("-m", master.url, "-w", "2", "-s", "1", *SMALL, "--", wait,
                     env=dict(os.environ, MESOS_MASTER="")) as run:
        try:
            state = master.wait_until(lambda s: len(running_tasks(s)) == 3, 90)
            [framework] = state["frameworks"]
            task_ids = sorted(t["id"] for t in running_tasks(state))
            [agent] = state["slaves"]

            agents = mesos_cli(home, "agent", "list")
            assert agent["id"] in agents and "True" in agents
            frameworks = mesos_cli(home, "framework", "list")
            assert framework["id"] in frameworks and framework["name"] in frameworks
            tasks = mesos_cli(home, "task", "list")
            for task_id in task_ids:
                assert task_id in tasks
            assert tasks.count("TASK_RUNNING") == 3
            inspected = json.loads(mesos_cli(home, "task", "inspect", task_ids[0]))
            assert inspected["id"] == task_ids[0]
            assert inspected["framework_id"] == framework["id"]
            assert inspected["statuses"][-1]["state"] == "TASK_RUNNING"
            assert inspected["statuses"][-1]["container_status"]["network_infos"][0][
                "ip_addresses"][0]["ip_address"] == "127.0.0.1"
        finally:
            done.touch()
        out, err = run.communicate(timeout=90)
    assert run.returncode == 0, err
