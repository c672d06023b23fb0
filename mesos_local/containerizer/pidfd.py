"""Waiting for processes to end as it happens, not by polling: Linux
pidfds (pidfd_open(2), Linux 5.3). A pidfd turns readable once its process
has ended -- a zombie waiting for its parent, or gone -- whoever its parent
is. Where pidfds are missing (an older kernel, a seccomp filter) the
helpers say so and the callers fall back to polling.
"""

import os
import select
import signal
import time


def open_pidfd(pid):
    """A pidfd of ``pid`` (close it), or None when pidfds cannot be used
    here. ProcessLookupError when ``pid`` is gone."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        raise
    except (AttributeError, OSError):    # ENOSYS, EPERM under seccomp, EMFILE
        return None


def wait_readable(fds, timeout):
    """Wait until every fd of ``fds`` is readable (for a pidfd: its process
    ended), at most ``timeout`` seconds; True when all are."""
    pending = set(fds)
    poller = select.poll()
    for fd in pending:
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + max(0.0, timeout)
    while pending:
        remaining = max(0.0, deadline - time.monotonic())
        ready = poller.poll(remaining * 1000)
        for fd, _ in ready:
            pending.discard(fd)
            poller.unregister(fd)
        if not ready and time.monotonic() >= deadline:
            return False
    return True


def kill_and_wait(pids, timeout):
    """SIGKILL each of ``pids`` and wait (at most ``timeout`` seconds) until
    they have ended. True when they have; False on timeout or where pidfds
    cannot be used (the processes were still sent SIGKILL)."""
    fds, watched = [], True
    try:
        for pid in pids:
            try:
                fd = open_pidfd(pid)
            except ProcessLookupError:
                continue
            if fd is None:
                watched = False
                _kill(pid)
                continue
            fds.append(fd)
            try:
                # Through the pidfd: never a process that took over a reused pid.
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            except OSError:
                _kill(pid)
        return wait_readable(fds, timeout) and watched
    finally:
        for fd in fds:
            os.close(fd)


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


__all__ = ["open_pidfd", "wait_readable", "kill_and_wait"]
