"""The rendezvous frames' HMAC-SHA256 on the built-in SHA-256
(``tfmesos/protocol/hmac_sha256.py``): RFC 4231's vectors, the same MAC as
the ``hmac`` module for keys shorter than, as long as and longer than a
block, and no OpenSSL loaded by the task entry."""

import hashlib
import hmac
import os
import subprocess
import sys

import pytest

from tfmesos.protocol import hmac_sha256 as module
from tfmesos.protocol.hmac_sha256 import builtin_hmac_sha256, compare_digest, hmac_sha256

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# RFC 4231, test cases 1, 2 and 6 (a 131-byte key: hashed first).
VECTORS = [
    (b"\x0b" * 20, b"Hi There",
     "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
    (b"Jefe", b"what do ya want for nothing?",
     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
    (b"\xaa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First",
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
]


@pytest.mark.parametrize("key,message,expected", VECTORS)
def test_rfc_4231_vectors(key, message, expected):
    assert builtin_hmac_sha256(key, message).hex() == expected
    assert hmac_sha256(key, message).hex() == expected


def test_the_same_mac_as_the_hmac_module():
    for key_size in (0, 1, 32, 63, 64, 65, 200):
        for message_size in (0, 1, 100, 5000):
            key, message = os.urandom(key_size), os.urandom(message_size)
            assert builtin_hmac_sha256(key, message) == \
                hmac.new(key, message, hashlib.sha256).digest(), (key_size, message_size)


def test_openssl_makes_the_mac_once_something_loaded_it(monkeypatch):
    # This process has loaded it (pytest imports hashlib): hmac.digest.
    monkeypatch.setattr(module, "_openssl_digest", None)
    assert "_hashlib" in sys.modules
    key, message = os.urandom(32), os.urandom(1000)
    assert hmac_sha256(key, message) == hmac.new(key, message, hashlib.sha256).digest()
    assert module._openssl_digest is hmac.digest


def test_compare_digest_tells_equal_from_different():
    digest = hmac_sha256(b"k" * 32, b"body")
    assert compare_digest(digest, hmac_sha256(b"k" * 32, b"body"))
    assert not compare_digest(digest, hmac_sha256(b"k" * 32, b"bodY"))
    assert not compare_digest(digest, digest[:-1])


def test_the_task_entry_loads_no_openssl():
    # hmac and hashlib load libcrypto (_hashlib) at import: ~4 ms of CPU in
    # every task's start, as tasks start (no site).
    probe = ("import sys; sys.path.insert(0, %r); import tfmesos.task.__main__; "
             "print(sorted(m for m in ('_hashlib', 'hashlib', 'hmac', '_ssl') "
             "if m in sys.modules))" % REPO)
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]", out
