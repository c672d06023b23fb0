"""The processes of a plain process task that has no cgroups, found in
/proc: its process group, the processes that left it (setsid()) but carry
the task's ``MESOS_SANDBOX=...`` in their environment, and the processes
below all those (a daemon that cleared its environment too). Signalling
them, and destroying them as Mesos destroys a container.

A task with cgroups is found, signalled and destroyed by its cgroups
(``cgroups.TaskCgroups``), as Mesos' Linux launcher destroys a container by
its cgroup (``LinuxLauncherProcess::destroyCgroups`` and
``destroyCgroups2``, src/slave/containerizer/mesos/linux_launcher.cpp);
this scan stands in where there is no cgroup, as the POSIX launcher kills
the process tree with its groups and sessions (launcher.cpp).
"""

import logging
import os
import signal
import threading
import time
from typing import Optional

from .pidfd import kill_and_wait

log = logging.getLogger(__name__)


def _stat_fields(pid):
    """The fields of /proc/PID/stat after the command name (field 3 on)."""
    with open("/proc/%s/stat" % pid, "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()


def start_ticks(pid):
    """When ``pid`` started (field 22 of /proc/PID/stat: clock ticks after
    boot; a zombie still has it), or None when it is gone."""
    try:
        return int(_stat_fields(pid)[19])
    except (OSError, IndexError, ValueError):
        return None


def task_processes(pgid, marker, since=None):
    """Live (non-zombie) pids that belong to a task: its process group
    ``pgid`` (None: none), plus any process whose environment holds ``marker``.
    ``since``: the start (``start_ticks``) of the task's first process;
    a process that started before it cannot be the task's, and its
    environment is not read. Asked from many threads at once (hundreds of
    tasks ending together), the asks share passes over /proc
    (``SharedScans``): each pass costs as much as one ask."""
    return SCANS.find(pgid, marker, since)


class _Ask:
    __slots__ = ("pgid", "marker", "since", "found", "done", "error")

    def __init__(self, pgid, marker, since):
        self.pgid, self.marker, self.since = pgid, marker, since
        self.found: list[int] = []
        self.done = False
        self.error: Optional[BaseException] = None


class SharedScans:
    """Scans of /proc that threads ask for at the same time are made in one
    pass: a thread that asks while a pass runs waits for the next one,
    which answers every ask made meanwhile (so each answer comes from a pass
    that began after it was asked). ``passes`` counts them."""

    def __init__(self):
        self._cond = threading.Condition()
        self._waiting: list[_Ask] = []
        self._scanning = False
        self.passes = 0

    def find(self, pgid, marker, since):
        return self.find_many([(pgid, marker, since)])[0]

    def find_many(self, asked):
        """``find`` for each ``(pgid, marker, since)`` of ``asked``, all in
        one pass: the list of each one's pids."""
        asks = [_Ask(pgid, marker, since) for pgid, marker, since in asked]
        with self._cond:
            self._waiting.extend(asks)
            while not all(ask.done for ask in asks):
                if self._scanning:
                    self._cond.wait()
                    continue
                batch, self._waiting = self._waiting, []
                self._scanning = True
                self.passes += 1
                self._cond.release()
                try:
                    _scan(batch)
                except BaseException as exc:   # every ask of the pass gets it, not a hang
                    for each in batch:
                        each.error = exc
                finally:
                    self._cond.acquire()
                    self._scanning = False
                    for each in batch:
                        each.done = True
                    self._cond.notify_all()
        for ask in asks:
            if ask.error is not None:
                raise ask.error
        return [ask.found for ask in asks]


SCANS = SharedScans()


def _scan(asks):
    """One pass over /proc that answers every ask in ``asks``."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    me = os.getpid()
    children: dict[int, list[tuple[int, int]]] = {}   # parent -> [(pid, start ticks)]
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            fields = _stat_fields(name)
            if fields[0] == b"Z":
                continue
            started, parent, group = int(fields[19]), int(fields[1]), int(fields[2])
            children.setdefault(parent, []).append((int(name), started))
            environ = None
            for ask in asks:
                if ask.since is not None and started < ask.since:
                    continue
                if group == ask.pgid:
                    ask.found.append(int(name))
                elif ask.marker is not None:
                    if environ is None:
                        with open("/proc/%s/environ" % name, "rb") as f:
                            environ = set(f.read().split(b"\0"))
                    if ask.marker in environ:
                        ask.found.append(int(name))
        except (OSError, IndexError, ValueError):
            continue
    for ask in asks:
        _add_descendants(ask, children)


def _add_descendants(ask, children):
    """The processes below ``ask``'s found ones too, as Mesos' POSIX launcher
    kills the tree by parent (``os::killtree``, stout): a daemon that left
    the group (setsid) and the environment (env -i) is still a child."""
    found = set(ask.found)
    stack = list(ask.found)
    while stack:
        for pid, started in children.get(stack.pop(), ()):
            if pid not in found and (ask.since is None or started >= ask.since):
                found.add(pid)
                ask.found.append(pid)
                stack.append(pid)


def signal_task(pgid, marker, signum, since=None, signalled=()):
    """Send ``signum`` to the task's group (None: none) and to its escaped
    processes, each once (Mesos' ``os::killtree``): a marked process still
    in the group, or in ``signalled`` (pids its cgroups signalled), is not
    signalled again (a second SIGTERM cut short what a task does on the
    first)."""
    # Found before the group is signalled: a child that left it (setsid),
    # its shell ended of the signal, would have no parent of the task's left.
    found = task_processes(pgid, marker, since) if marker is not None or pgid is not None \
        else []
    if pgid is not None:
        signal_quietly(os.killpg, pgid, signum)
    done = set(signalled)
    for pid in found:
        if pid in done or (pgid is not None and _group_of(pid) == pgid):
            continue
        signal_quietly(os.kill, pid, signum)


def _group_of(pid):
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def signal_quietly(send, target, signum):
    """``send(target, signum)``, ignoring a target that is gone or not ours."""
    try:
        send(target, signum)
    except (ProcessLookupError, PermissionError):
        pass


class Destruction:
    """The destruction of one task's processes (its group ``pgid``, None:
    none; its ``marker``), as Mesos destroys a container: SIGKILL every one
    found, until two passes in a row find none (a process forked while a
    pass listed /proc, by a parent that died before the pass read it, shows
    in the next), at most until ``deadline``. ``done`` once over; ``clean``
    passes in a row found none."""

    __slots__ = ("pgid", "marker", "since", "deadline", "clean", "done")

    def __init__(self, pgid, marker, since, deadline):
        self.pgid, self.marker, self.since, self.deadline = pgid, marker, since, deadline
        self.clean = 0
        self.done = False

    @property
    def complete(self):
        """Over with none left (not given up at the deadline)."""
        return self.clean >= 2


def destroy_pass(destructions):
    """One pass over /proc for every one of ``destructions``: what it finds
    is killed (and waited for, bounded by the nearest deadline); one out
    of time is SIGKILLed and given up with a warning. True when any was found."""
    found = SCANS.find_many([(each.pgid, each.marker, each.since) for each in destructions])
    left = []
    now = time.monotonic()
    for each, pids in zip(destructions, found):
        if not pids:
            each.clean += 1
            each.done = each.complete
        elif now >= each.deadline:
            for pid in pids:
                signal_quietly(os.kill, pid, signal.SIGKILL)
            log.warning("task processes %s still alive after SIGKILL", pids)
            each.done = True
        else:
            each.clean = 0
            left.extend(pids)
    if left and not kill_and_wait(left, max(0.0, min(
            each.deadline for each in destructions if not each.done) - now)):
        time.sleep(0.01)    # no pidfds here, or they are still dying
    return bool(left)


def destroy_task(pgid, marker, timeout=2.0, since=None):
    """What destroying a Mesos container does: SIGKILL every process of the
    task, and wait (bounded) until none is left; True when none is."""
    destruction = Destruction(pgid, marker, since, time.monotonic() + timeout)
    while not destruction.done:
        destroy_pass([destruction])
    return destruction.complete


__all__ = ["start_ticks", "task_processes", "signal_task", "signal_quietly", "destroy_task",
           "Destruction", "destroy_pass"]
