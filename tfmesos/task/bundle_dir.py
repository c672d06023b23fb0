"""The user's shipped directory (``tfrun --ship``): the task's working
directory.

The task's command checked the bundle (a ``.tar``) against the sha256
the scheduler wrote into it and extracted it into the sandbox before this
interpreter started (``tfmesos.ship.fetch_check``: the check is not
fetched, and neither is it here). The scheduler names it, and the
directory it unpacks to (relative to the sandbox), in the task's
environment: ``TFMESOS_BUNDLE``, ``TFMESOS_BUNDLE_DIR``. ``enter_bundle``
makes that tree the working directory; a tree that is not there is a
``TaskError``.
"""

import os

from ..protocol import task_env
from .connection import TaskError


def sandbox_directory(environ):
    """The sandbox: ``$MESOS_SANDBOX`` (inside containers too), else the
    working directory Mesos started the task in."""
    return environ.get("MESOS_SANDBOX") or os.getcwd()


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
