"""The tfmesos runs a Mesos master knows, from any machine that reaches it:
``tfmesos runs --master M`` lists them (running, failing over, finished
with their outcome; ``cli.kill``: ``tfmesos kill RUN`` tears one down).
Which of them is the caller's run is ``cli.run_lookup``'s to say.

A run is a framework whose labels carry ``tfmesos.run_id``
(``protocol.labels``); the master keeps finished frameworks for a while
(Mesos' ``--max_completed_frameworks``, 50 by default). A detached run
(``tfmesos.detached``) has its scheduler as a task of its own framework
(``labels.scheduler_task_id``). Every run says how it ended in
``tfmesos.outcome`` before its teardown (``record.outcomes.outcome_text``:
``succeeded``, ``failed (exit 5, worker:0)``, ``killed (by NAME)``, ...),
and a failed one why in ``tfmesos.reason`` (``worker:0: /bin/sh: 1: python:
not found``), which ``tfmesos runs --master`` prints under its table.
"""

import dataclasses
import sys
import time
from typing import Optional

from ..mesos.master_reads import MasterReader
from ..protocol import labels as run_labels
from .tables import duration_text, fit_last_column, printable, table

MAX_OUTCOME = 40     # characters of a finished run's outcome the STATE column shows


@dataclasses.dataclass
class ClusterRun:
    run_id: str
    framework_id: str
    name: str
    state: str              # running, disconnected (its scheduler is away), finished
    registered: Optional[float]
    ended: Optional[float]
    jobs: str
    command: str
    tasks_running: int      # its job tasks running (a detached run's scheduler task not counted)
    mode: str = ""
    outcome: Optional[str] = None          # the tfmesos.outcome label, when the run set it
    detached: bool = False
    failover_until: Optional[float] = None  # disconnected: when the master gives up waiting
    reason: Optional[str] = None           # the tfmesos.reason label: a failure's evidence

    def state_text(self, now=None):
        """What STATE shows: ``running``, ``running (detached)``, ``failing
        over (5h59m left)``, the outcome of a finished run (``succeeded``,
        ``failed (exit 5, worker:0)``, ``killed (by NAME)``, ... cut to
        MAX_OUTCOME), else ``finished``."""
        if self.state == "finished":
            return cut(printable(one_line(self.outcome)), MAX_OUTCOME) if self.outcome \
                else "finished"
        notes = []
        if self.state == "disconnected":
            base = "failing over"
            if self.failover_until is not None:
                now = time.time() if now is None else now
                notes.append("%s left" % duration_text(max(0.0, self.failover_until - now)))
        else:
            base = self.state
        if self.detached:
            notes.append("detached")
        return base + (" (%s)" % ", ".join(notes) if notes else "")


def one_line(text):
    """``text`` with its runs of white space (newlines too) as one space."""
    return " ".join(str(text).split())


def cut(text, width):
    """``text`` on one line, at most ``width`` characters (``...`` where cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:max(0, width - 3)] + "..."


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def cluster_run(framework, finished) -> Optional[ClusterRun]:
    """The run of one framework of ``/master/state`` (or ``/master/frameworks``),
    None when it is no tfmesos run."""
    found = run_labels.label_map(framework.get("labels"))
    if run_labels.RUN_ID not in found:
        return None
    if finished:
        status = "finished"
    else:
        status = "running" if framework.get("connected", True) else "disconnected"
    # A master that says when the framework went away gives the time left;
    # Mesos does not (unregistered_time is set at its removal only).
    failover_until = None
    unregistered, timeout = (_number(framework.get("unregistered_time")),
                             _number(framework.get("failover_timeout")))
    if status == "disconnected" and unregistered and timeout is not None:
        failover_until = unregistered + timeout
    return ClusterRun(
        run_id=found[run_labels.RUN_ID], framework_id=framework.get("id", ""),
        name=framework.get("name", ""), state=status,
        registered=_number(framework.get("registered_time")),
        ended=_number(framework.get("unregistered_time")) if finished else None,
        jobs=found.get(run_labels.JOBS, ""), command=found.get(run_labels.COMMAND, ""),
        tasks_running=sum(1 for task in framework.get("tasks") or []
                          if isinstance(task, dict) and task.get("state") == "TASK_RUNNING"
                          and not run_labels.is_scheduler_task(str(task.get("id", "")))),
        mode=found.get(run_labels.MODE, ""), outcome=found.get(run_labels.OUTCOME) or None,
        detached=found.get(run_labels.DETACHED) == "1", failover_until=failover_until,
        reason=" ".join(found.get(run_labels.REASON, "").split()) or None)


def run_frameworks(state) -> "list[tuple[dict, bool, ClusterRun]]":
    """(framework, whether it finished, its run) of each framework of a
    master's ``/master/state`` that is a tfmesos run, newest first."""
    found = []
    for finished, key in ((False, "frameworks"), (True, "completed_frameworks")):
        for framework in state.get(key) or []:
            run = cluster_run(framework, finished) if isinstance(framework, dict) else None
            if run is not None:
                found.append((framework, finished, run))
    found.sort(key=lambda item: item[2].registered or 0, reverse=True)
    return found


def cluster_runs(state) -> "list[ClusterRun]":
    """The tfmesos runs in a master's ``/master/state``, newest first."""
    return [run for _, _, run in run_frameworks(state)]


def framework_of(state, framework_id):
    """(the framework ``framework_id`` of a ``/master/state`` or
    ``/master/frameworks`` document, whether it has finished); (None, True)
    when the master no longer knows it."""
    for finished, key in ((False, "frameworks"), (True, "completed_frameworks")):
        for framework in state.get(key) or []:
            if isinstance(framework, dict) and framework.get("id") == framework_id:
                return framework, finished
    return None, True


def age_text(moment, now):
    if not moment:
        return "-"
    return duration_text(max(0.0, now - moment)) + " ago"


def print_cluster_runs(runs, out, width, limit=None, now=None, notes=None):
    """The runs table on ``out``; that there are none, or more than
    ``limit``, on ``notes`` (default stderr: a script reading the table's
    rows reads runs only)."""
    now = time.time() if now is None else now
    notes = sys.stderr if notes is None else notes
    shown = runs if limit is None else runs[:max(0, limit)]
    if not shown:
        notes.write("the master knows no tfmesos runs\n")
        return
    rows = [("ID", "NAME", "STATE", "STARTED", "JOBS", "RUNNING", "COMMAND")]
    # What any framework may have put in its name and labels is shown
    # escaped (printable): never a terminal's control sequence, never a line.
    for run in shown:
        rows.append((printable(run.run_id), printable(run.name), run.state_text(now),
                     age_text(run.registered, now), printable(run.jobs or "-"),
                     str(run.tasks_running), printable(run.command or "-")))
    table(fit_last_column(rows, width), out)
    # Why the finished runs shown failed, each in one line under the table.
    for run in shown:
        if run.state == "finished" and run.reason:
            out.write(cut(printable("%s: %s" % (run.run_id, run.reason)), max(20, width))
                      + "\n")
    if len(shown) < len(runs):
        out.flush()
        notes.write("(%d older runs: --all shows them)\n" % (len(runs) - len(shown)))


def reader(master, environ):
    return MasterReader(master, environ=environ)
