"""``tfrun``: replica mode. Runs a command in every task of a TensorFlow
cluster on Mesos (or the embedded local master) and exits with its result.

    tfrun -w 2 -s 1 -- python train.py --ps_hosts {ps_hosts} \\
        --worker_hosts {worker_hosts} --job_name {job_name} --task_index {task_index}
"""

import json
import logging
import os
import signal
import sys
import threading

from ..core import config
from ..core.signals import interrupted_by
from ..core.taskinfo import warm_task_command
from ..exceptions import MasterAddressError, RunKilled, SpecError, TaskFailed, TFMesosError
from .common import (
    SIGPIPE_EXIT,
    OutputClosed,
    abandon_streams,
    ignore_signals,
    interrupt_on_signals,
    interruptible,
    interrupting_only_inside,
    leave,
    quiet_hung_up_terminal,
    quiet_on_closed_pipe,
    setup_logging,
)
from .tensorboard import announce_when_up, url_of
from .tfrun_checks import check_before_start
from .tfrun_jobs import shown_logs
from .tfrun_options import build_parser, command_string, read_options, split_command
from .tfrun_report import (
    print_metrics,
    print_sandbox_tail,
    print_tail,
    print_usage,
    say,
    where_recorded,
)

SIGNALLED_READER_WAIT = 5.0   # seconds a run a signal ended waits for a reader that does not read
_open_lines: dict[str, str] = {}  # "stdout"/"stderr" -> the task whose last line is unfinished
_cut_lines: dict[str, set[str]] = {}  # the tasks whose unfinished line another task's ended


def in_flags(error):
    """``error`` naming tfrun's flags (``tfrun_flags``, imported once an
    error is: not on the start-up path)."""
    from .tfrun_flags import in_flags as worded
    return worded(error)


def print_log(slot, stream, text):
    """Print a chunk of a task's output, each line prefixed ``[job:index] ``.
    A line may continue in the next chunk (no newline added) unless another
    task prints in between; a ``\\r`` (progress) redraws the line, prefix
    included."""
    target = sys.stderr if stream == "stderr" else sys.stdout
    prefix = "[%s] " % slot.name
    owner = _open_lines.pop(stream, None)
    cut = _cut_lines.setdefault(stream, set())
    parts = []
    if owner not in (None, slot.name):
        parts.append("\n")
        cut.add(owner)
    if slot.name in cut:
        cut.discard(slot.name)
        if text.startswith("\n"):   # the end of the line that was ended for it
            text = text[1:]
    at_start = owner != slot.name
    *lines, rest = text.split("\n")
    for line in lines:
        parts.append((prefix if at_start else "") + line.replace("\r", "\r" + prefix) + "\n")
        at_start = True
    if rest:
        parts.append((prefix if at_start else "") + rest.replace("\r", "\r" + prefix))
        _open_lines[stream] = slot.name
    if stream in _unwritable:
        return
    try:
        # Through tfrun's console (``console``): left out when it is far behind.
        getattr(target, "write_output", target.write)("".join(parts))
        target.flush()
    except BrokenPipeError:
        _unwritable.add(stream)
        # Said once (here or by the console's on_closed): the lines still
        # coming as the run stops are not written; a second OutputClosed
        # would cut the stop short (run.json "running", the framework left).
        if not _reader_gone.is_set():
            _reader_gone.set()
            raise OutputClosed() from None   # stops the run, as SIGPIPE would stop tfrun
    except OSError as exc:   # a full disk under a redirection: the run goes on
        warn_unwritable(stream, exc)


_unwritable: "set[str]" = set()   # the streams print_log could not write: written no more
_reader_gone = threading.Event()  # the run was told its output's reader went away


def warn_unwritable(stream, exc):
    """Say once that the tasks' output cannot be written to ``stream``."""
    if stream in _unwritable:
        return
    _unwritable.add(stream)
    try:
        sys.stderr.write("tfrun: warning: cannot write the tasks' output to %s (%s): the "
                         "run goes on; their output is kept in its run directory\n"
                         % ("stderr" if stream == "stderr" else "stdout",
                            getattr(exc, "strerror", None) or exc))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def shown_only(show, progress=None):
    """``print_log`` for the tasks ``show`` chooses (every task's output
    reaches the run directory anyway), the status line taken away first."""
    def shown(slot, stream, text):
        if show(slot):
            if progress is not None:
                progress.hide()
            print_log(slot, stream, text)
    return shown


def execute(run, show, progress, advice=True, leave_on_interrupt=False):
    """Run to the end and return the exit code; names the run directory
    when the run did not succeed; ``advice``: what tfrun says of a run that
    goes well (the cluster's addresses, the usage table with its sizing
    hints, the last metrics; ``tfrun -q`` turns it off: the command's
    output and what went wrong are left); ``leave_on_interrupt``: Ctrl-C
    leaves the run to its tasks (``tfmesos attach``) instead of stopping
    it. What it writes goes through its console (``console``): a reader
    that does not read never holds the run up."""
    from ..core.events import Interrupted
    from .tfrun_console import running, write_if_taken

    _unwritable.clear()   # a run of this process before may have found them closed
    _reader_gone.clear()

    def closed():   # the reader of the tasks' output went away: stop, as SIGPIPE would
        _reader_gone.set()
        run.events.put(Interrupted(signal.SIGPIPE, OutputClosed()))
    left_over = None
    with running(on_closed=closed) as console:
        code = _execute(run, show, progress, advice, leave_on_interrupt, console)
        if run.detached:
            # A detached run's scheduler: its teardown's SIGTERM does not cut
            # its last words short as they are written (its sandbox's files).
            with ignore_signals():
                console.drain(SIGNALLED_READER_WAIT)
        elif interrupted_by() is not None:
            # A run a signal ended: whoever sent it (timeout, systemd, docker
            # stop) waits for tfrun's end, and SIGKILLs it in the end; a reader
            # that does not read is waited for a while (another signal ends the
            # wait), then left (the tasks' output is all in the run directory).
            try:
                drained = console.drain(SIGNALLED_READER_WAIT)
            except KeyboardInterrupt:
                drained = False
            if not drained:
                left_over = console.abandon()
                abandon_streams()
    if left_over is not None:   # tfrun's own lines, where they are taken at once
        write_if_taken(*left_over)
    # A last write refused (a full disk) that no later write raised: said too.
    errors = console.take_errors()
    for stream, error in sorted(errors.items()):
        if not isinstance(error, BrokenPipeError):
            warn_unwritable(stream, error)
    if code == 0 and isinstance(errors.get("stdout"), BrokenPipeError):
        # Its reader left before the output of the run was all written (the
        # run had ended): as SIGPIPE ends cat in cat | head, quietly.
        return SIGPIPE_EXIT
    return code


def _execute(run, show, progress, advice, leave_on_interrupt, console):
    succeeded = left = False
    failed = None   # the task whose failure ended the run: its last lines, once stopped
    stopped = threading.Event()   # ends the wait for TensorBoard's URL
    # Ctrl-C (SIGINT, SIGTERM) interrupts the run and end_mlflow's wait
    # (``interruptible``), and is ignored everywhere else in here: as the run
    # stops, and in the lines before and after the stop.
    with interrupting_only_inside():
        try:
            with interruptible():
                run.start()
                try:
                    spec = run.wait_ready()
                except BaseException:
                    if progress is not None:
                        progress.clear()
                    raise
                if progress is not None:
                    progress.ready()   # from now on: the tasks' metrics
                if advice:
                    say("cluster ready: %s" % json.dumps(spec))
                if url_of(spec):
                    announce_when_up(url_of(spec), say, stopped=stopped)
                code = run.wait_finished()
            succeeded = True
            return code
        except (KeyboardInterrupt, BrokenPipeError) as exc:
            quiet_hung_up_terminal()   # a SIGHUP's: nothing is said from here on
            if isinstance(exc, BrokenPipeError) or console.closed:   # (the console's)
                exc = OutputClosed()
            # The terminal gone (SIGHUP) under a run that outlives its
            # scheduler (--failover): left to its tasks, as tfmesos attach
            # leaves it on Ctrl-C, for tfmesos attach to take over again.
            hung_up = interrupted_by() == signal.SIGHUP and run.spec.failover_timeout is not None
            if (leave_on_interrupt or hung_up) and not isinstance(exc, OutputClosed):
                with ignore_signals():
                    run.detach()
                left = True
                say("detached: the tasks go on without a scheduler for %s; take the run over "
                    "again with tfmesos attach %s, stop it with tfmesos kill %s --master %s"
                    % (duration(run.run_spec.failover_timeout), run.run_id, run.run_id,
                       run.master))
                succeeded = True
                return 0
            killed = run.as_kill(exc)   # a detached run's scheduler task's SIGTERM
            if killed is not None:
                return _said_killed(killed)
            run.record.ended(exc, run.phase)   # also between the waits
            if isinstance(exc, OutputClosed):
                say("%s; stopping every task" % exc)
                return SIGPIPE_EXIT
            say("interrupted; stopping every task")
            return 130
        except RunKilled as exc:
            return _said_killed(exc)
        except TaskFailed as exc:
            say(str(exc))
            if run.record.hint:
                say("hint: %s" % run.record.hint)
            failed = exc.task
            return exc.exit_code if exc.exit_code else 1
        except TFMesosError as exc:
            say("error: %s" % in_flags(exc))
            return 1
        except Exception as exc:
            # What none of the above expected (a thread that cannot start:
            # the process limit reached) ends the run as a failure: recorded
            # so before the stop, which would record a run that reached its
            # cluster as succeeded, and said in one line.
            run.record.ended(exc, run.phase)
            say("error: %s" % unexpected(exc))
            return 1
        finally:
            if progress is not None:
                progress.clear()
            stopped.set()
            # A detached run's scheduler is SIGTERMed by its own teardown, as
            # Mesos kills a framework's tasks: expected, nothing to answer.
            with ignore_signals(notice=None if run.detached else (
                    "tfrun: still stopping every task (one that ignores SIGTERM is killed "
                    "after its grace period)\n")):
                run.stop()
                if not left:
                    forget_ended_key(run)
            if failed is not None:
                # After the stop, which records the output still on its way:
                # Mesos' report of the end can come before the task's last lines.
                print_sandbox_tail(run, failed)
                print_tail(run, failed, show)
            # The run is stopped: a Ctrl-C from here on cuts the rest short, with
            # a line, never a traceback (end_mlflow says so itself once it waits).
            # A detached run's scheduler: its teardown's SIGTERM may come now,
            # expected, as above (the bounded rest is said in full).
            mlflow_pending = run.mlflow is not None
            try:
                with ignore_signals() if run.detached else interruptible():
                    run.end_mlflow()   # --mlflow: bounded, and Ctrl-C ends it (one line)
                    mlflow_pending = False
                    if not succeeded and run.record.directory:
                        say("logs and run record: %s" % where_recorded(run))
                    if advice:
                        print_usage(run)
                        print_metrics(run)
                    unsaved = run.record.run_json_error
                    if unsaved is not None and run.record.directory:   # a full disk: said last
                        say("warning: run.json in %s could not be written (%s): it does not "
                            "hold this run's end" % (run.record.directory,
                                                     unsaved.strerror or unsaved))
            except KeyboardInterrupt:
                say("interrupted%s" % ("; MLflow was not told the run's end: the MLflow run "
                                       "may be incomplete" if mlflow_pending else ""))


def unexpected(error):
    """The line that says ``error``, an exception tfrun did not expect: a
    thread refused, what to do; else its type and text, its traceback
    logged (shown with -v)."""
    from ..core.thread_limit import thread_refused, thread_refused_text
    if thread_refused(error):
        return thread_refused_text(error)
    log = logging.getLogger(__name__)
    log.info("the traceback of the error that ended the run:", exc_info=error)
    return "%s: %s%s" % (type(error).__name__, error,
                         "" if log.isEnabledFor(logging.INFO) else
                         " (tfrun -v shows its traceback)")


def forget_ended_key(run):
    """The key of a run that has ended here (not left to its tasks, nor
    taken over by another scheduler, which goes on with it) is removed."""
    from ..exceptions import SchedulerReplaced
    if run.spec.failover_timeout is None or isinstance(run.state.failure, SchedulerReplaced):
        return
    from ..record.takeover_files import forget_key
    forget_key(run.run_id, os.environ)


def status_line(quiet=False, verbose=False):
    """The status line on stderr (``progress.Progress``), None with -q; -v
    writes log lines from other threads: progress then comes as lines too."""
    if quiet:
        return None
    from .progress import Progress
    return Progress(None, tty=sys.stderr.isatty() and not verbose,
                    idle=lambda: not _open_lines)


def duration(seconds):
    seconds = int(seconds or 0)
    if seconds >= 3600 and seconds % 3600 == 0:
        return "%d h" % (seconds // 3600)
    if seconds >= 60 and seconds % 60 == 0:
        return "%d min" % (seconds // 60)
    return "%d s" % seconds


def keep_for_takeover(run, identity, directory):
    """``--failover``: what ``tfmesos attach`` needs, once the framework is
    known (``ClusterRun``'s ``on_framework``): the run's key, and its saved
    form (``takeover_files.FailoverFile``: the spec, the identity, the files
    it packed, kept in its run directory, and where its plain tasks run)."""
    from ..core.spec_codec import spec_to_dict
    from ..record.takeover_files import FailoverFile, TakeoverError, save_failover, save_key
    packed = {role: path for role, path in run.shipment.packed_files().items() if path} \
        if run.shipment is not None else {}
    try:
        save_key(identity, os.environ)
        save_failover(directory, FailoverFile(identity.public(), spec_to_dict(run.spec), packed,
                                              run.workdir))
    except (OSError, TakeoverError) as exc:
        say("warning: --failover: cannot keep what tfmesos attach needs (%s): if tfrun "
            "goes, nothing can take the run over" % exc)
        return
    say("--failover: if tfrun goes, the tasks keep running for %s; take the run over "
        "with: tfmesos attach %s" % (duration(run.spec.failover_timeout), identity.run_id))


def _said_killed(killed):
    """Say ``killed`` (a RunKilled); tfrun's exit status for it."""
    from ..record.outcomes import KILLED, tfrun_exit_code
    say(str(killed))
    return tfrun_exit_code(KILLED)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    options, words = split_command(argv)
    args = parser.parse_options(options, words if "--" in argv else None)
    if not words:
        parser.error("no command given: put it after '--', e.g. tfrun -w 2 -s 1 -- python "
                     "train.py")
    setup_logging("tfrun", args.verbose)
    command = command_string(words)
    try:
        config.working_directory()   # every relative path of the run starts there
        spec = read_options(args, command)
        show = shown_logs(spec)
        if spec.master == config.LOCAL:   # what it cannot do is a usage error, as -M's
            from ..backends.sizing import check_local
            check_local(spec.jobs, spec.local_master_options)
            from ..core.local_python import check_local_user
            check_local_user(spec)
        check_before_start(spec, os.environ)
        from ..ship.work_dirs import remove_stale
        remove_stale()   # what tfruns killed before they could clean up left
        if args.detach:
            from ..core.detached import check_detachable
            check_detachable(spec)
    except (SpecError, MasterAddressError) as exc:
        parser.error(str(in_flags(exc)))
    except TFMesosError as exc:   # what the checks found that is no usage error
        print("tfrun: error: %s" % in_flags(exc), file=sys.stderr)
        return 1
    if args.detach:
        from .tfrun_detached import submit
        return submit(spec, args, say)
    if args.no_verify:
        print("tfrun: warning: --no-verify: the master's certificate is not checked; anyone "
              "in the path can impersonate it", file=sys.stderr)
    # Imported once the options are known to be good: the run's machinery
    # is most of tfrun's start-up, and --help or a usage error needs none of it.
    from ..core.launch import ClusterRun
    # The warm interpreters start after that import, not beside it: on two
    # cores their start-up took half of tfrun's while it imported, on the way
    # to the first launch; they are needed only then (the master's start and
    # the first offer come first). tfrun -w 2 -s 1 -- true: 0.20 s -> 0.19 s.
    warm = warm_task_command(spec)
    if warm is not None:
        from ..backends.warm_runner import start_warm_runner
        warm_runner = start_warm_runner(warm)
    else:
        warm_runner = None

    progress = status_line(args.quiet, args.verbose)

    def kept(identity, directory):   # called once subscribed: ``run`` is made by then
        keep_for_takeover(run, identity, directory)
    try:
        # mlflow_at_stop=False: execute() ends it once the tasks are stopped.
        run = ClusterRun(spec, on_log=shown_only(show, progress), on_progress=progress,
                         notify=say, warm_runner=warm_runner,
                         on_framework=kept if spec.failover_timeout is not None else None,
                         mlflow_at_stop=False)
    except TFMesosError as exc:
        if warm_runner is not None:
            warm_runner.close()
        print("tfrun: error: %s" % in_flags(exc), file=sys.stderr)
        return 1
    except BaseException:   # interrupted (SIGTERM, SIGHUP, Ctrl-C): nothing left running
        if warm_runner is not None:
            with ignore_signals():
                warm_runner.close()
        raise
    if args.verbose:
        print("tfrun: logs and run record: %s" % run.record.directory, file=sys.stderr,
              flush=True)
    return execute(run, show, progress, advice=not args.quiet)


def run():
    """The ``tfrun`` command: ``main``, then leave at once (``leave``); a
    reader of its output that went away ends it quietly (``SIGPIPE_EXIT``),
    and so does a Ctrl-C, SIGTERM or SIGHUP that ``execute`` does not see
    (while the options are read and checked, before the run begins, or as
    it leaves): 130, one line, no traceback."""
    leave(quiet_on_closed_pipe(_main_or_interrupted))


def _main_or_interrupted():
    try:
        # SIGTERM and SIGHUP as Ctrl-C from the first option read on (they
        # killed tfrun silently, 143 or 129, before execute put its handlers
        # in place over these; theirs come back after execute's block).
        with interrupt_on_signals():
            return main()
    except KeyboardInterrupt:
        quiet_hung_up_terminal()   # a SIGHUP's terminal gone: nothing to write to
        say("interrupted")
        return 130
    except RuntimeError as exc:   # a thread refused outside the run (its warm interpreters')
        from ..core.thread_limit import thread_refused, thread_refused_text
        if not thread_refused(exc):
            raise
        say("error: %s" % thread_refused_text(exc))
        return 1


if __name__ == "__main__":
    run()
