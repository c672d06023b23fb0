"""Where run directories go: ``$TFMESOS_RUNS_DIR``, else ``./tfmesos-runs``
(``runs_root``), one ``<name>-<run id>`` directory a run
(``default_run_dir``), unless the run names its own (``tfrun --run-dir``,
``cluster(run_dir=...)``)."""

import collections
import contextlib
import errno
import functools
import grp
import json
import os
import pwd
import re
import stat
from collections.abc import Mapping
from typing import Optional

RUNS_DIR = "tfmesos-runs"
RUNS_DIR_ENV = "TFMESOS_RUNS_DIR"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def runs_root(environ: Mapping[str, str], given: Optional[str] = None) -> str:
    """The runs directory: ``given``, else ``$TFMESOS_RUNS_DIR``, else ./tfmesos-runs."""
    return given or environ.get(RUNS_DIR_ENV) or RUNS_DIR


def default_run_dir(name: str, run_id: str, environ: Mapping[str, str]) -> str:
    """``<runs dir>/<name>-<run id>``, the name made safe for a file name."""
    return os.path.join(runs_root(environ),
                        "%s-%s" % (_UNSAFE.sub("_", name).strip(".") or "run", run_id))


class UnsafeRunDir(Exception):
    """Why what is written at a path (a run's record, its key, its report)
    could be redirected by another user (one line, without the fix: each
    caller names its own)."""


def _user(uid: int) -> str:
    try:
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except KeyError:
        return "uid %d" % uid


@functools.cache   # pwd.getpwall lists every user (LDAP, NIS: slow)
def _group_has_others(gid: int, uid: int) -> bool:
    """Whether a user other than ``uid`` and root may be in group ``gid``
    (a user private group, umask 002, has none)."""
    try:
        group = grp.getgrgid(gid)
        me = pwd.getpwuid(uid).pw_name
    except KeyError:
        return True
    if set(group.gr_mem) - {me, "root"}:
        return True
    return any(entry.pw_gid == gid and entry.pw_uid not in (uid, 0) for entry in pwd.getpwall())


def _unsafe(found: os.stat_result, owners: tuple[int, ...]) -> Optional[str]:
    """Why another user could change the directory or link ``found`` (a
    stat of it), or what is in it; None: no one but ``owners``."""
    if found.st_uid not in owners:
        return "belongs to %s" % _user(found.st_uid)
    if stat.S_ISLNK(found.st_mode) or found.st_mode & stat.S_ISVTX:
        return None   # a link cannot be changed; a sticky directory's entries only by their owner
    mode = "mode %04o" % stat.S_IMODE(found.st_mode)
    if found.st_mode & 0o002:
        return "is writable by others (%s)" % mode
    if found.st_mode & 0o020 and _group_has_others(found.st_gid, os.geteuid()):
        try:
            name = grp.getgrgid(found.st_gid).gr_name
        except KeyError:
            name = str(found.st_gid)
        return "is writable by group %s (%s)" % (name, mode)
    return None


def _unsafe_path(path: str) -> Optional[tuple[str, str]]:
    """(the first directory or link met on the way to ``path``, as the
    system follows it, that is not root's or the caller's or that others
    may write without the sticky bit, why), or None: no one but the
    caller and root can change where ``path`` leads. The way ends where
    nothing is yet: what the run makes there is its own."""
    owners = (0, os.geteuid())
    parts = collections.deque(os.path.join(os.getcwd(), path).split("/"))
    current, hops = "/", 0
    why = _unsafe(os.lstat("/"), owners)
    if why:
        return "/", why
    while parts:
        part = parts.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        try:
            found = os.lstat(candidate)
        except OSError:
            return None   # made by the run, or an error of its own when it is made
        why = _unsafe(found, owners)
        if why:
            return candidate, why
        if stat.S_ISLNK(found.st_mode):
            hops += 1
            target = os.readlink(candidate)
            if hops > 40:
                return None   # ELOOP when it is made
            if target.startswith("/"):
                current = "/"
            parts.extendleft(reversed(target.split("/")))
            continue
        current = candidate
    return None


def check_path(path: str, what: str, harm: str) -> None:
    """UnsafeRunDir unless only the caller and root can change where
    ``path`` leads (it, each directory above it, each link on the way):
    the caller's or root's, and writable by no one else but with the
    sticky bit (/tmp), as ssh and sudo treat such paths. The line names it
    as ``what`` ("the runs directory") and ends with ``harm`` (what the
    other user could do: "who could redirect this run's record")."""
    found = _unsafe_path(path)
    if found is None:
        return
    where, why = found
    full = os.path.abspath(path)
    if where == full:
        said = "%s %s %s" % (what, path, why)
    elif full.startswith(where.rstrip("/") + "/"):
        said = "%s %s lies in %s, which %s" % (what, path, where, why)
    else:
        said = "%s %s leads to %s, which %s" % (what, path, where, why)
    raise UnsafeRunDir("%s, %s" % (said, harm))


def check_runs_dir(runs: str) -> None:
    """``check_path`` of the runs directory ``runs``."""
    check_path(runs, "the runs directory", "who could redirect this run's record")


def check_own_dir(directory: str, what: str, harm: str) -> None:
    """``check_path``, and ``directory`` (where a link of the caller's or
    root's leads) is a directory of the caller's that no one else may write
    (UnsafeRunDir); OSError when it cannot be looked at."""
    check_path(directory, what, harm)
    found = os.stat(directory)
    if not stat.S_ISDIR(found.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), directory)
    _refuse_unless_own(directory, found, what, harm)


def _refuse_unless_own(directory: str, found: os.stat_result, what: str, harm: str) -> None:
    why = _unsafe(found, (os.geteuid(),))
    if why:
        raise UnsafeRunDir("%s %s %s, %s" % (what, directory, why, harm))


def make_run_dir(directory: str, new: bool = False) -> bool:
    """Make the run directory ``directory`` and its parent (the runs
    directory) where they are not, 0700: a task's output is its user's
    alone. The runs directory must pass ``check_runs_dir`` (UnsafeRunDir);
    the run directory is made anew (``new``: FileExistsError if it is
    there), else may be there already, a directory (never a link) of the
    caller's that no one else may write (UnsafeRunDir); OSError. Whether
    it made the run directory."""
    runs = os.path.dirname(directory) or "."
    check_runs_dir(runs)
    parent = os.path.abspath(runs)
    try:
        os.makedirs(parent, mode=0o700, exist_ok=True)
    except FileExistsError:     # a file: what makedirs of the whole path says
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), parent) from None
    check_runs_dir(runs)   # what was made: another user's, made first?
    made = True
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        if new:
            raise
        made = False
    found = os.lstat(directory)
    if stat.S_ISLNK(found.st_mode):
        raise UnsafeRunDir("the run directory %s is a symbolic link, which could lead this "
                           "run's record anywhere" % directory)
    if not stat.S_ISDIR(found.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), directory)
    _refuse_unless_own(directory, found, "the run directory",
                       "who could redirect this run's record")
    if not made and not os.access(directory, os.W_OK | os.X_OK):
        # (its own, 0500, or on a read-only mount: the run would go on with
        # no record and no logs)
        code = errno.EROFS if os.statvfs(directory).f_flag & os.ST_RDONLY else errno.EACCES
        raise OSError(code, os.strerror(code), directory)
    return made


def create_private(path: str, append: bool = False) -> int:
    """A descriptor of ``path`` open for writing, never through a symbolic
    link (OSError): a new file is created 0600 (its user's alone), and
    only it (O_EXCL); one there already (a reused --run-dir, or one this
    run appends to) must be a regular file of the caller's (OSError), and
    is emptied unless ``append``."""
    flags = os.O_WRONLY | os.O_NOFOLLOW | (os.O_APPEND if append else 0)
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    descriptor = os.open(path, flags | os.O_NONBLOCK)   # a FIFO: ENXIO, not a hang
    try:
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
            raise OSError(errno.EPERM, "not a file of yours", path)
        if not append:
            os.ftruncate(descriptor, 0)
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


__all__ = ["RUNS_DIR", "runs_root", "default_run_dir", "UnsafeRunDir", "check_path",
           "check_runs_dir", "check_own_dir", "make_run_dir", "create_private"]


def run_json_text(document: Mapping[str, object]) -> str:
    """run.json's text: a top-level field a line, and an item a line of each
    list (tasks, restarts, ...), each written by json's C encoder. (An
    indented dump runs json's Python encoder, four times the cost, and a run
    of hundreds of tasks saves at every second.)"""
    fields = []
    for key, value in document.items():
        head = json.dumps(key) + ": "
        if isinstance(value, list) and value:
            fields.append(head + "[\n  " + ",\n  ".join(json.dumps(item) for item in value)
                          + "\n ]")
        else:
            fields.append(head + json.dumps(value))
    return "{\n " + ",\n ".join(fields) + "\n}"


RUN_FILE = "run.json"


def write_run_json(directory: str, text: str) -> Optional[OSError]:
    """``text`` as ``directory``'s run.json, atomically (a temporary file,
    then a rename); the OSError of a failure (a full disk), or None: the
    record is a help, not a reason to fail the run. A failed write leaves
    no temporary file behind (and the run.json before it as it was)."""
    temporary = os.path.join(directory, ".run.json.tmp")
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)   # one left by a process killed mid-write: made anew, 0600
        with open(create_private(temporary), "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        os.replace(temporary, os.path.join(directory, RUN_FILE))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        return exc
    return None
