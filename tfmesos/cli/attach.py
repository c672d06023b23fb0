"""``tfmesos attach RUN``: come back to a run that outlives its scheduler
(``tfrun --failover``, ``tfrun --detach``).

* A detached run whose scheduler task runs: follow its output (what a
  foreground tfrun would print) until the run ends; Ctrl-C stops following,
  not the run.
* A run whose scheduler is gone (its framework is disconnected and failing
  over): take it over. A detached run gets a new scheduler task
  (``core.detached``); a ``--failover`` run is carried on by this process as
  tfrun would have, from its saved form in its run directory (``carry_on``:
  its spec and identity, the very files it packed), and Ctrl-C leaves it to
  its tasks again.
* A finished run: its outcome, and a failed one's reason (the framework's
  ``tfmesos.reason`` label); the exit status is 0 for a run that
  succeeded only, as when it is followed to its end.
"""

import dataclasses
import os
import shlex
import sys

from ..exceptions import TFMesosError
from .common import SIGPIPE_EXIT, CommandParser, run_word
from .tables import printable


def build_parser():
    parser = CommandParser(
        prog="tfmesos attach", usage="%(prog)s RUN [--master M] [--key FILE]",
        description="Come back to a run started with tfrun --failover or --detach: follow a "
        "detached run's scheduler, or take over a run whose scheduler is gone (its tasks kept "
        "running: they register with the new scheduler and carry on, nothing restarts). "
        "A detached run's new scheduler attempts and its end are learnt from the master's "
        "operator event stream (polled where the master refuses it). Ctrl-C leaves the run "
        "to its tasks again; tfmesos kill RUN stops it. Exits 0 once "
        "the run succeeded; 1 when it failed, was killed or ended without saying (a finished "
        "run at once, with the line that says why it failed).")
    parser.add_argument("run", metavar="RUN", type=run_word, help="the run's id (a prefix "
                        "is enough), its framework id or its run directory. The run is the "
                        "framework your run directory names, else the one with that run id "
                        "whose user and principal are yours and whose proof label your key of "
                        "the run verifies (a detached run needs the key: it is handed to the "
                        "run); several: they are listed (exit 2), none is attached")
    parser.add_argument("--master", metavar="M", help="the Mesos master (default: the run's, "
                        "else $MESOS_MASTER)")
    parser.add_argument("--key", metavar="FILE", help="the run's key, to take over a run "
                        "submitted from another machine (default ~/.tfmesos/keys/RUN, which "
                        "tfrun writes there; $TFMESOS_KEYS_DIR)")
    return parser


def main(argv, environ=None, out=None):
    environ, out = os.environ if environ is None else environ, out or sys.stdout
    parser = build_parser()
    args = parser.parse_options(argv)
    from ..ship.work_dirs import remove_stale
    remove_stale()   # what tfruns and attaches killed before they could clean up left
    from .run_lookup import find_run, local_record, which_master
    local = local_record(args.run, environ)
    failover = local.failover if local is not None else None
    # The run's master (its failover.json's, else its run.json's), as --help says.
    master = args.master or (failover.master if failover else None) or \
        (local.run.file.master if local is not None else None) or environ.get("MESOS_MASTER")
    if not master:
        which_master(args.run, environ, parser)
    from ..mesos.master_address import without_password
    from ..mesos.master_reads import MasterReader
    reader = MasterReader(master, environ=environ)
    master = without_password(master)   # as shown: the password is in no message
    # A live detached run is handed the key (its new scheduler task gets it):
    # only a framework the key proves is the run's.
    found, state = find_run(reader, args.run, environ, master, key_file=args.key, local=local,
                            needs_proof=lambda run: run.detached and run.state != "finished")
    run = found.run
    run_id = run.run_id
    if run.state == "finished":
        out.write("run %s has finished: %s\n" % (run_id, printable(run.outcome or
                                                           "its framework was removed")))
        if run.reason:
            out.write("  %s\n" % printable(run.reason))
        if run.detached and run.outcome != "succeeded":
            out.write("  its output: tfmesos logs %s --master %s scheduler\n"
                      % (run_id, shlex.quote(master)))
        forget_key(run_id, environ)
        return 0 if run.outcome == "succeeded" else 1
    if run.detached:
        from .common import setup_logging
        setup_logging("tfmesos attach", False)   # as its own lines say
        return attach_detached(reader, state, found.framework, run, run.state == "running",
                               args.key, environ, out)
    if run.state == "running":
        raise TFMesosError("run %s has its scheduler (a tfrun, or a tfmesos attach that took it "
                           "over, is connected): nothing to take over; "
                           "read its output with tfmesos logs %s --master %s"
                           % (run_id, run_id, master))
    if local is None:
        raise TFMesosError("run %s was started in the foreground elsewhere: attach on the "
                           "machine that ran it, where its run directory has what taking it "
                           "over needs" % run_id)
    code = carry_on(local, args.key, args.master)
    # As --help says: 1 for a run that failed or was killed (a task's own
    # exit code is tfrun's, not attach's); 141 when attach's reader went away.
    return code if code in (0, SIGPIPE_EXIT) else 1


def forget_key(run_id, environ):
    """The key of run ``run_id``, which has ended, is removed (saying so)."""
    from ..record.takeover_files import forget_key as forget
    removed = forget(run_id, environ)
    if removed:
        print("tfmesos attach: removed the key of run %s, which has ended: %s"
              % (run_id, removed), file=sys.stderr, flush=True)


MAX_RELAUNCHES = 3   # new scheduler tasks one attach launches for a run whose own keep ending


def attach_detached(reader, state, framework, run, connected, key_file, environ, out):
    """Follow the detached run's scheduler until the run ends, launching a
    new one first when it is gone. ``framework``: the run's, as
    ``run_lookup`` proved it with the run's key; ``run``: its ``ClusterRun``."""
    from ..core.detached import relaunch_scheduler
    from .cluster_logs import SCHEDULER_GONE, follow_scheduler
    from .cluster_runs import framework_of

    run_id = run.run_id

    def say(text):
        print("tfmesos attach: %s" % text, file=sys.stderr, flush=True)
    if not connected:
        relaunch_scheduler(reader, state, framework, run_id, key_file, environ, say)
    say("following run %s's scheduler (Ctrl-C stops following; the run goes on)" % run_id)
    relaunched = 0
    while True:
        # A scheduler task that dies while followed is replaced, as a new
        # attach would (it sat silent for the failover timeout, 6 h by default).
        outcome = follow_scheduler(reader, run, out, sys.stderr, state=state, notify=say,
                                   until_gone=True)
        if outcome != SCHEDULER_GONE:
            break
        if relaunched == MAX_RELAUNCHES:
            say("run %s's scheduler task ended again (this attach launched %d new ones): "
                "its tasks go on for the failover timeout; read why with tfmesos logs %s "
                "(the scheduler's output), then run tfmesos attach %s again"
                % (run_id, relaunched, run_id, run_id))
            return 1
        relaunched += 1
        state = reader.state()
        framework, _ = framework_of(reader.frameworks(run.framework_id), run.framework_id)
        say("run %s's scheduler task ended" % run_id)
        relaunch_scheduler(reader, state, framework, run_id, key_file, environ, say)
    say("run %s ended: %s" % (run_id, printable(outcome)))
    if outcome != "succeeded":
        reason = ended_reason(reader, run)
        if reason:
            say(printable(reason))
    forget_key(run_id, environ)
    return 0 if outcome == "succeeded" else 1


def ended_reason(reader, run):
    """The ``tfmesos.reason`` label of ``run``'s framework (a failure's
    evidence) once it has finished, or None."""
    from ..exceptions import MesosError
    from .cluster_runs import cluster_run, framework_of
    try:
        framework, finished = framework_of(reader.frameworks(run.framework_id), run.framework_id)
    except MesosError:
        return None
    found = cluster_run(framework, finished) if framework is not None else None
    return found.reason if found is not None else None


def carry_on(local, key_file, master=None):
    """Be the ``--failover`` run's scheduler, as its tfrun was, from its
    saved form in the caller's run directory (``local``, a
    ``run_lookup.LocalRecord``: its failover.json, a ``FailoverFile``, and
    its record so far, each read once): its spec and identity, the very
    files it packed, kept there (checked against the identity's digests
    before anything else), its plain tasks in the directory they began in.
    Nothing is packed again and nothing of this process's working
    directory is read. Ctrl-C leaves the run to its tasks again. Returns
    the exit status."""
    from ..core.launch import ClusterRun
    from ..core.run_setup import make_backend
    from ..core.takeover import Resume
    from .common import setup_logging
    from .tfrun import execute, say, shown_logs, shown_only, status_line
    # What the run's parts log (the driver re-subscribing, ...) says "tfrun:"
    # as say() does, and as tfrun itself says it.
    setup_logging("tfrun", False)
    failover = local.takeover()   # TakeoverError: why there is nothing to take over
    directory = os.path.abspath(local.directory)
    previous = local.run.file
    identity, spec = saved_run(directory, failover, key_file, master, previous.takeovers)
    backend = make_backend(spec, os.environ)
    shipment = kept_shipment(directory, failover, spec, identity, previous,
                             backend.bind_host(), say)
    show, progress = shown_logs(spec), status_line()
    try:
        # mlflow_at_stop=False: execute() ends it once the tasks are stopped.
        run = ClusterRun(spec, on_log=shown_only(show, progress), on_progress=progress,
                         notify=say, backend=backend, resume=Resume(identity, previous),
                         shipment=shipment, workdir=failover.workdir, mlflow_at_stop=False)
    except BaseException:
        if shipment is not None:
            shipment.stop(keep=True)   # the run is still its tasks': its files stay
        raise
    say("taking run %s over (framework %s); Ctrl-C leaves it to its tasks again"
        % (run.run_id, identity.framework_id))
    return execute(run, show, progress, advice=True, leave_on_interrupt=True)


def saved_run(directory, failover, key_file, master=None, takeovers=()):
    """(identity, spec) of the run saved in ``directory`` (``failover``):
    the identity of the scheduler taking it over (the attempt after the
    started one's and those of its record's ``takeovers``), with the key
    of ``key_file``, else the caller's in the keys directory; the
    spec as packed (its ship directory is never read), writing its record
    there, its master's ZooKeeper password (masked in the file) the one of
    ``master`` (--master) or $MESOS_MASTER."""
    from ..core.identity import RunIdentity
    from ..core.spec_codec import spec_from_dict
    from ..mesos.master_address import with_password
    from ..record.takeover_files import run_key
    key = run_key(failover.run_id, os.environ, key_file)
    identity = RunIdentity.from_public(failover.identity, key)
    newest = max([identity.scheduler_attempt] + [t.scheduler_attempt for t in takeovers])
    identity = dataclasses.replace(identity, scheduler_attempt=newest).next_scheduler()
    return identity, spec_from_dict(failover.spec, packed=True, run_dir=directory, master=(
        with_password(failover.master, master, os.environ.get("MESOS_MASTER"))))


def kept_shipment(directory, failover, spec, identity, previous, bind_host, say):
    """The Shipment serving the files the run packed, as it kept them in
    its run directory (``takeover.check_kept`` first), or None: it ships
    nothing. It removes them once the run is stopped."""
    if spec.ship is None and not failover.packed:
        return None
    from ..core.takeover import check_kept
    from ..record.takeover_files import KEPT_DIR
    from ..ship.shipping import Shipment
    kept = os.path.join(directory, KEPT_DIR)
    hashed = check_kept(identity, failover.packed, kept)
    return Shipment.from_packed(spec.ship, failover.packed, bind_host=bind_host, say=say,
                                recorded=previous.shipped.to_dict() if previous.shipped else None,
                                keep_in=kept, hashed=hashed)
