"""Agents in their own network namespaces (``LocalMaster(network_namespaces=
True)``, ``tfmesos local-master --netns``): tasks on distinct addresses that
reach the scheduler only over the hub's bridge, as on a real cluster.

Every test but the first needs root (CI runs as root). Traffic goes only to
loopback and to addresses inside the namespaces the masters make: nothing
here connects to a 10.X.Y address from this host's own namespace. The
``namespaces`` fixture (``fixtures_netns``) removes leftovers of crashed runs
first and fails a test (after removing them) that leaves a namespace of its
own behind.
"""

import json
import os
import re
import subprocess
import sys
import time

import pytest
import requests
from fixtures_master import clients, make_local_master, small_agent
from fixtures_netns import namespaces, netns_master, parse_network, read_lines, root_only
from mesos_http_client import task_info
from tfrun_helpers import REPO, marked_tasks, run_tfrun, tfrun_argv

from mesos_local import LocalMaster, LocalMasterError
from mesos_local import command_line as cli
from mesos_local.containerizer import netns

pytestmark = pytest.mark.timeout(120)


def ours(names):
    return [name for name in names if netns.master_pid(name) == os.getpid()]


def test_without_root_netns_is_a_one_line_error(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(netns.NetnsError, match="network namespaces need root: run as root"):
        LocalMaster(network_namespaces=True)
    assert cli.main(["--netns", "--port", "0", "--no-docker"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["mesos-local: error: network namespaces need root: run as root (sudo mesos-local "
                   "--netns) or drop --netns / network_namespaces"]


@root_only
def test_an_agent_hostname_cannot_be_combined_with_namespaces(namespaces):
    with pytest.raises(LocalMasterError, match="each agent's hostname is its address"):
        LocalMaster(agents=[small_agent(hostname="node1")], network_namespaces=True)


@root_only
def test_each_agent_has_its_own_address_and_reaches_only_the_hub(namespaces, make_local_master,
                                                                clients):
    master = make_local_master(agents=[small_agent(), small_agent()], network_namespaces=True)
    network = master.network
    addresses = [address for _, address in sorted(network.agents.values())]
    subnet = network.subnet
    assert str(subnet).startswith("10.") and 200 <= int(str(subnet).split(".")[1]) <= 250
    assert network.hub_address == str(subnet.network_address + 1)
    assert addresses == [str(subnet.network_address + 2), str(subnet.network_address + 3)]
    assert [s["hostname"] for s in master.state()["slaves"]] == addresses
    assert master.hub_url == "http://%s:%d" % (network.hub_address, master.port)
    assert sorted(ours(netns.namespace_names())) == sorted(
        [network.hub] + [name for name, _ in network.agents.values()])
    # Each task: its own address, the master at the hub, not this host's loopback.
    probe = ("import socket, urllib.request\n"
             "print(urllib.request.urlopen('%s/health', timeout=5).status)\n"
             "try:\n socket.create_connection(('127.0.0.1', %d), timeout=2)\n"
             "except ConnectionRefusedError:\n print('loopback is its own')\n"
             % (master.hub_url, master.port))
    client = clients(master)
    offers = {o["hostname"]: o for o in client.next_offers()}
    assert sorted(offers) == addresses
    for address, offer in offers.items():
        command = "hostname -I; %s -c \"$PROBE\"" % sys.executable
        client.launch(offer, [task_info("on-" + address, offer, command,
                                        env={"PROBE": probe})])
    for address in addresses:
        client.wait_state("on-" + address, "TASK_FINISHED")
        with open(os.path.join(master.sandbox("on-" + address), "stdout")) as handle:
            assert handle.read().split() == [address, "200", "loopback", "is", "its", "own"]
    late = master.add_agent(small_agent())       # while running: a namespace of its own
    assert [s["hostname"] for s in master.state()["slaves"] if s["id"] == late] == [
        str(subnet.network_address + 4)]
    assert len(ours(netns.namespace_names())) == 4
    master.stop()
    assert ours(netns.namespace_names()) == []


@root_only
def test_leftovers_of_a_killed_master_are_removed(namespaces, monkeypatch):
    # Under a prefix of this test's own: every master that starts meanwhile
    # (the other lanes of the suite) sweeps the real prefix's leftovers too,
    # and once took the agent's namespace before this sweep listed it.
    prefix = "mesos-localtest%d-" % os.getpid()
    monkeypatch.setattr(netns, "_NAME", re.compile(
        r"^%s(\d+)-(\d+)-(\d+)-(hub|a\d+)\Z" % re.escape(prefix)))
    gone = subprocess.Popen(["true"])
    gone.wait()
    agent = "%s%d-200-0-a0" % (prefix, gone.pid)
    hub = "%s%d-200-0-hub" % (prefix, gone.pid)
    netns.run_ip("netns", "add", hub)
    netns.run_ip("netns", "add", agent)
    orphan = subprocess.Popen(["ip", "netns", "exec", agent, "sleep", "60"])
    try:
        deadline = time.monotonic() + 10   # until it is inside the namespace
        while not netns.run_ip("netns", "pids", agent).split():
            assert time.monotonic() < deadline, "the orphan never entered its namespace"
            time.sleep(0.05)
        removed = netns.remove_stale()
        assert sorted(removed) == sorted([agent, hub])
        assert orphan.wait(10) == -9
        assert not {agent, hub} & set(netns.namespace_names())
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()
        for name in {agent, hub} & set(netns.namespace_names()):
            netns.remove_namespace(name, kill=True)


def run_in_hub(hub, argv, env, timeout):
    try:
        return subprocess.run(["ip", "netns", "exec", hub] + argv, cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail("%s did not finish within %d s: %s" % (argv, timeout, exc.stderr))


def check_replica_run(hub, master, agents):
    env = dict(os.environ, MESOS_MASTER="")
    result = run_in_hub(hub, tfrun_argv(
        "-m", master, "-w", "2", "-s", "1", "-Cw", "2", "-Cs", "2", "-Mw", "128", "-Ms", "128",
        "--", "echo {job_name}:{task_index} $(hostname -I)"), env, timeout=90)
    assert result.returncode == 0, result.stderr
    spec = json.loads(re.search(r"tfrun: cluster ready: (.*)", result.stderr).group(1))
    print("cluster spec: %s" % json.dumps(spec))
    # tfrun shows the workers' output (--worker-logs '*'): each its own address.
    printed = dict(re.findall(r"^\[\S+\] (\w+:\d) (\S+)$", result.stdout, re.M))
    assert sorted(printed) == ["worker:0", "worker:1"], result.stdout
    hosts = {"%s:%d" % (job, index): address.rsplit(":", 1)[0]
             for job, addresses in spec.items() for index, address in enumerate(addresses)}
    assert sorted(hosts) == ["ps:0", "worker:0", "worker:1"]
    assert sorted(hosts.values()) == sorted(agents)        # one task per agent
    for slot, address in printed.items():
        assert hosts[slot] == address


@pytest.mark.tensorflow
@root_only
@pytest.mark.timeout(300)
def test_tfrun_and_tensorflow_across_agent_namespaces(tmp_path, namespaces):
    agent = "cpus=2,mem=1500,gpus=0"     # one 1024 MB task of plus.py per agent
    with netns_master(namespaces, tmp_path / "master.log", [agent] * 3) as master:
        hub, address, agents, port = master.hub, master.address, master.agents, master.port
        assert len(set(agents)) == 3 and "ip netns exec %s SCHEDULER, with the master at %s" % (
            hub, address) in "".join(master.lines)
        check_replica_run(hub, address, agents)
        plus = run_in_hub(hub, [sys.executable, "examples/plus.py"],
                          dict(os.environ, MESOS_MASTER=address), timeout=180)
        assert plus.returncode == 0, plus.stderr[-3000:]
        assert plus.stdout.split() == ["42"], plus.stdout
        state = requests.get("http://127.0.0.1:%d/master/state" % port, timeout=5).json()
        hosts = {s["id"]: s["hostname"] for s in state["slaves"]}
        last = state["completed_frameworks"][-1]["completed_tasks"]
        assert len({hosts[t["slave_id"]] for t in last}) == 2   # ps and worker apart


@root_only
def test_a_loopback_route_towards_a_master_here_fails_once_an_agent_elsewhere_is_used(
        tmp_path, namespaces):
    # tfrun on the master's host (-m 127.0.0.1:5050) told the agents' tasks
    # to reach it at 127.0.0.1, the route towards the master: three attempts
    # of 30 s each failed "Connection refused" before a hint after 81 s.
    with netns_master(namespaces, tmp_path / "master.log", ["cpus=1,mem=500,gpus=0"]) as master:
        started = time.monotonic()
        done = run_tfrun("-m", "127.0.0.1:%d" % master.port, "-w", "1", "-s", "0", "-Cw", "0.2",
                         "-Mw", "64", "--", "true", timeout=90)
        took = time.monotonic() - started
    errors = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr
    assert errors[0] == (
        "tfrun: error: tasks on the agent at %s, another host, cannot reach tfmesos at "
        "127.0.0.1, a loopback address (the route towards the Mesos master on this host): pass "
        "--advertise-address (or set TFMESOS_ADVERTISE_ADDRESS) with an address of this host "
        "that the agents can reach (127.0.0.1 if they run on this host)" % master.agents[0]), \
        done.stderr
    assert "relaunching" not in done.stderr and took < 60, (took, done.stderr)


SHIPPED_SCRIPT = """\
import os, sys
import tfmesos
from helpers.answer import ANSWER
print("answer", ANSWER, "prefix", sys.prefix)
print("tfmesos", tfmesos.__file__)
print("hidden", *(sorted(os.listdir(path)) if os.path.isdir(path) else "gone"
                  for path in sys.argv[1:]))
"""


@root_only
@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"),
                    reason="needs a Python outside the home directory: /usr/bin/python3")
@pytest.mark.timeout(300)
def test_a_shipped_project_runs_on_agents_that_share_no_files(tmp_path, namespaces):
    # Agents on hosts of their own: their tasks see neither the project, nor
    # this checkout, nor the home directory (isolate=fs); the interpreter is
    # a venv without tfmesos (nor the home directory's Python behind it).
    project, venv = tmp_path / "proj", tmp_path / "venv"
    (project / "helpers").mkdir(parents=True)
    (project / "helpers" / "__init__.py").write_text("")
    (project / "helpers" / "answer.py").write_text("ANSWER = 42\n")
    (project / "myscript.py").write_text(SHIPPED_SCRIPT)
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    hidden = [str(project), REPO, os.path.expanduser("~")]
    agent = "cpus=2,mem=1000,gpus=0,isolate=fs"
    with open(tmp_path / "master.log", "w") as log:
        master = subprocess.Popen(
            ["tfmesos", "local-master", "--port", "0", "--netns", "--no-docker",
             "--agent", agent, "--agent", agent, *(f for path in hidden for f in ("--hide", path)),
             *marked_tasks()], stdout=subprocess.PIPE, stderr=log, text=True)
    namespaces.append(master.pid)
    try:
        hub, address, agents, _ = parse_network(read_lines(master.stdout, 3, timeout=60))
        argv = ["ip", "netns", "exec", hub] + tfrun_argv(
            "-m", address, "--ship", "--python", python, "-w", "2", "-s", "1", "-Cw", "0.5",
            "-Cs", "0.5", "-Mw", "128", "-Ms", "128", "--", python, "myscript.py", *hidden)
        env = dict(os.environ, MESOS_MASTER="", PYTHONPATH=REPO)
        try:
            result = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True,
                                    timeout=120)
        except subprocess.TimeoutExpired as exc:
            pytest.fail("tfrun --ship did not finish within 120 s: %s" % exc.stderr)
    finally:
        master.terminate()
        master.wait(30)
        master.stdout.close()
    assert result.returncode == 0, result.stderr + (tmp_path / "master.log").read_text()[-3000:]
    assert "tfrun: shipped 3 files" in result.stderr
    out = result.stdout.splitlines()
    print("\n".join(out))
    assert sorted(line.split("] ", 1)[1] for line in out if "answer" in line) == [
        "answer 42 prefix %s" % venv] * 2
    loaded = [line.split("tfmesos ", 1)[1] for line in out if "] tfmesos " in line]
    assert len(loaded) == 2 and all(
        "/executors/" in path and "/runs/" in path and path.endswith(
            (".zip/tfmesos/__init__.py", ".zip/tfmesos/__init__.pyc"))   # its bytecode, or not
        for path in loaded)
    assert [line.split("] ", 1)[1] for line in out if "hidden" in line] == [
        "hidden [] [] []"] * 2
    assert master.returncode == 0
