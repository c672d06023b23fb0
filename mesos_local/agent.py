"""The local master's agents: ``AgentSpec`` (what an agent offers, sized to
this machine by default), ``detect_gpus`` and ``Agent`` (one agent's
resources, free GPU ids and sandbox directories).

Running a task is elsewhere: ``planning`` (TaskInfo -> TaskLaunch),
``fetcher`` (URIs), ``executor`` (the task's thread and processes).
"""

import dataclasses
import ipaddress
import logging
import math
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable
from typing import Any, Optional, Union

from .errors import AgentSpecError
from .resources import Resources

log = logging.getLogger(__name__)

_MEM_MARGIN_MB = 1024
# Mesos keeps scalars (cpus, mem, disk) to three decimals in 64 bits: beyond
# this they lose precision; 1024 fake GPUs is any machine's and then some.
MAX_SCALAR = 1e15
MAX_GPUS = 1024


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """What one local agent offers. ``None`` sizes it to this machine:
    cpus = ``os.cpu_count()``, mem = physical memory minus 1 GiB (half of it
    below 2 GiB, as a Mesos agent does), disk = free space of the work dir;
    gpus = the NVIDIA GPUs ``nvidia-smi -L`` lists (ids "0", "1", ...), an int
    n = n fake GPUs, a list = those ids. ``attributes``: name -> str (TEXT)
    or number (SCALAR). ``isolate``: ``("fs",)`` runs its tasks in a mount
    namespace of their own with this host's files hidden (``fs_isolation``)."""

    hostname: str = "127.0.0.1"
    cpus: Optional[float] = None
    mem: Optional[float] = None
    disk: Optional[float] = None
    ports: tuple = ((31000, 32000),)
    gpus: Union[None, int, Iterable[Any]] = None   # after __post_init__: None, int or str ids
    attributes: Optional[dict] = None
    isolate: tuple = ()

    def __post_init__(self):
        isolate = (self.isolate,) if isinstance(self.isolate, str) else tuple(self.isolate or ())
        unknown = sorted(set(isolate) - {"fs"})
        if unknown:
            raise AgentSpecError("AgentSpec.isolate: unknown isolation %r (known: fs)"
                                 % unknown[0])
        object.__setattr__(self, "isolate", isolate)
        if not isinstance(self.hostname, str) or not self.hostname:
            raise AgentSpecError("AgentSpec.hostname must be a non-empty string, got %r"
                                 % (self.hostname,))
        for name in ("cpus", "mem", "disk"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, (int, float))
                                      or not math.isfinite(value)
                                      or not 0 <= value <= MAX_SCALAR):
                raise AgentSpecError("AgentSpec.%s must be a number from 0 to %g or None, "
                                     "got %r" % (name, MAX_SCALAR, value))
        ports = []
        for item in self.ports or ():
            try:
                begin, end = (int(x) for x in item)
            except (TypeError, ValueError):
                raise AgentSpecError("AgentSpec.ports must be (begin, end) pairs, got %r"
                                     % (item,)) from None
            if not 0 < begin <= end <= 65535:
                raise AgentSpecError("AgentSpec.ports range %d-%d is not within 1-65535 "
                                     "with begin <= end" % (begin, end))
            ports.append((begin, end))
        object.__setattr__(self, "ports", tuple(ports))
        gpus = self.gpus
        if gpus is not None and not isinstance(gpus, bool) and isinstance(gpus, int):
            if not 0 <= gpus <= MAX_GPUS:
                raise AgentSpecError("AgentSpec.gpus must be from 0 to %d, got %d"
                                     % (MAX_GPUS, gpus))
        elif gpus is not None:
            if isinstance(gpus, (str, bytes, bool)) or not hasattr(gpus, "__iter__"):
                raise AgentSpecError("AgentSpec.gpus must be None, an int or a list of ids, "
                                     "got %r" % (gpus,))
            ids = tuple(str(g) for _, g in zip(range(MAX_GPUS + 1), gpus))
            if len(ids) > MAX_GPUS:
                raise AgentSpecError("AgentSpec.gpus lists more than %d GPUs" % MAX_GPUS)
            if len(set(ids)) != len(ids):
                raise AgentSpecError("AgentSpec.gpus lists an id twice: %r" % (ids,))
            object.__setattr__(self, "gpus", ids)
        attributes = dict(self.attributes or {})
        for key, value in attributes.items():
            if not isinstance(key, str) or not (
                    isinstance(value, str) or (isinstance(value, (int, float))
                                               and not isinstance(value, bool))):
                raise AgentSpecError("AgentSpec.attributes maps names to str or numbers, "
                                     "got %r: %r" % (key, value))
        object.__setattr__(self, "attributes", attributes)

    def resolve(self, work_dir):
        """Concrete (cpus, mem, disk, ports, gpu_ids) for this machine."""
        cpus = self.cpus if self.cpus is not None else float(os.cpu_count() or 1)
        mem = self.mem if self.mem is not None else _default_mem()
        disk = self.disk if self.disk is not None else float(
            shutil.disk_usage(work_dir).free // (1 << 20))
        if self.gpus is None:
            gpu_ids = detect_gpus()
        elif isinstance(self.gpus, int):
            gpu_ids = tuple(str(i) for i in range(self.gpus))
        else:
            gpu_ids = tuple(str(gpu) for gpu in self.gpus)   # already str: __post_init__
        return cpus, mem, disk, self.ports, gpu_ids


def _default_mem():
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError, AttributeError):
        return 1024.0
    return float(total - _MEM_MARGIN_MB if total >= 2 * _MEM_MARGIN_MB else total // 2)


def detect_gpus(timeout=10):
    """Ids ("0", "1", ...) of the NVIDIA GPUs ``nvidia-smi -L`` lists; () if none."""
    if shutil.which("nvidia-smi") is None:
        return ()
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                             timeout=timeout, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    ids = []
    for line in out.splitlines():
        match = re.match(r"\s*GPU (\d+):", line)
        if match:
            ids.append(match.group(1))
    return tuple(ids)


def agent_ip(hostname):
    """The address an agent's tasks have: its hostname when that is an
    address (its network namespace's with ``--netns``), else this machine's
    loopback, where its tasks run (a made-up hostname is not looked up)."""
    try:
        return str(ipaddress.ip_address(hostname.strip("[]")))
    except ValueError:
        return "127.0.0.1"


def agent_address(agent, address):
    """(host, port) where ``agent``'s own HTTP server is reached by a client
    that reached the master at ``address`` (host, port): that host (the
    hub namespace's, for a client there) and the agent's port (the same in
    both namespaces); the master's ``address`` itself before the agent
    listens."""
    if address is None:
        return agent.address
    if agent.address is None:
        return address
    return address[0], agent.address[1]


def agent_url(agent, address):
    """``Offer.url`` (``URL`` in include/mesos/v1/mesos.proto): where the
    agent's HTTP endpoints are. Mesos names the agent's own address and
    libprocess id (``Master::offer``, src/master/master.cpp): here the
    agent's own server (``agent_address``: reached from where the
    framework reached the master), its ``hostname`` the agent's."""
    address = agent_address(agent, address)
    if address is None:
        return None
    host, port = address
    return {"scheme": "http", "address": {"hostname": agent.hostname, "ip": host, "port": port},
            "path": "/slave(1)"}


class Agent:
    """One agent's bookkeeping: its resources and free GPU ids. ``hostname``
    (default the spec's) is what offers name; ``netns``: the network
    namespace its tasks run in (None: this host's)."""

    def __init__(self, agent_id, spec, work_dir, index, hostname=None, netns=None):
        self.id = agent_id
        self.spec = spec
        self.index = index
        self.hostname = hostname or spec.hostname
        self.ip = agent_ip(self.hostname)
        self.netns = netns
        cpus, mem, disk, ports, gpu_ids = spec.resolve(work_dir)
        self.total = Resources.of(cpus=cpus, mem=mem, disk=disk, gpus=len(gpu_ids),
                                  ports=ports)
        self.gpu_ids = tuple(gpu_ids)
        self.free_gpus = list(gpu_ids)
        self.available = self.total.copy()   # neither offered nor used
        self.offered = Resources()
        self.used = Resources()
        self.registered_time = time.time()
        self.active = True
        self.tasks = {}                      # (framework_id, task_id) -> master Task
        self.offers = {}                     # offer_id -> master Offer
        # Its own work_dir (Mesos' --work_dir; mesos-local gives each agent
        # one too, src/local/local.cpp): sandboxes under slaves/<id>/.
        self.directory = os.path.join(work_dir, "agents", agent_id)
        # (host, port) where its own HTTP server listens (agent_http.py), once bound.
        self.address: Optional[tuple[str, int]] = None

    def take_gpus(self, count):
        ids, self.free_gpus = self.free_gpus[:count], self.free_gpus[count:]
        return ids

    def give_gpus(self, ids):
        order = {gpu: i for i, gpu in enumerate(self.gpu_ids)}
        self.free_gpus = sorted(set(self.free_gpus) | set(ids), key=lambda gpu: order[gpu])

    def attributes_json(self):
        out = []
        for name, value in sorted(self.spec.attributes.items()):
            if isinstance(value, str):
                out.append({"name": name, "type": "TEXT", "text": {"value": value}})
            else:
                out.append({"name": name, "type": "SCALAR", "scalar": {"value": value}})
        return out

    def executor_path(self, framework_id, executor_id):
        """``paths::getExecutorPath`` (src/slave/paths.cpp): ``<work_dir>/
        slaves/<agent id>/frameworks/<framework id>/executors/<executor id>``,
        this agent's ``directory`` its ``work_dir``."""
        return os.path.join(self.directory, "slaves", self.id, "frameworks", framework_id,
                            "executors", executor_id)

    def sandbox_path(self, framework_id, executor_id, container_id):
        """The run directory of ``executor_id``'s container ``container_id``
        (``paths::createExecutorDirectory``): ``executor_path/runs/<container
        id>``, made here, and ``runs/latest`` a link to it (the newest run of
        that executor, as Mesos links it: the absolute path). A command
        task's executor id is its task id (Mesos' command executor), so a
        task id run again gets a run of its own under the same executor.

        Making them can fail (a full disk, a work_dir gone): that is logged,
        and the task's launch, which makes its sandbox again, fails with the
        reason (``containerizer/executor.py``)."""
        runs = os.path.join(self.executor_path(framework_id, executor_id), "runs")
        path = os.path.join(runs, container_id)
        try:
            os.makedirs(path, exist_ok=True)
            _link(path, os.path.join(runs, LATEST))
        except OSError as exc:
            log.warning("cannot make the sandbox %s: %s", path, exc)
        return path


LATEST = "latest"   # paths.cpp: LATEST_SYMLINK


def _link(target, name):
    """Point the symlink ``name`` at ``target``, replacing what was there in
    one step (a reader of ``runs/latest`` never finds it missing)."""
    temporary = "%s.%d.%d" % (name, os.getpid(), threading.get_ident())
    try:
        os.symlink(target, temporary)
        os.replace(temporary, name)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


__all__ = ["AgentSpec", "AgentSpecError", "Agent", "agent_address", "agent_ip", "agent_url",
           "detect_gpus"]
