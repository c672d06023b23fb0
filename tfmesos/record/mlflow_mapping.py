"""A run as MLflow sees it (``tfrun --mlflow``, ``cluster(mlflow=...)``):
where it goes (``MlflowSpec``: the tracking URI and the experiment), and
run.json's content as MLflow's parameters, metrics, tags and run status
(pure: ``mlflow_logger`` talks to MLflow; nothing here imports it).

Metric keys are ``TASK/NAME`` (``worker:0/loss``, ``client/loss``): a
tfmesos metric name may hold ``@`` and ``+``, which MLflow refuses, so
they become ``_``; MLflow also refuses a key that ``posixpath.normpath``
changes, so empty parts (``a//b``, a trailing ``/``) are dropped and
``.``/``..`` parts become ``_``/``__``.
"""

import dataclasses
import math
import os
import pathlib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional, Union

from ..exceptions import SpecError
from .times import parse_time

if TYPE_CHECKING:
    from .schema import RunFile

DEFAULT_STORE = "mlruns"          # --mlflow alone: ./mlruns, a file store, no server
DEFAULT_EXPERIMENT = "tfmesos"
NOT_INSTALLED = "needs MLflow: pip install 'tfmesos[mlflow]'"
MAX_URI = 2000                    # characters of a tracking URI
MAX_EXPERIMENT = 500              # characters of an experiment's name
MAX_PARAM = 6000                  # MLflow's longest parameter value
MAX_TAG = 8000                    # MLflow's longest tag value
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_NOT_KEY = re.compile(r"[^/\w.\- :]")   # MLflow's metric names: / \w . - space :


@dataclasses.dataclass(frozen=True)
class MlflowSpec:
    """Where a run is logged: ``tracking_uri`` (resolved: ``file:`` for a
    local store) and the ``experiment``'s name."""

    tracking_uri: str
    experiment: str = DEFAULT_EXPERIMENT


def tracking_uri(given: Optional[str], environ: Mapping[str, str], cwd: str) -> str:
    """The tracking URI of ``--mlflow [given]``: a URI as given (http(s)://,
    sqlite:///, file://, databricks, ...); a path as a ``file:`` URI (a
    local store, relative to ``cwd``); nothing given: ``$MLFLOW_TRACKING_URI``,
    else ``./mlruns``."""
    text = given or environ.get("MLFLOW_TRACKING_URI") or DEFAULT_STORE
    if _SCHEME.match(text) or text == "databricks":
        return text
    return pathlib.Path(cwd, text).resolve().as_uri()


def mlflow_spec(value: Union[None, bool, str, "os.PathLike[str]", MlflowSpec],
                experiment: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
                cwd: Optional[str] = None) -> Optional[MlflowSpec]:
    """The ``MlflowSpec`` of ``value`` (None or False: none; True or "":
    the default store; a URI or path; an ``MlflowSpec``, kept) and
    ``experiment`` (default ``$MLFLOW_EXPERIMENT_NAME``, else "tfmesos");
    SpecError for a value that cannot be one."""
    if value is None or value is False:
        return None
    if isinstance(value, MlflowSpec):
        return value
    environ = os.environ if environ is None else environ
    if value is True:
        value = ""
    if not isinstance(value, (str, os.PathLike)):
        raise SpecError("mlflow must be True, a tracking URI or a path, got %r" % (value,))
    value = os.fspath(value)
    if len(value) > MAX_URI or _control(value):
        raise SpecError("the MLflow tracking URI must be at most %d characters, none of them "
                        "a control character" % MAX_URI)
    if experiment is None:
        experiment = environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
    if not isinstance(experiment, str) or not experiment.strip() \
            or len(experiment) > MAX_EXPERIMENT or _control(experiment):
        raise SpecError("the MLflow experiment's name must be 1 to %d characters, none of them "
                        "a control character, got %r" % (MAX_EXPERIMENT, str(experiment)[:80]))
    return MlflowSpec(tracking_uri(value, environ, cwd or os.getcwd()), experiment)


def _control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def is_local_store(uri: str) -> bool:
    """Whether ``uri`` is a file store (MLflow 3.7+ serves one only when
    ``MLFLOW_ALLOW_FILE_STORE`` is true)."""
    return uri.startswith("file:")


# -- run.json as MLflow's ----------------------------------------------------------------------

def metric_key(task: str, name: str) -> str:
    """``TASK/NAME``, with what MLflow refuses in a key replaced (module doc)."""
    parts: list[str] = []
    for part in _NOT_KEY.sub("_", name).split("/"):
        if part in (".", ".."):
            parts.append("_" * len(part))
        elif part:
            parts.append(part)
    return "%s/%s" % (_NOT_KEY.sub("_", task), "/".join(parts) or "_")


def epoch_ms(text: Optional[str]) -> Optional[int]:
    """A run.json time as milliseconds since the epoch, or None."""
    moment = parse_time(text)
    return None if moment is None else int(round(moment.timestamp() * 1000))


def metric_rows(run: "RunFile") -> list[tuple[str, float, int, int]]:
    """``[(key, value, timestamp ms, step)]`` of every kept point of run.json's
    ``metrics`` (``run``: a ``schema.RunFile``); a null value (not finite)
    is NaN; two metrics whose keys come out the same keep apart (``_2``)."""
    began = epoch_ms(run.timings.submitted) or 0
    rows: list[tuple[str, float, int, int]] = []
    owners: dict[str, tuple[str, str]] = {}     # key -> (task, name) of the series it is
    for series in run.metrics:
        base = key = metric_key(series.task, series.name)
        number = 2
        while owners.setdefault(key, (series.task, series.name)) != (series.task, series.name):
            key, number = "%s_%d" % (base, number), number + 1
        for step, value, when in zip(series.steps, series.values, series.times):
            rows.append((key, math.nan if value is None else float(value),
                         began + int(round(when * 1000)), int(step)))
    return rows


def _cut(value: object, most: int) -> str:
    text = str(value)
    return text if len(text) <= most else text[:most - 3] + "..."


def params_of(run: "RunFile", git_commit: Optional[str] = None,
              image: Optional[str] = None) -> dict[str, str]:
    """MLflow parameters of ``run`` (a ``schema.RunFile``): its jobs and
    their resources, mode, master, command, what --ship sent; the tasks'
    ``image`` and the project's ``git_commit``; what the run lacks is left
    out."""
    params: dict[str, object] = {"name": run.name, "mode": run.mode, "master": run.master,
              "jobs": ",".join("%s:%d" % (job.name, job.num) for job in run.jobs),
              "command": run.command, "image": image}
    for job in run.jobs:
        params.update({"%s.%s" % (job.name, field): getattr(job, field)
                       for field in ("num", "cpus", "mem", "gpus")})
    shipped = run.shipped
    if shipped is not None:
        if shipped.bundle is not None:
            params.update(bundle_sha256=shipped.bundle.sha256, bundle_files=shipped.bundle.files,
                          bundle_bytes=shipped.bundle.bytes)
        params["python_env"] = shipped.python_env
    params["git_commit"] = git_commit
    return {key: _cut(value, MAX_PARAM) for key, value in params.items()
            if value not in (None, "")}


def tags_of(run: "RunFile", directory: Optional[str]) -> dict[str, str]:
    """MLflow tags of ``run`` (a ``schema.RunFile``) in ``directory`` (its
    run directory, or None): the outcome, exit code, run id, master, ..."""
    outcome = run.outcome
    tags: dict[str, object] = {"mlflow.runName": "%s-%s" % (run.name, run.run_id),
            "tfmesos.run_id": run.run_id, "tfmesos.name": run.name, "tfmesos.mode": run.mode,
            "tfmesos.master": run.master, "tfmesos.framework_id": run.framework_id,
            "tfmesos.run_dir": directory and os.path.abspath(directory),
            "tfmesos.outcome": outcome.status, "tfmesos.exit_code": outcome.exit_code,
            "tfmesos.outcome_message": outcome.message, "tfmesos.failed_task": outcome.task,
            "tfmesos.hint": outcome.hint}
    return {key: _cut(value, MAX_TAG) for key, value in tags.items() if value not in (None, "")}


STATUSES = {"succeeded": "FINISHED", "interrupted": "KILLED", "killed": "KILLED"}


def mlflow_status(outcome: str) -> str:
    """The MLflow run status of a tfmesos outcome: FINISHED, KILLED or FAILED."""
    return STATUSES.get(outcome, "FAILED")


__all__ = ["MlflowSpec", "mlflow_spec", "tracking_uri", "metric_key", "metric_rows",
           "params_of", "tags_of", "mlflow_status", "is_local_store", "NOT_INSTALLED"]
