"""A failed ``tfmesos.run`` task's outcome reaches the scheduler before its
runner exits (``task/outcome_channel.py``): the runner says it wrote it on a
socket its guard kept open, the entry sends it and answers, and the
scheduler takes the failure whose outcome came whole first; an outcome
that cannot go still lets the exit frame go. The runs themselves:
tests/test_run_frameworks.py (torch) and tests/test_run_function.py (plain
sockets, as root and as nobody)."""

import base64
import contextlib
import os
import socket
import sys
import threading
import time

from tfmesos.core.result_inbox import ResultInbox
from tfmesos.exceptions import RemoteTaskError, TaskFailed
from tfmesos.protocol import task_env
from tfmesos.record.run_record import RunRecord
from tfmesos.record.schema import RunFile
from tfmesos.task import replica_guard
from tfmesos.task.outcome_channel import SENT, WRITTEN, EntryEnd, RunnerEnd
from tfmesos.task.result_file import ResultFile, write_outcome


def test_the_command_inherits_the_kept_descriptor_and_no_other():
    kept, kept_peer = socket.socketpair()        # close-on-exec here, as Python makes them
    other, other_peer = socket.socketpair()
    try:
        guard = replica_guard.start(
            "%s -c 'import os, sys; os.write(%d, b\"x\"); "
            "sys.exit(os.path.exists(\"/proc/self/fd/%d\"))'"
            % (sys.executable, kept.fileno(), other.fileno()),
            dict(os.environ), keep=(kept.fileno(),))
        assert guard.wait() == 0
        kept_peer.settimeout(10)
        assert kept_peer.recv(1) == b"x"
    finally:
        for sock in (kept, kept_peer, other, other_peer):
            sock.close()


def test_the_kept_descriptor_survives_where_proc_cannot_be_listed(monkeypatch):
    def unlisted(path):
        raise OSError("no /proc here")

    monkeypatch.setattr(os, "listdir", unlisted)   # in the guard, a fork of this process
    kept, kept_peer = socket.socketpair()
    try:
        guard = replica_guard.start("%s -c 'import os; os.write(%d, b\"x\")'"
                                    % (sys.executable, kept.fileno()),
                                    dict(os.environ), keep=(kept.fileno(),))
        assert guard.wait() == 0
        kept_peer.settimeout(10)
        assert kept_peer.recv(1) == b"x"
    finally:
        kept.close()
        kept_peer.close()


def runner_end(entry):
    """The runner's end of ``entry``, as the runner takes it (a copy of the
    descriptor: the entry closes its own)."""
    return RunnerEnd.take({task_env.OUTCOME_FD: str(os.dup(entry.keep[0]))})


def test_a_failed_runner_returns_only_once_its_outcome_went():
    sending, release, calls = threading.Event(), threading.Event(), []

    def send():
        calls.append("send")
        sending.set()
        release.wait(30)

    entry = EntryEnd().serve(send)
    announced = threading.Thread(target=runner_end(entry).announce)
    try:
        announced.start()
        assert sending.wait(30)
        announced.join(0.3)
        assert announced.is_alive()    # the outcome has not gone yet
        release.set()
        announced.join(30)
        assert not announced.is_alive() and calls == ["send"]
    finally:
        release.set()
        entry.close()


def test_a_runner_waits_for_its_entry_at_most_its_bound():
    runner, entry = socket.socketpair()
    try:
        started = time.monotonic()
        RunnerEnd(os.dup(runner.fileno())).announce(wait=0.2)   # no one answers
        assert time.monotonic() - started < 10
        entry.settimeout(10)
        assert entry.recv(1) == WRITTEN
    finally:
        runner.close()
        entry.close()


def test_a_runner_whose_channel_fn_filled_waits_at_most_its_bound():
    runner, entry = socket.socketpair()
    try:
        runner.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:
                runner.send(b"x" * 65536)   # what fn wrote there, never read
        runner.setblocking(True)
        started = time.monotonic()
        RunnerEnd(os.dup(runner.fileno())).announce(wait=0.2)
        assert time.monotonic() - started < 10
    finally:
        runner.close()
        entry.close()


def test_a_runner_whose_descriptor_fn_closed_leaves_what_holds_that_number_now(tmp_path):
    runner, entry = socket.socketpair()
    fd = os.dup(runner.fileno())
    end = RunnerEnd(fd)
    os.close(fd)   # fn's os.closerange, then a file of its own gets the number
    mine = os.open(tmp_path / "log", os.O_RDWR | os.O_CREAT, 0o600)
    if mine != fd:
        os.dup2(mine, fd)
        os.close(mine)
    try:
        end.announce(wait=0.2)
        assert (tmp_path / "log").read_bytes() == b""
        os.fstat(fd)   # still open: fn's file
    finally:
        os.close(fd)
        runner.close()
        entry.close()


def test_without_a_channel_a_runner_announces_nothing_and_waits_for_nothing(tmp_path):
    regular = os.open(str(tmp_path / "file"), os.O_CREAT | os.O_WRONLY)
    try:
        for environ in ({}, {task_env.OUTCOME_FD: "x"}, {task_env.OUTCOME_FD: "9999"},
                        {task_env.OUTCOME_FD: str(regular)}):
            started = time.monotonic()
            RunnerEnd.take(environ).announce(wait=60)   # returns at once
            assert time.monotonic() - started < 30
            assert task_env.OUTCOME_FD not in environ   # none for what fn starts either
        assert os.fstat(regular).st_size == 0
    finally:
        os.close(regular)


def test_an_entry_answers_after_sending_and_ends_quietly_without_a_word():
    entry = EntryEnd().serve(lambda: None)
    runner = socket.socket(fileno=os.dup(entry.keep[0]))
    try:
        runner.settimeout(10)
        runner.sendall(WRITTEN)
        assert runner.recv(1) == SENT
    finally:
        runner.close()
        entry.close()
    sent = []
    silent = EntryEnd().serve(lambda: sent.append("sent"))
    started = time.monotonic()
    silent.close()    # the command ended without a word: nothing sent, no hang
    assert sent == [] and time.monotonic() - started < 10


class Frames:
    """A connection as ``ResultFile`` uses it without receipts."""

    generation = 0

    def __init__(self):
        self.sent = []

    def flush(self):
        return True   # always registered: Connection.flush returns at once

    def send(self, message):
        self.sent.append(message["type"])


def test_an_outcome_sent_early_is_not_sent_again_at_the_commands_end(tmp_path):
    directory = tmp_path / "result"
    directory.mkdir()
    result, conn = ResultFile(str(directory), 1 << 20), Frames()
    result.send_written(conn)          # a word before the file is written: nothing yet
    assert conn.sent == []
    write_outcome(result.path, {"status": "error", "error": "raised ValueError: x"}, b"pickle")
    result.send_written(conn)
    result.send(conn)
    assert conn.sent == ["result", "result_data"]
    assert not directory.exists()


def whole(inbox, task_id, status):
    inbox.feed(task_id, {"type": "result", "status": status, "error": "", "traceback": "",
                         "size": 0})


def test_the_first_failure_is_the_failed_outcome_that_came_whole_first():
    inbox = ResultInbox()
    whole(inbox, "ok", "ok")
    inbox.feed("partial", {"type": "result", "status": "error", "size": 4})
    whole(inbox, "cause", "error")
    whole(inbox, "peer", "error")
    assert inbox.first_failure(["peer", "partial", "ok", "cause", "absent"]).task_id == "cause"
    assert inbox.first_failure(["peer", "ok"]).task_id == "peer"
    assert inbox.first_failure(["ok", "partial"]) is None
    whole(inbox, "cause", "error")    # a copy sent again keeps its place
    assert inbox.first_failure(["peer", "cause"]).task_id == "cause"


def test_a_silent_tasks_cause_is_a_failed_outcome_that_came_before_its_exit_frame():
    inbox = ResultInbox()
    inbox.exited("killed")            # SIGKILLed: its exit frame came first
    whole(inbox, "cause", "error")
    inbox.exited("aborted")           # no outcome of its own: SIGABRT
    whole(inbox, "peer", "error")     # came after: no cause of that exit
    tasks = ["killed", "aborted", "peer", "cause"]
    assert inbox.first_failure(tasks, before="aborted").task_id == "cause"
    assert inbox.first_failure(tasks, before="killed") is None
    assert inbox.first_failure(tasks, before="not-ended") is None   # no exit frame: no order
    assert inbox.first_failure(tasks).task_id == "cause"


def test_broken_results_hold_no_bytes_so_the_total_bound_holds():
    # Counted against ``total`` are the results not broken: a broken one
    # kept its bytes, 10 of them 75 MiB under a 16 MiB bound.
    chunk = base64.b64encode(b"x" * 1024).decode()
    inbox = ResultInbox(limit=8 << 10, total=16 << 10)
    for task in range(10):
        inbox.feed(task, {"type": "result", "status": "ok", "size": 8 << 10})
        for index in range(7):
            inbox.feed(task, {"type": "result_data", "offset": index << 10, "data": chunk})
        inbox.feed(task, {"type": "result_data", "offset": 0, "data": chunk})   # out of order
    inbox.feed("ended", {"type": "result", "status": "ok", "size": 4 << 10})
    inbox.feed("ended", {"type": "result_data", "offset": 0, "data": chunk})
    inbox.exited("ended")
    held = [inbox.wait(task, 0) for task in [*range(10), "ended"]]
    assert all(result.broken for result in held)
    assert sum(len(result.data) for result in held) == 0


def test_the_cause_replaces_a_peers_failure_in_the_record_but_nothing_else():
    record = RunRecord(None, RunFile(mode="fine"), [], forwarding=False)
    record.ended(TaskFailed("task worker:0 exited with code 1", "worker:0", None, 1), "running")
    record.caused_by(RemoteTaskError("worker:1 raised RuntimeError: x", "worker:1", None, None),
                     "running")
    outcome = record.recorded_outcome()
    assert (outcome.status, outcome.task) == ("failed", "worker:1")
    assert outcome.message.startswith("worker:1 raised RuntimeError")

    interrupted = RunRecord(None, RunFile(mode="fine"), [], forwarding=False)
    interrupted.ended(KeyboardInterrupt(), "running")
    interrupted.caused_by(RemoteTaskError("worker:1 raised", "worker:1", None, None), "running")
    assert interrupted.recorded_outcome().status == "interrupted"


class FullDisk:
    def write(self, text):
        raise OSError(28, "No space left on device")

    def flush(self):
        raise OSError(28, "No space left on device")


class Broken(Frames):
    def send(self, message):
        raise RuntimeError("the connection's bug")


def test_an_outcome_that_cannot_go_nor_be_said_on_a_full_disk_lets_the_exit_frame_go(
        tmp_path, monkeypatch):
    directory = tmp_path / "result"
    directory.mkdir()
    result = ResultFile(str(directory), 1 << 20)
    write_outcome(result.path, {"status": "ok"}, b"pickle")
    monkeypatch.setattr(sys, "stderr", FullDisk())
    result.send(Broken())      # raises nothing: the exit frame follows
    assert not directory.exists()
