import logging
import socket
import struct
import time

import pytest
from rendezvous_client import SECRET, Client, make_rendezvous, next_event, refused
from waiting import wait_until

from tfmesos.core.events import TaskDisconnected, TaskExited, TaskOutput, TaskRegistered
from tfmesos.core.rendezvous_refusals import FIRST_REFUSALS, RefusalLog
from tfmesos.protocol import wire


@pytest.fixture
def rdv():
    server = make_rendezvous()
    server.expect("good")
    yield server
    server.close()


def register(rdv, task_id="good", secret=SECRET, port=2222):
    client = Client(rdv.port, secret, forged=secret != SECRET)
    client.register(task_id, port=port)
    return client


def test_good_registration_start_logs_and_exit(rdv):
    client = register(rdv).registered()
    assert next_event(rdv, TaskRegistered) == TaskRegistered("good", "h", 2222)
    assert rdv.send("good", {"type": "start", "job": "worker"})
    assert client.receive_not_ping() == {"type": "start", "job": "worker"}
    client.send({"type": "log", "stream": "stdout", "data": "hi\n"})
    client.send({"type": "exit", "code": 3})
    assert next_event(rdv, TaskOutput) == TaskOutput("good", "stdout", "hi\n")
    assert next_event(rdv, TaskExited) == TaskExited("good", 3)
    client.close()
    assert next_event(rdv, TaskDisconnected) == TaskDisconnected("good")


def _bad_mac(rdv):
    return register(rdv, secret=b"x" * 32).sock


def _unknown_id(rdv):
    return register(rdv, task_id="stranger").sock


def _oversized(rdv):
    sock = socket.create_connection(("127.0.0.1", rdv.port), timeout=5)
    sock.sendall(struct.pack("!I", wire.MAX_FRAME + 1) + b"x" * 100)
    return sock


def _over_the_registration_limit(rdv):
    sock = socket.create_connection(("127.0.0.1", rdv.port), timeout=5)
    sock.sendall(struct.pack("!I", wire.SMALL_FRAME + 1) + b"x" * 100)
    return sock


def _garbage(rdv):
    sock = socket.create_connection(("127.0.0.1", rdv.port), timeout=5)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    return sock


def _silent(rdv):
    return socket.create_connection(("127.0.0.1", rdv.port), timeout=5)


def _malformed(rdv):
    client = Client(rdv.port)
    client.challenge()
    client.send({"type": "register", "task_id": "good", "host": "h", "port": "22"})
    return client.sock


def _pickle(rdv):
    client = Client(rdv.port)
    channel = client.challenge()
    body = b"\x80\x04\x95" + b"\x00" * 40
    context = wire.Context(wire.TO_SCHEDULER, channel.nonce, 0)
    client.sock.sendall(struct.pack("!I", len(body) + 32) + wire.mac(SECRET, context, body) + body)
    return client.sock


@pytest.mark.parametrize("attack", [_bad_mac, _unknown_id, _oversized, _over_the_registration_limit,
                                    _garbage, _silent, _malformed, _pickle])
def test_bad_clients_are_refused_and_a_good_task_still_registers(rdv, attack):
    bad = attack(rdv)
    good = register(rdv).registered()
    assert next_event(rdv, TaskRegistered).task_id == "good"
    assert refused(bad)
    bad.close()
    good.close()


REFUSED = "refused a rendezvous connection from"


def test_a_flood_of_refused_connections_is_a_few_lines_not_one_each(rdv, caplog):
    # A local user without the key opened 2000 connections in 14 s: 2000
    # lines in the run's output.
    for _ in range(12):
        bad = _bad_mac(rdv)
        assert refused(bad)
        bad.close()
    good = register(rdv).registered()
    assert next_event(rdv, TaskRegistered).task_id == "good"
    said = [r.getMessage() for r in caplog.records if REFUSED in r.getMessage()]
    assert len(said) == FIRST_REFUSALS, said
    assert said[-1].endswith("(more are counted, said at most once in 60 s)")
    good.close()


def test_connections_dropped_for_room_are_refusals_said_as_few_lines(caplog):
    # Each connection held open past max_pending_per_peer dropped the
    # oldest with a line of its own, and the dropped one's refusal another.
    # No registration timeout within the test: on a loaded machine one
    # second passed before the 12 connections were made, and the first
    # refusal was a timeout, not a drop.
    server = make_rendezvous(max_pending_per_peer=2, register_timeout=60.0)
    try:
        held = [_silent(server) for _ in range(12)]
        for sock in held[:10]:
            assert refused(sock)

        # Said before each close (a client that saw it closed finds it said).
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(said) == FIRST_REFUSALS, said
        assert said[0] == "%s 127.0.0.1: dropped as the oldest of too many unregistered " \
            "connections" % REFUSED
        for sock in held:
            sock.close()
    finally:
        server.close()


def test_a_connection_dropped_for_room_finds_its_refusal_said_once_it_sees_the_close(
        caplog, monkeypatch):
    # Said by the dropped connection's own thread after the drop closed it:
    # a loaded machine (here a slow log) let the client see the close first.
    slow = RefusalLog.refused

    def slowly(self, *args, **kwargs):
        time.sleep(0.3)
        return slow(self, *args, **kwargs)

    monkeypatch.setattr(RefusalLog, "refused", slowly)
    server = make_rendezvous(max_pending_per_peer=1, register_timeout=60.0)
    try:
        oldest = _silent(server)
        newcomer = _silent(server)
        assert refused(oldest)
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert said == ["%s 127.0.0.1: dropped as the oldest of too many unregistered "
                        "connections" % REFUSED], said
        oldest.close()
        newcomer.close()
    finally:
        server.close()


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_refusals_past_the_first_are_counted_in_a_line_at_most_once_a_period():
    clock, lines = FakeClock(), []
    refusals = RefusalLog(first=2, period=60.0, clock=clock, log=lines.append)
    for number in range(5):
        refusals.refused("10.0.0.%d" % number, "bad MAC")
        clock.now += 1
    assert lines == [REFUSED + " 10.0.0.0: bad MAC",
                     REFUSED + " 10.0.0.1: bad MAC (more are counted, said at most once in "
                               "60 s)"]
    refusals.flush()
    assert len(lines) == 2          # not a period yet
    clock.now += 56
    refusals.flush()
    assert lines[2:] == ["refused 3 more rendezvous connections in the last 60 s (the latest "
                         "from 10.0.0.4: bad MAC)"]
    refusals.flush()
    refusals.refused("10.0.0.5", "bad MAC")   # within a period of the last: counted
    clock.now += 60
    refusals.refused("10.0.0.6", "too short")
    assert lines[3:] == ["refused 2 more rendezvous connections in the last 60 s (the latest "
                         "from 10.0.0.6: too short)"]
    # A period without any: the next are said each again.
    clock.now += 61
    refusals.refused("10.0.0.7", "bad MAC")
    assert lines[4:] == [REFUSED + " 10.0.0.7: bad MAC"]


def counting_rendezvous():
    """(a rendezvous whose refusals past the first are counted for 60 s of
    its clock, the clock, the lines said)."""
    clock, lines = FakeClock(), []
    server = make_rendezvous(refusals=RefusalLog(first=1, period=60.0, clock=clock,
                                                 log=lines.append))
    return server, clock, lines


def refuse_three(server):
    for _ in range(3):
        bad = _garbage(server)
        assert refused(bad)
        bad.close()


def test_refusals_still_counted_are_said_as_the_rendezvous_closes():
    # They were never said: a flood in the run's last minute left no trace.
    server, clock, lines = counting_rendezvous()
    try:
        refuse_three(server)
        wait_until(lambda: server._refusals._held == 2)
        assert len(lines) == 1
    finally:
        server.close()
    assert len(lines) == 2 and lines[1].startswith(
        "refused 2 more rendezvous connections in the last 0 s (the latest from 127.0.0.1: ")


def test_a_connection_no_thread_is_left_for_is_a_counted_refusal(monkeypatch):
    # Each was a line of its own ("cannot serve a rendezvous connection"),
    # however many came: a flood that exhausted the threads flooded the output.
    import types

    from tfmesos.core import rendezvous

    class NoThread:
        def __init__(self, *args, **kwargs):
            pass

        def start(self):
            raise RuntimeError("can't start new thread")
    server, clock, lines = counting_rendezvous()
    links = [rendezvous._Link(socket.socket(), ("10.0.0.9", 1), SECRET) for _ in range(3)]
    try:
        monkeypatch.setattr(rendezvous, "threading", types.SimpleNamespace(Thread=NoThread))
        for link in links:
            server._start(link)
        monkeypatch.undo()
        assert lines == [REFUSED + " 10.0.0.9: no thread left to serve it (can't start new "
                                   "thread) (more are counted, said at most once in 60 s)"]
    finally:
        server.close()
    assert lines[1:] == ["refused 2 more rendezvous connections in the last 0 s (the latest "
                         "from 10.0.0.9: no thread left to serve it (can't start new thread))"]


def test_the_rendezvous_says_the_count_of_refusals_as_it_pings():
    server, clock, lines = counting_rendezvous()
    try:
        refuse_three(server)
        assert len(lines) == 1
        clock.now += 60
        wait_until(lambda: len(lines) == 2)
        assert lines[1].startswith("refused 2 more rendezvous connections in the last 60 s "
                                   "(the latest from 127.0.0.1: ")
    finally:
        server.close()


def test_duplicate_registration_is_refused_without_dropping_the_first(rdv):
    first = register(rdv).registered()
    next_event(rdv, TaskRegistered)
    second = register(rdv)
    assert second.refused()
    assert rdv.send("good", {"type": "ping"})
    assert first.receive()["type"] == "ping"  # still the registered connection
    first.close()


def test_forget_drops_the_connection(rdv):
    client = register(rdv).registered()
    next_event(rdv, TaskRegistered)
    rdv.forget("good")
    assert client.refused()
    assert not rdv.send("good", {"type": "stop"})


def test_a_task_it_forgot_that_registers_again_is_told_its_attempt_is_over(rdv):
    client = register(rdv).registered()
    next_event(rdv, TaskRegistered)
    rdv.forget("good")
    assert client.refused()
    again = register(rdv)
    assert again.receive()["type"] == "over"
    assert again.refused()
    rdv.expect("other")                     # an id it never knew is refused as before
    stranger = register(rdv, "never-known")
    assert stranger.sock.recv(65536) == b""   # closed, nothing said


def test_close_disconnects_tasks(rdv):
    client = register(rdv).registered()
    next_event(rdv, TaskRegistered)
    rdv.close()
    with pytest.raises(wire.ConnectionClosed):
        while True:
            client.receive()


# -- Mesos' word of a task's end waits for what the task's connection still carries ----

def _events_until(rdv, last, timeout=30):
    """The events up to ``last`` (a marker object), in queue order."""
    seen = []
    while True:
        event = rdv.events.get(timeout=timeout)
        seen.append(event)
        if event is last:
            return seen


def test_a_task_s_end_from_mesos_comes_after_its_last_output_and_exit_frame(rdv):
    client = register(rdv).registered()
    next_event(rdv, TaskRegistered)
    end = object()   # Mesos' TASK_FAILED, which came before the relay read the task's frames
    rdv.put_after_reports("good", end)
    client.send({"type": "log", "stream": "stderr", "data": "ValueError: boom\n"})
    client.send({"type": "exit", "code": 1})
    client.close()
    assert _events_until(rdv, end) == [TaskOutput("good", "stderr", "ValueError: boom\n"),
                                       TaskExited("good", 1), TaskDisconnected("good"), end]


def test_a_task_s_end_without_a_connection_is_put_at_once(rdv):
    end = object()
    rdv.put_after_reports("good", end)   # never registered
    assert rdv.events.get(timeout=5) is end


def test_a_task_s_end_waits_for_a_connection_that_stays_open_only_so_long():
    server = make_rendezvous(reports_wait=0.2)
    server.expect("good")
    try:
        client = register(server).registered()
        next_event(server, TaskRegistered)
        first, second = object(), object()
        server.put_after_reports("good", first)
        server.put_after_reports("good", second)   # a reconciliation's answer: after the first
        assert server.events.get(timeout=30) is first
        assert server.events.get(timeout=30) is second
        # The connection is still there; what it sends now comes after.
        client.send({"type": "log", "stream": "stdout", "data": "late\n"})
        assert next_event(server, TaskOutput) == TaskOutput("good", "stdout", "late\n")
        third = object()
        server.put_after_reports("good", third)   # a new wait, as long again
        assert server.events.get(timeout=30) is third
        client.close()
    finally:
        server.close()


def test_a_task_s_end_held_when_the_rendezvous_closes_is_put():
    server = make_rendezvous(reports_wait=600)
    server.expect("good")
    client = register(server).registered()
    next_event(server, TaskRegistered)
    end = object()
    server.put_after_reports("good", end)
    server.close()
    assert server.events.get(timeout=30) is end
    client.close()
