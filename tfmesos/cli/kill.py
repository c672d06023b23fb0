"""``tfmesos kill RUN``: kill a run on its Mesos master, saying who did.

The run's framework gets the outcome ``killed (by NAME)`` (its
``tfmesos.outcome`` label, which ``tfmesos runs --master`` shows) before
it is removed: kill subscribes as the framework with that label
(``mesos.failover_teardown``: only a scheduler of a framework can change
its labels, and Mesos lets only the framework's principal do that). The
run's scheduler, if it runs, is told "Framework failed over", reads the
label and ends, recording the run as killed (tfrun exits 143); a detached
run's scheduler task is given up to ``SCHEDULER_WAIT`` s to write its
record before the teardown (Mesos then kills every task and removes the
framework). A master that does not let kill subscribe as the framework
(another principal) tears it down all the same, when it allows that,
without the label.
"""

import os
import pwd
import sys

from ..exceptions import MesosError, TFMesosError
from ..protocol import labels as run_labels
from ..record.outcomes import killed_text
from .cluster_runs import master_of, reader
from .common import CommandParser
from .run_lookup import find_run

# Seconds a detached run's scheduler task has to record the kill and end
# before the teardown (inside its KillPolicy grace, core.scheduler_task.KILL_GRACE).
SCHEDULER_WAIT = 20.0


def kill_main(argv, environ=None, out=None):
    environ, out = os.environ if environ is None else environ, out or sys.stdout
    parser = CommandParser(
        prog="tfmesos kill", usage="%(prog)s RUN [--master M]",
        description="Kill a run on its Mesos master: every task of it is killed and its "
        "framework removed, labelled 'killed (by NAME)' first (NAME: MESOS_PRINCIPAL, else "
        "your user name), which tfmesos runs --master shows and the run's record keeps. Its "
        "scheduler, if it runs, ends (a foreground tfrun exits 143). The master's "
        "credentials, if it asks for them, come from MESOS_PRINCIPAL and MESOS_SECRET. Only a "
        "run provably yours is killed: the one your run directory names, else the one "
        "framework with that run id whose user and principal are yours and, where you hold "
        "the run's key (~/.tfmesos/keys/RUN, $TFMESOS_KEYS_DIR), whose proof label that key "
        "verifies; several: they are listed, none is killed (exit 2).")
    parser.add_argument("run", metavar="RUN", help="the run's id (a prefix is enough), as "
                        "tfmesos runs --master shows it, or its framework id")
    parser.add_argument("--master", metavar="M", help="the Mesos master (default $MESOS_MASTER)")
    args = parser.parse_options(argv)
    address = master_of(args, environ, parser)
    master = reader(address, environ)
    run = find_run(master, args.run, environ, address, live_only=True)[0].run
    by = killer(environ)
    labelled = kill_run(master, address, run, by, environ)
    out.write("killed run %s (framework %s)%s: its tasks are being killed\n"
              % (run.run_id, run.framework_id, " by %s" % by if labelled else ""))
    return 0


def killer(environ):
    """Who kills: the Mesos principal kill authenticates as, else the user
    running it."""
    return environ.get("MESOS_PRINCIPAL") or pwd.getpwuid(os.getuid()).pw_name


def kill_run(master, address, run, by, environ):
    """Label the framework of ``run`` (a ``cluster_runs.ClusterRun``)
    ``killed (by BY)`` and remove it; False when the master did not let
    kill subscribe as it (it was torn down without the label)."""
    info = master.framework_info(run.framework_id)
    if info is None:
        raise TFMesosError("run %s has finished already (framework %s)"
                           % (run.run_id, run.framework_id))
    kept = [label for label in (info.get("labels") or {}).get("labels") or []
            if isinstance(label, dict) and label.get("key") != run_labels.OUTCOME]
    info = dict(info, labels={"labels": kept + [{"key": run_labels.OUTCOME,
                                                  "value": killed_text(by)}]})
    from ..mesos.failover_teardown import teardown_as_scheduler
    try:
        teardown_as_scheduler(address, info, wait_for=live_schedulers(master, run),
                              wait=SCHEDULER_WAIT, principal=environ.get("MESOS_PRINCIPAL"),
                              secret=environ.get("MESOS_SECRET"))
        return True
    except MesosError as exc:
        print("tfmesos kill: warning: the master did not let this kill subscribe as run %s's "
              "framework (%s): removing it without saying who killed it" % (run.run_id, exc),
              file=sys.stderr, flush=True)
    master.teardown(run.framework_id)
    return False


def live_schedulers(master, run):
    """The task ids of ``run``'s scheduler tasks that run (a detached run's)."""
    document = master.frameworks(run.framework_id)
    for framework in document.get("frameworks") or []:
        if isinstance(framework, dict) and framework.get("id") == run.framework_id:
            return [task["id"] for _, task in run_labels.scheduler_tasks(framework, run.run_id)
                    if task.get("state") == "TASK_RUNNING"]
    return []
