"""The processes that left an ended task's cgroups, killed in sweeps: the
ends of many tasks share each pass over /proc, off the path of their
terminal updates.

A root task can write its pid into other cgroups (and leave its group with
setsid()); its environment still names the task's sandbox
(``MESOS_SANDBOX=...``), and it dies with its task here (issue 26). Mesos'
Linux launcher destroys a container by its cgroups alone
(``LinuxLauncherProcess::destroy``, src/slave/containerizer/mesos/
linux_launcher.cpp): such a process outlives its task there, so killing it
a moment after the terminal update is still stricter than Mesos.

Looked for at each task's end, one scan each read every process's stat
(``process_tree``): N tasks ending on one agent made N^2 reads (a third of
tfrun's CPU with 210 tasks). The sweeper gathers ends for ``GATHER``
seconds, then makes one pass for every task not yet done: a task is done
once two passes in a row found none of its processes (a process forked
while a pass read /proc shows in the next), at most ``TIMEOUT`` seconds
after its end (``process_tree.Destruction``, as ``destroy_task``); a
pass that killed any is followed by another at once.
``EscapeSweeper.drain()`` sweeps what is pending at once (a master that
stops leaves nothing behind)."""

import logging
import threading
import time
from typing import Optional

from .process_tree import Destruction, destroy_pass

log = logging.getLogger(__name__)

GATHER = 0.25     # seconds the ends of a burst are gathered before a pass
TIMEOUT = 2.0     # seconds a task's escaped processes get to die (destroy_task's)


class EscapeSweeper:
    """One master's sweeps (``add`` at each isolated task's end); a thread
    runs while there are any. ``passes`` counts the scans of /proc."""

    def __init__(self, gather: float = GATHER, timeout: float = TIMEOUT) -> None:
        self.gather, self.timeout = gather, timeout
        self._cond = threading.Condition()
        self._pending: list[Destruction] = []
        self._thread: Optional[threading.Thread] = None
        self._hurry = 0          # drain() calls waiting: no gathering
        self.passes = 0

    def add(self, marker: bytes, since: Optional[int]) -> None:
        """Kill the processes whose environment holds ``marker`` and that
        started at or after ``since`` (``process_tree.start_ticks``)."""
        with self._cond:
            self._pending.append(Destruction(None, marker, since,
                                             time.monotonic() + self.timeout))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="escape-sweeper")
                self._thread.start()

    def drain(self, timeout: float = TIMEOUT + 1.0) -> bool:
        """Sweep what is pending now, without gathering; True once nothing
        is (False: still sweeping after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._hurry += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: self._thread is None,
                                           max(0.0, deadline - time.monotonic()))
            finally:
                self._hurry -= 1

    def _run(self) -> None:
        again = False     # the last pass killed some: look again at once
        while True:
            with self._cond:
                if not self._pending:
                    self._thread = None
                    self._cond.notify_all()
                    return
                if not again:
                    self._cond.wait_for(lambda: self._hurry > 0, self.gather)
                batch = list(self._pending)
            try:
                again = destroy_pass(batch)
                self.passes += 1
            except Exception:  # a failure must not kill the thread: later ends are swept
                log.exception("sweeping the processes that left their tasks' cgroups failed")
                again = False
                for sweep in batch:
                    sweep.done = True
            with self._cond:
                self._pending = [sweep for sweep in self._pending if not sweep.done]


__all__ = ["EscapeSweeper", "GATHER", "TIMEOUT"]
