"""``tfrun --detach``, the submitter's side: launch the run's scheduler task
(``core.detached``) and say how to follow it; the scheduler task runs
``cli.detached_scheduler``."""

import shlex
import sys

from ..exceptions import TFMesosError
from ..mesos.master_address import without_password


def submit(spec, args, say):
    """Launch the run's scheduler task and leave; the exit status."""
    from ..core.detached import submit as launch
    from ..core.signals import interrupt_on_signals
    from .tfrun_values import SCHEDULER_CPUS, SCHEDULER_MEM, given_or
    try:
        # SIGTERM and SIGHUP (a terminal gone) as Ctrl-C: the run not taken
        # over yet is torn down, not left registered for its failover timeout.
        with interrupt_on_signals():
            identity = launch(spec, say, given_or(args.scheduler_cpus, SCHEDULER_CPUS),
                              given_or(args.scheduler_mem, SCHEDULER_MEM))
    except KeyboardInterrupt:
        say("interrupted before the scheduler took over: nothing of the run is left")
        return 130
    except TFMesosError as exc:
        from .tfrun_flags import in_flags
        print("tfrun: error: %s" % in_flags(exc), file=sys.stderr, flush=True)
        return 1
    # Quoted: "[::1]:5050" is a glob to zsh ("no matches found").
    master, run_id = shlex.quote(without_password(spec.master)), identity.run_id
    print("run %s detached: its scheduler runs on the cluster (framework %s)" % (
        run_id, identity.framework_id), flush=True)
    for what, command in (("follow it", "tfmesos attach %s --master %s"),
                          ("its output", "tfmesos logs %s --master %s"),
                          ("its record", "tfmesos show %s --master %s"),
                          ("stop it", "tfmesos kill %s --master %s")):
        print("  %-11s %s" % (what + ":", command % (run_id, master)), flush=True)
    return 0
