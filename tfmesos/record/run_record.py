"""The run directory: what a run leaves behind for whoever looks into it.

``./tfmesos-runs/<name>-<run id>/`` by default (``run_dirs``:
``$TFMESOS_RUNS_DIR`` instead of ``./tfmesos-runs``; ``tfrun --run-dir`` /
``cluster(run_dir=)`` name the directory itself) holds

* one log file per task, attempt and stream, written from the output the
  tasks forward (replica mode): ``ps.0.stdout``, ``ps.0.stderr``,
  ``worker.1.attempt2.stdout`` (the first attempt has no ``attemptN``);
* ``run.json``, rewritten atomically (a temporary file, then a rename) as
  the run goes, at ``save_pace``'s pace and at its milestones: a
  ``schema.RunFile``, whose classes document every field
  (``docs/run.schema.json`` is their JSON Schema; the README has a table).
"""

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Optional

from ..exceptions import TFMesosError
from . import run_dir_claim, run_dir_lock
from .attempt_book import AttemptBook
from .core_protocols import Launched, Slot
from .liveness import this_process
from .metric_series import Metrics, Point, Values
from .run_dirs import run_json_text, write_run_json
from .run_outcome import RunOutcome
from .save_pace import SavePace
from .schema import (
    SCHEMA_VERSION,
    Attempt,
    Logs,
    Outcome,
    Relaunch,
    Restart,
    RunFile,
    SandboxTail,
    Shipped,
    Takeover,
    Task,
    Timings,
)
from .task_logs import TaskLogs, log_name
from .times import anchor, now, parse_timestamp, timestamp

if TYPE_CHECKING:
    from addict import Dict

log = logging.getLogger(__name__)


class RunRecord(RunOutcome):
    """The record of one run, kept in memory (a ``schema.RunFile``) and, with
    a ``directory`` (made anew: ``new_directory``; ``run_dirs.make_run_dir``),
    in the run directory; ``header`` is a RunFile with the
    run's id, name, mode, master, command and jobs. ``launched`` may be
    called from any thread; the rest from the thread that handles the
    run's events."""

    def __init__(self, directory: Optional[str], header: RunFile, slots: Iterable[Slot],
                 forwarding: bool, new_directory: bool = False) -> None:
        self.directory = directory
        anchor()   # this run's times: on the wall clock as it reads now
        self._lock = threading.RLock()
        self._forwarding = forwarding
        self._next_hint: Optional[str] = None   # hint_next_outcome's
        self._hints_checked: set[Hashable] = set()   # failed attempts no hint applied to
        self._run = dataclasses.replace(
            header, schema_version=SCHEMA_VERSION, framework_id=None,
            tasks=[Task(name=s.name, job=s.job.name, index=s.index) for s in slots],
            outcome=Outcome(), timings=Timings(), restarts=[], relaunches=[], shipped=None,
            scheduler=this_process())
        self._metrics = Metrics(now())   # what the tasks log (tfmesos.log_metrics)
        self._run.metrics = self._metrics.series
        # Told every task's points as they come (task name, points), in the
        # thread that records them: ``MlflowLogger.metrics``, which only queues.
        self.on_metrics: Optional[Callable[[str, tuple[Point, ...]], None]] = None
        self._restart = 0      # the whole restart new attempts belong to
        self._tasks = {task.name: task for task in self._run.tasks}
        self._attempts = AttemptBook(self._run.mode)
        # The first file of the run directory that could not be written
        # (a full disk): said once, as a warning; the run goes on.
        self.unwritable: Optional[str] = None
        self.run_json_error: Optional[OSError] = None   # the last save's failure (None: saved)
        self._logs = TaskLogs(directory, self._lock, on_failure=self._unwritten)
        self._dirty, self._pace = True, SavePace()
        self._made_directory = False   # this record made it (``discard`` removes it)
        if directory is not None:
            self._made_directory = run_dir_claim.claim(directory, new_directory, header.run_id)

    def resume(self, previous: RunFile) -> None:
        """Carry on the record ``previous`` (a ``RunFile``) that the run's
        scheduler before this one kept (``tfmesos attach``, a detached
        run's new scheduler task): its tasks and attempts, restarts,
        relaunches, milestones, metrics and log files; this process is the
        run's scheduler from now on."""
        with self._lock:
            run = self._run
            known = {task.name for task in run.tasks}
            if {task.name for task in previous.tasks} != known:
                raise TFMesosError("the record of run %s names other tasks than its jobs (%s): "
                                   "it is not this run's" % (previous.run_id, ", ".join(sorted(
                                       known))))
            run.framework_id = previous.framework_id
            run.tasks = previous.tasks
            run.restarts, run.relaunches = previous.restarts, previous.relaunches
            run.takeovers = previous.takeovers
            run.timings = dataclasses.replace(previous.timings, finished=None)
            run.shipped = previous.shipped or run.shipped
            self._tasks = {task.name: task for task in run.tasks}
            self._attempts.adopt(run.tasks)
            self._restart = len(previous.restarts)
            began = parse_timestamp(previous.timings.submitted)
            self._metrics = Metrics(began if began is not None else now())
            self._metrics.adopt(previous.metrics, previous.metrics_dropped)
            run.metrics, run.metrics_dropped = self._metrics.series, self._metrics.dropped
            self._logs.adopt(name for attempt in self._attempts.attempts() if attempt.logs
                             for name in (attempt.logs.stdout, attempt.logs.stderr))
            self._dirty = True

    # -- what happened ----------------------------------------------------

    def taken_over(self, attempt: int, how: str) -> None:
        """This process took the run over as its scheduler number
        ``attempt`` (``how``: "tfmesos attach", "detached scheduler task
        N"): the framework is its own from now on."""
        with self._lock:
            self._run.takeovers.append(Takeover(time=timestamp(), scheduler_attempt=attempt,
                                                how=how))
        self.save()

    def submitted(self) -> None:
        if self._run.timings.submitted is None:
            self._metrics.began = now()
        self._set_timing("submitted")

    def shipped(self, what: Mapping[str, Any]) -> None:
        """``tfrun --ship``: what goes to every task (``Shipment.record``'s dict)."""
        with self._lock:
            self._run.shipped = Shipped.from_dict(what)
            self._dirty = True

    def launched(self, launch: Launched) -> None:
        """A new attempt (``scheduler.Launch``) goes to Mesos (the driver's thread)."""
        slot, number = launch.slot, launch.attempt
        logs = None
        if self._forwarding:
            logs = Logs(stdout=log_name(slot.name, number, "stdout"),
                        stderr=log_name(slot.name, number, "stderr"))
        attempt = Attempt(attempt=number, restart=self._restart, task_id=launch.task_id,
                          agent_id=launch.agent_id, hostname=launch.assignment.hostname,
                          launched=timestamp(), logs=logs)
        with self._lock:
            self._attempts.add(self._tasks[slot.name], attempt)
            self._dirty = True

    def status(self, status: "Dict") -> None:
        """A Mesos status update (a ``TaskStatus``: ``AttemptBook.status``)."""
        with self._lock:
            if self._attempts.status(status):
                self._dirty = True

    def registered(self, task_id: str, address: str) -> None:
        with self._lock:
            if self._attempts.registered(task_id, address):
                self._dirty = True

    def exited(self, task_id: str, code: Optional[int], when: Optional[float] = None,
               usage: Optional[Mapping[str, Any]] = None, stopped: Optional[bool] = None) -> None:
        """The task's exit frame (``when``: the ``times.now()`` it came; ``usage``:
        what its command used, ``usage_table.clean_usage``'s dict;
        ``stopped``: whether the run's stop cut its command short, None when
        the frame does not say)."""
        with self._lock:
            if self._attempts.exited(task_id, code, when, usage, stopped):
                self._dirty = True

    def stopping(self, task_id: str) -> None:
        """The run stops the attempt ``task_id`` (a stop message, a kill):
        unless it ended or sent its exit frame before, it ends as stopped
        (``STOPPED_BY``), not as the clean end its task then makes."""
        with self._lock:
            self._attempts.stopping(task_id)

    def awaiting_mesos(self) -> bool:
        """Whether an attempt's exit frame came but not Mesos' terminal update."""
        with self._lock:
            return self._attempts.awaiting_mesos()

    def metrics(self, task_id: Optional[str], points: Iterable[Point], dropped: int = 0,
                source: Optional[str] = None) -> None:
        """Points the attempt ``task_id`` logged (``core.events.TaskMetrics``),
        kept under its task's name; ``task_id`` None: under ``source``
        (``client``: the process that runs cluster())."""
        with self._lock:
            task, _ = self._attempts.get(task_id)
            name = task.name if task is not None else source
            if name is None:
                return
            points = tuple(points)
            self._metrics.add(name, points, dropped)
            self._run.metrics_dropped = self._metrics.dropped
            self._dirty = True
            if self.on_metrics is not None:
                self.on_metrics(name, points)

    def latest_metrics(self) -> list[tuple[str, int, Values, Optional[float]]]:
        """``[(task, step, [(name, value)], steps/s or None)]`` of every task
        that logged metrics, in the run's task order (``client`` last)."""
        order = {name: index for index, name in enumerate(self._tasks)}
        with self._lock:
            found: list[tuple[str, int, Values, Optional[float]]] = []
            for task in sorted(self._metrics.tasks(), key=lambda t: order.get(t, len(order))):
                latest = self._metrics.latest(task)
                assert latest is not None   # (tasks() are those with series)
                step, values = latest
                found.append((task, step, values, self._metrics.steps_per_second(task)))
            return found

    def metrics_left_out(self) -> tuple[int, Optional[str]]:
        """How many points of the tasks' metrics were left out, and what
        ``metric_series.left_out_note`` says of them (None: none)."""
        with self._lock:
            return self._metrics.dropped, self._metrics.left_out_note()

    def sandbox_tail(self, task_id: str, tail: Mapping[str, list[str]]) -> None:
        """What the attempt ``task_id`` wrote in its Mesos sandbox: ``tail``,
        {"stdout": [lines], "stderr": [lines]} (``core.sandbox_tails``)."""
        with self._lock:
            if self._attempts.sandbox_tail(task_id, tail):
                self._dirty = True

    def last_sandbox_tail(self, task_name: str) -> Optional[tuple[int, SandboxTail]]:
        """(attempt number, its ``SandboxTail``) of the task's last attempt,
        or None when it has none."""
        task = self._tasks.get(task_name)
        last = task.last if task else None
        if last is None or last.sandbox_tail is None:
            return None
        return last.attempt, last.sandbox_tail

    def restarting(self, restart: int, cause: str, task: Optional[str], message: str,
                   delay: float) -> None:
        """Whole restart number ``restart`` begins (``delay`` s from now)."""
        with self._lock:
            self._restart = restart
            self._run.restarts.append(Restart(restart=restart, time=timestamp(), cause=cause,
                                              task=task, message=message, delay=delay))
            self._hint_failed_attempts()
        self.save()

    def relaunching(self, task: str, cause: str, message: str, agent_id: Optional[str],
                    address: Optional[str]) -> None:
        """A sticky relaunch of ``task`` (to ``address`` on ``agent_id``) begins."""
        with self._lock:
            self._run.relaunches.append(Relaunch(task=task, time=timestamp(), cause=cause,
                                                 message=message, agent_id=agent_id,
                                                 address=address))
            self._hint_failed_attempts()
        self.save()

    def back(self, task: str) -> None:
        """The sticky relaunch of ``task`` registered again."""
        with self._lock:
            for relaunch in reversed(self._run.relaunches):
                if relaunch.task == task and relaunch.back is None:
                    relaunch.back = timestamp()
                    break
            self._dirty = True

    def all_registered(self, framework_id: Optional[str],
                       first_offer: Optional[float] = None) -> None:
        """The cluster is complete; ``first_offer``: ``times.now()`` of the
        first offers (kept now: a scheduler that dies never finishes)."""
        with self._lock:
            self._run.framework_id = framework_id or self._run.framework_id
            if first_offer and self._run.timings.first_offer is None:
                self._run.timings.first_offer = timestamp(first_offer)
        self._set_timing("all_registered")
        self.save()

    def finish(self, framework_id: Optional[str] = None, first_offer: Optional[float] = None,
               status: str = "succeeded") -> None:
        """The run stopped: ``conclude``, and the logs are closed."""
        self.conclude(framework_id, first_offer, status)
        self._logs.close()
        if self.directory is not None:
            run_dir_lock.let_go(self.directory)

    def conclude(self, framework_id: Optional[str] = None, first_offer: Optional[float] = None,
                 status: str = "succeeded") -> None:
        """The run's end as far as it is known, saved: ``status`` unless an
        outcome was recorded; every attempt gets its end, and each failed
        one its hint. (Also before what may end this process: a detached
        run's scheduler tears its framework down, which ends its own task.)"""
        self.outcome(status)
        self._end_attempts()
        with self._lock:
            self._hint_failed_attempts()
            if framework_id and framework_id != self._run.framework_id:
                self._run.framework_id = framework_id
                self._dirty = True
            if first_offer and self._run.timings.first_offer is None:   # kept when taken over
                self._run.timings.first_offer = timestamp(first_offer)
                self._dirty = True
        self._set_timing("finished")
        if self._dirty:   # concluded before (a detached run's scheduler): written then
            self.save()

    # -- logs -------------------------------------------------------------

    def output(self, task_id: str, stream: str, text: str) -> None:
        """Append forwarded output to the attempt's log file."""
        _, attempt = self._attempts.get(task_id)
        if attempt is not None and attempt.logs:
            self._logs.write(attempt.logs.named(stream), text)

    def log_path(self, task_name: str, stream: str = "stderr") -> Optional[str]:
        """The path of the last attempt's ``stream`` log of ``task_name``, or None."""
        task = self._tasks.get(task_name)
        return self._logs.path(task.last if task else None, stream)

    def tail(self, task_name: str, stream: str = "stderr", lines: int = 10) -> list[str]:
        """The last ``lines`` lines of a task's last attempt's log."""
        task = self._tasks.get(task_name)
        return self._logs.tail(task.last if task else None, stream, lines)

    def discard(self) -> None:
        """Keep no record: the run was refused before anything of it ran
        (what --ship would pack), and its error says all of it. Its
        run.json goes, and the run directory with it where this record
        made it (a --run-dir that was there stays); kept in memory only
        from now on."""
        with self._lock:
            directory, self.directory = self.directory, None
            self._logs = TaskLogs(None, self._lock, on_failure=self._unwritten)
        if directory is not None:
            run_dir_claim.release(directory, self._made_directory)

    # -- saving -----------------------------------------------------------

    def flush(self) -> None:
        """Save run.json when something changed, at ``save_pace``'s pace."""
        if self._dirty and self._pace.due():
            self.save()

    def save(self) -> None:
        if self.directory is None:
            return
        began = time.monotonic()
        with self._lock:
            text = run_json_text(self._run.to_dict())
            self._dirty = False
            failure = write_run_json(self.directory, text)
            self.run_json_error = failure
            if failure is not None:
                self._unwritten("run.json", failure)
            # After run.json, which makes the run findable: on a disk with
            # room for a few files more, the empty logs took it.
            self._create_logs()
        self._pace.saved(began)

    def snapshot(self) -> dict[str, Any]:
        """What run.json holds, as a dict (a copy)."""
        with self._lock:
            return self._run.to_dict()

    def run_file(self) -> RunFile:
        """What run.json holds, as a RunFile (a copy)."""
        return RunFile.from_dict(self.snapshot())

    # -- helpers ----------------------------------------------------------

    def _unwritten(self, name: str, exc: OSError) -> None:
        """A file of the run directory could not be written: the first one
        is said (``tfrun: warning: ...``), none after it."""
        if self.unwritable is not None:
            return
        self.unwritable = "cannot write %s in %s: %s" % (name, self.directory,
                                                         exc.strerror or exc)
        log.warning("warning: %s; the run goes on, but its record and task logs there may "
                    "stay incomplete", self.unwritable)

    def _create_logs(self) -> None:
        """Every forwarding attempt has both files, empty until output comes."""
        for attempt in self._attempts.attempts():
            if attempt.logs:
                self._logs.create(attempt.logs)

    def _end_attempts(self) -> None:
        """Every attempt without a terminal state gets its end
        (``AttemptBook.end_unreported``)."""
        with self._lock:
            if self._attempts.end_unreported(self._run.outcome):
                self._dirty = True

    def _set_timing(self, name: str) -> None:
        with self._lock:
            if getattr(self._run.timings, name) is None:
                setattr(self._run.timings, name, timestamp())
                self._dirty = True
