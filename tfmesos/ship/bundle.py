"""Packing what ``--ship`` sends to every task: the user's directory as one
content-addressed ``.tar.gz`` (``pack``), and the task side of tfmesos as a
zip that goes on the task's ``PYTHONPATH`` (``pack_task_side``).

What is packed from a directory: inside a git work tree, what git would
commit (``git ls-files --cached --others --exclude-standard``: ``.gitignore``
honoured); elsewhere everything but ``.git``, ``__pycache__``, ``*.pyc``,
virtual environments (a directory with ``pyvenv.cfg`` or ``conda-meta``) and
run directories (``tfmesos-runs``, which tfrun writes while it packs).
``exclude`` patterns (``fnmatch``, matched against the relative path and
against each of its components) drop more.

Archives are reproducible: members sorted, owner root, the gzip header
without a time stamp; so the same files give the same sha256, the name the
archive is served under.
"""

import dataclasses
import fnmatch
import gzip
import hashlib
import io
import os
import subprocess
import tarfile
import zipfile
from typing import Optional

from ..exceptions import SpecError, TFMesosError
from ..task.bundle_check import sha256_of as file_sha256  # the task checks with the same

MAX_SIZE = 100 * 1000 * 1000    # default --ship-max-size (bytes)
WARN_SIZE = 10 * 1000 * 1000    # a bundle over this is worth a warning
TOP = "project"                 # the archive's one top directory: the task's working directory
COMPRESSION = 6                 # gzip level: most of level 9's ratio at twice its speed
ALWAYS_EXCLUDED = ("tfmesos-runs",)
SKIPPED_NAMES = (".git", "__pycache__", ".hg", ".svn", ".tox", ".mypy_cache", ".pytest_cache")
SKIPPED_FILES = ("*.pyc", "*.pyo")
VENV_MARKERS = ("pyvenv.cfg", "conda-meta")
# What a task imports of tfmesos: the task side and the protocol it speaks.
TASK_SIDE_PACKAGES = ("task", "protocol")
TASK_SIDE_INIT = ('"""tfmesos\' task side, shipped to the task by tfrun --ship: '
                  '``python -m tfmesos.task``."""\n\n__version__ = %r\n')


ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")
URL_SCHEMES = ("http://", "https://", "hdfs://")


class ShipError(TFMesosError):
    """The directory cannot be shipped (too big, unreadable, not a directory)."""


@dataclasses.dataclass(frozen=True)
class ShipSpec:
    """What a run ships (``tfrun --ship``, ``cluster(ship=...)``):
    ``directory`` (None: no code, only the task side and ``python_env``),
    ``exclude`` patterns, ``max_size`` in bytes (None: no limit), and
    ``python_env``: a conda-pack/venv-pack archive, a local file or an
    ``http(s)://`` / ``hdfs://`` URL, whose ``bin/python3`` runs the tasks."""

    directory: Optional[str] = "."
    exclude: tuple = ()
    max_size: Optional[int] = MAX_SIZE
    python_env: Optional[str] = None

    def __post_init__(self):
        if self.directory is not None:
            if not os.path.isdir(self.directory):
                raise SpecError("--ship %s: no such directory" % self.directory)
            object.__setattr__(self, "directory", os.path.abspath(self.directory))
        if isinstance(self.exclude, str):
            object.__setattr__(self, "exclude", (self.exclude,))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        if self.max_size is not None and (isinstance(self.max_size, bool)
                                          or not isinstance(self.max_size, (int, float))
                                          or self.max_size <= 0):
            raise SpecError("--ship-max-size must be a positive number of MB, got %r"
                            % (self.max_size,))
        env = self.python_env
        if env is not None:
            if not env.lower().endswith(ARCHIVE_SUFFIXES):
                raise SpecError("--python-env %s: the Mesos fetcher extracts only %s archives: "
                                "make one with conda-pack or venv-pack" % (env, ", ".join(
                                    ARCHIVE_SUFFIXES)))
            if "://" in env:
                if not env.lower().startswith(URL_SCHEMES):
                    raise SpecError("--python-env %s: give a local file or an http(s):// or "
                                    "hdfs:// URL" % env)
            elif not os.path.isfile(env):
                raise SpecError("--python-env %s: no such file" % env)
            else:
                object.__setattr__(self, "python_env", os.path.abspath(env))


@dataclasses.dataclass(frozen=True)
class Bundle:
    """A packed archive: ``path`` on this machine, ``name`` to serve it
    under, its ``sha256``; ``files`` and ``size`` (bytes) of what went in."""

    path: str
    name: str
    sha256: str
    files: int
    size: int
    source: str = ""

    @property
    def archive_size(self):
        return os.path.getsize(self.path)

    def summary(self):
        """``shipped 37 files, 1.2 MB from ~/proj``."""
        return "shipped %d file%s, %s from %s" % (self.files, "" if self.files == 1 else "s",
                                                 human_size(self.size), tilde(self.source))

    def record(self):
        """What run.json keeps of it."""
        return {"source": self.source, "files": self.files, "bytes": self.size,
                "archive_bytes": self.archive_size, "sha256": self.sha256, "name": self.name}


def human_size(size):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return "%.1f %s" % (size / scale, unit)
    return "%d bytes" % size


def tilde(path):
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home):]
    return path


# -- what goes in ---------------------------------------------------------------


def list_files(directory, exclude=()):
    """Sorted relative paths (``/``-separated) of the files to ship from
    ``directory``: git's view inside a work tree, else a walk (module doc)."""
    directory = os.path.abspath(directory)
    if not os.path.isdir(directory):
        raise ShipError("--ship %s: not a directory" % directory)
    listed = _git_files(directory)
    if listed is None:
        listed = _walk(directory)
    patterns = tuple(exclude) + ALWAYS_EXCLUDED
    kept = []
    for path in listed:
        if _excluded(path, patterns):
            continue
        full = os.path.join(directory, path)
        # git lists deleted files (still in the index) and submodules (directories)
        if os.path.islink(full) or os.path.isfile(full):
            kept.append(path)
    return sorted(set(kept))


def _git_files(directory):
    """What git would commit under ``directory``, or None outside a work tree."""
    try:
        inside = subprocess.run(["git", "-C", directory, "rev-parse", "--is-inside-work-tree"],
                                capture_output=True, text=True, timeout=60)
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        listed = subprocess.run(["git", "-C", directory, "ls-files", "-z", "--cached",
                                 "--others", "--exclude-standard"],
                                capture_output=True, timeout=300, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return [name for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0")
            if name]


def _walk(directory):
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_NAMES
                         and not _is_environment(os.path.join(root, d)))
        relative = os.path.relpath(root, directory)
        for name in files:
            if any(fnmatch.fnmatch(name, pattern) for pattern in SKIPPED_FILES):
                continue
            found.append(name if relative == "." else
                         "/".join(relative.split(os.sep) + [name]))
        for name in list(dirs):
            if os.path.islink(os.path.join(root, name)):   # os.walk does not follow them
                found.append(name if relative == "." else
                             "/".join(relative.split(os.sep) + [name]))
    return found


def _is_environment(path):
    return any(os.path.exists(os.path.join(path, marker)) for marker in VENV_MARKERS)


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


def _sizes(directory, paths):
    sizes = {}
    for path in paths:
        try:
            sizes[path] = os.lstat(os.path.join(directory, path)).st_size
        except OSError as exc:
            raise ShipError("--ship: cannot read %s: %s" % (path, exc.strerror)) from None
    return sizes


def check_size(sizes, max_size, directory):
    """ShipError naming the five biggest files when the total is over ``max_size``."""
    total = sum(sizes.values())
    if max_size is not None and total > max_size:
        biggest = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))[:5]
        raise ShipError("--ship %s: %s is over --ship-max-size %s; biggest: %s (drop them "
                        "with --ship-exclude PATTERN or .gitignore, or read large data from "
                        "shared storage)" % (tilde(directory), human_size(total),
                                             human_size(max_size),
                                             ", ".join("%s (%s)" % (p, human_size(s))
                                                       for p, s in biggest)))
    return total


# -- packing --------------------------------------------------------------------


def pack(directory, out_dir, exclude=(), max_size=MAX_SIZE):
    """Pack ``directory`` into ``out_dir``; the ``Bundle``. Members are
    ``project/<path>``."""
    directory = os.path.abspath(directory)
    paths = list_files(directory, exclude)
    sizes = _sizes(directory, paths)
    total = check_size(sizes, max_size, directory)
    partial = os.path.join(out_dir, "bundle.partial")
    digest = hashlib.sha256()
    with open(partial, "wb") as raw:
        hashing = _HashingWriter(raw, digest)
        with gzip.GzipFile(filename="", mode="wb", fileobj=hashing, compresslevel=COMPRESSION,
                           mtime=0) as zipped:
            with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
                tar.addfile(_directory_entry(TOP, os.stat(directory)))
                for path in paths:
                    _add(tar, directory, path)
    sha = digest.hexdigest()
    name = "tfmesos-bundle-%s.tar.gz" % sha[:16]
    final = os.path.join(out_dir, name)
    os.replace(partial, final)
    return Bundle(final, name, sha, len(paths), total, directory)


class _HashingWriter(io.RawIOBase):
    def __init__(self, raw, digest):
        self.raw, self.digest = raw, digest

    def writable(self):
        return True

    def write(self, data):
        self.digest.update(data)
        return self.raw.write(data)


def _normalized(info):
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _directory_entry(name, stat):
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.mtime = int(stat.st_mtime)
    return _normalized(info)


def _add(tar, directory, path):
    full = os.path.join(directory, path)
    try:
        info = _normalized(tar.gettarinfo(full, arcname="%s/%s" % (TOP, path)))
        if info.isreg():
            with open(full, "rb") as handle:
                tar.addfile(info, handle)
        else:
            tar.addfile(info)
    except OSError as exc:
        raise ShipError("--ship: cannot read %s: %s" % (path, exc.strerror or exc)) from None


def pack_task_side(out_dir, package_dir=None):
    """The task side of tfmesos (``tfmesos/task/``, ``tfmesos/protocol/``
    and a minimal ``tfmesos/__init__.py``; stdlib only) as a zip in
    ``out_dir``: a ``Bundle`` whose ``path`` goes on ``PYTHONPATH``."""
    from .. import __version__
    package_dir = package_dir or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    members = [("tfmesos/__init__.py", (TASK_SIDE_INIT % __version__).encode())]
    for package in TASK_SIDE_PACKAGES:
        folder = os.path.join(package_dir, package)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                members.append(("tfmesos/%s/%s" % (package, name),
                                _read(os.path.join(folder, name))))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    data = buffer.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    name = "tfmesos-task-%s.zip" % sha[:16]
    path = os.path.join(out_dir, name)
    with open(path, "wb") as handle:
        handle.write(data)
    return Bundle(path, name, sha, len(members), sum(len(d) for _, d in members), package_dir)


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


__all__ = ["Bundle", "ShipError", "ShipSpec", "list_files", "pack", "pack_task_side", "file_sha256",
           "check_size", "human_size", "MAX_SIZE", "WARN_SIZE", "TOP"]
