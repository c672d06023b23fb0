"""Packing what ``--ship`` sends to every task: the user's directory as one
content-addressed ``.tar`` (``pack``), and the task side of tfmesos as a
zip that goes on the task's ``PYTHONPATH`` (``pack_task_side``).

What is packed from a directory, and what is refused before anything is
(links out of it, likely secrets), is ``contents.select``'s to decide.

Why a plain tar, not compressed (issue 33, item 4): an agent downloads the
bundle once (its fetcher cache) but every task on it checks and extracts
its own copy, so what an archive costs to read back counts once per task
and what it saves on the wire once per agent. Inflating is the dearest
part of a task's start: ``gzip -d`` (GNU tar's ``-z``) runs at ~150 MB/s of
output here even where the gzip members are stored (its CRC and copies:
0.33 s for 50 MB of stored bytes), against ~1 GB/s for a plain ``tar -x``;
a 100 MB bundle of half text, half random bytes took 0.67 s a task to
extract as a ``.tar.gz`` of stored and deflated members (and as well as a
zip of such members, through ``unzip``), where its 100 MB ``.tar`` takes
0.1 s to extract and 0.05 s more to hash. A bundle's big files are weights
and data, which do not compress; the text that does is small; and a LAN
carries the difference once per agent (100 MB: 0.1 s at 10 Gbit/s).

Archives are reproducible: members sorted, owner root, modes and times as
the files have them; so the same files give the same sha256, the name the
archive is served under.
"""

import dataclasses
import functools
import hashlib
import io
import math
import os
import queue
import re
import tarfile
import threading
import urllib.parse
from typing import Optional

from ..exceptions import SpecError
from ..terminal_text import printable
from .compiled_zip import pack_compiled
from .contents import (
    MEMBER_AT_LEAST,
    ShipError,
    human_size,
    left_out,
    not_a_directory,
    select,
    tilde,
    unreadable,
)

MAX_SIZE = 100 * 1000 * 1000    # default ShipSpec.max_size (bytes), tfrun --ship-max-size
MAX_SIZE_LIMIT = 1000 * MAX_SIZE   # the largest max_size: 100 GB (core.inputs.MAX_SHIP_MB)
WARN_SIZE = 10 * 1000 * 1000    # an archive over this is worth a warning
# An archive this much bigger than its files' content says so (its headers).
# Bytes of a member's pax records beside its path and link target: a size
# past 8 GB, its length and key (mtimes are whole seconds: no record).
PAX_RECORDS = 256
SAID_OVER = (2, 1000 * 1000)    # at least twice the content, and a MB more
TOP = "project"                 # the archive's one top directory: the task's working directory
COPY_BUFFER = 1 << 20           # bytes tarfile copies a member's content by (its default: 16 kB)
# What a task imports of tfmesos: the task side and the protocol it speaks.
TASK_SIDE_PACKAGES = ("task", "protocol")
TASK_SIDE_CACHE = "task-side"   # its cache: $XDG_CACHE_HOME/tfmesos/task-side
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
                  '    if name in ("run", "submit", "cluster", "Cluster"):\n'
                  '        raise AttributeError("tfmesos.%%s is not in a task\'s tfmesos (its task '
                  'side): a run starts from the program that called tfmesos.run or tfrun, not '
                  'from inside one of its tasks" %% name)\n'
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
            if not isinstance(self.directory, (str, os.PathLike)):
                raise SpecError.about("{ship.directory} is a directory's path, got %s",
                                      printable(repr(self.directory)))
            if not os.path.isdir(self.directory):
                raise SpecError.about("{ship.directory=%s}: %s", printable(self.directory),
                                      not_a_directory(self.directory))
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
                                      "archives: make one with conda-pack or venv-pack",
                                      printable(env), ", ".join(ARCHIVE_SUFFIXES))
            if "://" in env:
                if not env.lower().startswith(URL_SCHEMES):
                    raise SpecError.about("{ship.python_env=%s}: give a local file or an "
                                          "http(s):// or hdfs:// URL", printable(env))
                why = url_error(env)
                if why:
                    raise SpecError.about("{ship.python_env=%r}: %s", env, why)
            elif not os.path.isfile(env):
                raise SpecError.about("{ship.python_env=%s}: no such file", printable(env))
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
    under, its ``sha256``; ``files`` and ``size`` (bytes) of what went in
    (``archive_size``: the archive's bytes, which every task fetches)."""

    path: str
    name: str
    sha256: str
    files: int
    size: int
    source: str = ""
    others: tuple = ()    # left out: neither files, links nor directories

    @functools.cached_property
    def archive_size(self):   # read once: the summary, the warning, run.json ask
        return os.path.getsize(self.path)

    def summary(self):
        """``shipped 37 files, 1.2 MB from ~/proj``; ``shipped 100000 files,
        100.0 kB (a 102.4 MB archive) from ~/proj`` where the archive is
        much bigger than its content (``SAID_OVER``)."""
        archive = self.archive_size
        return "shipped %d file%s, %s%s from %s%s" % (
            self.files, "" if self.files == 1 else "s", human_size(self.size),
            " (a %s archive)" % human_size(archive) if _much_bigger(archive, self.size) else "",
            printable(tilde(self.source)), left_out(self.others))

    def record(self):
        """What run.json keeps of it."""
        return {"source": self.source, "files": self.files, "bytes": self.size,
                "archive_bytes": self.archive_size, "sha256": self.sha256, "name": self.name}


# -- what goes in ---------------------------------------------------------------


def list_files(directory, exclude=(), **decisions):
    """Sorted relative paths (``/``-separated) of what is packed from
    ``directory`` (``contents.select``, with its keyword ``decisions``)."""
    return [member.path for member in select(directory, exclude, **decisions)]


def _much_bigger(archive, content, more=SAID_OVER[1]):
    return archive >= SAID_OVER[0] * content and archive - content >= more


def check_size(sizes, max_size, directory, archive=None):
    """The files' total size (``sizes``: path -> bytes); ShipError naming
    the five biggest files when ``archive``, the archive's size (None: the
    total), is over ``max_size``."""
    total = sum(sizes.values())
    archive = total if archive is None else archive
    if max_size is not None and archive > max_size:
        biggest = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))[:5]
        why = ""
        if _much_bigger(archive, total, more=0):   # what the refusal is about
            why = " (the archive of %d files of %s in all: each takes at least %s in it)" % (
                len(sizes), human_size(total), human_size(MEMBER_AT_LEAST))
        raise ShipError.about("{ship.directory=%s}: %s%s is over {ship.max_size=%s}; biggest: "
                              "%s (drop them with {ship.exclude} or .gitignore, or read large "
                              "data from shared storage)", printable(tilde(directory)),
                              human_size(archive), why, human_size(max_size),
                              ", ".join("%s (%s)" % (printable(p), human_size(s))
                                        for p, s in biggest))
    return total


def archive_size(infos, top):
    """The bytes of the archive ``pack`` writes of ``top`` (its top
    directory's TarInfo) and ``infos`` (its members' TarInfos), as tarfile
    lays it out: each member's header blocks (pax headers included), its
    content rounded up to whole blocks, two zero blocks and zeros to a
    whole record."""
    size = 0
    for info in (top,) + tuple(infos):
        size += len(info.tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape"))
        if info.isreg():
            size += _blocks(info.size)
    return _records(size + 2 * tarfile.BLOCKSIZE)


def archive_bound(infos, top):
    """At least ``archive_size(infos, top)``, without building a header:
    each member's header and a pax header (its records: the path and the
    link's target, each twice over, and ``PAX_RECORDS`` for the numbers)
    rounded up to blocks. Building each header took 9 ms of the 65 ms that
    packing this checkout takes."""
    size = 0
    for info in (top,) + tuple(infos):
        names = len(info.name.encode("utf-8", "surrogateescape")) \
            + len(info.linkname.encode("utf-8", "surrogateescape"))
        size += 2 * tarfile.BLOCKSIZE + _blocks(PAX_RECORDS + 2 * names)
        if info.isreg():
            size += _blocks(info.size)
    return _records(size + 2 * tarfile.BLOCKSIZE)


def _blocks(size):
    return -(-size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE


def _records(size):
    return -(-size // tarfile.RECORDSIZE) * tarfile.RECORDSIZE


# -- packing --------------------------------------------------------------------


def pack(directory, out_dir, exclude=(), max_size=MAX_SIZE, follow_links=False,
         allow_secrets=False, leave_out=()):
    """Pack ``directory`` into ``out_dir``; the ``Bundle``. Members are
    ``project/<path>``; ``leave_out``: directories never packed (the run's
    own); the rest as ``contents.select``."""
    directory = os.path.abspath(directory)
    others: list = []
    members = select(directory, exclude, leave_out=leave_out, follow_links=follow_links,
                     allow_secrets=allow_secrets, max_size=max_size, others=others)
    infos = _tar_infos(members)
    top = _directory_entry(TOP, os.stat(directory))
    sizes = {member.path: info.size for member, info in zip(members, infos)}
    # The exact size (every header built once more) only near the limit.
    fits = max_size is None or archive_bound(infos, top) <= max_size
    total = check_size(sizes, max_size, directory, None if fits else archive_size(infos, top))
    partial = os.path.join(out_dir, "bundle.partial")
    digest = hashlib.sha256()
    with open(partial, "wb") as raw, _HashingWriter(raw, digest) as hashing:
        with tarfile.TarFile(fileobj=hashing, mode="w", format=tarfile.PAX_FORMAT,
                             copybufsize=COPY_BUFFER) as tar:
            tar.addfile(top)
            for member, info in zip(members, infos):
                _add(tar, member, info)
    sha = digest.hexdigest()
    name = "tfmesos-bundle-%s.tar" % sha[:16]
    final = os.path.join(out_dir, name)
    os.replace(partial, final)
    return Bundle(final, name, sha, len(members), total, directory, tuple(others))


class ArchiveWriteError(OSError):
    """Writing the archive failed (a full disk): the place's fault, not a
    shipped file's."""


class _HashingWriter(io.RawIOBase):
    """Writes to ``raw`` and hashes what it writes into ``digest`` on a
    thread of its own (hashlib lets go of the interpreter lock for all but
    tiny buffers), so that hashing a big bundle overlaps reading its files
    and writing the archive: 100 MB packs in ~0.15 s, not ~0.25 s. At most
    ``QUEUED`` chunks wait to be hashed; ``close`` waits for the last."""

    QUEUED = 16

    def __init__(self, raw, digest):
        self.raw, self.digest = raw, digest
        self._written = 0
        self._chunks: queue.Queue = queue.Queue(self.QUEUED)
        self._hasher = threading.Thread(target=self._hash, name="bundle-sha256", daemon=True)
        self._hasher.start()

    def _hash(self):
        while True:
            chunk = self._chunks.get()
            if chunk is None:
                return
            self.digest.update(chunk)

    def writable(self):
        return True

    def tell(self):   # tarfile asks where it starts
        return self._written

    def write(self, data):
        data = bytes(data)   # the caller may reuse its buffer; a bytes is kept as it is
        self._chunks.put(data)
        self._written += len(data)
        try:
            return self.raw.write(data)
        except OSError as exc:
            raise ArchiveWriteError(exc.errno, exc.strerror) from exc

    def close(self):
        if not self.closed:
            self._chunks.put(None)
            self._hasher.join()
        super().close()


def _normalized(info):
    """``info`` as the archive holds it: no owner, and its mtime in whole
    seconds (a fraction of one takes a pax header of its own: a small file
    took 2 kB of the archive instead of 1)."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = int(info.mtime)
    return info


def _directory_entry(name, stat):
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.mtime = int(stat.st_mtime)
    return _normalized(info)


def _tar_infos(members):
    """The TarInfo each of ``members`` (regular files and links) is packed
    under: a file a member already is a hard link to is packed as one."""
    with tarfile.TarFile(fileobj=io.BytesIO(), mode="w", format=tarfile.PAX_FORMAT) as tar:
        infos = []
        for member in members:
            try:
                infos.append(_normalized(tar.gettarinfo(
                    member.source, arcname="%s/%s" % (TOP, member.path))))
            except OSError as exc:
                raise unreadable(member.path, exc) from None
    return infos


def _add(tar, member, info):
    """``member``: a regular file or a link (kept as one), packed as ``info``;
    a file whose size or time changed since it was listed is refused (it
    was being written: cut off, or short of its end, in every task)."""
    try:
        if info.isreg():
            with open(member.source, "rb") as handle:
                try:
                    tar.addfile(info, handle)
                except OSError:
                    if _changed(handle, info):
                        raise _changed_error(member) from None
                    raise
                if _changed(handle, info):
                    raise _changed_error(member)
        else:
            tar.addfile(info)
    except ArchiveWriteError:
        raise
    except OSError as exc:
        raise unreadable(member.path, exc) from None


def _changed(handle, info):
    found = os.fstat(handle.fileno())
    return found.st_size != info.size or int(found.st_mtime) != info.mtime


def _changed_error(member):
    return ShipError.about("{ship.directory}: %s changed while it was packed (something "
                           "writes it): ship it once it is written, or leave it out "
                           "({ship.exclude})", printable(member.path))


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
    only) as a zip in ``out_dir``, each module with its bytecode
    (``compiled_zip``; kept in ``$XDG_CACHE_HOME/tfmesos/task-side``): a
    ``Bundle`` whose ``path`` goes on ``PYTHONPATH``."""
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
    members.sort()
    path, name, sha = pack_compiled(members, out_dir, "tfmesos-task", TASK_SIDE_CACHE)
    return Bundle(path, name, sha, len(members), sum(len(d) for _, d in members), package_dir)


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


__all__ = ["Bundle", "ShipError", "ShipSpec", "list_files", "pack", "pack_task_side", "file_sha256",
           "check_size", "human_size", "MAX_SIZE", "WARN_SIZE", "TOP"]
