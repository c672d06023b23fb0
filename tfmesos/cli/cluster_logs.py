"""``tfmesos logs RUN --master M``: a run's task output read where Mesos
keeps it, in the agents' sandboxes, through their ``/files/read`` (what the
Mesos web UI shows), from any machine that reaches the master; with
``--follow`` until the run's framework has finished. ``follow_scheduler``:
a detached run's scheduler output as it grows (``tfmesos attach``).

The run is found once in ``/master/state``; a follower then learns its
framework's changes (a task's new attempt, the framework's end and its
outcome label) from the master's operator event stream
(``mesos.operator_stream``: TASK_ADDED, TASK_UPDATED, FRAMEWORK_UPDATED,
FRAMEWORK_REMOVED), and where the master refuses the stream, or the stream
breaks or goes silent, polls only its framework
(``/master/frameworks?framework_id=ID``: its connection, labels and tasks)
as before, not the whole state every second (``FrameworkSource``). The
sandbox files are read through ``/files/read`` at the follower's pace
either way (Mesos streams no file). An agent not seen yet is asked of the
master once (``/master/slaves?slave_id=ID``). The agent of a task is the
one its ``slave_id`` names; its endpoints are at the address of its
libprocess ``pid`` (``slave(1)@ip:port``), as the web UI reaches them.
"""

import re
import sys
import threading
import time
import urllib.parse
from typing import Callable, Optional

from ..exceptions import TFMesosError
from ..mesos import operator_stream
from ..mesos.agent_files import (
    MAX_REPLY,
    AgentFiles,
    AgentFilesError,
    agent_base_urls,
    task_sandbox,
)
from ..mesos.task_states import TERMINAL_STATES
from ..protocol import labels as run_labels
from ..protocol.labels import scheduler_tasks, task_attempt, tasks_of
from ..terminal_text import printable
from .cluster_runs import framework_of

PAGE = MAX_REPLY // 8     # bytes asked for per read: JSON writes a byte as at most 6 characters
TIMEOUT = 10.0            # seconds for one agent's answer
QUICK_POLL = 0.1          # seconds between reads of a scheduler's output that grows
FIRST_LINES_WAIT = 10.0   # seconds a new scheduler task's output is read as often, until it comes
# Once a new scheduler task's first lines came, the run's own come back
# within a second (its tasks register again and send what they kept):
# read every FRESH_POLL meanwhile, FRESH_WINDOW seconds at most (80 reads).
FRESH_POLL = 0.025
FRESH_WINDOW = 1.0
SCHEDULER = "scheduler"   # what ``tfmesos logs RUN scheduler`` calls a detached run's scheduler


def slot_name(task):
    """``worker:0`` of a task named ``<run name> worker:0``; ``scheduler``
    for a detached run's scheduler task."""
    if run_labels.is_scheduler_task(str(task.get("id", ""))):
        return SCHEDULER
    return (task.get("name") or "").rsplit(" ", 1)[-1]


def latest_tasks(framework):
    """{slot name: the task (state JSON) of its latest attempt} of a run's
    framework; the scheduler's by its attempt number."""
    latest: dict = {}
    for task in tasks_of(framework):
        name = slot_name(task)
        if name == SCHEDULER and name in latest and \
                (task_attempt(task["id"]) or 0) < (task_attempt(latest[name]["id"]) or 0):
            continue
        latest[name] = task      # later entries are later attempts
    return latest


def job_names(jobs):
    """The job names of a run's ``tfmesos.jobs`` label (``worker:2,ps:1``)."""
    return [text.split(":", 1)[0] for text in jobs.split(",") if text.split(":", 1)[0]]


def master_scheme(reader):
    """The scheme the master is reached with: its agents' too, as the Mesos
    web UI reaches them."""
    return urllib.parse.urlsplit(reader.leader()).scheme or "http"


class RunView:
    """One run's framework as its master shows it now, read per framework
    and per agent (not the whole ``/master/state``): ``framework()``, and
    ``agent_url(agent id)`` asked of the master once per agent. ``state``:
    a ``/master/state`` already read, whose agents are known then."""

    def __init__(self, reader, framework_id, state=None):
        self.reader, self.framework_id = reader, framework_id
        self.scheme = master_scheme(reader)
        # agent id -> its base URL; None: the master does not know it
        self._agents: dict[str, Optional[str]] = dict(agent_base_urls(state, self.scheme)) \
            if state else {}

    def framework(self):
        """(its framework JSON or None, whether it has finished)."""
        return framework_of(self.reader.frameworks(self.framework_id), self.framework_id)

    def agent_url(self, agent_id):
        """``scheme://ip:port`` of agent ``agent_id``; None when the master
        does not know it (asked once)."""
        if not agent_id:
            return None
        if agent_id not in self._agents:
            found = agent_base_urls(self.reader.agents(agent_id), self.scheme)
            self._agents[agent_id] = found.get(agent_id)
        return self._agents[agent_id]


class FrameworkSource:
    """Where a follower learns its run's framework (``framework()``: the
    framework JSON or None, whether it has finished): the master's operator
    event stream, subscribed on the first call; polled through
    ``view.framework()`` (``/master/frameworks``) where the master refuses
    the stream, and from the moment it is lost (``notify`` is then told
    why, in one line), at most once every ``poll`` seconds: a follower that
    reads a growing output every ``QUICK_POLL`` seconds asks the master as
    often as it did before (what it answered last stands meanwhile)."""

    def __init__(self, view: RunView, notify: Callable[[str], None], poll: float = 0.0) -> None:
        self.view, self.notify, self.poll = view, notify, poll
        self.feed: Optional[operator_stream.OperatorFeed] = None
        self._subscribed = False
        self._polled: Optional[tuple] = None   # (time.monotonic(), what view.framework() said)

    def framework(self):
        if not self._subscribed:
            self._subscribed = True
            try:
                self.feed = operator_stream.OperatorFeed.of(self.view.reader)
            except operator_stream.StreamRefused:
                pass      # not served there: polled, as ever
            except operator_stream.StreamLost as exc:
                self._lost(exc)
        if self.feed is not None:
            framework_id = self.view.framework_id
            try:
                framework, finished = self.feed.read(lambda state: state.framework(framework_id))
            except operator_stream.StreamLost as exc:
                self._lost(exc)
            else:
                if framework is not None:
                    return framework, finished
                # Never shown on the stream (one the master no longer keeps,
                # or shows otherwise): what the master says of it decides.
        now = time.monotonic()
        if self._polled is None or now - self._polled[0] >= self.poll:
            self._polled = (now, self.view.framework())
        return self._polled[1]

    def _lost(self, error) -> None:
        self.close()
        self.notify("%s: polling the master instead" % error)

    def close(self) -> None:
        if self.feed is not None:
            feed, self.feed = self.feed, None
            feed.close()


def stderr_notice(prog):
    """Lines on stderr, ``prog: ...``."""
    return lambda text: print("%s: %s" % (prog, text), file=sys.stderr, flush=True)


class SandboxFile:
    """One task's stdout or stderr on its agent, read on from where it was
    left; of a detached run's scheduler, the lines it relays of tasks whose
    own logs are shown beside it (``[worker:0] ...``, ``tfrun.print_log``)
    left out (``leave_out``)."""

    def __init__(self, name, base_url, path, prefix, auth):
        self.name, self.base_url, self.path, self.prefix = name, base_url, path, prefix
        self.auth = auth
        self.offset = 0
        self.partial = ""
        self.relayed: Optional[re.Pattern] = None   # the lines left out

    def read(self, out, final=False):
        """Write what was added since the last read to ``out``; returns
        how many bytes that was."""
        agent = AgentFiles(self.base_url, TIMEOUT, self.auth, None)
        start = self.offset
        try:
            while True:
                answer = agent.get("/files/read", path=self.path, offset=self.offset,
                                   length=PAGE)
                data = answer.get("data") if isinstance(answer, dict) else None
                if not isinstance(data, str):
                    raise AgentFilesError("%s/files/read answered no data" % self.base_url)
                if not data:
                    break
                self.offset += len(data.encode("utf-8", "surrogateescape"))
                self._write(data, out)
        except AgentFilesError as exc:
            if exc.status != 404:      # not there (yet): nothing to show
                raise TFMesosError("cannot read %s's output: %s" % (self.name, exc)) from None
        finally:
            agent.close()
        if final and self.partial:
            self._write("\n", out)
        return self.offset - start

    def _write(self, data, out):
        lines = (self.partial + data).split("\n")
        self.partial = lines.pop()
        for line in lines:
            if self.relayed is not None and self.relayed.match(line):
                continue
            out.write(("[%s] " % printable(self.name) if self.prefix else "") + line + "\n")
        out.flush()

    def leave_out(self, tasks, jobs=()):
        """Leave out the lines this file relays of ``tasks`` (names) and of
        every task of ``jobs`` (job names)."""
        names = [re.escape(name) for name in tasks]
        names += ["%s:\\d+" % re.escape(job) for job in jobs]
        self.relayed = re.compile(r"\[(?:%s)\] " % "|".join(names)) if names else None


def print_logs(reader, state, run, tasks, stream, follow, out, auth=None, interval=1.0,
               notify=None):
    """Print the ``stream`` of ``tasks`` (all: empty) of ``run`` (a
    ``ClusterRun`` of the master's ``/master/state`` ``state``, found by
    ``run_lookup``); ``follow``: on, switching to a task's newer attempt,
    until the run's framework has finished (learnt from the master's event
    stream, else polled: ``FrameworkSource``; ``notify``: where a lost
    stream is said, stderr by default). Each line once: a detached run's
    scheduler relays its tasks' output, and what it relays of a task
    shown beside it is left out of its own (``scheduler`` alone: its whole
    output, what a foreground tfrun would have printed)."""
    view = RunView(reader, run.framework_id, state)
    source = FrameworkSource(view, notify or stderr_notice("tfmesos logs"))
    try:
        return _print_logs(view, source, state, run, tasks, stream, follow, out, auth, interval)
    finally:
        source.close()


def _print_logs(view, source, state, run, tasks, stream, follow, out, auth, interval):
    framework, finished = framework_of(state, run.framework_id)
    files: dict = {}
    while True:
        found = latest_tasks(framework)
        unknown = [name for name in tasks if name not in found]
        if unknown and (not follow or finished):
            raise TFMesosError("run %s has no task %s; its tasks: %s" % (
                run.run_id, ", ".join(unknown), ", ".join(sorted(found)) or "none yet"))
        chosen = tasks or sorted(found)
        for name in chosen:
            task = found.get(name)
            base_url = view.agent_url(task.get("slave_id")) if task is not None else None
            if base_url is None:
                continue
            path = "%s/%s" % (task_sandbox(run.framework_id, task), stream)
            current = files.get(name)
            if current is None or current.path != path:
                if current is not None:
                    current.read(out, final=True)
                files[name] = current = SandboxFile(name, base_url, path, len(chosen) > 1, auth)
            if name == SCHEDULER:   # every task's: also those not launched yet
                current.leave_out([other for other in chosen if other != SCHEDULER],
                                  () if tasks else job_names(run.jobs))
            current.read(out)
        if not follow or finished:
            for current in files.values():
                current.read(out, final=True)
            return 0
        time.sleep(interval)
        framework, finished = source.framework()


# What follow_scheduler(until_gone=True) returns when the run's scheduler
# task ended and no scheduler holds the run: none of the framework's outcomes.
SCHEDULER_GONE = "(its scheduler task ended)"


def follow_scheduler(reader, run, out, err, stop: Optional[threading.Event] = None,
                     poll: float = 1.0, state=None,
                     notify: Optional[Callable[[str], None]] = None,
                     until_gone: bool = False) -> Optional[str]:
    """Print a detached run's scheduler output as it grows: its newest
    scheduler task's sandbox stdout to ``out``, its stderr to ``err``
    (text streams), switching to a newer attempt of the scheduler task when
    one appears (from its start, after a ``--- scheduler attempt N ---``
    line on ``err``). ``run``: a ``cluster_runs.ClusterRun`` (as
    ``run_lookup`` found it). Its sandbox files are read every
    ``QUICK_POLL`` seconds while they grow, less often while they do not, up
    to every ``poll`` seconds (``next_poll``; it was ``poll`` always, half a
    second behind on average); the run's framework is learnt from the
    master's event stream, else polled as often (``FrameworkSource``, not ``/master/state``;
    ``state``: one read already, whose agents are known then; ``notify``:
    where a lost stream is said, stderr by default).

    Returns how the run ended once its framework has finished: its
    ``tfmesos.outcome`` label (``succeeded``, ``failed: ...``, ``killed (by NAME)``),
    else ``finished``; None as soon as ``stop`` is set; with ``until_gone``,
    ``SCHEDULER_GONE`` once the newest scheduler task is terminal and the
    master (asked itself) has the framework disconnected, with no newer one. A run without a
    scheduler task (a foreground tfrun's) prints nothing and is waited for
    all the same. An agent that cannot be read is a TFMesosError."""
    stop = stop if stop is not None else threading.Event()
    view = RunView(reader, run.framework_id, state)
    source = FrameworkSource(view, notify or stderr_notice("tfmesos"), poll)
    try:
        return _follow_scheduler(view, source, reader, run, out, err, stop, poll, until_gone)
    finally:
        source.close()


def next_poll(wait, grew, poll, first_lines=False, fresh=False):
    """The wait (seconds) before the next read of a followed scheduler's
    output, after one of ``wait`` that found it grown (``grew``) or not:
    ``FRESH_POLL`` in the ``fresh`` window after a new scheduler task's
    first lines (the resumed run's lines come then: ``tfmesos attach``
    shows them within that, not up to ``QUICK_POLL`` late); ``QUICK_POLL``
    while it grows (its lines shown within that), and while a new scheduler
    task's ``first_lines`` are awaited (it starts: they come within a
    second, and ``tfmesos attach`` waits for them), doubling up to ``poll``
    while it is quiet."""
    if fresh:
        return min(FRESH_POLL, poll)
    quick = min(QUICK_POLL, poll)
    return quick if grew or first_lines else min(max(wait, quick) * 2, poll)


def _gone(view, run, task):
    """Whether scheduler task ``task`` (terminal) left the run with no
    scheduler: the master itself (not the event stream, which has no event
    for a scheduler that disconnects) has the framework disconnected and
    no newer scheduler task. A lost task's process may still run connected."""
    current, ended = view.framework()
    newest = scheduler_tasks(current, run.run_id) if current is not None else []
    return current is not None and not ended and not current.get("connected", True) \
        and bool(newest) and newest[0][1]["id"] == task["id"]


def _follow_scheduler(view, source, reader, run, out, err, stop, poll, until_gone=False):
    following: Optional[tuple] = None     # (task id, stdout SandboxFile, stderr SandboxFile)
    first_lines_by = 0.0   # until when a new scheduler task's first lines are awaited
    fresh_until = 0.0      # until when its output is read every FRESH_POLL (FRESH_WINDOW)
    wait = next_poll(poll, True, poll)
    while not stop.is_set():
        grew = False
        framework, finished = source.framework()
        newest = scheduler_tasks(framework, run.run_id)
        task = newest[0][1] if newest else None
        if task is not None and (following is None or following[0] != task["id"]):
            base_url = view.agent_url(task.get("slave_id"))
            if base_url is not None:
                if following is not None:
                    following[1].read(out, final=True)
                    following[2].read(err, final=True)
                    err.write("--- scheduler attempt %d ---\n" % newest[0][0])
                    err.flush()
                sandbox = task_sandbox(run.framework_id, task)
                following = (task["id"], *(SandboxFile(SCHEDULER, base_url, "%s/%s" % (
                    sandbox, stream), False, reader.auth) for stream in ("stdout", "stderr")))
                first_lines_by = time.monotonic() + FIRST_LINES_WAIT
        if following is not None:
            read = following[1].read(out, final=finished) + following[2].read(err, final=finished)
            if read > 0:
                if first_lines_by:
                    fresh_until = time.monotonic() + FRESH_WINDOW
                grew, first_lines_by = True, 0.0
        if finished:
            found = run_labels.label_map((framework or {}).get("labels"))
            return found.get(run_labels.OUTCOME) or "finished"
        if until_gone and task is not None and task.get("state") in TERMINAL_STATES \
                and _gone(view, run, task):
            if following is not None:
                following[1].read(out, final=True)
                following[2].read(err, final=True)
            return SCHEDULER_GONE
        now = time.monotonic()
        wait = next_poll(wait, grew, poll, first_lines=now < first_lines_by,
                         fresh=now < fresh_until)
        stop.wait(wait)
    return None
