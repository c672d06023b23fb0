"""A run as MLflow sees it (``tfrun --mlflow``, ``cluster(mlflow=...)``):
where it goes (``MlflowSpec``: the tracking URI and the experiment), and
run.json's content as MLflow's parameters, metrics, tags and run status;
how an MLflow run whose tfrun died unseen ends (``gone_run_end``) (pure:
``mlflow_logger`` talks to MLflow; nothing here imports it).

Metric keys are ``TASK/NAME`` (``worker:0/loss``, ``client/loss``): a
tfmesos metric name may hold ``@`` and ``+``, which MLflow refuses, so
they become ``_``; MLflow also refuses a key that ``posixpath.normpath``
changes, so empty parts (``a//b``, a trailing ``/``) are dropped and
``.``/``..`` parts become ``_``/``__``.
"""

import dataclasses
import json
import math
import os
import pathlib
import re
from collections.abc import Iterable, Mapping
from typing import Callable, Optional, Union

from ..exceptions import SpecError
from ..protocol import json_documents
from .metric_series import MAX_PER_TASK, MAX_SERIES, Point
from .schema import RunFile, Scheduler, SchemaError
from .times import parse_time

# --mlflow alone, without $MLFLOW_TRACKING_URI: MLflow's own default
# (mlflow/store/tracking/__init__.py, DEFAULT_TRACKING_URI, MLflow 3.7 and
# later), in the directory tfrun runs in, unless ./mlruns holds a file
# store's experiments (``default_tracking_uri``).
DEFAULT_STORE = "sqlite:///mlflow.db"
FILE_STORE = "mlruns"             # MLflow's DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH, ./mlruns
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
    file://, databricks, ...), a relative ``sqlite:///`` one made absolute
    (relative to ``cwd``, as MLflow reads it there; a takeover may run
    elsewhere); a path as a ``file:`` URI (a file store, relative to
    ``cwd``); nothing given: ``$MLFLOW_TRACKING_URI``, else MLflow's own
    default in ``cwd`` (``default_tracking_uri``)."""
    text = given or environ.get("MLFLOW_TRACKING_URI")
    if not text:
        return default_tracking_uri(cwd)
    if text.startswith("sqlite:"):
        return absolute_sqlite(text, cwd)
    if _SCHEME.match(text) or text == "databricks":
        return text
    return pathlib.Path(cwd, text).resolve().as_uri()


def default_tracking_uri(cwd: str) -> str:
    """MLflow's default tracking URI in ``cwd``, as ``MlflowClient()``,
    ``mlflow ui`` and ``mlflow server`` there read it (MLflow 3.7+,
    mlflow/tracking/_tracking_service/utils.py, ``_get_default_tracking_uri``):
    ``sqlite:///mlflow.db``, unless ``./mlruns`` already holds a file
    store's experiment (a directory named by digits with a ``meta.yaml``,
    ``_has_existing_mlruns_data``), which MLflow keeps using; as absolute URIs."""
    mlruns = os.path.join(cwd, FILE_STORE)
    try:
        with os.scandir(mlruns) as entries:
            for entry in entries:
                if entry.name.isdigit() and entry.is_dir() \
                        and os.path.lexists(os.path.join(entry.path, "meta.yaml")):
                    return pathlib.Path(mlruns).resolve().as_uri()
    except OSError:
        pass
    return absolute_sqlite(DEFAULT_STORE, cwd)


_SQLITE_FILE = re.compile(r"^sqlite:///(?!/)([^?]+)(\?.*)?\Z")


def absolute_sqlite(uri: str, cwd: str) -> str:
    """``sqlite:///PATH`` with a relative PATH (SQLAlchemy's form; four
    slashes make an absolute one) as ``sqlite:////CWD/PATH``; any other
    sqlite URI (absolute, ``sqlite://``, ``:memory:``) as it is."""
    found = _SQLITE_FILE.match(uri)
    if found is None or found.group(1) == ":memory:":
        return uri
    return "sqlite:///%s%s" % (os.path.abspath(os.path.join(cwd, found.group(1))),
                               found.group(2) or "")


def mlflow_spec(value: Union[None, bool, str, "os.PathLike[str]", MlflowSpec],
                experiment: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
                cwd: Optional[str] = None) -> Optional[MlflowSpec]:
    """The ``MlflowSpec`` of ``value`` (None or False: none; True or "":
    ``$MLFLOW_TRACKING_URI``, else MLflow's default; a URI or path; an ``MlflowSpec``, kept) and
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
    uri = tracking_uri(value, environ, cwd or os.getcwd())
    why = _sqlite_error(uri)
    if why:
        raise SpecError("mlflow=%s: %s" % (value or uri, why))
    return MlflowSpec(uri, experiment)


_ABSOLUTE_SQLITE = re.compile(r"^sqlite:///(/[^?]+)(\?.*)?\Z")


def _sqlite_error(uri: str) -> Optional[str]:
    """Why the SQLite store ``uri`` names cannot be opened here, or None:
    MLflow would retry it for a minute at the run's end, with a page of
    SQLAlchemy's warnings (a missing directory MLflow makes)."""
    found = _ABSOLUTE_SQLITE.match(uri)
    if not found:
        return None
    path = found.group(1)
    if os.path.isdir(path):
        return "%s is a directory, not a database file: give a file's path " \
            "(sqlite:///mlflow.db)" % path
    folder = os.path.dirname(path)
    if os.path.exists(path):
        if not os.access(path, os.R_OK | os.W_OK):
            return "you cannot write %s: give a path of yours" % path
    elif os.path.isdir(folder) and not os.access(folder, os.W_OK | os.X_OK):
        return "you cannot write in %s, where the database file goes: give a path of " \
            "yours" % folder
    return None


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


class MetricKeys:
    """The MLflow key of each metric of each task, made once, as its first
    value comes: ``metric_key``, with ``_2``, ``_3`` for one that comes out
    as another's; at most ``most`` keys (``most_per_task`` a task), as
    run.json keeps at most as many series (``metric_series``): ``key``
    says None for one beyond."""

    def __init__(self, most: int = MAX_SERIES, most_per_task: int = MAX_PER_TASK) -> None:
        self.most, self.most_per_task = most, most_per_task
        self._keys: dict[tuple[str, str], Optional[str]] = {}
        self._taken: set[str] = set()
        self._per_task: dict[str, int] = {}

    def key(self, task: str, name: str) -> Optional[str]:
        found = self._keys.get((task, name), "")
        if found != "":
            return found
        if len(self._taken) >= self.most or self._per_task.get(task, 0) >= self.most_per_task:
            self._keys[(task, name)] = None
            return None
        base = key = metric_key(task, name)
        number = 2
        while key in self._taken:
            key, number = "%s_%d" % (base, number), number + 1
        self._keys[(task, name)] = key
        self._taken.add(key)
        self._per_task[task] = self._per_task.get(task, 0) + 1
        return key


# One metric value as MLflow takes it: (key, value, timestamp ms, step).
Row = tuple[str, float, int, int]


def point_rows(keys: MetricKeys, task: str, points: Iterable[Point]) -> tuple[list[Row], int]:
    """``(rows, left out)`` of the ``points`` ``task`` logged
    (``(step, at, {name: value})``, ``at`` a time.time(): the rows'
    timestamps); a null value (not finite) is NaN; a value of a metric
    beyond ``keys``' bounds is left out (counted)."""
    rows: list[Row] = []
    left_out = 0
    for step, at, values in points:
        for name, value in values.items():
            key = keys.key(task, name)
            if key is None:
                left_out += 1
            else:
                rows.append((key, math.nan if value is None else float(value),
                             int(round(at * 1000)), int(step)))
    return rows, left_out


def metric_rows(run: RunFile) -> list[Row]:
    """``[(key, value, timestamp ms, step)]`` of every kept point of run.json's
    ``metrics`` (``run``: a ``schema.RunFile``); a null value (not finite)
    is NaN; two metrics whose keys come out the same keep apart (``_2``)."""
    began = epoch_ms(run.timings.submitted) or 0
    rows: list[Row] = []
    keys = MetricKeys(most=len(run.metrics) or 1, most_per_task=len(run.metrics) or 1)
    for series in run.metrics:
        key = keys.key(series.task, series.name)
        if key is None:   # (twice the same series: not in a valid run.json)
            continue
        for step, value, when in zip(series.steps, series.values, series.times):
            rows.append((key, math.nan if value is None else float(value),
                         began + int(round(when * 1000)), int(step)))
    return rows


def _cut(value: object, most: int) -> str:
    text = str(value)
    return text if len(text) <= most else text[:most - 3] + "..."


def params_of(run: RunFile, git_commit: Optional[str] = None,
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


def tags_of(run: RunFile, directory: Optional[str]) -> dict[str, str]:
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


# -- an MLflow run whose tfrun died unseen ------------------------------------------------------

RUN_ID_TAG = "tfmesos.run_id"
# The process that logs the MLflow run (run.json's ``scheduler``, as JSON):
# a reader on its host tells whether it is gone (``liveness.gone``).
SCHEDULER_TAG = "tfmesos.scheduler"
CLOSED_TAG = "tfmesos.closed"     # why tfmesos ended a run whose tfrun was gone


def scheduler_tag(scheduler: Scheduler) -> str:
    return json.dumps(scheduler.to_dict(), sort_keys=True)


def scheduler_of(text: Optional[str]) -> Optional[Scheduler]:
    """The ``schema.Scheduler`` of a ``SCHEDULER_TAG`` value, or None (none,
    or not one: the tag is anyone's to write)."""
    if not text:
        return None
    try:
        return Scheduler.from_dict(json_documents.loads(text))
    except (ValueError, SchemaError, TypeError):
        return None


@dataclasses.dataclass(frozen=True)
class GoneEnd:
    """How tfmesos ends an MLflow run left RUNNING by a tfrun that is gone:
    its ``status``, ``end_time`` (ms since the epoch), ``why`` (a line) and
    the run's ``outcome`` (the tag ``tfmesos.outcome``: ``gone``, as
    ``tfmesos runs`` says, or how run.json says it ended)."""

    status: str
    end_time: int
    why: str
    outcome: str = "gone"


def gone_run_end(tags: Mapping[str, str], gone: Callable[[Scheduler], bool],
                 load: Callable[[str], Optional[tuple[RunFile, float]]],
                 now: float) -> Optional[GoneEnd]:
    """The end of an MLflow run that is RUNNING, with ``tags``: None unless
    tfmesos opened it (``RUN_ID_TAG``, ``SCHEDULER_TAG``) and its process is
    known to be ``gone`` (``liveness.gone``: SIGKILLed, its machine's power
    cut). Then its run.json (``load(run directory)``: ``(RunFile, its
    mtime)``, or None) says how: a final outcome the MLflow run missed is
    that outcome's status at its end; a run still running there, or no
    run.json, is KILLED, when run.json was last written (else ``now``, a
    time.time())."""
    run_id = tags.get(RUN_ID_TAG)
    scheduler = scheduler_of(tags.get(SCHEDULER_TAG))
    if not run_id or scheduler is None or not gone(scheduler):
        return None
    process = "pid %d on %s" % (scheduler.pid, scheduler.host)
    directory = tags.get("tfmesos.run_dir")
    found = load(directory) if directory else None
    if found is not None and found[0].run_id == run_id:
        run, written = found
        if run.outcome.status != "running":
            return GoneEnd(mlflow_status(run.outcome.status),
                           epoch_ms(run.timings.finished) or int(written * 1000),
                           "the run ended %s, but its tfrun (%s) was gone before it ended "
                           "the MLflow run" % (run.outcome.status, process), run.outcome.status)
        return GoneEnd("KILLED", int(written * 1000),
                       "its tfrun (%s) was gone, killed before it could end the run; "
                       "ended when its run.json was last written" % process)
    return GoneEnd("KILLED", int(now * 1000),
                   "its tfrun (%s) was gone, killed before it could end the run; no "
                   "run.json of it to tell when" % process)


def run_page(uri: str, experiment_id: Optional[str], run_id: Optional[str]) -> Optional[str]:
    """The MLflow run's page in the UI of the tracking server ``uri``
    (http(s); the address MLflow's ``_log_url`` prints), or None."""
    if not (uri.startswith("http://") or uri.startswith("https://")) or not experiment_id \
            or not run_id:
        return None
    return "%s/#/experiments/%s/runs/%s" % (uri.rstrip("/"), experiment_id, run_id)


_REQUEST_FAILED = re.compile(r"^(API request to \S+) failed with exception .*?"
                             r"(\[Errno -?\d+\] [^'\")]*|Read timed out)")


def one_line(error: BaseException) -> str:
    """``error`` as one short line: its message's first line (an HTTP
    request's: what failed and why, without urllib3's detail), else its type."""
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    failed = _REQUEST_FAILED.match(first)
    if failed:
        first = "%s failed: %s" % failed.groups()
    first = first if len(first) <= 300 else first[:297] + "..."
    return first or type(error).__name__


__all__ = ["MlflowSpec", "mlflow_spec", "tracking_uri", "default_tracking_uri",
           "absolute_sqlite", "metric_key", "MetricKeys", "point_rows", "metric_rows",
           "params_of", "tags_of", "mlflow_status", "is_local_store", "NOT_INSTALLED",
           "scheduler_tag", "scheduler_of", "gone_run_end", "GoneEnd", "run_page", "one_line"]
