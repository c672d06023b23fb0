"""Random (version 4) UUIDs for the master's ids: its own, streams,
containers, status updates. As ``uuid.uuid4()`` makes them, without
importing ``uuid``, which imports ``platform`` (~5 ms of every embedded
master's start). And the rules every id a framework gives must pass
(``id_error``): frameworks', tasks' and executors' ids name directories."""

import os
import re

NAME_MAX = 255       # bytes of a file name (linux/limits.h)
_INVALID = re.compile(r"[/\\\x00-\x1f\x7f]")   # iscntrl, '/', '\\'


def id_error(value: str):
    """Mesos' ``common::validation::validateID`` (src/common/validation.cpp)
    of a FrameworkID, TaskID or ExecutorID, in its words, or None: an id
    names a sandbox directory (``.../frameworks/<id>/executors/<id>/``), so
    '/', '..' or 256 bytes would lead the agent out of its work directory
    or fail there."""
    if not value:
        return "ID must not be empty"
    if len(value.encode("utf-8", "surrogatepass")) > NAME_MAX:
        return "ID must not be greater than %d characters" % NAME_MAX
    if value in (".", ".."):
        return "'%s' is disallowed" % value
    if _INVALID.search(value):
        return "'%s' contains invalid characters" % value
    return None


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


__all__ = ["uuid4_bytes", "uuid4_text", "id_error", "NAME_MAX"]
