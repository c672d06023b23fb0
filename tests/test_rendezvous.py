import queue
import socket
import struct
import time

import pytest

from tfmesos import wire
from tfmesos.events import TaskDisconnected, TaskExited, TaskOutput, TaskRegistered
from tfmesos.rendezvous import Rendezvous

SECRET = b"s" * 32


@pytest.fixture
def rdv():
    events = queue.Queue()
    server = Rendezvous(SECRET, events, bind_host="127.0.0.1", register_timeout=1.0,
                        ping_interval=0.2)
    server.events = events
    server.expect("good")
    yield server
    server.close()


def connect(rdv):
    sock = socket.create_connection(("127.0.0.1", rdv.port), timeout=5)
    return sock


def register(rdv, task_id="good", secret=SECRET, port=2222):
    sock = connect(rdv)
    wire.send(sock, secret, {"type": "register", "task_id": task_id, "host": "h", "port": port})
    return sock


def refused(sock):
    """The server closed the connection on us."""
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def next_event(rdv, kind, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = rdv.events.get(timeout=deadline - time.monotonic())
        if isinstance(event, kind):
            return event
    raise AssertionError("no %s event" % kind)


def test_good_registration_start_logs_and_exit(rdv):
    sock = register(rdv)
    assert next_event(rdv, TaskRegistered) == TaskRegistered("good", "h", 2222)
    assert rdv.send("good", {"type": "start", "job": "worker"})
    sock.settimeout(5)
    messages = [wire.receive(sock, SECRET) for _ in range(2)]
    assert {"type": "start", "job": "worker"} in messages  # pings may come first
    wire.send(sock, SECRET, {"type": "log", "stream": "stdout", "data": "hi\n"})
    wire.send(sock, SECRET, {"type": "exit", "code": 3})
    assert next_event(rdv, TaskOutput) == TaskOutput("good", "stdout", "hi\n")
    assert next_event(rdv, TaskExited) == TaskExited("good", 3)
    sock.close()
    assert next_event(rdv, TaskDisconnected) == TaskDisconnected("good")


def _bad_mac(rdv):
    return register(rdv, secret=b"x" * 32)


def _unknown_id(rdv):
    return register(rdv, task_id="stranger")


def _oversized(rdv):
    sock = connect(rdv)
    sock.sendall(struct.pack("!I", wire.MAX_FRAME + 1) + b"x" * 100)
    return sock


def _garbage(rdv):
    sock = connect(rdv)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    return sock


def _silent(rdv):
    return connect(rdv)


def _malformed(rdv):
    sock = connect(rdv)
    wire.send(sock, SECRET, {"type": "register", "task_id": "good", "host": "h", "port": "22"})
    return sock


def _pickle(rdv):
    sock = connect(rdv)
    body = b"\x80\x04\x95" + b"\x00" * 40
    sock.sendall(struct.pack("!I", len(body) + 32) + wire.mac(SECRET, body) + body)
    return sock


@pytest.mark.parametrize("attack", [_bad_mac, _unknown_id, _oversized, _garbage, _silent,
                                    _malformed, _pickle])
def test_bad_clients_are_refused_and_a_good_task_still_registers(rdv, attack):
    bad = attack(rdv)
    good = register(rdv)
    assert next_event(rdv, TaskRegistered).task_id == "good"
    assert refused(bad)
    bad.close()
    good.close()


def test_duplicate_registration_is_refused_without_dropping_the_first(rdv):
    first = register(rdv)
    next_event(rdv, TaskRegistered)
    second = register(rdv)
    assert refused(second)
    assert rdv.send("good", {"type": "ping"})
    first.settimeout(5)
    assert wire.receive(first, SECRET)["type"] == "ping"  # still the registered connection
    first.close()


def test_forget_drops_the_connection(rdv):
    sock = register(rdv)
    next_event(rdv, TaskRegistered)
    rdv.forget("good")
    assert refused(sock)
    assert not rdv.send("good", {"type": "stop"})


def test_close_disconnects_tasks(rdv):
    sock = register(rdv)
    next_event(rdv, TaskRegistered)
    rdv.close()
    sock.settimeout(5)
    with pytest.raises(wire.ConnectionClosed):
        while True:
            wire.receive(sock, SECRET)


def test_wire_refuses_tampered_body():
    frame = bytearray(wire.encode(SECRET, {"type": "x", "n": 1}))
    frame[-2] ^= 1
    a, b = socket.socketpair()
    a.sendall(bytes(frame))
    with pytest.raises(wire.WireError, match="authentication"):
        wire.receive(b, SECRET)
    a.close()
    b.close()
