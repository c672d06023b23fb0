"""The address tasks reach tfmesos at: never loopback for a master on
another host (its tasks run elsewhere). No packet leaves this machine: the
remote master's address is only looked at, never contacted."""

import shlex
import time

import pytest
from fixtures_master import make_local_master
from local_addresses import is_this_machine, non_loopback_address
from run_dirs import bare_environ
from tfrun_helpers import run_tfrun

from tfmesos.backends import advertise, embedded, sizing
from tfmesos.backends.embedded import EmbeddedMaster
from tfmesos.backends.remote import RemoteMaster
from tfmesos.core import launch, runtime
from tfmesos.core.jobs import Job
from tfmesos.core.spec import RunSpec
from tfmesos.exceptions import TFMesosError
from tfmesos.ship.bundle import ShipSpec

REMOTE = "http://192.0.2.10:5050"   # TEST-NET-1: documentation only, never routed
NOT_HERE = "192.0.2.7"              # the same, an address of no machine here
AT_ONCE = 20.0                      # seconds: far below a task's 30 s of retries


@pytest.mark.parametrize("explicit", ["127.0.0.1", "localhost", "127.0.1.1", "::1"])
def test_loopback_for_a_remote_master_is_refused(explicit):
    with pytest.raises(TFMesosError, match="cannot reach tfmesos at %s, a loopback address, "
                                           "while the Mesos master 192.0.2.10 is on another "
                                           "host: pass advertise_address" % explicit):
        advertise.advertise_address(explicit, REMOTE, {})


def test_environment_setting_is_checked_too():
    with pytest.raises(TFMesosError, match="loopback"):
        advertise.advertise_address(None, REMOTE, {"TFMESOS_ADVERTISE_ADDRESS": "127.0.0.1"})


def test_reachable_or_local_choices_pass():
    assert advertise.advertise_address(None, "http://127.0.0.1:5050", {}) == "127.0.0.1"
    assert advertise.advertise_address("localhost", "http://localhost:5050", {}) == "localhost"
    assert advertise.advertise_address("::1", "http://[::1]:5050", {}) == "::1"


def test_a_run_with_a_remote_master_and_a_loopback_address_never_starts(monkeypatch):
    def no_driver(*args, **kwargs):
        raise AssertionError("the driver must not be started")
    monkeypatch.setattr(runtime, "MesosSchedulerDriver", no_driver)
    run = launch.ClusterRun(RunSpec(jobs=[Job("worker")], master="192.0.2.10:5050",
                                    advertise_address="127.0.0.1"), environ=bare_environ())
    with pytest.raises(TFMesosError, match="pass advertise_address"):
        run.start()
    assert run.phase == "stopped"


def test_tasks_reach_an_ipv6_advertise_address():
    run = launch.ClusterRun(RunSpec(jobs=[Job("worker", cpus=0.1, mem=64)], launch_timeout=60,
                                    mode="replica", command="true", master="local",
                                    advertise_address="::1"), environ=bare_environ())
    try:
        run.start()
        spec = run.wait_ready()
        assert run.wait_finished() == 0
        assert run.rendezvous.port and spec["worker"][0].startswith("127.0.0.1:")
    finally:
        run.stop()


def test_an_unresolvable_master_names_the_fix():
    with pytest.raises(TFMesosError, match="host name 'no-such-host.invalid' does not resolve "
                                           ".*: fix the master address"):
        advertise.advertise_address(None, "http://no-such-host.invalid:5050", {})


def test_an_address_of_this_machine_passes_for_a_remote_master():
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    assert advertise.advertise_address(address, REMOTE, {}) == address
    assert advertise.advertise_address(None, REMOTE, {"TFMESOS_ADVERTISE_ADDRESS": address}) \
        == address


@pytest.mark.parametrize("given", ["not an addr", "10.0.0.1:5050", "-host", "a..b", "x" * 300])
def test_a_malformed_address_is_refused_at_once_naming_the_fix(given):
    with pytest.raises(TFMesosError) as caught:
        advertise.advertise_address(given, REMOTE, {})
    assert str(caught.value) == (
        "advertise_address=%s is neither an IP address nor a host name: give an address of "
        "this machine (without a port) that the agents can reach" % shlex.quote(given))


def test_an_address_that_is_not_of_this_machine_is_refused():
    if is_this_machine(NOT_HERE):
        pytest.skip("%s is an address of this machine" % NOT_HERE)
    with pytest.raises(TFMesosError) as caught:
        advertise.advertise_address(NOT_HERE, REMOTE, {})
    assert str(caught.value) == (
        "advertise_address=192.0.2.7 is not an address of this machine (no socket here can "
        "bind it): give one of its addresses that the agents can reach")
    with pytest.raises(TFMesosError, match="does not resolve: give an address of this machine"):
        advertise.advertise_address("no-such-host.invalid", REMOTE, {})


def test_the_environment_setting_is_named_when_it_is_wrong():
    with pytest.raises(TFMesosError, match=r"^TFMESOS_ADVERTISE_ADDRESS 'not an addr' is neither"):
        advertise.advertise_address(None, REMOTE, {"TFMESOS_ADVERTISE_ADDRESS": "not an addr"})


def test_the_embedded_master_checks_the_address_before_it_starts(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the embedded master must not start")
    monkeypatch.setattr(sizing, "start_local_master", never)
    for given in ("not an addr", NOT_HERE):
        if is_this_machine(given):
            continue
        master = EmbeddedMaster([Job("worker")], advertise=given)
        with pytest.raises(TFMesosError, match="advertise_address="):
            master.start()
    # Agents in network namespaces of their own are other hosts to the tasks.
    master = EmbeddedMaster([Job("worker")], options={"network_namespaces": True},
                            advertise="127.0.0.1")
    with pytest.raises(TFMesosError, match="cannot reach tfmesos at 127.0.0.1, a loopback "
                                           "address, while the agents are in network "
                                           "namespaces of their own"):
        master.start()
    assert embedded.LOOPBACK == "127.0.0.1"


def test_a_zookeeper_master_checks_a_given_address_before_the_driver_starts(monkeypatch):
    def no_driver(*args, **kwargs):
        raise AssertionError("the driver must not be started")
    monkeypatch.setattr(runtime, "MesosSchedulerDriver", no_driver)
    if is_this_machine(NOT_HERE):
        pytest.skip("%s is an address of this machine" % NOT_HERE)
    run = launch.ClusterRun(RunSpec(jobs=[Job("worker")], master="zk://192.0.2.10:2181/mesos",
                                    advertise_address=NOT_HERE), environ=bare_environ())
    with pytest.raises(TFMesosError, match="is not an address of this machine"):
        run.start()
    # A malformed one is refused when the run is described, before anything.
    with pytest.raises(TFMesosError, match="neither an IP address nor a host name"):
        RunSpec(jobs=[Job("worker")], master="zk://192.0.2.10:2181/mesos",
                advertise_address="not an addr")


@pytest.mark.parametrize("args, env, error", [
    (["-m", "192.0.2.10:5050", "--advertise-address", "127.0.0.1"], {},
     "cannot reach tfmesos at 127.0.0.1, a loopback address"),
    (["-m", "192.0.2.10:5050", "--advertise-address", NOT_HERE], {},
     "--advertise-address 192.0.2.7 is not an address of this machine"),
    (["-m", "192.0.2.10:5050"], {"TFMESOS_ADVERTISE_ADDRESS": "not an addr"},
     "TFMESOS_ADVERTISE_ADDRESS 'not an addr' is neither"),
    (["--advertise-address", "not an addr"], {},
     "--advertise-address 'not an addr' is neither an IP address nor a host name"),
], ids=["loopback", "not-here", "environment", "embedded"])
def test_tfrun_refuses_a_wrong_address_at_once_in_one_line(args, env, error, tmp_path):
    """A usage error (exit 2): nothing started, no run directory."""
    if NOT_HERE in args and is_this_machine(NOT_HERE):
        pytest.skip("%s is an address of this machine" % NOT_HERE)
    started = time.monotonic()
    result = run_tfrun(*args, "-w", "1", "-s", "0", "-Cw", "0.1", "-Mw", "64", "--", "true",
                       timeout=60, env=dict(env, TFMESOS_RUNS_DIR=str(tmp_path)))
    assert time.monotonic() - started < AT_ONCE
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("tfrun: error: ") and error in errors[0], \
        result.stderr
    assert "Traceback" not in result.stderr and list(tmp_path.iterdir()) == []


# -- where the run listens: the advertised address, not every interface ------------

class IdleDriver:
    """A driver that never contacts the master: the run's listeners are
    what these tests look at."""

    master = None
    connected = False

    def __init__(self, *args, **kwargs):
        pass

    def start(self):
        pass

    def stop(self, *args, **kwargs):
        pass

    def join(self, timeout=None):
        pass


@pytest.mark.parametrize("given", [False, True], ids=["derived", "given"])
def test_a_remote_masters_run_listens_only_at_the_advertised_address(given, monkeypatch,
                                                                     tmp_path):
    """The rendezvous and the bundle server bind the address tasks are told
    (the route's towards the master, or --advertise-address): not 0.0.0.0."""
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    monkeypatch.setattr(runtime, "MesosSchedulerDriver", IdleDriver)
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('hello')\n")
    run = launch.ClusterRun(RunSpec(jobs=[Job("worker")], master=REMOTE[len("http://"):],
                                    advertise_address=address if given else None,
                                    ship=ShipSpec(str(project)), run_dir=None), environ=bare_environ())
    try:
        run.start()
        assert run.backend.advertised_address(REMOTE) == address
        assert run.rendezvous._listener.getsockname()[0] == address
        assert run.shipment.server._server.socket.getsockname()[0] == address
    finally:
        run.stop()


def test_what_each_backend_binds():
    assert RemoteMaster("zk://192.0.2.10:2181/mesos").bind_host() is None   # leader unknown
    assert RemoteMaster("zk://192.0.2.10:2181/mesos", "127.0.0.1").bind_host() == "127.0.0.1"
    assert RemoteMaster("zk://192.0.2.10:2181/mesos", None, {
        "TFMESOS_ADVERTISE_ADDRESS": "::1"}).bind_host() == "::1"
    assert RemoteMaster("127.0.0.1:5050").bind_host() == "127.0.0.1"   # the route's
    # The embedded master's own runs keep loopback; a given address is bound.
    assert EmbeddedMaster([Job("worker")]).bind_host() == embedded.LOOPBACK
    assert EmbeddedMaster([Job("worker")], advertise="::1").bind_host() == "::1"
    assert EmbeddedMaster([Job("worker")], advertise="localhost").bind_host() == "127.0.0.1"


def test_through_zookeeper_tasks_get_the_route_towards_the_leader_not_zookeeper():
    # Through zk:// the address was the route's towards ZooKeeper, kept for
    # the tasks: with ZooKeeper on loopback and the leader elsewhere, the
    # tasks were handed 127.0.0.1; with two ZooKeeper servers it raised
    # ValueError ("Port could not be cast to integer value").
    here = non_loopback_address()
    if here is None:
        pytest.skip("this machine has no address but loopback")
    master = "zk://127.0.0.1:2181,localhost:2181/mesos"
    backend = RemoteMaster(master)
    assert backend.advertised_address(master) == "127.0.0.1"    # before the leader is known
    leader = "http://%s:5050" % here
    assert backend.advertised_address(leader) == here
    assert backend.advertised_address(master) == "127.0.0.1"    # never kept
    assert backend.advertised_address(leader) == here


def test_a_host_name_binds_the_one_address_it_names_here():
    assert advertise.bind_address("127.0.0.1") == "127.0.0.1"
    assert advertise.bind_address("fe80::1%lo") == "fe80::1%lo"
    assert advertise.bind_address("localhost") == "127.0.0.1"   # 127.0.0.1 first of loopbacks
    address = non_loopback_address()
    if address is not None:
        assert advertise.bind_address(address) == address



def with_hosts(hosts, code, ipv6=None):
    """What ``code`` prints, run by Python in a mount namespace of its own
    whose /etc/hosts is ``hosts`` (as root; skipped without unshare);
    ``ipv6``: an address given to loopback in a network namespace of its
    own too."""
    import os
    import subprocess
    import sys
    import tempfile
    if os.geteuid() != 0:
        pytest.skip("needs root: a mount namespace with an /etc/hosts of its own")
    with tempfile.NamedTemporaryFile("w", suffix=".hosts") as table:
        table.write(hosts)
        table.flush()
        setup = 'mount --bind "$0" /etc/hosts && exec "$@"'
        if ipv6:
            setup = "ip link set lo up && ip -6 addr add %s/128 dev lo nodad && %s" % (ipv6,
                                                                                     setup)
        done = subprocess.run(
            ["unshare", "--mount"] + (["--net"] if ipv6 else []) + [
                "sh", "-c", setup, table.name, sys.executable, "-c", code],
            capture_output=True, text=True, timeout=60)
    if done.returncode != 0 and "unshare" in done.stderr.split(":")[0]:
        pytest.skip("no mount namespace here: %s" % done.stderr.strip())
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


IPV4_MASTER = """
import socket
from tfmesos.backends import advertise
from tfmesos.backends.remote import RemoteMaster
master = socket.socket()
master.bind(("127.0.0.1", 0))   # as a Mesos master: IPv4 only
master.listen(8)
port = master.getsockname()[1]
"""


def test_a_master_name_of_both_families_is_routed_as_its_connection_goes():
    # A name with an IPv6 and an IPv4 address lists the IPv6 one first; a
    # Mesos master listens on IPv4 only (src/slave/flags.cpp, --ip6). The
    # tasks were told the route's address towards the IPv6 one and could not
    # register ("Network is unreachable"), three attempts each.
    assert with_hosts("::1 masterhost\n127.0.0.1 masterhost\n", IPV4_MASTER + """
print(advertise.advertise_address(None, "http://masterhost:%d" % port, {}))
print(RemoteMaster("masterhost:%d" % port).bind_host())
""") == ["127.0.0.1", "127.0.0.1"]


def test_a_list_of_masters_advertises_the_route_towards_the_leader():
    # The route towards the first master listed was kept for good, where the
    # leader was the second: tasks told [fd00:2::1]:P, unreachable.
    assert with_hosts("::1 m1\n127.0.0.1 m2\n", IPV4_MASTER + """
backend = RemoteMaster("m1:%d,m2:%d" % (port, port))
backend.check()
print(backend.bind_host())   # every address until the leader is known
print(backend.advertised_address("http://m2:%d" % port))
""") == ["None", "127.0.0.1"]


def test_a_zookeeper_server_whose_name_no_longer_resolves_is_passed_over():
    # An ensemble runs without it, and the detector skips it; tfrun stopped
    # at once: "the Mesos master's host name 'gone' does not resolve".
    master = "zk://nosuch-zk.invalid:2181,127.0.0.1:2181/mesos"
    assert RemoteMaster(master).advertised_address(master) == "127.0.0.1"
    with pytest.raises(TFMesosError, match="^the ZooKeeper server's host name "
                                           "'nosuch-zk.invalid' does not resolve"):
        master = "zk://nosuch-zk.invalid:2181/mesos"
        RemoteMaster(master).advertised_address(master)


def test_only_a_loopback_address_towards_agents_on_other_hosts_is_unreachable():
    backend = RemoteMaster("127.0.0.1:5050")
    assert backend.unreachable_from("127.0.0.1", "127.0.0.1") is None      # an agent here
    assert backend.unreachable_from("nosuch-agent.invalid", "127.0.0.1") is None  # cannot tell
    assert backend.unreachable_from(NOT_HERE, "192.0.2.1") is None   # not loopback: given
    error = backend.unreachable_from(NOT_HERE, "127.0.0.1")
    assert str(error).startswith("tasks on the agent at %s, another host, cannot reach tfmesos "
                                 "at 127.0.0.1, a loopback address" % NOT_HERE)


def test_a_name_of_an_ipv6_address_only_gets_a_free_port():
    # cluster(coordinator=True) with such an advertised name: a traceback
    # (socket.gaierror) once the whole cluster had formed; an IPv4 socket was
    # bound to the name. (A name of ::1 hides it: glibc gives 127.0.0.1 for
    # an IPv4 lookup of it.)
    assert with_hosts("fd00:1::1 v6host\n", """
from tfmesos.protocol.hostport import free_port
print(free_port("v6host") > 0)
""", ipv6="fd00:1::1") == ["True"]


def test_the_local_master_listens_at_a_name_of_an_ipv6_address_only():
    # tfmesos local-master --host v6host: "cannot listen on v6host:5754:
    # Temporary failure in name resolution", a name its check had taken.
    assert with_hosts("fd00:1::1 v6host\n", """
from mesos_local import LocalMaster
with LocalMaster(host="v6host", agents=[]) as master:
    print(master.url)
""", ipv6="fd00:1::1")[0].startswith("http://[fd00:1::1]:")


def test_a_local_master_on_an_ipv6_address_publishes_where_it_listens():
    # local-master --host ::1 published "ip": "127.0.0.1" (nothing listened
    # there) and the host name "[::1]", which the master's own readers of a
    # MasterInfo refused over https ("no host name or IP address").
    import json

    from mesos_local.api.state_json import render_master_info
    from tfmesos.mesos.master_info import master_url_from_info
    info = render_master_info("m", "[::1]", 5051)
    assert info["address"] == {"hostname": "::1", "ip": "::1", "port": 5051}
    assert info["hostname"] == "::1" and info["pid"] == "master@[::1]:5051"
    assert master_url_from_info(json.dumps(info)) == "http://[::1]:5051"
    assert master_url_from_info(json.dumps(info), "https") == "https://[::1]:5051"


def test_an_agent_here_under_a_foreign_host_name_runs_with_the_address_given(make_local_master):
    # An agent's --hostname may name a NAT's public address: the agent on
    # this very host is judged another's (read-through of e1861ce); the
    # error names the way out, an address given, which is then taken as is.
    from mesos_local import AgentSpec
    assert RemoteMaster("127.0.0.1:5050", "127.0.0.1").unreachable_from(
        NOT_HERE, "127.0.0.1") is None
    assert RemoteMaster("127.0.0.1:5050", None, {"TFMESOS_ADVERTISE_ADDRESS": "127.0.0.1"}
                        ).unreachable_from(NOT_HERE, "127.0.0.1") is None
    master = make_local_master(agents=[AgentSpec(hostname=NOT_HERE, cpus=2, mem=1024, gpus=0)])
    args = ("-m", "127.0.0.1:%d" % master.port, "-w", "1", "-s", "0", "-Cw", "0.2", "-Mw", "64",
            "-E", "TFMESOS_TASK_HOST=127.0.0.1", "--", "echo", "ran")
    refused = run_tfrun(*args)
    assert refused.returncode == 1 and refused.stderr.splitlines()[0].endswith(
        "(127.0.0.1 if they run on this host)"), refused.stderr
    done = run_tfrun("--advertise-address", "127.0.0.1", *args)
    assert done.returncode == 0 and "[worker:0] ran" in done.stdout, done.stderr


def test_a_local_master_at_a_name_of_an_ipv6_address_only_publishes_that_address():
    # It listened at the name's IPv6 address and published 127.0.0.1
    # (read-through of 3736e29).
    info = with_hosts("fd00:1::1 v6host\n", """
import json
from mesos_local.api.state_json import render_master_info
print(json.dumps(render_master_info("m", "v6host", 5051)["address"]).replace(" ", ""))
""", ipv6="fd00:1::1")
    assert info == ['{"hostname":"v6host","ip":"fd00:1::1","port":5051}']
