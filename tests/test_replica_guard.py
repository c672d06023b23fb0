"""The guard of a replica hook or command is a fork of the task entry, not
a second interpreter: what it starts sees exactly what the old guard's did
(stdin /dev/null, the given cwd and environment, its own session, none of
the task entry's other descriptors), and the task entry's own state is left
alone. The guard's stops and exit codes: tests/test_task_orphans.py."""

import glob
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import warnings

import pytest
from tfrun_helpers import REPO

from tfmesos.task import replica, replica_guard


def own_cmdline():
    with open("/proc/self/cmdline", "rb") as handle:
        return handle.read()


REPORT = ("cat /proc/$PPID/cmdline > {d}/cmdline; "
          "for fd in /proc/$PPID/fd/*; do readlink $fd; done > {d}/fds; "
          "cut -d' ' -f5,6 /proc/$$/stat > {d}/group; echo $PPID > {d}/guard; "
          "readlink /proc/self/fd/0 > {d}/stdin; pwd > {d}/cwd; "
          "echo \"$GUARD_TEST_VALUE\" > {d}/env")


def test_the_guard_is_a_fork_of_this_process_and_leads_the_commands_session(tmp_path):
    rendezvous, other_end = socket.socketpair()   # as the task entry's connection
    work = tmp_path / "work"
    work.mkdir()
    try:
        guard = replica_guard.start(REPORT.format(d=tmp_path), {"GUARD_TEST_VALUE": "given",
                                                                "PATH": os.environ["PATH"]},
                                    cwd=str(work))
        assert guard.wait() == 0
    finally:
        rendezvous.close()
        other_end.close()

    def read(name):
        return (tmp_path / name).read_text().strip()

    assert (tmp_path / "cmdline").read_bytes() == own_cmdline()
    assert read("guard") == str(guard.pid)
    assert read("group") == "%d %d" % (guard.pid, guard.pid)   # its group and session
    fds = read("fds").splitlines()
    assert len(fds) == 3 and not [fd for fd in fds if fd.startswith("socket:")], fds
    assert read("stdin") == "/dev/null"
    assert read("cwd") == str(work) and read("env") == "given"
    assert "GUARD_TEST_VALUE" not in os.environ and os.getcwd() != str(work)


def test_captured_output_comes_through_the_pipes_and_the_exit_code_is_the_commands():
    guard = replica_guard.start("echo out; echo err >&2; exit 7", dict(os.environ), capture=True)
    out, err = guard.stdout.read(), guard.stderr.read()
    assert (guard.wait(), out, err) == (7, b"out\n", b"err\n")
    guard.stdout.close()
    guard.stderr.close()


def test_a_command_that_cannot_start_is_named_on_its_stderr(tmp_path):
    guard = replica_guard.start("true", {}, cwd=str(tmp_path / "missing"), capture=True)
    err = guard.stderr.read().decode()
    assert guard.wait() == 127
    assert err.startswith("tfmesos guard: cannot start the command:") and "missing" in err
    guard.stdout.close()
    guard.stderr.close()


def test_forking_with_threads_warns_no_one(monkeypatch):
    """Python 3.12+ warns (DeprecationWarning) in the parent when it forks
    with threads running; even made an error, it must not reach the task."""
    real_fork = os.fork

    def warning_fork():
        pid = real_fork()
        if pid:
            warnings.warn("This process is multi-threaded, use of fork() may lead to "
                          "deadlocks in the child.", DeprecationWarning, stacklevel=2)
        return pid

    monkeypatch.setattr(os, "fork", warning_fork)
    busy = threading.Event()
    thread = threading.Thread(target=busy.wait, daemon=True)
    thread.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert replica_guard.start("exit 0", {}).wait() == 0
    finally:
        busy.set()
        thread.join()


def newer_pythons():
    """Python 3.12+ interpreters at hand (on PATH, or pyenv's) that start."""
    found = [shutil.which(name) for name in ("python3.13", "python3.12")]
    found += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    for path in filter(None, found):
        try:
            if subprocess.run([path, "-c", "pass"], capture_output=True, timeout=30).returncode == 0:
                yield path
        except (OSError, subprocess.TimeoutExpired):
            continue


def test_the_guard_warns_no_one_on_a_python_that_does():
    """The real warning, where a Python 3.12+ is at hand, shown or made an error."""
    python = sys.executable if sys.version_info >= (3, 12) else next(newer_pythons(), None)
    if python is None:
        pytest.skip("no Python 3.12+ here")
    probe = ("import threading; "
             "e = threading.Event(); threading.Thread(target=e.wait, daemon=True).start(); "
             "from tfmesos.task import replica_guard; "
             "print(replica_guard.start('echo ran', {}).wait())")
    for action in ("default", "error"):   # a user's PYTHONWARNINGS, say
        result = subprocess.run([python, "-W", action, "-c", probe], capture_output=True,
                                text=True, timeout=60, env=dict(os.environ, PYTHONPATH=REPO))
        assert (result.returncode, result.stdout, result.stderr) == (0, "ran\n0\n", ""), action


def test_replica_command_runs_its_command_under_a_forked_guard(tmp_path):
    class Quiet:
        def send(self, message):
            pass

    command = replica.ReplicaCommand(Quiet(), {"cmd": REPORT.format(d=tmp_path), "env": {}})
    assert command.run() == 0
    assert (tmp_path / "cmdline").read_bytes() == own_cmdline()


def test_a_commands_wall_time_counts_from_its_start_however_late_its_monitor_begins(
        monkeypatch):
    """run.json's ``wall_s`` is "seconds from the command's start to its
    end". CI saw a worker that busy-looped 3 s by its own clock reported at
    2.83 s: on a loaded agent the usage monitor began well after the command
    had, and counted from then. Here the monitor begins 1 s late."""
    class Quiet:
        def send(self, message):
            pass

    on_time = replica.UsageMonitor.for_task

    def late(root, environ, **kwargs):
        time.sleep(1.0)   # the loaded agent's delay, not a synchronisation
        return on_time(root, environ, **kwargs)

    monkeypatch.setattr(replica.UsageMonitor, "for_task", late)
    command = replica.ReplicaCommand(Quiet(), {"cmd": "sleep 1.5", "env": {}})
    assert command.run() == 0
    assert command.usage["wall_s"] >= 1.5, command.usage
