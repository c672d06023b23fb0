"""Packing what ``--ship`` sends to every task: the user's directory as one
content-addressed ``.tar.gz`` (``pack``), and the task side of tfmesos as a
zip that goes on the task's ``PYTHONPATH`` (``pack_task_side``).

What is packed from a directory, and what is refused before anything is
(links out of it, likely secrets), is ``contents.select``'s to decide.

Archives are reproducible: members sorted, owner root, the gzip header
without a time stamp; so the same files give the same sha256, the name the
archive is served under.
"""

import collections
import concurrent.futures
import dataclasses
import hashlib
import io
import math
import os
import re
import stat
import struct
import tarfile
import urllib.parse
import zipfile
import zlib
from typing import Optional

from ..exceptions import SpecError
from .contents import ShipError, select, tilde

MAX_SIZE = 100 * 1000 * 1000    # default ShipSpec.max_size (bytes), tfrun --ship-max-size
MAX_SIZE_LIMIT = 100 * 1000 * MAX_SIZE   # the largest max_size: 100 GB (core.inputs)
WARN_SIZE = 10 * 1000 * 1000    # a bundle over this is worth a warning
TOP = "project"                 # the archive's one top directory: the task's working directory
COMPRESSION = 6                 # gzip level: most of level 9's ratio at twice its speed
# A file whose first SAMPLE bytes do not shrink below STORED_RATIO at level 1
# (model weights, data, archives, images) is stored, not deflated: deflating
# random bytes runs at ~25 MB/s and saves nothing.
SAMPLE = 8 * 1024
STORED_RATIO = 0.9
# What a task imports of tfmesos: the task side and the protocol it speaks.
TASK_SIDE_PACKAGES = ("task", "protocol")
TASK_SIDE_MODULES = ("keras.py",)   # tfmesos.keras.MetricsCallback, for the user's command
# The user's command finds tfmesos.log_metrics and tfmesos.keras there too.
TASK_SIDE_INIT = ('"""tfmesos\' task side, shipped to the task by tfrun --ship: '
                  '``python -m tfmesos.task``; ``tfmesos.log_metrics`` and '
                  '``tfmesos.keras`` for the command."""\n\n'
                  'import importlib\n\n__version__ = %r\n\n\n'
                  'def __getattr__(name):\n'
                  '    if name in ("log_metrics", "MetricsWarning"):\n'
                  '        return getattr(importlib.import_module(".task.user_metrics", __name__), '
                  'name)\n'
                  '    if name == "keras":\n'
                  '        return importlib.import_module(".keras", __name__)\n'
                  '    raise AttributeError("module %%r has no attribute %%r" %% (__name__, '
                  'name))\n')


ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")
URL_SCHEMES = ("http://", "https://", "hdfs://")
_URL_UNSAFE = re.compile(r"[\x00-\x20\x7f]")   # control characters and spaces


@dataclasses.dataclass(frozen=True)
class ShipSpec:
    """What a run ships (``tfrun --ship``, ``cluster(ship=...)``):
    ``directory`` (None: no code, only the task side and ``python_env``),
    ``exclude`` patterns, ``max_size`` in bytes (None: no limit),
    ``python_env``: a conda-pack/venv-pack archive, a local file or an
    ``http(s)://`` / ``hdfs://`` URL, whose ``bin/python3`` runs the tasks;
    ``follow_links``: pack what links out of the directory point to (else
    they are refused), ``allow_secrets``: pack likely secrets (else they are
    refused); ``contents``; ``extra_files``: ``(name, path)`` pairs of
    files each task also fetches into its sandbox as ``name``, not
    extracted (``tfmesos.run``'s function). ``packed``: what a run that is
    taken over shipped (``as_packed``): its files are served as they were
    packed, so none of its paths is looked at again."""

    directory: Optional[str] = "."
    exclude: tuple[str, ...] = ()
    max_size: Optional[int] = MAX_SIZE
    python_env: Optional[str] = None
    follow_links: bool = False
    allow_secrets: bool = False
    extra_files: tuple[tuple[str, str], ...] = ()
    packed: bool = False

    @classmethod
    def as_packed(cls, **fields) -> "ShipSpec":
        """The ShipSpec of a run whose files were packed already (a takeover)."""
        return cls(**dict(fields, packed=True))

    def __post_init__(self):
        object.__setattr__(self, "packed", bool(self.packed))
        if self.packed:
            object.__setattr__(self, "exclude", tuple(self.exclude))
            object.__setattr__(self, "extra_files", tuple(
                (str(name), str(path)) for name, path in self.extra_files))
            return
        extra = tuple((str(name), os.path.abspath(path)) for name, path in self.extra_files)
        for name, path in extra:
            if not name or name != os.path.basename(name) or name.startswith(".") \
                    or _URL_UNSAFE.search(name) or not os.path.isfile(path):
                raise SpecError("extra file %r (%s): a plain file name and an existing file, "
                                "please" % (name, path))
        object.__setattr__(self, "extra_files", extra)
        if self.directory is not None:
            if not os.path.isdir(self.directory):
                raise SpecError.about("{ship.directory=%s}: no such directory", self.directory)
            object.__setattr__(self, "directory", os.path.abspath(self.directory))
        object.__setattr__(self, "follow_links", bool(self.follow_links))
        object.__setattr__(self, "allow_secrets", bool(self.allow_secrets))
        if isinstance(self.exclude, str):
            object.__setattr__(self, "exclude", (self.exclude,))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        if self.max_size is not None and (isinstance(self.max_size, bool)
                                          or not isinstance(self.max_size, (int, float))
                                          or not math.isfinite(self.max_size)
                                          or not 0 < self.max_size <= MAX_SIZE_LIMIT):
            raise SpecError.about("{ship.max_size} must be a positive number of MB, at most %d, "
                                  "got %r bytes", MAX_SIZE_LIMIT // (1000 * 1000), self.max_size)
        env = self.python_env
        if env is not None:
            if not env.lower().endswith(ARCHIVE_SUFFIXES):
                raise SpecError.about("{ship.python_env=%s}: the Mesos fetcher extracts only %s "
                                      "archives: make one with conda-pack or venv-pack", env,
                                      ", ".join(ARCHIVE_SUFFIXES))
            if "://" in env:
                if not env.lower().startswith(URL_SCHEMES):
                    raise SpecError.about("{ship.python_env=%s}: give a local file or an "
                                          "http(s):// or hdfs:// URL", env)
                why = url_error(env)
                if why:
                    raise SpecError.about("{ship.python_env=%r}: %s", env, why)
            elif not os.path.isfile(env):
                raise SpecError.about("{ship.python_env=%s}: no such file", env)
            else:
                object.__setattr__(self, "python_env", os.path.abspath(env))


def url_error(url):
    """Why the fetcher could not fetch ``url`` as it is written (a space or
    a control character, no host, a port that is not one), or None."""
    if _URL_UNSAFE.search(url):
        return "a URL cannot hold spaces or control characters: write a space as %20"
    try:
        parts = urllib.parse.urlsplit(url)
        host, _ = parts.hostname, parts.port   # .port: ValueError for a port that is not one
    except ValueError as exc:
        return "not a URL (%s)" % exc
    return None if host else "the URL names no host"


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


# -- what goes in ---------------------------------------------------------------


def list_files(directory, exclude=(), **decisions):
    """Sorted relative paths (``/``-separated) of what is packed from
    ``directory`` (``contents.select``, with its keyword ``decisions``)."""
    return [member.path for member in select(directory, exclude, **decisions)]


def _sizes(members):
    sizes = {}
    for member in members:
        try:
            sizes[member.path] = os.lstat(member.source).st_size
        except OSError as exc:
            raise ShipError.about("{ship.directory}: cannot read %s: %s", member.path,
                                  exc.strerror) from None
    return sizes


def check_size(sizes, max_size, directory):
    """ShipError naming the five biggest files when the total is over ``max_size``."""
    total = sum(sizes.values())
    if max_size is not None and total > max_size:
        biggest = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))[:5]
        raise ShipError.about("{ship.directory=%s}: %s is over {ship.max_size=%s}; biggest: %s "
                              "(drop them with {ship.exclude} or .gitignore, or read large "
                              "data from shared storage)", tilde(directory), human_size(total),
                              human_size(max_size),
                              ", ".join("%s (%s)" % (p, human_size(s)) for p, s in biggest))
    return total


# -- packing --------------------------------------------------------------------


def pack(directory, out_dir, exclude=(), max_size=MAX_SIZE, follow_links=False,
         allow_secrets=False, leave_out=()):
    """Pack ``directory`` into ``out_dir``; the ``Bundle``. Members are
    ``project/<path>``; ``leave_out``: directories never packed (the run's
    own); the rest as ``contents.select``."""
    directory = os.path.abspath(directory)
    members = select(directory, exclude, leave_out=leave_out, follow_links=follow_links,
                     allow_secrets=allow_secrets)
    sizes = _sizes(members)
    total = check_size(sizes, max_size, directory)
    partial = os.path.join(out_dir, "bundle.partial")
    digest = hashlib.sha256()
    with open(partial, "wb") as raw:
        zipped = GzipMembers(_HashingWriter(raw, digest))
        try:
            with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
                tar.addfile(_directory_entry(TOP, os.stat(directory)))
                for member in members:
                    _add(tar, zipped, member)
        finally:
            zipped.close()
    sha = digest.hexdigest()
    name = "tfmesos-bundle-%s.tar.gz" % sha[:16]
    final = os.path.join(out_dir, name)
    os.replace(partial, final)
    return Bundle(final, name, sha, len(members), total, directory)


class GzipMembers(io.RawIOBase):
    """A gzip file of several members (RFC 1952: a gzip file is a series of
    members; gzip, GNU tar, and Python's gzip and tarfile read them as one
    stream), deflated on ``workers`` threads at once (zlib lets go of the
    interpreter lock) and written in order. A member ends every ``MEMBER``
    bytes and wherever ``level(n)`` changes the level (0: stored), so the
    archive depends on its bytes and levels alone: reproducible, as is
    the header (no name, no time stamp)."""

    HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    MEMBER = 4 << 20

    def __init__(self, raw, level=COMPRESSION, workers=None):
        self.raw = raw
        self._level = level
        self._buffer = bytearray()
        self._written = 0
        self._workers = workers or min(8, os.cpu_count() or 1)
        self._pool = concurrent.futures.ThreadPoolExecutor(self._workers)
        self._pending: collections.deque = collections.deque()

    def writable(self):
        return True

    def tell(self):   # tarfile asks where it starts
        return self._written

    def level(self, level):
        if level != self._level:
            self._cut()
            self._level = level

    def write(self, data):
        self._buffer += data
        self._written += len(data)
        if len(self._buffer) >= self.MEMBER:
            self._cut()
        return len(data)

    def _cut(self):
        if self._buffer:
            data, self._buffer = bytes(self._buffer), bytearray()
            self._pending.append(self._pool.submit(_gzip_member, data, self._level))
            while len(self._pending) > 2 * self._workers:   # bounds what waits in memory
                self.raw.write(self._pending.popleft().result())

    def close(self):
        if not self.closed:
            try:
                self._cut()
                while self._pending:
                    self.raw.write(self._pending.popleft().result())
            finally:
                self._pool.shutdown(cancel_futures=True)
        super().close()


def _gzip_member(data, level):
    deflate = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return b"".join((GzipMembers.HEADER, deflate.compress(data), deflate.flush(),
                     struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)))


def compresses(handle):
    """Whether the file open in ``handle`` is worth deflating (its first
    ``SAMPLE`` bytes shrink at level 1); the handle is back at its start."""
    sample = handle.read(SAMPLE)
    handle.seek(0)
    return len(sample) < 1024 or len(zlib.compress(sample, 1)) < len(sample) * STORED_RATIO


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


def _add(tar, zipped, member):
    """``member``: a regular file (its content: deflated, or stored when it
    does not compress) or a link (kept as one)."""
    try:
        info = _normalized(tar.gettarinfo(member.source, arcname="%s/%s" % (TOP, member.path)))
        if info.isreg():
            with open(member.source, "rb") as handle:
                zipped.level(COMPRESSION if compresses(handle) else 0)
                tar.addfile(info, handle)
        else:
            zipped.level(COMPRESSION)
            tar.addfile(info)
    except OSError as exc:
        raise ShipError.about("{ship.directory}: cannot read %s: %s", member.path,
                              exc.strerror or exc) from None


def file_sha256(path):
    """The sha256 of the file at ``path``, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pack_task_side(out_dir, package_dir=None):
    """The task side of tfmesos (``tfmesos/task/``, ``tfmesos/protocol/``,
    ``tfmesos/keras.py`` and a minimal ``tfmesos/__init__.py``; stdlib
    only) as a zip in
    ``out_dir``: a ``Bundle`` whose ``path`` goes on ``PYTHONPATH``."""
    from .. import __version__
    package_dir = package_dir or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    members = [("tfmesos/__init__.py", (TASK_SIDE_INIT % __version__).encode())]
    members += [("tfmesos/%s" % name, _read(os.path.join(package_dir, name)))
                for name in TASK_SIDE_MODULES]
    for package in TASK_SIDE_PACKAGES:
        folder = os.path.join(package_dir, package)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                members.append(("tfmesos/%s/%s" % (package, name),
                                _read(os.path.join(folder, name))))
    path, name, sha, _ = write_zip(members, out_dir, "tfmesos-task")
    return Bundle(path, name, sha, len(members), sum(len(d) for _, d in members), package_dir)


def write_zip(members, out_dir, prefix):
    """``members`` ((name, bytes), ...) as a reproducible zip (fixed dates and
    modes) named ``PREFIX-<sha256[:16]>.zip`` in ``out_dir``: (path, name,
    sha256, size)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members:
            entry = zipfile.ZipInfo(member, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = (stat.S_IFREG | 0o644) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    data = buffer.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    name = "%s-%s.zip" % (prefix, sha[:16])
    path = os.path.join(out_dir, name)
    with open(path, "wb") as handle:
        handle.write(data)
    return path, name, sha, len(data)


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


__all__ = ["Bundle", "ShipError", "ShipSpec", "list_files", "pack", "pack_task_side", "file_sha256",
           "GzipMembers",
           "check_size", "human_size", "MAX_SIZE", "WARN_SIZE", "TOP"]
