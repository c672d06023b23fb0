"""Logging a run to MLflow (``tfrun --mlflow``, ``cluster(mlflow=...)``),
from the process that runs it: the tasks need no MLflow.

``MlflowLogger.begin`` (when the run starts) opens an MLflow run with the
run's parameters and first tags; ``end`` (once run.json is final) writes
report.html into the run directory, then logs the metrics the tasks logged
(every kept point, with its step and time; ``log_batch``), the final tags,
and run.json, report.html and the task logs as artifacts (the run
directory's layout, so the report's links to the logs work), and ends the
MLflow run FINISHED, FAILED or KILLED. MLflow is imported in a thread of
its own (``tfmesos-mlflow``), which does all the talking; ``end`` waits for
it ``timeout`` seconds at most. Whatever goes wrong there is one line
through ``warn``, never the run's failure.
"""

import contextlib
import getpass
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, Callable, Optional

from .history import Run
from .mlflow_mapping import (
    MlflowSpec,
    epoch_ms,
    is_local_store,
    metric_rows,
    mlflow_status,
    params_of,
    tags_of,
)
from .report import REPORT, write_report
from .schema import RunFile, safe_file_name

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

TIMEOUT = 60.0                  # seconds the end of a run waits for MLflow at most
LOG_CAP = 10 * 1000 * 1000      # bytes of one log uploaded: a larger one's tail
LOGS_CAP = 100 * 1000 * 1000    # bytes of logs uploaded in all: the rest are skipped
GIT_TIMEOUT = 5.0
# MLflow's HTTP client retries a failed request 7 times with a doubling
# back-off, and waits 120 s for an answer: far too long for a run's end.
# Set in this process unless the user set them (``_set_environment``).
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "15"}
BATCH_METRICS = 1000            # MLflow's most metrics per log_batch
BATCH_TAGS = 100                # and params, and tags


class MlflowLogger:
    """One MLflow run for one tfmesos run, at ``spec`` (an
    ``mlflow_mapping.MlflowSpec``); ``say(text)``: the MLflow run's id once
    logged; ``warn(text)``: why it is not (one line each, "MLflow: ...")."""

    def __init__(self, spec: MlflowSpec, say: Callable[[str], None], warn: Callable[[str], None],
                 timeout: float = TIMEOUT, log_cap: int = LOG_CAP, logs_cap: int = LOGS_CAP,
                 environ: Optional[MutableMapping[str, str]] = None) -> None:
        self.spec = spec
        self._say, self._warn = say, warn
        self.timeout, self.log_cap, self.logs_cap = timeout, log_cap, logs_cap
        self._environ: MutableMapping[str, str] = os.environ if environ is None else environ
        # (job, the event set once it ran: the last job's)
        self._jobs: queue.Queue[tuple[Callable[[], object], Optional[threading.Event]]] = \
            queue.Queue()
        self._thread: Optional[threading.Thread] = None
        self._failed: Optional[str] = None       # one line: why logging stopped
        self._client: Any = None   # an MlflowClient, once a run was opened
        self.run_id: Optional[str] = None        # the MLflow run's, once opened
        self._source: Optional[str] = None       # where the project's git commit is read
        self._image: Optional[str] = None

    # -- what the run calls (its own thread) --------------------------------------------------

    def begin(self, run: RunFile, directory: Optional[str] = None, source: Optional[str] = None,
              image: Optional[str] = None) -> None:
        """The run began: open the MLflow run (``run``: its ``schema.RunFile``
        now; ``directory``: its run directory; ``source``: the project's
        directory, whose git commit is a parameter; ``image``: the tasks')."""
        self._source, self._image = source, image
        self._submit(lambda: self._open(run, directory))

    def end(self, run: RunFile, directory: Optional[str]) -> None:
        """The run ended (``run``: its final ``schema.RunFile``): log the rest
        and end the MLflow run, waiting ``timeout`` s at most."""
        done = threading.Event()
        self._submit(lambda: self._close(run, directory), done)
        try:
            finished = done.wait(self.timeout)
        except KeyboardInterrupt:
            self._warn("MLflow: interrupted while logging to %s; the MLflow run may be "
                       "incomplete" % self.spec.tracking_uri)
            return
        if not finished:
            self._warn("MLflow: gave up after %.0f s logging to %s; the MLflow run may be "
                       "incomplete" % (self.timeout, self.spec.tracking_uri))
        elif self._failed is not None:
            self._warn("MLflow: the run is not logged to %s: %s" % (
                self.spec.tracking_uri, self._failed))
        else:
            self._say("MLflow: run %s in experiment '%s' at %s" % (
                self.run_id, self.spec.experiment, self.spec.tracking_uri))

    def _submit(self, job: Callable[[], object], done: Optional[threading.Event] = None) -> None:
        if self._thread is None:
            self._set_environment()
            self._thread = threading.Thread(target=self._work, name="tfmesos-mlflow",
                                            daemon=True)
            self._thread.start()
        self._jobs.put((job, done))

    def _set_environment(self) -> None:
        """MLflow's settings, unless the user made them: ``HTTP_DEFAULTS``
        and, for a file store, ``MLFLOW_ALLOW_FILE_STORE`` (MLflow 3.7+
        refuses one unless asked; ./mlruns is the default here). Set in the
        run's thread before MLflow's starts, once the embedded master took
        the tasks' environment (``ClusterRun.start``)."""
        for name, value in HTTP_DEFAULTS.items():
            self._environ.setdefault(name, value)
        if is_local_store(self.spec.tracking_uri):
            self._environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")

    def _work(self) -> None:
        while True:
            job, done = self._jobs.get()
            try:
                if self._failed is None:
                    job()
                elif done is not None and self.run_id is not None:
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
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        client = MlflowClient(self.spec.tracking_uri)
        experiment = self._experiment_id(client)
        commit = git_commit(self._source or os.getcwd())
        tags = tags_of(run, directory)
        tags.update({"mlflow.user": _user(), "mlflow.source.type": "LOCAL",
                     "mlflow.source.name": "tfrun" if run.mode == "replica" else "cluster()"})
        if commit:
            tags["mlflow.source.git.commit"] = commit
        created = client.create_run(experiment, start_time=epoch_ms(run.timings.submitted),
                                    tags=tags, run_name=tags["mlflow.runName"])
        self._client, self.run_id = client, created.info.run_id
        params = [Param(k, v) for k, v in params_of(run, commit, self._image).items()]
        for start in range(0, len(params), BATCH_TAGS):
            client.log_batch(self.run_id, params=params[start:start + BATCH_TAGS])
        return client

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

    def _close(self, run: RunFile, directory: Optional[str]) -> None:
        from mlflow.entities import Metric, RunTag

        client = self._client if self.run_id is not None else self._open(run, directory)
        run_id = self.run_id
        assert run_id is not None   # (_open opened the MLflow run, or raised)
        status = "FAILED"
        try:
            metrics = [Metric(k, v, t, s) for k, v, t, s in metric_rows(run)]
            for start in range(0, len(metrics), BATCH_METRICS):
                client.log_batch(run_id, metrics=metrics[start:start + BATCH_METRICS])
            with tempfile.TemporaryDirectory(prefix="tfmesos-mlflow-") as staging:
                left_out = self._stage(run, directory, staging)
                tags = tags_of(run, directory)
                tags.update({"tfmesos.logs_%s" % why: ",".join(names)[:8000]
                             for why, names in left_out.items() if names})
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


def log_names(run: RunFile) -> list[str]:
    """The log file names of every attempt of ``run`` that are plain file
    names of its directory (``schema.safe_file_name``), in order."""
    names: list[str] = []
    for task in run.tasks:
        for attempt in task.attempts:
            if attempt.logs:
                for name in (attempt.logs.stdout, attempt.logs.stderr):
                    if safe_file_name(name) and name not in names:
                        names.append(name)
    return names


def copy_tail(source: str, target: str, keep: int, size: int) -> None:
    """Copy the last ``keep`` bytes of ``source`` (``size`` bytes long) to
    ``target``, after a line that says how much was left out."""
    with open(source, "rb") as reading, open(target, "wb") as writing:
        if keep < size:
            writing.write(b"[tfmesos: the first %d bytes of %d were left out]\n"
                          % (size - keep, size))
            reading.seek(size - keep)
        shutil.copyfileobj(reading, writing)


def git_commit(directory: str) -> Optional[str]:
    """``git rev-parse HEAD`` in ``directory``, or None (not a git checkout,
    no git, too slow)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError, ValueError):
        found = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=directory,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=GIT_TIMEOUT)
        commit = found.stdout.strip()
        if found.returncode == 0 and len(commit) in (40, 64) and all(
                c in "0123456789abcdef" for c in commit):
            return commit
    return None


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:   # no name for this uid
        return str(os.getuid())


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


__all__ = ["MlflowLogger", "git_commit", "log_names", "copy_tail", "TIMEOUT"]
