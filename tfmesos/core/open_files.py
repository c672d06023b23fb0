"""The open files a run's scheduler process may need: a rendezvous connection
per task and, with the embedded master, its agent's descriptors for each
task's process (its pidfd, the sockets of its calls). The common default
soft limit, 1,024, was reached by 200 tasks on the embedded master (two
descriptors a task were its run log files, now held open only while
written: ``record.task_logs.OPEN_FILES``); by 300, accepts and task starts
failed with EMFILE, in tracebacks. So a run raises its process's soft
``RLIMIT_NOFILE`` to what its tasks may need, within the hard limit (which
needs no privilege; Go's runtime raises it for every program). Processes
this one starts inherit the raised limit, as the tasks of a Mesos agent
inherit the agent's (docs/isolators/posix-rlimits.md: limits "are
inherited when a child process is forked from a parent process")."""

from typing import Callable, Optional

# Measured: 200 tasks on the embedded master peaked at 622 open files (its
# rendezvous connections and HTTP handlers' sockets, the agent's pidfds).
BASE = 128       # the interpreter's own, the master's connections, the record, the ship server
PER_TASK = 4     # a rendezvous connection; the embedded agent's pidfd and sockets
# No soft limit in common use is below this (macOS' default; Linux' is
# 1,024): a run that needs no more neither looks (nor imports ``resource``
# on tfrun's start-up path).
LOWEST_DEFAULT = 256

Limits = tuple[int, int]


def needed(tasks: int) -> int:
    """Open files a run of ``tasks`` tasks may need at once."""
    return BASE + PER_TASK * max(tasks, 0)


def raise_for(tasks: int, get: Optional[Callable[[int], Limits]] = None,
              set_: Optional[Callable[[int, Limits], None]] = None) -> Optional[str]:
    """Raise this process's soft open-files limit to ``needed(tasks)`` where
    it is lower, up to the hard limit; never lowers it. A warning when even
    the hard limit is below that, else None. (``get``, ``set_``: the
    tests' stand-ins for ``resource.getrlimit`` and ``setrlimit``.)"""
    want = needed(tasks)
    if want <= LOWEST_DEFAULT:
        return None
    import resource

    get = get or resource.getrlimit
    set_ = set_ or resource.setrlimit
    try:
        soft, hard = get(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or soft >= want:
        return None
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if target > soft:
        try:
            set_(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):
            target = soft
    if target >= want:
        return None
    return ("%d tasks may need up to %d open files at once, and this process may open %d "
            "(ulimit -n; hard limit %d): raise the hard limit (ulimit -Hn, limits.conf, "
            "LimitNOFILE=), or run fewer tasks" % (tasks, want, target, hard))


__all__ = ["BASE", "PER_TASK", "LOWEST_DEFAULT", "needed", "raise_for"]
