"""``tfmesos kill RUN``: tear a run down on its Mesos master."""

import os
import sys

from .cluster_runs import cluster_runs, find_cluster_run, master_of, reader
from .common import CommandParser


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
