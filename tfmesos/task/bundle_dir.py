"""The user's shipped directory (``tfrun --ship``): the task's working
directory.

The task's command checked the bundle (a ``.tar``) against the sha256
the scheduler wrote into it and extracted it into the sandbox before this
interpreter started (``tfmesos.ship.fetch_check``: the check is not
fetched, and neither is it here). The scheduler names it, and the
directory it unpacks to (relative to the sandbox), in the task's
environment: ``TFMESOS_BUNDLE``, ``TFMESOS_BUNDLE_DIR``. ``enter_bundle``
makes that tree the working directory; a tree that is not there is a
``TaskError``; ``enter_task_directory`` enters it, else the sandbox.
"""

import os

from ..protocol import task_env
from .task_environ import TaskError


def sandbox_directory(environ):
    """The sandbox: ``$MESOS_SANDBOX`` (inside containers too), else the
    working directory Mesos started the task in."""
    return environ.get("MESOS_SANDBOX") or os.getcwd()


def enter_task_directory(environ):
    """``chdir`` where the task's part starts: the shipped bundle's tree
    (``enter_bundle``), else the sandbox, ``$MESOS_SANDBOX``. Mesos' Docker
    containerizer starts a task in its image's WORKDIR (``/`` in most
    images), not in the sandbox it maps at $MESOS_SANDBOX (src/docker/docker.cpp,
    ``Docker::run`` passes no ``-w``): a command's relative paths, and its
    writes, would land there. Returns the directory (None: no MESOS_SANDBOX,
    stay). TaskError when it cannot be entered."""
    tree = enter_bundle(environ)
    if tree is not None:
        return tree
    sandbox = environ.get("MESOS_SANDBOX")
    if not sandbox:
        return None
    try:
        os.chdir(sandbox)
    except OSError as exc:
        raise TaskError("cannot enter the sandbox %s (MESOS_SANDBOX): %s"
                        % (sandbox, exc.strerror or exc)) from None
    return sandbox


def enter_bundle(environ):
    """``chdir`` into the shipped bundle's tree; its path, or None when the
    run ships nothing. TaskError when it is not there."""
    name = environ.get(task_env.BUNDLE)
    if not name:
        return None
    tree = os.path.join(sandbox_directory(environ), environ.get(task_env.BUNDLE_DIR) or "")
    try:
        os.chdir(tree)
    except OSError as exc:
        raise TaskError("the shipped bundle %s is not extracted into %s (%s): the task's "
                        "command extracts it before it starts this entry"
                        % (name, tree, exc.strerror or exc)) from None
    return tree
