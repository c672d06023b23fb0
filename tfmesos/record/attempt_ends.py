"""How the record writes an attempt's end where Mesos did not say it
(pure): an attempt the run stopped (its task exits 0 when told to stop,
and Mesos then says TASK_FINISHED), and an attempt still without a
terminal state when the framework was torn down (after the teardown Mesos
sends no update)."""

from typing import Optional

from .outcomes import EXIT_FRAME, KILL_SOURCE, KILLED, STOPPED_BY, killed_text
from .schema import Attempt, Outcome, State, Time


def stopped_by(mode: str) -> str:
    """Who stops the attempts of a run of ``mode``: tfrun, or cluster()."""
    return STOPPED_BY.get(mode, STOPPED_BY["replica"])


def as_stopped(state: State, mode: str) -> State:
    """``state`` as the end of an attempt the run stopped: Mesos'
    TASK_FINISHED is TASK_KILLED, stopped by tfrun; any other state as
    Mesos said it."""
    if state.state != "TASK_FINISHED":
        return state
    by = stopped_by(mode)
    return State(state="TASK_KILLED", time=state.time, source=by, reason=state.reason,
                 message="%s; Mesos reported %s%s" % (
                     by, state.state, ": " + state.message if state.message else ""))


def unreported_end(attempt: Attempt, outcome: Outcome, mode: str, stopped: bool,
                   now: Time) -> State:
    """The end of ``attempt``, which has no terminal state: killed when the
    run was (``tfmesos kill``; Mesos kills the tasks of a framework it
    removes, Master::removeFramework, and no update reaches a scheduler),
    stopped when the run ``stopped`` it after its exit frame came, else its
    exit frame's end, else stopped by the run (``now``: the time to give
    an end that has none)."""
    code: Optional[int] = attempt.exit_code
    if outcome.status == KILLED:
        return State(state="TASK_KILLED", time=attempt.exited or now, source=KILL_SOURCE,
                     reason="REASON_FRAMEWORK_REMOVED",
                     message="the run was %s: Mesos removed its framework"
                             % killed_text(outcome.by))
    if stopped and attempt.exited is not None:
        return State(state="TASK_KILLED", time=attempt.exited, source=stopped_by(mode),
                     message="its exit frame came; Mesos' update did not before the "
                             "framework was torn down")
    if attempt.exited is not None and code is not None:
        return State(state="TASK_FINISHED" if code == 0 else "TASK_FAILED",
                     time=attempt.exited, source=EXIT_FRAME,
                     message="exited with code %d; Mesos' update did not come before the "
                             "framework was torn down" % code)
    return State(state="TASK_KILLED", time=now, source=stopped_by(mode),
                 message="no exit frame and no update from Mesos before the framework was "
                         "torn down")


__all__ = ["as_stopped", "unreported_end", "stopped_by"]
