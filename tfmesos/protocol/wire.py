"""Frames of the tfmesos rendezvous protocol, shared by both ends.

A frame is a 4-byte big-endian length, then that many bytes: a 32-byte
HMAC-SHA256 (keyed with the run's secret), then a JSON object with a string
``type``. JSON only, never pickle; frames above the reader's limit are
refused unread.

The MAC covers more than the body, so that a frame is valid once, in one
place: ``mac_input`` = a protocol label, the direction (``TO_SCHEDULER`` or
``TO_TASK``), the connection's nonce, the frame's sequence number in that
direction (0, 1, 2, ...), the task id (empty until the task registered),
then the body. A ``Channel`` holds one end's state of one connection; its
peer checks every frame against the next sequence number it expects, so a
replayed, reordered, reflected or transplanted frame fails the MAC.

Handshake: the scheduler opens with ``{"type": "challenge", "nonce": HEX,
"protocol": N}`` (a fresh random nonce per connection, frame 0 towards the
task); the task answers ``{"type": "register", ...}`` (its frame 0), after
which both ends ``bind`` the task id; the scheduler confirms with
``{"type": "registered"}``.

The protocol label is ``tfmesos-rendezvous-N`` for protocol ``PROTOCOL``
N. A challenge without ``protocol`` is protocol 2's (a scheduler before the
field; the first protocol with a challenge). Whatever the protocol, the
challenge frame is made as here with its own label, so a task of another
protocol can check it with the run's key under the label it names
(``Channel.from_challenge``): an authentic challenge of another protocol
is ``ProtocolMismatch`` (nothing of that connection is used, and another
try cannot help), one that checks under no label the bad MAC it always was.
"""

import collections
import json
import os
import socket
import struct
import time

from . import json_documents
from .hmac_sha256 import compare_digest, hmac_sha256

# typing is for the checkers only (mypy takes TYPE_CHECKING as true): the task
# entry imports this module, and typing costs a task's start a few ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    Message = dict[str, Any]   # a frame's JSON object (its "type" a string)
else:
    Message = dict

MAX_FRAME = 1 << 20
SMALL_FRAME = 4096      # the limit until registered: handshake frames are tiny
MAC_SIZE = 32
MIN_FRAME = MAC_SIZE + 2   # the shortest JSON object: {}
NONCE_SIZE = 16
TO_SCHEDULER = b"T"     # frames a task sends
TO_TASK = b"S"          # frames the scheduler sends
PROTOCOL = 2
UNNAMED_PROTOCOL = 2    # a challenge that names none
MISMATCH_EXIT = 76      # a task's exit status for a scheduler of another protocol (EX_PROTOCOL)


def label(protocol: int) -> bytes:
    """What protocol ``protocol``'s MAC covers first."""
    return b"tfmesos-rendezvous-%d\0" % protocol


_LABEL = label(PROTOCOL)
_LENGTH = struct.Struct("!I")
_SEQUENCE = struct.Struct("!QH")


class WireError(Exception):
    """A frame is malformed, oversized or not authentic."""


class ConnectionClosed(WireError):
    """The peer closed the connection."""


class ProtocolMismatch(WireError):
    """The scheduler's challenge is authentic, in another rendezvous protocol
    than this tfmesos speaks."""

    def __init__(self, scheduler: int, task: int) -> None:
        super().__init__("the scheduler speaks rendezvous protocol %d and this task's tfmesos "
                         "speaks %d: install the same tfmesos where the tasks run, or use --ship"
                         % (scheduler, task))
        self.scheduler = scheduler
        self.task = task


# Where a frame belongs: what its MAC covers besides the body. (A named tuple,
# not a dataclass: the task entry imports this module, and dataclasses costs
# more start-up time than the whole rest of it.)
Context = collections.namedtuple("Context", "direction nonce sequence task_id",
                                 defaults=("",))


def mac_input(context: Context, body: bytes, protocol: "Optional[int]" = None) -> bytes:
    """The bytes the MAC covers (in ``protocol``: default this one's);
    every field has a fixed size or a length."""
    task = context.task_id.encode("utf-8")
    return b"".join((_LABEL if protocol is None else label(protocol), context.direction,
                     context.nonce, _SEQUENCE.pack(context.sequence, len(task)), task, body))


def mac(secret: bytes, context: Context, body: bytes, protocol: "Optional[int]" = None) -> bytes:
    return hmac_sha256(secret, mac_input(context, body, protocol))


def encode(secret: bytes, context: Context, message: Message,
           protocol: "Optional[int]" = None) -> bytes:
    """The frame (length prefix included) carrying ``message`` in ``context``."""
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(body) + MAC_SIZE > MAX_FRAME:
        raise WireError("message of %d bytes exceeds the %d byte frame limit"
                        % (len(body), MAX_FRAME))
    return _LENGTH.pack(len(body) + MAC_SIZE) + mac(secret, context, body, protocol) + body


def decode(secret: bytes, context: Context, payload: bytes,
           protocol: "Optional[int]" = None) -> Message:
    """The message of an authentic frame ``payload`` (after the length) in ``context``."""
    digest, body = payload[:MAC_SIZE], payload[MAC_SIZE:]
    if not compare_digest(digest, mac(secret, context, body, protocol)):
        raise WireError("bad message authentication code (forged, replayed or misplaced frame)")
    return parse(body)


def parse(body: bytes) -> Message:
    """A frame body's JSON object, which must have a string ``type``."""
    try:
        message = json_documents.loads(body)
    except ValueError as exc:
        raise WireError("frame body is not JSON: %s" % exc) from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise WireError("frame body is not a typed JSON object")
    return message


class Channel:
    """One end's state of one connection: the secret, the nonce, the task id
    once bound, and the next sequence number in each direction."""

    def __init__(self, secret: bytes, nonce: bytes, sends: bytes, task_id: str = "") -> None:
        self.secret = secret
        self.nonce = nonce
        self.sends = sends
        self.receives = TO_TASK if sends == TO_SCHEDULER else TO_SCHEDULER
        self.task_id = task_id
        self.sent = 0
        self.received = 0

    @classmethod
    def for_scheduler(cls, secret: bytes) -> "Channel":
        """The scheduler's channel of a new connection, with a fresh nonce."""
        return cls(secret, os.urandom(NONCE_SIZE), TO_TASK)

    @classmethod
    def from_challenge(cls, secret: bytes, payload: bytes) -> "Channel":
        """The task's channel, from the scheduler's challenge frame
        (verified); ProtocolMismatch for one of another protocol that checks
        under that protocol's label (module docstring)."""
        message = parse(payload[MAC_SIZE:])
        try:
            nonce = bytes.fromhex(message.get("nonce") or "")
        except (TypeError, ValueError):
            nonce = b""
        if message["type"] != "challenge" or len(nonce) != NONCE_SIZE:
            raise WireError("expected a challenge from the scheduler, got %r" % message["type"])
        protocol = message.get("protocol", UNNAMED_PROTOCOL)
        if protocol != PROTOCOL and isinstance(protocol, int) and not isinstance(protocol, bool) \
                and 0 < protocol < 1 << 16:
            # Nothing of it is used either way: authentic, it is the reason to give up.
            decode(secret, Context(TO_TASK, nonce, 0), payload, protocol)
            raise ProtocolMismatch(protocol, PROTOCOL)
        channel = cls(secret, nonce, TO_SCHEDULER)
        channel.open(payload)
        return channel

    def challenge(self) -> bytes:
        """The scheduler's first frame: the nonce the task must answer to,
        and the protocol this end speaks."""
        return self.seal({"type": "challenge", "nonce": self.nonce.hex(), "protocol": PROTOCOL})

    def bind(self, task_id: str) -> None:
        """Cover the task id in every later frame (after the registration)."""
        self.task_id = task_id

    def seal(self, message: Message) -> bytes:
        """The next outgoing frame carrying ``message``."""
        frame = encode(self.secret, Context(self.sends, self.nonce, self.sent, self.task_id),
                       message)
        self.sent += 1
        return frame

    def open(self, payload: bytes) -> Message:
        """The message of the next incoming frame; WireError if it is not that frame."""
        message = decode(self.secret,
                         Context(self.receives, self.nonce, self.received, self.task_id), payload)
        self.received += 1
        return message


def send(sock: socket.socket, channel: Channel, message: Message) -> None:
    sock.sendall(channel.seal(message))


def no_delay(sock: socket.socket) -> None:
    """Turn Nagle's algorithm off on a TCP socket: a frame is one write, and
    one held back until the peer acknowledges the previous one waits for the
    peer's delayed ACK, up to 40 ms on Linux (a start message took 35 ms to
    reach tasks that had just registered)."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass    # not TCP (a socket pair in the tests)


def shut_down(sock: socket.socket) -> None:
    """Wake whoever reads ``sock`` with an end of file; its owner closes it
    (one shut down or closed already is left as it is)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def recv_exact(sock: socket.socket, size: int, deadline: "Optional[float]" = None) -> bytes:
    """Read exactly ``size`` bytes (recv may return fewer), by ``deadline``
    (a ``time.monotonic()`` value) when given: socket.timeout after it."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout("deadline passed after %d of %d bytes" % (got, size))
            sock.settimeout(remaining)
        count = sock.recv_into(view[got:], size - got)
        if count == 0:
            raise ConnectionClosed("connection closed after %d of %d bytes" % (got, size))
        got += count
    return bytes(buffer)


def read_frame(sock: socket.socket, max_size: int = MAX_FRAME,
               deadline: "Optional[float]" = None) -> bytes:
    """One frame's payload (MAC and body), unverified; at most ``max_size`` bytes."""
    try:
        header = recv_exact(sock, _LENGTH.size, deadline)
    except ConnectionClosed:
        raise ConnectionClosed("connection closed") from None
    (length,) = _LENGTH.unpack(header)
    if length > max_size:
        raise WireError("refusing a frame of %d bytes (limit %d)" % (length, max_size))
    if length < MIN_FRAME:
        raise WireError("refusing a frame of %d bytes: too short (at least %d: a MAC and a JSON "
                        "object)" % (length, MIN_FRAME))
    return recv_exact(sock, length, deadline)


def receive(sock: socket.socket, channel: Channel, max_size: int = MAX_FRAME,
            deadline: "Optional[float]" = None) -> Message:
    """Read the channel's next frame and return its JSON object."""
    return channel.open(read_frame(sock, max_size, deadline))


def enable_keepalive(sock: socket.socket, idle: int = 30, interval: int = 10,
                     count: int = 3) -> None:
    """Let a dead peer show up as an error instead of a silent hang."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval),
                          ("TCP_KEEPCNT", count)):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
