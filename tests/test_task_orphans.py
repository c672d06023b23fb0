"""Replica tasks end with their run: hooks and commands (with what they
started) die with the task entry, a stop during the initializer means the
command never starts, output is forwarded as it comes, the secret stays
out of the command's environment. End to end through tfrun."""

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
from processes import TASK_ENTRY, is_task_entry
from tfrun_helpers import REPO, SMALL, start_tfrun, wait_for_line
from thread_signals import sigterm_to_another_thread
from waiting import wait_until

from mesos_local.cleanup import remove_stale_work_dirs
from tfmesos.task import replica_guard

TAG = "TFMESOS_ORPHAN_TEST"


def tagged_processes(tag):
    """Live (pid, cmdline) of the processes whose environment holds ``tag``."""
    token = ("%s=%s" % (TAG, tag)).encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % pid) as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open("/proc/%s/environ" % pid, "rb") as handle:
                if token not in handle.read().split(b"\0"):
                    continue
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                found.append((int(pid), handle.read().replace(b"\0", b" ").decode()[:120]))
        except (OSError, IndexError):
            continue
    return found


# Generous, and still half the 30 s that the sleeps these tests start would
# take to end on their own.
GONE_WITHIN = 15


def wait_until_gone(tag, seconds, keep=()):
    """Poll until no tagged process (other than ``keep``) is left."""
    deadline = time.monotonic() + seconds
    while True:
        left = [p for p in tagged_processes(tag) if p[0] not in keep]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def wait_for_file(path, seconds):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "%s not created within %s s" % (path, seconds)
        time.sleep(0.1)


def sleeps_in_group(pgid):
    """Pids of the live ``sleep`` processes in process group ``pgid``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % pid) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                command = handle.read().split(b"\0")[0]
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid and command.endswith(b"sleep"):
            found.append(int(pid))
    return found


def wait_for_sleeps(tag, count):
    deadline = time.monotonic() + 30
    while len([p for p in tagged_processes(tag) if p[1].startswith("sleep")]) < count:
        assert time.monotonic() < deadline, tagged_processes(tag)
        time.sleep(0.05)


@pytest.fixture
def tag():
    """A tag for the run's tasks (``-E``); whatever carries it is killed after the test."""
    value = uuid.uuid4().hex
    yield value
    for _ in range(50):
        left = tagged_processes(value)
        if not left:
            return
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.1)


def tfrun_args(tag, tmp_path, command, hooks=None):
    args = ["-w", "1", "-s", "0", *SMALL, "-E", "%s=%s" % (TAG, tag)]
    if hooks:
        path = tmp_path / "hooks.json"
        path.write_text(json.dumps(hooks))
        args += ["-e", str(path)]
    return args + ["--", command]


def parent_pid(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid):
    if pid is None:
        return ""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def server_pid(tag):
    """The task entry's pid: the outermost task entry above the run's
    tagged processes (its guards, forks of it, have the same command line;
    a task entry started warm shows the environment it was started with,
    without the tag)."""
    entries = set()
    for pid, _ in tagged_processes(tag):
        while pid and pid > 1:
            if is_task_entry(_cmdline(pid)) and not is_task_entry(_cmdline(parent_pid(pid))):
                entries.add(pid)
                break
            pid = parent_pid(pid)
    assert len(entries) == 1, (entries, tagged_processes(tag))
    return entries.pop()


def test_sigkill_of_tfrun_during_the_initializer_leaves_nothing_and_never_runs_the_command(
        tag, tmp_path):
    hooks = {"initializer": "touch %s/init; sleep 30" % tmp_path}
    with start_tfrun(*tfrun_args(tag, tmp_path, "touch %s/started" % tmp_path, hooks)) as proc:
        wait_for_file(tmp_path / "init", 60)
        proc.kill()
        proc.wait(10)
        left = wait_until_gone(tag, GONE_WITHIN)
    assert not left, "processes of the run left %d s after tfrun died: %s" % (GONE_WITHIN, left)
    assert not (tmp_path / "started").exists()
    # Its embedded master's work directory (the sandboxes) is what the next
    # master's start removes (any tfrun's: mesos_local.cleanup); here, now.
    remove_stale_work_dirs()
    mine = re.compile(r"^mesos-local-\d+\.%d\." % proc.pid)   # cleanup.make_work_dir's name
    assert not [name for name in os.listdir(tempfile.gettempdir()) if mine.match(name)]


def test_sigkill_of_the_server_kills_the_command_and_its_grandchildren(tag, tmp_path):
    command = "echo started; sleep 300 & sleep 300; wait"
    with start_tfrun(*tfrun_args(tag, tmp_path, command)) as proc:
        wait_for_line(proc.stdout, "[worker:0] started", timeout=60)
        wait_for_sleeps(tag, 2)
        server = server_pid(tag)
        # Frozen, the embedded master cannot clean up the task as Mesos would.
        proc.send_signal(signal.SIGSTOP)
        try:
            os.kill(server, signal.SIGKILL)
            left = wait_until_gone(tag, GONE_WITHIN)
        finally:
            proc.send_signal(signal.SIGCONT)
        assert not left, "the command outlived the task entry: %s" % left
        proc.wait(60)
    assert proc.returncode != 0


def test_sigterm_during_the_initializer_means_the_command_never_starts(tag, tmp_path):
    hooks = {"initializer": "touch %s/init; sleep 30" % tmp_path}
    with start_tfrun(*tfrun_args(tag, tmp_path, "touch %s/started" % tmp_path, hooks)) as proc:
        wait_for_file(tmp_path / "init", 60)
        stopped = time.monotonic()
        os.kill(server_pid(tag), signal.SIGTERM)
        proc.wait(60)
        err = proc.stderr.read()
    assert proc.returncode == 143, err
    assert "worker:0 exited with code 143" in err
    assert time.monotonic() - stopped < 15
    assert not (tmp_path / "started").exists()
    assert not wait_until_gone(tag, GONE_WITHIN)


PROGRESS = r"""
import os, sys, time
n = 12000
for i in range(n):
    sys.stdout.write("\rstep %d/%d" % (i + 1, n))
    if i % 1000 == 0:
        sys.stdout.flush()
        time.sleep(0.02)
sys.stdout.flush()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
sys.stdout.write("\rdone 100%\n")
"""


def read_until(stream, needle, seconds):
    """Raw reads of ``stream`` until ``needle`` shows (no waiting for newlines)."""
    seen = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        deadline = time.monotonic() + seconds
        while needle.encode() not in seen:
            assert time.monotonic() < deadline, "%r not seen; got %r" % (needle, seen[-300:])
            if selector.select(0.5):
                data = os.read(stream.fileno(), 65536)
                assert data, "tfrun closed its output; got %r" % seen[-300:]
                seen += data
    return seen.decode()


def test_progress_is_forwarded_while_it_runs_and_ends_in_its_final_state(tag, tmp_path):
    script, flag = tmp_path / "progress.py", tmp_path / "finish"
    script.write_text(PROGRESS)
    command = "%s %s %s" % (sys.executable, script, flag)
    with start_tfrun(*tfrun_args(tag, tmp_path, command)) as proc:
        shown = read_until(proc.stdout, "[worker:0] step 12000/12000", 60)
        flag.touch()
        shown += read_until(proc.stdout, "done 100%\n", 30)
        proc.wait(60)
        assert proc.returncode == 0, proc.stderr.read()
    progress_line = shown[shown.index("[worker:0] step"):]
    assert progress_line.endswith("\r[worker:0] done 100%\n")
    assert "\n" not in progress_line[:-1]  # one line, redrawn
    assert len(progress_line) < 20000  # coalesced: not all 200,000 characters


def test_the_secret_is_not_in_the_command_or_hooks_environment(tag, tmp_path):
    hooks = {"initializer": "env > %s/init.env" % tmp_path,
             "finalizer": "env > %s/fini.env" % tmp_path}
    command = "env | grep TFMESOS_SECRET; echo task=$TFMESOS_TASK_INDEX"
    with start_tfrun(*tfrun_args(tag, tmp_path, command, hooks)) as proc:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "[worker:0] task=0" in out
    assert "TFMESOS_SECRET" not in out
    for name in ("init.env", "fini.env"):
        env = (tmp_path / name).read_text()
        assert "TFMESOS_TASK_INDEX=0" in env and "TFMESOS_SECRET" not in env


def test_a_failed_initializer_is_said_with_its_output_and_the_command_never_runs(tag,
                                                                                tmp_path):
    # The hooks' output went to the Mesos sandbox alone (the embedded
    # master removes it): tfrun said "task worker:0 exited with code 3",
    # the run directory's stderr was empty, and nothing said the command
    # never ran.
    hooks = {"initializer": "echo init-out; echo init-fails >&2; exit 3",
             "finalizer": "echo fini-out; exit 4"}
    run_dir = tmp_path / "run"
    with start_tfrun("--run-dir", str(run_dir),
                     *tfrun_args(tag, tmp_path, "echo the-command", hooks)) as proc:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert "[worker:0] init-out" in out and "[worker:0] fini-out" in out
    assert "the-command" not in out
    assert "[worker:0] init-fails\n" in err
    assert "[worker:0] tfmesos: the initializer exited with code 3; the command did not run" \
        in err
    assert "[worker:0] tfmesos: the finalizer exited with code 4" in err
    logged = (run_dir / "worker.0.stderr").read_text()
    assert "init-fails" in logged and "the command did not run" in logged


def test_the_guard_is_a_fork_of_the_task_entry_without_its_connection(tag, tmp_path):
    """Not a second interpreter; and the scheduler sees the task entry's
    connection drop when the task entry dies, not when the guard ends."""
    command = ("tr '\\0' ' ' < /proc/$PPID/cmdline; echo; "
               "echo leader $(cut -d' ' -f5,6 /proc/$$/stat) $PPID; "
               "echo fds $(ls /proc/$PPID/fd | wc -l) $(readlink /proc/$PPID/fd/* | grep -c socket)")
    with start_tfrun(*tfrun_args(tag, tmp_path, command)) as proc:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    guard, leader, fds = [line.split("] ", 1)[1] for line in out.splitlines()
                          if line.startswith("[worker:0] ")][-3:]
    assert TASK_ENTRY in guard and "replica_guard" not in guard, guard
    group, session, pid = leader.split()[1:]
    assert group == session == pid                # its group's and session's leader
    assert fds == "fds 3 0"                       # stdin, stdout, stderr; no socket


def guard_script(command):
    """A stand-in for the task entry: starts ``command`` under the guard and waits."""
    return [sys.executable, "-c", "import os, sys; from tfmesos.task import replica_guard; "
            "g = replica_guard.start(sys.argv[1], dict(os.environ)); sys.exit(g.wait() & 255)",
            command]


def spawn_guarded(command, tag):
    return subprocess.Popen(guard_script(command), cwd=REPO, env=dict(os.environ, **{TAG: tag}))


def test_the_guard_takes_its_group_down_when_its_parent_dies(tag, tmp_path):
    parent = spawn_guarded("touch %s/up; sleep 300 & sleep 300; wait" % tmp_path, tag)
    try:
        wait_for_file(tmp_path / "up", 30)
        wait_for_sleeps(tag, 2)
        parent.kill()
        parent.wait(10)
        assert not wait_until_gone(tag, GONE_WITHIN), "the guard's group outlived its parent"
    finally:
        parent.kill()
        parent.wait(10)


def test_the_guard_reports_the_status_and_stops_on_sigterm(tmp_path):
    def run(command):
        return replica_guard.start(command, dict(os.environ)).wait()
    assert run("exit 3") == 3
    assert run("kill -TERM $$") == 143
    guarded = replica_guard.start("sleep 30 & sleep 30; wait", dict(os.environ))
    try:
        wait_until(lambda: len(sleeps_in_group(guarded.pid)) == 2)   # the guard is set up
        started = time.monotonic()
        os.killpg(guarded.pid, signal.SIGTERM)
        assert guarded.wait() == 143 and time.monotonic() - started < GONE_WITHIN
    finally:
        if guarded.returncode is None:
            os.killpg(guarded.pid, signal.SIGKILL)
            guarded.wait()


def test_a_sigterm_just_after_the_command_started_is_the_command_s(monkeypatch):
    # The guard knows its command started once posix_spawn has returned its
    # pid; a SIGTERM to the group before that (CI under load: the test above
    # signalled as soon as the sleeps ran) made the guard stop the group as
    # if nothing had started: SIGKILL at once, the guard's own end -9, and
    # the command never had its grace. Here the SIGTERM comes in that window.
    spawn, test_process = os.posix_spawn, os.getpid()

    def spawn_then_sigterm(*args, **kwargs):
        child = spawn(*args, **kwargs)
        if os.getpid() == test_process:
            return child   # (subprocess may spawn so here: never signal pytest's own group)
        os.killpg(0, signal.SIGTERM)
        time.sleep(0.5)   # time for the guard's handler, unless SIGTERM is blocked
        return child
    monkeypatch.setattr(os, "posix_spawn", spawn_then_sigterm)
    guarded = replica_guard.start("sleep 30", dict(os.environ))
    try:
        assert guarded.wait() == 143   # the command's end by SIGTERM, as the guard reports it
    finally:
        if guarded.returncode is None:
            os.killpg(guarded.pid, signal.SIGKILL)
            guarded.wait()


def test_a_sigterm_another_thread_received_stops_the_command_the_guard_waits_for():
    # Mesos' SIGTERM, given by the kernel to a thread of the task entry other
    # than the main one, which waits for the command: the handler (which
    # stops the command) runs only once the main thread runs again.
    guarded = replica_guard.start("sleep 30", dict(os.environ))
    try:
        with sigterm_to_another_thread(lambda *_: os.killpg(guarded.pid, signal.SIGTERM)):
            started = time.monotonic()
            assert guarded.wait() == 143
            assert time.monotonic() - started < 10, "the handler waited for the command's end"
    finally:
        if guarded.returncode is None:
            os.killpg(guarded.pid, signal.SIGKILL)
            guarded.wait()


def test_a_guard_whose_parent_is_gone_never_runs_the_command(tmp_path):
    """The guard's own check after setting its parent-death signal: pid 1
    is never its parent, as a dead task entry would not be."""
    probe = ("import os, sys; from tfmesos.task import replica_guard; "
             "os._exit(replica_guard.main(1, 5, sys.argv[1], dict(os.environ)))")
    result = subprocess.run([sys.executable, "-c", probe, "touch %s/ran" % tmp_path], cwd=REPO,
                            start_new_session=True, timeout=30)
    assert result.returncode == -signal.SIGKILL
    assert not (tmp_path / "ran").exists()
