"""Run settings resolved in one place: argument, else environment variable,
else default. The CLI, ``cluster()``, the launcher and the Docker wrapper
read their settings through here (the address tasks reach the run at:
``backends.advertise``). Two readers of the environment stay on
their own, on purpose: the Mesos driver takes ``MESOS_PRINCIPAL`` /
``MESOS_SECRET`` as a standalone pymesos-style driver does, and the task
entry (``tfmesos.task.connection.TaskEnv``) reads what the scheduler put in
its TaskInfo."""

from collections.abc import Mapping
from typing import Optional, overload

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
    return resolve(value, environ, "MESOS_MASTER", LOCAL).strip()
