"""Frames of the tfmesos rendezvous protocol, shared by both ends.

A frame is a 4-byte big-endian length, then that many bytes: a 32-byte
HMAC-SHA256 (keyed with the run's secret) of the JSON body, then the body.
JSON only, never pickle; frames above ``MAX_FRAME`` are refused unread.
"""

import hashlib
import hmac
import json
import socket
import struct

MAX_FRAME = 1 << 20
MAC_SIZE = 32
_LENGTH = struct.Struct("!I")


class WireError(Exception):
    """A frame is malformed, oversized or not authentic."""


class ConnectionClosed(WireError):
    """The peer closed the connection."""


def mac(secret, body):
    return hmac.new(secret, body, hashlib.sha256).digest()


def encode(secret, message):
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(body) + MAC_SIZE > MAX_FRAME:
        raise WireError("message of %d bytes exceeds the %d byte frame limit" % (len(body), MAX_FRAME))
    return _LENGTH.pack(len(body) + MAC_SIZE) + mac(secret, body) + body


def send(sock, secret, message):
    sock.sendall(encode(secret, message))


def recv_exact(sock, size):
    """Read exactly ``size`` bytes (recv may return fewer)."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        count = sock.recv_into(view[got:], size - got)
        if count == 0:
            raise ConnectionClosed("connection closed after %d of %d bytes" % (got, size))
        got += count
    return bytes(buffer)


def receive(sock, secret):
    """Read one authentic frame and return its JSON object."""
    try:
        header = recv_exact(sock, _LENGTH.size)
    except ConnectionClosed:
        raise ConnectionClosed("connection closed") from None
    (length,) = _LENGTH.unpack(header)
    if length > MAX_FRAME or length < MAC_SIZE + 2:
        raise WireError("refusing a frame of %d bytes" % length)
    frame = recv_exact(sock, length)
    digest, body = frame[:MAC_SIZE], frame[MAC_SIZE:]
    if not hmac.compare_digest(digest, mac(secret, body)):
        raise WireError("bad message authentication code")
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise WireError("frame body is not JSON: %s" % exc) from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise WireError("frame body is not a typed JSON object")
    return message


def enable_keepalive(sock, idle=30, interval=10, count=3):
    """Let a dead peer show up as an error instead of a silent hang."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval),
                          ("TCP_KEEPCNT", count)):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
