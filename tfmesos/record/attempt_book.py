"""The attempts of a run's tasks by their Mesos task ids, as Mesos' status
updates and the tasks' own frames (registration, exit) tell them:
``run_record.RunRecord`` keeps one and calls it under its lock; each
method that changes an attempt says so (True), and the record saves.

Each attempt's last state is its task's (``summarize``); nothing follows
a terminal state; an attempt the run stopped ends as stopped
(``attempt_ends.as_stopped``), one whose end Mesos never reported gets
``attempt_ends.unreported_end``."""

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Optional

from ..mesos.task_states import TERMINAL_STATES, exit_code_of
from .attempt_ends import as_stopped, unreported_end
from .schema import Attempt, Outcome, SandboxTail, State, Task, Usage
from .times import parse_timestamp, reported, timestamp

if TYPE_CHECKING:
    from addict import Dict


def summarize(task: Task) -> None:
    """The task's state and exit code: its last attempt's."""
    last = task.attempts[-1]
    task.state = last.states[-1].state if last.states else "TASK_STAGING"
    task.exit_code = last.exit_code


def _ended(attempt: Attempt) -> bool:
    return bool(attempt.states) and attempt.states[-1].state in TERMINAL_STATES


class AttemptBook:
    """Task id -> (Task, Attempt) of a run in ``mode`` ("replica" or
    "fine-grained"), and the ids of the attempts the run stopped."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self._attempts: dict[str, tuple[Task, Attempt]] = {}
        self._stopped: set[str] = set()

    def adopt(self, tasks: Iterable[Task]) -> None:
        """The attempts of ``tasks`` (a record carried on), and only those."""
        self._attempts = {attempt.task_id: (task, attempt)
                          for task in tasks for attempt in task.attempts}

    def get(self, task_id: Optional[str]) -> tuple[Optional[Task], Optional[Attempt]]:
        """(Task, Attempt) of ``task_id``, (None, None) for one not launched."""
        found = self._attempts.get(task_id) if task_id else None
        return found if found is not None else (None, None)

    def attempts(self) -> list[Attempt]:
        return [attempt for _, attempt in self._attempts.values()]

    def add(self, task: Task, attempt: Attempt) -> None:
        """A new attempt of ``task``; a launch call that failed is retried
        with the same attempt number, which replaces the first."""
        task.attempts = [a for a in task.attempts if a.attempt != attempt.attempt]
        task.attempts.append(attempt)
        self._attempts[attempt.task_id] = (task, attempt)

    def status(self, status: "Dict") -> bool:
        """A Mesos status update (a ``TaskStatus``); repeated states
        (reconciliation) are not changes, and nothing follows a terminal
        state (Mesos never changes one: a later TASK_LOST is a
        reconciliation of a task it forgot)."""
        task, attempt = self.get(status.task_id.value)
        if task is None or attempt is None:
            return False
        if attempt.states and (attempt.states[-1].state == status.state or _ended(attempt)):
            return False
        message = status.get("message") or ""
        attempt.states.append(self._as_stopped(status.task_id.value, State(
            state=status.state, time=timestamp(reported(
                status.get("timestamp") or None,
                parse_timestamp(attempt.states[-1].time if attempt.states else attempt.launched))),
            source=status.get("source") or None, reason=status.get("reason") or None,
            message=message)))
        if status.state in TERMINAL_STATES and attempt.exit_code is None:
            code = exit_code_of(message)
            attempt.exit_code = 0 if code is None and status.state == "TASK_FINISHED" else code
        summarize(task)
        return True

    def registered(self, task_id: str, address: str) -> bool:
        task, attempt = self.get(task_id)
        if task is None or attempt is None:
            return False
        if attempt.registered is None:
            attempt.registered = timestamp()
        attempt.address = address
        summarize(task)
        return True

    def exited(self, task_id: str, code: Optional[int], when: Optional[float],
               usage: Optional[Mapping[str, Any]], stopped: Optional[bool]) -> bool:
        """The task's exit frame (``RunRecord.exited``)."""
        task, attempt = self.get(task_id)
        if task is None or attempt is None:
            return False
        if attempt.exited is None:
            attempt.exited = timestamp(when)
        attempt.exit_code = code
        if usage is not None:
            attempt.usage = Usage.from_dict(usage)
        if stopped is not None:
            (self._stopped.add if stopped else self._stopped.discard)(task_id)
        if _ended(attempt):
            attempt.states[-1] = self._as_stopped(task_id, attempt.states[-1])
        summarize(task)
        return True

    def stopping(self, task_id: str) -> None:
        """The run stops the attempt ``task_id``: unless it ended or sent
        its exit frame before, it ends as stopped."""
        _, attempt = self.get(task_id)
        if attempt is not None and attempt.exited is None and not _ended(attempt):
            self._stopped.add(task_id)

    def awaiting_mesos(self) -> bool:
        """Whether an attempt's exit frame came but not Mesos' terminal update."""
        return any(attempt.exited is not None and not _ended(attempt)
                   for _, attempt in self._attempts.values())

    def sandbox_tail(self, task_id: str, tail: Mapping[str, list[str]]) -> bool:
        _, attempt = self.get(task_id)
        if attempt is None:
            return False
        attempt.sandbox_tail = SandboxTail.from_dict(tail)
        return True

    def end_unreported(self, outcome: Outcome) -> bool:
        """Every attempt without a terminal state (the framework was torn
        down before Mesos' update came) gets its end."""
        changed = False
        for task_id, (task, attempt) in self._attempts.items():
            if _ended(attempt):
                continue
            attempt.states.append(unreported_end(attempt, outcome, self.mode,
                                                 task_id in self._stopped, timestamp()))
            summarize(task)
            changed = True
        return changed

    def _as_stopped(self, task_id: str, state: State) -> State:
        """``state`` as the end of the attempt ``task_id``: as an attempt the
        run stopped (``attempt_ends.as_stopped``) when it did."""
        return as_stopped(state, self.mode) if task_id in self._stopped else state


__all__ = ["AttemptBook", "summarize"]
