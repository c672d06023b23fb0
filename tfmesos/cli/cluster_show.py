"""``tfmesos show RUN --master M``: a run as its master knows it, from any
machine that reaches the master.

A detached run (``tfrun --detach``) keeps its record where its scheduler
task runs: ``run/run.json`` in that task's sandbox
(``labels.SCHEDULER_RECORD``). It is read through the agent's ``/files``
(the newest attempt of the scheduler task that has one; bounded:
``MAX_RECORD``) and shown exactly as ``tfmesos show`` shows a local run
directory. A run without a scheduler task (a foreground tfrun) keeps its
record in the submitter's run directory: what the master knows of it is
shown (its framework, state and tasks), and where the record is.
"""

import datetime
import time

from ..exceptions import TFMesosError
from ..mesos.agent_files import AgentFiles, AgentFilesError, agent_base_urls, task_sandbox
from ..protocol import json_documents
from ..protocol import labels as run_labels
from ..protocol.labels import scheduler_tasks, task_attempt, tasks_of
from ..record.history import Run
from ..record.schema import SchemaError, read_run_file
from .cluster_logs import PAGE, TIMEOUT, master_scheme, slot_name
from .cluster_runs import age_text, framework_of
from .run_show import show_run
from .tables import local_time, printable, table

MAX_RECORD = 32 * 1024 * 1024   # bytes of a run.json read from a sandbox at most
READ_TRIES = 3                  # reads of a run.json that was rewritten while it was read


class RemoteRun(Run):
    """A run record read from a detached run's scheduler sandbox: gone
    (``tfmesos show``'s word for a run whose scheduler ended without saying
    how the run did) when its run.json says running but the master says its
    framework has finished; the scheduler's process is not looked for here."""

    def __init__(self, directory, file, finished):
        super().__init__(directory, file)
        self._finished = finished

    @property
    def gone(self):
        return self.running and self._finished


def _size(count):
    return "%.1f MB" % (count / 1048576.0) if count >= 1048576 else "%d bytes" % count


def _record_entry(agent, directory):
    """(size, mtime) of ``run.json`` in the sandbox directory ``directory``
    (``/files/browse``), or None when it is not there."""
    try:
        listing = agent.get("/files/browse", path=directory)
    except AgentFilesError as exc:
        if exc.status == 404:
            return None
        raise
    if not isinstance(listing, list):
        raise AgentFilesError("%s/files/browse answered no listing" % agent.base_url)
    for entry in listing:
        if isinstance(entry, dict) and str(entry.get("path", "")).rsplit("/", 1)[-1] \
                == "run.json":
            size = entry.get("size")
            if not isinstance(size, int) or isinstance(size, bool):
                raise AgentFilesError("%s/files/browse gave no size for %s/run.json"
                                      % (agent.base_url, directory))
            return size, entry.get("mtime")
    return None


def _read_whole(agent, path, where):
    """The text of the sandbox file ``path``, MAX_RECORD bytes at most."""
    parts: list = []
    offset = 0
    while True:
        answer = agent.get("/files/read", path=path, offset=offset, length=PAGE)
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, str):
            raise AgentFilesError("%s/files/read answered no data" % agent.base_url)
        if not data:
            return "".join(parts)
        offset += len(data.encode("utf-8", "surrogateescape"))
        if offset > MAX_RECORD:
            raise TFMesosError("%s is over %s: more than tfmesos show reads"
                               % (where, _size(MAX_RECORD)))
        parts.append(data)


def read_record(base_url, sandbox, where, auth=None):
    """The ``schema.RunFile`` of ``run/run.json`` in the sandbox at virtual
    path ``sandbox`` on the agent at ``base_url``; None when there is none.
    ``where`` names it in errors (one line each: an agent that does not
    answer, a file too large, not a run record)."""
    directory = "%s/%s" % (sandbox, run_labels.SCHEDULER_RUN_DIR)
    path = "%s/%s" % (sandbox, run_labels.SCHEDULER_RECORD)
    try:
        agent = AgentFiles(base_url, TIMEOUT, auth, None)
    except (AgentFilesError, OSError) as exc:
        raise TFMesosError("cannot read %s: %s" % (where, exc)) from None
    try:
        for _ in range(READ_TRIES):
            before = _record_entry(agent, directory)
            if before is None:
                return None
            if before[0] > MAX_RECORD:
                raise TFMesosError("%s is %s: more than the %s tfmesos show reads"
                                   % (where, _size(before[0]), _size(MAX_RECORD)))
            text = _read_whole(agent, path, where)
            if _record_entry(agent, directory) == before:
                break     # not rewritten while it was read (run.json is replaced whole)
    except AgentFilesError as exc:
        if exc.status == 404:
            return None
        raise TFMesosError("cannot read %s: %s" % (where, exc)) from None
    finally:
        agent.close()
    try:
        return read_run_file(json_documents.loads(text))
    except (ValueError, SchemaError) as exc:
        message = " ".join(str(exc).split())[:200]
        raise TFMesosError("%s is not a run record: %s" % (where, message)) from None


def _time(seconds):
    if not seconds:
        return "-"
    return local_time(datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc))


def show_master_view(run, framework, hosts, out, now=None):
    """What the master knows of ``run`` (a ``cluster_runs.ClusterRun``) and
    its ``framework`` (state JSON): its state, jobs, command, times, and
    every task with its state and agent (``hosts``: {agent id: hostname})."""
    now = time.time() if now is None else now
    out.write("run %s  %s (%s)  %s, framework %s\n" % tuple(printable(value) for value in (
        run.run_id, run.name, run.mode or "-", run.state_text(now), run.framework_id)))
    lines = [("jobs", printable(run.jobs or "-"))]
    if run.command:
        lines.append(("command", printable(run.command)))
    lines.append(("started", "%s  (%s)" % (_time(run.registered),
                                           age_text(run.registered, now))))
    if run.ended:
        lines.append(("ended", "%s  (%s)" % (_time(run.ended), age_text(run.ended, now))))
    width = max(len(key) for key, _ in lines)
    for key, value in lines:
        out.write("  %s  %s\n" % (key.ljust(width), value))
    out.write("\n")
    tasks = sorted(tasks_of(framework), key=lambda task: (
        slot_name(task), task_attempt(task["id"]) or 0))
    if not tasks:
        out.write("no tasks launched\n")
        return
    rows: list[tuple[str, ...]] = [("TASK", "ID", "STATE", "AGENT")]
    for task in tasks:
        agent = task.get("slave_id") or ""
        rows.append(tuple(printable(cell) for cell in (
            slot_name(task) or "-", task["id"], task.get("state") or "-",
            hosts.get(agent) or agent or "-")))
    table(rows, out)


def show_cluster_run(reader, state, run, out, now=None, here=None):
    """``tfmesos show RUN --master M``: a detached run's record from its
    scheduler's sandbox, else what the master knows and where the record is.
    ``run``: a ``ClusterRun`` of the master's ``/master/state`` ``state``,
    found by ``run_lookup``; ``here``: the run directory of this machine
    that holds its record (of its framework), if one does."""
    framework, _ = framework_of(state, run.framework_id)
    agents = agent_base_urls(state, master_scheme(reader))
    hosts = {agent.get("id"): agent.get("hostname") for agent in state.get("slaves") or []
             if isinstance(agent, dict)}
    schedulers = scheduler_tasks(framework, run.run_id)
    for attempt, task in schedulers:
        agent_id = str(task.get("slave_id") or "")
        base_url = agents.get(agent_id)
        if base_url is None:     # its agent is gone: its sandbox with it
            continue
        host = hosts.get(agent_id) or agent_id
        where = "run %s's record (%s of task %s on %s)" % (
            run.run_id, run_labels.SCHEDULER_RECORD, task["id"], host)
        file = read_record(base_url, task_sandbox(run.framework_id, task), where, reader.auth)
        if file is None:
            continue
        directory = "%s/ in the sandbox of task %s on %s" % (
            run_labels.SCHEDULER_RUN_DIR, task["id"], host)
        show_run(RemoteRun(directory, file, run.state == "finished"), out)
        out.write("\non the master now: %s; framework %s, scheduler attempt %d\n"
                  % (run.state_text(now), run.framework_id, attempt))
        return 0
    show_master_view(run, framework, hosts, out, now)
    out.write("\n")
    if schedulers:
        out.write("run %s's scheduler (task %s) has not written its record (%s) yet, or its "
                  "agent is gone\n" % (run.run_id, schedulers[0][1]["id"],
                                       run_labels.SCHEDULER_RECORD))
    elif here is not None:
        out.write("run %s ran in the foreground: its record is here, in %s (tfmesos show %s)\n"
                  % (run.run_id, here, run.run_id))
    else:
        out.write("run %s ran in the foreground: its record is in the run directory of the "
                  "machine that submitted it (tfmesos show %s there)\n"
                  % (run.run_id, run.run_id))
    return 0
