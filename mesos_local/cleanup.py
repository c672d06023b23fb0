"""What a stopped master leaves, removed: its tasks' cgroups and its own
work directory (its sandboxes), by the master's ``stop()`` or, with
``stop(detached_cleanup=True)``, by a detached cleaner that outlives it
(``start_cleaner``: this file run as a script, ``python -I -S cleanup.py
[--cgroup DIR]... [--tree DIR]``, in a session of its own), so that the
master's process may exit at once (tfmesos' embedded master: tfrun's end).

What no cleaner got to (the master or its cleaner killed with SIGKILL) the
next master's start removes: the cgroups of masters that are gone
(``cgroups.remove_stale``, which kills what is still in them) and, here,
their work directories (``remove_stale_work_dirs``), named after the
process that made them as the cgroups are (a killed master's tasks
themselves its watchdog ends, ``watchdog.py``, with or without cgroups)::

    mesos-local-<pid namespace>.<pid>.<start ticks>-XXXXXXXX

Standard library only, nothing of the package: the cleaner is this file
alone, started by path with ``-I -S`` (a few milliseconds of start-up) and
not a fork of the master (forking a process with threads: only what is
async-signal-safe may run in the child).
"""

import _thread
import errno
import functools
import logging
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Optional

log = logging.getLogger("mesos_local.cleanup")

WORK_DIR_PREFIX = "mesos-local-"
_WORK_DIR = re.compile(r"^mesos-local-(\d+\.\d+\.\d+)-[A-Za-z0-9_]+\Z")   # its master's
CLEANUP_TIMEOUT = 5.0   # seconds a master's cgroups get to empty before their removal fails


# -- processes ---------------------------------------------------------------

def process_start(pid: int) -> Optional[int]:
    """The start time (clock ticks after boot) of ``pid``, or None when it
    is gone or a zombie (proc(5): field 22 of /proc/PID/stat)."""
    try:
        with open("/proc/%d/stat" % pid, encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] == "Z":
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _pid_namespace() -> Optional[int]:
    """4026531836 of this process' ``pid:[4026531836]``, or None."""
    try:
        found = re.fullmatch(r"pid:\[(\d+)\]", os.readlink("/proc/self/ns/pid"))
    except OSError:
        return None
    return int(found.group(1)) if found else None


def pid_namespace() -> Optional[int]:
    """This process' pid namespace (the inode number ``/proc/self/ns/pid``
    names), or None."""
    return _pid_namespace()


def this_master() -> Optional[str]:
    """``<pid namespace>.<pid>.<start ticks>`` of this process, as its work
    directory and cgroups are named (None without /proc): what a resource
    of a master is labelled with so that the next master's start can tell
    whether its maker is gone (``master_gone``)."""
    namespace, start = _pid_namespace(), process_start(os.getpid())
    if namespace is None or start is None:
        return None
    return "%d.%d.%d" % (namespace, os.getpid(), start)


@functools.cache   # a host's boot does not change under a process
def boot_id() -> Optional[str]:
    """This host's boot (/proc/sys/kernel/random/boot_id), None without it:
    what tells a resource of this host's masters from one of another host's
    on an engine they share (a pid namespace's number is the same on most
    hosts)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip() or None
    except (OSError, ValueError):
        return None


def master_gone(owner: object) -> bool:
    """Whether the master ``owner`` (``this_master()``'s form) is a process
    of this pid namespace that is gone (its pid gone or reused); False for
    anything else (another namespace's, a malformed label: not ours to
    judge)."""
    found = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", owner) if isinstance(owner, str) else None
    if found is None or int(found.group(1)) != _pid_namespace():
        return False
    return process_start(int(found.group(2))) != int(found.group(3))


# -- cgroups -------------------------------------------------------------------

def children(directory: str) -> list[str]:
    """The subdirectories of ``directory`` (its child cgroups), [] when it
    is gone. (scandir's d_type: no stat of each control file.)"""
    try:
        with os.scandir(directory) as entries:
            return [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def cgroup_pids(directory: str) -> set[int]:
    """The processes in the cgroup ``directory`` (none once it is gone)."""
    try:
        with open(os.path.join(directory, "cgroup.procs"), encoding="ascii") as handle:
            return {int(pid) for pid in handle.read().split()}
    except (OSError, ValueError):
        return set()


def remove_dir(path: str, deadline: float) -> bool:
    """rmdir the cgroup ``path`` (retried while the kernel still counts a
    dying task); True when it is gone (a failure is logged)."""
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                log.warning("cannot remove cgroup %s: %s", path, exc)
                return False
            time.sleep(0.02)


def destroy_cgroup(directory: str, timeout: float) -> bool:
    """SIGKILL what the cgroup ``directory`` holds until it is empty, then
    remove it (polling: ``cgroups.TaskCgroups.destroy`` waits on pidfds)."""
    deadline = time.monotonic() + timeout
    while True:
        left = cgroup_pids(directory)
        if not left or time.monotonic() >= deadline:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
    return remove_dir(directory, deadline)


def remove_master_cgroups(directories: Iterable[str], timeout: float = CLEANUP_TIMEOUT,
                          destroy: Callable[[str, float], bool] = destroy_cgroup) -> None:
    """Kill every process left in the task cgroups under ``directories`` (one
    master's, one per hierarchy; ``destroy(task directory, timeout)``
    kills and removes one), then remove them all."""
    directories = list(directories)
    deadline = time.monotonic() + timeout
    for _ in range(2):     # a task forked while the first pass listed it
        for directory in directories:
            for entry in children(directory):
                destroy(entry, max(0.5, deadline - time.monotonic()))
    for directory in directories:
        remove_dir(directory, deadline)


# -- work directories ------------------------------------------------------------

def make_work_dir(named: bool = True) -> str:
    """A new work directory in the temporary directory (0700,
    ``tempfile.mkdtemp``), ``named`` after this process where /proc tells
    its pid namespace and start time (``remove_stale_work_dirs`` removes it
    once this process is gone), else ``mesos-local-XXXXXXXX``, which only
    its maker removes (a master that keeps its sandboxes)."""
    owner = this_master() if named else None
    return tempfile.mkdtemp(prefix=WORK_DIR_PREFIX if owner is None
                            else "%s%s-" % (WORK_DIR_PREFIX, owner))


def remove_stale_work_dirs(root: Optional[str] = None) -> list[str]:
    """Remove the work directories ``make_work_dir`` named, in ``root``
    (default: the temporary directory), of processes that are gone (their
    pid, in this pid namespace, gone or reused): a directory itself (never
    through a symbolic link), of this user. Returns the paths removed; one
    that cannot be removed is left, not an error."""
    root = root or tempfile.gettempdir()
    if _pid_namespace() is None:
        return []   # no /proc: nothing tells a gone process from a live one
    try:
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    for name in names:
        found = _WORK_DIR.match(name) if name.startswith(WORK_DIR_PREFIX) else None
        if found is None or not master_gone(found.group(1)):
            continue   # not a master's, or its master is alive (or another namespace's)
        path = os.path.join(root, name)
        try:
            status = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid():
            continue   # a symbolic link, or another user's: not ours to remove
        # rmtree follows no link (it refuses one as its top); its cleaner may
        # be removing it at the same moment: whatever is gone is gone.
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            removed.append(path)
    if removed:
        log.info("removed the work directories of stopped masters: %s", ", ".join(removed))
    return removed


# -- the detached cleaner --------------------------------------------------------

def clean(cgroups: Iterable[str] = (), tree: Optional[str] = None) -> None:
    """Remove one master's cgroup directories ``cgroups`` (one per
    hierarchy) and its work directory ``tree``."""
    cgroups = list(cgroups)
    if cgroups:
        remove_master_cgroups(cgroups)
    if tree is not None:
        shutil.rmtree(tree, ignore_errors=True)


_started: list[int] = []   # cleaners this process started, not reaped yet
# The masters of runs submitted together stop in threads of their own.
_reaping = _thread.allocate_lock()


def reap_exited(children: list[int], lock: "_thread.LockType") -> None:
    """Drop from ``children`` (this process' children that nothing waits
    for: cleaners, closed watchdogs) those that exited, reaping them, under
    ``lock`` (two threads reaping one pid: ChildProcessError, then a second
    ``remove`` raised ValueError in a stop)."""
    with lock:
        for pid in list(children):
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue
            except ChildProcessError:
                pass
            children.remove(pid)


def start_cleaner(cgroups: Iterable[str] = (), tree: Optional[str] = None) -> int:
    """Start the detached cleaner of ``clean(cgroups, tree)``: this file,
    exec'd in a session of its own with nothing of this process open but
    /dev/null as its standard streams (whoever reads this process' output
    sees its end when this process exits), that outlives this process.
    Returns its pid; OSError when it could not start.

    ``posix_spawn`` (vfork and exec: ~0.3 ms here, where ``subprocess``
    took 1 to 10 ms in a tfrun's end, waiting for the GIL around its steps,
    and a reaper thread as much to start). Not reaped by a waiting thread:
    the next call reaps the cleaners that ended (a process that exits
    leaves its own to init)."""
    reap_exited(_started, _reaping)
    argv = [sys.executable, "-I", "-S", os.path.abspath(__file__)]
    for directory in cgroups:
        argv += ["--cgroup", directory]
    if tree is not None:
        argv += ["--tree", tree]
    streams = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0),
               (os.POSIX_SPAWN_DUP2, 0, 1), (os.POSIX_SPAWN_DUP2, 0, 2)]
    try:
        pid = os.posix_spawn(sys.executable, argv, os.environ, file_actions=streams,
                             setsid=True)
    except NotImplementedError as exc:   # POSIX_SPAWN_SETSID needs glibc 2.26
        raise OSError(str(exc)) from None
    _started.append(pid)
    try:   # it yields to what this process has left to do (a tfrun's last words)
        os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10))
    except OSError:
        pass
    return pid


def main(argv: list[str]) -> int:
    cgroups: list[str] = []
    tree = None
    while len(argv) >= 2 and argv[0] in ("--cgroup", "--tree"):
        if argv[0] == "--cgroup":
            cgroups.append(argv[1])
        else:
            tree = argv[1]
        argv = argv[2:]
    if argv:
        sys.stderr.write("usage: cleanup.py [--cgroup DIR]... [--tree DIR]\n")
        return 2
    clean(cgroups, tree)
    return 0


__all__ = ["WORK_DIR_PREFIX", "process_start", "children", "cgroup_pids", "remove_dir",
           "destroy_cgroup", "remove_master_cgroups", "make_work_dir", "remove_stale_work_dirs",
           "clean", "start_cleaner"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


