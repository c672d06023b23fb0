"""A task's end on a local agent: the agent hears of the exit as it
happens (no sleep loop between the exit and its notice), and destroying
what is left of the task is cheap without being weaker: a task with
cgroups is killed by its cgroups, the /proc scan of a task without them
never reads the environment of a process older than the task."""

import errno
import os
import signal
import subprocess
import threading
import time

import pytest
from conftest import MARKER
from waiting import wait_until

from mesos_local.containerizer import cgroups, executor, pidfd, process_tree
from mesos_local.containerizer.executor import TaskProcess
from mesos_local.containerizer.runner import ProcessRunner, TaskLaunch


def make_launch(tmp_path, command, task_id="t1"):
    sandbox = str(tmp_path / "sandbox")
    os.makedirs(sandbox, exist_ok=True)
    env = {"PATH": os.environ["PATH"], MARKER: os.environ[MARKER],
           "MESOS_SANDBOX": sandbox, "MESOS_EXECUTOR_ID": task_id}
    return TaskLaunch(task_id=task_id, framework_id="f1", agent_id="a1", sandbox=sandbox,
                      command=command, env=env)


# A child that leaves the task's group and session (setsid), and the task's
# end once it has (field 6 of /proc/PID/stat: its session).
ESCAPE = ("setsid sleep 300 & p=$!; echo $p > escaped.pid; "
          "while [ \"$(cut -d' ' -f6 /proc/$p/stat)\" != $p ]; do :; done; exit 0")


def pidfds_work():
    try:
        fd = pidfd.open_pidfd(os.getpid())
    except ProcessLookupError:
        return False
    if fd is None:
        return False
    os.close(fd)
    return True


# Without pidfds (Linux < 5.3, seccomp) the agent polls, as it did before.
needs_pidfd = pytest.mark.skipif(not pidfds_work(), reason="pidfd_open(2) is not available here")


class NoSleep(AssertionError):
    pass


def no_sleep(seconds):
    raise NoSleep("time.sleep(%r) on the exit path" % seconds)


@pytest.fixture
def waits_with_timeout(monkeypatch):
    """The timeouts ``subprocess.Popen.wait`` is called with (its timed wait
    is a sleep loop growing to 50 ms)."""
    seen = []
    original = subprocess.Popen.wait

    def wait(popen, timeout=None):
        seen.append(timeout)
        return original(popen, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    return seen


def run_until_told(tmp_path):
    """A task that exits with status 3 once something is written to its fifo."""
    fifo = str(tmp_path / "go")
    os.mkfifo(fifo)
    handle = ProcessRunner().launch(make_launch(tmp_path, "read x < %s; exit 3" % fifo))
    return handle, fifo


def tell(fifo):
    with open(fifo, "w") as writer:
        writer.write("go\n")


@needs_pidfd
def test_a_timed_wait_returns_at_the_exit_without_a_sleep_loop(tmp_path, monkeypatch,
                                                               waits_with_timeout):
    handle, fifo = run_until_told(tmp_path)
    try:
        monkeypatch.setattr(time, "sleep", no_sleep)
        assert handle.wait(0.01) is None          # still blocked on its fifo
        tell(fifo)
        assert handle.wait(30) == 3
        assert handle.wait(0) == 3                # reaped once, remembered
        assert handle.popen.returncode == 3
        assert [t for t in waits_with_timeout if t is not None] == []
    finally:
        handle.kill()
        handle.popen.wait()
    assert handle._pidfd is None                  # closed once reaped


@pytest.mark.parametrize("missing", ["attribute", "enosys"])
def test_without_pidfd_open_a_timed_wait_still_works(tmp_path, monkeypatch, missing):
    if missing == "attribute":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    else:
        def enosys(pid, flags=0):
            raise OSError(errno.ENOSYS, "Function not implemented")
        monkeypatch.setattr(os, "pidfd_open", enosys, raising=False)
    handle, fifo = run_until_told(tmp_path)
    try:
        assert handle.wait(0.01) is None
        tell(fifo)
        assert handle.wait(30) == 3
    finally:
        handle.kill()
        handle.popen.wait()


@needs_pidfd
def test_an_isolated_task_exit_is_noticed_without_a_sleep_loop(tmp_path, waits_with_timeout):
    # An isolated task's thread waits for its exit with no timeout (the
    # agent's OOM watch looks at its count): it ends at the exit, not at the
    # next step of a sleep loop.
    isolator = start_isolator()
    fifo = str(tmp_path / "go")
    os.mkfifo(fifo)
    ended = threading.Event()
    launch = make_launch(tmp_path, "read x < %s; exit 0" % fifo)
    launch.limits = isolator.limits(0.1, 64)
    proc = TaskProcess(launch, ProcessRunner(), [], lambda proc: None,
                       lambda proc, status, error: ended.set(), isolator=isolator)
    try:
        proc.start()
        wait_until(lambda: proc.handle is not None and proc.cgroups.pids(),
                   message="the task did not start in its cgroups")
        tell(fifo)
        assert ended.wait(30)
        assert [t for t in waits_with_timeout if t is not None] == []
    finally:
        proc.kill_at_once()
        proc.join(30)
        isolator.stop()


def boot_ticks():
    """Now, as /proc/PID/stat's start times count (clock ticks since boot)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def environ_reads(monkeypatch):
    """The pids whose /proc/PID/environ this process opens."""
    import builtins
    seen = []
    original = builtins.open

    def spying_open(file, *args, **kwargs):
        if isinstance(file, (str, bytes)):
            name = os.fsdecode(file)
            if name.startswith("/proc/") and name.endswith("/environ"):
                seen.append(name.split("/")[2])
        return original(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spying_open)
    return seen


def start_isolator():
    problem = cgroups.isolation_problem()
    if problem is not None:
        pytest.skip(problem)
    return cgroups.Isolator().start()


def run_task(launch, isolator=None):
    """Run a TaskProcess to its end; (status, error, whether ``check()``
    held when on_exit was called)."""
    result = {}
    ended = threading.Event()

    def on_exit(proc, status, error):
        result.update(status=status, error=error)
        ended.set()

    proc = TaskProcess(launch, ProcessRunner(), [], lambda proc: None, on_exit,
                       isolator=isolator)
    proc.start()
    assert ended.wait(60), "the task did not end"
    assert proc.join(30)
    return proc, result


def test_a_cgroup_task_is_destroyed_by_its_cgroups_escapees_included(tmp_path,
                                                                    environ_reads):
    # Mesos' Linux launcher destroys a container by its cgroup
    # (LinuxLauncherProcess::destroyCgroups, linux_launcher.cpp): a child
    # that left the task's session is in it, killed without a look at its
    # /proc/PID/environ. (The scan after it, for a process that left the
    # cgroups, reads the environment of processes newer than the task only:
    # none on a quiet machine, another test run's beside this one.)
    isolator = start_isolator()
    pid_file = tmp_path / "sandbox" / "escaped.pid"
    launch = make_launch(tmp_path, ESCAPE)
    launch.limits = isolator.limits(0.1, 64)
    escaped = None
    try:
        proc, result = run_task(launch, isolator)
        assert result == {"status": 0, "error": None}
        escaped = int(pid_file.read_text())
        assert not pid_alive(escaped)
        assert str(escaped) not in environ_reads and str(os.getpid()) not in environ_reads
        assert all(not os.path.exists(d) for d in proc.cgroups.directories.values())
    finally:
        if escaped is not None and pid_alive(escaped):
            os.kill(escaped, signal.SIGKILL)
        isolator.stop()


def test_the_proc_scan_skips_processes_older_than_the_task(tmp_path, environ_reads):
    older = subprocess.Popen(["sleep", "300"])
    try:
        # /proc's start times count clock ticks: the task must start a tick later.
        started = process_tree.start_ticks(older.pid)
        wait_until(lambda: boot_ticks() > started, interval=0.005)
        escaped_file = tmp_path / "sandbox" / "escaped.pid"
        launch = make_launch(tmp_path, ESCAPE)
        proc, result = run_task(launch)
        assert result == {"status": 0, "error": None}
        escaped = int(escaped_file.read_text())
        assert not pid_alive(escaped)            # found by its MESOS_SANDBOX
        assert str(escaped) in environ_reads
        assert str(older.pid) not in environ_reads and "1" not in environ_reads
    finally:
        older.kill()
        older.wait()


def test_scans_asked_at_once_share_passes_over_proc(monkeypatch):
    # Hundreds of tasks ending together each scan /proc for what is left of
    # them: the asks made while a pass runs are answered by the next pass
    # together, so the cost is that of a few passes, not one per task.
    scans = process_tree.SharedScans()
    asks = 6
    first_pass = threading.Event()
    stat_fields = process_tree._stat_fields

    def slow_first_pass(pid):
        if scans.passes == 1:
            first_pass.set()
            # hold the first pass until every other ask waits for the next one
            wait_until(lambda: len(scans._waiting) == asks - 1, timeout=30, interval=0.005)
        return stat_fields(pid)
    monkeypatch.setattr(process_tree, "_stat_fields", slow_first_pass)
    children = [subprocess.Popen(["sleep", "300"], start_new_session=True) for _ in range(asks)]
    found = {}
    try:
        def ask(index):
            found[index] = scans.find(children[index].pid, None, None)
        threads = [threading.Thread(target=ask, args=(0,))]
        threads[0].start()
        assert first_pass.wait(30)
        threads += [threading.Thread(target=ask, args=(i,)) for i in range(1, asks)]
        for thread in threads[1:]:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert scans.passes == 2
        assert found == {i: [child.pid] for i, child in enumerate(children)}
    finally:
        for child in children:
            child.kill()
            child.wait()


@needs_pidfd
def test_kill_and_wait_sees_the_end_of_processes_that_are_not_children():
    # The helper the cgroup destroy waits with: a killed process counts as
    # ended once it is a zombie (its parent here is sh, which we kill too).
    shell = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!; wait"],
                             stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(shell.stdout.readline())
        assert pidfd.kill_and_wait([grandchild], timeout=30)
        assert not pid_alive(grandchild)
        assert pidfd.kill_and_wait([grandchild], timeout=30)   # gone already: fine
    finally:
        shell.kill()
        shell.wait()
        shell.stdout.close()


class GatedRunner(ProcessRunner):
    """A runner whose launches wait for ``gate``: how many are in a launch at once."""

    def __init__(self, gate):
        self.gate = gate
        self.inside = self.most = 0
        self.lock = threading.Lock()

    def launch(self, launch):
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            self.gate.wait(30)
            return super().launch(launch)
        finally:
            with self.lock:
                self.inside -= 1


def test_launches_at_once_are_bounded_as_an_agents_worker_threads(tmp_path):
    """Hundreds of tasks of one ACCEPT start a few at a time (max(8, cores),
    libprocess' workers): 210 launch threads at once starved the master, whose
    answer to the ACCEPT came after the scheduler's call timeout."""
    bound = executor.LAUNCH_SLOTS
    gate = threading.Event()
    runner = GatedRunner(gate)
    ended = []
    procs = [TaskProcess(make_launch(tmp_path / str(i), "exit 0", "t%d" % i), runner, [],
                         lambda proc: None, lambda proc, status, error: ended.append(status))
             for i in range(bound + 5)]
    for proc in procs:
        proc.start()
    try:
        wait_until(lambda: runner.inside == bound, message="the launches did not start")
        assert not any(proc.join(0.2) for proc in procs)   # the others wait their turn
        assert runner.most == bound
    finally:
        gate.set()
        for proc in procs:
            assert proc.join(30)
    assert ended == [0] * len(procs)


def test_a_resize_while_an_executors_cgroups_are_made_is_not_lost(tmp_path):
    """An executor's second task came while its process was making its
    cgroups with the first's limits: the resize set the limits they were
    still to be made with, too late, and none came after (the cgroup held
    64 MB of 128 for good: test_executor_cgroups_hold_it_and_its_live_tasks
    under load). A resize now waits for their making and applies its own."""
    making, release = threading.Event(), threading.Event()

    class Made:
        def __init__(self, limits):
            self.limits, self.applied = limits, []

        def apply(self):
            self.applied.append(self.limits)

    class Isolator:
        def prepare(self, task_id, limits):
            making.set()
            release.wait(10)
            return Made(limits)

    launch = make_launch(tmp_path, "true")
    launch.limits = "executor and its first task"
    proc = TaskProcess(launch, ProcessRunner(), [], None, None, isolator=Isolator())
    maker = threading.Thread(target=proc._isolate)
    maker.start()
    assert making.wait(10)
    resizer = threading.Thread(target=proc.resize, args=("and its second task",))
    resizer.start()   # blocked until the making ends, or after it: the same end
    release.set()
    maker.join(10)
    resizer.join(10)
    assert (proc.cgroups.limits, proc.cgroups.applied) == (
        "and its second task", ["and its second task"])


def test_a_task_too_big_to_start_fails_in_a_line_of_its_sizes_not_its_whole_command(tmp_path):
    # tfmesos.run(env={18 variables of 120 kB}): TASK_FAILED quoted the whole
    # ~900-character command (the fetch check's prefix) before the cause.
    from mesos_local.containerizer.runner import RunnerError
    command = "echo %s; exec true" % ("a" * 900)
    launch = make_launch(tmp_path, command)
    launch.env.update({"V%02d" % i: "x" * 120000 for i in range(18)})
    with pytest.raises(RunnerError) as caught:
        ProcessRunner().launch(launch)
    said = str(caught.value)
    assert said.startswith("cannot start 'echo aaa") and "a" * 300 not in said, said
    assert "(%d bytes)" % len(command) in said, said
    assert said.endswith("[Errno 7] Argument list too long: '/bin/sh' (its environment: "
                         "%d variables, %d bytes)" % (
                             len(launch.env),
                             sum(len(k) + len(v) + 2 for k, v in launch.env.items()))), said
    # A short command is still quoted whole.
    short = make_launch(tmp_path, "exec true")
    short.env.update(launch.env)
    with pytest.raises(RunnerError, match=r"^cannot start 'exec true': \[Errno 7\]"):
        ProcessRunner().launch(short)
