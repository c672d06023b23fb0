"""A replica task that the scheduler stops (the run ends, or restarts) ends
cleanly: exit 0, so Mesos reports TASK_FINISHED, not its killed command's
code as TASK_FAILED (d368baf)."""

import os
import queue
import signal
import threading

import pytest
from processes import alive
from waiting import wait_until

from tfmesos.task import replica


class StoppingConnection:
    """The scheduler's side: says stop once the command printed 'started'."""

    def __init__(self):
        self.sent = []
        self._incoming = queue.Queue()

    def send(self, message):
        self.sent.append(message)
        if message["type"] == "log" and "started" in message["data"]:
            self._incoming.put({"type": "stop"})

    def receive(self):
        try:
            return self._incoming.get(timeout=60)
        except queue.Empty:   # as the real connection says its scheduler is gone
            raise ConnectionError("the test's scheduler said nothing for 60 s") from None


def run_to_the_end(start):
    saved = signal.getsignal(signal.SIGTERM)
    try:
        conn = StoppingConnection()
        code = replica.run_replica(conn, start)
    finally:
        signal.signal(signal.SIGTERM, saved)
    return code, conn.sent


def test_a_stop_the_scheduler_asked_for_exits_0():
    code, sent = run_to_the_end({"cmd": "echo started; exec sleep 60", "forward_logs": True,
                                 "env": {}})
    assert code == 0
    assert (sent[-1]["type"], sent[-1]["code"], sent[-1]["stopped"]) == ("exit", 0, True)
    usage = sent[-1]["usage"]                  # what the command used goes along
    assert usage["wall_s"] >= 0 and usage["peak_rss_mb"] > 0   # the stop can come within 5 ms


def test_a_command_that_fails_by_itself_keeps_its_code():
    code, sent = run_to_the_end({"cmd": "exit 3", "forward_logs": True, "env": {}})
    assert code == 3 and (sent[-1]["type"], sent[-1]["code"]) == ("exit", 3)
    assert sent[-1]["stopped"] is False


class StopOnceFinalizing(StoppingConnection):
    """Says stop once the finalizer runs: after the command ended by itself."""

    def __init__(self, marker):
        super().__init__()
        self.marker = marker

    def receive(self):
        wait_until(lambda: os.path.exists(self.marker), 60, interval=0.05)
        self._incoming.put({"type": "stop"})
        return super().receive()


def test_a_stop_after_the_command_ended_by_itself_changes_nothing(tmp_path):
    """The exit message says whether the stop cut the command short: the
    run's record ends a task it stopped as TASK_KILLED, not one that was done."""
    marker = str(tmp_path / "finalizing")
    saved = signal.getsignal(signal.SIGTERM)
    try:
        conn = StopOnceFinalizing(marker)
        code = replica.run_replica(conn, {"cmd": "exit 3", "env": {}, "hooks": {
            "finalizer": "touch %s; exec sleep 60" % marker}})
    finally:
        signal.signal(signal.SIGTERM, saved)
    assert code == 3 and (conn.sent[-1]["code"], conn.sent[-1]["stopped"]) == (3, False)



class Faulty:
    """A ``quiet.NoiseFilter`` with a fault of the task's own."""

    def __init__(self, *args):
        pass

    def feed(self, data):
        raise RuntimeError("a fault of the task's")


def test_a_fault_in_a_pump_stops_the_command_and_says_why(monkeypatch):
    # The pump thread ended with the exception, silently: no one read the
    # command's stderr any more, and the command blocked in its next write
    # (until the test's scheduler went away, 60 s later).
    monkeypatch.setattr(replica, "NoiseFilter", Faulty)
    code, sent = run_to_the_end({"cmd": "yes line >&2", "forward_logs": True, "env": {}})
    said = [m["data"] for m in sent if m["type"] == "log" and m["stream"] == "stderr"]
    assert said == ["tfmesos: cannot pass on the command's stderr (RuntimeError: a fault of the "
                    "task's); stopping it\n"]
    assert code == 128 + signal.SIGTERM
    assert (sent[-1]["type"], sent[-1]["code"], sent[-1]["stopped"]) == ("exit", code, False)


def readlink(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


def test_a_process_that_escaped_the_group_with_the_output_neither_holds_the_task_nor_loses_any(
        tmp_path):
    # The task waited for the end of the command's output, 10 s a stream:
    # a process in a session of its own (setsid) holds the pipes past the
    # group's end. Now the pumps stop once they read what is in the pipes,
    # and what the command printed up to its exit is all there.
    escaped = tmp_path / "escaped"
    cmd = "setsid sleep 611 & echo $! > %s; yes line | head -n 200000; echo done" % escaped
    pid = None
    try:
        code, sent = run_to_the_end({"cmd": cmd, "forward_logs": True, "env": {}})
        pid = int(escaped.read_text())
        held = {os.readlink("/proc/%d/fd/%d" % (pid, fd)) for fd in (1, 2)}
        assert all(pipe.startswith("pipe:") for pipe in held), held   # it holds them still
        reading = [fd for fd in os.listdir("/proc/self/fd")
                   if readlink("/proc/self/fd/" + fd) in held]
        assert not reading, "the task still reads the escaped process' output (fds %s)" % reading
        assert code == 0 and sent[-1]["type"] == "exit"
        out = "".join(m["data"] for m in sent if m["type"] == "log" and m["stream"] == "stdout")
        assert out == "line\n" * 200000 + "done\n", (len(out), out[-100:])
    finally:
        if pid is None and escaped.exists():
            pid = int(escaped.read_text())
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not alive(pid))


class HeldConnection(StoppingConnection):
    """Holds the first log message (``held`` then exists) until ``release``."""

    def __init__(self, held):
        super().__init__()
        self.held, self.release = held, threading.Event()

    def send(self, message):
        if message["type"] == "log" and not self.release.is_set():
            open(self.held, "w").close()
            self.release.wait(60)
        super().send(message)


def test_pumps_told_to_stop_first_read_what_the_pipes_hold(tmp_path, monkeypatch):
    # The pump is held in its first send while the command writes the rest
    # and exits; it is told to stop at once: what the pipe holds still goes.
    held = str(tmp_path / "held")
    conn = HeldConnection(held)
    join = replica._join

    def told_to_stop(threads, seconds):
        if seconds == replica.PUMP_WAIT:   # the pumps were told to stop
            conn.release.set()
        return join(threads, seconds)

    monkeypatch.setattr(replica, "DRAIN_TIME", 0)
    monkeypatch.setattr(replica, "_join", told_to_stop)
    cmd = "echo first; while [ ! -e %s ]; do sleep 0.01; done; seq 2000; echo done" % held
    saved = signal.getsignal(signal.SIGTERM)
    try:
        code = replica.run_replica(conn, {"cmd": cmd, "forward_logs": True, "env": {}})
    finally:
        signal.signal(signal.SIGTERM, saved)
        conn.release.set()
    out = "".join(m["data"] for m in conn.sent if m["type"] == "log" and m["stream"] == "stdout")
    assert code == 0 and out == "first\n" + "".join("%d\n" % n for n in range(1, 2001)) + "done\n"
