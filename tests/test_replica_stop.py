"""A replica task that the scheduler stops (the run ends, or restarts) ends
cleanly: exit 0, so Mesos reports TASK_FINISHED, not its killed command's
code as TASK_FAILED (d368baf)."""

import os
import queue
import signal
import threading

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
