"""Random (version 4) UUIDs for the master's ids: its own, streams,
containers, status updates. As ``uuid.uuid4()`` makes them, without
importing ``uuid``, which imports ``platform`` (~5 ms of every embedded
master's start)."""

import os


def uuid4_bytes() -> bytes:
    """16 random bytes with RFC 4122's version (4) and variant bits."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return bytes(raw)


def uuid4_text() -> str:
    """``uuid4_bytes`` as ``str(uuid.uuid4())`` writes one:
    8-4-4-4-12 lowercase hex digits."""
    text = uuid4_bytes().hex()
    return "%s-%s-%s-%s-%s" % (text[:8], text[8:12], text[12:16], text[16:20], text[20:])


__all__ = ["uuid4_bytes", "uuid4_text"]
