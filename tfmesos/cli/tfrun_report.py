"""What tfrun says of a run as it ends: the failed task's last lines (from
tfrun's record, else its Mesos sandbox), the usage table with its sizing
hints, the tasks' last metrics, and where the logs and record are; each
line ``say``s on stderr, never failing for a reader that went away."""

import shlex
import sys


def print_tail(run, task_name, show, lines=10):
    """The last lines a failed task wrote to stderr, unless they were shown."""
    slot = next((slot for slot in run.slots if slot.name == task_name), None)
    tail = run.record.tail(task_name, "stderr", lines) if slot and not show(slot) else []
    if tail:
        print("tfrun: the last lines %s wrote to stderr:" % task_name, file=sys.stderr)
        for line in tail:
            print("[%s] %s" % (task_name, line), file=sys.stderr)
        sys.stderr.flush()


def print_sandbox_tail(run, task_name):
    """What a task that ended before it reached tfrun wrote in its Mesos
    sandbox (its stderr, else its stdout), as its agent served it."""
    found = run.record.last_sandbox_tail(task_name)
    if found is None:
        return
    attempt, tail = found
    stream, lines = ("stderr", tail.stderr) if tail.stderr else ("stdout", tail.stdout)
    if lines:
        say("the last lines %s wrote to %s in its Mesos sandbox (attempt %d):"
            % (task_name, stream, attempt))
        for line in lines:
            say("  | %s" % line)


def say(text):
    try:
        print("tfrun: %s" % text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        # Nobody reads stderr any more (a closed pipe: the task output on
        # stdout decides; a terminal gone, EIO: its SIGHUP stops the run).
        pass


def print_usage(run, advice=True):
    """The end-of-run table: what each task asked for and used, and (with
    ``advice``) sizing hints."""
    from ..record.usage_table import usage_lines  # at the end: not on the start-up path
    lines = usage_lines(run.record.run_file(), advice=advice)
    if lines:
        print("\n".join(lines), file=sys.stderr, flush=True)


MAX_METRICS_LINES = 8   # tasks whose last metrics tfrun prints at the end


def print_metrics(run):
    """The latest metrics of each task that logged any (the first few),
    and how many points were left out, why (``metric_series.left_out_note``)."""
    from .progress import describe_metrics
    latest = run.record.latest_metrics()
    for entry in latest[:MAX_METRICS_LINES]:
        say("metrics: %s" % describe_metrics(*entry))
    if len(latest) > MAX_METRICS_LINES:
        say("metrics of %d more tasks: tfmesos show %s" % (len(latest) - MAX_METRICS_LINES,
                                                          run.run_id))
    _, note = run.record.metrics_left_out()
    if note:
        say("metrics: %s" % note)


def where_recorded(run):
    """Where the user finds a run's logs and record: its run directory; a
    detached run's is in its scheduler task's sandbox (``run/`` there, which
    the caller of ``tfmesos attach`` that relays this line does not have),
    read through the master."""
    if not run.detached:
        return run.record.directory
    from ..mesos.master_address import without_password
    master = shlex.quote(without_password(run.spec.master))   # "[::1]:5050": a glob to zsh
    return "tfmesos logs %s --master %s, tfmesos show %s --master %s" % (
        run.run_id, master, run.run_id, master)


__all__ = ["say", "print_tail", "print_sandbox_tail", "print_usage", "print_metrics",
           "where_recorded", "MAX_METRICS_LINES"]
