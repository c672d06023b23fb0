"""Whether the process that runs a run (tfrun, or the Python that called
``cluster()``) is still there: run.json's ``scheduler`` (``this_process``)
names it by host, boot, pid namespace, pid and start time, and a reader
on the same host, boot and pid namespace can tell when it is gone
(``gone``): killed with SIGKILL, or its machine's power cut, before it
could write the run's outcome. Anywhere else (another host, a container
with a pid namespace of its own, a file without ``scheduler``) nothing can
be told, and the run is taken to be going as run.json says.

Linux's ``/proc`` is read (the pid's start time tells a reused pid);
elsewhere only whether the pid exists.
"""

import os
import socket
from typing import Optional

from .schema import Scheduler

_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def this_process() -> Scheduler:
    """The ``schema.Scheduler`` of this process."""
    pid = os.getpid()
    return Scheduler(host=socket.gethostname(), pid=pid, boot_id=_boot_id(),
                     pid_namespace=_pid_namespace(), start_ticks=_start_ticks(pid))


def gone(scheduler: Optional[Scheduler]) -> bool:
    """True when ``scheduler``'s process is known to be gone: it ran on
    this host, boot and pid namespace, and no process with its pid and
    start time is there. False when it is there, or nothing can be told."""
    if scheduler is None or not scheduler.pid or scheduler.pid < 0:
        return False
    here = this_process()
    if scheduler.host != here.host or scheduler.boot_id != here.boot_id \
            or scheduler.pid_namespace != here.pid_namespace:
        return False
    if here.start_ticks is None:   # no /proc: only whether the pid exists
        try:
            os.kill(scheduler.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False
    started = _start_ticks(scheduler.pid)   # None too for a zombie: it has ended
    return started is None or (scheduler.start_ticks is not None
                               and started != scheduler.start_ticks)


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _boot_id() -> Optional[str]:
    text = _read(_BOOT_ID)
    return text.strip() if text else None


def _pid_namespace() -> Optional[str]:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _start_ticks(pid: int) -> Optional[int]:
    """The start time of process ``pid`` in clock ticks after boot
    (/proc/PID/stat's 22nd field), or None (no such process, one that
    ended and was not reaped yet, no /proc)."""
    text = _read("/proc/%d/stat" % pid)
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()   # fields[0] is the state, the 3rd field
    if not fields or fields[0] in ("Z", "X"):  # a zombie, dead: ended
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


__all__ = ["this_process", "gone"]
