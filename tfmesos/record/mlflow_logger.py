"""Logging a run to MLflow (``tfrun --mlflow``, ``cluster(mlflow=...)``),
from the process that runs it: the tasks need no MLflow.

``MlflowLogger.begin`` (when the run starts) ends the MLflow runs of the
experiment that a gone tfrun left RUNNING (``mlflow_mapping.gone_run_end``),
then opens the run's MLflow run with its parameters and first tags (a
takeover, ``tfmesos attach``, carries on the one its run had). ``metrics``
(the run's thread, as the tasks' points come) only queues them: at most
``QUEUE_POINTS`` values wait, the oldest dropped beyond (counted), and
they go to MLflow in batches (``log_batch``) every ``FLUSH_INTERVAL``
seconds, or as soon as ``BATCH_METRICS`` wait. ``end`` (once run.json is
final) logs what still waits, writes report.html into the run directory,
then logs the final tags, and run.json, report.html and the task logs as
artifacts (the run directory's layout, so the report's links to the logs
work), and ends the MLflow run FINISHED, FAILED or KILLED; ``leave`` (the
run left to its tasks) logs what waits and leaves it RUNNING. MLflow is
imported in a thread of its own (``tfmesos-mlflow``), which does all the
talking; ``end`` and ``leave`` wait for it ``timeout`` seconds at most.
Whatever goes wrong there is one line through ``warn``, never the run's
failure.
"""

import collections
import contextlib
import getpass
import json
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable, MutableMapping
from typing import TYPE_CHECKING, Any, Callable, Optional

from .history import Run
from .liveness import gone, this_process
from .metric_series import Point
from .mlflow_mapping import (
    CLOSED_TAG,
    RUN_ID_TAG,
    SCHEDULER_TAG,
    MetricKeys,
    MlflowSpec,
    Row,
    epoch_ms,
    gone_run_end,
    is_local_store,
    metric_rows,
    mlflow_status,
    one_line,
    params_of,
    point_rows,
    run_page,
    scheduler_tag,
    tags_of,
)
from .mlflow_sources import copy_tail, git_commit, log_names, read_run
from .report import REPORT, write_report
from .schema import RunFile

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

# MLflow's import is not safe from two threads at once: importlib's deadlock
# avoidance hands one of them a partially initialised module ("cannot
# import name '_get_experiment_id' from partially initialized module
# 'mlflow.tracking.fluent'"), and the failed import leaves that module
# broken for the process. Two loggers' threads in one process did it (the
# first run gave up on MLflow while its thread still imported): they
# import it one at a time.
_IMPORTING = threading.Lock()

TIMEOUT = 60.0                  # seconds the end of a run waits for MLflow at most
LOG_CAP = 10 * 1000 * 1000      # bytes of one log uploaded: a larger one's tail
LOGS_CAP = 100 * 1000 * 1000    # bytes of logs uploaded in all: the rest are skipped
# MLflow's HTTP client retries a failed request 7 times with a doubling
# back-off, and waits 120 s for an answer: far too long for a run's end.
# Set in this process unless the user set them (``_set_environment``).
# MLflow 3 also writes "View run NAME at: URL" to stdout when a run on a
# tracking server ends (mlflow/tracking/_tracking_service/client.py,
# ``_log_url``): tfrun's stdout is the tasks' output; tfrun says the run's
# page on stderr instead (``end``).
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "15",
                 "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
BATCH_METRICS = 1000            # MLflow's most metrics per log_batch
BATCH_TAGS = 100                # and params, and tags
FLUSH_INTERVAL = 1.0            # seconds between two batches of metrics, at most
QUEUE_POINTS = 50 * 1000        # metric values waiting for MLflow, at most (~5 MB)
GONE_SEARCH = 200               # RUNNING MLflow runs looked at for a gone tfrun's


def _import_modules() -> None:
    import mlflow.entities
    import mlflow.tracking  # noqa: F401


def import_mlflow() -> None:
    """Import what the logger uses of MLflow, one thread at a time."""
    with _IMPORTING:
        _import_modules()


class MlflowLogger:
    """One MLflow run for one tfmesos run, at ``spec`` (an
    ``mlflow_mapping.MlflowSpec``); ``say(text)``: the MLflow run's id once
    logged, and the runs of gone tfruns it ended; ``warn(text)``: why it is
    not, and metric values that were not logged (one line each, "MLflow:
    ..."). ``say`` and ``warn`` are called in the caller's thread only."""

    def __init__(self, spec: MlflowSpec, say: Callable[[str], None], warn: Callable[[str], None],
                 timeout: float = TIMEOUT, log_cap: int = LOG_CAP, logs_cap: int = LOGS_CAP,
                 environ: Optional[MutableMapping[str, str]] = None,
                 flush_interval: float = FLUSH_INTERVAL, queue_points: int = QUEUE_POINTS) -> None:
        self.spec = spec
        self._say, self._warn = say, warn
        self.timeout, self.log_cap, self.logs_cap = timeout, log_cap, logs_cap
        self.flush_interval = flush_interval
        self._environ: MutableMapping[str, str] = os.environ if environ is None else environ
        # (job, the event set once it ran: the last job's, whether it ends the MLflow run)
        self._jobs: queue.Queue[tuple[Callable[[], object], Optional[threading.Event], bool]] = \
            queue.Queue()
        self._thread: Optional[threading.Thread] = None
        self._failed: Optional[str] = None       # one line: why logging stopped
        self._client: Any = None   # an MlflowClient, once a run was opened
        self.run_id: Optional[str] = None        # the MLflow run's, once opened
        self.experiment_id: Optional[str] = None
        self._source: Optional[str] = None       # where the project's git commit is read
        self._image: Optional[str] = None
        self._resumed = False                    # a takeover: carry on the MLflow run
        # The metrics queued (``metrics``, any thread) for the tfmesos-mlflow
        # thread: (task, points), at most ``queue_points`` values in all.
        self._lock = threading.Lock()
        self._queued: collections.deque[tuple[str, tuple[Point, ...]]] = collections.deque()
        self._queued_values = 0
        self.queue_points = queue_points
        self._flush_asked = False
        self._ended = False                      # end or leave called: no more metrics
        self.dropped = 0          # values dropped from a full queue
        self.left_out = 0         # values beyond the series' bounds (``MetricKeys``)
        self.failed_values = 0    # values whose log_batch failed
        self._batch_error: Optional[str] = None  # the first such failure
        self.logged_values = 0    # values MLflow took
        self._keys = MetricKeys()
        self._closed_gone: list[str] = []        # lines: gone tfruns' runs ended

    # -- what the run calls (its own thread) --------------------------------------------------

    def begin(self, run: RunFile, directory: Optional[str] = None, source: Optional[str] = None,
              image: Optional[str] = None, resumed: bool = False) -> None:
        """The run began: open the MLflow run (``run``: its ``schema.RunFile``
        now; ``directory``: its run directory; ``source``: the project's
        directory, whose git commit is a parameter; ``image``: the tasks';
        ``resumed``: a takeover, which carries on its run's MLflow run)."""
        self._source, self._image, self._resumed = source, image, resumed
        self._submit(lambda: self._open(run, directory))

    def metrics(self, task: str, points: Iterable[Point]) -> None:
        """``task`` logged ``points`` (``(step, at, {name: value})``): queued
        for MLflow, never waiting for it (any thread)."""
        points = tuple(points)
        count = sum(len(values) for _, _, values in points)
        if not count:
            return
        with self._lock:
            if self._ended:
                return
            self._queued.append((task, points))
            self._queued_values += count
            while self._queued_values > self.queue_points and len(self._queued) > 1:
                _, oldest = self._queued.popleft()
                dropped = sum(len(values) for _, _, values in oldest)
                self._queued_values -= dropped
                self.dropped += dropped
            ask = self._queued_values >= BATCH_METRICS and not self._flush_asked \
                and self._thread is not None
            if ask:
                self._flush_asked = True
        if ask:
            self._jobs.put((self._flush, None, False))

    def end(self, run: RunFile, directory: Optional[str]) -> None:
        """The run ended (``run``: its final ``schema.RunFile``): log the rest
        and end the MLflow run, waiting ``timeout`` s at most."""
        if self._wait(lambda: self._close(run, directory), closes=True):
            page = run_page(self.spec.tracking_uri, self.experiment_id, self.run_id)
            self._say("MLflow: run %s in experiment '%s' at %s%s" % (
                self.run_id, self.spec.experiment, self.spec.tracking_uri,
                "; its page: %s" % page if page else ""))

    def leave(self) -> None:
        """The run was left to its tasks (``--failover``): log the metrics
        that wait and leave the MLflow run RUNNING for the scheduler that
        takes the run over, waiting ``timeout`` s at most."""
        if self._thread is not None:
            self._wait(self._flush, closes=False)

    def _wait(self, job: Callable[[], object], closes: bool) -> bool:
        """Run the last ``job`` (``closes``: it ends the MLflow run) and wait
        for it; say what went wrong; True when all went well."""
        with self._lock:
            self._ended = True
        done = threading.Event()
        self._submit(job, done, closes)
        try:
            finished = done.wait(self.timeout)
        except KeyboardInterrupt:
            self._warn("MLflow: interrupted while logging to %s; the MLflow run may be "
                       "incomplete" % self.spec.tracking_uri)
            return False
        for line in self._closed_gone:
            self._say(line)
        if not finished:
            self._warn("MLflow: gave up after %.0f s logging to %s; the MLflow run may be "
                       "incomplete" % (self.timeout, self.spec.tracking_uri))
            return False
        if self._failed is not None:
            self._warn("MLflow: the run is not logged to %s: %s" % (
                self.spec.tracking_uri, self._failed))
            return False
        missed = self.not_logged()
        if missed:
            self._warn("MLflow: %s" % missed)
        return True

    def not_logged(self) -> Optional[str]:
        """One line on the metric values that did not reach MLflow, or None."""
        parts = []
        if self.dropped:
            parts.append("%d dropped while %d waited for MLflow" % (self.dropped,
                                                                   self.queue_points))
        if self.left_out:
            parts.append("%d of metrics beyond run.json's series limits" % self.left_out)
        if self.failed_values:
            parts.append("%d refused: %s" % (self.failed_values, self._batch_error))
        if not parts:
            return None
        total = self.dropped + self.left_out + self.failed_values
        return "%d metric value%s not logged (%s)" % (total, "" if total == 1 else "s",
                                                     "; ".join(parts))

    def _submit(self, job: Callable[[], object], done: Optional[threading.Event] = None,
                closes: bool = False) -> None:
        if self._thread is None:
            self._set_environment()
            self._thread = threading.Thread(target=self._work, name="tfmesos-mlflow",
                                            daemon=True)
            self._thread.start()
        self._jobs.put((job, done, closes))

    def _set_environment(self) -> None:
        """MLflow's settings, unless the user made them: ``HTTP_DEFAULTS``
        and, for a file store, ``MLFLOW_ALLOW_FILE_STORE`` (MLflow 3.7+
        refuses one unless asked: mlflow/store/tracking/file_store.py,
        ``FileStore.__init__``). Set in the run's thread before MLflow's
        starts, once the embedded master took the tasks' environment
        (``ClusterRun.start``)."""
        for name, value in HTTP_DEFAULTS.items():
            self._environ.setdefault(name, value)
        if is_local_store(self.spec.tracking_uri):
            self._environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")

    def _work(self) -> None:
        try:
            import_mlflow()
        except Exception as exc:   # ImportError, or MLflow's own at import
            self._failed = one_line(exc)
        while True:
            try:
                job, done, closes = self._jobs.get(timeout=self.flush_interval)
            except queue.Empty:   # every FLUSH_INTERVAL: the metrics that wait
                job, done, closes = self._flush, None, False
            try:
                if self._failed is None:
                    job()
                elif closes and self.run_id is not None:
                    # Opened, then something failed: not left RUNNING.
                    with contextlib.suppress(Exception):
                        self._client.set_terminated(self.run_id, "FAILED")
            except Exception as exc:   # MLflow's, the network's: never the run's failure
                self._failed = one_line(exc)
            finally:
                if done is not None:
                    done.set()
            if done is not None:
                return   # the end

    # -- in the tfmesos-mlflow thread -----------------------------------------------------------

    def _open(self, run: RunFile, directory: Optional[str]) -> "MlflowClient":
        from mlflow.entities import Param, RunTag
        from mlflow.tracking import MlflowClient

        client = MlflowClient(self.spec.tracking_uri)
        experiment = self.experiment_id = self._experiment_id(client)
        self._end_gone_runs(client, experiment, run.run_id)
        commit = git_commit(self._source or os.getcwd())
        tags = tags_of(run, directory)
        tags.update({"mlflow.user": _user(), "mlflow.source.type": "LOCAL",
                     "mlflow.source.name": "tfrun" if run.mode == "replica" else "cluster()",
                     SCHEDULER_TAG: scheduler_tag(run.scheduler or this_process())})
        if commit:
            tags["mlflow.source.git.commit"] = commit
        carried = self._run_of(client, experiment, run.run_id) if self._resumed else None
        if carried is not None:   # a takeover: its scheduler's MLflow run, RUNNING again
            self._client, self.run_id = client, carried.info.run_id
            client.update_run(self.run_id, status="RUNNING")
            if CLOSED_TAG in carried.data.tags:   # (ended while no scheduler was there)
                client.delete_tag(self.run_id, CLOSED_TAG)
            run_tags = [RunTag(k, v) for k, v in tags.items() if k != "mlflow.runName"]
            for start in range(0, len(run_tags), BATCH_TAGS):
                client.log_batch(self.run_id, tags=run_tags[start:start + BATCH_TAGS])
            return client
        created = client.create_run(experiment, start_time=epoch_ms(run.timings.submitted),
                                    tags=tags, run_name=tags["mlflow.runName"])
        self._client, self.run_id = client, created.info.run_id
        params = [Param(k, v) for k, v in params_of(run, commit, self._image).items()]
        for start in range(0, len(params), BATCH_TAGS):
            client.log_batch(self.run_id, params=params[start:start + BATCH_TAGS])
        # A takeover whose MLflow run is not found: what its record kept.
        self._log_rows(metric_rows(run) if self._resumed else [])
        return client

    def _run_of(self, client: "MlflowClient", experiment: str, run_id: str) -> Any:
        """The MLflow run (an ``mlflow.entities.Run``) of tfmesos run
        ``run_id`` in ``experiment``, or None."""
        found = client.search_runs([experiment], filter_string="tags.`%s` = '%s'" % (
            RUN_ID_TAG, run_id.replace("'", "")), max_results=1)
        return found[0] if found else None

    def _end_gone_runs(self, client: "MlflowClient", experiment: str, run_id: str) -> None:
        """End the MLflow runs of ``experiment`` left RUNNING by a tfrun that
        is gone (``mlflow_mapping.gone_run_end``), but this run's (a
        takeover carries it on); one line each for ``say``. What fails here
        only leaves them as they were."""
        from mlflow.entities import RunTag

        with contextlib.suppress(Exception):
            running = client.search_runs([experiment], filter_string="attributes.status = "
                                         "'RUNNING'", max_results=GONE_SEARCH)
            for found in running:
                tags = found.data.tags
                if tags.get(RUN_ID_TAG) == run_id:
                    continue
                ending = gone_run_end(tags, gone, read_run, time.time())
                if ending is None:
                    continue
                with contextlib.suppress(Exception):
                    client.log_batch(found.info.run_id, tags=[
                        RunTag(CLOSED_TAG, ending.why), RunTag("tfmesos.outcome", ending.outcome)])
                    client.set_terminated(found.info.run_id, ending.status,
                                          end_time=max(ending.end_time,
                                                       found.info.start_time or 0))
                    self._closed_gone.append(
                        "MLflow: ended the run %s (tfmesos run %s) %s: %s" % (
                            found.info.run_id, tags.get(RUN_ID_TAG), ending.status,
                            ending.why))

    def _experiment_id(self, client: "MlflowClient") -> str:
        from mlflow.exceptions import MlflowException

        found = client.get_experiment_by_name(self.spec.experiment)
        if found is not None:
            return found.experiment_id
        try:
            return client.create_experiment(self.spec.experiment)
        except MlflowException:   # another run made it meanwhile
            found = client.get_experiment_by_name(self.spec.experiment)
            if found is None:
                raise
            return found.experiment_id

    def _flush(self) -> None:
        """Log the metrics that wait, ``BATCH_METRICS`` values a call (once
        the MLflow run is open); a batch MLflow refuses is counted, not
        retried, and the rest goes on."""
        with self._lock:
            self._flush_asked = False
        if self.run_id is None:
            return
        while True:
            taken: list[tuple[str, tuple[Point, ...]]] = []
            with self._lock:
                count = 0
                while self._queued and count < BATCH_METRICS:
                    task, points = self._queued.popleft()
                    values = sum(len(values) for _, _, values in points)
                    self._queued_values -= values
                    count += values
                    taken.append((task, points))
            if not taken:
                return
            rows: list[Row] = []
            for task, points in taken:
                found, left_out = point_rows(self._keys, task, points)
                rows.extend(found)
                self.left_out += left_out
            self._log_rows(rows)

    def _log_rows(self, rows: list[Row]) -> None:
        from mlflow.entities import Metric

        for start in range(0, len(rows), BATCH_METRICS):
            batch = rows[start:start + BATCH_METRICS]
            try:
                self._client.log_batch(self.run_id, metrics=[Metric(k, v, t, s)
                                                             for k, v, t, s in batch])
            except Exception as exc:   # MLflow's, the network's: counted, said at the end
                self.failed_values += len(batch)
                self._batch_error = self._batch_error or one_line(exc)
            else:
                self.logged_values += len(batch)

    def _close(self, run: RunFile, directory: Optional[str]) -> None:
        from mlflow.entities import RunTag

        client = self._client if self.run_id is not None else self._open(run, directory)
        run_id = self.run_id
        assert run_id is not None   # (_open opened the MLflow run, or raised)
        status = "FAILED"
        try:
            self._flush()
            with tempfile.TemporaryDirectory(prefix="tfmesos-mlflow-") as staging:
                left_out = self._stage(run, directory, staging)
                tags = tags_of(run, directory)
                tags.update({"tfmesos.logs_%s" % why: ",".join(names)[:8000]
                             for why, names in left_out.items() if names})
                missed = self.dropped + self.left_out + self.failed_values
                if missed:
                    tags["tfmesos.metrics_not_logged"] = str(missed)
                run_tags = [RunTag(k, v) for k, v in tags.items()]
                for start in range(0, len(run_tags), BATCH_TAGS):
                    client.log_batch(run_id, tags=run_tags[start:start + BATCH_TAGS])
                client.log_artifacts(run_id, staging)
            status = mlflow_status(run.outcome.status)
        finally:
            client.set_terminated(run_id, status, end_time=epoch_ms(run.timings.finished))

    def _stage(self, run: RunFile, directory: Optional[str], staging: str) -> dict[str, list[str]]:
        """Copy what is uploaded into ``staging``: run.json, report.html
        (written into the run directory too) and each attempt's logs, a log
        over ``log_cap`` as its tail, none once ``logs_cap`` is spent;
        returns {"truncated": [names], "skipped": [names]}."""
        with open(os.path.join(staging, "run.json"), "w", encoding="utf-8") as handle:
            json.dump(run.to_dict(), handle, indent=1)
            handle.write("\n")
        staged = os.path.join(staging, REPORT)
        try:
            if not directory:
                raise OSError("no run directory")
            shutil.copyfile(write_report(Run(directory, run)), staged)
        except Exception:   # no run directory, or it cannot be written: the copy only
            with contextlib.suppress(Exception):
                # (without a directory: "", which the report leaves out as it does None)
                write_report(Run(directory or "", run), staged)
        left_out: dict[str, list[str]] = {"truncated": [], "skipped": []}
        if not directory:
            return left_out
        budget = self.logs_cap
        for name in log_names(run):
            path = os.path.join(directory, name)
            try:
                size = os.stat(path).st_size
            except OSError:
                continue
            keep = min(size, self.log_cap)
            if keep > budget:
                left_out["skipped"].append(name)
                continue
            budget -= keep
            copy_tail(path, os.path.join(staging, name), keep, size)
            if keep < size:
                left_out["truncated"].append(name)
        return left_out


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:   # no name for this uid
        return str(os.getuid())


__all__ = ["MlflowLogger", "import_mlflow", "TIMEOUT"]
