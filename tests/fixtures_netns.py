"""What the tests with agents in network namespaces share (``tfmesos
local-master --netns``; root only). Import the fixture into a test module::

    from fixtures_netns import namespaces  # noqa: F401

* ``namespaces``: a list to append the pids of master processes to; removes
  leftovers of crashed runs first, and fails a test (after removing them)
  that leaves a namespace of its own, or of those masters, behind.
* ``netns_master(log_path, agents, hidden)``: a ``tfmesos local-master --netns``
  process and what it printed about its network.
"""

import contextlib
import os
import re
import subprocess
import threading

import pytest
from tfrun_helpers import REPO, marked_tasks

from mesos_local.containerizer import netns

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


@pytest.fixture
def namespaces():
    """A list to append the pids of master processes to; the namespaces of
    this process and of those must all be gone after the test."""
    if os.geteuid() == 0:
        netns.remove_stale()
    owners = [os.getpid()]
    yield owners
    left = [name for name in netns.namespace_names() if netns.master_pid(name) in owners]
    for name in left:
        netns.remove_namespace(name, kill=True)
    assert not left, "network namespaces left behind: %s" % left


def read_lines(stream, count, timeout):
    """The first ``count`` lines of ``stream``, or AssertionError after ``timeout`` s."""
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(
        stream.readline() for _ in range(count)), daemon=True)
    reader.start()
    reader.join(timeout)
    assert not reader.is_alive(), "no %d lines within %s s" % (count, timeout)
    return lines


def parse_network(lines):
    """(hub namespace, master host:port in the hub, agent addresses, loopback
    port) from what ``tfmesos local-master --netns`` printed."""
    text = "".join(lines)
    port = int(re.search(r"listening on http://127\.0\.0\.1:(\d+)", text).group(1))
    found = re.search(r"network namespaces: hub (\S+), master http://(\S+) there, "
                      r"agents ([\d. ]+)\n", text)
    return found.group(1), found.group(2), found.group(3).split(), port


class NetnsMaster:
    """A running ``tfmesos local-master --netns``: ``process``, ``lines``
    (what it printed first), ``hub``, ``address`` (host:port in the hub),
    ``agents`` (their addresses, agent 0 first) and ``port`` (on loopback)."""

    def __init__(self, process, lines):
        self.process, self.lines = process, lines
        self.hub, self.address, self.agents, self.port = parse_network(lines)

    def agent_link(self, address):
        """The hub's end of the veth of the agent at ``address``: taking it
        down cuts that agent off, silently, as a network partition would."""
        return "v%d" % self.agents.index(address)

    def set_link(self, link, state):
        netns.run_ip("-n", self.hub, "link", "set", link, state)


@contextlib.contextmanager
def netns_master(namespaces, log_path, agents, hidden=()):
    """``tfmesos local-master --netns`` with ``agents`` (--agent specs), its
    tasks marked as this session's, ``hidden`` paths kept from them;
    stopped (and checked to exit 0) after."""
    argv = ["tfmesos", "local-master", "--port", "0", "--netns", "--no-docker"]
    for agent in agents:
        argv += ["--agent", agent]
    for path in hidden:
        argv += ["--hide", str(path)]
    with open(log_path, "w") as log:
        process = subprocess.Popen(argv + marked_tasks(), stdout=subprocess.PIPE, stderr=log,
                                   text=True, cwd=REPO)
    namespaces.append(process.pid)
    try:
        yield NetnsMaster(process, read_lines(process.stdout, 3, timeout=60))
    finally:
        process.terminate()
        process.wait(30)
        process.stdout.close()
    assert process.returncode == 0
