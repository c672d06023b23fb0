"""The embedded agents' network namespaces are named for their master as its
work directory and cgroups are (``<pid namespace>.<pid>.<start>``), and a
master judges only those of its own pid namespace (``netns.remove_stale``):
one in a new pid namespace took a live host master's for a gone one's
(its pid is none there) and would have deleted them under its agents."""

import os

from mesos_local import cleanup
from mesos_local.containerizer import netns


def swept(monkeypatch, names, namespace):
    """What ``remove_stale`` removes of ``names``, seen from ``namespace``."""
    monkeypatch.setattr(netns, "namespace_names", lambda: list(names))
    monkeypatch.setattr(cleanup, "_pid_namespace", lambda: namespace)
    removed = []
    monkeypatch.setattr(netns, "remove_namespace", lambda name, kill=False: removed.append(name))
    assert netns.remove_stale() == removed
    return sorted(removed)


def test_only_the_network_namespaces_of_this_pid_namespaces_gone_masters_are_removed(
        monkeypatch):
    here, start = os.getpid(), cleanup.process_start(os.getpid())
    initial, other = 4026531836, 4026532180
    names = {
        "live here": "mesos-local-%d.%d.%d-200-1-hub" % (initial, here, start),
        "gone here": "mesos-local-%d.%d.%d-200-2-hub" % (initial, here, start + 1),
        "another namespace's": "mesos-local-%d.1.5-200-3-a0" % other,
        "old, gone": "mesos-local-999999999-200-4-hub",
        "old, live": "mesos-local-%d-200-5-hub" % here,
    }
    assert swept(monkeypatch, names.values(), initial) == sorted(
        [names["gone here"], names["old, gone"]])
    # From another pid namespace: its own only; the older names (pids of
    # whichever namespace made them) are not its to judge.
    mine = "mesos-local-%d.%d.%d-200-6-hub" % (other, here, start + 1)
    theirs = [name for key, name in names.items() if key != "another namespace's"]
    assert swept(monkeypatch, [*theirs, mine], other) == [mine]


def test_a_masters_network_namespaces_carry_its_pid_namespace(monkeypatch):
    monkeypatch.setattr(netns, "check_supported", lambda: None)
    network = netns.AgentNetwork(subnet=netns.ipaddress.ip_network("10.201.7.0/24"))
    assert network.hub == "mesos-local-%s-201-7-hub" % cleanup.this_master()
    assert netns._NAME.match(network.hub)
