"""HMAC-SHA256 (RFC 2104) on the interpreter's built-in SHA-256, for the
rendezvous frames (``wire``).

``hmac`` and ``hashlib`` load OpenSSL's libcrypto at import (``_hashlib``):
about 4 ms of CPU in every task's start, for a MAC over a few hundred
bytes. The built-in module (``_sha256``; ``_sha2`` from Python 3.12) is in
the interpreter itself; where it is missing, ``hashlib``'s is used. The
comparison is ``_operator._compare_digest``, the constant-time one that
``hmac.compare_digest`` is."""

try:
    from _sha256 import sha256  # type: ignore[import-not-found]  # Python < 3.12
except ImportError:   # pragma: no cover - the interpreter's own
    try:
        from _sha2 import sha256  # type: ignore[import-not-found]
    except ImportError:
        from hashlib import sha256
from _operator import _compare_digest as compare_digest

BLOCK = 64   # SHA-256's block size in bytes
_INNER = bytes(x ^ 0x36 for x in range(256))
_OUTER = bytes(x ^ 0x5C for x in range(256))


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message`` keyed with ``key`` (32 bytes)."""
    if len(key) > BLOCK:
        key = sha256(key).digest()
    key = key.ljust(BLOCK, b"\0")
    inner = sha256(key.translate(_INNER))
    inner.update(message)
    return sha256(key.translate(_OUTER) + inner.digest()).digest()


__all__ = ["hmac_sha256", "compare_digest"]
