"""The tfmesos runs a Mesos master knows, from any machine that reaches it:
``tfmesos runs --master M`` lists them (running, disconnected, finished),
``tfmesos kill RUN`` tears one down.

A run is a framework whose labels carry ``tfmesos.run_id``
(``taskinfo.run_labels``); the master keeps finished frameworks for a while
(Mesos' ``--max_completed_frameworks``, 50 by default).
"""

import dataclasses
import os
import sys
import time
from typing import Optional

from ..core.taskinfo import RUN_ID_LABEL
from ..exceptions import TFMesosError
from ..mesos.master_reads import MasterReader
from .common import CommandParser
from .tables import duration_text, fit_last_column, table


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
    tasks_running: int


def cluster_runs(state) -> "list[ClusterRun]":
    """The tfmesos runs in a master's ``/master/state``, newest first."""
    runs = []
    for finished, key in ((False, "frameworks"), (True, "completed_frameworks")):
        for framework in state.get(key) or []:
            labels = {label.get("key"): label.get("value", "")
                      for label in framework.get("labels") or [] if isinstance(label, dict)}
            if RUN_ID_LABEL not in labels:
                continue
            if finished:
                status = "finished"
            else:
                status = "running" if framework.get("connected", True) else "disconnected"
            runs.append(ClusterRun(
                run_id=labels[RUN_ID_LABEL], framework_id=framework.get("id", ""),
                name=framework.get("name", ""), state=status,
                registered=framework.get("registered_time"),
                ended=framework.get("unregistered_time") if finished else None,
                jobs=labels.get("tfmesos.jobs", ""), command=labels.get("tfmesos.command", ""),
                tasks_running=sum(1 for task in framework.get("tasks") or []
                                  if task.get("state") == "TASK_RUNNING")))
    runs.sort(key=lambda run: run.registered or 0, reverse=True)
    return runs


def find_cluster_run(runs, wanted, live_only=True):
    """The one run whose id starts with ``wanted`` (or whose framework id it
    is); ``live_only``: not a finished one."""
    matches = [run for run in runs if run.run_id.startswith(wanted)
               or run.framework_id == wanted]
    if not matches:
        raise TFMesosError("the master knows no tfmesos run %r: tfmesos runs --master M lists "
                           "those it knows" % wanted)
    candidates = matches if not live_only else [run for run in matches
                                                 if run.state != "finished"]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise TFMesosError("run %s has finished already (framework %s)"
                           % (matches[0].run_id, matches[0].framework_id))
    raise TFMesosError("%r names %d runs (%s): give more of the id" % (
        wanted, len(candidates), ", ".join(run.run_id for run in candidates)))


def age_text(moment, now):
    if not moment:
        return "-"
    return duration_text(max(0.0, now - moment)) + " ago"


def print_cluster_runs(runs, out, width, limit=None, now=None):
    now = time.time() if now is None else now
    shown = runs if limit is None else runs[:max(0, limit)]
    if not shown:
        out.write("the master knows no tfmesos runs\n")
        return
    rows = [("ID", "NAME", "STATE", "STARTED", "JOBS", "RUNNING", "COMMAND")]
    for run in shown:
        rows.append((run.run_id, run.name, run.state, age_text(run.registered, now),
                     run.jobs or "-", str(run.tasks_running), run.command or "-"))
    table(fit_last_column(rows, width), out)
    if len(shown) < len(runs):
        out.write("(%d older runs: --all shows them)\n" % (len(runs) - len(shown)))


def reader(master, environ):
    return MasterReader(master, environ=environ)


def master_of(args, environ, parser):
    master = args.master or environ.get("MESOS_MASTER")
    if not master:
        parser.error("which master? give --master HOST:PORT (or zk://...), or set MESOS_MASTER")
    return master


def kill_main(argv, environ=None, out=None):
    environ, out = os.environ if environ is None else environ, out or sys.stdout
    parser = CommandParser(
        prog="tfmesos kill", usage="%(prog)s RUN [--master M]",
        description="Tear a run down on its Mesos master: every task of it is killed and its "
        "framework removed (as the master's /master/teardown). The master's credentials, "
        "if it asks for them, come from MESOS_PRINCIPAL and MESOS_SECRET. A foreground "
        "tfrun is stopped with Ctrl-C instead.")
    parser.add_argument("run", metavar="RUN", help="the run's id (a prefix is enough), as "
                        "tfmesos runs --master shows it")
    parser.add_argument("--master", metavar="M", help="the Mesos master (default $MESOS_MASTER)")
    args = parser.parse_options(argv)
    master = reader(master_of(args, environ, parser), environ)
    run = find_cluster_run(cluster_runs(master.state()), args.run)
    master.teardown(run.framework_id)
    out.write("killed run %s (framework %s): its tasks are being killed\n"
              % (run.run_id, run.framework_id))
    return 0
