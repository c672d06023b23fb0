"""tfmesos: helper commands around tfrun.

usage: tfmesos COMMAND [options]

commands:
  runs [-n N] [--prune --keep N]        list recent runs (./tfmesos-runs, $TFMESOS_RUNS_DIR)
  runs --master M                       list the runs a Mesos master knows
  kill RUN [--master M]                 tear a run down on its Mesos master
  attach RUN [--master M]               follow a detached run, or take over one whose
                                        scheduler is gone (tfrun --failover, --detach)
  show RUN                              a run's outcome, tasks, attempts and exit codes
  show RUN --master M                   the same of a run a Mesos master knows
  logs RUN [TASK] [--stderr] [--follow] a task's output (RUN: an id prefix or a directory)
  logs RUN --master M [TASK] [--follow] a task's output from its agent's sandbox
  report RUN                            write the run's report.html (timeline, outcome)
  local-master [--port 5050 ...]        run the embedded Mesos master
  docker [-v H:C] [-e K=V] -- COMMAND   run COMMAND (e.g. tfrun) inside the tfmesos image
  version                               print the version (also: tfmesos --version)

"tfmesos COMMAND --help" explains each command; tfrun --help explains tfrun.
Exit status: 0; 1 for errors; 2 for usage errors and for a RUN that names
several runs (attach, kill, show/logs --master); 141 when the reader of its
output went away (tfmesos logs RUN | head).
"""

import os
import sys

from ..exceptions import SpecError, TFMesosError
from ..terminal_text import printable
from .common import CommandParser, quiet_on_closed_pipe


def docker_main(argv):
    from .docker_wrapper import run_in_image
    from .tfrun_options import split_command

    parser = CommandParser(
        prog="tfmesos docker", usage="%(prog)s [options] -- COMMAND [ARGS...]",
        takes_command=True,
        description="Run a command (usually tfrun) inside the tfmesos image: host network, "
        "the current directory mounted and used as working directory, your uid:gid, "
        "MESOS_MASTER/DOCKER_IMAGE/TFMESOS_* passed through.")
    parser.add_argument("-i", "--image", help="image (default $DOCKER_IMAGE, else tfmesos/tfmesos)")
    parser.add_argument("-v", "--volume", action="append", default=[],
                        metavar="HOST:CONTAINER[:ro|rw]", help="extra volume (repeatable)")
    parser.add_argument("-e", "--env", action="append", default=[], metavar="NAME[=VALUE]",
                        help="extra environment variable (repeatable)")
    options, command = split_command(argv)
    args = parser.parse_options(options, command if "--" in argv else None)
    if not command:
        parser.error("no command given: put it after '--', e.g. tfmesos docker -- tfrun -w 2 "
                     "-- python train.py")
    from mesos_local import docker_host_error
    why = docker_host_error(os.environ)
    if why:
        parser.error(why)
    try:
        return run_in_image(command, image=args.image, env=args.env, volumes=args.volume)
    except SpecError as exc:   # a bad -e or -v: a usage error, as in tfrun
        parser.error(str(exc))
    except KeyboardInterrupt:
        return 130


def main(argv=None):
    """``tfmesos``'s exit status; a reader of its output that went away ends
    it quietly, as SIGPIPE ends ``cat`` (``common.quiet_on_closed_pipe``)."""
    return quiet_on_closed_pipe(_main, argv)


def _main(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ("runs", "show", "logs", "report", "kill", "attach", "local-master", "docker",
                "version")
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    try:
        if command == "local-master":
            from mesos_local import main as local_master_main
            return local_master_main(rest, prog="tfmesos local-master")
        if command == "docker":
            return docker_main(rest)
        if command in ("runs", "show", "logs", "report"):
            from .runs import COMMANDS
            try:
                return COMMANDS[command](rest)
            except KeyboardInterrupt:   # logs --follow
                return 130
            except BrokenPipeError:     # the reader went away: quiet_on_closed_pipe's
                raise
            except OSError as exc:      # what the file system said, in one line
                print("tfmesos: error: %s" % printable(exc), file=sys.stderr)
                return 1
        if command == "kill":
            from .kill import kill_main
            return kill_main(rest)
        if command == "attach":
            from .attach import main as attach_main
            try:
                return attach_main(rest)
            except KeyboardInterrupt:   # following a detached run: it goes on
                print("tfmesos attach: stopped following; the run goes on", file=sys.stderr)
                return 0
        if command in ("version", "--version"):
            from .. import __version__
            print("tfmesos %s" % __version__)
            return 0
    except TFMesosError as exc:   # escaped: it may quote names a planted run.json gave
        print("tfmesos: error: %s" % printable(exc), file=sys.stderr)
        return getattr(exc, "exit_code", 1)   # 2: several runs match (run_lookup.AmbiguousRun)
    print("tfmesos: unknown command %r; use one of: %s (tfmesos --help)"
          % (command, ", ".join(commands)), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
