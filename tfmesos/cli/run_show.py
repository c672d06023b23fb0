"""A run record printed: ``tfmesos show``'s view of a run.json (a local run
directory's, or a detached run's read from its scheduler's sandbox,
``cluster_show``): the outcome, every task's attempts, states and exit
codes, restarts, relaunches, scheduler takeovers and the latest metrics."""

import datetime

from ..mesos.task_states import TERMINAL_STATES
from ..record.metric_series import left_out_note, summaries
from ..record.schema import State
from ..record.times import parse_time
from .tables import PrintableLines, duration_text, local_time, printable, table


def code_text(value):
    return "-" if value is None else str(value)


def _offset(run, text):
    """``+1.2 s`` from the run's submission, or ``-``."""
    moment, start = parse_time(text), run.started
    if moment is None or start is None:
        return "-"
    return "+%.1f s" % (moment - start).total_seconds()


def _ended(run, attempt, last, now):
    """The ENDED cell of an attempt whose last state is ``last``: when it
    ended, or while the run goes ``running (12.3 s so far)`` (``staging``,
    ``killing``, ...: its state, for as long as it has been launched);
    ``-`` for an attempt whose end the record does not hold (its run is
    over, or its scheduler gone)."""
    if last.state in TERMINAL_STATES:
        return _offset(run, last.time)
    launched = parse_time(attempt.launched)
    if not run.running or run.gone or launched is None:
        return "-"
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return "%s (%s so far)" % (last.state.replace("TASK_", "").lower(),
                               duration_text(max(0.0, (now - launched).total_seconds())))


def training_text(file):
    """``torch (tfrun --torch)``, ``torch, elastic 1:2 (tfrun --torch-elastic)``."""
    if file.elastic:
        return "%s, elastic %s (tfrun --torch-elastic)" % (file.framework, file.elastic)
    return "%s (tfrun --%s)" % (file.framework, file.framework)


def show_run(run, out, now=None):
    """Print ``run`` (a ``history.Run``) to ``out``; ``now`` (an aware
    datetime, default now) times what is still running. What run.json says
    is shown escaped (``tables.printable``): anyone who may write the runs
    directory may have written it."""
    out = PrintableLines(out)
    file = run.file
    out.write("run %s  %s (%s)  %s, exit code %s\n" % tuple(printable(value) for value in (
        run.run_id, run.name, run.mode, run.shown_outcome, code_text(run.exit_code))))
    lines = [("directory", run.directory),
             ("master", "%s  framework %s" % (file.master or "-", file.framework_id or "-"))]
    if file.command:
        lines.append(("command", file.command))
    if file.framework != "tensorflow":
        lines.append(("training", training_text(file)))
    timings = run.timings
    took = duration_text(run.duration(now))
    if took != "-" and run.gone:
        took = "took at least %s (%s)" % (took, "its tfrun left the run to its tasks: tfmesos "
                                          "attach %s takes it over" % run.run_id
                                          if run.left_to_tasks else "its tfrun is gone")
    elif took != "-" and run.running:
        took = "running for %s so far" % took
    else:
        took = "took %s" % took
    lines.append(("started", "%s  %s  (first offer %s, all registered %s)" % (
        local_time(run.started), took,
        _offset(run, timings.first_offer), _offset(run, timings.all_registered))))
    if run.outcome.message:
        lines.append(("outcome", run.outcome.message))
    for where, hint in run.hints():
        lines.append(("hint", hint if where == "outcome" else "%s: %s" % (where, hint)))
    width = max(len(key) for key, _ in lines)
    for key, value in lines:
        out.write("  %s  %s\n" % (key.ljust(width), printable(value)))
    out.write("\n")
    rows = [("TASK", "ATTEMPT", "RESTART", "STATE", "EXIT", "SOURCE", "ADDRESS", "LAUNCHED",
             "ENDED")]
    for task in run.tasks:
        if not task.attempts:
            rows.append((task.name, "-", "-", task.state, "-", "-", "-", "-", "-"))
        for attempt in task.attempts:
            # Launched, no update from Mesos yet: staging, no time.
            last = attempt.states[-1] if attempt.states else State(state="TASK_STAGING")
            rows.append((task.name, attempt.attempt, attempt.restart, last.state,
                         code_text(attempt.exit_code), last.source or "-", attempt.address or "-",
                         _offset(run, attempt.launched), _ended(run, attempt, last, now)))
    table(rows, out)
    for restart in file.restarts:
        out.write("restart %s at %s (%s): %s; back-off %s s\n" % (
            restart.restart, _offset(run, restart.time), restart.cause, restart.message,
            restart.delay))
    for relaunch in file.relaunches:
        out.write("relaunch of %s at %s (%s) to %s: %s\n" % (
            relaunch.task, _offset(run, relaunch.time), relaunch.cause, relaunch.address,
            "back at %s" % _offset(run, relaunch.back) if relaunch.back else "not back"))
    for takeover in file.takeovers:
        out.write("%s\n" % takeover.text(_offset(run, takeover.time)))
    show_metrics(file, out)


def show_metrics(file, out):
    """Each task's latest metrics (``tfmesos.log_metrics``), when any."""
    from .progress import describe_metrics

    found = summaries(file.metrics, [task.name for task in file.tasks])
    if not found:
        return
    out.write("\nmetrics (latest; steps/s averaged over the run):\n")
    for task, step, values, rate in found:
        out.write("  %s\n" % describe_metrics(task, step, values, rate, limit=len(values)))
    if file.metrics_dropped:
        out.write("  (%s)\n" % left_out_note(file.metrics_dropped))
