"""What ``--ship`` packs from a directory, decided before anything is packed
or launched (``select``).

Listed: inside a git work tree, what git would commit (``git ls-files
--cached --others --exclude-standard``: ``.gitignore`` honoured); elsewhere
everything but ``.git``, ``__pycache__``, ``*.pyc`` and virtual environments
(a directory with ``pyvenv.cfg`` or ``conda-meta``). ``exclude`` patterns
(``fnmatch``, matched against the relative path and against each of its
components) drop more.

Never packed: run directories — any ``tfmesos-runs``, the directories given
as ``leave_out`` (the run's own, ``$TFMESOS_RUNS_DIR``) and any directory
holding a run record (a ``run.json`` of ``record/run_record.py``'s making):
earlier runs' logs.

Symbolic links: one that stays inside the directory is packed as a link
(the fetcher extracts it as one). One that leads out of it (absolute, or
``..`` beyond its top) points at what the agents do not have: refused,
naming it, unless ``follow_links`` packs what it points to (a file's
content, a directory's files, listed as a directory outside git is).

Likely secrets (``likely_secrets``: by the path in the bundle, or where
the file really is) are refused, naming them, unless ``allow_secrets``.

What cannot be read (a directory that may not be listed or searched, a
file or link that may not be looked at) is refused, naming it, never left
out. What is neither a file, a link nor a directory (FIFOs, sockets,
devices) is left out, and counted (``others``). More files than an archive
of ``max_size`` could hold (``MEMBER_AT_LEAST`` each) are refused as soon
as they are found; the exact size of the archive is ``bundle``'s to check.
"""

import dataclasses
import errno
import fnmatch
import os
import posixpath
import re
import stat
import subprocess
from typing import Optional

from ..exceptions import TFMesosError
from ..protocol import json_documents
from ..record.takeover_files import open_regular
from ..terminal_text import printable
from .likely_secrets import likely_secret

ALWAYS_EXCLUDED = ("tfmesos-runs",)
SKIPPED_NAMES = (".git", "__pycache__", ".hg", ".svn", ".tox", ".mypy_cache", ".pytest_cache")
# ".git" as a file: a submodule's (or worktree's) pointer to its repository.
SKIPPED_FILES = ("*.pyc", "*.pyo", ".git")
VENV_MARKERS = ("pyvenv.cfg", "conda-meta")
RUN_RECORD = "run.json"
SHOWN = 5               # names an error lists before "and N more"
# What a member takes in the archive at the least (bundle.pack's layout):
# its header block (a pax header too where its name needs one: mtimes are
# whole seconds); its content rounds up to blocks.
MEMBER_AT_LEAST = 512
_UNOPENED = re.compile(r"could not open directory '(.*)': (.*)")


class ShipError(TFMesosError):
    """The directory cannot be shipped (too big, unreadable, not a directory,
    a link out of it, likely secrets); it names the ``ShipSpec`` fields to
    change (``error_fields``), which each caller words as it is called."""


@dataclasses.dataclass(frozen=True)
class Member:
    """One entry of the bundle: ``path`` in it (relative, ``/``-separated),
    read from ``source`` here; ``link``: packed as a symbolic link to this,
    else ``source`` is a regular file. ``followed``: reached through a
    followed link, where it really is (its whole path)."""

    path: str
    source: str
    link: Optional[str] = None
    followed: Optional[str] = None


def select(directory, exclude=(), leave_out=(), follow_links=False, allow_secrets=False,
           max_size=None, others=None):
    """The ``Member``s to pack from ``directory``, sorted by path; ShipError,
    one line naming the fix, for links out of it and likely secrets, and
    as soon as there are more of them than an archive of ``max_size``
    bytes holds (``MEMBER_AT_LEAST`` each): neither the rest of the
    directory nor its files' sizes are looked at. ``others``: a list the
    paths of what is neither a file, a link nor a directory (FIFOs,
    sockets, devices: left out) go to."""
    others = [] if others is None else others
    directory = os.path.abspath(directory)
    if not os.path.isdir(directory):
        raise ShipError.about("{ship.directory=%s}: %s", printable(directory),
                              not_a_directory(directory))
    where = printable(tilde(directory))   # as messages name it
    most = None if max_size is None else int(max_size // MEMBER_AT_LEAST)
    patterns = _patterns(exclude, directory) + ALWAYS_EXCLUDED
    left = _inside(directory, leave_out)
    from_git = _git_files(directory)
    if from_git is None:
        try:
            listed = _walk(directory, patterns=patterns, skip=left, most=most)
        except _TooMany:
            raise _too_many(where, most, max_size) from None
    else:
        listed, unopened = from_git
        try:
            listed = _into_repositories(directory, listed, most)
        except _TooMany:
            raise _too_many(where, most, max_size) from None
        for path, why in unopened:   # one left out is not read, as the walk does not
            inside = path.rstrip("/")
            if not _excluded(inside, patterns) and not any(
                    inside == run or inside.startswith(run + "/") for run in left):
                raise ShipError.about("{ship.directory}: cannot read %s: %s",
                                      printable(path), printable(why))
    listed = sorted(set(listed))
    runs = left + _run_directories(directory, listed)
    members, leading_out = [], []
    linked: dict[str, bool] = {}
    for path in listed:
        if _excluded(path, patterns) or any(path.startswith(run + "/") for run in runs):
            continue
        if from_git is not None and _beyond_a_link(directory, path, linked):
            # Git lists a committed file whose directory is now a link (a
            # .gitignore'd one, to ~/.aws): git says it is deleted; read
            # through the link it shipped what is outside the directory.
            continue
        full = os.path.join(directory, path)
        found = _lstat(directory, path)
        if found is None:   # git lists deleted files
            continue
        if stat.S_ISLNK(found.st_mode):
            target = _readlink(directory, path)
            if _stays_inside(path, target):
                members.append(Member(path, full, link=target))
            elif follow_links:
                try:
                    members.extend(_followed(where, path, full, target, patterns,
                                             (os.path.realpath(directory),), others,
                                             None if most is None else most - len(members)))
                except _TooMany:
                    raise _too_many(where, most, max_size) from None
            else:
                leading_out.append("%s -> %s" % (path, target))
        elif stat.S_ISREG(found.st_mode):
            members.append(Member(path, full))
        elif not stat.S_ISDIR(found.st_mode):   # (a repository's directory: walked above)
            others.append(path)
        if most is not None and len(members) > most:
            raise _too_many(where, most, max_size)
    if leading_out:
        raise ShipError.about("{ship.directory=%s}: links lead out of it, to what the agents "
                              "do not have: %s; make them relative links inside it, leave them "
                              "out ({ship.exclude}), or ship what they point to with "
                              "{ship.follow_links=True}", where, _names(leading_out))
    if not allow_secrets:
        top = _as_path(os.path.realpath(directory))
        found = sorted({_secret(member, top) for member in members} - {None})
        if found:
            raise ShipError.about("{ship.directory=%s}: likely secrets would go to every task: "
                                  "%s; leave them out with {ship.exclude} (or .gitignore), or "
                                  "pass {ship.allow_secrets=True}", where, _names(found))
    return sorted(members, key=lambda member: member.path)


class _TooMany(Exception):
    """``_walk`` found more than it was asked to look for."""


def _too_many(where, most, max_size):
    return ShipError.about("{ship.directory=%s}: more than %d files, each at least %s in the "
                           "archive, are over {ship.max_size=%s}: leave them out with "
                           "{ship.exclude} or .gitignore, or read large data from shared "
                           "storage", where, most, human_size(MEMBER_AT_LEAST),
                           human_size(max_size))


def not_a_directory(path):
    """Why ``path``, which is not a directory, cannot be shipped."""
    return "a file, not a directory: ship the directory it is in" \
        if os.path.isfile(path) else "no such directory"


def left_out(others):
    """What a summary says of ``others`` (``select``'s), or ""."""
    if not others:
        return ""
    return "; left out %d that %s neither a file, a link nor a directory: %s" % (
        len(others), "is" if len(others) == 1 else "are", _names(others))


def human_size(size):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return "%.1f %s" % (size / scale, unit)
    return "%d byte%s" % (size, "" if size == 1 else "s")


def tilde(path):
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home):]
    return path


def _names(names):
    """The first ``SHOWN`` of ``names`` (file names: their control
    characters escaped) and how many more."""
    shown = ", ".join(printable(name) for name in names[:SHOWN])
    return shown if len(names) <= SHOWN else "%s and %d more" % (shown, len(names) - SHOWN)


def _secret(member, top):
    """What of ``member`` looks like a secret (``likely_secret``): its path
    in the bundle, or where it really is (``top``: the real path of the
    directory it is in, as ``_as_path`` writes it): ``--ship /etc``'s
    ``shadow``, a followed link to ``/etc/shadow``."""
    named = likely_secret(member.path)
    real = member.followed if member.followed is not None else "%s/%s" % (top, member.path)
    if named is None and likely_secret(real):
        return member.path
    return named


# -- links ---------------------------------------------------------------------------------


def _stays_inside(path, target):
    """Whether the link at ``path`` (relative to a top) to ``target`` leads
    to a place under that top, read as the extracted bundle reads it."""
    if not target or posixpath.isabs(target):
        return False
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    return resolved != ".." and not resolved.startswith("../")


def _followed(where, path, full, target, patterns, following, others, most=None):
    """The members that stand for the link ``full`` at ``path`` (of the
    directory ``where``, as errors name it), which points at ``target``
    (as its caller read it): its target's content;
    ``following``: the real paths of the directories being packed, which a
    link back into would never end; ``_TooMany`` past ``most`` members
    (what the early stop has left: links to links to ... fanned out to
    131,072 members, walked for 19 s before the stop looked)."""
    real = os.path.realpath(full)
    try:
        reached = os.stat(real)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            raise unreadable(path, exc) from None
        reached = None
    if reached is not None and stat.S_ISREG(reached.st_mode):
        return [Member(path, real, followed=_as_path(real))]
    if reached is None or not stat.S_ISDIR(reached.st_mode):
        raise ShipError.about("{ship.directory=%s}: %s -> %s leads to nothing to ship: fix the "
                              "link, or leave it out ({ship.exclude})", where, printable(path),
                              printable(target))
    if real in following:
        raise ShipError.about("{ship.directory=%s}: %s -> %s loops back to a directory it is "
                              "in: leave it out ({ship.exclude})", where, printable(path),
                              printable(target))
    members = []
    for inner in sorted(_walk(real, named=path + "/", patterns=patterns, prefix=path + "/",
                              most=most)):
        inside = "%s/%s" % (path, inner)
        if _excluded(inside, patterns):
            continue
        source = os.path.join(real, inner)
        found = _lstat(real, inner, path + "/")
        if found is None:
            continue
        if stat.S_ISLNK(found.st_mode):
            link = _readlink(real, inner, path + "/")
            if _stays_inside(inner, link):
                members.append(Member(inside, source, link=link, followed=_as_path(source)))
            else:
                members.extend(_followed(where, inside, source, link, patterns,
                                         following + (real,), others,
                                         None if most is None else most - len(members)))
        elif stat.S_ISREG(found.st_mode):
            members.append(Member(inside, source, followed=_as_path(source)))
        elif not stat.S_ISDIR(found.st_mode):
            others.append(inside)
        if most is not None and len(members) > most:
            raise _TooMany()
    return members


def _as_path(real):
    """An absolute path as ``likely_secrets`` reads paths: ``/``-separated,
    relative to the root (a file under ~/.ssh is as secret as ~/.ssh)."""
    return real.replace(os.sep, "/").lstrip("/")


# -- listing ---------------------------------------------------------------------------------


def _git_files(directory):
    """(what git would commit under ``directory``, the directories it could
    not open: (path, why) pairs), or None outside a work tree."""
    try:
        inside = subprocess.run(["git", "-C", directory, "rev-parse", "--is-inside-work-tree"],
                                capture_output=True, text=True, timeout=60)
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        listed = subprocess.run(["git", "-C", directory, "ls-files", "-z", "--cached",
                                 "--others", "--exclude-standard"],
                                capture_output=True, timeout=300, check=True,
                                env=dict(os.environ, LC_ALL="C"))
    except (OSError, subprocess.SubprocessError):
        return None
    # git lists what it can and warns of a directory it could not open.
    unopened = [found.groups() for found in _UNOPENED.finditer(
        listed.stderr.decode("utf-8", "surrogateescape"))]
    return [name for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0")
            if name], unopened


def _into_repositories(top, listed, most):
    """``listed`` (git's) with the files of the git repositories in it, a
    submodule or a clone inside the project, walked as a directory outside
    git is: git lists each as its directory alone, and nothing of it went,
    with no word (the task's import of it failed)."""
    found = []
    for path in listed:
        inside = path.rstrip("/")
        full = os.path.join(top, inside)
        if os.path.isdir(full) and not os.path.islink(full):
            found += [inside + "/" + sub
                      for sub in _walk(full, named=inside + "/", most=most)]
        else:
            found.append(path)
    return found


def _tree(top, onerror):
    """``os.walk(top, onerror=onerror)`` (top-down, links to directories
    listed, not followed) without its recursion: Python 3.11's takes a
    frame a level, and 1,000 nested directories were a RecursionError."""
    pending = [top]
    while pending:
        root = pending.pop()
        try:
            with os.scandir(root) as scan:
                entries = list(scan)
        except OSError as exc:
            onerror(exc)
            continue
        dirs: list[str] = []
        files: list[str] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (dirs if is_dir else files).append(entry.name)
        yield root, dirs, files
        for name in reversed(dirs):
            path = os.path.join(root, name)
            if not os.path.islink(path):
                pending.append(path)


def _walk(directory, named="", patterns=(), skip=(), most=None, prefix=""):
    """The paths under ``directory``; ShipError for a directory in it that
    cannot be listed (``named``: what to put before its path in it). Not
    walked: directories ``patterns`` exclude all of (their paths after
    ``prefix``), those in ``skip`` and those holding a run record; files
    ``patterns`` exclude are not counted either; ``_TooMany`` past ``most``
    paths."""
    def refuse(error):
        relative = os.path.relpath(error.filename, directory) if error.filename else "."
        raise unreadable("" if relative == "." else relative.replace(os.sep, "/") + "/",
                         error, prefix=named)
    found = []
    skip = set(skip)
    for root, dirs, files in _tree(directory, refuse):
        relative = os.path.relpath(root, directory)
        inside = "" if relative == "." else "/".join(relative.split(os.sep)) + "/"
        if inside and RUN_RECORD in files and _is_run_record(os.path.join(root, RUN_RECORD)):
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_NAMES and inside + d not in skip
                         and not _excludes_all(prefix + inside + d, patterns)
                         and not _is_environment(os.path.join(root, d)))
        for name in files:
            if any(fnmatch.fnmatch(name, pattern) for pattern in SKIPPED_FILES) \
                    or _excluded(prefix + inside + name, patterns):
                continue
            found.append(inside + name)
        for name in list(dirs):
            if os.path.islink(os.path.join(root, name)):   # os.walk does not follow them
                found.append(inside + name)
        if most is not None and len(found) > most:
            raise _TooMany()
    return found


def _beyond_a_link(top, path, linked):
    """Whether a directory above ``path`` (under ``top``) is a symbolic
    link, or no directory (``linked``: what each one was found to be)."""
    parts = path.split("/")[:-1]
    for end in range(1, len(parts) + 1):
        above = "/".join(parts[:end])
        if above not in linked:
            try:
                linked[above] = not stat.S_ISDIR(os.lstat(os.path.join(top, above)).st_mode)
            except OSError:
                linked[above] = True
        if linked[above]:
            return True
    return False


def _patterns(exclude, directory):
    """``exclude`` as ``_excluded`` matches them: ``./data`` and an
    absolute path inside ``directory`` relative to it, and ``**/X`` also
    as ``X`` (gitignore's ``**/`` matches no directory too): each matched
    nothing before, and the files went with no word. ShipError for an
    absolute path outside it."""
    top = os.path.realpath(directory)
    found = []
    for pattern in exclude:
        given = pattern
        if os.path.isabs(pattern):
            real = os.path.realpath(pattern.rstrip("/") or "/")
            if real != top and not real.startswith(top.rstrip("/") + "/"):
                raise ShipError.about("{ship.exclude=%s}: it is outside {ship.directory=%s}, "
                                      "which holds what is shipped: give a pattern or a path "
                                      "inside it", printable(given), printable(tilde(top)))
            pattern = os.path.relpath(real, top) + ("/" if pattern.endswith("/") else "")
        while pattern.startswith("./"):
            pattern = pattern[2:].lstrip("/")
        if pattern in ("", ".", "./"):
            raise ShipError.about("{ship.exclude=%s} would leave out the whole directory: "
                                  "ship another one, or none", printable(given))
        found.append(pattern)
        if pattern.startswith("**/") and pattern[3:]:
            found.append(pattern[3:])
    return tuple(found)


def _lstat(top, path, prefix=""):
    """``os.lstat`` of ``path`` under ``top``; None when it is gone (git
    lists deleted files); ShipError when it cannot be looked at
    (``unreadable``)."""
    try:
        return os.lstat(os.path.join(top, path))
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise unreadable(path, exc, top, prefix) from None


def _readlink(top, path, prefix=""):
    try:
        return os.readlink(os.path.join(top, path))
    except OSError as exc:
        raise unreadable(path, exc, top, prefix) from None


def unreadable(path, error, top=None, prefix=""):
    """The ShipError for ``path`` that could not be read, named in the
    bundle as ``prefix + path``; or, where the path is under ``top`` and a
    directory above it may not be searched, that directory."""
    if top is not None and error.errno == errno.EACCES:
        parts = path.split("/")
        for index in range(1, len(parts)):
            if not os.access(os.path.join(top, *parts[:index]), os.X_OK):
                path = "/".join(parts[:index]) + "/"
                break
    return ShipError.about("{ship.directory}: cannot read %s: %s", printable(prefix + path),
                           printable(error.strerror or error))


def _is_environment(path):
    return any(os.path.exists(os.path.join(path, marker)) for marker in VENV_MARKERS)


def _excludes_all(directory, patterns):
    """Whether ``patterns`` exclude every path under ``directory``."""
    parts = directory.split("/")
    return any(any(fnmatch.fnmatch(part, pattern.rstrip("/")) for part in parts)
               or ("/" in pattern.rstrip("/") and fnmatch.fnmatch(directory, pattern.rstrip("/")))
               for pattern in patterns)


def _excluded(path, patterns):
    parts = path.split("/")
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(path, pattern) or any(fnmatch.fnmatch(part, pattern)
                                                 for part in parts):
            return True
        # a directory pattern with a slash: "data/raw" drops data/raw/...
        if "/" in pattern and any(fnmatch.fnmatch("/".join(parts[:i]), pattern)
                                  for i in range(1, len(parts))):
            return True
    return False


# -- run directories ---------------------------------------------------------------------


def _inside(directory, paths):
    """Of ``paths`` (absolute, or relative to the working directory), those
    strictly under ``directory``, relative to it, ``/``-separated."""
    top = os.path.realpath(directory)
    found = []
    for path in paths:
        if not path:
            continue
        relative = os.path.relpath(os.path.realpath(path), top)
        if relative != "." and not relative.startswith(".." + os.sep) and relative != "..":
            found.append(relative.replace(os.sep, "/"))
    return found


def _run_directories(directory, listed):
    """The directories among ``listed`` paths that hold a run record."""
    found = []
    for path in listed:
        parent, _, name = path.rpartition("/")
        if name == RUN_RECORD and parent and _is_run_record(os.path.join(directory, path)):
            found.append(parent)
    return found


def _is_run_record(path):
    """Whether ``path`` is a run record: a regular file (a FIFO is not
    waited on for a writer) whose JSON is one."""
    try:
        with open_regular(path) as handle:
            data = json_documents.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):   # NotRegularFile and UnicodeDecodeError too
        return False
    # record/schema.py: version 2 says schema_version, version 1 "format": 1.
    return isinstance(data, dict) and "run_id" in data and "tasks" in data \
        and ("schema_version" in data or "format" in data)


__all__ = ["Member", "ShipError", "select", "tilde", "left_out", "not_a_directory",
           "ALWAYS_EXCLUDED"]
