"""The leader of the process group of a replica task's hook or command:

    python -I -S replica_guard.py TASK_PID GRACE COMMAND

Linux's parent-death signal (PR_SET_PDEATHSIG) reaches only the process that
set it, not what it starts: so the guard sets it for itself and, when the
task entry (``python -m tfmesos.task``) dies (SIGKILL, the OOM killer), stops
its whole group — SIGTERM, then SIGKILL after GRACE seconds — grandchildren
included.

The task entry stops the group with SIGTERM too: the guard then waits for the
command and exits with its status (128 + N for signal N). A SIGTERM before
the command started (or once the task entry is gone) makes the guard stop the
group itself, so the command never starts. Run without ``site`` (``-S``) and
isolated (``-I``), it starts in about 20 ms; it imports nothing of tfmesos.
"""

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1


class _Stop(Exception):
    """Take the group down."""


def _running(pid):
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == 0
    except ChildProcessError:
        return False


def _stop_group(child, grace):
    """SIGTERM the group, SIGKILL it after ``grace``: the guard dies with it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while child and time.monotonic() < deadline and _running(child):
        time.sleep(0.05)
    os.killpg(0, signal.SIGKILL)


def main(parent, grace, command):
    child = None

    def on_sigterm(signum, frame):
        if child is None or os.getppid() != parent:
            raise _Stop()

    signal.signal(signal.SIGTERM, on_sigterm)
    if os.getpgrp() != os.getpid():  # the group it stops must be its own
        os.setsid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0):
            print("tfmesos guard: prctl failed: %s" % os.strerror(ctypes.get_errno()),
                  file=sys.stderr)
        if os.getppid() != parent:  # the task entry died before the death signal was set
            raise _Stop()
        child = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", command], os.environ,
                               setsigdef=(signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ))
        status = os.waitpid(child, 0)[1]
    except _Stop:
        _stop_group(child, grace)
        return 128 + signal.SIGKILL   # not reached: the guard is in its group
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    os._exit(main(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]))
