"""Agents on distinct "hosts": one Linux network namespace per agent
(``LocalMaster(network_namespaces=True)``, ``mesos-local --netns``).

The topology of one master, all of it in namespaces this module creates::

    hub namespace  mesos-local-PID-X-Y-hub: lo, bridge br0 at 10.X.Y.1/24
      veth vI <-> eth0 of agent namespace mesos-local-PID-X-Y-aI at 10.X.Y.(I+2)/24

``X.Y`` is drawn at random from 10.200-250.*, avoiding every address and
route of this host. No namespace gets a default route and nothing links
to the root namespace: traffic goes only to loopback and between these
namespaces, as between the hosts of a small cluster. The master also
listens at 10.X.Y.1 inside the hub, so a scheduler run there
(``ip netns exec HUB SCHEDULER --master 10.X.Y.1:PORT``) reaches it, and tasks reach
that scheduler at 10.X.Y.1. Each agent's hostname is its address; its tasks
start under ``ip netns exec``.

Names carry the creating master as its work directory and cgroups do
(``cleanup.this_master()``: its pid namespace, pid and start time):
``remove_stale()`` deletes the namespaces of masters of its own pid
namespace that are gone (killed with SIGKILL), never another pid
namespace's (a pid there names another process here, or none). Older names
carry the pid alone: judged only from the host's initial pid namespace.
Everything here needs root and iproute2's ``ip``.
"""

import ipaddress
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import threading

from .. import cleanup
from ..errors import LocalMasterError
from .cgroups import INITIAL_PID_NAMESPACE

log = logging.getLogger(__name__)

PREFIX = "mesos-local-"
NETNS_DIR = "/run/netns"
CLONE_NEWNET = 0x40000000
POOL = (200, 250)                 # 10.200.*.* to 10.250.*.*
MAX_AGENTS = 253                  # 10.X.Y.2 to 10.X.Y.254
# mesos-local-MASTER-X-Y-(hub|aI), MASTER ``<pid namespace>.<pid>.<start>``
# (or, as older ones named it, the pid alone)
_NAME = re.compile(r"^mesos-local-(\d+\.\d+\.\d+|\d+)-(\d+)-(\d+)-(hub|a\d+)\Z")
_TIMEOUT = 30


class NetnsError(LocalMasterError):
    """Network namespaces cannot be set up."""


def ip_command():
    """The absolute path of iproute2's ``ip``; NetnsError naming the fix."""
    path = shutil.which("ip") or next(
        (p for p in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip") if os.path.exists(p)),
        None)
    if path is None:
        raise NetnsError("network namespaces need iproute2's ip command: install iproute2 "
                         "(apt-get install iproute2)")
    return path


def check_supported():
    """NetnsError (one line naming the fix) unless this process can make namespaces."""
    if os.geteuid() != 0:
        raise NetnsError("network namespaces need root: run as root (sudo mesos-local "
                         "--netns) or drop --netns / network_namespaces")
    if not os.path.exists("/proc/self/ns/net"):
        raise NetnsError("this kernel has no network namespaces (/proc/self/ns/net): drop "
                         "--netns / network_namespaces")
    ip_command()


def run_ip(*args, stdin=None):
    """Run ``ip ARGS``; NetnsError with its message when it fails. Returns stdout."""
    argv = [ip_command()] + list(args)
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                              timeout=_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetnsError("%s failed: %s" % (" ".join(argv), exc)) from None
    if done.returncode != 0:
        raise NetnsError("%s failed: %s" % (" ".join(argv), done.stderr.strip()))
    return done.stdout


def _setns(fd):
    if hasattr(os, "setns"):           # Python >= 3.12
        os.setns(fd, CLONE_NEWNET)  # novermin (guarded: Python >= 3.12)
        return
    import ctypes  # only runs with network namespaces need it

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def call_in_namespace(name, function, *args):
    """``function(*args)`` on a thread that joined namespace ``name``; its
    result (or exception). A socket stays in the namespace it was made in."""
    outcome = {}

    def run():
        try:
            fd = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY | os.O_CLOEXEC)
            try:
                _setns(fd)          # this thread only; it ends right after
            finally:
                os.close(fd)
            outcome["value"] = function(*args)
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="netns-%s" % name, daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def namespace_names():
    """The names of this host's named network namespaces."""
    try:
        return sorted(os.listdir(NETNS_DIR))
    except OSError:
        return []


def master_pid(name):
    """The pid of the master that made the namespace ``name``, else None."""
    match = _NAME.match(name)
    if match is None:
        return None
    master = match.group(1)
    return int(master.split(".")[1] if "." in master else master)


def _master_gone(master):
    """Whether the master a name carries (``ns.pid.start``, or an older
    name's pid) is gone, as this pid namespace can tell."""
    if "." in master:
        return cleanup.master_gone(master)
    return cleanup._pid_namespace() == INITIAL_PID_NAMESPACE and not _pid_alive(int(master))


def _pid_alive(pid):
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def remove_namespace(name, kill=False):
    """Delete ``name`` (with ``kill``: SIGKILL the processes in it first).
    Best effort: failures are logged."""
    if kill:
        try:
            pids = run_ip("netns", "pids", name).split()
        except NetnsError:
            pids = []
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
    try:
        run_ip("netns", "delete", name)
    except NetnsError as exc:
        log.warning("cannot delete network namespace %s: %s", name, exc)


def remove_stale(owner=None):
    """Delete the mesos-local namespaces whose creating process is gone (or,
    given ``owner``, those of that pid); their agents' processes are
    killed first. Returns the names removed."""
    removed = []
    for name in namespace_names():
        match = _NAME.match(name)
        if match is None:
            continue
        if owner is not None:
            if master_pid(name) != owner:
                continue
        elif not _master_gone(match.group(1)):
            continue
        remove_namespace(name, kill=match.group(4) != "hub")
        removed.append(name)
    if removed:
        log.info("removed leftover network namespaces: %s", ", ".join(removed))
    return removed


def used_networks():
    """The IPv4 networks of this host's addresses and routes (no default)."""
    networks = []
    for entry in json.loads(run_ip("-j", "-4", "addr", "show") or "[]"):
        for info in entry.get("addr_info", ()):
            networks.append(ipaddress.ip_network(
                "%s/%s" % (info["local"], info.get("prefixlen", 32)), strict=False))
    for route in json.loads(run_ip("-j", "-4", "route", "show", "table", "all") or "[]"):
        dst = route.get("dst", "default")
        if dst != "default":
            try:
                networks.append(ipaddress.ip_network(dst, strict=False))
            except ValueError:
                continue
    return networks


def pick_subnet(rng=None, tries=200):
    """A free 10.X.Y.0/24 with X in 200-250: no address or route of this host
    and no other mesos-local hub uses it. NetnsError when none is found."""
    rng = rng or random.SystemRandom()
    used = used_networks()
    taken = {(int(m.group(2)), int(m.group(3)))
             for m in map(_NAME.match, namespace_names()) if m}
    for _ in range(tries):
        x, y = rng.randint(*POOL), rng.randint(0, 255)
        subnet = ipaddress.ip_network("10.%d.%d.0/24" % (x, y))
        if (x, y) not in taken and not any(subnet.overlaps(n) for n in used):
            return subnet
    raise NetnsError("no free 10.%d-%d.*.0/24 subnet for the agents' namespaces (this host's "
                     "routes cover them): drop --netns / network_namespaces" % POOL)


class AgentNetwork:
    """The namespaces of one master: ``create()`` the hub, ``add_agent(i)``
    per agent, ``destroy()`` everything. Not thread-safe: the master calls
    it from one thread at a time."""

    def __init__(self, subnet=None):
        check_supported()
        self.subnet = subnet or pick_subnet()
        octets = str(self.subnet.network_address).split(".")
        self.prefix = "%s%s-%s-%s-" % (PREFIX, cleanup.this_master() or os.getpid(),
                                       octets[1], octets[2])
        self.hub = self.prefix + "hub"
        self.hub_address = str(self.subnet.network_address + 1)
        self.agents = {}            # index -> (namespace, address)
        self._created = []

    def create(self):
        """Make the hub namespace and its bridge; NetnsError (all undone) on failure."""
        if self.hub in namespace_names():
            raise NetnsError("network namespace %s exists already: remove it (ip netns "
                             "delete %s)" % (self.hub, self.hub))
        try:
            self._add_namespace(self.hub)
            run_ip("-n", self.hub, "-batch", "-", stdin=(
                "link set lo up\n"
                "link add br0 type bridge\n"
                "addr add %s/%d dev br0\n"
                "link set br0 up\n" % (self.hub_address, self.subnet.prefixlen)))
        except BaseException:
            self.destroy()
            raise
        return self

    def _add_namespace(self, name):
        run_ip("netns", "add", name)
        self._created.append(name)

    def add_agent(self, index):
        """Namespace and address of agent ``index`` (0, 1, ...), made now."""
        if not 0 <= index < MAX_AGENTS:
            raise NetnsError("at most %d agents fit in the network namespaces' /24: use "
                             "fewer agents" % MAX_AGENTS)
        name = "%sa%d" % (self.prefix, index)
        address = str(self.subnet.network_address + 2 + index)
        self._add_namespace(name)
        run_ip("-n", self.hub, "-batch", "-", stdin=(
            "link add v%d type veth peer name eth0 netns %s\n"
            "link set v%d master br0 up\n" % (index, name, index)))
        run_ip("-n", name, "-batch", "-", stdin=(
            "link set lo up\n"
            "addr add %s/%d dev eth0\n"
            "link set eth0 up\n" % (address, self.subnet.prefixlen)))
        self.agents[index] = (name, address)
        return name, address

    def destroy(self):
        """Kill what is left in the agents' namespaces, delete every
        namespace this network made. Idempotent."""
        created, self._created = self._created, []
        for name in reversed(created):
            remove_namespace(name, kill=name != self.hub)

    def describe(self):
        return "hub %s at %s, agents %s" % (
            self.hub, self.hub_address,
            ", ".join(address for _, address in self.agents.values()) or "none")


__all__ = ["AgentNetwork", "NetnsError", "call_in_namespace", "check_supported",
           "remove_stale", "pick_subnet", "namespace_names", "master_pid", "PREFIX"]
