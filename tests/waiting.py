"""Waiting in tests without sleeping as synchronisation: poll a condition
with a generous deadline, so that a loaded machine (2 shared cores) only
makes a test slower, never wrong."""

import io
import threading
import time

__all__ = ["wait_until", "DEFAULT_TIMEOUT", "Buffer"]

DEFAULT_TIMEOUT = 30.0


def wait_until(predicate, timeout=DEFAULT_TIMEOUT, interval=0.05, message=None):
    """Call ``predicate()`` until it returns a true value, and return that.
    After ``timeout`` seconds raise ``AssertionError`` with ``message`` (a
    string, or a callable called then, e.g. to show the last state seen)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError("%s (waited %s s)" % (
                text or "condition %s never became true" % getattr(predicate, "__name__", "?"),
                timeout))
        time.sleep(interval)


class Buffer(io.StringIO):
    """A StringIO written by another thread (a follower's), read by the
    test while it writes (``wait_until(lambda: "x" in out.text())``)."""

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()

    def write(self, text):
        with self._lock:
            return super().write(text)

    def text(self):
        with self._lock:
            return self.getvalue()
