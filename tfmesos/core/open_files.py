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
# A hard limit is lower only where someone set it so (ulimit -Hn 64): a run
# that surely fits in this looks no further.
SURELY_ALLOWED = 64

Limits = tuple[int, int]


def at_least(tasks: int) -> int:
    """Open files a run of ``tasks`` tasks takes for certain (the measured
    peak: 622 for 200 tasks on the embedded master): with fewer it cannot
    go, and failed in tracebacks (EMFILE in the agent's threads, run.json
    not written)."""
    return 32 + 3 * max(tasks, 0)


def too_few(tasks: int, get: Optional[Callable[[int], Limits]] = None) -> Optional[str]:
    """Why this process cannot run ``tasks`` tasks at all (its hard
    open-files limit is below ``at_least``), else None."""
    if at_least(tasks) <= SURELY_ALLOWED:
        return None
    import resource

    try:
        soft, hard = (get or resource.getrlimit)(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    if hard == resource.RLIM_INFINITY or hard >= at_least(tasks):
        return None
    return ("%d tasks need at least %d open files at once, and this process may open %d at "
            "most (ulimit -Hn): raise the hard limit (limits.conf, LimitNOFILE=), or run at "
            "most %d tasks" % (tasks, at_least(tasks), hard, max(0, (hard - 32) // 3)))


def check(tasks: int) -> None:
    """SpecError (``too_few``'s words) when this process cannot run
    ``tasks`` tasks at all: tfrun and the APIs ask it before a run."""
    why = too_few(tasks)
    if why:
        from ..exceptions import SpecError
        raise SpecError(why)


def needed(tasks: int) -> int:
    """Open files a run of ``tasks`` tasks may need at once."""
    return BASE + PER_TASK * max(tasks, 0)


def raise_for(tasks: int, get: Optional[Callable[[int], Limits]] = None,
              set_: Optional[Callable[[int, Limits], None]] = None) -> Optional[str]:
    """Raise this process's soft open-files limit to ``needed(tasks)`` where
    it is lower, up to the hard limit; never lowers it. A warning when even
    the hard limit is below that, else None. (``get``, ``set_``: the
    tests' stand-ins for ``resource.getrlimit`` and ``setrlimit``.)"""
    # Looked at for every run: a soft limit below the common defaults (256
    # on macOS, 1,024 on Linux) is someone's ulimit -Sn.
    want = needed(tasks)
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


__all__ = ["BASE", "PER_TASK", "at_least", "needed", "raise_for",
           "too_few", "check"]
