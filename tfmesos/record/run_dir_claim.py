"""A run's claim on its run directory (``RunRecord`` holds one): the
directory made, or taken as it is when no other live run's record is
there (two records would overwrite each other's run.json), each refusal a
``TFMesosError`` naming the fix; and given back (``release``) when the
run was refused before anything of it ran.

A claim holds an exclusive ``flock`` on the directory itself until the
run ends (``let_go``; the kernel lets it go when the process does): two
runs started at once in one directory each found no record there yet and
both ran in it, their logs mixed and one record lost; and ``tfmesos runs
--prune`` leaves a directory alone while a run holds it (``in_use``)."""

import contextlib
import fcntl
import os
import threading
from typing import Optional

from ..exceptions import TFMesosError
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
    _lock(directory)
    if not made:
        _refuse_a_live_run(directory, run_id)
    return made


# (device, inode) of each run directory this process holds -> its descriptor.
# A later claim of one in this process (a cluster() after another) is not
# refused by its own lock: its record says whether a run still writes there.
_HELD: dict[tuple[int, int], int] = {}
_HELD_LOCK = threading.Lock()


def _lock(directory: str) -> None:
    try:
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return   # (make_run_dir made or checked it: not ours to refuse here)
    found = os.fstat(descriptor)
    key = (found.st_dev, found.st_ino)
    with _HELD_LOCK:
        if key in _HELD:
            os.close(descriptor)
            return
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise TFMesosError("the run directory %s is another run's, still starting or "
                               "running: give this run a directory of its own (tfrun --run-dir "
                               "DIR, cluster(run_dir=...))" % directory) from None
        except OSError:   # a filesystem without flock: the record's check alone
            os.close(descriptor)
            return
        _HELD[key] = descriptor


def let_go(directory: str) -> None:
    """The run writes no more in ``directory``: another may claim it."""
    try:
        found = os.stat(directory)
    except OSError:
        return
    with _HELD_LOCK:
        descriptor = _HELD.pop((found.st_dev, found.st_ino), None)
    if descriptor is not None:
        os.close(descriptor)


def in_use(directory: str) -> bool:
    """Whether a run (of any process) holds ``directory`` now."""
    try:
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
                             | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)


def release(directory: str, made: bool) -> None:
    """Its run.json goes, and the directory with it where the claim made it
    (a --run-dir that was there stays)."""
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(directory, RUN_FILE))
    let_go(directory)
    if made:
        with contextlib.suppress(OSError):
            os.rmdir(directory)   # only when empty: nothing but run.json was written


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
