"""A detached run's scheduler, in its Mesos task (``tfrun --detach``):

    python -m tfmesos.cli.detached_scheduler "$MESOS_SANDBOX/detached.json"

It takes the run's framework over (the key and the framework's id come in
its environment, the run's spec and what was shipped in ``detached.json``,
``core.detached``) and runs the job as a foreground tfrun would
(``tfrun.execute``): its output is the sandbox's stdout and stderr, its run
directory ``run/`` in the sandbox."""

import json
import os
import sys

from ..exceptions import TFMesosError


def main(path):
    """The scheduler of a detached run, in its Mesos task; the exit status."""
    from ..backends.remote import RemoteMaster
    from ..core.detached import RUN_KEY, read_document
    from ..core.identity import RunIdentity
    from ..core.launch import ClusterRun
    from ..core.spec_codec import spec_from_dict
    from ..core.takeover import Resume
    from ..protocol import labels, task_env
    from ..record.schema import read_run_file
    from ..ship.shipping import Shipment
    from .common import setup_logging
    from .tfrun import execute, say, shown_logs, shown_only

    setup_logging("tfrun", False)
    try:
        document = read_document(path)
        key = bytes.fromhex(os.environ.pop(RUN_KEY, ""))
        framework_id = os.environ.get(task_env.FRAMEWORK_ID, "")
        if len(key) != 32 or not framework_id:
            raise TFMesosError("the scheduler task's environment lacks the run's key or "
                               "framework: it is started by tfrun --detach, not by hand")
        identity = RunIdentity.from_public(document["identity"], key).with_framework(
            framework_id)
        spec = spec_from_dict(document["spec"], run_dir=labels.SCHEDULER_RUN_DIR)
        previous = None
        if document.get("previous"):
            with open(document["previous"], encoding="utf-8") as handle:
                previous = read_run_file(json.load(handle))
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
    return execute(run, show, None, advice=True)


if __name__ == "__main__":
    from .common import leave
    if len(sys.argv) != 2:
        print("usage: python -m tfmesos.cli.detached_scheduler DETACHED_JSON (tfrun --detach "
              "starts it)", file=sys.stderr)
        leave(2)
    leave(main(sys.argv[1]))
