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
    """A sleeping process whose environment carries a task's marker; (process, marker).
    Returned once it runs: Popen returns when the exec began, and /proc/PID/environ
    is empty until the kernel has set up the new program's stack (a scan in between
    finds nothing; on a loaded machine two such passes ended a sweep)."""
    sandbox = str(tmp_path / name)
    proc = subprocess.Popen([sys.executable, "-c",
                             "import time; print('up', flush=True); time.sleep(600)"],
                            env=dict(os.environ, MESOS_SANDBOX=sandbox),
                            start_new_session=True, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"up\n"
    proc.stdout.close()
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
    from mesos_local.containerizer import escapes

    # This sweeper's own passes fail once (not the scans every thread of this
    # process shares: another test's thread could take the failure, or be
    # handed it); 30 s for the task's processes to die (a loaded machine).
    real = escapes.destroy_pass
    calls = []

    def failing_once(batch):
        calls.append([(sweep.marker, sweep.since) for sweep in batch])
        if len(calls) == 1:
            raise OSError("/proc is unreadable")
        return real(batch)
    monkeypatch.setattr(escapes, "destroy_pass", failing_once)
    sweeper = EscapeSweeper(gather=0.0, timeout=30.0)
    proc, marker = _marked(tmp_path, "task")
    try:
        sweeper.add(b"MESOS_SANDBOX=/nowhere", None)
        assert sweeper.drain(timeout=30)
        assert "sweeping the processes that left their tasks' cgroups failed" in caplog.text
        sweeper.add(marker, start_ticks(proc.pid))
        assert sweeper.drain(timeout=60)
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = "still running"
        assert code == -9, "passes %d, asked %s, the process %s" % (
            sweeper.passes, calls, open("/proc/%d/stat" % proc.pid).read()[:200])
    finally:
        proc.kill()
        proc.wait()
