"""The task side of a run that outlives its scheduler (``tfrun --failover``,
``--detach``): a real task entry keeps its command running when its
rendezvous goes, asks the master (a fake one here) where the run's
rendezvous is now, registers with the new scheduler and tells it what the
command did meanwhile; it stops when Mesos says the run is over or no new
scheduler came in time, and without failover it stops as before. Then the
master question itself (``tfmesos.task.rediscover``) against fake masters."""

import http.server
import json
import logging
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest
from conftest import MARKER
from processes import alive
from tfrun_helpers import REPO
from thread_signals import sigterm_to_another_thread
from waiting import wait_until

from tfmesos.core.events import TaskExited, TaskOutput, TaskRegistered
from tfmesos.core.rendezvous import Rendezvous
from tfmesos.protocol import labels, task_env
from tfmesos.task import rediscover
from tfmesos.task.connection import Connection
from tfmesos.task.task_environ import TaskEnv, TaskError

SECRET = b"f" * 32
FRAMEWORK = "fw-0001"
TASK_ID = "tfmesos.failovertest.worker.0.0"
TAG = "TFMESOS_FAILOVER_TEST"   # on every process a test starts, for its cleanup

# The user's command: prints "tick PID N" at its start and whenever the
# test makes the file next-N (N = 1, 2, ...), "bye" and exits with the code
# in the file "exit" once the test makes it. It polls: the test does not.
COMMAND = r"""
import os, sys, time
n = 0
print("tick %d %d" % (os.getpid(), n), flush=True)
while True:
    if os.path.exists("next-%d" % (n + 1)):
        n += 1
        print("tick %d %d" % (os.getpid(), n), flush=True)
    elif os.path.exists("exit"):
        with open("exit") as handle:
            code = int(handle.read())
        print("bye", flush=True)
        sys.exit(code)
    else:
        time.sleep(0.02)
"""
TICK = re.compile(r"tick (\d+) (\d+)")


# -- a fake Mesos master -----------------------------------------------------


class FakeMaster:
    """``/master/frameworks`` of one framework whose label names
    ``rendezvous``; ``state`` "active", "completed" (torn down) or "unknown".
    ``reply``, when set, answers every request instead: (status, headers, body)."""

    def __init__(self):
        self.rendezvous = ""
        self.state = "active"
        self.reply = None
        self.requests = []
        master = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                master.requests.append(self.path)
                status, headers, body = (master.reply or master.frameworks)(self.path)
                try:
                    self.send_response(status)
                    for name, value in headers:
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass   # the client stopped reading (an oversized answer)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def frameworks(self, path):
        framework = {"id": FRAMEWORK, "active": True, "connected": True,
                     "labels": [{"key": labels.RUN_ID, "value": "failovertest"},
                                {"key": labels.RENDEZVOUS, "value": self.rendezvous}]}
        answer = {"frameworks": [framework] if self.state == "active" else [],
                  "completed_frameworks": [framework] if self.state == "completed" else [],
                  "unregistered_frameworks": []}
        return json_reply(answer)

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def json_reply(answer, status=200):
    body = json.dumps(answer).encode()
    return status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], \
        body


@pytest.fixture
def master():
    fake = FakeMaster()
    yield fake
    fake.close()


# -- schedulers and the task ---------------------------------------------------


class Scheduler:
    """One scheduler's rendezvous (expecting the task or not) and what it heard."""

    def __init__(self, expect=True):
        self.events = queue.Queue()
        self.rdv = Rendezvous(SECRET, self.events, bind_host="127.0.0.1")
        self.heard = []
        if expect:
            self.rdv.expect(TASK_ID)

    @property
    def address(self):
        return "127.0.0.1:%d" % self.rdv.port

    def wait_for(self, predicate, what, timeout=30):
        """Take events until ``predicate(self)`` holds."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("%s: not within %s s; heard %s" % (what, timeout, self.heard))
            try:
                self.heard.append(self.events.get(timeout=min(left, 0.5)))
            except queue.Empty:
                pass

    def of(self, kind):
        return [event for event in self.heard if isinstance(event, kind)]

    def output(self):
        return "".join(event.text for event in self.of(TaskOutput))

    def ticks(self):
        """(pid, n) of the command's tick lines that reached this scheduler."""
        return [(int(pid), int(n)) for pid, n in TICK.findall(self.output())]

    def registered(self):
        self.wait_for(lambda s: s.of(TaskRegistered), "the task registered")

    def start(self, directory):
        """The replica start message, as ClusterRun.publish_to sends it."""
        path = os.path.join(directory, "command.py")
        with open(path, "w") as handle:
            handle.write(COMMAND)
        assert self.rdv.send(TASK_ID, {
            "type": "start", "mode": "replica", "job": "worker", "index": 0,
            "cluster": {"worker": ["127.0.0.1:2222"]}, "forward_logs": True,
            "cmd": "%s %s" % (sys.executable, path), "env": {}, "hooks": {},
            "cwd": str(directory)})

    def close(self):
        self.rdv.close()


class Task:
    """``python -m tfmesos.task`` with its output in files and every
    process it started tagged, so that the test's end kills them all."""

    def __init__(self, directory, first, master, failover="20"):
        self.directory = directory
        self.tag = uuid.uuid4().hex
        env = {name: value for name, value in os.environ.items()
               if not name.startswith("TFMESOS_") or name == MARKER}
        env.update({task_env.RENDEZVOUS: first.address, task_env.SECRET: SECRET.hex(),
                    task_env.TASK_ID: TASK_ID, task_env.TASK_HOST: "127.0.0.1",
                    task_env.MASTER: master.url, task_env.FRAMEWORK_ID: FRAMEWORK,
                    "PYTHONPATH": REPO, TAG: self.tag})
        if failover is not None:
            env[task_env.FAILOVER_TIMEOUT] = failover
        self.stdout = open(directory / "task.stdout", "wb")
        self.stderr = open(directory / "task.stderr", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "tfmesos.task"], cwd=directory,
                                     env=env, stdout=self.stdout, stderr=self.stderr)

    def err(self):
        return (self.directory / "task.stderr").read_text(errors="replace")

    def out(self):
        return (self.directory / "task.stdout").read_text(errors="replace")

    def touch(self, name, text=""):
        """Make the file ``name`` whole for the command."""
        partial = self.directory / (name + ".partial")
        partial.write_text(text)
        os.replace(partial, self.directory / name)

    def ended(self, timeout=30):
        """The task entry's exit code, once it exited."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("the task entry did not exit within %s s; stderr:\n%s"
                                 % (timeout, self.err())) from None

    def kill(self):
        """Kill whatever of the task is left (the test's end)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        wait_until(lambda: not self._kill_tagged(), 30, message="the task's processes live on")
        self.stdout.close()
        self.stderr.close()

    def _kill_tagged(self):
        token = ("%s=%s" % (TAG, self.tag)).encode()
        left = [pid for pid in filter(str.isdigit, os.listdir("/proc"))
                if alive(int(pid)) and token in environ_of(pid)]
        for pid in left:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        return left


def environ_of(pid):
    try:
        with open("/proc/%s/environ" % pid, "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return []


def children(pid):
    """The child processes of ``pid`` (zombies too: until reaped)."""
    found = []
    try:
        for thread in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, thread)) as handle:
                found.extend(handle.read().split())
    except OSError:
        pass
    return found



@pytest.fixture
def cleanup():
    """Closes the schedulers and kills the tasks a test made, whatever happened."""
    things = []
    yield things.append
    for thing in reversed(things):
        if isinstance(thing, Task):
            thing.kill()
        else:
            thing.close()


def running_task(tmp_path, master, cleanup, failover="20"):
    """Scheduler A with the task registered and its command's first tick heard:
    (A, task, the command's pid)."""
    first = Scheduler()
    cleanup(first)
    master.rendezvous = first.address
    task = Task(tmp_path, first, master, failover)
    cleanup(task)
    first.registered()
    first.start(tmp_path)
    first.wait_for(lambda s: s.ticks(), "the command's first tick")
    [(pid, _)] = first.ticks()
    return first, task, pid


def takes_over(master, cleanup, expect=True):
    """Scheduler B, named by the framework's label from now on."""
    second = Scheduler(expect)
    cleanup(second)
    master.rendezvous = second.address
    return second


def test_the_command_runs_on_and_the_task_registers_with_the_new_scheduler(
        tmp_path, master, cleanup):
    first, task, pid = running_task(tmp_path, master, cleanup)
    first.close()
    wait_until(lambda: "lost the connection" in task.err(), 30, message=task.err)
    second = takes_over(master, cleanup)
    second.registered()
    second.start(tmp_path)      # a new scheduler's own start: not a second command
    task.touch("next-1")
    second.wait_for(lambda s: (pid, 1) in s.ticks(), "the command's next tick at B")
    task.touch("exit", "3")
    second.wait_for(lambda s: s.of(TaskExited), "the exit frame at B")
    assert [event.code for event in second.of(TaskExited)] == [3]
    assert task.ended() == 3
    assert second.ticks() == [(pid, 1)] and "bye" in second.output()
    assert TICK.findall(task.out()) == [(str(pid), "0"), (str(pid), "1")]   # one command
    err = task.err()
    assert err.count("lost the connection") == 1, err        # one line, not one per try
    assert err.count("registered again at %s" % second.address) == 1, err
    assert "registered again" not in err.replace("registered again at", ""), err


def test_an_exit_while_no_scheduler_is_there_reaches_the_next_one(tmp_path, master, cleanup):
    first, task, pid = running_task(tmp_path, master, cleanup)
    first.close()
    wait_until(lambda: "lost the connection" in task.err(), 30, message=task.err)
    task.touch("exit", "5")
    wait_until(lambda: "bye" in task.out(), 30, message=task.out)
    wait_until(lambda: not alive(pid), 30, message="the command did not end")
    assert task.proc.poll() is None          # the entry waits to tell someone
    second = takes_over(master, cleanup)
    second.wait_for(lambda s: s.of(TaskExited), "the exit frame at B")
    assert [event.code for event in second.of(TaskExited)] == [5]
    assert "bye" in second.output()          # the output kept meanwhile went first
    assert task.ended() == 5


def test_sigterm_ends_the_wait_to_tell_the_exit(tmp_path, master, cleanup):
    # Mesos kills the task (its framework was torn down, say): no waiting
    # for a scheduler that will not come, with 10 minutes of failover left.
    first, task, pid = running_task(tmp_path, master, cleanup, failover="600")
    first.close()
    wait_until(lambda: "lost the connection" in task.err(), 30, message=task.err)
    task.touch("exit", "5")
    wait_until(lambda: not alive(pid), 30, message="the command did not end")
    # And the entry reaped its guard: a SIGTERM before that finds the command
    # not yet ended (a stop, 143), a race a loaded CI met.
    wait_until(lambda: not children(task.proc.pid), 30, message="the guard was not reaped")
    task.proc.send_signal(signal.SIGTERM)
    assert task.ended() == 5


def test_a_new_scheduler_that_refuses_the_task_at_first_is_asked_again(
        tmp_path, master, cleanup, caplog):
    first, task, pid = running_task(tmp_path, master, cleanup)
    caplog.set_level(logging.WARNING, logger="tfmesos.core.rendezvous")
    second = takes_over(master, cleanup, expect=False)
    first.close()
    wait_until(lambda: any("unknown task id" in record.getMessage()
                           for record in caplog.records), 30,
               message="the task never asked B")
    second.rdv.expect(TASK_ID)             # B adopted it
    second.registered()
    task.touch("next-1")
    second.wait_for(lambda s: (pid, 1) in s.ticks(), "the command's next tick at B")
    assert alive(pid) and task.proc.poll() is None


def test_a_run_that_mesos_says_is_over_stops_at_once(tmp_path, master, cleanup):
    # A failover timeout of 10 minutes: stopping within 30 s is "at once".
    first, task, pid = running_task(tmp_path, master, cleanup, failover="600")
    master.state = "completed"
    first.close()
    assert task.ended() != 0
    wait_until(lambda: not alive(pid), 30, message="the command outlived the task")
    err = task.err()
    assert "torn down" in err and "stopping" in err, err


def test_a_master_that_knows_no_such_framework_yet_does_not_stop_the_run(tmp_path, master,
                                                                        cleanup):
    # A newly elected Mesos master knows a framework only once its scheduler
    # or the agents come back (its unregistered_frameworks is always empty):
    # the task took "knows no framework" for the run's end and stopped at once.
    first, task, pid = running_task(tmp_path, master, cleanup, failover="600")
    master.state = "unknown"
    asked = len(master.requests)
    first.close()
    wait_until(lambda: len(master.requests) >= asked + 3, 60,
               message="the task did not keep asking the master")
    assert task.proc.poll() is None and alive(pid), task.err()
    master.state = "completed"   # the run is over after all: at once
    assert task.ended() != 0
    wait_until(lambda: not alive(pid), 30, message="the command outlived the task")
    assert "torn down" in task.err()


@pytest.mark.waits
def test_without_a_new_scheduler_in_time_the_task_stops(tmp_path, master, cleanup):
    first, task, pid = running_task(tmp_path, master, cleanup, failover="2")
    first.close()                           # and the label still names it
    assert task.ended() != 0
    wait_until(lambda: not alive(pid), 30, message="the command outlived the task")
    err = task.err()
    assert "cannot register" in err and "giving up" in err, err
    assert err.count("lost the connection") == 1, err


@pytest.mark.parametrize("failover", ["600", None])
@pytest.mark.waits
def test_an_attempt_its_scheduler_gave_up_is_told_so_and_stops_at_once(
        tmp_path, master, cleanup, failover):
    # Mesos reported the attempt TASK_LOST (an agent cut from its master, the
    # task itself alive and reaching the scheduler): the rendezvous forgot
    # it and refused it as an unknown task id, again and again, for the
    # whole failover timeout (3600 s by default; 30 s without failover)
    # while its command ran on beside the attempt that replaced it (found by
    # a review helper). Now the scheduler tells it its attempt is over.
    first, task, pid = running_task(tmp_path, master, cleanup, failover=failover)
    first.rdv.forget(TASK_ID)               # as at Mesos' TASK_LOST
    assert task.ended(timeout=20) != 0
    wait_until(lambda: not alive(pid), 30, message="the command outlived the task")
    assert "the scheduler gave this attempt up" in task.err(), task.err()
    assert master.requests == []


@pytest.mark.parametrize("failover", [None, "", "0"])
def test_without_failover_the_task_stops_when_its_scheduler_goes(
        tmp_path, master, cleanup, failover):
    first, task, pid = running_task(tmp_path, master, cleanup, failover=failover)
    second = takes_over(master, cleanup)    # would be found, were the master asked
    first.close()
    assert task.ended() != 0
    wait_until(lambda: not alive(pid), 30, message="the command outlived the task")
    assert "is gone" in task.err(), task.err()
    assert master.requests == [] and not second.of(TaskRegistered)


# -- the environment -------------------------------------------------------------


def environment(**more):
    env = {task_env.RENDEZVOUS: "127.0.0.1:1", task_env.SECRET: "ab", task_env.TASK_ID: "t",
           task_env.TASK_HOST: "h"}
    env.update(more)
    return env


def test_the_failover_variables_are_read():
    env = TaskEnv.from_environ(environment(**{
        task_env.FAILOVER_TIMEOUT: "20.5", task_env.MASTER: "http://m:5050",
        task_env.FRAMEWORK_ID: FRAMEWORK}))
    assert (env.failover_timeout, env.master, env.framework_id) == (20.5, "http://m:5050",
                                                                    FRAMEWORK)
    plain = TaskEnv.from_environ(environment())
    assert (plain.failover_timeout, plain.master, plain.framework_id) == (0.0, "", "")


def test_a_big_job_s_tasks_ask_the_master_less_often_together():
    # Each question is a /master/frameworks read carrying the framework's
    # tasks: 1,000 tasks asking every 0.25 s were 4,000 reads a second.
    from tfmesos.task.connection import (
        FAILOVER_DELAYS,
        FAILOVER_READS_PER_SECOND,
        failover_delays,
    )
    assert failover_delays(1) == failover_delays(3) == FAILOVER_DELAYS   # 3 tasks: 60 reads a second
    for tasks in (1, 6, 7, 16, 17, 100, 320):
        first = failover_delays(tasks)[0]
        assert tasks / first <= FAILOVER_READS_PER_SECOND + 1e-9
    assert failover_delays(1000) == (FAILOVER_DELAYS[1], FAILOVER_DELAYS[1])
    env = TaskEnv.from_environ(environment(**{task_env.FAILOVER_TIMEOUT: "20",
                                              task_env.FAILOVER_TASKS: "1000"}))
    assert env.failover_tasks == 1000
    assert TaskEnv.from_environ(environment()).failover_tasks == 1


def test_the_scheduler_tells_failover_tasks_how_many_they_are():
    from tfmesos.core.spec import RunSpec
    from tfmesos.core.taskinfo import failover_environment
    spec = RunSpec(jobs=[{"name": "ps", "num": 2}, {"name": "worker", "num": 5}],
                   command="true", failover_timeout=60)
    assert failover_environment(spec, "http://m:5050", "F")[task_env.FAILOVER_TASKS] == "7"


@pytest.mark.parametrize("value", ["many", "0", "-3"])
def test_a_malformed_task_count_is_a_task_error(value):
    with pytest.raises(TaskError, match="malformed"):
        TaskEnv.from_environ(environment(**{task_env.FAILOVER_TASKS: value}))


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_a_malformed_failover_timeout_is_a_task_error(value):
    with pytest.raises(TaskError, match="malformed"):
        TaskEnv.from_environ(environment(**{task_env.FAILOVER_TIMEOUT: value}))


# -- asking the master -------------------------------------------------------------


def test_the_rendezvous_is_read_from_the_label(master):
    master.rendezvous = "10.0.0.7:4242"
    assert rediscover.Rediscovery(master.url, FRAMEWORK).rendezvous() == ("10.0.0.7", 4242)
    assert master.requests == ["/master/frameworks?framework_id=%s" % FRAMEWORK]
    master.rendezvous = "[fd00::7]:4243"
    assert rediscover.Rediscovery(master.url, FRAMEWORK).rendezvous() == ("fd00::7", 4243)


def test_a_scheme_relative_redirect_leads_to_the_leader_which_is_asked_first_then(master):
    leader = FakeMaster()
    try:
        leader.rendezvous = "10.0.0.8:4000"
        # Mesos' redirect: //host:port and the path, without the query.
        master.reply = lambda path: (307, [("Location", "//127.0.0.1:%d/master/frameworks"
                                            % leader.server.server_address[1]),
                                           ("Content-Length", "0")], b"")
        rediscovery = rediscover.Rediscovery(master.url, FRAMEWORK)
        assert rediscovery.rendezvous() == ("10.0.0.8", 4000)
        assert leader.requests == ["/master/frameworks?framework_id=%s" % FRAMEWORK]
        assert rediscovery.leader == leader.url
        assert rediscovery.rendezvous() == ("10.0.0.8", 4000)
        assert len(master.requests) == 1 and len(leader.requests) == 2
        leader.close()
        leader = None
        master.reply = None   # the leader is gone: the master given is asked again
        master.rendezvous = "10.0.0.9:4001"
        assert rediscovery.rendezvous() == ("10.0.0.9", 4001)
    finally:
        if leader is not None:
            leader.close()


def deeply_nested(path):
    return 200, [("Content-Length", "200000")], b"[" * 100000 + b"]" * 100000


def oversized(path, length=True):
    body = json.dumps({"frameworks": [], "padding": "x" * (rediscover.MAX_BODY + 10)}).encode()
    return 200, [("Content-Length", str(len(body)))] if length else [], body


@pytest.mark.parametrize("reply", [
    lambda path: (200, [("Content-Length", "9")], b"not json!"),
    lambda path: json_reply(["frameworks"]),
    lambda path: json_reply({"frameworks": "none", "completed_frameworks": []}),
    lambda path: json_reply({"frameworks": []}),
    lambda path: json_reply({"message": "no leader"}, status=503),
    lambda path: (307, [("Location", "ftp://elsewhere/x"), ("Content-Length", "0")], b""),
    lambda path: (307, [("Location", path), ("Content-Length", "0")], b""),   # a loop
    lambda path: json_reply({"frameworks": [{"id": FRAMEWORK, "labels": []}],
                             "completed_frameworks": []}),
    lambda path: json_reply({"frameworks": [{"id": FRAMEWORK, "labels": [
        {"key": labels.RENDEZVOUS, "value": "nowhere:²"}]}], "completed_frameworks": []}),
    lambda path: json_reply({"frameworks": [], "completed_frameworks": [],
                             "unregistered_frameworks": [FRAMEWORK]}),
    deeply_nested,
    oversized,
    lambda path: oversized(path, length=False),
], ids=["not-json", "a-list", "not-a-list", "not-all-of-mesos-lists", "503", "ftp-redirect", "redirect-loop",
        "no-label", "bad-label", "unregistered", "nested", "oversized",
        "oversized-without-length"])
def test_garbage_and_errors_are_no_news(master, reply):
    master.reply = reply
    assert rediscover.Rediscovery(master.url, FRAMEWORK).rendezvous() is None
    assert master.requests


def test_a_master_that_never_answers_is_no_news_within_the_timeout():
    with socket.create_server(("127.0.0.1", 0)) as silent:   # accepts, never answers
        started = time.monotonic()
        url = "http://127.0.0.1:%d" % silent.getsockname()[1]
        assert rediscover.Rediscovery(url, FRAMEWORK, timeout=0.5).rendezvous() is None
        assert time.monotonic() - started < 10
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    assert rediscover.Rediscovery("http://127.0.0.1:%d" % port, FRAMEWORK).rendezvous() is None


def test_a_framework_mesos_says_is_over_is_gone(master):
    master.rendezvous, master.state = "10.0.0.7:4242", "completed"
    with pytest.raises(rediscover.FrameworkGone, match="torn down"):
        rediscover.Rediscovery(master.url, FRAMEWORK).rendezvous()


def test_a_framework_unknown_to_the_master_is_gone_only_after_the_grace():
    now = [1000.0]
    asking = rediscover.Rediscovery("http://m:5050", FRAMEWORK, unknown_grace=600,
                                    clock=lambda: now[0])
    unknown = {"frameworks": [], "completed_frameworks": [], "unregistered_frameworks": []}
    known = {"frameworks": [{"id": FRAMEWORK, "labels": [
        {"key": labels.RENDEZVOUS, "value": "10.0.0.7:4242"}]}], "completed_frameworks": []}
    assert asking._told(unknown) is None
    now[0] += 599
    assert asking._told(unknown) is None
    assert asking._told(known) == ("10.0.0.7", 4242)   # back: the wait starts anew
    now[0] += 1
    assert asking._told(unknown) is None
    now[0] += 600
    with pytest.raises(rediscover.FrameworkGone, match="knows no framework %s for 600 s"
                       % FRAMEWORK):
        asking._told(unknown)


def test_master_urls_and_addresses():
    assert rediscover.master_url("10.0.0.1:5050") == "http://10.0.0.1:5050"
    assert rediscover.master_url("https://m:5050/") == "https://m:5050"
    assert rediscover.master_url("zk://z:2181/mesos") is None
    assert rediscover.master_url("") is None
    assert not rediscover.Rediscovery("", FRAMEWORK).usable
    assert rediscover.Rediscovery("", FRAMEWORK).rendezvous() is None
    assert rediscover.parse_address("[::1]:80") == ("::1", 80)
    assert rediscover.parse_address("h:0") is None and rediscover.parse_address("h") is None


def test_a_task_asks_for_a_new_scheduler_often_at_first_then_less_often():
    from tfmesos.task.connection import (
        FAILOVER_DELAYS,
        FAILOVER_QUICK,
        RETRY_DELAYS,
        next_delay,
    )
    waits, elapsed, delay = [], 0.0, FAILOVER_DELAYS[0]
    while elapsed < 60:
        waits.append((elapsed, delay))
        elapsed += delay
        delay = next_delay(delay, FAILOVER_DELAYS, elapsed, True)
    # A scheduler relaunched within seconds is found within a twentieth of
    # a second (not 0.5, 1, 2 s apart: the tries at 0.5, 1.5, 3.5 s; nor
    # 0.1 s apart, which left the last of two workers that late half the time).
    assert all(delay <= 0.05 for at, delay in waits if at < FAILOVER_QUICK)
    assert waits[-1][1] == FAILOVER_DELAYS[1]
    assert len(waits) <= FAILOVER_QUICK / FAILOVER_DELAYS[0] + 20   # the master's load
    # Without failover the waits double from the start, as before.
    assert next_delay(RETRY_DELAYS[0], RETRY_DELAYS, 0.0, False) == 2 * RETRY_DELAYS[0]


def test_a_sigterm_another_thread_received_ends_the_wait_to_tell_the_exit():
    # The kernel may hand a process' SIGTERM to any thread that does not
    # block it; Python runs the handler in the main thread, only once that
    # thread runs again. A main thread waiting for a new scheduler (up to
    # the failover timeout) must look at it well before then.
    conn = Connection(TaskEnv(("127.0.0.1", 1), SECRET, TASK_ID, "127.0.0.1", 0, 600.0))
    conn._state = "reconnecting"   # as after a lost connection, with 600 s to wait
    with sigterm_to_another_thread(lambda *_: conn.abandon()):
        began = time.monotonic()
        assert conn.flush(30) is False
        assert time.monotonic() - began < 10, "the handler waited for the flush to end"


@pytest.mark.parametrize("given, host", [("[::1]", "::1"), ("::1", "::1"),
                                         ("node-7.example.com", "node-7.example.com"),
                                         ("myproj_worker_1", "myproj_worker_1"),
                                         ("10.1.2.3", "10.1.2.3")])
def test_the_task_host_a_user_gives_is_taken_without_brackets(given, host):
    # -E TFMESOS_TASK_HOST=[::1] put "[[::1]]:P" into every TF_CONFIG, which
    # gRPC cannot reach: the collectives hung.
    assert TaskEnv.from_environ(environment(**{task_env.TASK_HOST: given})).host == host


@pytest.mark.parametrize("given", ["localhost:9999", "bad host", "http://h/", "[[::1]]"])
def test_a_task_host_that_is_no_host_is_a_task_error_naming_it(given):
    with pytest.raises(TaskError, match=r"^TFMESOS_TASK_HOST=%s is neither an IP address nor a "
                                        r"host name: set it to the address this task's host is "
                                        r"reached at, without a port$" % re.escape(given)):
        TaskEnv.from_environ(environment(**{task_env.TASK_HOST: given}))
