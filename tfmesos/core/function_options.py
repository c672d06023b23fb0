"""``tfmesos.run``'s options (tfrun's flags as keyword arguments, with their
defaults) and its words for the fields of a run, in which the errors it
raises name what to change (``error_fields``)."""

import os
import re
from collections.abc import Mapping
from typing import Any, Callable, Optional, TypeVar, Union

from ..error_fields import Word, words
from ..exceptions import TFMesosError
from .spec import STICKY_TIMEOUT

_E = TypeVar("_E", bound=BaseException)
# What the caller ships: a directory, or None for nothing but the function.
Ship = Union[str, "os.PathLike[str]", None]

# tfmesos.run's options and their defaults: tfrun's flags, as keywords.
OPTIONS = {
    # where
    "master": None, "role": None, "user": None, "advertise_address": None,
    "connect_timeout": None, "verify": True, "ca_bundle": None, "master_scheme": "http",
    "local_master_options": None, "no_isolation": False, "cgroups_enable_cfs": False,
    # what each task gets: the workers' (and evaluator's), the ps', the chief's
    # (None: the workers')
    "cpus": 1.0, "mem": 1024.0, "gpus": 0, "ps_cpus": 1.0, "ps_mem": 1024.0, "ps_gpus": 0,
    "chief_cpus": None, "chief_mem": None, "chief_gpus": None,
    # how it runs: "framework" sets up torch's or jax's distributed environment
    # around fn (training_frameworks.FRAMEWORKS; tfrun --torch, --jax)
    "framework": "tensorflow",
    "name": None, "image": None, "containerizer": "MESOS", "force_pull": False,
    "volumes": (), "env": None, "secret_env": (), "python": None, "python_env": None,
    "ship_exclude": (), "ship_max_size": 100.0, "ship_follow_links": False,
    "ship_allow_secrets": False,
    # when things fail
    "launch_timeout": 600.0, "max_attempts": 3, "max_restarts": 0, "restart_on": "lost",
    "restart_backoff": 2.0, "sticky_workers": False, "sticky_timeout": STICKY_TIMEOUT,
    # what it shows and keeps
    "logs": None, "verbose": False, "run_dir": None,
    # where else it is logged (tfrun --mlflow): True, a tracking URI or path
    "mlflow": None,
}


JOBS = ("chief", "worker", "ps", "evaluator")


def per_job(field: str, counts: bool = False) -> Callable[[Mapping[str, Any], Optional[str]], str]:
    """tfmesos.run's keyword for a job's ``field``: the workers' (and the
    evaluator's) ``cpus``, the ps' ``ps_cpus``, the chief's ``chief_cpus``;
    with ``counts``, how many tasks of the job: ``workers``, ``ps``,
    ``chief``, ``evaluator``."""
    def word(context: Mapping[str, Any], value: Optional[str]) -> str:
        job = context.get("job")
        if counts:
            keyword = {"worker": "workers"}.get(job, job) if job in JOBS else field
        else:
            keyword = "%s_%s" % (job, field) if job in ("ps", "chief") else field
        return keyword if value is None else "%s=%s" % (keyword, value)
    return word


# tfmesos.run's words for the fields of a run (``error_fields``): its keyword
# arguments (``OPTIONS``, and ``workers``, ``ps``, ``chief``, ``evaluator``,
# ``ship``), named as the spec's fields but for these (``reconnect_grace``,
# ``failover_timeout``, a job's ``start`` and ``cmd``: no keyword sets them).
KEYWORDS: "dict[str, Word]" = words({
    "refused_timeout": "connect_timeout",   # it is the connect timeout, when one is given
    "sticky_jobs": "sticky_workers",
    "jobs": "workers, ps, chief, evaluator",
    "jobs.chief": "chief=True",
    "job.num": per_job("num", counts=True),
    "job.cpus": per_job("cpus"),
    "job.mem": per_job("mem"),
    "job.gpus": per_job("gpus"),
    "restart_policy.max_restarts": "max_restarts",
    "restart_policy.restart_on": "restart_on",
    "restart_policy.backoff": "restart_backoff",
    "restart_policy.max_backoff": "max_backoff",   # no keyword sets it
    "local_master": "local_master_options",
    "local_master.cgroups_enable_cfs": "cgroups_enable_cfs",
    "ship.directory": "ship",
    "ship.max_size": "ship_max_size",
    "ship.exclude": "ship_exclude=[PATTERN, ...]",
    "ship.follow_links": "ship_follow_links",
    "ship.allow_secrets": "ship_allow_secrets",
    "ship.python_env": "python_env",
})
# ship=".", the default: an error about the directory says how to ship none.
_CURRENT = dict(KEYWORDS, **{"ship.directory": lambda context, value: (
    "ship" if value is None else "ship=%s" % value)
    + " (the current directory, the default; ship=None ships none)"})


def in_keywords(error: _E, ship: Ship = ".") -> _E:
    """``error`` naming tfmesos.run's keyword arguments (``KEYWORDS``)
    where it names fields; ``ship``: what the call ships."""
    if not isinstance(error, TFMesosError):
        return error
    return error.in_words(_CURRENT if ship == "." else KEYWORDS)


# tfrun's resource flags in the words tfmesos writes for any run (its
# hints, a memory kill's "raise -Mw"): -Mw is mem, -Cs ps_cpus, -Gc chief_gpus.
_RESOURCE_FLAG = re.compile(r"(?:\btfrun )?(?<![\w-])-([MCG])([wsc])\b(?: (\d+))?")
_RESOURCES = {"M": "mem", "C": "cpus", "G": "gpus"}
_JOB_PREFIX = {"w": "", "s": "ps_", "c": "chief_"}


def flags_as_keywords(text: str) -> str:
    """``text`` (a hint, a task's failure) with tfrun's resource flags as
    tfmesos.run's keyword arguments: "e.g. tfrun -Mw 4096" is "e.g.
    mem=4096", "raise -Ms" is "raise ps_mem="."""
    def keyword(match: "re.Match[str]") -> str:
        name = _JOB_PREFIX[match.group(2)] + _RESOURCES[match.group(1)]
        return "%s=%s" % (name, match.group(3) or "")
    return _RESOURCE_FLAG.sub(keyword, text)


__all__ = ["OPTIONS", "KEYWORDS", "Ship", "in_keywords", "flags_as_keywords"]
