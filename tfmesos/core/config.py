"""Run settings resolved in one place: argument, else environment variable,
else default. The CLI, ``cluster()``, the launcher and the Docker wrapper
read their settings through here (the address tasks reach the run at:
``backends.advertise``). Two readers of the environment stay on
their own, on purpose: the Mesos driver takes ``MESOS_PRINCIPAL`` /
``MESOS_SECRET`` as a standalone pymesos-style driver does, and the task
entry (``tfmesos.task.task_environ.TaskEnv``) reads what the scheduler put in
its TaskInfo."""

import os
from collections.abc import Mapping
from typing import Optional, overload

from ..exceptions import SpecError

LOCAL = "local"


@overload
def resolve(value: Optional[str], environ: Mapping[str, str], name: str, default: str) -> str: ...


@overload
def resolve(value: Optional[str], environ: Mapping[str, str], name: str,
            default: None = None) -> Optional[str]: ...


def resolve(value: Optional[str], environ: Mapping[str, str], name: str,
            default: Optional[str] = None) -> Optional[str]:
    """``value`` if given, else ``environ[name]`` if set and non-empty, else ``default``."""
    if value is not None:
        return value
    return environ.get(name) or default


def resolve_master(value: Optional[str], environ: Mapping[str, str]) -> str:
    if value is not None and not isinstance(value, str):
        raise SpecError.about("{master} takes a master's address as a string (host:port, "
                              "zk://..., or local); got %r", value)
    found = resolve(value, environ, "MESOS_MASTER", LOCAL).strip()
    # 'local' in any case, as parse_master reads it: one word for the embedded master.
    return LOCAL if found.lower() == LOCAL else found


def working_directory() -> str:
    """This process's working directory, where a run's relative paths start
    (its run directory, what --ship packs, the embedded agent's tasks);
    SpecError when it is gone (deleted, or moved away under the shell)."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise SpecError("the current directory no longer exists (deleted or moved away): cd "
                        "to one that does, then run again") from None
