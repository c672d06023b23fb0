"""What a signal that reaches a run records: an interrupt (Ctrl-C, or
SIGTERM/SIGHUP taken as one: ``signals``) is the run's outcome, except that
a detached run's scheduler task (``tfrun --detach``) is SIGTERMed only by
Mesos, so there the run was killed. A part of ``launch.ClusterRun``: the
attributes below are the run's, declared for what these use of it."""

import contextlib
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING, Optional

from ..exceptions import RunKilled
from .signals import interrupted_by

if TYPE_CHECKING:
    from ..record.run_record import RunRecord
    from .phase import Phase


def killed_text(when: str = "") -> str:
    """What a detached run's scheduler task SIGTERMed says (``when``: " as
    it started", before its run was made)."""
    return ("the run was killed: Mesos killed its scheduler task%s (its framework torn down "
            "by an operator or tfmesos kill, or the task killed)" % when)


class RunInterrupts:
    """The interrupts of a ``ClusterRun`` (module docstring)."""

    record: "RunRecord"
    _killed: Optional[RunKilled] = None   # the kill, once recorded

    if TYPE_CHECKING:   # the run's read-only properties
        @property
        def phase(self) -> "Phase": ...

        @property
        def detached(self) -> bool: ...

    @contextlib.contextmanager
    def _recording(self) -> Iterator[None]:
        """Record the outcome of an exception that leaves the block (a
        detached run's scheduler task's SIGTERM: killed, ``as_kill``)."""
        try:
            yield
        except BaseException as exc:
            self.record.ended(self.as_kill(exc) or exc, self.phase)
            raise

    def as_kill(self, interrupt: BaseException) -> Optional[RunKilled]:
        """Where ``interrupt`` is a SIGTERM's (``signals.interrupted_by``)
        to a detached run's scheduler task, raised as the run starts or
        stops rather than queued for its loop (``step``): the kill,
        recorded and saved (``_scheduler_task_killed``); else None."""
        if self.detached and type(interrupt) is KeyboardInterrupt \
                and interrupted_by() == signal.SIGTERM:
            return self._scheduler_task_killed()
        return None

    def _scheduler_task_killed(self) -> RunKilled:
        """The kill (below), recorded and saved once however many of the
        run's callers see the SIGTERM's interrupt go by."""
        if self._killed is None:
            self._killed = self._record_killed()
        return self._killed

    def _record_killed(self) -> RunKilled:
        """A detached run's scheduler task got SIGTERM: only Mesos sends it
        one (its framework torn down by an operator or ``tfmesos kill``, a
        KILL of the task, its agent going away), and Mesos' command executor
        SIGKILLs it about 3 s later whatever its KillPolicy says when its
        framework is removed (the agent's --executor_shutdown_grace_period
        less 2 s: ``CommandExecutor::shutdown``, src/launcher/executor.cpp).
        The run was killed: recorded and saved first, before the stop
        (which keeps the first outcome) that may not get to its end."""
        killed = RunKilled(killed_text())
        self.record.ended(killed, self.phase)
        self.record.save()
        return killed


__all__ = ["RunInterrupts", "killed_text"]
