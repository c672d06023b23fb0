"""``tfmesos runs --master M --watch``: the runs table, then a line for each
change as it happens (a run started, a task's state changed, a run's
scheduler went away or came back, a run ended and how), until Ctrl-C.

The changes come from the master's operator event stream
(``mesos.operator_stream``, kept as ``/master/state`` would show it);
where the master refuses the stream, or from the moment the stream is
lost (said on stderr), ``/master/state`` is read again every
``POLL_INTERVAL`` seconds instead. Either way a change is what differs
between two views of the runs (``runs_view``): on the stream, the views
before and after each event; polled, two reads, which may skip a state
that came and went between them.
Mesos sends no event when a scheduler merely disconnects
(``Master::disconnect``, src/master/master.cpp), so on the stream a run
is seen failing over only once it is back or has ended.

Everything printed that a framework chose (its name, its labels, its
tasks' names) is shown escaped (``tables.printable``).
"""

import dataclasses
import queue
import time
from typing import Callable, Optional, TextIO

from ..mesos import operator_stream
from ..protocol import labels as run_labels
from ..protocol.labels import task_attempt, tasks_of
from .cluster_logs import slot_name
from .cluster_runs import ClusterRun, cut, print_cluster_runs, run_frameworks
from .tables import printable

POLL_INTERVAL = 2.0     # seconds between two reads of /master/state without a stream
MAX_LINE = 300          # characters of one change line at most


@dataclasses.dataclass
class RunView:
    """What a watch compares of one run: the run, and each task's (slot
    name, attempt, state) by task id, in the master's order."""

    run: ClusterRun
    tasks: dict


def runs_view(state) -> "dict[str, RunView]":
    """{framework id: RunView} of the tfmesos runs of a ``/master/state``,
    oldest first."""
    found = {}
    for framework, _, run in reversed(run_frameworks(state)):
        tasks = {}
        for task in tasks_of(framework):
            tasks[str(task["id"])] = (slot_name(task), task_attempt(task["id"]) or 0,
                                      str(task.get("state") or ""))
        found[run.framework_id] = RunView(run, tasks)
    return found


def _status(run: ClusterRun):
    return run.state, run.outcome if run.state == "finished" else None


def changes(before: "dict[str, RunView]", after: "dict[str, RunView]") -> "list[str]":
    """The lines that tell what changed from ``before`` to ``after``."""
    lines = []
    for framework_id, now in after.items():
        run, then = now.run, before.get(framework_id)
        name = printable(run.run_id)
        if then is None:
            lines.append("run %s started: %s (%s) %s" % (
                name, printable(run.name) or "-", printable(run.jobs or "-"),
                printable(run.command or "-")))
        elif _status(then.run) != _status(run) and run.state != "finished":
            lines.append("run %s %s" % (name, "failing over: its scheduler is away"
                                        if run.state == "disconnected"
                                        else "running: its scheduler is back"))
        old_tasks = then.tasks if then is not None else {}
        for task_id, (slot, attempt, state) in now.tasks.items():
            if old_tasks.get(task_id, (None, None, None))[2] != state:
                lines.append("run %s %s%s: %s" % (
                    name, printable(slot) or "-", " (attempt %d)" % attempt if attempt else "",
                    printable(state)))
        if run.state == "finished" and (then is None or _status(then.run) != _status(run)):
            lines.append("run %s ended: %s" % (name, run.state_text()))
            if run.reason:
                lines.append("run %s: %s" % (name, printable(run.reason)))
    return [cut(line, MAX_LINE) for line in lines]


class ChangeSource:
    """The lines of the changes of the master's runs after ``seen`` (a
    ``runs_view``), in order: ``next()`` waits for the next ones. From the
    stream, each event's own (``OperatorFeed``'s ``on_change``: a task
    that went STAGING, STARTING, RUNNING in a moment is seen in each);
    polled, what each read of ``/master/state``, every ``interval``
    seconds, shows changed since the one before. ``notify`` is told, in
    one line, why a stream that was had is no longer read."""

    def __init__(self, reader, seen, notify: Callable[[str], None],
                 interval: float = POLL_INTERVAL):
        self.reader, self.notify, self.interval = reader, notify, interval
        self._seen = seen
        self._lines: queue.Queue = queue.Queue()
        self.feed: Optional[operator_stream.OperatorFeed] = None
        try:
            self.feed = operator_stream.OperatorFeed.of(reader, self._changed)
            self.feed.read(self._changed)   # what changed before the stream began
        except operator_stream.StreamRefused:
            pass          # not served there: /master/state, read again and again
        except operator_stream.StreamLost as exc:
            self._lost(exc)

    def _changed(self, state) -> None:
        """(With the feed's lock held.)"""
        self._see(runs_view(state.state(run_labels.RUN_ID)))

    def _see(self, now) -> None:
        lines = changes(self._seen, now)
        self._seen = now
        if lines:
            self._lines.put(lines)

    def next(self) -> "list[str]":
        while self.feed is not None:
            try:
                return self._lines.get(timeout=1.0)   # a second at most: Ctrl-C is heard
            except queue.Empty:
                pass
            try:
                self.feed.read(lambda state: None)
            except operator_stream.StreamLost as exc:
                self._lost(exc)
        if self._lines.empty():
            time.sleep(self.interval)
            self._see(runs_view(self.reader.state()))
        lines = []
        while not self._lines.empty():
            lines.extend(self._lines.get())
        return lines

    def _lost(self, error) -> None:
        self.close()
        self.notify("%s: reading the master's state every %g s instead" % (error, self.interval))

    def close(self) -> None:
        if self.feed is not None:
            feed, self.feed = self.feed, None
            feed.close()


def watch_runs(reader, out: TextIO, width: int, limit: Optional[int],
               notify: Callable[[str], None], interval: float = POLL_INTERVAL,
               clock: Callable[[], float] = time.time) -> None:
    """Print the runs table of ``reader``'s master, then each change, each
    line after the local time it was seen at, until KeyboardInterrupt."""
    state = reader.state()
    # (its notes with its changes: a watch's stdout is a log, not a table)
    print_cluster_runs([run for _, _, run in run_frameworks(state)], out, width, limit,
                       notes=out)
    out.flush()
    source = ChangeSource(reader, runs_view(state), notify, interval)
    try:
        while True:
            lines = source.next()
            stamp = time.strftime("%H:%M:%S", time.localtime(clock()))
            for line in lines:
                out.write("%s %s\n" % (stamp, line))
            out.flush()
    finally:
        source.close()


__all__ = ["watch_runs", "changes", "runs_view", "ChangeSource", "POLL_INTERVAL"]
