"""tfmesos report: a self-contained report.html per run, checked as text
and as Debian's headless chromium renders it."""

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


def chart_points(page, label):
    """The (x, y) points of the chart ``label`` (its aria-label)."""
    found = re.search(r'<svg[^>]*aria-label="%s">(.*?)</svg>' % re.escape(label), page)
    assert found, "no chart %r" % label
    return [tuple(map(float, point.split(",")))
            for line in re.findall(r'<polyline points="([^"]*)"', found.group(1))
            for point in line.split()]


def test_the_report_shows_the_outcome_every_attempt_restarts_and_usage(tmp_path):
    run = restarted_run(tmp_path)
    run.file.outcome.hint = "a hint <for> you"
    page = render(run)
    for text in ("Run 5eed0001", "succeeded", "ps:0 #1", "ps:0 #2 (r1)", "worker:1 #2 (r1)",
                 "restart 1 (failure: worker:1)", "first offer", "cluster complete", "failed (1)",
                 "finished (0)", "hint: a hint &lt;for&gt; you", "CPU and memory",
                 "peak 510 MB", "worker.1.attempt2.stderr"):
        assert text in page, text
    # self-contained: no script, nothing fetched
    assert "<script" not in page.lower() and not re.search(r"(src|href)=\"?(https?:)?//", page)
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
    cpu, memory = (chart_points(page, "worker:1 %s" % what)
                   for what in ("CPU (cpus)", "memory (MB)"))
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
        assert len(chart_points(page, "%s CPU (cpus)" % task)) == 6
        assert len(chart_points(page, "%s memory (MB)" % task)) == 6


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
    cpu = chart_points(page, "worker:0 CPU (cpus)")
    memory = chart_points(page, "worker:0 memory (MB)")
    assert len(cpu) >= 3 and len(memory) >= 3, page
    peak = float(re.search(r"worker:0</b> <span class=\"muted\">peak (\d+) MB", page).group(1))
    assert peak >= 60


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


@pytest.mark.skipif(not chromium(), reason="Debian's chromium is not installed "
                    "(scripts/test.sh installs it)")
def test_headless_chromium_renders_the_report(tmp_path):
    run = restarted_run(tmp_path)
    path = os.path.join(run.directory, "report.html")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render(run))
    screenshot = tmp_path / "report.png"
    profile = tempfile.mkdtemp(dir=tmp_path)
    result = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--user-data-dir=%s" % profile, "--window-size=1280,1000",
         "--screenshot=%s" % screenshot, "--dump-dom", "file://%s" % path],
        capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    text = re.sub(r"<[^>]+>", " ", dom[dom.index("<body"):])
    for words in ("Run 5eed0001", "succeeded", "Timeline", "worker:1 #2 (r1)",
                  "restart 1 (failure: worker:1)", "CPU and memory", "TASK_FAILED"):
        assert words in text, words
    assert dom.count("<rect") >= 4 and "<polyline" in dom
    with open(screenshot, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    assert screenshot.stat().st_size > 10000
