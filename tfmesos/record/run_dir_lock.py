"""A run's hold on its run directory: an exclusive ``flock`` on the
directory itself, from its claim (``run_dir_claim``) until the run ends
(``let_go``; the kernel lets it go when the process does). Two runs
started at once in one directory each found no record there yet and both
ran in it, their logs mixed and one record lost; and ``tfmesos runs
--prune`` leaves a directory alone while a run holds it (``in_use``)."""

import fcntl
import os
import threading

from ..exceptions import TFMesosError

# (device, inode) of each run directory this process holds -> its descriptor.
# A later claim of one in this process (a cluster() after another) is not
# refused by its own lock: its record says whether a run still writes there.
_HELD: dict[tuple[int, int], int] = {}
_HELD_LOCK = threading.Lock()


def hold(directory: str) -> None:
    """An exclusive lock on ``directory`` for this process (TFMesosError:
    another process holds it)."""
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


__all__ = ["hold", "let_go", "in_use"]
