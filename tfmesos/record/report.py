"""A run's report: one self-contained HTML file (inline CSS, SVG and a few
lines of script; nothing fetched: it works offline) drawn from its
run.json (``history.Run``): the outcome and hints, a timeline of every
task attempt (launch, running, registered, end; the first offer, the
complete cluster, restarts, relaunches and scheduler takeovers marked),
the tasks' table, the metrics the tasks logged (``tfmesos.log_metrics``:
a chart per metric, a series per task, over the steps), and the tasks'
CPU and memory over time from the attempts' usage samples, with what each
asked and used (the figures of tfrun's table, ``usage_table``). Charts
fill the page's width and tell their series apart by colour, dash and
marker; their legends hide and show a series (``charts``).
"""

import contextlib
import datetime
import html
import os
import stat
import tempfile
import urllib.parse
from typing import Optional

from ..mesos.task_states import TERMINAL_STATES
from ..terminal_text import printable
from .charts import CSS as CHART_CSS
from .charts import TOGGLE_SCRIPT, Series, line_chart
from .history import HistoryError, Run
from .report_metrics import metrics_html
from .run_dirs import UnsafeRunDir, check_own_dir
from .schema import Attempt, State, Task, safe_file_name
from .times import parse_time
from .usage_table import OVER, RSS, average_text, memory_peak, over, usage_rows

REPORT = "report.html"

# The bar of an attempt once it runs, by its last state.
STATE_COLORS = {"TASK_FINISHED": "#2e9d4f", "TASK_FAILED": "#d1372f", "TASK_ERROR": "#d1372f",
                "TASK_KILLED": "#8a8f98", "TASK_LOST": "#e8871e", "TASK_GONE": "#e8871e",
                "TASK_DROPPED": "#e8871e", "TASK_GONE_BY_OPERATOR": "#e8871e",
                "TASK_UNREACHABLE": "#e8871e"}
RUNNING_COLOR = "#3b7dd8"      # not ended (yet)
STAGING_COLOR = "#c9d7ea"      # launched, not running yet
STATUS_COLORS = {"succeeded": "#2e9d4f", "failed": "#d1372f", "aborted": "#d1372f",
                 "interrupted": "#e8871e", "killed": "#8a8f98", "running": "#3b7dd8"}
TAKEOVER_COLOR = "#8a4fd1"


CSS = """
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1d2330;
       margin: 24px 32px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 16px; margin: 28px 0 8px; border-bottom: 1px solid #e3e6eb; padding-bottom: 4px; }
.status { color: #fff; border-radius: 4px; padding: 2px 8px; font-size: 14px; margin-left: 8px;
          vertical-align: middle; }
table { border-collapse: collapse; }
table.facts td { padding: 2px 14px 2px 0; vertical-align: top; }
table.facts td:first-child { color: #5b6475; white-space: nowrap; }
table.tasks th, table.tasks td { padding: 3px 10px; border-bottom: 1px solid #eef0f3;
                                 text-align: left; white-space: nowrap; }
table.tasks th { color: #5b6475; font-weight: 600; }
code, .mono { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; }
.hint { background: #fff7e0; border-left: 4px solid #e8b21e; padding: 6px 10px; margin: 6px 0; }
.message { background: #f6f7f9; padding: 6px 10px; margin: 6px 0; white-space: pre-wrap; }
.legend span { display: inline-block; margin-right: 16px; color: #5b6475; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 5px;
            vertical-align: -1px; border-radius: 2px; }
svg text { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
.muted { color: #5b6475; }
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _local(moment: Optional[datetime.datetime]) -> str:
    # With its zone: a report is read on other machines, and an hour of a
    # DST change happens twice.
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z") if moment else "-"


def _seconds(value: Optional[float]) -> str:
    if value is None:
        return "-"
    if value < 120:
        return "%.1f s" % value
    minutes, seconds = divmod(int(round(value)), 60)
    if minutes < 60:
        return "%dm%02ds" % (minutes, seconds)
    return "%dh%02dm%02ds" % (minutes // 60, minutes % 60, seconds)


class _Clock:
    """Times of the run as seconds from its submission."""

    def __init__(self, run: Run, now: datetime.datetime) -> None:
        self.start = run.started or now
        ends = [run.finished] + [parse_time(state.time) for task in run.tasks
                                 for attempt in task.attempts for state in attempt.states]
        known = [moment for moment in ends if moment is not None]
        self.end = max(known + [now if run.running else self.start])
        self.span = max((self.end - self.start).total_seconds(), 0.001)

    def at(self, text: Optional[str]) -> Optional[float]:
        """Seconds from the submission to the run.json time ``text``, or None."""
        moment = parse_time(text)
        return None if moment is None else (moment - self.start).total_seconds()


def _attempt_times(attempt: Attempt, clock: _Clock) -> tuple[
        Optional[float], Optional[float], Optional[float], Optional[float], Optional[State]]:
    """launched, running, registered, ended (seconds; None when unknown),
    and the last state (None before Mesos' first update)."""
    running = next((clock.at(s.time) for s in attempt.states if s.state == "TASK_RUNNING"),
                   None)
    last = attempt.states[-1] if attempt.states else None
    ended = clock.at(last.time) if last and last.state in TERMINAL_STATES else None
    return clock.at(attempt.launched), running, clock.at(attempt.registered), ended, last


def _ticks(span: float, count: int = 6) -> list[float]:
    """Round tick values (seconds) across ``span``."""
    raw = span / count
    step = next(s for s in (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
                            3600, 7200, 14400, 43200, 86400) + (raw * 2,) if s >= raw)
    return [i * step for i in range(int(span / step) + 1)]


def _tick_label(value: float) -> str:
    if value < 60:
        return ("%.1f s" % value).replace(".0 s", " s")
    if value < 3600:
        return "%dm%02d" % divmod(int(value), 60)
    return "%dh%02d" % (int(value) // 3600, int(value) % 3600 // 60)


def timeline_svg(run: Run, clock: _Clock) -> str:
    """Every attempt as a bar: light from its launch until it runs, then
    colored by how it ended; a dot where it registered; lines for the first
    offer, the complete cluster, restarts, relaunches and takeovers."""
    rows = [(task, attempt) for task in run.tasks for attempt in task.attempts]
    label_w, width, row_h, top = 150, 760, 26, 34
    height = top + row_h * max(len(rows), 1) + 30

    def x(seconds: float) -> float:
        return label_w + width * max(0.0, min(seconds, clock.span)) / clock.span

    parts = ['<svg class="timeline" viewBox="0 0 %d %d" width="100%%" role="img" '
             'aria-label="timeline of every task attempt">' % (label_w + width + 140, height)]
    for tick in _ticks(clock.span):
        parts.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eef0f3"/>'
                     '<text x="%.1f" y="%d" font-size="11" fill="#5b6475" text-anchor="middle">'
                     '%s</text>' % (x(tick), top - 6, x(tick), height - 24, x(tick),
                                    height - 10, _tick_label(tick)))
    marks: list[tuple[Optional[float], str, str]] = []
    for moment, label in ((run.timings.first_offer, "first offer"),
                          (run.timings.all_registered, "cluster complete")):
        marks.append((clock.at(moment), label, "#5b6475"))
    for restart in run.file.restarts:
        marks.append((clock.at(restart.time), "restart %s (%s: %s)"
                      % (restart.restart, restart.cause, restart.task), "#d1372f"))
    for relaunch in run.file.relaunches:
        marks.append((clock.at(relaunch.time), "relaunch %s" % relaunch.task, "#e8871e"))
    for takeover in run.file.takeovers:
        marks.append((clock.at(takeover.time), "takeover: scheduler %d (%s)"
                      % (takeover.scheduler_attempt, takeover.how), TAKEOVER_COLOR))
    for number, (at, label, color) in enumerate(
            (at, label, color) for at, label, color in marks if at is not None):
        parts.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" '
                     'stroke-dasharray="4 3"/><text x="%.1f" y="%d" font-size="11" fill="%s">'
                     '%s</text>' % (x(at), top - 4, x(at), height - 24, color, x(at) + 3,
                                    12 + 11 * (number % 2), color, _e(label)))
    for index, (task, attempt) in enumerate(rows):
        y = top + index * row_h
        launched, running, registered, ended, last = _attempt_times(attempt, clock)
        name = "%s #%s" % (task.name, attempt.attempt)
        if attempt.restart:
            name += " (r%s)" % attempt.restart
        parts.append('<text x="%d" y="%d" font-size="12" fill="#1d2330" text-anchor="end">%s'
                     '</text>' % (label_w - 8, y + 16, _e(name)))
        if launched is None:
            continue
        end = ended if ended is not None else clock.span
        state = last.state if last else ""
        color = STATE_COLORS.get(state, RUNNING_COLOR)
        start_run = running if running is not None else (end if ended is not None else None)
        if start_run is None:
            start_run = end
        parts.append('<rect x="%.1f" y="%d" width="%.1f" height="14" fill="%s" rx="2">'
                     '<title>%s launched at +%.2f s</title></rect>'
                     % (x(launched), y + 5, max(x(start_run) - x(launched), 1), STAGING_COLOR,
                        _e(name), launched))
        if running is not None:
            parts.append('<rect x="%.1f" y="%d" width="%.1f" height="14" fill="%s" rx="2">'
                         '<title>%s running from +%.2f s; %s</title></rect>'
                         % (x(running), y + 5, max(x(end) - x(running), 1.5), color, _e(name),
                            running, _e(state)))
        if registered is not None:
            parts.append('<circle cx="%.1f" cy="%d" r="4" fill="#fff" stroke="#1d2330" '
                         'stroke-width="1.5"><title>registered at +%.2f s</title></circle>'
                         % (x(registered), y + 12, registered))
        if ended is not None:
            code = attempt.exit_code
            text = "%s%s" % (state.replace("TASK_", "").lower(),
                             "" if code is None else " (%s)" % code)
            if last is not None and state == "TASK_KILLED" \
                    and (last.source or "").startswith("stopped by"):
                text = "stopped"     # the run stopped it (its task then exits 0)
            if code not in (None, 0):
                color = STATE_COLORS["TASK_FAILED"]   # its command failed, whatever ended it
            parts.append('<text x="%.1f" y="%d" font-size="11" fill="%s">%s</text>'
                         % (x(ended) + 5, y + 16, color, _e(text)))
    parts.append("</svg>")
    return "".join(parts)


LEGEND = ('<div class="legend"><span><i style="background:%s"></i>launched</span>'
          '<span><i style="background:%s"></i>running</span>'
          '<span><i style="background:%s"></i>finished</span>'
          '<span><i style="background:%s"></i>failed</span>'
          '<span><i style="background:%s"></i>killed</span>'
          '<span><i style="background:%s"></i>lost</span>'
          '<span>&#9675; registered</span></div>'
          % (STAGING_COLOR, RUNNING_COLOR, STATE_COLORS["TASK_FINISHED"],
             STATE_COLORS["TASK_FAILED"], STATE_COLORS["TASK_KILLED"], STATE_COLORS["TASK_LOST"]))


# -- usage samples (each attempt's usage.samples) ---------------------------------

def command_start(attempt: Attempt, clock: _Clock) -> Optional[float]:
    """When the attempt's command started (seconds on ``clock``), which its
    samples' ``t`` counts from: its exit message's time less the command's
    wall time; for files without ``exited`` (version 1), when it
    registered, shortly before its command started. None when unknown."""
    usage, exited = attempt.usage, clock.at(attempt.exited)
    if exited is not None and usage is not None and usage.wall_s is not None:
        return exited - usage.wall_s
    return clock.at(attempt.registered)


def usage_series(attempt: Attempt, clock: _Clock
                 ) -> list[tuple[float, Optional[float], Optional[float]]]:
    """[(seconds, cpus or None, MB or None)], one per sample of the
    attempt's usage; cpus is the rate since the sample before (since the
    command's start for the first)."""
    usage = attempt.usage
    start = command_start(attempt, clock) if usage else None
    if usage is None or start is None:
        return []
    points: list[tuple[float, Optional[float], Optional[float]]] = []
    before = (0.0, 0.0)
    for sample in usage.samples:
        cpus = None
        if sample.cpu_s is not None and sample.t > before[0]:
            cpus = max(0.0, (sample.cpu_s - before[1]) / (sample.t - before[0]))
        if sample.cpu_s is not None:
            before = (sample.t, sample.cpu_s)
        points.append((start + sample.t, cpus, sample.rss_mb))
    return points


def _time_ticks(clock: _Clock) -> list[tuple[float, str]]:
    return [(tick, _tick_label(tick)) for tick in _ticks(clock.span, 8)]


def usage_html(run: Run, clock: _Clock) -> str:
    """A chart of the tasks' CPU and one of their memory over the run's
    time (a series per task, a segment per attempt), and what each task
    asked and used (the figures of tfrun's table: ``usage_table``), or ""
    when no attempt has samples."""
    cpu: list[Series] = []
    memory: list[Series] = []
    for task in run.tasks:
        per_attempt = [usage_series(a, clock) for a in task.attempts]
        if not any(per_attempt):
            continue
        cpu.append(Series(task.name, [[(t, c) for t, c, _ in points if c is not None]
                                      for points in per_attempt]))
        memory.append(Series(task.name, [[(t, m) for t, _, m in points if m is not None]
                                         for points in per_attempt], _peak_note(task)))
    cpu = [line for line in cpu if any(line.segments)]
    memory = [line for line in memory if any(line.segments)]
    if not cpu and not memory:
        return ""
    blocks = ["<h2>CPU and memory</h2>", _usage_table(run)]
    for series, label, caption in (
            (cpu, "CPU (cpus) per task",
             "CPU: cpus used (cpu seconds per second between samples)"),
            (memory, "memory (MB) per task",
             "Memory: MB resident in each task's processes at each sample (the peak, looked "
             "at every second, beside its name)")):
        values = [v for line in series for segment in line.segments for _, v in segment]
        if values:
            blocks.append(line_chart(label, caption, "usage", series, (0.0, clock.span),
                                     _time_ticks(clock), (0.0, max(max(values) * 1.1, 1e-6)),
                                     height=190))
    return "".join(blocks)


def _peak_note(task: Task) -> str:
    """``peak 874 MB``: the peak of what the memory chart draws, its
    processes' resident memory (``Usage.peak_mb`` of its last measured
    attempt, ``attempt 2`` named when an earlier one was measured too)."""
    measured = [attempt for attempt in task.attempts if attempt.usage is not None]
    peak = measured[-1].usage.peak_mb() if measured and measured[-1].usage else None
    if peak is None:
        return ""
    return "peak %.0f MB%s" % (peak, " (attempt %d)" % measured[-1].attempt
                               if len(measured) > 1 else "")


def _usage_table(run: Run) -> str:
    """Each task's cpus and mem against what it used: tfrun's end table."""
    rows = usage_rows(run.file)
    if not rows:
        return ""
    head = ("task", "cpus", "cpu-s", "avg cpus used", "mem MB", "peak MB")
    lines = ["<tr>%s</tr>" % "".join("<th>%s</th>" % h for h in head)]
    for name, _, cpus, mem, usage in rows:
        peak, own = memory_peak(usage, mem)
        average = average_text(usage)
        if over(usage, cpus):
            average = ('<span title="above its cpus: Mesos\' cpus are a share (cpu.shares), '
                       'not a cap, unless the agent runs --cgroups_enable_cfs">%s%s</span>'
                       % (average, OVER))
        lines.append("<tr><td>%s</td><td>%s</td><td>%.1f</td><td>%s</td><td>%.0f</td>"
                     "<td>%.0f%s</td></tr>" % (
                         _e(name), _e("%g" % cpus), usage.cpu_s or 0.0, average, mem, peak,
                         (" (%d%%)" % round(100.0 * peak / mem) if mem else "")
                         + ("" if own else " " + RSS)))
    note = ('<p class="muted">avg cpus used: cpu seconds of the command\'s processes over its '
            'wall time (- under a second: too short for one); %s above its cpus (a share, '
            'not a cap, without a CFS quota). peak: the most its own memory cgroup held '
            '(run.json\'s usage.cgroup.peak_mb), what the isolator counts; %s without one: the '
            'most its processes held at once (usage.peak_tree_rss_mb), shared libraries '
            'included. MB of 2<sup>20</sup> bytes as Mesos counts mem.</p>' % (OVER, RSS))
    return '<table class="tasks">%s</table>%s' % ("".join(lines), note)


# -- the page --------------------------------------------------------------------

def _log_link(name: str, stream: str) -> str:
    """A link to a log beside the report; a name that is not a plain file
    name of the run directory (``schema.safe_file_name``: a path, a
    ``javascript:`` URL a crafted run.json may hold) is shown, not linked."""
    if not safe_file_name(name):
        return '<span class=muted title="%s">%s</span>' % (_e(name), stream)
    return '<a href="%s">%s</a>' % (_e(urllib.parse.quote(name)), stream)


def _tasks_table(run: Run, clock: _Clock) -> str:
    head = ("task", "attempt", "restart", "state", "source", "exit", "address", "host",
            "launched", "registered", "ended", "logs")
    rows = ["<tr>%s</tr>" % "".join("<th>%s</th>" % h for h in head)]
    for task in run.tasks:
        for attempt in task.attempts:
            launched, _, registered, ended, last = _attempt_times(attempt, clock)
            logs = "" if not attempt.logs else " ".join(
                _log_link(attempt.logs.named(stream), stream) for stream in ("stdout", "stderr"))
            cells = (task.name, attempt.attempt, attempt.restart, last and last.state,
                     last and last.source, attempt.exit_code, attempt.address, attempt.hostname,
                     *("-" if t is None else "+%.2f s" % t for t in (launched, registered,
                                                                     ended)))
            rows.append("<tr>%s<td>%s</td></tr>" % (
                "".join("<td>%s</td>" % _e("-" if c is None else c) for c in cells), logs))
        if not task.attempts:
            rows.append("<tr><td>%s</td><td colspan=11 class=muted>never launched</td></tr>"
                        % _e(task.name))
    return '<table class="tasks">%s</table>' % "".join(rows)


def render(run: Run, now: Optional[datetime.datetime] = None) -> str:
    """The report of ``run`` (a ``history.Run``) as an HTML string."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    clock = _Clock(run, now)
    file, outcome = run.file, run.outcome
    status, shown = run.status, run.shown_outcome
    facts = [("name", run.name), ("mode", run.mode), ("master", file.master),
             ("framework", file.framework_id), ("command", file.command),
             ("training", None if file.framework == "tensorflow" else
              file.framework + (", elastic %s" % file.elastic if file.elastic else "")),
             ("jobs", ", ".join("%s &times; %s (cpus %s, mem %s MB, gpus %s)" % tuple(
                 _e(value) for value in (job.num, job.name, job.cpus, job.mem, job.gpus))
                 for job in file.jobs)),
             ("started", _local(run.started)), ("duration", _seconds(run.duration(now))),
             ("exit code", outcome.exit_code), ("directory", run.directory)]
    rows = "".join("<tr><td>%s</td><td>%s</td></tr>" % (
        key, value if key == "jobs" else '<span class="mono">%s</span>' % _e(value)
        if key in ("command", "directory", "framework") else _e(value))
        for key, value in facts if value not in (None, ""))
    body = ['<h1>Run %s <span class="status" style="background:%s">%s</span></h1>'
            % (_e(run.run_id), STATUS_COLORS.get(status, "#5b6475"), _e(shown)),
            '<table class="facts">%s</table>' % rows]
    if outcome.message:
        body.append('<div class="message">%s</div>' % _e(outcome.message))
    body += ['<div class="hint">hint: %s</div>' % _e(hint if where == "outcome" else
                                                      "%s: %s" % (where, hint))
             for where, hint in run.hints()]
    body += ["<h2>Timeline</h2>", LEGEND, timeline_svg(run, clock),
             "<h2>Tasks</h2>", _tasks_table(run, clock)]
    for restart in file.restarts:
        body.append("<p>restart %s at +%.1f s (%s): %s; back-off %s s</p>" % (
            restart.restart, clock.at(restart.time) or 0, _e(restart.cause),
            _e(restart.message), restart.delay))
    for takeover in file.takeovers:
        body.append('<p class="takeover">%s</p>'
                    % _e(takeover.text("+%.1f s" % (clock.at(takeover.time) or 0))))
    body.append(metrics_html(run))
    body.append(usage_html(run, clock))
    body.append('<p class="muted">tfmesos report, written %s from run.json</p>' % _local(now))
    body.append(TOGGLE_SCRIPT)
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width">'
            "<title>tfmesos run %s: %s</title><style>%s</style></head><body>%s</body></html>\n"
            % (_e(run.run_id), _e(shown), CSS + CHART_CSS, "\n".join(body)))


def write_report(run: Run, path: Optional[str] = None,
                 now: Optional[datetime.datetime] = None) -> str:
    """Write the report (default: ``report.html`` in the run directory,
    which must be the caller's alone: ``run_dirs.check_own_dir``); returns
    its path. It goes to a new file of its own (O_EXCL, never through a
    link), which then replaces ``path``: a link planted there is replaced,
    never followed. HistoryError, one line, when it cannot be written
    there (nothing is left)."""
    if path is None:
        try:
            check_own_dir(run.directory, "the run directory", "who could redirect its report")
        except UnsafeRunDir as exc:
            raise HistoryError("%s: write it to a file of your own (-o FILE)" % exc) from None
        except OSError as exc:
            raise _cannot_write(run.directory, exc) from None
        path = os.path.join(run.directory, REPORT)
    _check_replaceable(path)
    text = render(run, now)
    temporary = None
    try:
        descriptor, temporary = tempfile.mkstemp(   # 0600, O_EXCL|O_NOFOLLOW
            prefix=".%s." % os.path.basename(path), suffix=".tmp",
            dir=os.path.dirname(path) or ".")
        with open(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise _cannot_write(path, exc) from None
    return path


def _check_replaceable(path: str) -> None:
    """HistoryError unless ``path`` is a file the report may replace: none
    yet, a regular file, or a link to one (or to nothing). A device, a FIFO
    or a link to one (``-o /dev/null`` as root, ``-o /dev/stdout``) was
    replaced by a regular file."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    if stat.S_ISLNK(found.st_mode):
        try:
            found = os.stat(path)
        except OSError:
            return   # a link to nothing: replaced, never followed
    if not stat.S_ISREG(found.st_mode):
        raise HistoryError("%s is not a regular file (a device, FIFO or directory, or a link "
                           "to one), which the report would replace: give the path of a file "
                           "(-o FILE)" % printable(path))


def _cannot_write(path: str, exc: OSError) -> HistoryError:
    return HistoryError("cannot write the report to %s: %s; choose another file (-o FILE)"
                        % (path, exc.strerror or exc))
