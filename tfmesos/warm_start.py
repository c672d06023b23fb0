"""Warm task starts for a run on the embedded master: its plain replica
tasks are forked from an interpreter that imported the task entry already
(``mesos.local.warm_tasks``). tfrun starts that interpreter right after
reading its options, so that its start-up overlaps tfrun's own.

``TFMESOS_WARM_TASKS=0`` turns it off: every task is then started with
``/bin/sh -c COMMAND``, as a Mesos agent starts it.
"""

import os
import sys

from . import config


def warm_task_command(run):
    """(command, environment) of the plain replica tasks of ``run``
    (``exec PYTHON [-S] -m tfmesos.task``) when the embedded master may fork
    them warm, else None. The environment
    is a guess (the run's, before a job's own variables): the agent compares
    each launch's own (``warm_tasks.matches``)."""
    from .taskinfo import package_on_path, submitter_pythonpath, task_command

    # Another interpreter (--python) is the user's to run at each task start:
    # it may be a wrapper that does more than start Python.
    if run.master != config.LOCAL or run.mode != "replica" or run.image \
            or run.ship is not None or run.python not in (None, sys.executable) \
            or os.environ.get("TFMESOS_WARM_TASKS", "1") == "0":
        return None
    pythonpath = submitter_pythonpath()
    env = dict(os.environ)
    env.update(run.env)
    env.update({"PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath})
    # As taskinfo.build_task decides: without ``site`` when the path itself
    # finds tfmesos (not only an editable install's finder).
    no_site = package_on_path(pythonpath)
    return task_command(None, sys.executable, no_site), env


def start_warm_runner(run):
    """The embedded master's runner with its warm interpreter started, or
    None when ``run``'s tasks cannot be forked warm."""
    command = warm_task_command(run)
    if command is None:
        return None
    from .mesos.local.warm_tasks import WarmProcessRunner, WarmSpec

    return WarmProcessRunner(WarmSpec(*command))
