"""tfmesos report: a self-contained report.html per run, checked as text
and as Debian's headless chromium renders it."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from run_dirs import at, attempt, write_run
from tfmesos.record.history import Run
from tfmesos.record.report import render
from tfrun_helpers import REPO, run_tfrun

TFMESOS = [sys.executable, "-m", "tfmesos.cli.main"]


def restarted_run(root, samples=True):
    """worker:1 failed, the cluster restarted once, then the run succeeded."""
    usage = {}
    if samples:
        usage = {"samples": [{"time": at(t), "cpu_seconds": 0.8 * t, "rss_bytes": mb * 2 ** 20}
                             for t, mb in ((5.5, 300), (6.5, 420), (7.5, 510))]}
    tasks = {
        "ps:0": [attempt("ps:0", end=3.1, state="TASK_KILLED"),
                 attempt("ps:0", number=2, restart=1, launched=5.0, running=5.1,
                         registered=5.3, end=8.0, state="TASK_FINISHED")],
        "worker:1": [attempt("worker:1", end=3.0, state="TASK_FAILED", exit_code=1),
                     attempt("worker:1", number=2, restart=1, launched=5.0, running=5.2,
                             registered=5.4, end=7.9, exit_code=0, **usage)]}
    restarts = [{"restart": 1, "time": at(3.05), "cause": "failure", "task": "worker:1",
                 "message": "worker:1 exited with code 1", "delay": 2.0}]
    directory = write_run(root, "5eed0001", took=8.2, tasks=tasks, restarts=restarts)
    return Run.load(directory)


def test_the_report_shows_the_outcome_every_attempt_restarts_and_usage(tmp_path):
    run = restarted_run(tmp_path)
    run.data["outcome"]["hint"] = "a hint <for> you"
    page = render(run)
    for text in ("Run 5eed0001", "succeeded", "ps:0 #1", "ps:0 #2 (r1)", "worker:1 #2 (r1)",
                 "restart 1 (failure: worker:1)", "first offer", "cluster complete", "failed (1)",
                 "finished (0)", "hint: a hint &lt;for&gt; you", "CPU and memory",
                 "peak 510 MB", "worker.1.attempt2.stderr"):
        assert text in page, text
    # self-contained: no script, nothing fetched
    assert "<script" not in page.lower() and not re.search(r"(src|href)=\"?(https?:)?//", page)
    assert "http://" not in page and "https://" not in page


def test_no_samples_no_usage_section(tmp_path):
    assert "CPU and memory" not in render(restarted_run(tmp_path, samples=False))


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
    assert page.count(">finished (0)<") == 3


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
