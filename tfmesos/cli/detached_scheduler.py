"""A detached run's scheduler, in its Mesos task (``tfrun --detach``):

    python -m tfmesos.cli.detached_scheduler "$MESOS_SANDBOX/detached.json"

It takes the run's framework over and runs the job as a foreground tfrun
would (``tfrun.execute``): its output is the sandbox's stdout and stderr,
its run directory ``run/`` in the sandbox. The run's key comes as a Mesos
secret in its environment (with the framework's and the run's ids, the
credentials and the values of ``secret_env``); ``detached.json`` (the
run's spec, what was shipped, its identity) is sealed with that key
(``core.detached``): nothing of it is used before its signature checks
and its identity names the run and the framework of the environment."""

import os
import signal
import sys

from ..exceptions import TFMesosError

# A SIGTERM ends the scheduler task from its first line on as the kill:
# Mesos sends it (its framework torn down by an operator or tfmesos kill, a
# KILL of the task), never a silent death by the signal nor an
# ``interrupted`` run (``ClusterRun.as_kill``; before the run: ``main``).
KILLED_AS_IT_STARTED = " as it started"   # run_interrupts.killed_text's


def main(path):
    """The scheduler of a detached run, in its Mesos task; the exit status.
    Called inside ``interrupt_on_signals`` (``__main__``): a SIGTERM that
    comes outside the run's own handling (``tfrun.execute``) ends it here."""
    from ..core.phase import Phase
    from ..core.run_interrupts import killed_text
    from ..core.signals import interrupted_by
    from ..record.outcomes import KILLED, tfrun_exit_code
    run = None
    known: dict[str, object] = {}   # what _setup read: a kill before the run is made records it
    try:
        from .tfrun import execute
        made = _setup(path, known)
        if isinstance(made, int):
            return made
        run, show = made
        return execute(run, show, None, advice=True)
    except KeyboardInterrupt as exc:
        sigterm = interrupted_by() == signal.SIGTERM
        if run is not None and run.phase == Phase.STOPPED:
            # Its run ended and its record is final: a signal now (a kill
            # racing the end) changes neither, nor the exit status.
            code = run.record.recorded_outcome().exit_code
            return code if isinstance(code, int) else 1
        killed = run.as_kill(exc) if run is not None else None
        if sigterm and killed is None and known:
            _record_killed(**known)
        print("tfrun: %s" % (killed if killed is not None else
                             killed_text(KILLED_AS_IT_STARTED) if sigterm else "interrupted"),
              file=sys.stderr, flush=True)
        return tfrun_exit_code(KILLED) if sigterm else 130


def _record_killed(spec, identity, previous):
    """The record of a run whose scheduler task was killed before its run
    was made (its shipment checked, its master's address found): killed,
    its record so far (``previous``) carried on, as the run would have."""
    from ..core.run_interrupts import killed_text
    from ..core.run_setup import make_record
    from ..core.slots import SlotTable
    from ..exceptions import RunKilled
    try:
        record = make_record(spec, identity, SlotTable(spec.jobs), os.environ)
        if previous is not None:
            record.resume(previous)
    except TFMesosError as exc:   # as the run would have refused it
        print("tfrun: error: %s" % exc, file=sys.stderr, flush=True)
        return
    record.ended(RunKilled(killed_text(KILLED_AS_IT_STARTED)), "new")
    record.save()


def _setup(path, known):
    """The run of this scheduler task, taking its framework over, and what
    of its tasks' output it shows; else the exit status (its error said).
    ``known``: the spec, identity and previous record once read."""
    from ..backends.remote import RemoteMaster, credentials_of
    from ..core.launch import ClusterRun
    from ..core.scheduler_document import (
        RUN_KEY,
        DetachError,
        bound_to,
        open_document,
        read_previous,
        read_sealed,
    )
    from ..core.spec_codec import spec_from_dict
    from ..core.takeover import Resume
    from ..protocol import labels, task_env
    from ..ship.shipping import Shipment
    from .common import setup_logging, standard_streams
    from .tfrun import say, shown_logs, shown_only

    standard_streams()   # the agent decides them: its locale, what it left open
    setup_logging("tfrun", False)
    try:
        # Out of the environment at once: nothing this process starts inherits it.
        key_text = os.environ.pop(RUN_KEY, "")
        framework_id = os.environ.get(task_env.FRAMEWORK_ID, "")
        run_id = os.environ.get(task_env.RUN_ID, "")
        try:
            key = bytes.fromhex(key_text)
        except ValueError:
            key = b""
        if len(key) != 32 or not framework_id or not run_id:
            raise TFMesosError("the scheduler task's environment lacks the run's key, id or "
                               "framework: it is started by tfrun --detach, not by hand")
        document, identity = open_document(read_sealed(path), key, path)
        # The user is the agent's to set; the rest is what this task was given.
        credentials = credentials_of(os.environ)
        why = bound_to(identity, run_id=run_id, framework_id=framework_id,
                       principal=credentials[0] if credentials else None)
        if why:
            raise DetachError("%s is not this scheduler task's: %s; nothing of it is used"
                              % (path, why))
        spec = spec_from_dict(document["spec"], run_dir=labels.SCHEDULER_RUN_DIR)
        previous = None
        if document.get("previous"):
            previous = read_previous(document["previous"], run_id)
        known.update(spec=spec, identity=identity, previous=previous)
        backend = RemoteMaster(spec.master, None, os.environ)
        shipment = None
        if document.get("packed"):
            shipment = Shipment.from_packed(
                None, {role: os.path.abspath(name) for role, name in document["packed"].items()},
                bind_host=backend.bind_host(), say=say, recorded=document.get("shipped"))
        show = shown_logs(spec)
        run = ClusterRun(spec, on_log=shown_only(show), notify=say, backend=backend,
                         resume=Resume(identity, previous),
                         shipment=shipment, detached=True)
    except (TFMesosError, OSError, ValueError) as exc:
        print("tfrun: error: %s" % exc, file=sys.stderr, flush=True)
        return 1
    say("the scheduler of run %s (attempt %d) takes framework %s over"
        % (run.run_id, identity.scheduler_attempt, framework_id))
    return run, show


if __name__ == "__main__":
    from ..core.signals import interrupt_on_signals
    from .common import leave
    if len(sys.argv) != 2:
        print("usage: python -m tfmesos.cli.detached_scheduler DETACHED_JSON (tfrun --detach "
              "starts it)", file=sys.stderr)
        leave(2)
    with interrupt_on_signals():   # from here on: Mesos' SIGTERM ends it as main says
        code = main(sys.argv[1])
    leave(code)   # outside: a signal while it leaves ends it as before, no traceback
