"""How a run and its attempts end: the outcome's status and message, tfrun's
exit code, the ``source`` of an attempt that ended without Mesos' update,
and whether an attempt failed."""

from ..exceptions import TFMesosError
from ..mesos.task_states import TERMINAL_STATES

# The ``source`` of an attempt's last state when Mesos' terminal update did
# not arrive before the framework was torn down, or when the run stopped the
# attempt (Mesos says TASK_FINISHED for a task that ended because it was told to).
EXIT_FRAME = "exit frame"
STOPPED_BY = {"replica": "stopped by tfrun", "fine": "stopped by cluster()"}


def tfrun_exit_code(status, error=None):
    """What tfrun exits with for a run that ended with ``status`` (and
    ``error``): its ``--help`` epilog."""
    if status == "succeeded":
        return 0
    if status == "interrupted":   # Ctrl-C, SIGTERM; its output's reader gone: 141
        return getattr(error, "exit_code", None) or 130
    return getattr(error, "exit_code", None) or 1


# The run's phases (``core.phase.Phase`` values) before its cluster was complete.
BEFORE_COMPLETE = ("new", "forming")


def outcome_of(error, phase):
    """(status, message) of a run that ``error`` ends in ``phase`` (a
    ClusterRun phase, or "block": cluster()'s with block raised it)."""
    if isinstance(error, KeyboardInterrupt):
        return "interrupted", str(error) or "interrupted (Ctrl-C or SIGTERM)"
    status = "aborted" if phase in BEFORE_COMPLETE else "failed"
    if phase == "block":   # cluster()'s with block
        return status, "the with block raised %s: %s" % (type(error).__name__, error)
    if isinstance(error, TFMesosError):
        return status, str(error)
    return status, "%s: %s" % (type(error).__name__, error)


def outcome_label(outcome, finished):
    """The text of a run's ``tfmesos.outcome`` label (``protocol.labels``)
    for run.json's ``outcome``: ``succeeded``, ``failed: MESSAGE``, ...; a
    run still ``running`` when it stops succeeded when its trainers are
    done (``finished``), else it was ``stopped``."""
    status = outcome.get("status")
    if status == "running":
        status = "succeeded" if finished else "stopped"
    text = status if status == "succeeded" or not outcome.get("message") \
        else "%s: %s" % (status, outcome["message"])
    return text[:1000]


# An attempt that ended in one of these states failed, whatever its exit code.
FAILED_STATES = TERMINAL_STATES - {"TASK_FINISHED", "TASK_KILLED"}


def failed(attempt):
    """Whether ``attempt`` (a ``schema.Attempt``) failed: its command exited
    with a code other than 0, or Mesos ended it as failed, lost, ..."""
    last = attempt.states[-1].state if attempt.states else None
    return attempt.exit_code not in (None, 0) or last in FAILED_STATES
