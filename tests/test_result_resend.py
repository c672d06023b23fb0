"""A rendezvous connection that drops while a task sends its function's
result: the frames the kernel took before the drop are lost, the task
registers again and sends the result again from its header, and the
scheduler's inbox takes the new copy whole (a result broken by the lost
frames is final only once the task's exit frame came)."""

import os
import pickle
import threading
from types import SimpleNamespace

import pytest

from tfmesos.core import function_results
from tfmesos.core.jobs import Job
from tfmesos.core.result_inbox import ResultInbox
from tfmesos.core.slots import SlotTable
from tfmesos.exceptions import ClusterError
from tfmesos.task.result_file import CHUNK, ResultFile, write_outcome


class DroppingConnection:
    """``task.connection.Connection``'s ``send`` as the inbox sees it: a
    frame waits in the kernel (``queued`` of them) before it reaches the
    scheduler; at the ``drop_at``-th frame the connection drops, the frames
    in the kernel are lost and that frame goes on the next connection
    (``generation``: how many times it was lost)."""

    def __init__(self, inbox, task_id, drop_at, queued=3):
        self.inbox, self.task_id = inbox, task_id
        self.drop_at, self.queued = drop_at, queued
        self.generation = 0
        self.kernel = []
        self.sent = 0

    def flush(self):
        return True   # always registered: Connection.flush returns at once

    def send(self, message):
        self.sent += 1
        if self.sent == self.drop_at:
            self.kernel.clear()
            self.generation += 1
        self.kernel.append(message)
        while len(self.kernel) > self.queued:
            self.inbox.feed(self.task_id, self.kernel.pop(0))

    def exit(self):
        for message in self.kernel:
            self.inbox.feed(self.task_id, message)
        self.kernel.clear()
        self.inbox.exited(self.task_id)


def outcome(tmp_path, value):
    directory = tmp_path / "result"
    directory.mkdir()
    result = ResultFile(str(directory), 64 << 20)
    write_outcome(result.path, {"status": "ok", "error": "", "traceback": ""},
                  pickle.dumps(value))
    return result


def test_a_result_whose_frames_a_drop_lost_is_sent_again_whole(tmp_path):
    value = os.urandom(10 * CHUNK + 123)
    inbox = ResultInbox()
    conn = DroppingConnection(inbox, "t1", drop_at=6)
    outcome(tmp_path, value).send(conn)
    conn.exit()
    result = inbox.wait("t1", 0)
    assert result.broken is None and result.complete
    assert pickle.loads(bytes(result.data)) == value
    assert not (tmp_path / "result").exists()


def test_a_broken_result_is_final_only_once_its_task_exited():
    inbox = ResultInbox()
    inbox.feed("t1", {"type": "result", "status": "ok", "size": 4})
    inbox.feed("t1", {"type": "result_data", "offset": 2, "data": "bmU="})   # its start lost
    got = []
    waiter = threading.Thread(target=lambda: got.append(inbox.wait("t1", 60)))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive(), "returned the broken result: %r" % (got[0].broken,)
    inbox.feed("t1", {"type": "result", "status": "ok", "size": 4})   # sent again
    inbox.feed("t1", {"type": "result_data", "offset": 0, "data": "bm9uZQ=="})   # b"none"
    inbox.exited("t1")
    waiter.join()
    assert got[0].complete and bytes(got[0].data) == b"none"


def test_a_result_a_drop_broke_for_good_names_the_connection():
    inbox = ResultInbox()
    inbox.feed("t1", {"type": "result", "status": "ok", "size": 4})
    inbox.dropped("t1")
    inbox.feed("t1", {"type": "result_data", "offset": 2, "data": "bmU="})
    inbox.exited("t1")
    assert "connection" in inbox.wait("t1", 0).broken
    inbox.dropped("t2")
    inbox.feed("t2", {"type": "result_data", "offset": 2, "data": "bmU="})
    inbox.exited("t2")
    assert "connection" in inbox.wait("t2", 0).broken
    inbox = ResultInbox(limit=1000)
    inbox.feed("t3", {"type": "result", "status": "ok", "size": 2000})
    inbox.dropped("t3")
    inbox.feed("t3", {"type": "result_data", "offset": 0, "data": "bmU="})
    inbox.exited("t3")
    assert inbox.wait("t3", 0).broken == "it announced 2000 bytes, over the 1000 byte bound"


class ReceiptConnection(DroppingConnection):
    """A ``DroppingConnection`` whose scheduler answers a whole result
    (``Connection.expect_receipt``, ``wait_receipt``), and that drops once,
    losing the frames in the kernel, after the ``drop_after``-th frame went,
    before any was read: the task notices only as it waits for the answer."""

    def __init__(self, inbox, task_id, drop_after, queued=3):
        super().__init__(inbox, task_id, drop_at=0, queued=queued)
        self.drop_after = drop_after
        self.received = False

    def send(self, message):
        super().send(message)
        if self.sent == self.drop_after:
            self.kernel.clear()
            self.generation += 1

    def expect_receipt(self):
        self.received = False
        return self.generation

    def wait_receipt(self, generation, timeout):
        for message in self.kernel:   # what reaches the scheduler; its answer comes back
            self.received = self.inbox.feed(self.task_id, message) or self.received
        self.kernel.clear()
        return self.received


def test_a_result_a_drop_lost_after_its_last_frame_went_is_sent_again(tmp_path):
    value = os.urandom(2 * CHUNK + 5)
    inbox = ResultInbox()
    conn = ReceiptConnection(inbox, "t1", drop_after=4)   # the header and its 3 data frames
    outcome(tmp_path, value).send(conn, receipt=True)
    conn.exit()
    result = inbox.wait("t1", 0)
    assert result.broken is None and result.complete, result.broken
    assert pickle.loads(bytes(result.data)) == value
    assert conn.sent == 8   # sent twice, and once only: the scheduler said it had the second


class RegisteringConnection(ReceiptConnection):
    """A ``ReceiptConnection`` that is registering again after each drop
    until ``flush`` (``Connection.flush``: it waits for the registration);
    a frame sent meanwhile is one ``Connection.send`` keeps in memory."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.registered, self.kept = True, 0

    def send(self, message):
        self.kept += not self.registered
        generation = self.generation
        super().send(message)
        self.registered = self.registered and self.generation == generation

    def wait_receipt(self, generation, timeout):
        received = super().wait_receipt(generation, timeout)
        self.registered = self.registered and self.generation == generation
        return received

    def flush(self):
        self.registered = True
        return True


def test_a_copy_sent_again_waits_for_the_registration_not_in_memory(tmp_path):
    # Kept while reconnecting, a second copy of a big result was held in
    # memory whole (80 frames, 58 MB with the 40 MB result, over a 128 MB task).
    value = os.urandom(2 * CHUNK + 5)
    inbox = ResultInbox()
    conn = RegisteringConnection(inbox, "t1", drop_after=4)
    outcome(tmp_path, value).send(conn, receipt=True)
    conn.exit()
    assert inbox.wait("t1", 0).complete and conn.sent == 8
    assert conn.kept == 0


def test_the_inbox_answers_a_whole_result_and_keeps_it_through_a_copy_sent_again():
    inbox = ResultInbox()
    assert inbox.feed("t1", {"type": "result", "status": "ok", "size": 4}) is False
    assert inbox.feed("t1", {"type": "result_data", "offset": 0, "data": "bm9uZQ=="}) is True
    # A copy sent again (its answer lost with a connection): answered, not kept.
    assert inbox.feed("t1", {"type": "result", "status": "ok", "size": 4}) is True
    assert inbox.feed("t1", {"type": "result_data", "offset": 0, "data": "bm9u"}) is False
    inbox.exited("t1")
    result = inbox.wait("t1", 0)
    assert result.complete and bytes(result.data) == b"none"
    assert inbox.feed("t2", {"type": "result", "status": "error", "error": "raised X",
                             "size": 0}) is True   # whole at its header


def test_the_inbox_answers_a_result_it_refused_so_that_its_task_sends_no_more():
    # A result the scheduler will never keep (over its bound, malformed) is
    # final: unanswered, its task waited RECEIPT_WAIT (60 s) before its exit
    # frame, and the run's error with it.
    inbox = ResultInbox(limit=8, total=12)
    assert inbox.feed("big", {"type": "result", "status": "ok", "size": 9}) is True
    assert inbox.feed("t1", {"type": "result", "status": "ok", "size": 8}) is False
    assert inbox.feed("t2", {"type": "result", "status": "ok", "size": 8}) is True  # total
    assert inbox.feed("bad", {"type": "result", "status": "?", "size": 1}) is True
    # Data out of order may be a drop's doing, told later: the task may send
    # its copy again.
    assert inbox.feed("t1", {"type": "result_data", "offset": 3, "data": "bm9u"}) is False


def test_a_value_that_did_not_come_whole_in_time_says_so(monkeypatch):
    # Its frames lost and its task gone without its exit frame: the wait
    # ended at RESULT_WAIT, and the part that came was unpickled ("does not
    # unpickle here: EOFError: Ran out of input").
    inbox = ResultInbox()
    inbox.feed("t1", {"type": "result", "status": "ok", "size": 4})
    slots = SlotTable([Job("worker", num=1)])
    [slot] = list(slots)
    slot.task_id = "t1"
    monkeypatch.setattr(function_results, "RESULT_WAIT", 0.0)
    run = SimpleNamespace(slots=slots, rendezvous=SimpleNamespace(results=inbox))
    with pytest.raises(ClusterError) as caught:
        function_results.returned_value(run)
    assert str(caught.value) == \
        "worker:0's result did not come whole within 0 s after it ended (0 of its 4 bytes came)"
