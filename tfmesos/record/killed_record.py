"""A run killed (``tfmesos kill``) while no scheduler of it kept its record:
the caller's own record of it, left saying "running" by a scheduler that is
gone (SIGKILLed, its machine lost), says the kill, as a live scheduler's
record would (a live one records it itself: its record is left alone)."""

from typing import Optional

from ..mesos.task_states import TERMINAL_STATES
from .history import Run
from .outcomes import KILLED, killed_text
from .run_dir_lock import in_use
from .run_dirs import run_json_text, write_run_json
from .schema import Outcome, State
from .times import timestamp

KILLED_EXIT = 143   # what tfrun exits with when its run is killed
SOURCE = "tfmesos kill"


def record_kill(run: Run, framework_id: str, by: Optional[str]) -> bool:
    """Whether ``run``'s record (the caller's, of the framework
    ``framework_id`` just killed) now says the kill: only one whose
    scheduler is gone and that no process holds."""
    if not run.gone or run.file.framework_id != framework_id or in_use(run.directory):
        return False
    now = timestamp()
    file = run.file
    for task in file.tasks:
        attempt = task.last
        if attempt is None or (attempt.states and attempt.states[-1].state in TERMINAL_STATES):
            continue
        attempt.states.append(State(state="TASK_KILLED", time=now, source=SOURCE,
                                    message="killed with its framework by tfmesos kill"))
        task.state = "TASK_KILLED"
    file.outcome = Outcome(status=KILLED, message="the run was %s after its scheduler was "
                           "gone" % killed_text(by), exit_code=KILLED_EXIT, by=by)
    file.timings.finished = now
    return write_run_json(run.directory, run_json_text(file.to_dict())) is None


__all__ = ["record_kill"]
