"""The user's shipped directory (``tfrun --ship``), checked before anything
of it runs.

The Mesos fetcher put the bundle (a ``.tar.gz``) in the sandbox and
extracted it there (``CommandInfo.URI`` with ``extract: true``, not cached,
so the archive stays next to what it holds: apache/mesos docs/fetcher.md).
The scheduler gave its name and sha256 in the task's environment:
``TFMESOS_BUNDLE``, ``TFMESOS_BUNDLE_SHA256``, ``TFMESOS_BUNDLE_DIR`` (the
extracted tree, relative to the sandbox). ``enter_bundle`` checks the sha256
and makes the tree the working directory; a mismatch is a ``TaskError``.
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


def enter_bundle(environ):
    """Check the shipped bundle and ``chdir`` into its tree; its path, or
    None when the run ships nothing. TaskError when it is missing or its
    sha256 is not the one the scheduler shipped."""
    name = environ.get(task_env.BUNDLE)
    if not name:
        return None
    sandbox = sandbox_directory(environ)
    archive = os.path.join(sandbox, name)
    expected = environ.get(task_env.BUNDLE_SHA256, "")
    try:
        actual = sha256_of(archive)
    except OSError as exc:
        raise TaskError("the shipped bundle %s is not in the sandbox %s (%s): the agent's "
                        "fetcher did not put it there" % (name, sandbox, exc.strerror or exc)) \
            from None
    if actual != expected:
        raise TaskError("the shipped bundle %s has sha256 %s, but tfrun shipped %s: it changed "
                        "on the way (a proxy, a cache, a truncated download); the command was "
                        "not started" % (name, actual, expected or "(none given)"))
    tree = os.path.join(sandbox, environ.get(task_env.BUNDLE_DIR) or "")
    try:
        os.chdir(tree)
    except OSError as exc:
        raise TaskError("the shipped bundle was not extracted into %s (%s): the agent's "
                        "fetcher must extract .tar.gz archives" % (tree, exc.strerror or exc)) \
            from None
    return tree
