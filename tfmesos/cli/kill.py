"""``tfmesos kill RUN``: tear a run down on its Mesos master."""

import os
import sys

from .cluster_runs import master_of, reader
from .common import CommandParser
from .run_lookup import find_run


def kill_main(argv, environ=None, out=None):
    environ, out = os.environ if environ is None else environ, out or sys.stdout
    parser = CommandParser(
        prog="tfmesos kill", usage="%(prog)s RUN [--master M]",
        description="Tear a run down on its Mesos master: every task of it is killed and its "
        "framework removed (as the master's /master/teardown). The master's credentials, "
        "if it asks for them, come from MESOS_PRINCIPAL and MESOS_SECRET. A foreground "
        "tfrun is stopped with Ctrl-C instead. Only a run provably yours is killed: the one "
        "your run directory names, else the one framework with that run id whose user and "
        "principal are yours and, where you hold the run's key (~/.tfmesos/keys/RUN, "
        "$TFMESOS_KEYS_DIR), whose proof label that key verifies; several: they are listed, "
        "none is killed (exit 2).")
    parser.add_argument("run", metavar="RUN", help="the run's id (a prefix is enough), as "
                        "tfmesos runs --master shows it, or its framework id")
    parser.add_argument("--master", metavar="M", help="the Mesos master (default $MESOS_MASTER)")
    args = parser.parse_options(argv)
    address = master_of(args, environ, parser)
    master = reader(address, environ)
    run = find_run(master, args.run, environ, address, live_only=True)[0].run
    master.teardown(run.framework_id)
    out.write("killed run %s (framework %s): its tasks are being killed\n"
              % (run.run_id, run.framework_id))
    return 0
