"""The sweeper of the processes that left ended tasks' cgroups
(``mesos_local/containerizer/escapes.py``), on real processes: it finds
them by the marker in their environment, kills them, gathers the ends of a
burst into shared passes over /proc, and ``drain()`` sweeps at once."""

import os
import subprocess
import sys
import time

from mesos_local.containerizer.escapes import EscapeSweeper
from mesos_local.containerizer.process_tree import start_ticks


def _marked(tmp_path, name):
    """A sleeping process whose environment carries a task's marker; (process, marker)."""
    sandbox = str(tmp_path / name)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                            env=dict(os.environ, MESOS_SANDBOX=sandbox),
                            start_new_session=True)
    return proc, ("MESOS_SANDBOX=%s" % sandbox).encode()


def test_drain_kills_the_marked_processes_at_once(tmp_path):
    sweeper = EscapeSweeper(gather=600.0)    # only drain() would sweep within the test
    procs = [_marked(tmp_path, "task%d" % index) for index in range(3)]
    innocent, _ = _marked(tmp_path, "other")
    try:
        began = time.monotonic()
        for proc, marker in procs:
            sweeper.add(marker, start_ticks(proc.pid))
        assert sweeper.drain(timeout=30)
        assert time.monotonic() - began < 30
        for proc, _ in procs:
            assert proc.wait(timeout=10) == -9
        assert innocent.poll() is None           # not marked: left alone
        assert 2 <= sweeper.passes <= 4          # one pass found them all, then clean twice
    finally:
        for proc in [p for p, _ in procs] + [innocent]:
            proc.kill()
            proc.wait()


def test_a_burst_of_ends_shares_its_passes_and_a_process_started_before_is_spared(tmp_path):
    older, marker = _marked(tmp_path, "task")   # carries the marker, but predates the task
    sweeper = EscapeSweeper(gather=0.2)
    try:
        time.sleep(0.05)
        since = start_ticks(older.pid) + 1
        for index in range(40):
            sweeper.add(("MESOS_SANDBOX=%s/none%d" % (tmp_path, index)).encode(), None)
        sweeper.add(marker, since)
        assert sweeper.drain(timeout=30)
        assert sweeper.passes <= 4, sweeper.passes     # not 2 passes for each of 41 ends
        assert older.poll() is None
    finally:
        older.kill()
        older.wait()


def test_a_pass_that_fails_is_logged_and_later_ends_are_still_swept(tmp_path, monkeypatch, caplog):
    from mesos_local.containerizer import process_tree

    real = process_tree.SCANS.find_many
    calls = []

    def failing_once(asked):
        calls.append(len(asked))
        if len(calls) == 1:
            raise OSError("/proc is unreadable")
        return real(asked)
    monkeypatch.setattr(process_tree.SCANS, "find_many", failing_once)
    sweeper = EscapeSweeper(gather=0.0)
    proc, marker = _marked(tmp_path, "task")
    try:
        sweeper.add(b"MESOS_SANDBOX=/nowhere", None)
        assert sweeper.drain(timeout=30)
        assert "sweeping the processes that left their tasks' cgroups failed" in caplog.text
        sweeper.add(marker, start_ticks(proc.pid))
        assert sweeper.drain(timeout=30)
        assert proc.wait(timeout=10) == -9
    finally:
        proc.kill()
        proc.wait()
