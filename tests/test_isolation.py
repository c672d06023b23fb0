"""Isolation on the embedded agents, as Mesos' cgroups isolators do it
(``mesos_local/containerizer/cgroups.py``): the limits each task's cgroups get,
a task over its memory killed with REASON_CONTAINER_LIMITATION_MEMORY, a
busy task held to its cpus by the CFS quota, cgroups removed with their
task and after a master killed with SIGKILL (judged only by masters of
its pid namespace), limits of Docker tasks, and
GPU-less agents hiding the machine's GPUs.

The tests that need real cgroups run as root on a machine with writable
memory and cpu hierarchies (v1, or v2 with those controllers), else skip.
"""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from fixtures_docker import docker_engine, no_leaked_containers, tfmesos_image
from fixtures_master import clients, local_master, make_local_master, small_agent
from mesos_http_client import task_info
from processes import alive

from mesos_local.containerizer import cgroups, executor, runner
from mesos_local.containerizer.cgroup_limits import (
    Limits,
    memory_limit_message,
    parse_isolation,
    stout_bytes,
)
from mesos_local.containerizer.cgroups import (
    IsolationError,
    Layout,
    find_hierarchies,
    isolation_problem,
)
from mesos_local.containerizer.container_options import container_kwargs
from mesos_local.containerizer.runner import TaskLaunch

pytestmark = pytest.mark.timeout(120)

PROBLEM = isolation_problem()
needs_cgroups = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")
ISOLATED = dict(isolation="cgroups/cpu,cgroups/mem")

# Allocates 4 MB blocks, touching each page, until far past any small limit.
def hog(blocks=200, python=sys.executable):
    """A command that allocates (and touches) ``blocks`` 4 MB blocks."""
    return ("%s -c \"import time\nblocks = []\nfor _ in range(%d):\n"
            "    blocks.append(bytearray(4 << 20))\n    time.sleep(0.01)\nprint('survived')\""
            % (python, blocks))


HOG = hog()


# -- pure parts -----------------------------------------------------------------------

def test_a_count_is_read_by_its_whole_key(tmp_path):
    path = str(tmp_path / "memory.oom_control")
    for text, expected in (("oom_kill_disable 1\nunder_oom 0\noom_kill 3\n", 3),
                           ("oom_kill 7", 7),                       # no final newline
                           ("oom_kill_disable 0\nunder_oom 0\n", None),   # a kernel before 4.13
                           ("oom_kill many\n", None)):
        with open(path, "w") as handle:
            handle.write(text)
        assert cgroups._read_count(path, b"oom_kill") == expected, text
    assert cgroups._read_count(str(tmp_path / "gone"), b"oom_kill") is None


def test_parse_isolation_takes_mesos_names():
    assert parse_isolation("cgroups/cpu,cgroups/mem") == ("cgroups/cpu", "cgroups/mem")
    assert parse_isolation("cgroups/mem, cgroups/mem") == ("cgroups/mem",)
    assert parse_isolation("posix/cpu,posix/mem") == ()
    assert parse_isolation(None) == () and parse_isolation("") == ()
    with pytest.raises(ValueError, match="unknown isolator 'cgroups/disk'"):
        parse_isolation("cgroups/disk")


def test_limits_follow_mesos_constants():
    # memory.cpp: max(mem, MIN_MEMORY = 32 MB); cpu.cpp: 1024 x cpus, at least 2;
    # CFS: cpus x 100 ms, at least 1 ms.
    limits = Limits(cpus=0.5, mem=1024, cfs=True)
    assert limits.memory_bytes == 1024 << 20
    assert limits.cpu_shares == 512 and limits.cfs_quota_us == 50000
    assert Limits(cpus=0.001, mem=8).memory_bytes == 32 << 20
    assert Limits(cpus=0.001, mem=8).cpu_shares == 2
    assert Limits(cpus=0.001, mem=8).cfs_quota_us == 1000
    assert Limits(cpus=1, mem=1).cpu_weight == 39 and Limits(cpus=256, mem=1).cpu_weight == 10000


def test_memory_message_is_mesos_own():
    assert stout_bytes(64 << 20) == "64MB" and stout_bytes(1 << 30) == "1GB"
    assert stout_bytes(1536 << 10) == "1536KB" and stout_bytes(1000) == "1000B"
    assert memory_limit_message(64 << 20, (64 << 20) - 4096) == \
        "Memory limit exceeded: Requested: 64MB Maximum Used: 65532KB"


MOUNTS_V1 = """\
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""


def test_hierarchies_from_proc_mounts():
    v1, v2 = find_hierarchies(MOUNTS_V1)
    assert v1 == {"cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct",
                  "memory": "/sys/fs/cgroup/memory"}
    assert v2 == "/sys/fs/cgroup/unified"
    v1, v2 = find_hierarchies("cgroup /c/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
                              "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n")
    assert v1 == {"cpu": "/c/cpu,cpuacct", "cpuacct": "/c/cpu,cpuacct"}
    assert v2 == "/sys/fs/cgroup"


def test_isolation_errors_say_mesos_fix_not_a_framework_s(monkeypatch):
    # mesos_local's words are Mesos' and mesos-local's: a framework that
    # starts the master words its own fix after the ';' (tfmesos: tfrun's).
    turn_off = ("turn isolation off (Mesos' default --isolation=posix/cpu,posix/mem: mesos-local "
                "without --isolation, LocalMaster(isolation=None))")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(IsolationError) as raised:
        Layout.detect(("cgroups/cpu", "cgroups/mem"), MOUNTS_V1)
    assert str(raised.value) == ("cgroups isolation needs root; run the master as root, or "
                                 + turn_off)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(IsolationError) as raised:
        Layout.detect(("cgroups/cpu", "cgroups/mem"), "")
    assert str(raised.value) == ("cannot isolate tasks with cgroups: no cgroup v1 cpu and memory "
                                 "hierarchy is mounted; " + turn_off)


def test_a_run_s_isolation_error_says_tfrun_s_fix(monkeypatch):
    # tfmesos catches the master's IsolationError and words the fix its
    # own way (tfrun --no-isolation), keeping mesos_local's problem.
    from mesos_local import AgentSpec
    from tfmesos.backends import sizing
    from tfmesos.exceptions import MesosError
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(MesosError) as raised:
        sizing.start_local_master([], ("run", "secret"), agents=[AgentSpec(cpus=1, mem=64)],
                                  isolation="cgroups/cpu,cgroups/mem")
    assert str(raised.value) == ("cgroups isolation needs root; turn isolation off (tfrun "
                                 "--no-isolation, cluster(no_isolation=True))")


@pytest.mark.skipif(os.geteuid() != 0, reason="the layout is chosen only as root")
def test_layouts_v1_and_v2_write_the_limits(tmp_path, monkeypatch):
    """The files each version's cgroups get (a directory tree stands in
    for the kernel's)."""
    for name in ("cpu", "cpuacct", "memory", "v2"):
        (tmp_path / name).mkdir()
    (tmp_path / "v2" / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    mounts = "\n".join("cgroup %s cgroup rw,%s 0 0" % (tmp_path / name, name)
                       for name in ("cpu", "cpuacct", "memory"))
    layout = Layout.detect(cgroups.ISOLATORS, mounts)
    assert layout.version == 1
    directories = {}
    for hierarchy in layout.hierarchies():
        directories[hierarchy] = os.path.join(hierarchy, "t")
        os.mkdir(directories[hierarchy])
    task = cgroups.TaskCgroups(layout, directories, Limits(cpus=0.5, mem=100, cfs=True))
    task.apply()
    assert (tmp_path / "memory" / "t" / "memory.limit_in_bytes").read_text() == str(100 << 20)
    assert (tmp_path / "memory" / "t" / "memory.soft_limit_in_bytes").read_text() == \
        str(100 << 20)
    assert (tmp_path / "cpu" / "t" / "cpu.shares").read_text() == "512"
    assert (tmp_path / "cpu" / "t" / "cpu.cfs_quota_us").read_text() == "50000"
    assert task.cpuacct_dir == str(tmp_path / "cpuacct" / "t")
    assert task.join_argv(["true"])[-1] == "true"
    (tmp_path / "memory" / "t" / "memory.oom_control").write_text(
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    (tmp_path / "memory" / "t" / "memory.max_usage_in_bytes").write_text(str(100 << 20))
    (tmp_path / "memory" / "t" / "memory.limit_in_bytes").write_text(str(100 << 20))
    assert task.limitation() == "Memory limit exceeded: Requested: 100MB Maximum Used: 100MB"

    layout = Layout.detect(cgroups.ISOLATORS, "cgroup2 %s cgroup2 rw 0 0" % (tmp_path / "v2"))
    assert layout.version == 2
    os.mkdir(tmp_path / "v2" / "t")
    task = cgroups.TaskCgroups(layout, {str(tmp_path / "v2"): str(tmp_path / "v2" / "t")},
                               Limits(cpus=2, mem=64, cfs=True))
    task.apply()
    assert (tmp_path / "v2" / "t" / "memory.max").read_text() == str(64 << 20)
    assert (tmp_path / "v2" / "t" / "cpu.max").read_text() == "200000 100000"
    assert (tmp_path / "v2" / "t" / "cpu.weight").read_text() == "79"
    (tmp_path / "v2" / "t" / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\n"
                                                         "oom_kill 0\n")
    (tmp_path / "v2" / "t" / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    assert task.cpu_seconds() == 2.5
    reads = []
    read, read_count = cgroups._read, cgroups._read_count
    monkeypatch.setattr(cgroups, "_read", lambda path: reads.append(os.path.basename(path))
                        or read(path))
    monkeypatch.setattr(cgroups, "_read_count", lambda path, key: reads.append(
        os.path.basename(path)) or read_count(path, key))
    assert task.oom_kills() == 0
    reads.clear()
    assert task.limitation() is None
    # Polled for every running task: while no OOM kill happened, one read.
    assert reads == ["memory.events"]

    with pytest.raises(IsolationError, match="does not offer memory"):
        (tmp_path / "v2" / "cgroup.controllers").write_text("cpu\n")
        Layout.detect(cgroups.ISOLATORS, "cgroup2 %s cgroup2 rw 0 0" % (tmp_path / "v2"))


def test_docker_tasks_get_the_limits_through_the_engine():
    launch = TaskLaunch(task_id="t", framework_id="f", agent_id="a", sandbox="/tmp/sb",
                        command="true", image="busybox", containerizer="MESOS",
                        limits=Limits(cpus=0.5, mem=256, cfs=True))
    kwargs = container_kwargs(launch)
    assert kwargs["mem_limit"] == 256 << 20 and kwargs["cpu_shares"] == 512
    assert kwargs["nano_cpus"] == 500000000
    launch.limits = Limits(cpus=2, mem=1024, cfs=False)
    kwargs = container_kwargs(launch)
    assert kwargs["cpu_shares"] == 2048 and "nano_cpus" not in kwargs
    launch.docker_parameters = [("memory", "2g")]   # the task's own parameter wins
    assert container_kwargs(launch)["mem_limit"] == "2g"


# -- GPU-less agents -------------------------------------------------------------------

@pytest.fixture
def fake_gpus(tmp_path, monkeypatch):
    """An ``nvidia-smi`` on PATH that lists two GPUs."""
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-0)'\n"
                      "echo 'GPU 1: NVIDIA H100 (UUID: GPU-1)'\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    return tmp_path


def test_gpu_less_agent_hides_the_machines_gpus(make_local_master, clients, fake_gpus):
    from mesos_local.agent import detect_gpus
    assert detect_gpus() == ("0", "1")     # the machine has GPUs ...
    master = make_local_master(agents=[small_agent(gpus=0)],   # ... this agent none
                               executor_environment={
                                   "PATH": os.environ["PATH"], "CUDA_VISIBLE_DEVICES": "0,1",
                                   "TFMESOS_TEST_SESSION": os.environ["TFMESOS_TEST_SESSION"]})
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("env", offer, 'echo "cuda=[$CUDA_VISIBLE_DEVICES] '
                                    'nvidia=[$NVIDIA_VISIBLE_DEVICES] '
                                    'set=${CUDA_VISIBLE_DEVICES+yes}"; nvidia-smi -L')])
    client.wait_state("env", "TASK_FINISHED")
    out = open(os.path.join(master.sandbox("env"), "stdout")).read()
    assert "cuda=[] nvidia=[void] set=yes" in out
    assert "GPU 0:" in out     # the tool still runs; the task just may not use them


# -- real cgroups ----------------------------------------------------------------------

def _task_dirs(master):
    return [os.path.join(d, name) for d in master.isolator.directories.values()
            for name in os.listdir(d) if os.path.isdir(os.path.join(d, name))]


@needs_cgroups
def test_task_over_its_memory_is_failed_with_mesos_reason(make_local_master, clients):
    master = make_local_master(**ISOLATED)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("hog", offer, HOG, mem=64),
                          task_info("fits", offer, "echo small", mem=64)])
    failed = client.wait_state("hog", "TASK_FAILED", timeout=60)
    assert failed["reason"] == "REASON_CONTAINER_LIMITATION_MEMORY"
    assert failed["source"] == "SOURCE_AGENT"
    assert failed["message"].startswith("Memory limit exceeded: Requested: 64MB Maximum Used: ")
    assert client.wait_state("fits", "TASK_FINISHED")["message"] == \
        "Command exited with status 0"
    assert "survived" not in open(os.path.join(master.sandbox("hog"), "stdout")).read()
    deadline = time.monotonic() + 10
    while _task_dirs(master) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _task_dirs(master) == []      # removed with their tasks


@needs_cgroups
@pytest.mark.parametrize("way", ["pidfds", "no-pidfds", "no-watch-thread"])
def test_a_task_whose_child_the_oom_killer_took_is_killed_whole(make_local_master, clients,
                                                                monkeypatch, way):
    # The shell outlives its OOM-killed child: the task ends once the OOM
    # count moved, as a Mesos container is destroyed, not after its sleep;
    # the agent's OOM watch sees it while the task's thread waits for the
    # exit, with a pidfd or without one (an older kernel, a seccomp filter);
    # where the watch's thread cannot start, the task's own thread looks.
    if way == "no-pidfds":
        monkeypatch.setattr(runner, "open_pidfd", lambda pid: None)
    if way == "no-watch-thread":
        def no_thread(key, look, wake=None):
            raise RuntimeError("can't start new thread")
        monkeypatch.setattr(executor.OOM_WATCH, "watch", no_thread)
    failed = _a_child_over_the_limit_fails_its_task(make_local_master, clients)
    assert failed["message"].startswith("Memory limit exceeded: Requested: 64MB Maximum Used: ")


def _a_child_over_the_limit_fails_its_task(make_local_master, clients):
    """A task of 64 MB whose child allocates past it while its shell sleeps
    on: its TASK_FAILED, for the memory limitation."""
    master = make_local_master(**ISOLATED)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("parent", offer, "%s; sleep 600" % HOG, mem=64)])
    failed = client.wait_state("parent", "TASK_FAILED", timeout=60)
    assert failed["reason"] == "REASON_CONTAINER_LIMITATION_MEMORY", failed
    return failed


@needs_cgroups
def test_the_oom_killer_in_a_task_s_cgroup_wakes_the_watch_without_polling(make_local_master,
                                                                           clients,
                                                                           monkeypatch):
    """The kernel signals an eventfd registered on the task's
    memory.oom_control (cgroup v1), as Mesos listens: a watch that would
    look again only after 10 minutes still ends the task as its child is
    killed (it read every running task's count 4 times a second)."""
    from mesos_local.containerizer import oom_watch
    if cgroups.Layout.detect(("cgroups/mem",)).version != 1:
        pytest.skip("cgroup v2: its OOM count is polled")
    watch = oom_watch.OomWatch(interval=600.0, safety=600.0)
    monkeypatch.setattr(executor, "OOM_WATCH", watch)
    looks = []
    real = cgroups.TaskCgroups.oom_kills
    monkeypatch.setattr(cgroups.TaskCgroups, "oom_kills",
                        lambda self: looks.append(time.monotonic()) or real(self))
    # The shell lives on (sleep 600) once its child is killed: only the
    # watch can end the task, and it would not look again for 10 minutes.
    _a_child_over_the_limit_fails_its_task(make_local_master, clients)
    # At the watch's start, then from the event until the kill is counted, at the exit.
    assert len(looks) <= 2 + oom_watch.AFTER_EVENT / oom_watch.AFTER_EVENT_POLL, looks


@needs_cgroups
def test_running_tasks_oom_counts_are_read_by_one_watch_not_a_thread_each(
        make_local_master, clients, monkeypatch, tmp_path):
    # Each task's thread only waits for its exit: one thread of the agent
    # looks at every running task's count (a timed wait per task woke 210
    # tasks' threads 840 times a second).
    readers = []
    real = cgroups.TaskCgroups.oom_kills
    monkeypatch.setattr(cgroups.TaskCgroups, "oom_kills", lambda self: readers.append(
        (threading.current_thread().name, self.memory_dir)) or real(self))
    master = make_local_master(**ISOLATED)
    client = clients(master)
    offer = client.next_offers()[0]
    names = ["calm%d" % i for i in range(3)]
    for name in names:
        os.mkfifo(str(tmp_path / name))
    client.launch(offer, [task_info(name, offer, "read x < %s" % (tmp_path / name), mem=64)
                          for name in names])
    for name in names:
        client.wait_state(name, "TASK_RUNNING")
    deadline = time.monotonic() + 60
    while len({directory for _, directory in readers}) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    while_running = list(readers)   # (each task's thread reads once more at its exit)
    for name in names:
        with open(str(tmp_path / name), "w") as writer:
            writer.write("go\n")
    for name in names:
        assert client.wait_state(name, "TASK_FINISHED")["message"] == \
            "Command exited with status 0"
    assert len({directory for _, directory in while_running}) == 3, readers   # each watched
    assert {thread for thread, _ in while_running} == {"oom-watch"}


@needs_cgroups
def test_each_task_gets_its_limits(make_local_master, clients):
    master = make_local_master(isolation="cgroups/cpu,cgroups/mem", cgroups_enable_cfs=True)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("limited", offer, "cat /proc/self/cgroup; sleep 30",
                                    cpus=0.25, mem=100)])
    client.wait_state("limited", "TASK_RUNNING")
    (task,) = _wait_for(lambda: _task_dirs(master) and
                        {os.path.basename(p) for p in _task_dirs(master)}, 10)
    assert task == "limited"
    layout = master.isolator.layout
    memory = os.path.join(master.isolator.directories[layout.roots["cgroups/mem"][0]], task)
    cpu = os.path.join(master.isolator.directories[layout.roots["cgroups/cpu"][0]], task)
    if layout.version == 1:
        assert open(os.path.join(memory, "memory.limit_in_bytes")).read().strip() == \
            str(100 << 20)
        assert open(os.path.join(cpu, "cpu.shares")).read().strip() == "256"
        assert open(os.path.join(cpu, "cpu.cfs_quota_us")).read().strip() == "25000"
    pids = _wait_for(lambda: open(os.path.join(memory, "cgroup.procs")).read().split(), 10)
    assert pids                            # the task's processes are in it
    client.kill("limited")
    client.wait_state("limited", "TASK_KILLED")
    _wait_for(lambda: not os.path.exists(memory) and not os.path.exists(cpu), 10)


BUSY = ("import os, time\nstart, t0 = time.monotonic(), sum(os.times()[:2])\n"
        "while time.monotonic() - start < 8:\n    pass\n"
        "print('ratio %.3f' % ((sum(os.times()[:2]) - t0) / (time.monotonic() - start)))")


@needs_cgroups
def test_busy_task_gets_about_its_cpus_under_cfs(make_local_master, clients):
    """-Cw 0.5 with CFS: a busy loop gets about half a core (its cpu time
    over its wall time, from /proc through os.times()), while the same loop
    outside the master, at the same time, gets what the shared machine gives."""
    master = make_local_master(isolation="cgroups/cpu", cgroups_enable_cfs=True)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("busy", offer, '%s -c "%s"' % (sys.executable, BUSY),
                                    cpus=0.5)])
    client.wait_state("busy", "TASK_RUNNING")
    twin = subprocess.run([sys.executable, "-c", BUSY], capture_output=True, text=True,
                          timeout=60)
    client.wait_state("busy", "TASK_FINISHED", timeout=60)
    out = open(os.path.join(master.sandbox("busy"), "stdout")).read()
    ratio, free = float(out.split("ratio ")[1]), float(twin.stdout.split("ratio ")[1])
    # Never more than its half core; about half of it unless the machine is so
    # busy that even the unlimited twin got little.
    assert ratio <= 0.7, (ratio, free)
    # Not starved: with cpus 0.5 its cpu.shares are half the twin's, so under
    # contention it gets less than the cap (in CI, four lanes at once: 0.246
    # against the twin's 0.494, 0.247 against 0.861, and with a fifth
    # process busy 0.191 against 0.817).
    assert ratio >= min(0.15, 0.2 * free), (ratio, free)


@needs_cgroups
def test_task_ids_that_read_as_another_s_later_run_get_cgroups_of_their_own():
    # 'x' twice (two frameworks), then 'x.run1': "cannot create the cgroups
    # of task x.run1: File exists", a valid task that never launched.
    isolator = cgroups.Isolator().start()
    try:
        made = [isolator.prepare(task_id, Limits(cpus=0.1, mem=64))
                for task_id in ("x", "x", "x.run1", "a/b", "a_b")]
        names = [os.path.basename(next(iter(task.directories.values()))) for task in made]
        assert len(set(names)) == 5, names
        for task in made:
            task.destroy(timeout=5.0)
    finally:
        isolator.stop()


def master_standing_in(tmp_path, task, then):
    """A process standing in for an isolating master: its isolator started,
    the cgroups of ``task`` prepared, then ``then`` (Python: it starts the
    task and prints what the test reads), then it waits to be killed."""
    script = tmp_path / "master.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "from mesos_local.containerizer.cgroup_limits import Limits\n"
        "from mesos_local.containerizer.cgroups import Isolator\n"
        "isolator = Isolator().start()\n"
        "task = isolator.prepare(%r, Limits(cpus=0.1, mem=64))\n" % task + then
        + "time.sleep(300)\n")
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=os.getcwd()))


@needs_cgroups
def test_cgroups_of_a_killed_master_are_removed_by_the_next(tmp_path):
    """A master killed with SIGKILL leaves its task running in its cgroups;
    the next isolating master kills it and removes them."""
    proc = master_standing_in(tmp_path, "orphan", (
        "subprocess.Popen(task.join_argv(['sleep', '300']))\n"
        "print(' '.join(sorted(set(task.directories.values()))), flush=True)\n"))
    try:
        directories = proc.stdout.readline().split()
        assert directories
        pids = _wait_for(lambda: open(os.path.join(directories[0], "cgroup.procs")).read()
                         .split(), 10)
        proc.kill()
        proc.wait()
        removed = cgroups.remove_stale(Layout.detect(cgroups.ISOLATORS))
        assert removed and not any(os.path.exists(d) for d in directories)
        assert not any(os.path.exists("/proc/%s" % pid) and
                       open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()[0] != "Z"
                       for pid in pids)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in locals().get("pids") or ():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


@needs_cgroups
@pytest.mark.docker
def test_container_over_its_memory_is_failed_with_mesos_reason(
        make_local_master, clients, docker_engine, tfmesos_image,
        no_leaked_containers):
    from mesos_local.containerizer.docker_runner import DockerRunner
    master = make_local_master(container_runner=DockerRunner(docker_engine), **ISOLATED)
    client = clients(master)
    offer = client.next_offers()[0]
    image = {"type": "MESOS", "mesos": {"image": {"type": "DOCKER",
                                                   "docker": {"name": tfmesos_image}}}}
    info = task_info("hog", offer, hog(python="python3"), mem=64, container=image)
    info["command"]["user"] = "root"     # a user the image knows (this master runs as root)
    client.launch(offer, [info])
    failed = client.wait_state("hog", "TASK_FAILED", timeout=120)
    assert failed["reason"] == "REASON_CONTAINER_LIMITATION_MEMORY", failed
    assert failed["message"] == "Memory limit exceeded: Requested: 64MB Maximum Used: 64MB"


def test_a_problem_with_a_semicolon_is_kept_whole(monkeypatch, caplog):
    # IsolationError carries its problem and fix apart: a ';' inside the
    # problem (an OSError's text, a path) is not where tfmesos cuts it.
    from mesos_local import AgentSpec
    from tfmesos.backends import sizing
    from tfmesos.exceptions import MesosError

    def detect(cls, isolators, mounts_text=None):
        raise IsolationError("cannot read /proc/mounts: odd; really", cgroups.TURN_OFF)

    monkeypatch.setattr(Layout, "detect", classmethod(detect))
    assert isolation_problem(fix=False) == "cannot read /proc/mounts: odd; really"
    assert isolation_problem() == "cannot read /proc/mounts: odd; really; " + cgroups.TURN_OFF
    with caplog.at_level("WARNING"):
        assert sizing.auto_isolation("auto") is None
    assert "here (cannot read /proc/mounts: odd; really); on a" in caplog.records[0].getMessage()
    with pytest.raises(MesosError) as raised:
        sizing.start_local_master([], ("run", "secret"), agents=[AgentSpec(cpus=1, mem=64)],
                                  isolation="cgroups/cpu,cgroups/mem")
    assert str(raised.value) == ("cannot read /proc/mounts: odd; really; turn isolation off "
                                 "(tfrun --no-isolation, cluster(no_isolation=True))")


def test_run_isolation_is_said_once_when_it_cannot_be_done(monkeypatch, caplog):
    from tfmesos.backends import sizing
    from tfmesos.exceptions import SpecError
    monkeypatch.setattr(sizing, "isolation_problem", lambda isolators: (
        "cannot isolate tasks with cgroups: cgroups isolation needs root"))
    with caplog.at_level("WARNING"):
        assert sizing.auto_isolation("auto") is None
    assert [r.getMessage() for r in caplog.records] == [
        "the embedded master does not hold tasks to their cpus and mem here (cannot isolate "
        "tasks with cgroups: cgroups isolation needs root); on a Mesos cluster with cgroups "
        "isolation a task over its mem is killed. --no-isolation silences this"]
    with pytest.raises(SpecError, match="local_master.cgroups_enable_cfs: cannot isolate"):
        sizing.auto_isolation("auto", enable_cfs=True)
    assert sizing.auto_isolation(None) is None     # --no-isolation: nothing said
    monkeypatch.setattr(sizing, "isolation_problem", lambda isolators: None)
    assert sizing.auto_isolation("auto") == "cgroups/cpu,cgroups/mem"


def test_cfs_that_cannot_be_done_is_a_usage_error_before_the_run(monkeypatch, tmp_path,
                                                                  capsys):
    from tfmesos.backends import sizing
    from tfmesos.cli import tfrun
    monkeypatch.setattr(sizing, "isolation_problem", lambda isolators: (
        "cannot isolate tasks with cgroups: cgroups isolation needs root"))
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("MESOS_MASTER", "")
    with pytest.raises(SystemExit) as leaving:
        tfrun.main(["--cgroups-enable-cfs", "-w", "1", "-s", "0", "--", "true"])
    assert leaving.value.code == 2
    assert "tfrun: error: --cgroups-enable-cfs: cannot isolate" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_isolation_options_of_the_commands():
    from mesos_local import command_line as cli
    from tfmesos.cli import tfrun_options as tfrun
    local = "local"
    args = tfrun.build_parser().parse_options(["--no-isolation"])
    assert tfrun.isolation_options(args, local) == {"isolation": None}
    args = tfrun.build_parser().parse_options(["--cgroups-enable-cfs"])
    assert tfrun.isolation_options(args, local) == {"cgroups_enable_cfs": True}
    assert tfrun.isolation_options(tfrun.build_parser().parse_options([]), local) == {}
    args = cli.build_parser().parse_args(["--isolation", "cgroups/disk"])
    with pytest.raises(ValueError, match="unknown isolator 'cgroups/disk'"):
        cli.make_master(args, {})
    args = cli.build_parser().parse_args(["--cgroups-enable-cfs"])
    with pytest.raises(ValueError, match="needs the cgroups/cpu isolator"):
        cli.make_master(args, {})


@needs_cgroups
def test_no_isolation_lets_a_task_use_more_than_it_asked(tmp_path):
    from tfrun_helpers import run_tfrun
    result = run_tfrun("-w", "1", "-s", "0", "-Cw", "0.2", "-Mw", "64", "--no-isolation",
                       "--", hog(40))
    assert result.returncode == 0, result.stderr
    assert "[worker:0] survived" in result.stdout


def _wait_for(check, timeout):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


@needs_cgroups
@pytest.mark.parametrize("end", ["exits", "killed"])
@pytest.mark.waits
def test_a_process_that_leaves_its_task_s_cgroups_dies_with_the_task(make_local_master,
                                                                      clients, tmp_path, end):
    """A root task can write its pid into the root cgroups (leaving its own)
    and its group (setsid): its task's end still takes it (its environment
    names the task's sandbox), and the task's cgroups go."""
    master = make_local_master(**ISOLATED)
    client = clients(master)
    pidfile = tmp_path / "escaped.pid"
    # Into the cgroups two levels up (above the master's own) for each of
    # the task's hierarchies, then out of its group, then sleep.
    (tmp_path / "escape.py").write_text(
        "import os\n"
        "for line in open('/proc/self/cgroup'):\n"
        "    _, controllers, path = line.strip().split(':', 2)\n"
        "    if 'leaver' in path:\n"
        "        up = '/sys/fs/cgroup/' + controllers + path + '/../../cgroup.procs'\n"
        "        with open(up, 'w') as procs:\n"
        "            procs.write(str(os.getpid()))\n"
        "os.setsid()\n"
        "open(%r, 'w').write(str(os.getpid()))\n"
        "os.execvp('sleep', ['sleep', '600'])\n" % str(pidfile))
    command = "%s %s & sleep %s" % (sys.executable, tmp_path / "escape.py",
                                    "1" if end == "exits" else "600")
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("leaver", offer, command, mem=64)])
    client.wait_state("leaver", "TASK_RUNNING")
    escaped = int(_wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 20))
    assert not any("leaver" in line for line in open("/proc/%d/cgroup" % escaped))
    if end == "killed":
        client.kill("leaver")
        client.wait_state("leaver", "TASK_KILLED", timeout=30)
    else:
        client.wait_state("leaver", "TASK_FINISHED", timeout=30)
    assert _wait_for(lambda: not alive(escaped), 10), "the escaped process outlived its task"
    assert _wait_for(lambda: _task_dirs(master) == [], 10)


@needs_cgroups
def test_tasks_that_end_together_share_the_scans_for_their_escaped_processes(make_local_master,
                                                                            clients):
    """Each isolated task's end looked for the processes that left its
    cgroups with a scan of its own, reading every process's stat: N tasks
    ending together, N^2 reads (a third of tfrun's CPU with 210 tasks).
    Their ends are swept together now, after their updates."""
    from mesos_local.containerizer.process_tree import SCANS
    master = make_local_master(**ISOLATED)
    client = clients(master)
    offer = client.next_offers()[0]
    names = ["short%d" % index for index in range(24)]
    before = SCANS.passes
    # Ends 10 ms apart: a scan each (and one more) before, a few in all now.
    client.launch(offer, [task_info(name, offer, "sleep 0.%02d" % index, cpus=0.05, mem=32)
                          for index, name in enumerate(names)])
    finished = set()
    while finished != set(names):
        status = client.next_update(timeout=60)
        if "uuid" in status:
            client.acknowledge(status)
        assert status["state"] in ("TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"), status
        if status["state"] == "TASK_FINISHED":
            finished.add(status["task_id"]["value"])
    master.stop()
    assert SCANS.passes - before <= len(names) // 2, SCANS.passes - before


@needs_cgroups
def test_the_next_master_leaves_the_tasks_a_killed_master_s_watchdog_still_keeps(tmp_path):
    """A checkpointing framework's task outlives its SIGKILLed master for
    the recovery timeout (its watchdog ends it then): the next isolating
    master to start killed it at once as a leftover (found by a review
    helper: any root tfrun's embedded master did). Its cgroups go once the
    watchdog is gone."""
    proc = master_standing_in(tmp_path, "kept", (
        "from mesos_local.watchdog import Watchdog\n"
        "proc = subprocess.Popen(task.join_argv(['sleep', '300']), start_new_session=True,"
        " stdout=subprocess.DEVNULL)\n"
        "watchdog = Watchdog(600.0, owner=isolator.name)\n"
        "watchdog.watch(proc.pid, None, None, sorted(set(task.directories.values())), 1.0,"
        " True)\n"
        "print(watchdog.pid, ' '.join(sorted(set(task.directories.values()))), flush=True)\n"))
    watchdog = None
    try:
        watchdog, *directories = proc.stdout.readline().split()
        pids = _wait_for(lambda: open(os.path.join(directories[0], "cgroup.procs")).read()
                         .split(), 10)
        proc.kill()
        proc.wait()
        assert cgroups.remove_stale(Layout.detect(cgroups.ISOLATORS)) == []
        assert all(os.path.exists(d) for d in directories)
        assert all(os.path.exists("/proc/%s" % pid) for pid in pids)
        os.kill(int(watchdog), signal.SIGKILL)   # its recovery timeout over, say
        _wait_for(lambda: not os.path.exists("/proc/%s/cmdline" % watchdog)
                  or not open("/proc/%s/cmdline" % watchdog).read(), 10)
        assert cgroups.remove_stale(Layout.detect(cgroups.ISOLATORS))
        assert not any(os.path.exists(d) for d in directories)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if watchdog is not None:
            try:
                os.kill(int(watchdog), signal.SIGKILL)
            except OSError:
                pass
        # Whatever a failure left: the task (in its own session) and its
        # cgroups, removed as the next master's start removes a dead one's.
        _wait_for(lambda: watchdog is None
                  or not os.path.exists("/proc/%s/cmdline" % watchdog)
                  or not open("/proc/%s/cmdline" % watchdog).read(), 10)
        cgroups.remove_stale(Layout.detect(cgroups.ISOLATORS))


@pytest.mark.skipif(os.geteuid() != 0, reason="starts a process as another user")
def test_only_this_user_s_processes_are_taken_for_watchdogs():
    # Anyone can start a process whose command line reads as a watchdog's
    # and name a dead root master's cgroups (readable by all): its tasks and
    # cgroups were then kept for as long as that process ran (found by a
    # review helper reading the change).
    from mesos_local.watchdog import watched_owners
    argv = ["/usr/bin/python3", "-c", "import time; time.sleep(60)",   # one nobody may run
            "/x/mesos_local/watchdog.py", "600"]
    other = subprocess.Popen(argv + ["1-2-0000aaaa"], user=65534, group=65534)
    mine = subprocess.Popen(argv + ["1-2-0000bbbb"])
    try:
        assert _wait_for(lambda: b"0000bbbb" in open("/proc/%d/cmdline" % mine.pid, "rb").read()
                         and b"0000aaaa" in open("/proc/%d/cmdline" % other.pid, "rb").read(),
                         10)
        owners = watched_owners()
        assert "1-2-0000bbbb" in owners and "1-2-0000aaaa" not in owners
    finally:
        for proc in (other, mine):
            proc.kill()
            proc.wait()


# -- masters of other pid namespaces --------------------------------------------------
# A master's cgroup directory is named after its process as its work directory
# is (cleanup.py): ``<pid namespace>.<pid>.<start ticks>-XXXXXXXX``, judged only
# by masters of that namespace. Found by a reviewer: a tfrun run as PID 1 of a
# new pid namespace (unshare -fp) took a live host run's cgroups for a gone
# master's (its pid is not seen there) and tried to destroy them (12 s of
# "cannot remove cgroup ... Device or resource busy"); a host master judged a
# namespaced one's ``1-<start>-...`` by the host's PID 1.

INITIAL_PID_NAMESPACE = 4026531836   # the host's (PROC_PID_INIT_INO)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _plain_layout(tmp_path):
    """A v1 layout of plain directories (no cgroup.procs: nothing to kill)."""
    cpu, memory = str(tmp_path / "cpu,cpuacct"), str(tmp_path / "memory")
    for hierarchy in (cpu, memory):
        os.makedirs(os.path.join(hierarchy, cgroups.ROOT))
    return Layout(1, {"cgroups/cpu": [cpu], "cgroups/mem": [memory]})


def _gone_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_master_s_cgroups_are_named_with_its_pid_namespace(tmp_path, monkeypatch):
    from mesos_local import cleanup
    layout = _plain_layout(tmp_path)
    monkeypatch.setattr(Layout, "detect", classmethod(lambda cls, isolators, text=None: layout))
    isolator = cgroups.Isolator().start()
    try:
        prefix = "%d.%d.%d-" % (cleanup._pid_namespace(), os.getpid(),
                                cleanup.process_start(os.getpid()))
        assert isolator.name.startswith(prefix), isolator.name
        assert cgroups._MASTER.match(isolator.name), isolator.name   # what remove_stale reads
        assert sorted(isolator.directories.values()) == sorted(
            os.path.join(h, cgroups.ROOT, isolator.name) for h in layout.hierarchies())
        assert cgroups.remove_stale(layout) == []   # alive: its own namespace's start keeps it
    finally:
        isolator.stop()
    assert not any(os.listdir(os.path.join(h, cgroups.ROOT)) for h in layout.hierarchies())


@pytest.mark.parametrize("namespace", [INITIAL_PID_NAMESPACE, 4026532180])
def test_only_masters_of_this_pid_namespace_are_judged_by_their_pids(tmp_path, monkeypatch,
                                                                       namespace):
    """From ``namespace``: a gone master of this namespace goes, a live one
    stays, another namespace's stay (gone-looking or live-looking here: a
    pid means nothing out of its namespace); an older mesos_local's
    ``<pid>-<start>-XXXXXXXX`` (no namespace) is judged from the host's
    initial namespace only, as it was."""
    from mesos_local import cleanup
    monkeypatch.setattr(cleanup, "_pid_namespace", lambda: namespace)
    layout = _plain_layout(tmp_path)
    here, gone = (os.getpid(), cleanup.process_start(os.getpid())), (_gone_pid(), 1)
    names = {
        "live": "%d.%d.%d-0000aaa1" % ((namespace,) + here),
        "gone": "%d.%d.%d-0000aaa2" % ((namespace,) + gone),
        "other gone": "%d.%d.%d-0000aaa3" % ((namespace + 1,) + gone),
        "other live": "%d.%d.%d-0000aaa4" % ((namespace + 1,) + here),
        "old live": "%d-%d-0000aaa5" % here,
        "old gone": "%d-%d-0000aaa6" % gone,
        "not a master's": "tfmesos-0000aaa7",
    }
    for hierarchy in layout.hierarchies():
        for name in names.values():
            os.mkdir(os.path.join(hierarchy, cgroups.ROOT, name))
            os.mkdir(os.path.join(hierarchy, cgroups.ROOT, name, "task"))   # a task's
    expected = ["gone"] + (["old gone"] if namespace == INITIAL_PID_NAMESPACE else [])
    assert cgroups.remove_stale(layout) == sorted(names[key] for key in expected)
    for hierarchy in layout.hierarchies():
        assert sorted(os.listdir(os.path.join(hierarchy, cgroups.ROOT))) == sorted(
            name for key, name in names.items() if key not in expected)


def _unshare_works():
    if os.geteuid() != 0 or PROBLEM is not None:
        return False
    try:
        return subprocess.run(["unshare", "--fork", "--pid", "--mount-proc", "true"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _in_a_new_pid_namespace(code, **kwargs):
    """Python ``code`` run as PID 1 of a new pid namespace (with its /proc),
    its cgroups under this process' ``cgroups.ROOT``."""
    code = ("from mesos_local.containerizer import cgroups\ncgroups.ROOT = %r\n" % cgroups.ROOT
            + code)
    return subprocess.Popen(["unshare", "--fork", "--pid", "--mount-proc", sys.executable, "-c",
                             code], cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO),
                            text=True, **kwargs)


@pytest.fixture
def private_root(monkeypatch):
    """The masters of a test under a root of their own in each hierarchy
    (``cgroups.ROOT``): no other master's cgroups are judged (those of other
    tests and runs of this machine, live or not; the code before the fix
    would destroy a live one's), and whatever the test left is removed."""
    if not _unshare_works():
        pytest.skip("unshare --pid cannot be done here")
    monkeypatch.setattr(cgroups, "ROOT", "mesos_local_test-%d" % os.getpid())
    layout = Layout.detect(cgroups.ISOLATORS)
    yield layout
    for hierarchy in layout.hierarchies():
        root = os.path.join(hierarchy, cgroups.ROOT)
        for directory, _, _ in sorted(os.walk(root), key=lambda entry: -len(entry[0])):
            try:
                os.rmdir(directory)   # a cgroup's files go with it
            except OSError:
                pass
        assert not os.path.exists(root), "left: %s" % root


@needs_cgroups
def test_a_master_in_a_new_pid_namespace_leaves_a_live_host_master_s_cgroups(private_root):
    from mesos_local import cleanup
    layout = private_root
    isolator = cgroups.Isolator().start()   # a live master of this namespace: this process
    try:
        task = isolator.prepare("kept", Limits(cpus=0.1, mem=64))
        old = "%d-%d-0000bbb1" % (os.getpid(), cleanup.process_start(os.getpid()))
        made = [os.path.join(h, cgroups.ROOT, old) for h in layout.hierarchies()]
        for path in made:   # as an older mesos_local of this namespace named its own
            os.mkdir(path)
        kept = sorted(set(task.directories.values())) + list(isolator.directories.values()) \
            + made
        start = _in_a_new_pid_namespace(
            "print(' '.join(cgroups.remove_stale(cgroups.Layout.detect(cgroups.ISOLATORS))))\n",
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = start.communicate(timeout=60)
        assert start.returncode == 0, err
        assert out.split() == [], out
        assert [path for path in kept if not os.path.isdir(path)] == []
    finally:
        isolator.stop()


@needs_cgroups
def test_a_live_master_of_a_new_pid_namespace_keeps_its_cgroups(private_root):
    master = _in_a_new_pid_namespace(
        "import sys\n"
        "from mesos_local.containerizer.cgroup_limits import Limits\n"
        "isolator = cgroups.Isolator().start()\n"
        "task = isolator.prepare('t', Limits(cpus=0.1, mem=64))\n"
        "print(isolator.name, *sorted(set(task.directories.values())),"
        " *isolator.directories.values(), flush=True)\n"
        "sys.stdin.read()\n"
        "isolator.stop()\n", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        name, *directories = master.stdout.readline().split()
        assert directories
        assert cgroups.remove_stale(private_root) == []
        assert [path for path in directories if not os.path.isdir(path)] == []
    finally:
        master.stdin.close()   # it stops: its isolator removes its cgroups
        try:
            master.wait(timeout=30)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait()
