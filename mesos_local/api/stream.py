"""One SUBSCRIBE stream: a queue of RecordIO frames and the loop that writes it.

The master only ever *enqueues* events (under its lock, never blocking); the
HTTP handler thread that answered the SUBSCRIBE call runs ``pump``, which
writes each frame as one HTTP chunk, sends a HEARTBEAT every
``heartbeat_interval`` seconds and notices at once when the client hangs up
(the socket turns readable with EOF).
"""

import collections
import json
import os
import select
import threading
import time
import uuid

HEARTBEAT = {"type": "HEARTBEAT"}

# Why ``pump`` returned.
CLOSED = "closed"            # the master ended the stream (teardown, failover, error)
ABORTED = "aborted"          # fault injection: dropped without a goodbye
CLIENT_GONE = "client-gone"  # the scheduler closed the connection or a write failed


def frame(event):
    """An Event dict as a RecordIO frame of compact JSON: ``<length>\\n<bytes>``
    (docs/recordio.md)."""
    record = json.dumps(event, separators=(",", ":")).encode("utf-8")
    return b"%d\n%s" % (len(record), record)


class Subscription:
    """The outgoing side of one scheduler's SUBSCRIBE connection."""

    def __init__(self, framework_id, heartbeat_interval):
        self.framework_id = framework_id
        self.stream_id = str(uuid.uuid4())
        self.heartbeat_interval = heartbeat_interval
        self._lock = threading.Lock()
        self._queue: collections.deque[bytes] = collections.deque()   # frames to send
        self._closing = False
        self._aborted = False
        self._stalled = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._disposed = False

    # -- called by the master (any thread, never blocks) ---------------------

    def send(self, event):
        data = frame(event)
        with self._lock:
            if self._closing or self._aborted:
                return False
            self._queue.append(data)
        self._wake()
        return True

    def close(self, error=None):
        """End the stream once what is queued is written; ``error`` first
        sends an ERROR event with that message."""
        if error is not None:
            self.send({"type": "ERROR", "error": {"message": error}})
        with self._lock:
            self._closing = True
        self._wake()

    def abort(self):
        """Drop the connection now, as a network failure would."""
        with self._lock:
            self._aborted = True
        self._wake()

    def stall(self):
        """Keep the connection open but write nothing more, heartbeats included."""
        with self._lock:
            self._stalled = True
        self._wake()

    @property
    def stalled(self):
        return self._stalled

    def _wake(self):
        with self._lock:  # never write to a closed (maybe reused) descriptor
            if self._disposed:
                return
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass  # the pipe is full: a wake-up is pending anyway

    # -- called by the HTTP handler thread ------------------------------------

    def pump(self, write_chunk, sock):
        """Write events until the stream ends; returns CLOSED, ABORTED or
        CLIENT_GONE. ``write_chunk(bytes)`` writes one HTTP chunk."""
        next_beat = time.monotonic() + self.heartbeat_interval
        while True:
            with self._lock:
                if self._aborted:
                    return ABORTED
                stalled = self._stalled
                frames = [] if stalled else list(self._queue)
                if not stalled:
                    self._queue.clear()
                closing = self._closing and not stalled
            try:
                for data in frames:
                    write_chunk(data)
                if closing:
                    return CLOSED
                now = time.monotonic()
                if not stalled and now >= next_beat:
                    write_chunk(frame(HEARTBEAT))
                    next_beat = now + self.heartbeat_interval
                    continue
            except OSError:
                return CLIENT_GONE
            timeout = None if stalled else max(0.0, next_beat - time.monotonic())
            try:
                readable, _, _ = select.select([sock, self._wake_r], [], [], timeout)
            except (OSError, ValueError):
                return CLIENT_GONE
            if self._wake_r in readable:
                try:
                    os.read(self._wake_r, 4096)
                except OSError:
                    pass
            if sock in readable:
                try:
                    data = sock.recv(4096)
                except (BlockingIOError, InterruptedError):
                    data = b"?"
                except OSError:
                    return CLIENT_GONE
                if not data:
                    return CLIENT_GONE
                # Anything a client sends on its event stream is ignored.

    def dispose(self):
        with self._lock:
            if self._disposed:
                return
            self._disposed = True
            self._aborted = True
            for fd in (self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
