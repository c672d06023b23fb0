"""A run's claim on its run directory (``RunRecord`` holds one): the
directory made, or taken as it is when no other live run's record is
there (two records would overwrite each other's run.json), each refusal a
``TFMesosError`` naming the fix; and given back (``release``) when the
run was refused before anything of it ran.

A claim holds the directory (``run_dir_lock``) until the run ends.
"""

import contextlib
import os
from typing import Optional

from ..exceptions import TFMesosError
from .run_dir_lock import hold, let_go, remove
from .run_dirs import RUN_FILE, UnsafeRunDir, make_run_dir


def claim(directory: str, new: bool, run_id: Optional[str]) -> bool:
    """Make ``directory`` (anew: ``new``) or take it; whether it was made."""
    try:
        made = make_run_dir(directory, new=new)
    except UnsafeRunDir as exc:
        raise TFMesosError("%s: use a directory of your own (tfrun --run-dir DIR, "
                           "cluster(run_dir=...), $TFMESOS_RUNS_DIR)" % exc) from None
    except OSError as exc:
        raise TFMesosError("cannot create the run directory %s: %s; choose another "
                           "(tfrun --run-dir DIR, cluster(run_dir=...))"
                           % (directory, exc.strerror or exc)) from None
    held = hold(directory)
    if not made:
        try:
            _refuse_a_live_run(directory, run_id)
        except BaseException:
            if held:   # refused: this claim's lock only, never another run's
                let_go(directory)
            raise
    return made


def release(directory: str, made: bool) -> None:
    """Its run.json goes, and the directory with it where the claim made it
    (a --run-dir that was there stays)."""
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(directory, RUN_FILE))
    remove(directory)   # its lock too: nothing of the run is left there
    if made:
        with contextlib.suppress(OSError):
            os.rmdir(directory)   # only when empty: nothing but run.json and the lock written


def _refuse_a_live_run(directory: str, run_id: Optional[str]) -> None:
    """TFMesosError when ``directory`` (a run directory there already)
    holds the record of another run still going: its record and this
    one's would overwrite each other's run.json (a takeover of the same
    run, ``tfmesos attach``, has the same run id)."""
    from .history import HistoryError, Run
    try:
        other = Run.load(directory)
    except HistoryError:
        return   # none, or none readable: nothing to lose
    if other.running and not other.gone and other.run_id != run_id:
        raise TFMesosError("the run directory %s holds run %s, still running: give this run "
                           "a directory of its own (tfrun --run-dir DIR, cluster(run_dir=...))"
                           % (directory, other.run_id))
