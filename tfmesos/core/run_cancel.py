"""A function run's cancellation (``tfmesos.submit``'s future, the
program's exit): ``Cancel``, asked from another thread, and the
``RunCancelled`` failure it ends the run with."""

import threading
from concurrent.futures import CancelledError
from typing import TYPE_CHECKING, Optional

from ..exceptions import ClusterError

if TYPE_CHECKING:
    from .launch import ClusterRun


class RunCancelled(ClusterError, CancelledError):
    """The run was cancelled (``RunFuture.cancel``): its failure, which ends it."""


CANCELLED = "cancelled: its future's cancel() stopped it"
# What ``submit``'s at-exit hook cancels: nobody called cancel().
CANCELLED_AT_EXIT = "cancelled: the program exited with the run still going"


class Cancel:
    """A run's cancellation, asked from another thread (``tfmesos.submit``'s
    future): the run's failure becomes ``RunCancelled``, which its thread
    raises at its next step (a second at most while it waits), then stops
    every task and tears the framework down, as after any failure."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._run: Optional[ClusterRun] = None
        self._asked = False
        self._ended = False
        self._why = CANCELLED

    @property
    def asked(self) -> bool:
        return self._asked

    def ask(self, why: str = CANCELLED) -> bool:
        """Cancel the run (``why``: what its record says); False when it
        has ended already (its outcome stands)."""
        with self._lock:
            if self._ended:
                return False
            if not self._asked:
                self._why = why
            self._asked = True
            run = self._run
        if run is not None:
            self._stop(run, self._why)
        return True

    def attach(self, run: "ClusterRun") -> None:
        """``run`` is the call's, before it starts; ``RunCancelled`` when
        cancelled already."""
        with self._lock:
            self._run = run
            asked = self._asked
        if asked:
            self._stop(run, self._why)
            raise RunCancelled(self._why)

    def end(self) -> bool:
        """The run's thread is done with it: whether it was cancelled."""
        with self._lock:
            self._ended = True
            return self._asked

    @staticmethod
    def _stop(run: "ClusterRun", why: str) -> None:
        state = run.state
        with state.lock:   # the cancel is the outcome only when it ends the run
            if state.failure is None and not state.ending:
                run.record.outcome("interrupted", why)
                state.fail(RunCancelled(why))


__all__ = ["Cancel", "RunCancelled", "CANCELLED", "CANCELLED_AT_EXIT"]
