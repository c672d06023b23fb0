"""tfmesos report: a self-contained report.html per run, checked as text
and as Debian's headless chromium renders it."""

import html
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest
from run_dirs import at, attempt, copy_format_1, write_run
from tfrun_helpers import REPO, run_tfrun

from tfmesos.record.history import Run
from tfmesos.record.report import STATE_COLORS, render
from tfmesos.record.schema import Outcome, Restart, Sample, Takeover, Usage

TFMESOS = [sys.executable, "-m", "tfmesos.cli.main"]


def restarted_run(root, samples=True):
    """worker:1 failed, the cluster restarted once, then the run succeeded;
    worker:1's second command ran from +5.5 s to +7.8 s (its exit message)."""
    usage = {}
    if samples:
        usage = {"exited": at(7.8), "usage": Usage(
            wall_s=2.3, cpu_s=2.0, sample_interval_s=0.5,
            samples=[Sample(t=t, cpu_s=cpu, rss_mb=mb)
                     for t, cpu, mb in ((0.5, 0.25, 300.0), (1.0, 0.75, 420.0),
                                        (1.5, 1.25, 510.0), (2.0, 1.5, 480.0))])}
    tasks = {
        "ps:0": [attempt("ps:0", end=3.1, state="TASK_KILLED"),
                 attempt("ps:0", number=2, restart=1, launched=5.0, running=5.1,
                         registered=5.3, end=8.0, state="TASK_FINISHED")],
        "worker:1": [attempt("worker:1", end=3.0, state="TASK_FAILED", exit_code=1),
                     attempt("worker:1", number=2, restart=1, launched=5.0, running=5.2,
                             registered=5.4, end=7.9, exit_code=0, **usage)]}
    restarts = [Restart(restart=1, time=at(3.05), cause="failure", task="worker:1",
                        message="worker:1 exited with code 1", delay=2.0)]
    directory = write_run(root, "5eed0001", took=8.2, tasks=tasks, restarts=restarts)
    return Run.load(directory)


def chart_points(page, label, task):
    """The (x, y) points of ``task``'s series in the chart ``label`` (its aria-label)."""
    found = re.search(r'<svg[^>]*aria-label="%s">(.*?)</svg>' % re.escape(label), page)
    assert found, "no chart %r" % label
    return [tuple(map(float, point.split(",")))
            for line in re.findall(r'<polyline class="usage" data-task="%s" points="([^"]*)"'
                                   % re.escape(task), found.group(1))
            for point in line.split()]


CPU, MEMORY = "CPU (cpus) per task", "memory (MB) per task"


def test_the_report_shows_the_outcome_every_attempt_restarts_and_usage(tmp_path):
    run = restarted_run(tmp_path)
    run.file.outcome.hint = "a hint <for> you"
    page = render(run)
    for text in ("Run 5eed0001", "succeeded", "ps:0 #1", "ps:0 #2 (r1)", "worker:1 #2 (r1)",
                 "restart 1 (failure: worker:1)", "first offer", "cluster complete", "failed (1)",
                 "finished (0)", "hint: a hint &lt;for&gt; you", "CPU and memory",
                 "peak 510 MB", "worker.1.attempt2.stderr"):
        assert text in page, text
    # self-contained: one inline script (the legends' toggles), nothing fetched
    assert page.lower().count("<script") == 1 and "<script>" in page
    assert not re.search(r"(src|href)=\"?(https?:)?//", page)
    assert "http://" not in page and "https://" not in page


def test_usage_samples_are_placed_where_the_command_ran(tmp_path):
    """A sample's t counts from the command's start: its exit message's
    time less its wall time. CPU is the rate between samples."""
    from tfmesos.record.report import _Clock, usage_series
    run = restarted_run(tmp_path)
    clock = _Clock(run, run.finished)
    series = usage_series(run.task("worker:1").attempts[1], clock)
    assert [(round(t, 3), cpus, mb) for t, cpus, mb in series] == [
        (6.0, 0.5, 300.0), (6.5, 1.0, 420.0), (7.0, 1.0, 510.0), (7.5, 0.5, 480.0)]
    assert usage_series(run.task("worker:1").attempts[0], clock) == []


def test_the_charts_have_a_point_per_sample(tmp_path):
    page = render(restarted_run(tmp_path))
    cpu, memory = (chart_points(page, label, "worker:1") for label in (CPU, MEMORY))
    assert len(cpu) == len(memory) == 4
    assert [x for x, _ in cpu] == [x for x, _ in memory] == sorted(x for x, _ in cpu)
    assert max(memory, key=lambda p: -p[1])[0] == memory[2][0]   # the peak is highest


def bar_colors(page, name):
    """The fill of each bar of attempt ``name`` (``ps:0 #1``) once it ran."""
    return re.findall(r'<rect [^>]*fill="(#[0-9a-f]+)" rx="2"><title>%s running from'
                      % re.escape(name), page)


def end_labels(page):
    return re.findall(r'<text x="[0-9.]+" y="[0-9]+" font-size="11" fill="#[0-9a-f]+">([^<]*)'
                      r'</text>', page)


def test_a_task_tfrun_stopped_is_shown_stopped_not_finished(tmp_path):
    tasks = {"ps:0": [attempt("ps:0", end=3.1, state="TASK_KILLED", source="stopped by tfrun")],
             "worker:0": [attempt("worker:0", end=3.0)]}
    page = render(Run.load(write_run(tmp_path, "5eed0002", took=3.2, tasks=tasks)))
    assert bar_colors(page, "ps:0 #1") == [STATE_COLORS["TASK_KILLED"]]
    assert bar_colors(page, "worker:0 #1") == [STATE_COLORS["TASK_FINISHED"]]
    labels = end_labels(page)
    assert "stopped" in labels and "finished (0)" in labels
    assert not [label for label in labels if label.startswith("killed")]


def test_no_samples_no_usage_section(tmp_path):
    assert "CPU and memory" not in render(restarted_run(tmp_path, samples=False))


def test_a_version_1_run_gets_its_report_with_charts(tmp_path):
    directory = copy_format_1(tmp_path)
    report = subprocess.run(TFMESOS + ["report", directory], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    page = open(os.path.join(directory, "report.html"), encoding="utf-8").read()
    for text in ("Run 7f369b42", "succeeded", "worker:1 #2 (r1)", "restart 1 (failure: worker:1)",
                 "killed (1)", "CPU and memory"):
        assert text in page, text
    for task in ("worker:0", "worker:1"):
        # Two attempts of three samples each.
        assert len(chart_points(page, CPU, task)) == 6
        assert len(chart_points(page, MEMORY, task)) == 6


def test_the_report_of_a_real_run_charts_its_cpu_and_memory(tmp_path):
    """A worker that computes for 4 s holding 60 MB, sampled every second."""
    run_dir = tmp_path / "run"
    busy = ("%s -c 'import time\nb = bytearray(60 << 20)\nend = time.monotonic() + 4\n"
            "while time.monotonic() < end: pass'" % sys.executable)
    result = run_tfrun("-w", "1", "-s", "0", "-Cw", "1", "-Mw", "512", "-E",
                       "TFMESOS_USAGE_INTERVAL=1", "--run-dir", str(run_dir), "--", busy)
    assert result.returncode == 0, result.stderr
    report = subprocess.run(TFMESOS + ["report", str(run_dir)], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    page = (run_dir / "report.html").read_text()
    cpu = chart_points(page, CPU, "worker:0")
    memory = chart_points(page, MEMORY, "worker:0")
    assert len(cpu) >= 3 and len(memory) >= 3, page
    peak = re.search(r'worker:0 <span class="muted">peak (\d+) MB</span>', page).group(1)
    assert int(peak) >= 60
    # The chart's peak is its processes' (run.json's peak_tree_rss_mb); tfrun's
    # table and the report's give its own memory cgroup's where it ran in one
    # (what the isolator counts), else that one, marked RSS.
    [row] = [line.split() for line in result.stderr.splitlines()
             if line.startswith("  worker:0 ")]
    with open(run_dir / "run.json", encoding="utf-8") as handle:
        usage = json.load(handle)["tasks"][0]["attempts"][-1]["usage"]
    assert peak == "%.0f" % usage["peak_tree_rss_mb"], (peak, usage)
    cgroup = usage["cgroup"] or {}
    if cgroup.get("limit_mb") == 512.0:
        shown = ["%.0f" % cgroup["peak_mb"], "(%d%%)" % round(100 * cgroup["peak_mb"] / 512)]
    else:
        shown = [peak, "(%d%%)" % round(100 * usage["peak_tree_rss_mb"] / 512), "RSS"]
    assert row[5:] == shown, (row, usage)
    assert "<td>%s</td>" % " ".join(shown) in page
    assert usage["peak_tree_rss_mb"] >= max(s["rss_mb"] for s in usage["samples"])
    assert usage["peak_tree_rss_mb"] >= usage["peak_rss_mb"]


def test_report_command_writes_report_html_in_the_run_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "runs"))
    result = run_tfrun("-w", "2", "-s", "1", "-Cw", "0.1", "-Mw", "64", "-Cs", "0.1", "-Ms",
                       "64", "--", "true")
    assert result.returncode == 0, result.stderr
    [directory] = (tmp_path / "runs").iterdir()
    report = subprocess.run(TFMESOS + ["report", directory.name.split("-")[-1][:5]], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    assert report.stdout == "%s\n" % (directory / "report.html")
    page = (directory / "report.html").read_text()
    for name in ("ps:0 #1", "worker:0 #1", "worker:1 #1"):
        assert name in page
    # The workers end the run; the ps ran `true` too, but on a loaded machine
    # the run may stop it before its own end is heard.
    finished, stopped = page.count(">finished (0)<"), page.count(">stopped<")
    assert (finished, stopped) in ((3, 0), (2, 1)), page


def test_the_report_marks_each_scheduler_takeover_and_who_killed_the_run(tmp_path):
    takeovers = [Takeover(time=at(2.5), scheduler_attempt=2, how="tfmesos attach"),
                 Takeover(time=at(6.0), scheduler_attempt=3, how="detached scheduler task 3")]
    directory = write_run(tmp_path, "7a4e0001", took=8.0, takeovers=takeovers)
    run = Run.load(directory)
    run.file.outcome = Outcome(status="killed", message="the run was killed (by alice)",
                               exit_code=143, by="alice")
    page = render(run)
    timeline = re.search(r'aria-label="timeline of every task attempt">(.*?)</svg>', page).group(1)
    assert ">takeover: scheduler 2 (tfmesos attach)</text>" in timeline
    assert ">takeover: scheduler 3 (detached scheduler task 3)</text>" in timeline
    assert "takeover at +2.5 s: scheduler attempt 2 (tfmesos attach)" in page
    assert re.search(r'<span class="status"[^>]*>killed \(by alice\)</span>', page)
    assert "<title>tfmesos run 7a4e0001: killed (by alice)</title>" in page


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


needs_chromium = pytest.mark.skipif(not chromium(), reason="Debian's chromium is not installed "
                                    "(scripts/test.sh installs it)")


def in_chromium(page, tmp_path, probe="", width=1400, height=900, screenshot=None):
    """The DOM of ``page`` (HTML text) as headless chromium leaves it in a
    ``width`` x ``height`` window, after ``probe`` (JavaScript run at the end
    of the body, once laid out); its ``screenshot`` (a path) too."""
    path = tmp_path / "page.html"
    if probe:
        page = page.replace("</body>", "<script>%s</script></body>" % probe)
    path.write_text(page, encoding="utf-8")
    profile = tempfile.mkdtemp(dir=tmp_path)
    result = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--hide-scrollbars", "--user-data-dir=%s" % profile,
         "--window-size=%d,%d" % (width, height), "--dump-dom", "file://%s" % path]
        + (["--screenshot=%s" % screenshot] if screenshot else []),
        capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def with_metrics(run):
    """``run`` with a loss logged by worker:1 and worker:0 alike (one line
    drawn right over the other) and by ps:0."""
    from tfmesos.record.schema import MetricSeries
    steps, loss = [0, 10, 20, 30, 40], [2.0, 1.2, 0.8, 0.6, 0.5]
    run.file.metrics = [
        MetricSeries(task=task, name="loss", last=values[-1], last_step=40, count=5,
                     steps=steps, values=values, times=[1.0, 2.0, 3.0, 4.0, 5.0])
        for task, values in (("worker:0", loss), ("worker:1", loss),
                             ("ps:0", [v * 1.5 for v in loss]))]
    return run


# Runs in the page once laid out: the charts' widths against the content's,
# each series' dash pattern, colour and marker shapes, and what clicking a
# legend entry does; written into the page as JSON.
PROBE = """
var out = {}, body = document.body, style = getComputedStyle(body);
out.content = body.getBoundingClientRect().width - parseFloat(style.paddingLeft)
  - parseFloat(style.paddingRight);
out.charts = Array.from(document.querySelectorAll("svg.chart, svg.timeline")).map(
  function (svg) { var box = svg.getBoundingClientRect();
                   return [svg.getAttribute("aria-label"), box.width, box.height]; });
var chart = document.querySelector('svg[aria-label="metric loss per task"]');
var groups = Array.from(chart.querySelectorAll("g.series"));
out.series = groups.map(function (g) {
  var line = g.querySelector("polyline"), shapes = [];
  Array.from(g.children).forEach(function (e) {
    if (e.tagName !== "polyline" && e.tagName !== "title") {
      shapes.push(e.tagName + (e.getAttribute("d") || "").replace(/[^A-Za-z]/g, ""));
    }
  });
  return {task: line.getAttribute("data-task"), dash: getComputedStyle(line).strokeDasharray,
          stroke: getComputedStyle(line).stroke, markers: shapes.length,
          shapes: Array.from(new Set(shapes)), points: line.getAttribute("points")};
});
var figure = chart.closest("figure");
var button = figure.querySelector('button[data-series="1"]');
function shown() { return groups.map(function (g) { return getComputedStyle(g).display !== "none"
                                                       && g.getBoundingClientRect().width > 0; }); }
out.before = shown();
button.dispatchEvent(new MouseEvent("click", {bubbles: true}));
out.after = shown();
out.pressed = button.getAttribute("aria-pressed");
out.elsewhere = Array.from(document.querySelectorAll("g.series.hidden")).length;
button.click();
out.again = shown();
var pre = document.createElement("pre");
pre.id = "probe";
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
"""


def probed(dom):
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-3000:]
    return json.loads(html.unescape(found.group(1)))


@needs_chromium
def test_headless_chromium_renders_the_report(tmp_path):
    run = with_metrics(restarted_run(tmp_path))
    screenshot = tmp_path / "report.png"
    dom = in_chromium(render(run), tmp_path, screenshot=screenshot)
    text = re.sub(r"<[^>]+>", " ", dom[dom.index("<body"):])
    for words in ("Run 5eed0001", "succeeded", "Timeline", "worker:1 #2 (r1)",
                  "restart 1 (failure: worker:1)", "CPU and memory", "TASK_FAILED",
                  "loss (by step)", "peak 510 MB"):
        assert words in text, words
    assert dom.count("<rect") >= 4 and "<polyline" in dom
    with open(screenshot, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    assert screenshot.stat().st_size > 10000


@needs_chromium
def test_charts_fill_the_page_and_tell_every_series_apart_and_the_legend_hides_one(tmp_path):
    """At 1,400 px a chart was ~300 px wide, and worker:0's loss hidden
    under worker:1's: now every chart is as wide as the content, each
    series has its own dash, colour and marker, and a legend entry hides
    its series (in its chart only) and shows it again."""
    run = with_metrics(restarted_run(tmp_path))
    found = probed(in_chromium(render(run), tmp_path, probe=PROBE))
    assert found["content"] > 1200, found
    labels = [label for label, _, _ in found["charts"]]
    assert labels == ["timeline of every task attempt", "metric loss per task",
                      "CPU (cpus) per task", "memory (MB) per task"], labels
    for label, width, height in found["charts"]:
        assert width >= 0.97 * found["content"], (label, width, found["content"])
        assert height > 150, (label, height)
    series = found["series"]
    assert [line["task"] for line in series] == ["ps:0", "worker:1", "worker:0"]
    for key in ("dash", "stroke", "shapes"):
        values = [json.dumps(line[key]) for line in series]
        assert len(set(values)) == 3, (key, values)
    assert [line["markers"] for line in series] == [5, 5, 5]       # one per point
    # worker:1's line is drawn right under worker:0's: its markers still show.
    assert series[1]["points"] == series[2]["points"]
    assert found["before"] == [True, True, True]
    assert found["after"] == [True, False, True] and found["pressed"] == "false"
    assert found["elsewhere"] == 1           # worker:1 in the CPU and memory charts stays
    assert found["again"] == [True, True, True]


def test_a_metric_near_the_floats_bounds_is_drawn_with_finite_coordinates(tmp_path):
    # A diverging loss at 1e308: the span overflowed, the points were
    # "64.0,inf 984.0,inf" (or nan), the line not drawn.
    from tfmesos.record.report_metrics import metric_chart
    for values in ([-1e308, 1e308], [1e308, 1.7e308], [-1.7e308, -1e308, 0.0]):
        chart = metric_chart("loss", [("worker:0", list(enumerate(values)))])
        [points] = re.findall(r'<polyline[^>]* points="([^"]+)"', chart)
        coordinates = [float(c) for pair in points.split() for c in pair.split(",")]
        assert len(coordinates) == 2 * len(values), points
        assert all(c == c and abs(c) < 1e4 for c in coordinates), points
        assert "inf" not in chart and "nan" not in chart, chart


def test_ticks_of_values_near_the_floats_bounds_are_floats(tmp_path):
    # A diverging loss of 1e308 then 1.79e308: the tick step was an int past
    # the float's bounds, "OverflowError: int too large to convert to float".
    from tfmesos.record.charts import nice_ticks
    from tfmesos.record.report_metrics import metric_chart
    for low, high in ((1.0, 1.79e308), (-1.7e308, 1.7e308), (1e307, 1.5e308)):
        ticks = nice_ticks(low, high)
        assert ticks and all(isinstance(t, float) and math.isfinite(t) for t in ticks), ticks
    assert "<polyline" in metric_chart("loss", [("worker:0", [(0, 1.0), (1, 1e308),
                                                              (2, 1.79e308)])])


def test_a_metric_with_no_finite_value_is_named_not_left_out(tmp_path):
    # NaN from the first step (a diverged run): no Metrics section, the
    # metric's name nowhere in the report.
    from tfmesos.record.schema import MetricSeries
    run = restarted_run(tmp_path)
    run.file.metrics = [MetricSeries(task="worker:0", name="loss<b>", last=None, last_step=4,
                                     count=5, steps=[0, 2, 4], values=[None, None, None],
                                     times=[1.0, 2.0, 3.0])]
    page = render(run)
    assert "<h2>Metrics</h2>" in page
    assert "loss&lt;b&gt;: no finite value (n/a at every step logged)" in page


def test_a_day_long_run_reads_in_hours_and_its_start_names_its_zone(monkeypatch):
    # A 25-hour run's report said "1500m00s"; its start had no zone, so the
    # two 01:30s of a DST change (or a report read on another machine) could
    # not be told apart.
    import datetime
    import time

    from tfmesos.record import report
    assert (report._seconds(90000), report._seconds(3 * 86400 + 5)) == ("25h00m00s",
                                                                         "72h00m05s")
    assert (report._seconds(59.5), report._seconds(754)) == ("59.5 s", "12m34s")
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    try:
        utc = datetime.timezone.utc
        assert [report._local(datetime.datetime(2026, 11, 1, hour, 30, tzinfo=utc))
                for hour in (8, 9)] == ["2026-11-01 01:30:00 PDT", "2026-11-01 01:30:00 PST"]
    finally:
        monkeypatch.undo()
        time.tzset()
