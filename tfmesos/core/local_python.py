"""Whether the embedded master can run a run's plain tasks with their
interpreter (``python``: tfrun's ``--python``, ``tfmesos.run``'s
``python=``), checked before anything starts by tfrun and the APIs alike
(``cluster_arguments.check_local``): a path that is not there was launched three
times, each ending '/bin/sh: exec: /nonexistent: not found', and then told
to 'give its full path', which it was."""

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional

from ..exceptions import SpecError

if TYPE_CHECKING:
    from .spec import RunSpec


def tasks_path(spec: "RunSpec", environ: Mapping[str, str]) -> Optional[str]:
    """The PATH the embedded master's plain tasks start with: its executor
    environment's, else this process's (``environ``)."""
    return (spec.local_master_options.get("executor_environment") or environ).get("PATH")


def check_local_python(spec: "RunSpec", environ: Mapping[str, str]) -> None:
    """SpecError unless this machine, the embedded master's agent, has the
    interpreter given for ``spec``'s plain tasks (``taskinfo.task_entry_needs``);
    nothing to check on another master, for image tasks or with none given.
    A name is looked up on the tasks' PATH; a relative path (in the
    sandbox, shipped) and an interpreter that comes with a Python
    environment archive are the tasks' to find."""
    from .config import LOCAL
    if spec.master != LOCAL or not spec.python or spec.image:
        return
    import shutil

    from .taskinfo import task_entry_needs
    python, _ = task_entry_needs(spec)
    if python is None or (os.sep in python and not os.path.isabs(python)):
        return
    path = tasks_path(spec, environ)
    found = shutil.which(python, path=path) if os.sep not in python else (
        python if os.path.isfile(python) and os.access(python, os.X_OK) else None)
    if found is None:
        raise SpecError.about("{python} %s: %s on this machine, whose embedded master runs the "
                              "tasks: give an interpreter it has, e.g. {python=%s}",
                              python, ("a directory, not a program" if os.path.isdir(python)
                                       else "no such program") if os.sep in python
                              else "not on the tasks' PATH", sys.executable)


def check_local_user(spec: "RunSpec") -> None:
    """SpecError unless the embedded master can run the plain tasks of
    ``spec`` (a run on it) as its ``user`` (``backends.task_user.
    check_task_user``): before anything starts, by tfrun, cluster(),
    tfmesos.run() and submit()."""
    if not spec.user or spec.image:
        return
    from ..backends.task_user import check_task_user
    from .taskinfo import task_entry_needs
    python, pythonpath = task_entry_needs(spec)
    check_task_user(spec.user, python, pythonpath,
                    spec.local_master_options.get("switch_user", True),
                    path=tasks_path(spec, os.environ))


__all__ = ["check_local_user", "check_local_python", "tasks_path"]
