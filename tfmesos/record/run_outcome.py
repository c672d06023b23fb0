"""How a run ended, as its record keeps it (``RunRecord``'s outcome): the
first outcome recorded stays, but for the few that a later word replaces
(an interrupt that only left the run to its tasks, a peer's failure that
its cause replaces); its hint, from the task's logs or what the run knows
better (``hint_next_outcome``)."""

import dataclasses
import threading
from collections.abc import Hashable
from typing import Optional

from .attempt_hints import attempt_hint, hint_failed_attempts
from .outcomes import KILLED, outcome_of, outcome_text, tfrun_exit_code
from .schema import Outcome, RunFile, Task
from .task_logs import TaskLogs


class RunOutcome:
    """``RunRecord``'s outcome, on the record's own state (the attributes
    below, which ``RunRecord.__init__`` sets)."""

    _run: RunFile
    _lock: threading.RLock
    _dirty: bool
    _next_hint: Optional[str]   # hint_next_outcome's
    _tasks: dict[str, Task]
    _logs: TaskLogs
    _hints_checked: set[Hashable]

    def ended(self, error: BaseException, phase: str) -> None:
        """The run ends with ``error`` (an exception) in ``phase``; the
        first outcome stays."""
        status, message = outcome_of(error, phase)
        task, code = getattr(error, "task", None), getattr(error, "exit_code", None)
        hint, self._next_hint = self._next_hint or self._hint(task, code), None
        self.outcome(status, message, task,
                     tfrun_exit_code(status, error) if self._run.mode == "replica" else code,
                     hint, by=getattr(error, "by", None))

    def hint_next_outcome(self, hint: Optional[str]) -> None:
        """``hint`` (None: none) is the hint of the outcome ``ended`` records
        next, rather than the task's own: what the run knows better of the
        failure being raised (``ClusterRun.step``: a pause of its process)."""
        self._next_hint = hint

    def caused_by(self, error: BaseException, phase: str) -> None:
        """The run ends with ``error`` after all: the failure of the task it
        names caused the one recorded, which it replaces (a peer that
        failed as the cause's exit closed their connections:
        ``function_results.remote_failure``)."""
        with self._lock:   # one step: no other outcome between the reset and this one
            if self._run.outcome.status == "failed":
                self._run.outcome = Outcome()
            self.ended(error, phase)

    def failed_after_all(self, error: BaseException, phase: str) -> None:
        """The run ends with ``error`` after its outcome said succeeded
        (``tfmesos.run``: its trainers were done, and the returning task's
        value cannot be used here): ``error`` replaces that outcome, as its
        caller raises it; any other outcome recorded stays."""
        with self._lock:   # one step: no other outcome between the reset and this one
            if self._run.outcome.status == "succeeded":
                self._run.outcome = Outcome()
            self.ended(error, phase)

    def stopped_in(self, phase: str, failure: Optional[BaseException]) -> None:
        """The run is stopped in ``phase``: its outcome, unless one was
        recorded, is ``failure`` when one was set (by a thread that may not
        have recorded it yet: cluster()'s watcher, whose caller's block ends
        once the run is finished), else "succeeded" once it ran, "aborted"
        before or as it restarted (its message says which: a cluster()
        block that ended then raised nothing to say it)."""
        if failure is not None:
            self.ended(failure, phase)
        if phase == "running":
            self.outcome("succeeded")
            return
        with self._lock:
            restarts = self._run.restarts
            why = ("while it restarted after %s" % restarts[-1].message
                   if phase == "restarting" and restarts else
                   "before its cluster was complete" if phase in ("new", "forming") else None)
        self.outcome("aborted", "the run was stopped %s" % why if why else None)

    def _hint(self, task: Optional[str], exit_code: Optional[int]) -> Optional[str]:
        """Advice for ``task``'s failure (its last attempt's, ``exit_code``
        being what the failure says), or None."""
        found = self._tasks.get(task) if task is not None else None
        if found is None or not found.attempts:
            return None
        return attempt_hint(self._logs, found, found.attempts[-1], exit_code,
                            self._job_gpus().get(found.job))

    def _job_gpus(self) -> dict[str, int]:
        """Each job's GPUs a task (the hints for NCCL without GPUs)."""
        return {job.name: job.gpus for job in self._run.jobs}

    def _hint_failed_attempts(self) -> None:
        if hint_failed_attempts(self._logs, self._run.tasks, self._job_gpus(),
                                self._hints_checked):
            self._dirty = True

    def outcome(self, status: str, message: Optional[str] = None, task: Optional[str] = None,
                exit_code: Optional[int] = None, hint: Optional[str] = None,
                by: Optional[str] = None) -> None:
        """How the run ended (``by``: who killed it); the first outcome stays."""
        if exit_code is None and self._run.mode == "replica":
            exit_code = tfrun_exit_code(status)
        with self._lock:
            if self._run.outcome.status == "running":
                self._run.outcome = Outcome(status=status, message=message, task=task,
                                            exit_code=exit_code, hint=hint,
                                            by=by if status == KILLED else None)
                self._dirty = True

    def left_to_tasks(self) -> None:
        """The run goes on without this scheduler (``ClusterRun.detach``):
        the interrupt that left it, recorded on its way out of the run's
        wait, is no end: the record says running again, as it does for a
        scheduler that was SIGKILLed, until a scheduler that takes the run
        over ends it (``tfmesos runs --prune`` keeps it while its framework
        may run; ``tfmesos attach`` carries it on)."""
        with self._lock:
            if self._run.outcome.status == "interrupted":
                self._run.outcome = Outcome()
                self._dirty = True

    def outcome_text(self) -> str:
        """The outcome's one line (``outcomes.outcome_text``): what the
        framework's ``tfmesos.outcome`` label says."""
        with self._lock:
            return outcome_text(self._run.outcome, self._run.tasks)

    @property
    def outcome_status(self) -> str:
        return self._run.outcome.status

    def recorded_outcome(self) -> Outcome:
        """The outcome as recorded now (a copy: ``run_file`` copies the
        whole record, through JSON)."""
        with self._lock:
            return dataclasses.replace(self._run.outcome)

    @property
    def hint(self) -> Optional[str]:
        """The outcome's hint (None without one)."""
        return self._run.outcome.hint


__all__ = ["RunOutcome"]
