"""Which paths a shipped directory holds (``contents.select`` decides what
of them is packed): inside a git work tree, what git would commit
(``git_files``) with the repositories inside it walked
(``into_repositories``); elsewhere a walk (``walk``: no ``.git``,
``__pycache__``, ``*.pyc``, virtual environments, run directories), one
frame whatever the depth (``tree``). Also what the walk and the selection
look at on the way: a path's ``lstat`` and link, what lies beyond a link,
run directories (``run_directories``)."""

import errno
import fnmatch
import os
import re
import stat
import subprocess

from ..protocol import json_documents
from ..record.takeover_files import open_regular
from .exclude_patterns import excluded, excludes_all
from .ship_errors import unreadable

SKIPPED_NAMES = (".git", "__pycache__", ".hg", ".svn", ".tox", ".mypy_cache", ".pytest_cache")
# ".git" as a file: a submodule's (or worktree's) pointer to its repository.
SKIPPED_FILES = ("*.pyc", "*.pyo", ".git")
VENV_MARKERS = ("pyvenv.cfg", "conda-meta")
RUN_RECORD = "run.json"
UNOPENED = re.compile(r"could not open directory '(.*)': (.*)")


class TooMany(Exception):
    """``walk`` found more than it was asked to look for."""


def git_files(directory):
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
    unopened = [found.groups() for found in UNOPENED.finditer(
        listed.stderr.decode("utf-8", "surrogateescape"))]
    return [name for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0")
            if name], unopened


def into_repositories(top, listed, most):
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
                      for sub in walk(full, named=inside + "/", most=most)]
        else:
            found.append(path)
    return found


def tree(top, onerror):
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


def walk(directory, named="", patterns=(), skip=(), most=None, prefix=""):
    """The paths under ``directory``; ShipError for a directory in it that
    cannot be listed (``named``: what to put before its path in it). Not
    walked: directories ``patterns`` exclude all of (their paths after
    ``prefix``), those in ``skip`` and those holding a run record; files
    ``patterns`` exclude are not counted either; ``TooMany`` past ``most``
    paths."""
    def refuse(error):
        relative = os.path.relpath(error.filename, directory) if error.filename else "."
        raise unreadable("" if relative == "." else relative.replace(os.sep, "/") + "/",
                         error, prefix=named)
    found = []
    skip = set(skip)
    for root, dirs, files in tree(directory, refuse):
        relative = os.path.relpath(root, directory)
        inside = "" if relative == "." else "/".join(relative.split(os.sep)) + "/"
        if inside and RUN_RECORD in files and is_run_record(os.path.join(root, RUN_RECORD)):
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_NAMES and inside + d not in skip
                         and not excludes_all(prefix + inside + d, patterns)
                         and not is_environment(os.path.join(root, d)))
        for name in files:
            if any(fnmatch.fnmatch(name, pattern) for pattern in SKIPPED_FILES) \
                    or excluded(prefix + inside + name, patterns):
                continue
            found.append(inside + name)
        for name in list(dirs):
            if os.path.islink(os.path.join(root, name)):   # os.walk does not follow them
                found.append(inside + name)
        if most is not None and len(found) > most:
            raise TooMany()
    return found


def beyond_a_link(top, path, linked):
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


def lstat_in(top, path, prefix=""):
    """``os.lstat`` of ``path`` under ``top``; None when it is gone (git
    lists deleted files); ShipError when it cannot be looked at
    (``unreadable``)."""
    try:
        return os.lstat(os.path.join(top, path))
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise unreadable(path, exc, top, prefix) from None


def readlink_in(top, path, prefix=""):
    try:
        return os.readlink(os.path.join(top, path))
    except OSError as exc:
        raise unreadable(path, exc, top, prefix) from None


def is_environment(path):
    return any(os.path.exists(os.path.join(path, marker)) for marker in VENV_MARKERS)


def paths_inside(directory, paths):
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


def run_directories(directory, listed):
    """The directories among ``listed`` paths that hold a run record."""
    found = []
    for path in listed:
        parent, _, name = path.rpartition("/")
        if name == RUN_RECORD and parent and is_run_record(os.path.join(directory, path)):
            found.append(parent)
    return found


def is_run_record(path):
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


__all__ = ["RUN_RECORD", "SKIPPED_FILES", "SKIPPED_NAMES", "TooMany", "beyond_a_link",
           "git_files", "into_repositories", "is_run_record", "lstat_in",
           "paths_inside", "readlink_in", "run_directories", "tree", "walk"]
