"""A master killed with SIGKILL (a standalone ``mesos-local``, tfrun's
embedded one) leaves no task running for good: as a Mesos agent's
executors do when their agent dies (src/executor/executor.cpp, the
executor library's ``disconnected``; docs/agent-recovery.md), the tasks of
a framework that does not checkpoint end at once, those of one that does
(``FrameworkInfo.checkpoint``) once the recovery timeout passed
(``--recovery-timeout``, Mesos' agent flag); the master's watchdog
(mesos_local/watchdog.py) ends them and exits. A master that stops leaves
no watchdog behind, and one that launched nothing started none. The same
holds for its Docker tasks: their containers go as Mesos' docker executor
(src/docker/executor.cpp) stops its container when its agent is gone, at
once or after the recovery timeout, not at the next master's start."""

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest
from conftest import MARKER
from fixtures_docker import docker_engine, managed_containers, no_leaked_containers, tfmesos_image
from mesos_http_client import SchedulerClient, task_info
from processes import zombie
from waiting import wait_until

from mesos_local import watchdog
from mesos_local.containerizer.cgroups import isolation_problem

pytestmark = pytest.mark.timeout(180)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "MESOS_LOCAL_DEATH_TEST"   # carried by the master, its watchdog and its tasks
GONE_WITHIN = 30.0   # seconds: a loaded machine; what this catches stays for good
RECOVERY = 3.0       # --recovery-timeout of the checkpointing framework's master
CGROUPS = "cgroups/cpu,cgroups/mem"
ISOLATIONS = [None, pytest.param(CGROUPS, marks=pytest.mark.skipif(
    isolation_problem() is not None, reason="no cgroups here: %s" % isolation_problem()))]


def carrying(token):
    """The live (non-zombie) processes whose environment holds ``TOKEN=token``:
    {pid: command line}."""
    wanted = ("%s=%s" % (TOKEN, token)).encode()
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open("/proc/%s/environ" % name, "rb") as handle:
                if wanted not in handle.read().split(b"\0"):
                    continue
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                found[int(name)] = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
    return found


def start_ticks(pid):
    """When ``pid`` started, or None once it is gone (or a zombie)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == b"Z" else int(fields[19])


class Master:
    """``python -m mesos_local --port 0`` with ``options`` (and
    ``--no-docker`` unless ``docker``), in a process of its own; ``url``
    once it listens. ``close()`` closes its ``clients`` and kills whatever
    carries its token (the master, its watchdog, its tasks)."""

    def __init__(self, tmp_path, *options, docker=False, entry=("-m", "mesos_local")):
        self.token = uuid.uuid4().hex
        self.clients = []   # the frameworks' SchedulerClients, closed with it
        tasks_env = {"PATH": os.environ["PATH"], MARKER: os.environ[MARKER], TOKEN: self.token}
        tmp = tmp_path / "tmp"
        tmp.mkdir(exist_ok=True)
        self.log = tmp_path / "master.log"
        argv = [sys.executable, *entry, "--port", "0",
                "--agent", "cpus=1,mem=256,disk=100,gpus=0",
                "--executor-environment-variables", json.dumps(tasks_env)] + list(options)
        if not docker:
            argv.append("--no-docker")
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=log, text=True, cwd=REPO,
                env=dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=REPO, **{TOKEN: self.token}))
        line = self.process.stdout.readline()
        found = re.search(r"listening on (http://\S+)", line)
        if not found:
            self.close()   # the tests' try begins once this returns
        assert found, "the master did not start: %s" % self.log.read_text()
        self.url = found.group(1)

    def processes(self):
        return carrying(self.token)

    def kill(self):
        """SIGKILL the master; the monotonic time it was sent."""
        sent = time.monotonic()
        self.process.kill()
        assert self.process.wait(timeout=30) == -signal.SIGKILL
        return sent

    def all_gone(self):
        """Wait until nothing carries its token any more."""
        wait_until(lambda: not self.processes(), timeout=GONE_WITHIN,
                   message=lambda: "left behind: %s" % self.processes())

    def close(self):
        for client in self.clients:
            client.close()
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process.stdout.close()
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def launch_sleeper(master, tmp_path, checkpoint=False):
    """A framework (checkpointing or not) that launches ``sleep 600`` on
    ``master``: (the client, closed with ``master``, the sleep's pid, its
    start ticks)."""
    client = SchedulerClient(master.url, extra_info={"checkpoint": True} if checkpoint else None)
    master.clients.append(client)
    client.subscribe()
    offer = client.next_offers()[0]
    pid_file = tmp_path / "sleeper.pid"
    command = "echo $$ > {0}.new && mv {0}.new {0} && exec sleep 600".format(pid_file)
    client.launch(offer, [task_info("sleeper", offer, command)])
    client.wait_state("sleeper", "TASK_RUNNING")
    pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(),
                         message="the task never wrote its pid"))
    wait_until(lambda: b"sleep" in open("/proc/%d/cmdline" % pid, "rb").read(),
               message="the task never exec'd sleep")
    return client, pid, start_ticks(pid)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_the_tasks_of_a_killed_master_end_at_once(tmp_path, isolation):
    master = Master(tmp_path, *(["--isolation", isolation] if isolation else []))
    try:
        _, pid, started = launch_sleeper(master, tmp_path)
        master.kill()
        wait_until(lambda: start_ticks(pid) != started, timeout=GONE_WITHIN,
                   message="the task outlived its killed master (pid %d)" % pid)
        master.all_gone()
    finally:
        master.close()


# ``python -m mesos_local`` that forks a child (as multiprocessing does on
# Linux) on SIGUSR1, which writes its pid to argv[1] and sleeps.
FORKING_MASTER = """
import os, runpy, signal, sys, time
child_pid_file = sys.argv.pop(1)
def fork(*_):
    if os.fork() == 0:
        with open(child_pid_file, "w") as handle:
            handle.write(str(os.getpid()))
        time.sleep(120)
        os._exit(0)
signal.signal(signal.SIGUSR1, fork)
sys.argv[0] = "mesos_local"
runpy.run_module("mesos_local", run_name="__main__", alter_sys=True)
"""


def test_the_tasks_of_a_killed_master_end_at_once_though_it_forked(tmp_path):
    # A tfmesos.run caller that forked (a multiprocessing worker), then was
    # SIGKILLed: its tasks ran on until that child exited, which held the
    # master's end of the watchdog's socket (found by a review helper).
    script, child_pid = tmp_path / "forking_master.py", tmp_path / "child.pid"
    script.write_text(FORKING_MASTER)
    master = Master(tmp_path, entry=(str(script), str(child_pid)))
    child = None
    try:
        _, pid, started = launch_sleeper(master, tmp_path)
        master.process.send_signal(signal.SIGUSR1)
        child = int(wait_until(lambda: child_pid.exists() and child_pid.read_text().strip(),
                               message="the master never forked"))
        master.kill()
        wait_until(lambda: start_ticks(pid) != started, timeout=GONE_WITHIN,
                   message="the task outlived its killed master while its forked child "
                   "lived (pid %d)" % pid)
        assert start_ticks(child) is not None, "the forked child is gone: nothing was shown"
    finally:
        if child is not None:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        master.close()


def test_a_task_that_starts_as_its_master_is_killed_ends_too(tmp_path):
    # The watchdog heard of a task only once it ran: a master killed in
    # between (here by the task itself, first thing) left it running for ever.
    master = Master(tmp_path)
    try:
        client = SchedulerClient(master.url)
        master.clients.append(client)
        client.subscribe()
        offer = client.next_offers()[0]
        client.launch(offer, [task_info("killer", offer, "kill -9 %d; exec sleep 600"
                                        % master.process.pid)])
        assert master.process.wait(timeout=60) == -signal.SIGKILL
        master.all_gone()
    finally:
        master.close()


@pytest.mark.waits
def test_a_checkpointing_frameworks_tasks_end_after_the_recovery_timeout(tmp_path):
    master = Master(tmp_path, "--recovery-timeout", str(RECOVERY))
    try:
        _, pid, started = launch_sleeper(master, tmp_path, checkpoint=True)
        killed = master.kill()
        assert start_ticks(pid) == started, "the task ended before the recovery timeout"
        gone = wait_until(lambda: start_ticks(pid) != started and time.monotonic(),
                          timeout=RECOVERY + GONE_WITHIN,
                          message="the task outlived the recovery timeout (pid %d)" % pid)
        assert gone - killed >= RECOVERY, "ended %.2f s after its master, before %g s" % (
            gone - killed, RECOVERY)
        master.all_gone()
    finally:
        master.close()


def test_a_stopped_master_leaves_no_watchdog(tmp_path):
    # A recovery timeout long enough that a watchdog left waiting would be seen.
    master = Master(tmp_path, "--recovery-timeout", "600")
    try:
        assert list(master.processes()) == [master.process.pid], \
            "a master that launched nothing started a watchdog"
        _, pid, started = launch_sleeper(master, tmp_path, checkpoint=True)
        # The watchdog, the task: the watchdog starts as the task's start is
        # told to it, which may follow TASK_RUNNING, and /proc shows its
        # environment (how processes() finds it) only once its exec is through.
        wait_until(lambda: len(master.processes()) == 3, timeout=30,
                   message=lambda: "not the master, its watchdog and its task: %s"
                   % master.processes())
        master.process.send_signal(signal.SIGTERM)
        assert master.process.wait(timeout=60) == 0
        assert start_ticks(pid) != started, "stop() left the task running"
        master.all_gone()
    finally:
        master.close()


@contextlib.contextmanager
def task_processes(tmp_path):
    """A task's processes as a plain task's look: a group leader (this
    process' child, its own session) and a process that left its group
    (setsid) but carries its ``MESOS_SANDBOX``: (leader Popen, the escaped
    pid, the marker), both killed at the end if they still run."""
    escaped_file = tmp_path / "escaped.pid"
    leader = subprocess.Popen(
        ["/bin/sh", "-c", "setsid sleep 600 & echo $! > {0}.new && mv {0}.new {0}; "
                          "exec sleep 600".format(escaped_file)],
        env=dict(os.environ, MESOS_SANDBOX=str(tmp_path)), start_new_session=True)
    escaped = None
    try:
        escaped = int(wait_until(lambda: escaped_file.exists() and escaped_file.read_text().strip(),
                                 message="the escaped process never started"))
        yield leader, escaped, ("MESOS_SANDBOX=%s" % tmp_path).encode()
    finally:
        for pid in (leader.pid, escaped):
            try:
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        leader.wait(timeout=30)


def test_the_watchdog_ends_what_it_watches_when_its_master_is_gone(tmp_path):
    with task_processes(tmp_path) as (leader, escaped, marker):
        since, escaped_start = start_ticks(leader.pid), start_ticks(escaped)
        line = watchdog.watch_line(1, leader.pid, since, marker, (), 0.5, False)
        # The stream ends as a master killed mid-line leaves it.
        watchdog.watch(io.BytesIO(line + b"watch 2 12"), watchdog.RECOVERY_TIMEOUT)
        assert leader.wait(timeout=GONE_WITHIN) == -signal.SIGTERM
        wait_until(lambda: start_ticks(escaped) != escaped_start, timeout=GONE_WITHIN,
                   message="the process that left the task's group outlived it")


def test_the_watchdog_kills_nothing_when_its_master_stopped(tmp_path):
    with task_processes(tmp_path) as (leader, escaped, marker):
        line = watchdog.watch_line(1, leader.pid, start_ticks(leader.pid), marker, (), 0.5,
                                   False)
        watchdog.watch(io.BytesIO(line + b"exit\n"), 0.0)
        assert leader.poll() is None and start_ticks(escaped) is not None


def fake_docker(tmp_path, monkeypatch):
    """A ``docker`` command first on ``PATH`` that writes its arguments, a
    line a call, to the file it returns."""
    calls = tmp_path / "docker-calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text('#!/bin/sh\necho "$*" >> %s\n' % calls)
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    return calls


def test_the_watchdog_stops_then_removes_the_containers_it_watches(tmp_path, monkeypatch):
    calls = fake_docker(tmp_path, monkeypatch)
    docker = watchdog.docker_command()
    lines = (watchdog.container_line(1, "c0ffee", 2.5, False, docker)   # docker stop -t: whole s
             + watchdog.container_line(2, "gone-before", 3.0, False, docker) + b"forget 2\n"
             + watchdog.container_line(3, "mesos-local-x-1", 0.0, False, docker))
    lines += b"container 4 1.0 0 %s %s\n" % (b"-f".hex().encode(),   # no option: refused
                                             os.fsencode(docker).hex().encode())
    # The stream ends as a master killed mid-line leaves it.
    watchdog.watch(io.BytesIO(lines + b"container 5 1.0 0 6"), watchdog.RECOVERY_TIMEOUT)
    said = calls.read_text().splitlines()
    assert sorted(said) == sorted(["stop -t 3 -- c0ffee", "rm -f -- c0ffee",
                                   "stop -t 0 -- mesos-local-x-1", "rm -f -- mesos-local-x-1"])
    for name in ("c0ffee", "mesos-local-x-1"):   # each removed once it stopped
        assert said.index("stop -t %s -- %s" % ("3" if name == "c0ffee" else "0", name)) \
            < said.index("rm -f -- %s" % name)


def test_the_watchdog_removes_no_container_when_its_master_stopped(tmp_path, monkeypatch):
    calls = fake_docker(tmp_path, monkeypatch)
    line = watchdog.container_line(1, "c0ffee", 0.0, False, watchdog.docker_command())
    watchdog.watch(io.BytesIO(line + b"exit\n"), 0.0)
    assert not calls.exists()


def test_a_docker_command_another_user_could_replace_is_not_run(tmp_path, monkeypatch, caplog):
    # The watchdog runs it with the master's rights (root's, where tasks
    # switch users): found first on PATH in a directory others may write,
    # it is not used, and the container is left to the next master.
    fake_docker(tmp_path, monkeypatch)
    assert watchdog.docker_command() == str(tmp_path / "bin" / "docker")
    (tmp_path / "bin").chmod(0o777)
    assert watchdog.docker_command() is None
    (tmp_path / "bin").chmod(0o755)
    (tmp_path / "bin" / "docker").chmod(0o775)
    assert watchdog.docker_command() is None
    assert "is writable by others" in caplog.text


def test_a_master_goes_on_without_a_watchdog_that_is_gone(caplog):
    dog = watchdog.Watchdog(600.0)
    try:
        assert dog.watch(None, None, None, (), 0.0, False) == 1
        os.kill(dog.pid, signal.SIGKILL)
        wait_until(lambda: os.waitpid(dog.pid, os.WNOHANG)[0] != 0,
                   message="the watchdog did not die")
        assert dog.watch(None, None, None, (), 0.0, False) is None
        assert "the watchdog (pid %d) watches no more tasks: it is gone" % dog.pid in caplog.text
        assert dog.watch(None, None, None, (), 0.0, False) is None   # said once
        assert caplog.text.count("watches no more tasks") == 1
    finally:
        dog.close()


# -- Docker tasks ------------------------------------------------------------------

def master_containers(engine, master):
    """The containers (running or not) of ``master``'s tasks: their
    environment carries its token."""
    token = "%s=%s" % (TOKEN, master.token)
    return [c for c in managed_containers(engine)
            if token in (c.attrs.get("Config", {}).get("Env") or ())]


@contextlib.contextmanager
def docker_master(tmp_path, engine, *options):
    """A ``Master`` that runs image tasks on ``engine``; at the end it,
    its processes and its containers are gone, whatever the test did."""
    master = Master(tmp_path, *options, docker=True)
    try:
        yield master
    finally:
        master.close()
        for container in master_containers(engine, master):
            with contextlib.suppress(Exception):
                container.remove(force=True)


def launch_container(master, engine, image, checkpoint=False):
    """A framework (checkpointing or not) that runs ``sleep 600`` in a
    container of ``image`` on ``master``: the container (its client is
    closed with ``master``)."""
    client = SchedulerClient(master.url, extra_info={"checkpoint": True} if checkpoint else None)
    master.clients.append(client)
    client.subscribe()
    offer = client.next_offers()[0]
    container = {"type": "MESOS", "mesos": {"image": {"type": "DOCKER",
                                                      "docker": {"name": image}}}}
    client.launch(offer, [task_info("sleeper", offer, "exec sleep 600", container=container)])
    client.wait_state("sleeper", "TASK_RUNNING")
    [found] = master_containers(engine, master)
    assert found.status == "running", found.status
    return found


def running(engine, master):
    """The names of ``master``'s containers and their states."""
    return ["%s (%s)" % (c.name, c.status) for c in master_containers(engine, master)]


@pytest.mark.docker
@pytest.mark.timeout(180, func_only=True)   # the image's build is not the test's
def test_the_containers_of_a_killed_master_go_at_once(tmp_path, docker_engine, tfmesos_image,
                                                      no_leaked_containers):
    with docker_master(tmp_path, docker_engine) as master:
        launch_container(master, docker_engine, tfmesos_image)
        master.kill()
        wait_until(lambda: not master_containers(docker_engine, master), timeout=GONE_WITHIN,
                   message=lambda: "the task's container outlived its killed master: %s"
                   % running(docker_engine, master))
        master.all_gone()


@pytest.mark.docker
@pytest.mark.timeout(180, func_only=True)
def test_a_checkpointing_frameworks_containers_go_after_the_recovery_timeout(
        tmp_path, docker_engine, tfmesos_image, no_leaked_containers):
    with docker_master(tmp_path, docker_engine, "--recovery-timeout", str(RECOVERY)) as master:
        container = launch_container(master, docker_engine, tfmesos_image, checkpoint=True)
        killed = master.kill()
        container.reload()
        assert container.status == "running", "the container went before the recovery timeout"
        gone = wait_until(lambda: not master_containers(docker_engine, master)
                          and time.monotonic(), timeout=RECOVERY + GONE_WITHIN,
                          message=lambda: "the task's container outlived the recovery "
                          "timeout: %s" % running(docker_engine, master))
        assert gone - killed >= RECOVERY, "gone %.2f s after its master, before %g s" % (
            gone - killed, RECOVERY)
        master.all_gone()


def test_a_watchdog_closed_without_waiting_is_reaped_by_the_next(tmp_path):
    # stop(detached_cleanup=True), as every tfmesos.run's embedded master
    # stops, closed its watchdog without reaping it: a zombie a run, left
    # in the caller for as long as it ran (7 after 6 runs).
    pids = []
    try:
        for _ in range(3):
            dog = watchdog.Watchdog()
            assert dog.watch(None, None, None, (), 0.5, False) is not None
            pids.append(dog.pid)
            dog.close(wait=False)
            # exited (told to), and reaped here or by the next close
            wait_until(lambda pid=dog.pid: zombie(pid) or not os.path.exists("/proc/%d" % pid),
                       timeout=GONE_WITHIN, message="the watchdog did not exit")
        left = [pid for pid in pids[:-1] if zombie(pid)]
        assert not left, "watchdogs left unreaped: %s" % left
    finally:
        for pid in pids:   # this process' children: one that did not exit is killed
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            except ChildProcessError:
                pass
