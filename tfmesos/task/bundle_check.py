"""The user's shipped directory (``tfrun --ship``), checked before anything
of it runs.

The Mesos fetcher extracted the bundle (a ``.tar.gz``) into the sandbox
(``CommandInfo.URI`` with ``extract: true`` and ``cache: true``: an agent
downloads it once for all its tasks and extracts it from its fetcher cache,
so the archive itself is not in the sandbox: apache/mesos
src/launcher/fetcher.cpp, ``fetchFromCache``). The scheduler gave its name,
the directory it unpacks to and the sha256 of that tree in the task's
environment: ``TFMESOS_BUNDLE``, ``TFMESOS_BUNDLE_DIR`` (relative to the
sandbox), ``TFMESOS_BUNDLE_TREE_SHA256`` (``TreeDigest``: every file's
path and content, every link's path and target). ``enter_bundle`` checks
it and makes the tree the working directory; a mismatch is a
``TaskError``.
"""

import hashlib
import os

from ..protocol import task_env
from .connection import TaskError


def sandbox_directory(environ):
    """The sandbox: ``$MESOS_SANDBOX`` (inside containers too), else the
    working directory Mesos started the task in."""
    return environ.get("MESOS_SANDBOX") or os.getcwd()


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class TreeDigest:
    """The sha256 of a tree of files and links, the same whether it is
    computed as the bundle is packed or from the tree a task finds: one
    entry per file, sorted by path (``/``-separated, relative to the tree):
    ``f LEN:PATH LEN:sha256(content)`` or ``l LEN:PATH LEN:target``, each
    length in bytes (a name may hold any byte but NUL and ``/``, a newline
    too: the lengths keep two trees from spelling the same entries).
    Directories are not entries (a packed tree has none of its own);
    anything else found in a tree (a FIFO, a device) is an entry of its own
    and never checks."""

    def __init__(self):
        self._entries: list[tuple[str, str, str]] = []

    def add(self, kind, path, value):
        self._entries.append((path, kind, value))

    def hexdigest(self):
        digest = hashlib.sha256()
        for path, kind, value in sorted(self._entries):
            name = path.encode("utf-8", "surrogateescape")
            data = value.encode("utf-8", "surrogateescape")
            digest.update(b"%s %d:%s %d:%s\n" % (kind.encode(), len(name), name, len(data), data))
        return digest.hexdigest()


def tree_sha256(root):
    """``TreeDigest`` of what is under the directory ``root``."""
    tree = TreeDigest()
    pending = [("", root)]
    while pending:
        prefix, directory = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                path = prefix + entry.name
                if entry.is_symlink():
                    tree.add("l", path, os.readlink(entry.path))
                elif entry.is_dir(follow_symlinks=False):
                    pending.append((path + "/", entry.path))
                elif entry.is_file(follow_symlinks=False):
                    tree.add("f", path, sha256_of(entry.path))
                else:
                    tree.add("o", path, "")
    return tree.hexdigest()


def enter_bundle(environ):
    """Check the shipped bundle and ``chdir`` into its tree; its path, or
    None when the run ships nothing. TaskError when it is missing or its
    sha256 is not the one the scheduler shipped."""
    name = environ.get(task_env.BUNDLE)
    if not name:
        return None
    sandbox = sandbox_directory(environ)
    tree = os.path.join(sandbox, environ.get(task_env.BUNDLE_DIR) or "")
    expected = environ.get(task_env.BUNDLE_TREE_SHA256, "")
    try:
        actual = tree_sha256(tree)
    except OSError as exc:
        raise TaskError("the shipped bundle %s was not extracted into %s (%s): the agent's "
                        "fetcher must extract .tar.gz archives" % (name, tree, exc.strerror or exc)) \
            from None
    if actual != expected:
        raise TaskError("the shipped bundle %s was extracted into files whose sha256 is %s, but "
                        "tfrun shipped %s: it changed on the way (a proxy, a cache, a truncated "
                        "download); the command was not started" % (name, actual,
                                                                    expected or "(none given)"))
    try:
        os.chdir(tree)
    except OSError as exc:
        raise TaskError("cannot enter the shipped bundle's tree %s (%s)"
                        % (tree, exc.strerror or exc)) from None
    return tree
