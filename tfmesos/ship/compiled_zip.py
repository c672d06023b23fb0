"""A zip of Python modules that a task imports as it is (``zipimport``),
each ``NAME.py`` with its bytecode beside it as ``NAME.pyc`` (where
zipimport looks: it reads no ``__pycache__``), made once per code and
Python and kept in the user's cache: the scheduler side of ``tfrun
--detach`` (``scheduler_side``) and the task side of ``--ship``
(``bundle.pack_task_side``).

Without the bytecode every scheduler task compiles ~2 MB of source as it
starts (0.25-0.4 s) and every shipped task the task side's 150 KB (about
45 ms of CPU a task, half of its start). An agent whose Python is another
finds a magic number not its own, ignores the ``.pyc`` and compiles the
source beside it, as before.

The bytecode is PEP 552's hash-based and unchecked (flags ``0b01``): its
header carries the source's hash, but the import does not read the
source to compare. What vouches for both is the zip's sha256, which the
task's command checks before anything of it runs (``fetch_check``); a
checked ``.pyc`` would only have zipimport read and inflate each source
once more (about 15 ms of a scheduler's imports). The source stays
beside it for tracebacks.

Compiling takes longer than what it saves once (and marshal's output is
not the same in every process, so neither would the zip's name be), so
the zip is kept in ``$XDG_CACHE_HOME/tfmesos/KIND`` under the hash of its
sources, this Python and the layout, and a pack of the same code copies it
from there; only from a directory and a file of this user that nobody else
can write: a zip planted in a shared cache would run as the run's
scheduler or tasks.
"""

import hashlib
import importlib.util
import logging
import marshal
import os
import sys
import tempfile
import time

from .reproducible_zip import write_zip

log = logging.getLogger(__name__)

LAYOUT = b"unchecked pyc beside its source\n"   # in the cache key: another layout is not reused
CACHE_KEPT = 4   # zips kept in a cache: one per tfmesos checkout or version in use
UNCHECKED_HASH = 0b01   # PEP 552's flags: hash-based, not checked against the source


def pack_compiled(sources, out_dir, prefix, kind):
    """``sources`` (sorted ``[(member, bytes)]``, ``.py`` members and any
    other file) and the bytecode of each ``.py`` as ``PREFIX-<sha256[:16]>.zip``
    in ``out_dir``, from the cache ``KIND`` when it has it: (path, name,
    sha256)."""
    key = cache_key(sources)
    cached = _from_cache(kind, key)
    if cached is not None:
        sha = hashlib.sha256(cached).hexdigest()
        name = "%s-%s.zip" % (prefix, sha[:16])
        path = os.path.join(out_dir, name)
        with open(path, "wb") as handle:
            handle.write(cached)
        return path, name, sha
    members = sorted(sources + [pyc for member in sources for pyc in bytecode(*member)])
    path, name, sha, _ = write_zip(members, out_dir, prefix)
    _to_cache(kind, key, path)
    return path, name, sha


def bytecode(member, source):
    """``[(member's .pyc, bytes)]``: ``source`` compiled for this Python,
    as ``py_compile``'s ``UNCHECKED_HASH`` writes it (magic, flags 0b01,
    the source's hash, the code), beside the source; none for a member
    that is no ``.py`` or a source this Python cannot compile."""
    if not member.endswith(".py"):
        return []
    try:
        # optimize=0: what a tfrun under -O would leave out (asserts,
        # docstrings) stays, whatever the interpreter that packs.
        code = compile(source, member, "exec", dont_inherit=True, optimize=0)
    except (SyntaxError, ValueError):
        return []
    header = importlib.util.MAGIC_NUMBER + UNCHECKED_HASH.to_bytes(4, "little") + \
        importlib.util.source_hash(source)
    return [(member[:-3] + ".pyc", header + marshal.dumps(code))]


def cache_key(sources):
    digest = hashlib.sha256()
    digest.update(("%s %s\n" % (sys.implementation.cache_tag, sys.version)).encode())
    digest.update(importlib.util.MAGIC_NUMBER)
    digest.update(LAYOUT)
    for member, data in sources:
        digest.update(b"%d %s %d\n" % (len(member), member.encode(), len(data)))
        digest.update(data)
    return digest.hexdigest()


def cache_directory(kind, environ=None):
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tfmesos", kind)


def _from_cache(kind, key):
    """The cached zip of ``key``, or None; only one of this user's that
    nobody else can write (module docstring)."""
    directory = cache_directory(kind)
    path = os.path.join(directory, key + ".zip")
    try:
        with open(path, "rb") as handle:
            for what, status in (("directory", os.stat(directory)),
                                 ("file", os.fstat(handle.fileno()))):
                if not _own(status):
                    log.warning("tfrun: the %s %s is not only yours: not used",
                                what, directory if what == "directory" else path)
                    return None
            data = handle.read()
        os.utime(path)   # the newest are kept
    except OSError:
        return None
    return data


def _own(status):
    return status.st_uid == os.geteuid() and not status.st_mode & 0o022


STALE = 3600.0   # seconds after which a temporary file is what a killed pack left


def _to_cache(kind, key, path):
    """Keep the zip at ``path`` as the cache's ``KEY.zip`` (written whole,
    under a name of its own, then renamed: never half a zip, whoever packs
    at once), and only the ``CACHE_KEPT`` newest; a cache that cannot be
    written costs the next pack a compile, nothing else. The file is made
    0600 whatever the umask: one others could write is never used."""
    directory = cache_directory(kind)
    temporary = None
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".%s." % key, suffix=".tmp", dir=directory)
        with open(path, "rb") as source, os.fdopen(fd, "wb") as handle:
            handle.write(source.read())
        os.replace(temporary, os.path.join(directory, key + ".zip"))
        temporary = None
        entries = list(os.scandir(directory))
        kept = sorted((entry for entry in entries if entry.name.endswith(".zip")),
                      key=lambda entry: entry.stat().st_mtime, reverse=True)
        now = time.time()
        for entry in kept[CACHE_KEPT:] + [entry for entry in entries
                                          if entry.name.endswith(".tmp")
                                          and now - entry.stat().st_mtime > STALE]:
            os.unlink(entry.path)
    except OSError as exc:
        log.debug("%s not cached in %s: %s", kind, directory, exc)
    finally:
        if temporary is not None:
            try:
                os.unlink(temporary)
            except OSError:
                pass


__all__ = ["pack_compiled", "bytecode", "cache_directory", "cache_key", "LAYOUT",
           "UNCHECKED_HASH"]
