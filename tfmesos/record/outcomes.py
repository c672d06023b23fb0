"""How a run and its attempts end: the outcome's status and message, the
one line every reader says it with (``outcome_text``: run.json's outcome,
the framework's ``tfmesos.outcome`` label, ``tfmesos runs``, ``show`` and
the report), tfrun's exit code, the ``source`` of an attempt that ended
without Mesos' update, and whether an attempt failed."""

from collections.abc import Iterable
from typing import TYPE_CHECKING, Optional

from ..exceptions import RunKilled, TFMesosError
from ..mesos.task_states import TERMINAL_STATES

if TYPE_CHECKING:
    from .schema import Attempt, Outcome, Task

# The ``source`` of an attempt's last state when Mesos' terminal update did
# not arrive before the framework was torn down, or when the run stopped the
# attempt (Mesos says TASK_FINISHED for a task that ended because it was told to).
EXIT_FRAME = "exit frame"
STOPPED_BY = {"replica": "stopped by tfrun", "fine": "stopped by cluster()"}
# ... and of one still running when ``tfmesos kill`` removed the framework.
KILL_SOURCE = "tfmesos kill"

KILLED = "killed"
# What tfrun exits with when the run was killed (``tfmesos kill``): as a
# process ended by SIGTERM (128 + 15).
KILLED_EXIT = 143
MAX_TEXT = 1000    # characters of an outcome's line (a label's value, well inside Mesos')


def tfrun_exit_code(status: str, error: Optional[BaseException] = None) -> int:
    """What tfrun exits with for a run that ended with ``status`` (and
    ``error``): its ``--help`` epilog."""
    if status == "succeeded":
        return 0
    if status == "interrupted":   # Ctrl-C, SIGTERM; its output's reader gone: 141
        return getattr(error, "exit_code", None) or 130
    if status == KILLED:
        return KILLED_EXIT
    return getattr(error, "exit_code", None) or 1


# The run's phases (``core.phase.Phase`` values) before its cluster was complete.
BEFORE_COMPLETE = ("new", "forming")


def outcome_of(error: BaseException, phase: str) -> tuple[str, str]:
    """(status, message) of a run that ``error`` ends in ``phase`` (a
    ClusterRun phase, or "block": cluster()'s with block raised it)."""
    text = _text(error)
    if isinstance(error, KeyboardInterrupt):
        return "interrupted", text or "interrupted (Ctrl-C, SIGTERM or SIGHUP)"
    if isinstance(error, RunKilled):
        return KILLED, text
    status = "aborted" if phase in BEFORE_COMPLETE else "failed"
    if phase == "block":   # cluster()'s with block
        return status, "the with block raised %s: %s" % (type(error).__name__, text)
    if isinstance(error, TFMesosError):
        return status, text
    return status, "%s: %s" % (type(error).__name__, text)


def _text(error: BaseException) -> str:
    """``str(error)``, or what says it could not be had: the caller's
    exception's own ``__str__`` may raise, and the caller must get that
    exception, not one of the record's."""
    try:
        return str(error)
    except Exception as exc:
        return "<unprintable %s: its __str__ raised %s>" % (type(error).__name__,
                                                             type(exc).__name__)


# -- the one line of an outcome --------------------------------------------------

def killed_text(by: Optional[str]) -> str:
    """``killed (by NAME)``: NAME the Mesos principal that ran ``tfmesos
    kill`` (the user, where the master authenticates nobody)."""
    return "%s (by %s)" % (KILLED, by) if by else KILLED


def killed_by(text: Optional[str]) -> Optional[str]:
    """Who ``text`` (a ``tfmesos.outcome`` label) says killed the run: the
    name, "" when it does not say; None when it is no kill's."""
    if text == KILLED:
        return ""
    prefix = KILLED + " (by "
    if text and text.startswith(prefix) and text.endswith(")"):
        return text[len(prefix):-1]
    return None


def outcome_text(outcome: "Outcome", tasks: Iterable["Task"] = (), message: bool = True) -> str:
    """The one line that says how a run ended (``outcome``: a
    ``schema.Outcome``; ``tasks``: the run's ``schema.Task`` list, for the
    exit code of the task whose failure ended it):

    ``running``, ``succeeded``, ``failed (exit 5, worker:0)``, ``failed
    (worker:0): MESSAGE`` (no exit code: lost, killed by Mesos), ``failed:
    MESSAGE``, ``aborted: MESSAGE`` (before the cluster was complete),
    ``interrupted`` (Ctrl-C, SIGTERM), ``killed (by NAME)``.
    ``message=False``: without ``: MESSAGE`` (where the message is shown
    beside it)."""
    status = outcome.status
    if status == KILLED:
        return killed_text(outcome.by)
    if status not in ("failed", "aborted"):
        return status
    code = next((task.exit_code for task in tasks if task.name == outcome.task), None) \
        if outcome.task else None
    if code not in (None, 0):
        return "%s (exit %d, %s)" % (status, code, outcome.task)
    text = "%s (%s)" % (status, outcome.task) if outcome.task else status
    if message and outcome.message:
        text = "%s: %s" % (text, " ".join(str(outcome.message).split()))
    return text[:MAX_TEXT]


# An attempt that ended in one of these states failed, whatever its exit code.
FAILED_STATES = TERMINAL_STATES - {"TASK_FINISHED", "TASK_KILLED"}


def failed(attempt: "Attempt") -> bool:
    """Whether ``attempt`` (a ``schema.Attempt``) failed: its command exited
    with a code other than 0, or Mesos ended it as failed, lost, ..."""
    last = attempt.states[-1].state if attempt.states else None
    return attempt.exit_code not in (None, 0) or last in FAILED_STATES
