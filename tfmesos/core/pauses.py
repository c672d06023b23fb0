"""When the scheduler's own process did not run for long (Ctrl-Z, SIGSTOP, a
machine suspended): its tasks, hearing nothing from it for
``task_env.SCHEDULER_SILENCE`` seconds, took it for gone and stopped their
commands, and the failure that follows says only how they ended (a SIGTERM's
143). ``PauseWatch`` notices such a gap in the run's event loop
(``ClusterRun.step``) and words it for the failure that comes of it."""

from typing import Callable, Optional

from ..protocol.task_env import SCHEDULER_SILENCE


class PauseWatch:
    """A gap in the loop as long as the tasks' silence is such a pause: a
    step waits a second at most, and handles an event in far less."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._stepped: Optional[float] = None   # when the last step ended
        self._resumed: Optional[float] = None   # when the last long pause ended
        self._paused = 0.0                      # and how long it was

    def step_began(self) -> float:
        now = self._clock()
        if self._stepped is not None:
            self._check(now - self._stepped, now)
        return now

    def step_ended(self, began: float, waited: float) -> None:
        """A step that began at ``began`` and may have waited ``waited`` s."""
        now = self._clock()
        self._check(now - began - waited, now)
        self._stepped = now

    def _check(self, gap: float, now: float) -> None:
        if gap >= SCHEDULER_SILENCE:
            self._resumed, self._paused = now, gap

    def note(self) -> Optional[str]:
        """What a failure soon after a pause long enough to stop the tasks
        should say of it, else None."""
        if self._resumed is None or self._clock() - self._resumed > SCHEDULER_SILENCE:
            return None
        return ("tfrun itself did not run for %.0f s (stopped: Ctrl-Z, SIGSTOP?): a task "
                "that hears nothing from its scheduler for %.0f s stops its command"
                % (self._paused, SCHEDULER_SILENCE))


__all__ = ["PauseWatch"]
