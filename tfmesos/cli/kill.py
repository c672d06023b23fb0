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
framework). Only a run provably the caller's is killed (``run_lookup``):
another user's or principal's is refused. A master that does not let kill
subscribe as the framework (its ACLs) tears it down all the same, when it
allows that, without the label; the run's scheduler learns the teardown
from the master or from its SIGTERM and records the run as killed all the
same (``core.reactions``; a detached run's scheduler task saves that record
at once: Mesos SIGKILLs it about 3 s after a teardown's SIGTERM,
``ClusterRun._scheduler_task_killed``). The caller's key of the run (``takeover_files``) is
removed: the run has ended.
"""

import os
import pwd
import sys

from ..exceptions import MesosError, TFMesosError
from ..protocol import labels as run_labels
from ..record.outcomes import killed_text
from .cluster_runs import reader
from .common import CommandParser, run_word
from .run_lookup import caller_of, find_run, which_master

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
        "verifies; several: they are listed, none is killed (exit 2). Your key of the killed "
        "run, which has ended, is removed.")
    parser.add_argument("run", metavar="RUN", type=run_word, help="the run's id (a prefix "
                        "is enough), as tfmesos runs --master shows it, or its framework id")
    parser.add_argument("--master", metavar="M", help="the Mesos master (default $MESOS_MASTER)")
    args = parser.parse_options(argv)
    address = args.master or environ.get("MESOS_MASTER")
    if not address:
        which_master(args.run, environ, parser)
    master = reader(address, environ)
    found = find_run(master, args.run, environ, address, live_only=True)[0]
    run = found.run
    # Who kills: the principal kill authenticates as, else the user it runs as.
    by = caller_of(environ).principal or pwd.getpwuid(os.getuid()).pw_name
    labelled = kill_run(master, address, run, by, live_schedulers(found.framework, run),
                        environ)
    out.write("killed run %s (framework %s)%s: its tasks are being killed\n"
              % (run.run_id, run.framework_id, " by %s" % by if labelled else ""))
    from ..record.killed_record import record_kill
    from .run_lookup import callers_run
    local = callers_run(run.run_id, environ)
    if local is not None and record_kill(local, run.framework_id, by):
        out.write("its record %s says so\n" % local.directory)
    from ..record.takeover_files import forget_key
    removed = forget_key(run.run_id, environ)   # a run that ended needs its key no more
    if removed:
        out.write("removed its key %s\n" % removed)
    return 0


def kill_run(master, address, run, by, schedulers, environ):
    """Label the framework of ``run`` (a ``cluster_runs.ClusterRun``)
    ``killed (by BY)`` and remove it, once the scheduler tasks
    ``schedulers`` (ids) recorded it; False when the master did not let
    kill read or subscribe as the framework (it was torn down without the
    label)."""
    from ..backends.remote import credentials_of
    from ..mesos.driver import MesosSchedulerDriver
    from ..mesos.failover_teardown import teardown_as_scheduler
    try:
        info = master.framework_info(run.framework_id)
    except MesosError as exc:
        return teardown_unlabelled(master, run, "the master did not show its FrameworkInfo "
                                   "(%s)" % exc)
    if info is None:
        raise TFMesosError("run %s has finished already (framework %s)"
                           % (run.run_id, run.framework_id))
    kept = [label for label in (info.get("labels") or {}).get("labels") or []
            if isinstance(label, dict) and label.get("key") != run_labels.OUTCOME]
    info = dict(info, labels={"labels": kept + [{"key": run_labels.OUTCOME,
                                                  "value": killed_text(by)}]})
    # Its own credentials, or none: never the driver's fallback to os.environ.
    principal, secret = credentials_of(environ) or ("", "")
    try:
        teardown_as_scheduler(MesosSchedulerDriver, address, info, wait_for=schedulers, wait=SCHEDULER_WAIT,
                              principal=principal, secret=secret)
        return True
    except MesosError as exc:
        return teardown_unlabelled(master, run, "the master did not let this kill subscribe "
                                   "as the framework (%s)" % exc)


def teardown_unlabelled(master, run, why):
    """Remove ``run``'s framework as the operator API does, then say
    ``why`` who killed it is not said; False. A teardown the master refuses
    is raised, nothing said of a removal that did not happen."""
    master.teardown(run.framework_id)
    print("tfmesos kill: warning: %s: removed run %s without saying who killed it"
          % (why, run.run_id), file=sys.stderr, flush=True)
    return False


def live_schedulers(framework, run):
    """The task ids of ``run``'s scheduler tasks that run (a detached run's)
    in its ``framework`` (state JSON)."""
    return [task["id"] for _, task in run_labels.scheduler_tasks(framework, run.run_id)
            if task.get("state") == "TASK_RUNNING"]
