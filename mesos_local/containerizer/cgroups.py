"""Resource isolation for the local master's tasks, as Mesos' cgroups
isolators do it (``LocalMaster(isolation="cgroups/cpu,cgroups/mem")``,
``mesos-local --isolation cgroups/cpu,cgroups/mem``).

What a Mesos agent with ``--isolation=cgroups/cpu,cgroups/mem`` does, and
this module with it (apache/mesos, src/slave/containerizer/mesos/isolators/
cgroups/, constants in ``isolators/cgroups/constants.hpp``):

* one cgroup per container, under a root of its own in each hierarchy
  (Mesos: ``--cgroups_root=mesos``; here ``mesos_local/<master>/<task>``);
* memory (``subsystems/memory.cpp``): ``memory.soft_limit_in_bytes`` and
  ``memory.limit_in_bytes`` = max(mem, ``MIN_MEMORY`` = 32 MB); the
  kernel's OOM killer acts inside the cgroup. On an OOM event the isolator
  reports a limitation, ``REASON_CONTAINER_LIMITATION_MEMORY`` with the
  message ``Memory limit exceeded: Requested: 64MB Maximum Used: 64MB``
  (sizes as stout's ``Bytes`` prints them: the largest unit that loses
  nothing, 3rdparty/stout/include/stout/bytes.hpp; Mesos appends
  ``memory.stat``, left out here so that the message stays one line); the
  containerizer then destroys the whole container and the agent reports
  TASK_FAILED from ``SOURCE_SLAVE`` (v1: ``SOURCE_AGENT``);
* cpu (``subsystems/cpu.cpp``): ``cpu.shares`` = max(1024 x cpus, 2)
  (``CPU_SHARES_PER_CPU``, ``MIN_CPU_SHARES``); only with
  ``--cgroups_enable_cfs`` (default false, src/slave/flags.cpp) also
  ``cpu.cfs_period_us`` = 100 ms and ``cpu.cfs_quota_us`` = max(cpus x
  period, 1 ms) (``CPU_CFS_PERIOD``, ``MIN_CPU_CFS_QUOTA``): a hard cap;
  ``cpuacct`` accounts the container's cpu time.

cgroup v2 (Mesos' ``isolators/cgroups2/controllers/memory.cpp`` and
``cpu.cpp``): ``memory.low``/``memory.max``, ``cpu.weight`` (the kernel's
mapping of shares: 1 + (shares - 2) x 9999 / 262142) and ``cpu.max``
("quota period"); OOM kills are counted in ``memory.events``. v1 is used
when its ``memory`` and ``cpu`` hierarchies are mounted and writable, else
v2 when its root offers the ``memory`` and ``cpu`` controllers.

A task joins its cgroups before it runs anything: ``join_argv`` starts it
under a tiny shell that writes its own pid into each ``cgroup.procs`` and
then execs the command (so no child escapes by forking early). Destroying
a task's cgroups SIGKILLs every process in them -- setsid() escapes
included -- and removes the directories. Master directories carry the
creating process's pid namespace, pid and start time, as its work directory
does (``cleanup.this_master()``: ``<namespace>.<pid>.<start>-XXXXXXXX``):
``remove_stale()`` cleans up after masters of its own pid namespace killed
with SIGKILL, or whose detached cleaner was (``cleanup.py``), as
``netns.remove_stale`` does for network namespaces; another namespace's
it leaves be (a pid names another process there, or none).
``Isolator.release()`` hands a master's directories to that cleaner.
Everything here needs root.
"""

import logging
import os
import re
import signal
import time
from typing import Optional

from .. import cleanup
from ..cleanup import children as _children
from ..cleanup import process_start as _process_start
from ..cleanup import remove_dir as _remove_dir
from ..cleanup import remove_master_cgroups
from ..errors import LocalMasterError
from .cgroup_limits import CPU_CFS_PERIOD_US, ISOLATORS, Limits, memory_limit_message
from .pidfd import kill_and_wait

log = logging.getLogger(__name__)


ROOT = "mesos_local"
_UNLIMITED = 1 << 60          # v1 reports "no limit" as a huge number
# A master's directory: ``cleanup.this_master()``, then a random tail.
_MASTER = re.compile(r"^(\d+\.\d+\.\d+)-[0-9a-f]+\Z")
# An older mesos_local's: ``<pid>-<start>-XXXXXXXX``, no pid namespace.
_OLD_MASTER = re.compile(r"^(\d+)-(\d+)-[0-9a-f]+\Z")
# The host's initial pid namespace (PROC_PID_INIT_INO, include/linux/proc_ns.h).
INITIAL_PID_NAMESPACE = 4026531836
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")

# Joins the cgroup.procs files given, then execs the rest of argv:
#   sh -c JOIN mesos-local-cgroups N FILE1 ... FILEN COMMAND ARGS...
JOIN_SCRIPT = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 127; '
               'shift; n=$((n - 1)); done; exec "$@"')


# How to do without: Mesos' default isolation, which enforces nothing.
TURN_OFF = ("turn isolation off (Mesos' default --isolation=posix/cpu,posix/mem: mesos-local "
            "without --isolation, LocalMaster(isolation=None))")


class IsolationError(LocalMasterError):
    """Isolation was asked for but cannot be done here: ``problem; fix``,
    one line; ``.problem`` and ``.fix`` (None where there is none) apart,
    so that a framework that starts the master may word its own fix."""

    def __init__(self, problem, fix=None):
        super().__init__(problem if fix is None else "%s; %s" % (problem, fix))
        self.problem = problem
        self.fix = fix


# -- finding the hierarchies ------------------------------------------------

def find_hierarchies(mounts_text):
    """``(v1, v2)`` from the text of /proc/mounts: ``v1`` maps each v1
    controller to its mount point, ``v2`` is the cgroup2 mount point (or
    None)."""
    v1: dict[str, str] = {}
    v2: Optional[str] = None
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mount_point, kind, options = fields[1], fields[2], fields[3].split(",")
        if kind == "cgroup":
            for option in options:
                if option in ("cpu", "cpuacct", "memory"):
                    v1.setdefault(option, mount_point)
        elif kind == "cgroup2" and v2 is None:
            v2 = mount_point
    return v1, v2


def _read(path):
    with open(path, encoding="ascii", errors="replace") as handle:
        return handle.read()


def _write(path, value):
    with open(path, "w", encoding="ascii") as handle:
        handle.write(str(value))


def _read_int(path):
    try:
        return int(_read(path).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_count(path, key):
    """The value of ``key`` in a ``key value`` file (memory.events,
    memory.oom_control, cpu.stat; None: not there, or the file cannot be
    read): bytes through one descriptor, no text layer; the OOM watch reads
    one per running task four times a second."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = b"\n"
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    at = data.find(b"\n%s " % key)
    if at == -1:
        return None
    start = at + len(key) + 2
    end = data.find(b"\n", start)
    try:
        return int(data[start:end if end != -1 else len(data)])
    except ValueError:
        return None



class Layout:
    """Where a master's cgroups go: v1 (one directory per hierarchy: memory,
    cpu and cpuacct, which may share one) or v2 (one directory)."""

    def __init__(self, version, roots):
        self.version = version
        self.roots = roots        # isolator -> hierarchy mount points (v1), or [v2 mount]

    @classmethod
    def detect(cls, isolators, mounts_text=None):
        """The layout that can hold ``isolators`` here; IsolationError (one
        line naming the fix) when none can."""
        if os.geteuid() != 0:
            raise IsolationError("cgroups isolation needs root",
                                 "run the master as root, or " + TURN_OFF)
        if mounts_text is None:
            try:
                mounts_text = _read("/proc/mounts")
            except OSError as exc:
                raise IsolationError("cannot read /proc/mounts: %s" % exc) from None
        v1, v2 = find_hierarchies(mounts_text)
        wanted = {"cgroups/mem": ["memory"], "cgroups/cpu": ["cpu", "cpuacct"]}
        if all(v1.get(wanted[name][0]) for name in isolators):
            roots = {}
            for name in isolators:
                # In order (cpu first, then cpuacct), each mount point once.
                roots[name] = list(dict.fromkeys(v1[c] for c in wanted[name] if v1.get(c)))
            missing = [p for paths in roots.values() for p in paths if not os.access(p, os.W_OK)]
            if not missing:
                return cls(1, roots)
            problem = "%s is not writable" % missing[0]
        else:
            problem = "no cgroup v1 %s hierarchy is mounted" % " and ".join(
                wanted[name][0] for name in isolators if not v1.get(wanted[name][0]))
        if v2 is not None:
            try:
                controllers = _read(os.path.join(v2, "cgroup.controllers")).split()
            except OSError:
                controllers = []
            need = {"cgroups/mem": "memory", "cgroups/cpu": "cpu"}
            absent = [need[name] for name in isolators if need[name] not in controllers]
            if not absent and os.access(v2, os.W_OK):
                return cls(2, {name: [v2] for name in isolators})
            if absent:
                problem += ", and the cgroup v2 root at %s does not offer %s" % (
                    v2, " and ".join(absent))
            else:
                problem += ", and %s is not writable" % v2
        raise IsolationError("cannot isolate tasks with cgroups: " + problem, TURN_OFF)

    def hierarchies(self):
        return sorted({p for paths in self.roots.values() for p in paths})


class TaskCgroups:
    """The cgroups of one task (one directory per hierarchy)."""

    def __init__(self, layout, directories, limits):
        self.layout = layout
        self.directories = directories   # hierarchy -> directory
        self.limits = limits

    def _dir(self, isolator, index=0):
        paths = self.layout.roots.get(isolator)
        return self.directories[paths[index]] if paths and len(paths) > index else None

    @property
    def memory_dir(self):
        return self._dir("cgroups/mem")

    @property
    def cpu_dir(self):
        return self._dir("cgroups/cpu")

    @property
    def cpuacct_dir(self):
        paths = self.layout.roots.get("cgroups/cpu", [])
        return self.directories[paths[-1]] if paths else None

    def procs_files(self):
        return [os.path.join(d, "cgroup.procs") for d in sorted(set(self.directories.values()))]

    def join_argv(self, argv):
        """``argv`` started inside these cgroups."""
        files = self.procs_files()
        return ["/bin/sh", "-c", JOIN_SCRIPT, "mesos-local-cgroups", str(len(files))] + files \
            + list(argv)

    def apply(self):
        """Write the limits (the directories exist)."""
        limits, v2 = self.limits, self.layout.version == 2
        if self.memory_dir is not None:
            if v2:
                _write(os.path.join(self.memory_dir, "memory.low"), limits.memory_bytes)
                _write(os.path.join(self.memory_dir, "memory.max"), limits.memory_bytes)
            else:
                _write(os.path.join(self.memory_dir, "memory.soft_limit_in_bytes"),
                       limits.memory_bytes)
                _write(os.path.join(self.memory_dir, "memory.limit_in_bytes"),
                       limits.memory_bytes)
        if self.cpu_dir is not None:
            if v2:
                _write(os.path.join(self.cpu_dir, "cpu.weight"), limits.cpu_weight)
                _write(os.path.join(self.cpu_dir, "cpu.max"), "%d %d" % (
                    limits.cfs_quota_us, CPU_CFS_PERIOD_US) if limits.cfs else "max %d"
                       % CPU_CFS_PERIOD_US)
            else:
                _write(os.path.join(self.cpu_dir, "cpu.shares"), limits.cpu_shares)
                if limits.cfs:
                    _write(os.path.join(self.cpu_dir, "cpu.cfs_period_us"), CPU_CFS_PERIOD_US)
                    _write(os.path.join(self.cpu_dir, "cpu.cfs_quota_us"), limits.cfs_quota_us)

    # -- reading ----------------------------------------------------------

    def oom_kills(self):
        """Processes the OOM killer killed in the task's memory cgroup (None:
        the kernel does not say)."""
        if self.memory_dir is None:
            return 0
        name = "memory.events" if self.layout.version == 2 else "memory.oom_control"
        return _read_count(os.path.join(self.memory_dir, name), b"oom_kill")

    def oom_events(self):
        """A file descriptor (an eventfd, the caller's to close) that the
        kernel makes readable as the OOM killer acts in the task's memory
        cgroup: v1's ``cgroup.event_control`` on ``memory.oom_control``, as
        Mesos listens (``cgroups::memory::oom::listen``, src/linux/cgroups.cpp).
        None where there is none (v2, no memory cgroup, a Python without
        ``os.eventfd``, a kernel that refuses): then the OOM count is polled."""
        if self.memory_dir is None or self.layout.version != 1 or not hasattr(os, "eventfd"):
            return None    # os.eventfd: Python >= 3.10
        try:
            wake = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)  # novermin (checked above)
        except OSError:
            return None
        try:
            # The registration holds the file: its descriptor can go at once.
            control = os.open(os.path.join(self.memory_dir, "memory.oom_control"),
                              os.O_RDONLY | os.O_CLOEXEC)
            try:
                _write(os.path.join(self.memory_dir, "cgroup.event_control"),
                       "%d %d" % (wake, control))
            finally:
                os.close(control)
        except OSError as exc:
            log.debug("no OOM events for %s (%s): polled", self.memory_dir, exc)
            os.close(wake)
            return None
        return wake

    def memory_limit(self):
        if self.memory_dir is None:
            return None
        name = "memory.max" if self.layout.version == 2 else "memory.limit_in_bytes"
        value = _read_int(os.path.join(self.memory_dir, name))
        return value if value is not None and value < _UNLIMITED else None

    def memory_peak(self):
        if self.memory_dir is None:
            return None
        name = "memory.peak" if self.layout.version == 2 else "memory.max_usage_in_bytes"
        return _read_int(os.path.join(self.memory_dir, name))

    def cpu_seconds(self):
        """cpu time of every process the task ran, or None."""
        directory = self.cpuacct_dir
        if directory is None:
            return None
        if self.layout.version == 2:
            usec = _read_count(os.path.join(directory, "cpu.stat"), b"usage_usec")
            return None if usec is None else usec / 1e6
        nanoseconds = _read_int(os.path.join(directory, "cpuacct.usage"))
        return None if nanoseconds is None else nanoseconds / 1e9

    def limitation(self, status=None):
        """Mesos' memory limitation message when the OOM killer struck in
        this task's cgroup, else None. ``status``: the task's exit status
        (-9: killed by SIGKILL), for kernels that do not count OOM kills."""
        if self.memory_dir is None:
            return None
        # Polled for every running task: one read while nothing happened.
        kills = self.oom_kills()
        if kills == 0 or (kills is None and status != -signal.SIGKILL):
            return None
        limit, peak = self.memory_limit(), self.memory_peak()
        if kills is None:   # before Linux 4.13: a SIGKILL at the limit is the OOM killer
            if not limit or not peak or peak < limit * 0.95:
                return None
        return memory_limit_message(limit, peak)

    def pids(self):
        found: set[int] = set()
        for path in self.procs_files():
            try:
                found.update(int(p) for p in _read(path).split())
            except (OSError, ValueError):
                continue
        return found

    def signal(self, signum):
        """Send ``signum`` to every process in the task's cgroups (without
        waiting); the pids it signalled."""
        pids = self.pids()
        for pid in pids:
            try:
                os.kill(pid, signum)
            except OSError:
                pass
        return pids

    def kill(self):
        self.signal(signal.SIGKILL)

    def destroy(self, timeout=5.0):
        """Kill what the cgroups hold until they are empty, then remove the
        directories; True when they are gone (failures are logged). As Mesos'
        Linux launcher destroys a container by its cgroup (linux_launcher.cpp):
        a process forked inside stays inside, so one empty read is the end."""
        deadline, previous = time.monotonic() + timeout, None
        while True:
            left = self.pids()
            if not left or time.monotonic() >= deadline:
                break
            if not kill_and_wait(left, deadline - time.monotonic()) or left == previous:
                time.sleep(0.01)   # no pidfds here, or the kernel lists them still
            previous = left
        return all(_remove_dir(d, deadline) for d in set(self.directories.values()))



class Isolator:
    """The cgroups of one master: ``start()`` makes its directories (after
    ``remove_stale``), ``prepare(name, cpus, mem)`` a task's, ``stop()``
    removes everything. Thread-safe enough: each task's directories are its
    own, and the master's are made and removed by start() and stop()."""

    def __init__(self, isolators=ISOLATORS, enable_cfs=False, mounts_text=None):
        self.isolators = tuple(isolators)
        if not self.isolators:
            raise ValueError("Isolator() needs at least one cgroups isolator")
        self.enable_cfs = bool(enable_cfs)
        self.layout = Layout.detect(self.isolators, mounts_text)
        # Named after this process in its pid namespace: only a master of
        # that namespace judges it by its pid (remove_stale). Where /proc
        # cannot tell (no namespace or start): a name no master judges, left
        # to this one's stop() or cleaner.
        self.name = "%s-%s" % (cleanup.this_master() or "master", os.urandom(4).hex())
        self.directories = {}    # hierarchy -> this master's directory
        self._runs = {}          # task directory name -> runs so far
        self._taken = set()      # every task directory name given out

    def describe(self):
        return "cgroup v%d %s%s" % (self.layout.version, ",".join(self.isolators),
                                    ", CFS quota" if self.enable_cfs else "")

    def limits(self, cpus, mem):
        return Limits(cpus=cpus, mem=mem, cfs=self.enable_cfs, isolators=self.isolators)

    def start(self):
        remove_stale(self.layout)
        try:
            for hierarchy in self.layout.hierarchies():
                root = os.path.join(hierarchy, ROOT)
                for path in (root, os.path.join(root, self.name)):
                    if not os.path.isdir(path):
                        os.mkdir(path)
                    if self.layout.version == 2:
                        _enable_controllers(os.path.dirname(path), self.isolators)
                self.directories[hierarchy] = os.path.join(root, self.name)
                if self.layout.version == 2:
                    _enable_controllers(self.directories[hierarchy], self.isolators)
        except OSError as exc:
            self.stop()
            raise IsolationError("cannot create the master's cgroups: %s" % exc,
                                 TURN_OFF) from None
        return self

    def prepare(self, task_id, limits):
        """A task's cgroups, made and limited (OSError on failure)."""
        base = _UNSAFE.sub("_", task_id)[:200] or "task"
        # A name no task of this master holds: a task id that reads as
        # another's later run ('x.run1', 'a/b' beside 'a_b') is one more try
        # (Mesos names them by container ids: no two meet).
        run = self._runs.get(base, 0)
        while True:
            name = base if run == 0 else "%s.run%d" % (base, run)
            run += 1
            if name not in self._taken:   # the master's own directory: its names are its own
                break
        self._runs[base] = run
        self._taken.add(name)
        created: dict[str, str] = {}   # hierarchy -> the task's directory there
        cgroups = TaskCgroups(self.layout, created, limits)
        try:
            for hierarchy, parent in self.directories.items():
                path = os.path.join(parent, name)
                os.mkdir(path)
                created[hierarchy] = path
            cgroups.apply()
        except OSError:
            cgroups.destroy(timeout=1.0)
            raise
        return cgroups

    def stop(self):
        """Remove the master's directories (killing anything left in them)."""
        _remove_master(self.release())

    def release(self):
        """The master's directories (one per hierarchy), forgotten here: for
        whoever removes them now (a detached cleaner, ``cleanup.py``)."""
        directories, self.directories = self.directories, {}
        return list(directories.values())


def _enable_controllers(directory, isolators):
    """cgroup v2: let ``directory``'s children use the isolators' controllers."""
    controllers = {"cgroups/mem": "+memory", "cgroups/cpu": "+cpu"}
    _write(os.path.join(directory, "cgroup.subtree_control"),
           " ".join(controllers[name] for name in isolators))


def _remove_master(directories):
    """Kill every process left in the task cgroups of ``directories`` (one
    master's, one per hierarchy), remove them all (``cleanup.py``; each
    task's cgroups destroyed as ``TaskCgroups.destroy`` does, on pidfds)."""
    remove_master_cgroups(directories, destroy=lambda path, timeout: TaskCgroups(
        None, {path: path}, None).destroy(timeout))


def master_gone(name):
    """Whether the master whose cgroup directory is ``name`` is gone, as
    this process' pid namespace can tell: one of this namespace whose pid
    is gone or reused (``cleanup.master_gone``). False for anything else:
    another namespace's master, whose pid names another process here or
    none (a master in a new pid namespace took a live host master's
    cgroups for a gone one's and destroyed them), a name no master gave."""
    match = _MASTER.match(name)
    if match is not None:
        return cleanup.master_gone(match.group(1))
    match = _OLD_MASTER.match(name)
    # An older mesos_local named its directories without their pid
    # namespace: judged, as that code judged them, only from the host's
    # initial namespace, where its masters ran (an older master run in
    # another namespace is misjudged there, as it was). From any other
    # namespace a host master's pid is not seen, or names another process:
    # a live one's cgroups would read as gone. Left to the host's masters.
    if match is None or cleanup._pid_namespace() != INITIAL_PID_NAMESPACE:
        return False
    return _process_start(int(match.group(1))) != int(match.group(2))


def remove_stale(layout):
    """Remove the cgroups of masters of this pid namespace that are gone
    (killed before they could clean up; ``master_gone``), killing their
    tasks first; not those whose watchdog still runs: it keeps a
    checkpointing framework's tasks for the recovery timeout, then ends
    them (``watchdog.py``), as a Mesos agent's executors wait for it.
    Returns the names removed."""
    stale: dict[str, list[str]] = {}   # master's directory name -> its paths
    for hierarchy in layout.hierarchies():
        for path in _children(os.path.join(hierarchy, ROOT)):
            if master_gone(os.path.basename(path)):
                stale.setdefault(os.path.basename(path), []).append(path)
    if stale:
        from ..watchdog import watched_owners
        for name in watched_owners() & set(stale):
            del stale[name]
    for paths in stale.values():
        _remove_master(paths)
    if stale:
        log.info("removed leftover task cgroups of stopped masters: %s", ", ".join(sorted(stale)))
    return sorted(stale)


def isolation_problem(isolators=ISOLATORS, fix=True):
    """Why ``isolators`` cannot be used here (one line: the problem and its
    fix; the problem only with ``fix=False``), or None when they can."""
    try:
        Layout.detect(tuple(isolators))
    except IsolationError as exc:
        return str(exc) if fix else exc.problem
    return None


__all__ = ["IsolationError", "Isolator", "TaskCgroups", "Layout", "find_hierarchies",
           "master_gone", "remove_stale", "isolation_problem"]
