"""``mesos-cli`` (PyPI avmesos-cli, not written by this project) reads a
running tfrun's agents, framework and tasks from the embedded master
(started tolerant, as Mesos), through the endpoints it uses: ``/slaves``,
``/master/frameworks/``, ``/tasks?order=asc&limit=-1``; and every other
command of ``mesos-cli --help`` that works offline: ``framework inspect``,
``task list --all``, ``config show``/``plugins`` and ``task attach``
(``ATTACH_CONTAINER_OUTPUT`` on the task's agent, found by its pid in
``/slaves``); ``task exec`` needs ``LAUNCH_NESTED_CONTAINER_SESSION``,
which the local agents do not serve (501, said on its stderr).

avmesos-cli 1.0.0's ``task attach`` and ``exec`` stop at a NameError before
they reach any agent: its ``avmesos/cli/mesos.py`` calls ``mesos.http``
(``simple_urljoin``, ``Resource``) without importing it (apache/mesos'
src/python/cli_new/lib/cli/mesos.py imports ``mesos.http``, which
avmesos renamed ``avmesos.http``). ``PATCHED`` runs mesos-cli with that
name bound, and nothing else changed."""

import contextlib
import json
import os
import pty
import subprocess
import sys

import pytest
from fixtures_master import clients, launch_running, make_local_master, small_agent
from tfrun_helpers import SMALL, start_tfrun
from waiting import wait_until

pytest.importorskip("avmesos.cli")


PATCHED = ("import runpy, sys, avmesos, avmesos.http, avmesos.cli.mesos as cli_mesos; "
           "cli_mesos.mesos = avmesos; sys.argv[0] = 'mesos-cli'; "
           "runpy.run_module('avmesos.cli.mesos-cli', run_name='__main__')")


def mesos_cli(home, *args, check=True):
    """Run ``mesos-cli ARGS`` with ``home`` as HOME (its config there); stdout
    (``check=False``: the CompletedProcess)."""
    result = subprocess.run([sys.executable, "-m", "avmesos.cli.mesos-cli", *args],
                            cwd=str(home), env=dict(os.environ, HOME=str(home)),
                            capture_output=True, text=True, timeout=60)
    if not check:
        return result
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


def cli_home(tmp_path, master):
    """A HOME whose ~/.mesos/config.toml names ``master``."""
    home = tmp_path / "home"
    (home / ".mesos").mkdir(parents=True)
    (home / ".mesos" / "config.toml").write_text(
        '[master]\naddress = "127.0.0.1:%d"\n' % master.port)
    return home


@contextlib.contextmanager
def patched_cli(home, *args):
    """``mesos-cli ARGS`` (``PATCHED``) started with a terminal for its stdin
    (``task attach`` takes it over); the Popen, killed if still running at
    the block's end."""
    terminal, stdin = pty.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-c", PATCHED, *args], cwd=str(home),
                                   env=dict(os.environ, HOME=str(home)), stdin=stdin,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            yield process
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate()
    finally:
        os.close(stdin)
        os.close(terminal)


def running_tasks(state):
    return [t for f in state["frameworks"] for t in f["tasks"] if t["state"] == "TASK_RUNNING"]


def test_mesos_cli_lists_the_agents_framework_and_tasks_of_a_tfrun(make_local_master, tmp_path):
    master = make_local_master(strict=False, agents=[small_agent(cpus=4, mem=4096)])
    home = cli_home(tmp_path, master)
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


def test_mesos_cli_inspects_lists_and_attaches_to_a_running_task(make_local_master, clients,
                                                                  tmp_path):
    master = make_local_master(strict=False, agents=[small_agent(cpus=2, mem=1024)])
    home = cli_home(tmp_path, master)
    client = clients(master, name="cli-watched")
    command = "until [ -e stop ]; do echo tick; echo tock >&2; sleep 0.1; done; echo bye"
    launch_running(client, master, "talker", command)
    [server] = master._agent_servers

    inspected = json.loads(mesos_cli(home, "framework", "inspect", client.framework_id))
    assert (inspected["id"], inspected["name"]) == (client.framework_id, "cli-watched")
    listed = mesos_cli(home, "task", "list", "--all")
    assert "talker" in listed and "TASK_RUNNING" in listed
    assert ("127.0.0.1:%d" % master.port) in mesos_cli(home, "config", "show")
    assert "task" in mesos_cli(home, "config", "plugins")

    # task exec: LAUNCH_NESTED_CONTAINER_SESSION, not served (a 501 that says so).
    with patched_cli(home, "task", "exec", "talker", "echo", "hi") as execed:
        out, err = execed.communicate(timeout=60)
    assert execed.returncode != 0
    assert b"501" in err and b"LAUNCH_NESTED_CONTAINER_SESSION is not supported" in err, err

    # task attach --no-stdin: the task's output from now on, until it ends.
    with patched_cli(home, "task", "attach", "--no-stdin", "talker") as attached:
        wait_until(lambda: server.output_streams or attached.poll() is not None, timeout=60)
        assert attached.poll() is None, attached.communicate()
        open(os.path.join(master.sandbox("talker"), "stop"), "w").close()
        out, err = attached.communicate(timeout=60)
    assert attached.returncode == 0, err
    assert out.endswith(b"bye\n") and set(out.split(b"\n")) <= {b"tick", b"bye", b""}, out
    assert set(err.split(b"\n")) <= {b"tock", b""}, err
    client.wait_state("talker", "TASK_FINISHED")
