"""A run's hold on its run directory: an exclusive ``flock`` on
``LOCK_FILE`` in it (0600, its user's alone: the directory itself, 0755
under umask 022, let any local user who could read it flock it and so
refuse every run there and keep it from pruning), from its claim
(``run_dir_claim``) until the run ends (``let_go``; the kernel lets it go
when the process does). Two runs started at once in one directory each
found no record there yet and both ran in it, their logs mixed and one
record lost; and ``tfmesos runs --prune`` leaves a directory alone while
a run holds it (``in_use``). The file stays when the run ends, but for a
run refused before anything of it ran (``remove``); a claim checks that
the file it locked is still the one there (one removed could be locked
by one run while another made it anew)."""

import fcntl
import os
import stat
import threading
from typing import Optional

from ..exceptions import TFMesosError
from .run_dirs import create_private

LOCK_FILE = ".run.lock"

# (device, inode) of the lock file of each run directory this process holds
# -> its descriptor (held open: the inode cannot be another file's meanwhile).
# A claim of one in this process is refused as another process' would be:
# two runs of one process (two tfmesos.submit) shared it as well.
_HELD: dict[tuple[int, int], int] = {}
_HELD_LOCK = threading.Lock()


def _busy(directory: str) -> TFMesosError:
    return TFMesosError("the run directory %s is another run's, still starting or running: "
                        "give this run a directory of its own (tfrun --run-dir DIR, "
                        "cluster(run_dir=...))" % directory)


def hold(directory: str) -> bool:
    """An exclusive lock on ``directory`` for this process (TFMesosError:
    another run, of this process or another, holds it); whether it was
    taken (not where the lock file cannot be made or locked: the record's
    check alone). A lock file removed (``remove``) or replaced while it was
    being locked is not held: the file there now is locked instead."""
    path = os.path.join(directory, LOCK_FILE)
    for _ in range(_TRIES):
        taken = _hold_once(directory, path)
        if taken is not None:
            return taken
    return False


_TRIES = 8   # lock files removed under a claim, one after another: then the record's check alone


def _hold_once(directory: str, path: str) -> Optional[bool]:
    """``hold``'s one try: True, False, or None where the file locked is no
    longer the one at ``path`` (removed or replaced meanwhile)."""
    try:
        descriptor = create_private(path, append=True)
    except OSError:
        return False   # (make_run_dir made or checked it: not ours to refuse here)
    try:
        found = os.fstat(descriptor)
        if found.st_mode & 0o077:   # (one made readable since: others could lock it)
            os.fchmod(descriptor, 0o600)
    except OSError:
        os.close(descriptor)
        return False
    key = (found.st_dev, found.st_ino)
    with _HELD_LOCK:
        if key in _HELD:
            os.close(descriptor)
            raise _busy(directory)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise _busy(directory) from None
        except OSError:   # a filesystem without flock: the record's check alone
            os.close(descriptor)
            return False
        try:
            there = os.lstat(path)
        except OSError:
            there = None
        if there is None or (there.st_dev, there.st_ino) != key:
            os.close(descriptor)
            return None
        _HELD[key] = descriptor
    return True


def remove(directory: str) -> None:
    """The lock file of ``directory``, held by this process, goes; then it
    is let go (a claim that locked it meanwhile tries the next one:
    ``hold``)."""
    path = os.path.join(directory, LOCK_FILE)
    try:
        found = os.lstat(path)
    except OSError:
        return
    with _HELD_LOCK:
        descriptor = _HELD.pop((found.st_dev, found.st_ino), None)
        if descriptor is None:
            return   # not ours: another run's to keep
        try:
            os.unlink(path)
        except OSError:
            pass
    os.close(descriptor)


def let_go(directory: str) -> None:
    """The run writes no more in ``directory``: another may claim it."""
    try:
        found = os.lstat(os.path.join(directory, LOCK_FILE))
    except OSError:
        return
    with _HELD_LOCK:
        descriptor = _HELD.pop((found.st_dev, found.st_ino), None)
    if descriptor is not None:
        os.close(descriptor)


def in_use(directory: str) -> bool:
    """Whether a run (of any process) holds ``directory`` now; a
    directory reached through a symbolic link, or whose lock file the
    caller cannot open, is not."""
    try:
        parent = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        descriptor = os.open(LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
                             | os.O_NONBLOCK, dir_fd=parent)   # (a FIFO: no wait for a writer)
    except OSError:
        return False
    finally:
        os.close(parent)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return False
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)


__all__ = ["LOCK_FILE", "hold", "let_go", "remove", "in_use"]
