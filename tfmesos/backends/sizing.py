"""Starting the embedded master for one run: its one agent sized so that the
run's whole cluster fits (``tfrun``/``cluster()`` with ``--master local``),
one-time credentials only this run knows, the submitter's environment for
its tasks (as the original TFMesos ran them on the user's machine), and
isolation as on a Mesos cluster where this machine allows it (``cgroups.py``:
root with writable memory and cpu hierarchies), said once when it does not."""

import functools
import logging
import os
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, Protocol

from ..exceptions import MesosError, SpecError
from ..protocol import task_env

# mesos_local's names are imported where they are used: tfrun checks a run's
# options here (``check_local``) before it starts its warm task interpreters,
# and the master's modules (most of tfrun's imports) load once it starts.
if TYPE_CHECKING:
    from mesos_local import AgentSpec, LocalMaster

log = logging.getLogger(__name__)

# Each task takes a port of the embedded agent's window (worker 0 of a
# replica run one more, for Keras' coordinator), sized to the cluster
# (``local_port_window``). The bound is what one machine can hold: each task
# is an interpreter (about 15 MB before the user's imports) and a
# rendezvous connection with a thread of tfrun's.
LOCAL_MAX_TASKS = 1000
# The ports the window is chosen from: below Linux's ephemeral range
# (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999), so tasks' ports
# are not taken by outgoing connections.
_PORTS_FROM, _PORTS_TO = 20000, 31000
# TFMESOS_LOCAL_PORTS=LOW-HIGH draws it from there instead (a firewall's
# allowance; test lanes that run at once, each its own range).
PORTS_ENV = "TFMESOS_LOCAL_PORTS"
# The smallest window: two small runs on one machine rarely draw the same.
_MIN_WINDOW = 101


class JobResources(Protocol):
    """What sizing reads of a job (``core.jobs.Job``, which backends do not
    import): its name, number of tasks and each task's resources."""

    @property
    def name(self) -> str: ...

    @property
    def num(self) -> int: ...

    @property
    def cpus(self) -> float: ...

    @property
    def mem(self) -> float: ...

    @property
    def gpus(self) -> int: ...


def executor_environment() -> dict[str, str]:
    """The embedded master's default executor environment: this process's,
    but the names tfmesos sets for its tasks."""
    return {name: value for name, value in os.environ.items()
            if name not in task_env.SET_BY_TFMESOS}


def start_local_master(jobs: Sequence[JobResources], run_credentials: tuple[str, str],
                       containers: bool = False, **options: Any) -> tuple["LocalMaster", str]:
    """Start a ``LocalMaster`` for ``jobs`` (objects with ``name``, ``num``,
    ``cpus``, ``mem`` and ``gpus``); ``containers``: the run has an image, so
    tasks run through the Docker engine. The master authenticates
    frameworks with ``run_credentials`` (the run's own (principal, secret),
    added to any given in ``options``) and gives tasks this process's environment unless
    ``executor_environment`` says otherwise. ``isolation`` (an option of
    ``LocalMaster``) defaults to ``"auto"``: cgroups/cpu,cgroups/mem where
    this machine can, else none with a warning; None turns it off. A given
    ``runner`` is closed here when the master cannot be made. Returns
    ``(master, url)``."""
    from mesos_local import (
        AgentSpecError,
        CredentialsError,
        IsolationError,
        LocalMaster,
        LocalMasterError,
    )
    try:
        if containers and "container_runner" not in options:
            from mesos_local import DockerRunner
            options["container_runner"] = DockerRunner()
        if "agents" not in options:
            options["agents"] = [local_agent(jobs)]
        # Not the names tfmesos sets for its tasks: an exported
        # TFMESOS_FAILOVER_TIMEOUT=abc failed every attempt ("malformed tfmesos
        # task environment"), and one that parsed would have changed what the
        # tasks do. (A Mesos agent's executors never see the submitter's.)
        options.setdefault("executor_environment", executor_environment())
        options["isolation"] = auto_isolation(options.get("isolation", AUTO),
                                              options.get("cgroups_enable_cfs", False))
        principal, secret = run_credentials
        table = dict(options.pop("credentials", None) or {})
        table[principal] = secret
        try:
            master = LocalMaster(credentials=table, **options)
        except BaseException:
            close = getattr(options.get("runner"), "close", None)
            if close is not None:
                close()
            raise
        return master, master.start()
    except (AgentSpecError, CredentialsError) as exc:
        raise SpecError(str(exc)) from exc    # the user's spec of the master
    except IsolationError as exc:   # mesos_local's fix names mesos-local; ours, tfrun's option
        raise MesosError("%s; %s" % (exc.problem, TURN_OFF)) from exc
    except LocalMasterError as exc:
        raise MesosError(str(exc)) from exc


AUTO = "auto"
TURN_OFF = "turn isolation off (tfrun --no-isolation, cluster(no_isolation=True))"


def isolation_problem(isolators: Sequence[str]) -> Optional[str]:
    """mesos_local's ``isolation_problem``: why ``isolators`` cannot work
    on this machine (without mesos_local's fix, worded in mesos-local's
    terms), or None."""
    from mesos_local import isolation_problem as problem
    return problem(isolators, fix=False)


def auto_isolation(isolation: Optional[str], enable_cfs: bool = False) -> Optional[str]:
    """What the embedded master of a run isolates with: ``"auto"`` is the
    cgroups isolators where this machine can (said once when it cannot:
    tasks are then held to nothing, unlike on a Mesos cluster that isolates);
    anything else as given."""
    if isolation != AUTO:
        return isolation
    from mesos_local import ISOLATORS
    problem = isolation_problem(ISOLATORS)
    if problem is None:
        return ",".join(ISOLATORS)
    if enable_cfs:
        raise SpecError.about("{local_master.cgroups_enable_cfs}: %s; the CFS quota needs "
                              "cgroups isolation: drop it, or run where root can isolate",
                              problem)
    log.warning("the embedded master does not hold tasks to their cpus and mem here (%s); "
                "on a Mesos cluster with cgroups isolation a task over its mem is killed. "
                "--no-isolation silences this", problem)
    return None


@functools.lru_cache(maxsize=1)
def _machine() -> tuple[float, float, tuple[str, ...]]:
    """(cpus, mem, GPU ids) of this machine for the embedded master; asked
    once (nvidia-smi), by tfrun's check of its options and by the agent."""
    from mesos_local import AgentSpec
    cpus, mem, _, _, gpu_ids = AgentSpec().resolve(os.getcwd())
    return cpus, mem, gpu_ids


def check_fits(jobs: Sequence[JobResources]) -> None:
    """SpecError for what the embedded master can never run on this
    machine: more than ``LOCAL_MAX_TASKS`` tasks, a task with more cpus or
    memory than the machine has, more GPUs in all than it has (an error at
    once, not a launch timeout)."""
    tasks = sum(job.num for job in jobs)
    if tasks > LOCAL_MAX_TASKS:
        raise SpecError.about("the cluster has %d tasks but the embedded master runs at most %d "
                              "(each an interpreter on this machine): ask for fewer, or run on "
                              "a Mesos cluster ({master})", tasks, LOCAL_MAX_TASKS)
    machine_cpus, machine_mem, gpu_ids = _machine()
    for job in jobs:
        if job.cpus > machine_cpus:
            raise SpecError.about("%s tasks ask for {job.cpus=%g} but this machine has %g cpus "
                                  "for the embedded master: ask for at most %g, or run on a "
                                  "Mesos cluster ({master})", job.name, job.cpus, machine_cpus,
                                  machine_cpus, job=job.name)
        if job.mem > machine_mem:
            raise SpecError.about("%s tasks ask for {job.mem=%.0f MB} but this machine has %.0f "
                                  "MB for the embedded master: ask for less, or run on a Mesos "
                                  "cluster ({master})", job.name, job.mem, machine_mem,
                                  job=job.name)
    need_gpus = sum(job.gpus * job.num for job in jobs)
    if need_gpus > len(gpu_ids):
        raise SpecError.about("the cluster asks for %d GPUs but this machine has %d (nvidia-smi "
                              "-L): ask for fewer, or run on a Mesos cluster ({master})",
                              need_gpus, len(gpu_ids))


def check_local(jobs: Sequence[JobResources], options: Mapping[str, Any]) -> None:
    """SpecError for what the embedded master of a run of ``jobs`` with
    ``options`` (``LocalMaster``'s) cannot do here: ``check_fits``, and
    ``cgroups_enable_cfs`` where cgroups isolation is not possible."""
    check_fits(jobs)
    local_ports(sum(job.num for job in jobs))
    if options.get("cgroups_enable_cfs"):
        auto_isolation(options.get("isolation", AUTO), enable_cfs=True)


def local_agent(jobs: Sequence[JobResources]) -> "AgentSpec":
    """The embedded master's one agent, sized so the whole cluster fits.

    The agent offers at least what the cluster asks for, even beyond the
    machine (with a note): isolation holds each task to its own cpus and
    mem, not the agent to the machine's. What can never work
    (``check_fits``) is an error now rather than a launch timeout later."""
    check_fits(jobs)
    machine_cpus, machine_mem, gpu_ids = _machine()
    cpus = max(machine_cpus, sum(job.cpus * job.num for job in jobs))
    mem = max(machine_mem, sum(job.mem * job.num for job in jobs))
    if (cpus, mem) != (machine_cpus, machine_mem):
        log.info("embedded master: offering cpus=%g mem=%g (the machine has cpus=%g "
                 "mem=%g) so the whole cluster fits", cpus, mem, machine_cpus, machine_mem)
    tasks = sum(job.num for job in jobs)
    from mesos_local import AgentSpec
    return AgentSpec(cpus=cpus, mem=mem, gpus=list(gpu_ids), ports=local_port_ranges(tasks))


# Windows drawn before one with a port free for every task (and worker 0's
# coordinator) is taken whatever it holds.
_WINDOW_DRAWS = 5


def local_port_ranges(tasks: int) -> tuple[tuple[int, int], ...]:
    """The embedded agent's ports: a window (``local_port_window``) less the
    ports that something on this machine holds now. A Mesos agent offers
    every port of its range (``--resources``), which its operator keeps for
    Mesos' tasks; here tfrun is that operator, and a task given a port that
    another program listens on fails with EADDRINUSE. The ranges are those
    of the first window drawn with a free port for every task and worker
    0's coordinator, or of the last drawn (the launch then says what does
    not fit)."""
    for _ in range(_WINDOW_DRAWS):
        ranges = free_ranges(*local_port_window(tasks))
        if sum(high - low + 1 for low, high in ranges) >= tasks + 1:
            break
    return tuple(ranges)


def free_ranges(low: int, high: int) -> list[tuple[int, int]]:
    """The ports from ``low`` to ``high`` that can be bound now (on every
    address, as a task's server binds), as ranges: those taken (a listening
    or bound socket, a connection's local end) left out."""
    import socket
    ranges: list[tuple[int, int]] = []
    for port in range(low, high + 1):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("", port))
            except OSError:
                continue
        if ranges and ranges[-1][1] == port - 1:
            ranges[-1] = (ranges[-1][0], port)
        else:
            ranges.append((port, port))
    return ranges


def local_port_window(tasks: int) -> tuple[int, int]:
    """A random window of ports for a cluster of ``tasks`` (a port each,
    one more for worker 0's coordinator, and as many again for relaunches
    whose old port is not free yet, at least ``_MIN_WINDOW``), so that two
    runs on one machine rarely offer the same ports (each embedded master
    knows only its own tasks)."""
    size = max(_MIN_WINDOW, 2 * tasks + 1)
    low, high = local_ports(tasks)
    base = low + size * random.randrange((high - low + 1) // size)
    return (base, base + size - 1)


def local_ports(tasks: int, environ: Mapping[str, str] = os.environ) -> tuple[int, int]:
    """The range the window of a cluster of ``tasks`` is drawn from:
    $TFMESOS_LOCAL_PORTS (LOW-HIGH) or 20000-31000; SpecError for one that
    is no range of ports or cannot hold the window."""
    text = environ.get(PORTS_ENV)
    if not text:
        return _PORTS_FROM, _PORTS_TO
    low_text, _, high_text = text.partition("-")
    size = max(_MIN_WINDOW, 2 * tasks + 1)
    try:
        low, high = int(low_text), int(high_text)
    except ValueError:
        low = high = 0
    if not 1024 <= low <= high <= 65535:
        raise SpecError("%s=%s: give a range of ports LOW-HIGH within 1024-65535, e.g. "
                        "20000-31000" % (PORTS_ENV, text))
    if high - low + 1 < size:
        raise SpecError("%s=%s holds %d ports; the embedded master needs a window of %d "
                        "for %d tasks: widen it" % (PORTS_ENV, text, high - low + 1, size, tasks))
    return low, high
