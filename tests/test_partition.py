"""A task cut off from tfrun by the network: tfrun runs in the hub of
``tfmesos local-master --netns``, and the test takes the link of worker:1's
agent down (the hub's end of its veth), as a network partition would: TCP
goes silent, nothing is closed.

A short cut is survived. A cut longer than the reconnection grace period is
named for what it is, ``worker:1 unreachable``, about the grace period after
worker:1 was last heard (the rendezvous pings every 10 s and counts a
connection silent for 25 s as stalled; the grace is 40 s), rather than
90 s later as the task's own exit code; and it is a loss, which
``--restart-on lost`` restarts.

The real ping interval and grace apply (tfrun has no options for them):
each test takes about a minute. Root only.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest
from conftest import marked_processes
from fixtures_netns import namespaces, netns_master, root_only
from tfrun_helpers import REPO, tfrun_argv

from tfmesos.core.rendezvous import STALL_PINGS
from tfmesos.core.spec import RECONNECT_GRACE

pytestmark = [root_only, pytest.mark.timeout(360), pytest.mark.waits]

AGENT = "cpus=1,mem=256,gpus=0"   # one worker per agent
GRACE = RECONNECT_GRACE           # 40 s
STALL = STALL_PINGS * 10.0        # the rendezvous' stall timeout: 2.5 pings of 10 s
SLACK = 30.0                      # a loaded machine's delays, on top of the bound
# Prints a line a second for argv[1] seconds (argv[2] once the cluster was restarted).
TICKER = """
import os, sys, time
seconds = int(sys.argv[1] if os.environ.get("TFMESOS_RESTART", "0") == "0" else sys.argv[2])
for n in range(seconds):
    print("tick %d" % n, flush=True)
    time.sleep(1)
"""


class Output:
    """Reads a process's stdout and stderr in threads, each line with the
    moment it came; ``wait_for`` a line."""

    def __init__(self, process):
        self.lines = {"stdout": [], "stderr": []}
        self._changed = threading.Condition()
        self._threads = [threading.Thread(target=self._read, args=(name, stream), daemon=True)
                         for name, stream in (("stdout", process.stdout),
                                              ("stderr", process.stderr))]
        for thread in self._threads:
            thread.start()

    def _read(self, name, stream):
        for line in iter(stream.readline, ""):
            with self._changed:
                self.lines[name].append((time.monotonic(), line))
                self._changed.notify_all()

    def wait_for(self, name, pattern, timeout):
        """(when, match) of the first line of ``name`` matching ``pattern``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for when, line in self.lines[name]:
                    match = re.search(pattern, line)
                    if match:
                        return when, match
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("%r not seen on %s within %.0f s; stderr:\n%s"
                                         % (pattern, name, timeout, self.text("stderr")))
                self._changed.wait(left)

    def text(self, name):
        with self._changed:
            return "".join(line for _, line in self.lines[name])

    def join(self, timeout=10):
        """Wait for the ends of both streams (the process ended)."""
        for thread in self._threads:
            thread.join(timeout)


def start_run(master, tmp_path, seconds, *options):
    """tfrun with 2 workers running the ticker, in the hub; (process, output)."""
    ticker = tmp_path / "ticker.py"
    ticker.write_text(TICKER)
    argv = tfrun_argv("-m", master.address, "-w", "2", "-s", "0", "-Cw", "1", "-Mw", "128",
                      *options, "--", "%s %s %s 5" % (sys.executable, ticker, seconds))
    process = subprocess.Popen(["ip", "netns", "exec", master.hub] + argv, cwd=REPO,
                               env=dict(os.environ, MESOS_MASTER=""), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return process, Output(process)


def cut_worker_1(master, output):
    """Take worker:1's agent link down once worker:1 runs; (link, when)."""
    _, ready = output.wait_for("stderr", r"^tfrun: cluster ready: (.*)$", timeout=120)
    host = json.loads(ready.group(1))["worker"][1].rsplit(":", 1)[0]
    output.wait_for("stdout", r"^\[worker:1\] tick", timeout=60)
    link = master.agent_link(host)
    master.set_link(link, "down")
    return link, time.monotonic()


def finished(process, timeout):
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        pytest.fail("tfrun did not finish within %.0f s" % timeout)


def stop(process, output):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    output.join()


def assert_nothing_left():
    """No process of the run (tfrun, the master, tasks, their commands) is
    left; the suite's own services (a session's ZooKeeper) are not the run's."""
    def left():
        return [p for p in marked_processes() if "zookeeper" not in p[1]]
    deadline = time.monotonic() + 30
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left(), "processes left: %s" % left()


def test_a_short_cut_is_survived(tmp_path, namespaces):
    with netns_master(namespaces, tmp_path / "master.log", [AGENT] * 2) as master:
        process, output = start_run(master, tmp_path, 40)
        try:
            link, _ = cut_worker_1(master, output)
            time.sleep(10)   # the partition itself, not a wait for something
            master.set_link(link, "up")
            assert finished(process, 120) == 0, output.text("stderr")
        finally:
            stop(process, output)
        # What worker:1 printed during and after the cut reached tfrun.
        ticks = re.findall(r"^\[worker:1\] tick (\d+)$", output.text("stdout"), re.M)
        assert [int(n) for n in ticks] == list(range(40)), output.text("stdout")
        assert "unreachable" not in output.text("stderr")
    assert_nothing_left()


@pytest.mark.parametrize("restart", [False, True], ids=["fails", "restarts"])
def test_a_long_cut_is_named_unreachable_within_the_grace_period(tmp_path, namespaces,
                                                                 restart):
    options = ["--max-restarts", "1", "--restart-on", "lost"] if restart else []
    with netns_master(namespaces, tmp_path / "master.log", [AGENT] * 2) as master:
        process, output = start_run(master, tmp_path, 150, *options)
        try:
            link, cut = cut_worker_1(master, output)
            unreachable = (r"worker:1 unreachable for %.0f s \(its rendezvous connection "
                           r"stalled\)" % GRACE)
            expected = ("^tfrun: %s; restarting the cluster" % unreachable if restart else
                        "^tfrun: task %s$" % unreachable)
            failed, _ = output.wait_for("stderr", expected, timeout=GRACE + 10 + SLACK + 30)
            print("from the cut to the failure: %.1f s" % (failed - cut))
            # worker:1 was last heard right before the cut (it prints every second, and
            # answers pings): the grace runs from then, the stall shows within a ping.
            assert STALL < failed - cut < GRACE + 10 + SLACK
            master.set_link(link, "up")   # the partition heals
            if restart:
                output.wait_for("stderr", r"^tfrun: cluster ready \(restart 1\)", timeout=120)
                assert finished(process, 120) == 0, output.text("stderr")
            else:
                assert finished(process, 60) == 1, output.text("stderr")
        finally:
            stop(process, output)
        assert "exited with code" not in output.text("stderr")
    assert_nothing_left()
