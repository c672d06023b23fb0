"""The frame codec: every frame is valid once, in one direction of one
connection, at one sequence number, for one task."""

import socket
import struct
import time

import pytest

from tfmesos.protocol import wire

SECRET = b"s" * 32
NONCE = b"n" * wire.NONCE_SIZE
HERE = wire.Context(wire.TO_SCHEDULER, NONCE, 3, "worker-1")


def payload(frame):
    return frame[4:]


def test_a_frame_decodes_in_its_own_context():
    frame = wire.encode(SECRET, HERE, {"type": "exit", "code": 0})
    assert wire.decode(SECRET, HERE, payload(frame)) == {"type": "exit", "code": 0}


@pytest.mark.parametrize("elsewhere", [
    wire.Context(wire.TO_TASK, NONCE, 3, "worker-1"),                 # reflected
    wire.Context(wire.TO_SCHEDULER, b"m" * wire.NONCE_SIZE, 3, "worker-1"),  # other connection
    wire.Context(wire.TO_SCHEDULER, NONCE, 2, "worker-1"),            # replayed
    wire.Context(wire.TO_SCHEDULER, NONCE, 4, "worker-1"),            # skipped
    wire.Context(wire.TO_SCHEDULER, NONCE, 3, "worker-2"),            # other task
    wire.Context(wire.TO_SCHEDULER, NONCE, 3, ""),                    # before registration
], ids=["direction", "nonce", "sequence-replayed", "sequence-skipped", "task", "no-task"])
def test_a_frame_is_refused_in_any_other_context(elsewhere):
    frame = wire.encode(SECRET, HERE, {"type": "exit", "code": 0})
    with pytest.raises(wire.WireError, match="authentication"):
        wire.decode(SECRET, elsewhere, payload(frame))


def test_wrong_secret_and_tampered_body_are_refused():
    frame = bytearray(wire.encode(SECRET, HERE, {"type": "x", "n": 1}))
    with pytest.raises(wire.WireError, match="authentication"):
        wire.decode(b"t" * 32, HERE, payload(bytes(frame)))
    frame[-2] ^= 1
    with pytest.raises(wire.WireError, match="authentication"):
        wire.decode(SECRET, HERE, payload(bytes(frame)))


def test_task_id_and_body_cannot_be_shifted_into_each_other():
    """The task id is length-prefixed: ("ab", "c...") never MACs like ("a", "bc...")."""
    one = wire.Context(wire.TO_SCHEDULER, NONCE, 0, "ab")
    two = wire.Context(wire.TO_SCHEDULER, NONCE, 0, "a")
    assert wire.mac_input(one, b"{}") != wire.mac_input(two, b"b{}")


def handshake():
    scheduler = wire.Channel.for_scheduler(SECRET)
    task = wire.Channel.from_challenge(SECRET, payload(scheduler.challenge()))
    scheduler.open(payload(task.seal({"type": "register", "task_id": "w"})))
    scheduler.bind("w")
    task.bind("w")
    return scheduler, task


def test_channels_handshake_and_talk_in_order():
    scheduler, task = handshake()
    assert task.open(payload(scheduler.seal({"type": "registered"}))) == {"type": "registered"}
    frames = [task.seal({"type": "log", "data": str(n)}) for n in range(3)]
    assert [scheduler.open(payload(f))["data"] for f in frames] == ["0", "1", "2"]


def test_channels_refuse_replay_reorder_reflection_and_other_connections():
    scheduler, task = handshake()
    first, second = task.seal({"type": "log"}), task.seal({"type": "log"})
    with pytest.raises(wire.WireError):
        scheduler.open(payload(second))           # out of order
    scheduler.open(payload(first))
    with pytest.raises(wire.WireError):
        scheduler.open(payload(first))            # replayed
    with pytest.raises(wire.WireError):
        task.open(payload(second))                # reflected back to the task
    other_scheduler, _ = handshake()
    with pytest.raises(wire.WireError):
        other_scheduler.open(payload(first))      # another connection's frame


def test_challenge_must_be_authentic_and_well_formed():
    scheduler = wire.Channel.for_scheduler(SECRET)
    with pytest.raises(wire.WireError, match="authentication"):
        wire.Channel.from_challenge(b"t" * 32, payload(scheduler.challenge()))
    for message in ({"type": "challenge", "nonce": "00"}, {"type": "challenge"},
                    {"type": "start", "nonce": NONCE.hex()}):
        frame = wire.encode(SECRET, wire.Context(wire.TO_TASK, NONCE, 0), message)
        with pytest.raises(wire.WireError, match="expected a challenge"):
            wire.Channel.from_challenge(SECRET, payload(frame))


def test_fresh_nonces():
    assert wire.Channel.for_scheduler(SECRET).nonce != wire.Channel.for_scheduler(SECRET).nonce


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'{"type": 3}', b"\x80\x04\x95",
                                  b"[" * 5000 + b"]" * 5000])   # past the JSON parser's depth
def test_untyped_or_non_json_bodies_are_refused(body):
    context = wire.Context(wire.TO_SCHEDULER, NONCE, 0)
    with pytest.raises(wire.WireError):
        wire.decode(SECRET, context, wire.mac(SECRET, context, body) + body)


def test_read_frame_limits_and_deadline():
    a, b = socket.socketpair()
    try:
        a.sendall(struct.pack("!I", wire.SMALL_FRAME + 1))
        with pytest.raises(wire.WireError, match=r"^refusing a frame of 4097 bytes \(limit "
                                                 r"4096\)$"):
            wire.read_frame(b, wire.SMALL_FRAME)
        # One too short for a MAC and a JSON object says so, not "limit 4096".
        a.sendall(struct.pack("!I", 5))
        with pytest.raises(wire.WireError, match=r"^refusing a frame of 5 bytes: too short \(at "
                                                 r"least 34: a MAC and a JSON object\)$"):
            wire.read_frame(b, wire.SMALL_FRAME)
        a.sendall(struct.pack("!I", 100) + b"x")
        started = time.monotonic()
        with pytest.raises(socket.timeout):
            wire.read_frame(b, deadline=time.monotonic() + 0.3)
        assert time.monotonic() - started < 10   # the deadline, not a wait for the 99 bytes
    finally:
        a.close()
        b.close()
