"""HMAC-SHA256 (RFC 2104) for the rendezvous frames (``wire``), without
loading OpenSSL into a task.

``hmac`` and ``hashlib`` load OpenSSL's libcrypto at import (``_hashlib``):
about 4 ms of CPU in every task's start, for MACs over a few hundred bytes.
Until something in the process has loaded it (the scheduler has; a task's
own code may), the interpreter's built-in SHA-256 makes the MAC
(``_sha256``; ``_sha2`` from Python 3.12; ``hashlib``'s where neither is
there); from then on ``hmac.digest``, several times faster on big frames
(1 MB: 0.9 ms against 6.4 ms). Both give the same MAC. The comparison is
``_operator._compare_digest``, the constant-time one that
``hmac.compare_digest`` is."""

import sys

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
_openssl_digest = None   # hmac.digest, once OpenSSL is loaded


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message`` keyed with ``key`` (32 bytes)."""
    global _openssl_digest
    if _openssl_digest is None and "_hashlib" in sys.modules:
        import hmac
        _openssl_digest = hmac.digest
    if _openssl_digest is not None:
        return _openssl_digest(key, message, "sha256")
    return builtin_hmac_sha256(key, message)


def builtin_hmac_sha256(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 on the built-in SHA-256 (RFC 2104)."""
    if len(key) > BLOCK:
        key = sha256(key).digest()
    key = key.ljust(BLOCK, b"\0")
    inner = sha256(key.translate(_INNER))
    inner.update(message)
    return sha256(key.translate(_OUTER) + inner.digest()).digest()


__all__ = ["hmac_sha256", "builtin_hmac_sha256", "compare_digest"]
