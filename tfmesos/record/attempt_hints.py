"""The hints a run's record gives its failed attempts: from what each
wrote last (its sandbox's stderr, then the output it forwarded),
its exit code and Mesos' last message about it (``hints.hint_for``)."""

from collections.abc import Hashable, Iterable, Mapping, MutableSet
from typing import Optional

from .hints import LINES, hint_for
from .outcomes import failed
from .schema import Attempt, Task
from .task_logs import TaskLogs


def attempt_hint(logs: TaskLogs, task: Task, attempt: Attempt,
                 exit_code: Optional[int], gpus: Optional[int] = None) -> Optional[str]:
    """Advice for ``attempt`` of ``task`` from its last stderr lines
    (``logs``: the run's log files), ``exit_code`` and Mesos' last message
    about it (``gpus``: its job's, None when unknown), or None."""
    message = attempt.states[-1].message if attempt.states else ""
    # What it wrote in its sandbox came first, before the forwarded output.
    lines = attempt.sandbox_tail.stderr if attempt.sandbox_tail else []
    return hint_for(lines + logs.tail(attempt, "stderr", LINES), exit_code, message, task.job,
                    gpus)


def hint_failed_attempts(logs: TaskLogs, tasks: Iterable[Task],
                         gpus: Optional[Mapping[str, int]] = None,
                         checked: Optional[MutableSet[Hashable]] = None) -> bool:
    """Each failed attempt of ``tasks`` without a hint gets the hint for its
    failure (when one applies): at a restart or relaunch, which the
    failure does not end the run with, and at the finish (``gpus``: each
    job's). ``checked``: what the attempts no hint applied to were when
    looked at (``_inputs``), kept by the caller: they are not read again
    until that changes (an ended attempt's log does not; a flapping task's
    relaunches read every earlier attempt's log again, a cost growing with
    the attempts). Whether any hint was given."""
    changed = False
    for task in tasks:
        for attempt in task.attempts:
            if attempt.hint is not None or not failed(attempt):
                continue
            inputs = _inputs(attempt)
            if checked is not None and inputs in checked:
                continue
            attempt.hint = attempt_hint(logs, task, attempt, attempt.exit_code,
                                        (gpus or {}).get(task.job))
            if attempt.hint is None and checked is not None:
                checked.add(inputs)
            changed = changed or attempt.hint is not None
    return changed


def _inputs(attempt: Attempt) -> Hashable:
    """What an attempt's hint is made of, but its log, which no longer
    changes once it failed: its exit code, last state and sandbox tail."""
    last = attempt.states[-1] if attempt.states else None
    return (attempt.task_id, attempt.exit_code, last and (last.state, last.message),
            attempt.sandbox_tail is not None)
