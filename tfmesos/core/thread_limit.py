"""A thread that cannot start: Python's ``RuntimeError("can't start new
thread")``, which pthread_create's EAGAIN gives once this user's processes
and threads reach its limit (RLIMIT_NPROC, ``ulimit -u``: every thread of
every process of the user counts), or the system has no more to give (its
memory, ``kernel.threads-max``, a cgroup's ``pids.max``). Imported where
one failed: not on a run's start-up path."""

import resource
from typing import Optional


def thread_refused(error: BaseException) -> bool:
    """Whether ``error`` is a thread's start refused for want of one (not
    the refusal of a thread started as the interpreter shuts down)."""
    if not isinstance(error, RuntimeError):
        return False
    text = str(error)
    return ("can't start new thread" in text or "can't create new thread" in text) \
        and "shutdown" not in text


def process_limit() -> Optional[int]:
    """This process's soft RLIMIT_NPROC (``ulimit -u``), None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    return None if soft == resource.RLIM_INFINITY else soft


def thread_refused_text(error: BaseException) -> str:
    """One line: what was refused, why it most likely was, what to do."""
    limit = process_limit()
    if limit is not None:
        why = ("the limit on this user's processes and threads (ulimit -u %d) is reached: "
               "raise it (ulimit -u), or run fewer tasks at once" % limit)
    else:
        why = ("the system gives this process no more threads (its memory, "
               "kernel.threads-max or a cgroup's pids.max is reached)")
    return "cannot start a thread (%s): %s" % (error, why)


__all__ = ["process_limit", "thread_refused", "thread_refused_text"]
