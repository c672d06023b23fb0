"""What the tasks of a run of ``fn`` (``function_run``) sent back, as the
call's answer: every task's value (``collect``: a ``RunResult``, the
chief's, else worker 0's, as ``.value``), or the exception of the task
whose failure ended the run (``remote_failure``). Only here are the
pickles the rendezvous kept (``core/result_inbox.py``) unpickled, in the
calling process: what the caller's own function returned.
"""

import pickle
import time
from typing import TYPE_CHECKING, Any, Optional

from ..exceptions import ClusterError, RemoteTaskError, TaskFailed
from .remote_errors import Sources, remote_error
from .run_result import RunResult

if TYPE_CHECKING:
    from .launch import ClusterRun
    from .slots import TaskSlot

RESULT_WAIT = 30.0     # for the value after the trainers ended
ERROR_WAIT = 5.0       # for a failed task's exception after its failure
END_GRACE = 5.0        # for the values of workers still running when the chief returned


def returning_slot(run: "ClusterRun") -> "TaskSlot":
    """The task whose value is ``.value``: the chief, else worker 0."""
    slots = list(run.slots)
    return next((s for s in slots if s.job.name == "chief"), None) or \
        next(s for s in slots if s.job.name == "worker" and s.index == s.job.start)


def returned_value(run: "ClusterRun") -> Any:
    """The returning task's value, once its result came."""
    slot = returning_slot(run)
    rendezvous = run.rendezvous
    assert rendezvous is not None and slot.task_id is not None, "its trainers are done"
    result = rendezvous.results.wait(slot.task_id, RESULT_WAIT)
    if result is not None and not (result.complete or result.broken):
        # Not whole within RESULT_WAIT (what came of it is no value).
        raise ClusterError("%s's result did not come whole within %.0f s after it ended (%d of "
                           "its %d bytes came)" % (slot.name, RESULT_WAIT, len(result.data),
                                                    result.size))
    if result is None:
        raise ClusterError("%s ended without sending its function's result (did it leave with "
                           "os._exit?)" % slot.name)
    if result.broken or result.status != "ok":
        raise ClusterError("%s's result cannot be used: %s" % (slot.name, result.broken
                                                             or result.error))
    try:
        return pickle.loads(bytes(result.data))
    except Exception as exc:
        raise ClusterError("%s's return value does not unpickle here: %s: %s (is its class "
                           "importable in this process?)" % (slot.name, type(exc).__name__,
                                                             exc)) from exc


def collect(run: "ClusterRun") -> RunResult:
    """Every task's value, once the run's trainers are done: the returning
    task's (``returned_value``: one that cannot be used fails the call), and
    each other task's that came (waiting for those that ended; those still
    running are stopped next, without one). Another task's value that
    cannot be used is missing, with why: the caller asked for one value.
    Workers still running when the chief returned get ``END_GRACE``
    seconds to end with theirs (under MultiWorkerMirroredStrategy they end
    with the chief; under ParameterServerStrategy they serve until stopped)."""
    returning = returning_slot(run)
    value = returned_value(run)
    rendezvous = run.rendezvous
    assert rendezvous is not None, "its trainers are done"
    ends = "the chief" if returning.job.name == "chief" else "every worker"
    values: dict[str, Any] = {}
    missing: dict[str, str] = {}
    now = time.monotonic()
    deadline, grace = now + RESULT_WAIT, now + END_GRACE
    for slot in run.slots:
        if slot is returning:
            values[slot.name] = value
            continue
        until = deadline if slot.done else grace if slot.job.name == "worker" else now
        wait = max(0.0, until - time.monotonic())
        result = rendezvous.results.wait(slot.task_id, wait) if slot.task_id else None
        why = None
        if result is None or not (result.complete or result.broken):
            ended = slot.done or bool(slot.task_id and rendezvous.results.ended(slot.task_id))
            why = "it ended without sending its function's result" if ended else \
                "stopped: still running when the run ended (once %s returned)" % ends
        elif result.broken:
            why = "its result cannot be used: %s" % result.broken
        elif result.status != "ok":   # after the run's trainers were done
            why = "it %s" % (result.error or "raised an exception")
        elif not result.data:
            why = result.error or "it sent no value (an older tfmesos on its agent?)"
        else:
            try:
                values[slot.name] = pickle.loads(bytes(result.data))
            except Exception as exc:
                why = "its return value does not unpickle here: %s: %s (is its class " \
                    "importable in this process?)" % (type(exc).__name__, exc)
        if why is not None:
            missing[slot.name] = why
    return RunResult(values, returning.name, run.run_id, missing)


def remote_failure(run: "ClusterRun", failure: TaskFailed, sources: Optional[Sources] = None
                   ) -> Optional[RemoteTaskError]:
    """``RemoteTaskError`` of the task that ``failure`` (a ``TaskFailed``)
    names, when its function's exception came; else None. When another
    task's failed outcome came whole before it, that task's instead: the
    cause, whose exit failed this one (``task/outcome_channel.py``); for a
    task that sent no failed outcome (its framework aborted it: NCCL's
    watchdog, JAX's coordination service), one that came before its exit
    frame."""
    slot = next((s for s in run.slots if s.name == failure.task), None)
    if slot is None or slot.task_id is None or run.rendezvous is None:
        return None
    # A task that never registered never ran fn: nothing to wait for.
    result = run.rendezvous.results.wait(slot.task_id, ERROR_WAIT if slot.address else 0)
    # Without an outcome of its own (aborted, killed): the cause is a failed
    # outcome that came before its exit frame, if any.
    silent = result is None or result.status == "ok"
    first = run.rendezvous.results.first_failure(
        (s.task_id for s in run.slots if s.task_id), before=slot.task_id if silent else None)
    cause = None if first is None else next(
        (s for s in run.slots if s.task_id == first.task_id and s is not slot), None)
    if first is not None and cause is not None:
        # Its exit usually has not come yet (its outcome went first): its
        # state and code as known now (remote_error reads only those).
        return remote_error(cause.name, first, TaskFailed(
            "task %s failed" % cause.name, cause.name, cause.state, cause.exit_code), sources)
    if result is None or result.status == "ok":
        return None
    return remote_error(slot.name, result, failure, sources)
