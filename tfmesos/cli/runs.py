"""``tfmesos runs``, ``show``, ``logs`` and ``report``: the runs under the
runs directory, one run's tasks and attempts (printed by ``run_show``), a
task's log (followed while the run goes), and a run's HTML report
(``tfmesos.record.report``). With ``--master``: ``cluster_runs``,
``cluster_show``, ``cluster_logs``."""

import codecs
import datetime
import os
import stat
import sys
import time

from ..core.inputs import MAX_COUNT
from ..record.history import HistoryError, list_runs, recent_runs
from ..record.pruning import prune
from ..record.run_dirs import runs_root
from ..record.run_finding import find_run
from .common import CommandParser, bounded, run_word
from .run_show import code_text, show_run
from .tables import duration_text, fit_last_column, local_time, printable, table, terminal_width

COUNT = bounded(int, 1, MAX_COUNT)

FOLLOW_INTERVAL = 0.2     # how often a followed log and run.json are read again


def _parser(prog, usage, description):
    parser = CommandParser(prog=prog, usage=usage, description=description)
    parser.add_argument("--runs-dir", metavar="DIR", help="where runs are looked for (default "
                        "$TFMESOS_RUNS_DIR, else ./tfmesos-runs)")
    return parser


def _run_argument(parser):
    parser.add_argument("run", metavar="RUN", type=run_word, help="a run id (a prefix is "
                        "enough) or a run directory")


# -- tfmesos runs -----------------------------------------------------------------

RECENT = 20   # runs tfmesos runs shows unless -n or --all says otherwise


def runs_main(argv, environ=None, out=None):
    environ, out = os.environ if environ is None else environ, out or sys.stdout
    parser = _parser("tfmesos runs", "%(prog)s [--runs-dir DIR | --master M [--watch]] "
                     "[-n N | --all] [--prune --keep N]", "List recent runs, most recent "
                     "first, or prune old run directories.")
    parser.add_argument("-n", "--limit", type=COUNT, metavar="N",
                        help="show the N most recent runs, 1 to %d (default %d)"
                        % (MAX_COUNT, RECENT))
    parser.add_argument("--all", action="store_true", help="show every run")
    parser.add_argument("--prune", action="store_true",
                        help="remove every run directory of yours but the --keep most recent "
                        "of yours (a run directory another user owns, or one others may write, "
                        "is neither counted nor removed; runs still going are kept, and so "
                        "is a --failover run whose tfrun is gone while its master still has "
                        "its framework or cannot be asked), and "
                        "the keys (~/.tfmesos/keys/RUN, $TFMESOS_KEYS_DIR) of the runs that "
                        "ended: their record says so, or their master no longer has them")
    parser.add_argument("--keep", type=bounded(int, 0, MAX_COUNT), metavar="N",
                        help="with --prune: how many to keep, 0 to %d" % MAX_COUNT)
    parser.add_argument("--master", metavar="M", help="list the runs this Mesos master knows, "
                        "not the local run directories. STATE: running (detached: its "
                        "scheduler is a task of the run, tfrun --detach), failing over (its "
                        "scheduler is away: once its failover timeout passes, the master "
                        "kills its tasks), or how a finished run ended (succeeded, failed: ..., killed; "
                        "finished when it did not say), a failed run's reason in a line under "
                        "the table (RUN: worker:0: what it wrote last on stderr). RUNNING "
                        "counts the run's job tasks running, not a detached run's scheduler "
                        "task. Names and labels are shown with control characters escaped")
    parser.add_argument("--watch", action="store_true", help="with --master: after the "
                        "table, print a line for each change as it happens (a run started, "
                        "a task's state changed, a run's scheduler away or back, a run ended "
                        "and how), each after the time it was seen, until Ctrl-C (exit 0). "
                        "The changes come from the master's operator event stream (SUBSCRIBE "
                        "on /api/v1); a master that refuses it is read again every 2 s "
                        "(/master/state), as is one whose stream breaks or goes silent for 3 "
                        "heartbeats (said on stderr). The stream has no event for a scheduler "
                        "that merely disconnects: such a run shows failing over in the table")
    args = parser.parse_options(argv)
    if args.watch and not args.master:
        parser.error("--watch follows the runs of a Mesos master: give --master M")
    if args.all and args.limit is not None:
        parser.error("-n and --all both say how many runs to show: give one")
    limit = None if args.all else RECENT if args.limit is None else args.limit
    if args.master:
        if args.prune:
            parser.error("--prune removes local run directories: it does not go with --master")
        if args.runs_dir:
            parser.error("--runs-dir names local run directories: it does not go with --master")
        from .cluster_runs import cluster_runs, print_cluster_runs, reader
        master = reader(args.master, environ)
        width = terminal_width(environ, out)
        if args.watch:
            from .cluster_logs import stderr_notice
            from .runs_watch import watch_runs
            try:
                watch_runs(master, out, width, limit, stderr_notice("tfmesos runs"))
            except KeyboardInterrupt:     # how a watch ends
                pass
            return 0
        print_cluster_runs(cluster_runs(master.state()), out, width, limit)
        return 0
    root = runs_root(environ, args.runs_dir)
    if args.keep is not None and not args.prune:
        parser.error("--keep goes with --prune: tfmesos runs --prune --keep N")
    if args.prune:
        if args.keep is None:
            parser.error("--prune needs --keep N (how many of the most recent runs to keep)")
        ends = RunEnds(environ)
        forgotten = forget_ended_keys(root, environ, ends)
        from .run_lookup import callers_record
        removed, running, left = prune(root, args.keep, hold=ends.may_run,
                                       mine=callers_record)
        if forgotten:
            out.write("removed the keys of %d ended run%s: %s\n" % (
                len(forgotten), "" if len(forgotten) == 1 else "s", ", ".join(forgotten)))
        unknown = dict(ends.unknown())
        running = [run for run in running if run.directory not in unknown]
        out.write("removed %d run%s from %s%s\n" % (
            len(removed), "" if len(removed) == 1 else "s", root,
            "; kept %d still running: %s" % (len(running), ", ".join(
                os.path.basename(run.directory) for run in running)) if running else ""))
        for directory, why in unknown.items():
            print("tfmesos runs: kept %s and its key: %s" % (directory, why), file=sys.stderr)
        for run, why in left:
            print("tfmesos runs: left %s: %s" % (run.directory, why), file=sys.stderr)
        return 1 if any(not os.path.islink(run.directory) for run, _ in left) else 0
    shown, older, newer = recent_runs(root, limit)
    if not shown:
        print("no runs in %s" % root, file=sys.stderr)
        _say_newer(newer, out)
        return 0
    rows: list[tuple[str, ...]] = [("ID", "NAME", "MODE", "START", "DURATION", "OUTCOME", "EXIT", "COMMAND")]
    for local in shown:   # escaped before the last column is cut to the terminal
        rows.append(tuple(printable(cell) for cell in (
            local.run_id, local.name, local.mode, local_time(local.started),
            duration_text(local.duration()), local.shown_outcome, code_text(local.exit_code),
            local.file.command or "-")))
    table(fit_last_column(rows, terminal_width(environ, out)), out)
    if older:   # on stderr: a script reading the table's rows reads runs only
        out.flush()
        print("(%d older runs in %s: --all shows them)" % (older, root), file=sys.stderr)
    _say_newer(newer, out)
    return 0


def _say_newer(newer, out):
    """On stderr, how many run records a newer tfmesos wrote were left out, and why."""
    out.flush()
    for why, count in sorted(newer.items()):
        print("%d record%s not shown: %s" % (count, "" if count == 1 else "s", why),
              file=sys.stderr)


def local_run(text, environ, runs_dir=None):
    """The run of the runs directory that ``text`` names (``run_finding.find_run``):
    of two records with its whole id, the caller's own (another user's
    copy in a shared runs directory made the caller's run unreachable)."""
    return find_run(text, runs_root(environ, runs_dir), prefer=_callers)


def _callers(run):
    # run_lookup (and what it imports) only where two records match: its
    # import at every lookup made `tfmesos show ID` 1.32x -> 1.42x of parsing.
    from .run_lookup import callers_record
    return callers_record(run)


def forget_ended_keys(root, environ, ends=None):
    """Remove the keys (``takeover_files``) of the runs under ``root`` that
    ended: their record says so, or their tfrun is gone without saying and
    their master no longer has their framework (``RunEnds``); returns the
    paths removed. The key of a run still going, of one whose master still
    has its framework or cannot be asked, and of one with no record here
    (a detached run's: ``tfmesos attach`` removes it) is kept; so is one
    whose only record is not the caller's (``run_lookup.callers_record``:
    in a shared runs directory anyone can write a run.json saying any run
    id ended)."""
    from ..record.takeover_files import forget_key, held_run_ids
    from .run_lookup import callers_record
    held = set(held_run_ids(environ))
    if not held:
        return []
    ends = ends if ends is not None else RunEnds(environ)
    removed = []
    for run in list_runs(root):
        if run.run_id in held and callers_record(run) and (
                not run.running or (run.gone and not ends.may_run(run))):
            path = forget_key(run.run_id, environ)
            if path:
                removed.append(path)
    return removed


class RunEnds:
    """Whether the run of a local record whose tfrun is gone (SIGKILLed,
    its machine rebooted) may still run: a ``--failover`` run's tasks
    outlive their tfrun for the failover timeout, so its run directory (what
    ``tfmesos attach`` takes it over from) and its key stay while the
    master its failover.json names still has its framework, as ``tfmesos
    attach`` asks it (``/master/frameworks``); a master that cannot be
    asked keeps them too (``unknown`` says which and why). Each run is
    asked about once."""

    TIMEOUT = 5.0     # seconds a master has to answer

    def __init__(self, environ):
        self._environ = environ
        self._verdicts = {}       # run directory -> None (ended), "running", or why unknown

    def may_run(self, run):
        """Whether ``run`` (a ``history.Run`` whose record says running)
        may still run on its master; False for one that cannot outlive
        its tfrun (no failover.json) or that its master no longer has."""
        if run.directory not in self._verdicts:
            self._verdicts[run.directory] = self._ask(run)
        return self._verdicts[run.directory] is not None

    def unknown(self):
        """[(run directory, why)] of the runs kept because their master
        could not be asked."""
        return [(directory, why) for directory, why in self._verdicts.items()
                if why not in (None, "running")]

    def _ask(self, run):
        from ..exceptions import TFMesosError
        from ..record.takeover_files import FAILOVER_FILE, TakeoverError, read_failover
        if not os.path.lexists(os.path.join(run.directory, FAILOVER_FILE)):
            return None      # a plain run: its tasks stopped with its tfrun
        try:
            failover = read_failover(run.directory)
        except TakeoverError as exc:
            return "its failover.json cannot tell its master (%s)" % exc
        from ..mesos.master_reads import MasterReader
        from .cluster_runs import framework_of
        spec = failover.spec
        try:
            reader = MasterReader(failover.master, timeout=self.TIMEOUT, environ=self._environ,
                                  verify=spec.get("verify") is not False,
                                  ca_bundle=spec.get("ca_bundle") or None,
                                  scheme=spec.get("master_scheme") or "http")
            document = reader.frameworks(failover.framework_id)
        except TFMesosError as exc:
            return ("its tfrun is gone and its master %s cannot be asked whether its framework "
                    "%s still runs (%s): tfmesos attach %s when it answers"
                    % (failover.master, failover.framework_id, " ".join(str(exc).split()),
                       run.run_id))
        framework, finished = framework_of(document, failover.framework_id)
        return None if framework is None or finished else "running"


# -- tfmesos show -----------------------------------------------------------------

def show_main(argv, environ=None, out=None):
    environ, out = os.environ if environ is None else environ, out or sys.stdout
    parser = _parser("tfmesos show", "%(prog)s [--runs-dir DIR | --master M] RUN",
                     "Show a run: its outcome, every task's attempts, states and exit codes, "
                     "and the latest metrics its tasks logged. With --master, any run that "
                     "Mesos master knows: a detached run's record (tfrun --detach) is read "
                     "from its scheduler task's sandbox (run/run.json) and shown the same "
                     "way; of a foreground run the master's view is shown (framework, state, "
                     "tasks and their agents), its record being in the run directory of the "
                     "machine that submitted it.")
    _run_argument(parser)
    parser.add_argument("--master", metavar="M", help="the Mesos master that knows the run "
                        "(a running, failing over or finished one); RUN is then its id, or a "
                        "prefix, as tfmesos runs --master lists it. The master's credentials, "
                        "if it asks for them, come from MESOS_PRINCIPAL and MESOS_SECRET. "
                        "Shown is only a run provably yours: the framework your run directory "
                        "names, else the one with that run id whose user and principal are "
                        "yours and, where you hold the run's key (~/.tfmesos/keys/RUN, "
                        "$TFMESOS_KEYS_DIR), whose proof label it verifies (several: listed, "
                        "exit 2)")
    args = parser.parse_options(argv)
    if args.master:
        if args.runs_dir:
            parser.error("--runs-dir names local run directories: it does not go with --master")
        from . import run_lookup
        from .cluster_runs import reader
        from .cluster_show import show_cluster_run
        master = reader(args.master, environ)
        found, state = run_lookup.find_run(master, args.run, environ, args.master)
        return show_cluster_run(master, state, found.run, out,
                                here=_record_here(found.run, environ))
    show_run(local_run(args.run, environ, args.runs_dir), out)
    return 0


def _record_here(run, environ):
    """The run directory of this machine's runs directory that holds the
    record of ``run`` (a run of a master: its id and framework), or None."""
    try:
        local = local_run(run.run_id, environ)
    except (HistoryError, OSError):
        return None
    # Not another user's planted copy of it:
    from .run_lookup import callers_record
    return local.directory if local.file.framework_id == run.framework_id \
        and callers_record(local) else None


# -- tfmesos logs -----------------------------------------------------------------

def _sources(run, tasks, stream, attempt):
    """[(task name, path)] of the logs asked for; one line error when none."""
    chosen = [run.task(name).name for name in tasks] or [t.name for t in run.tasks]
    found = [(name, run.log_path(name, stream, attempt)) for name in chosen]
    found = [(name, path) for name, path in found if path]
    if not found:
        why = ("a fine-grained run keeps no task output" if run.mode == "fine"
               else "no attempt has started yet")
        raise HistoryError("run %s has no %s log%s: %s" % (
            run.run_id, stream, " for %s" % ", ".join(chosen) if tasks else "", why))
    return found


class _Tail:
    """A log file read from where it was left; prefixed lines when several
    tasks' logs are shown. Only a regular file of the run directory is
    read (a link or a FIFO planted there is refused, not followed or
    waited on), a chunk at a time."""

    CHUNK = 1 << 20

    def __init__(self, name, path, prefix):
        self.name, self.path, self.prefix = name, path, prefix
        self.offset = 0
        self.partial = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def read(self, out, final=False):
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:   # a link planted in a run directory is not followed out of it
            fd = os.open(self.path, flags)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise HistoryError("cannot read %s: %s" % (self.path, "a symbolic link, not "
                               "followed" if os.path.islink(self.path)
                               else exc.strerror or exc)) from None
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise HistoryError("cannot read %s: not a regular file" % self.path)
            while True:
                try:
                    handle.seek(self.offset)
                    data = handle.read(self.CHUNK)
                except OSError as exc:
                    raise HistoryError("cannot read %s: %s" % (self.path, exc.strerror or exc)) \
                        from None
                if not data:
                    break
                self.offset += len(data)
                self._write(out, self._decoder.decode(data), False)
        self._write(out, self._decoder.decode(b"", final) if final else "", final)
        out.flush()

    def _write(self, out, text, final):
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        if final and self.partial:
            lines.append(self.partial)
            self.partial = ""
        for line in lines:
            out.write(("[%s] " % printable(self.name) if self.prefix else "") + line + "\n")


def logs_main(argv, environ=None, out=None, interval=FOLLOW_INTERVAL):
    environ, out = os.environ if environ is None else environ, out or sys.stdout
    parser = _parser("tfmesos logs", "%(prog)s [--runs-dir DIR | --master M] RUN [TASK ...] "
                     "[--stderr] [--attempt N] [--follow]", "Print a task's output from the run "
                     "directory (every task's, prefixed, without TASK).")
    _run_argument(parser)
    # A default: intermixed parsing calls a '*' positional without one required.
    parser.add_argument("tasks", nargs="*", default=[], metavar="TASK", help="e.g. worker:1; "
                        "with --master, scheduler is a detached run's scheduler task (its "
                        "newest attempt): alone, its whole output, what a foreground tfrun "
                        "would have printed; beside other tasks, only its own lines, not the "
                        "tasks' output it relays (default: every task)")
    parser.add_argument("--stderr", action="store_true", help="the stderr log (default stdout)")
    parser.add_argument("--attempt", type=COUNT, metavar="N",
                        help="that attempt, 1 to %d (default: each task's last)" % MAX_COUNT)
    parser.add_argument("-f", "--follow", action="store_true",
                        help="keep printing what comes while the run goes; ends with the run "
                        "(with --master: a task's new attempt and the run's end are learnt "
                        "from the master's operator event stream, else by polling the run's "
                        "framework every second, as on a master that refuses the stream)")
    parser.add_argument("--master", metavar="M", help="read the output from the sandboxes of "
                        "this Mesos master's agents, not the run directory, of a run provably "
                        "yours: the framework your run directory names, else the one with "
                        "that run id whose user and principal are yours and, where you hold "
                        "the run's key (~/.tfmesos/keys/RUN, $TFMESOS_KEYS_DIR), whose proof "
                        "label it verifies (several: listed, exit 2)")
    args = parser.parse_options(argv)
    if args.master:
        if args.attempt is not None:
            parser.error("--attempt reads the run directory: it does not go with --master")
        from . import run_lookup
        from .cluster_logs import print_logs
        from .cluster_runs import reader
        master = reader(args.master, environ)
        found, state = run_lookup.find_run(master, args.run, environ, args.master)
        return print_logs(master, state, found.run, args.tasks,
                          "stderr" if args.stderr else "stdout", args.follow, out,
                          auth=master.auth)
    run = local_run(args.run, environ, args.runs_dir)
    stream = "stderr" if args.stderr else "stdout"
    for name in args.tasks:
        run.task(name)   # an unknown task is an error at once, followed or not
    if not args.follow:
        for name, path in _sources(run, args.tasks, stream, args.attempt):
            _Tail(name, path, _prefixed(run, args.tasks)).read(out, final=True)
        return 0
    return follow(run, args.tasks, stream, args.attempt, out, interval)


def _prefixed(run, tasks):
    """Lines get a ``[task] `` prefix when more than one task is shown."""
    return len(tasks) > 1 if tasks else len(run.tasks) > 1


def follow(run, tasks, stream, attempt, out, interval):
    """Print the logs as they grow, switching to a task's new attempt when
    one starts, until run.json's outcome is no longer "running", or its
    tfrun is gone (``history.Run.gone``: killed before it could say so)."""
    tails: dict[str, _Tail] = {}   # task name -> its log being followed
    while True:
        gone = run.gone   # before reading run.json again: its last word is read after
        run = run.reload()
        over = not run.running or gone
        try:
            sources = _sources(run, tasks, stream, attempt)
        except HistoryError:
            if over:
                raise
            sources = []   # nothing launched yet
        for name, path in sources:
            tail = tails.get(name)
            if tail is None or tail.path != path:
                if tail is not None:
                    tail.read(out, final=True)
                    out.write("--- %s: %s ---\n" % (name, os.path.basename(path)))
                tails[name] = _Tail(name, path, _prefixed(run, tasks))
            tails[name].read(out, final=over)
        if over:
            if run.running and run.left_to_tasks:
                print("tfmesos logs: run %s's tfrun left it to its tasks (--failover): their "
                      "output comes here again once tfmesos attach %s takes the run over; "
                      "tfmesos logs %s --master %s reads it from their sandboxes meanwhile"
                      % (run.run_id, run.run_id, run.run_id, run.file.master),
                      file=sys.stderr, flush=True)
            elif run.running:
                scheduler = run.file.scheduler
                print("tfmesos logs: run %s is over: the process that ran it (pid %d on %s) is "
                      "gone without saying how it ended" % (run.run_id, scheduler.pid,
                                                            scheduler.host),
                      file=sys.stderr, flush=True)
            return 0
        time.sleep(interval)


# -- tfmesos report ----------------------------------------------------------------

def report_main(argv, environ=None, out=None):
    environ, out = os.environ if environ is None else environ, out or sys.stdout
    from ..record.report import write_report

    parser = _parser("tfmesos report", "%(prog)s [--runs-dir DIR] RUN [-o FILE]",
                     "Write a self-contained HTML report of a run (report.html in its "
                     "directory): a timeline of every task attempt, the outcome and hints, "
                     "CPU and memory when run.json has samples.")
    _run_argument(parser)
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="where to write it (default RUN_DIR/report.html, in a run "
                        "directory that is yours alone)")
    args = parser.parse_options(argv)
    run = local_run(args.run, environ, args.runs_dir)
    path = write_report(run, args.output,
                        now=datetime.datetime.now(datetime.timezone.utc))
    out.write("%s\n" % path)
    return 0


COMMANDS = {"runs": runs_main, "show": show_main, "logs": logs_main, "report": report_main}
