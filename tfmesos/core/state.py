"""Where a run stands: its phase, its task slots, the tasks away from the
rendezvous and its outcome, behind the run's one lock (the slots').

``ClusterRun`` owns one ``RunState``; the failure policy reads it and
changes it through its methods (and through ``control.Control`` for what
also acts outside the run), in the thread that handles the run's events.
The policy's unit tests use the very same class: their fake run fakes only
what acting does outside (``control.Effects``).
"""

import logging
from collections.abc import Iterable
from typing import Optional

from .jobs import Job
from .phase import ENDING, Phase, next_phase
from .slots import SlotTable

logger = logging.getLogger(__name__)


class RunState:
    """The state of one run of ``jobs``."""

    def __init__(self, jobs: Iterable[Job]) -> None:
        self.slots = SlotTable(jobs)
        self.lock = self.slots.lock
        self._phase = Phase.NEW
        # The error that ended the run early: the thread that waits raises it.
        self.failure: Optional[BaseException] = None
        # Task id -> (when it was last heard, why its connection ended).
        self._away: dict[str, tuple[float, str]] = {}

    # -- the phase ------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def ending(self) -> bool:
        """The run is stopping or stopped: failures and restarts are moot."""
        return self._phase in ENDING

    def move(self, target: Phase) -> bool:
        """Go to phase ``target``; False when the run is stopping (the stop
        wins) or failed (it can only stop). ``phase.IllegalTransition`` for a
        move that is a bug."""
        with self.lock:
            if self.failure is not None and target not in ENDING:
                return False    # a failed run only stops
            moved = next_phase(self._phase, target)
            if moved is None:
                return False
            self._phase = moved
            return True

    # -- the outcome ----------------------------------------------------------

    def fail(self, error: BaseException) -> bool:
        """``error`` ends the run, unless it is stopping (the stop wins) or
        failed already (the first failure is the one reported). True when
        ``error`` became the run's failure."""
        with self.lock:
            if self._phase in ENDING or self.failure is not None:
                return False
            self.failure = error
            return True

    # -- tasks away from the rendezvous ----------------------------------------

    def left(self, task_id: str, since: float, reason: str) -> None:
        """``task_id`` lost its rendezvous connection, last heard at ``since``."""
        self._away[task_id] = (since, reason)

    def back(self, task_id: str) -> bool:
        """``task_id`` is connected again; True when it had been away."""
        return self._away.pop(task_id, None) is not None

    def forget_absence(self, task_id: str) -> None:
        """``task_id`` was stopped on purpose: its absence means nothing."""
        self._away.pop(task_id, None)

    def away(self) -> list[tuple[str, float, str]]:
        """[(task id, since, reason)] of the tasks away now."""
        return [(task_id, since, reason) for task_id, (since, reason) in self._away.items()]


__all__ = ["RunState"]
