"""Several agents on the embedded master, as on a real cluster: agent
specs on the command line, offers, placement, removal and killing per
agent, Mesos' GPU filter and role rules, and whole tfrun runs over them.

Every master is stopped at the end of its test and no task may outlive it
(``fixtures_master``); tfrun runs are bounded (``tfrun_helpers``).
"""

import argparse
import os
import re
import subprocess
import sys
import time

import pytest
import requests
from fixtures_master import (
    clients,
    leftover_processes,
    make_local_master,
    session_of,
    small_agent,
    task_pids,
)
from mesos_http_client import scalar, task_info
from tfrun_helpers import (
    HELLO,
    HELLO_ARGS,
    free_port,
    marked_tasks,
    run_tfrun,
    start_tfrun,
    wait_for_line,
)
from waiting import wait_until

from mesos_local import AgentSpec
from mesos_local.command_line import agent_specs, main, parse_agent

pytestmark = pytest.mark.timeout(180)

SMALL_TASKS = ["-Mw", "128", "-Ms", "128"]


def three_agents(cpus=2, **overrides):
    return [small_agent(cpus=cpus, hostname="node%d" % i, ports=((31000 + 10 * i, 31009 + 10 * i),),
                        **overrides)
            for i in range(3)]


def alive(pid):
    """Whether ``pid`` is a live (non-zombie) process."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --- the --agent option -----------------------------------------------------------------

def test_agent_option_parses_each_key():
    assert parse_agent("cpus=2,mem=4096,gpus=0") == {"cpus": 2.0, "mem": 4096.0, "gpus": 0}
    assert parse_agent("ports=31000-31099, hostname=node1,disk=100") == {
        "ports": ((31000, 31099),), "hostname": "node1", "disk": 100.0}
    specs = agent_specs(0, cpus=1, mem=512, gpus=0,
                        given=[{"cpus": 2, "gpus": 2}, {"ports": ((40000, 40009),)}])
    assert specs[0] == AgentSpec(cpus=2, mem=512, gpus=2, ports=((31000, 31499),))
    assert specs[1] == AgentSpec(cpus=1, mem=512, gpus=0, ports=((40000, 40009),))


@pytest.mark.parametrize("text, message", [
    ("cpus", "expected KEY=VALUE items"),
    ("cpu=2", "unknown key 'cpu' (keys: cpus, mem, disk, gpus, ports, hostname, isolate)"),
    ("cpus=two", "cpus=two is not a number"),
    ("gpus=1.5", "gpus=1.5 is not a whole number"),
    ("ports=31000", "ports=31000 is not a range like 31000-31099"),
    ("ports=9-3", "ports=9-3 is not a range like 31000-31099 within 1-65535"),
    ("mem=-1", "mem must be from 0 to 1e+15"),
    ("cpus=1,cpus=2", "cpus given twice"),
])
def test_agent_option_errors_name_the_fix(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
        parse_agent(text)


def test_agent_and_agents_together_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--agents", "2", "--agent", "cpus=1"])
    assert exit_info.value.code == 2
    assert "give either --agents N or --agent SPEC" in capsys.readouterr().err


def test_impossible_agent_ports_are_a_one_line_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--port", "0", "--agent", "ports=9-3", "--no-docker"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("'ports=9-3': ports=9-3 is not a range like 31000-31099 within "
                            "1-65535"), err


# --- offers, placement, removal and killing per agent ----------------------------------

def test_each_agent_offers_runs_and_is_removed_on_its_own(make_local_master, clients):
    master = make_local_master(agents=three_agents())
    client = clients(master)
    offers = {o["hostname"]: o for o in client.next_offers()}
    assert sorted(offers) == ["node0", "node1", "node2"]
    assert len({o["agent_id"]["value"] for o in offers.values()}) == 3
    for name, offer in offers.items():
        command = "trap 'echo TERM > got-term; exit 0' TERM; sleep 60 & wait"
        client.launch(offer, [task_info("on-" + name, offer, command, cpus=2)],
                      filters={"refuse_seconds": 60})
    for name in offers:
        client.wait_state("on-" + name, "TASK_RUNNING")
    state = master.state()
    used = {agent["hostname"]: agent["used_resources"]["cpus"] for agent in state["slaves"]}
    assert used == {"node0": 2, "node1": 2, "node2": 2}
    for name, offer in offers.items():
        sandbox = master.sandbox("on-" + name)
        assert sandbox.startswith(os.path.join(master.work_dir, "agents",
                                               offer["agent_id"]["value"]))
    # Removing node1 loses its task only (SIGKILL at once: its host is gone);
    # the others run on.
    master.remove_agent(offers["node1"]["agent_id"]["value"])
    lost = client.next_update("on-node1")
    assert lost["state"] == "TASK_LOST" and lost["reason"] == "REASON_AGENT_REMOVED"
    # Once its processes are gone, a TERM would have left its trace.
    wait_until(lambda: not task_pids(master, "on-node1"), message="on-node1 still runs")
    assert not os.path.exists(os.path.join(master.sandbox("on-node1"), "got-term"))
    client.no_event(("UPDATE",), 0.5)
    tasks = {t["id"]: t["state"] for t in master.state()["frameworks"][0]["tasks"]}
    assert tasks == {"on-node0": "TASK_RUNNING", "on-node2": "TASK_RUNNING"}
    assert [a["hostname"] for a in master.state()["slaves"]] == ["node0", "node2"]
    client.kill("on-node2")
    client.wait_state("on-node2", "TASK_KILLED")
    assert os.path.exists(os.path.join(master.sandbox("on-node2"), "got-term"))
    assert master.state()["frameworks"][0]["tasks"][0]["id"] == "on-node0"


def test_a_setsid_grandchild_dies_with_its_task(make_local_master, clients):
    # Mesos destroys a container's whole tree: SubprocessLauncher::destroy
    # kills the process tree, groups and sessions (launcher.cpp); the Linux
    # launcher kills the whole cgroup (linux_launcher.cpp). Here: a grandchild
    # that left the task's session with setsid(1) dies too.
    master = make_local_master(agents=three_agents())
    client = clients(master)
    offer = next(o for o in client.next_offers() if o["hostname"] == "node2")
    command = "sh -c 'setsid sleep 300 & echo $! > grandchild.pid'; echo started; sleep 300"
    client.launch(offer, [task_info("tree", offer, command)], filters={"refuse_seconds": 0})
    client.wait_state("tree", "TASK_RUNNING")
    pid_file = os.path.join(master.sandbox("tree"), "grandchild.pid")
    grandchild = int(wait_until(lambda: os.path.exists(pid_file) and open(pid_file).read().strip(),
                                message="the grandchild did not start"))
    wait_until(lambda: session_of(grandchild) == grandchild,
               message="the grandchild should lead its own session")
    client.kill("tree")
    client.wait_state("tree", "TASK_KILLED")
    assert not alive(grandchild)
    assert leftover_processes(master) == []


# --- GPUs and roles, as Mesos has them ----------------------------------------------------

def test_gpu_agents_stay_hidden_from_frameworks_without_gpu_resources(make_local_master,
                                                                      clients):
    master = make_local_master(agents=[small_agent(gpus=2, hostname="gpu")])
    plain = clients(master)
    plain.no_event(("OFFERS",), 0.5)
    aware = clients(master, capabilities=["GPU_RESOURCES"])
    offer = aware.next_offers()[0]
    assert offer["hostname"] == "gpu"
    # A CPU-only task may still use a GPU agent's cpus.
    aware.launch(offer, [task_info("cpu-only", offer, 'echo "[$CUDA_VISIBLE_DEVICES]"')])
    aware.wait_state("cpu-only", "TASK_FINISHED")


@pytest.mark.parametrize("info", [
    {"capabilities": ["MULTI_ROLE"], "roles": ["ml/team", "ml/team/x", "*"]},
    {"role": "ml/team"},
])
def test_hierarchical_roles_are_accepted(make_local_master, clients, info):
    master = make_local_master()
    client = clients(master, **info)
    offer = client.next_offers()[0]
    roles = info.get("roles") or [info["role"]]
    if "roles" in info:
        assert offer["allocation_info"]["role"] in roles
        resources = [scalar("cpus", 0.1, offer["allocation_info"]["role"]),
                     scalar("mem", 32, offer["allocation_info"]["role"])]
        client.launch(offer, [task_info("t", offer, "true", resources=resources)])
    else:
        client.launch(offer, [task_info("t", offer, "true")])
    client.wait_state("t", "TASK_FINISHED")
    [framework] = master.state()["frameworks"]
    # Mesos writes "roles" for MULTI_ROLE frameworks, else "role" (readonly_handler.cpp).
    assert framework.get("roles", [framework.get("role")]) == roles


INVALID_ROLES = {
    "a//b": "Role 'a//b' cannot contain two adjacent slashes",
    "/ml": "Role '/ml' cannot start with a slash",
    "ml/": "Role 'ml/' cannot end with a slash",
    "ml/../x": "Role 'ml/../x' cannot include '..' as a component",
    "ml/-x": "Role component '-x' is invalid because it starts with a dash",
    "has space": "Role component 'has space' is invalid",
    "": "Role names cannot be the empty string",
}


@pytest.mark.parametrize("role", sorted(INVALID_ROLES))
def test_roles_mesos_refuses_are_refused(make_local_master, clients, role):
    # Master::subscribe refuses with an ERROR event (src/master/master.cpp,
    # validateRoles in src/master/validation.cpp); UPDATE_FRAMEWORK is a 400.
    master = make_local_master()
    refused = clients(master, subscribe=False, capabilities=["MULTI_ROLE"], roles=["ok", role])
    error = refused.subscribe(expect_error=True)["error"]["message"]
    assert error.startswith("'FrameworkInfo.roles' contains invalid role: "
                            + INVALID_ROLES[role])
    single = clients(master, subscribe=False, role=role)
    error = single.subscribe(expect_error=True)["error"]["message"]
    assert error.startswith("'FrameworkInfo.role' is not a valid role: " + INVALID_ROLES[role])
    client = clients(master, capabilities=["MULTI_ROLE"], roles=["ok"])
    info = dict(client.framework_info, roles=["ok", role])
    response = client.call("UPDATE_FRAMEWORK", {"framework_info": info}, check=False)
    assert response.status_code == 400
    assert response.text.startswith("Supplied FrameworkInfo is not valid: 'FrameworkInfo.roles' "
                                    "contains invalid role: " + INVALID_ROLES[role])
    assert [f["roles"] for f in master.state()["frameworks"]] == [["ok"]]


# --- whole runs over several agents ------------------------------------------------------------

def hello_run(master_address, *options, timeout=120):
    return run_tfrun("-m", master_address, *options, "--", sys.executable, HELLO, *HELLO_ARGS,
                     timeout=timeout)


def test_five_tasks_fill_three_two_cpu_agents_with_a_hierarchical_role(make_local_master):
    master = make_local_master(agents=three_agents())
    result = hello_run(master.url, "-r", "ml/team", "-w", "4", "-s", "1", "-Cw", "1",
                       "-Cs", "1", *SMALL_TASKS)
    assert result.returncode == 0, result.stderr
    framework = master.state()["completed_frameworks"][0]
    assert framework["roles"] == ["ml/team"]
    tasks = framework["completed_tasks"]
    # All ran; the run ends when every worker exited 0 (tasks still up are killed).
    assert len(tasks) == 5
    for task in tasks:
        assert "TASK_RUNNING" in [s["state"] for s in task["statuses"]]
        assert task["state"] in ("TASK_FINISHED", "TASK_KILLED")
    assert {t["role"] for t in tasks} == {"ml/team"}
    per_agent = {}
    for task in tasks:
        per_agent[task["slave_id"]] = per_agent.get(task["slave_id"], 0) + 1
    assert sorted(per_agent.values()) == [1, 2, 2]


def test_cpu_only_run_on_gpu_only_agents_of_a_standalone_master(tmp_path):
    port = free_port()
    gpu_agent = "cpus=2,mem=1024,gpus=2"
    log = open(tmp_path / "master.log", "w")
    master = subprocess.Popen(
        ["tfmesos", "local-master", "--port", str(port), "--no-docker", "--agent", gpu_agent,
         "--agent", gpu_agent, *marked_tasks()],
        stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        wait_for_line(master.stdout, "listening on", timeout=30)
        state = requests.get("http://127.0.0.1:%d/master/state" % port, timeout=5).json()
        assert state["flags"]["filter_gpu_resources"] == "true"
        assert [s["resources"]["gpus"] for s in state["slaves"]] == [2, 2]
        result = hello_run("127.0.0.1:%d" % port, "-w", "2", "-s", "1", "-Cw", "0.5",
                           "-Cs", "0.5", *SMALL_TASKS)
        assert result.returncode == 0, result.stderr
        state = requests.get("http://127.0.0.1:%d/master/state" % port, timeout=5).json()
        tasks = state["completed_frameworks"][0]["completed_tasks"]
        assert len(tasks) == 3
        assert all(t["resources"].get("gpus", 0) == 0 for t in tasks)
    finally:
        master.terminate()
        master.wait(30)
        log.close()
    assert master.returncode == 0


def test_an_agent_removed_mid_run_fails_the_run_in_seconds(make_local_master):
    master = make_local_master(agents=three_agents())
    with start_tfrun("-m", master.url, "-w", "2", "-s", "1", "-Cw", "2", "-Cs", "2",
                     *SMALL_TASKS, "--", "sleep 120") as proc:
        wait_for_line(proc.stderr, "cluster ready", timeout=60)
        running = [t for t in master.state()["frameworks"][0]["tasks"]
                   if t["state"] == "TASK_RUNNING"]
        assert len({t["slave_id"] for t in running}) == 3
        victim = running[0]
        started = time.monotonic()
        master.remove_agent(victim["slave_id"])
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("tfrun did not end within 60 s of losing an agent")
        elapsed = time.monotonic() - started
        err = proc.stderr.read()
    assert proc.returncode != 0
    # From TASK_LOST, not after the 40 s a dropped task has to re-register.
    assert elapsed < 25, "tfrun took %.1f s to fail" % elapsed
    assert "TASK_LOST" in err, err
    wait_until(lambda: not leftover_processes(master),
               message=lambda: "left: %s" % leftover_processes(master))
    assert not [t for f in master.state()["frameworks"] for t in f["tasks"]]
