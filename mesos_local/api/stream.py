"""One SUBSCRIBE stream: a queue of RecordIO frames and the loop that writes it.

The master only ever *enqueues* events (under its lock, never blocking); the
HTTP handler thread that answered the SUBSCRIBE call runs ``pump``, which
writes each frame as one HTTP chunk, sends a HEARTBEAT every
``heartbeat_interval`` seconds and notices at once when the client hangs up
(the socket turns readable with EOF). Both the scheduler API's streams and
the operator API's (``subscribers.py``) are these.

``max_queued`` bounds what may wait for a slow reader: once more than that
many bytes of events (beyond the first events a stream starts with, and
beyond one event however large) wait to be written, the stream is dropped
at once (its connection shut down, ``pump`` returns ``OVERFLOWED``) and its
queue freed, rather than buffered without bound. None (the scheduler
streams, as in Mesos): no bound.

Events are queued as JSON frames; a stream whose reader asked for protobuf
gets an ``encoder`` (``proto.frame_encoder``) that ``pump`` writes each
frame through, heartbeats included.
"""

import collections
import json
import os
import select
import socket
import threading
import time

from ..ids import uuid4_text

HEARTBEAT = {"type": "HEARTBEAT"}

# Why ``pump`` returned.
CLOSED = "closed"            # the master ended the stream (teardown, failover, error)
ABORTED = "aborted"          # fault injection: dropped without a goodbye
CLIENT_GONE = "client-gone"  # the scheduler closed the connection or a write failed
OVERFLOWED = "overflowed"    # more than max_queued bytes waited for a slow reader


def frame(event):
    """An Event dict as a RecordIO frame of compact JSON: ``<length>\\n<bytes>``
    (docs/recordio.md)."""
    record = json.dumps(event, separators=(",", ":")).encode("utf-8")
    return b"%d\n%s" % (len(record), record)


class Subscription:
    """The outgoing side of one SUBSCRIBE connection (a scheduler's, or an
    operator's: ``framework_id`` None); ``first``: the events it starts
    with (not counted against ``max_queued``)."""

    def __init__(self, framework_id, heartbeat_interval, max_queued=None, first=()):
        self.framework_id = framework_id
        self.stream_id = uuid4_text()
        self.heartbeat_interval = heartbeat_interval
        self.max_queued = max_queued
        self._lock = threading.Lock()
        # frames to send
        self._queue: collections.deque[bytes] = collections.deque(frame(e) for e in first)
        self._counted = 0          # bytes of the queued frames sent since pump last took them
        self._closing = False
        self._aborted = False
        self._overflowed = False
        self._stalled = False
        self._sock = None          # the connection, while pump runs
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._disposed = False
        self._ended = threading.Event()   # set once the HTTP layer disposed of it
        # A frame as written: JSON as queued, or re-encoded (set before pump runs).
        self.encoder = None

    # -- called by the master (any thread, never blocks) ---------------------

    def send(self, event):
        """Queue an Event; False when the stream has ended or was just
        dropped for a slow reader (``overflowed``)."""
        return self.send_frame(frame(event))

    def send_frame(self, data):
        """Queue a RecordIO frame (``frame(event)``), as ``send``."""
        sock = None
        with self._lock:
            if self._closing or self._aborted:
                return False
            dropped = (self.max_queued is not None and self._counted > 0
                       and self._counted + len(data) > self.max_queued)
            if dropped:
                self._aborted = self._overflowed = True
                self._queue.clear()
                sock = self._sock
            else:
                self._queue.append(data)
                self._counted += len(data)
        if dropped and sock is not None:
            try:   # wakes a pump blocked writing to a reader that does not read
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._wake()
        return not dropped

    @property
    def queued_bytes(self):
        """Bytes of events waiting to be written."""
        with self._lock:
            return sum(len(data) for data in self._queue)

    @property
    def overflowed(self):
        """Whether the stream was dropped because its reader fell behind."""
        return self._overflowed

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

    def wait_ended(self, timeout):
        """Wait at most ``timeout`` s for a stream being written to end (its
        last frames and the HTTP end written); True at once for one that no
        handler writes."""
        with self._lock:
            written = self._sock is not None and not self._disposed
        return self._ended.wait(timeout) if written else True

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
        """Write events until the stream ends; returns CLOSED, ABORTED,
        CLIENT_GONE or OVERFLOWED. ``write_chunk(bytes)`` writes one HTTP chunk."""
        next_beat = time.monotonic() + self.heartbeat_interval
        encoder = self.encoder
        if encoder is not None:
            def write(data, write_chunk=write_chunk):
                write_chunk(encoder(data))
            write_chunk = write
        with self._lock:
            self._sock = sock
        # poll(), not select(): a master with many sockets (an agent's
        # server each) hands out descriptors past select's FD_SETSIZE.
        poller = select.poll()
        sock_fd = sock.fileno()
        poller.register(sock_fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while True:
            with self._lock:
                if self._aborted:
                    return OVERFLOWED if self._overflowed else ABORTED
                stalled = self._stalled
                frames = [] if stalled else list(self._queue)
                if not stalled:
                    self._queue.clear()
                    self._counted = 0
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
                return self._gone()
            timeout = None if stalled else max(0.0, next_beat - time.monotonic())
            try:
                ready = {fd for fd, _ in poller.poll(None if timeout is None
                                                     else timeout * 1000.0)}
            except (OSError, ValueError):
                return self._gone()
            if self._wake_r in ready:
                try:
                    os.read(self._wake_r, 4096)
                except OSError:
                    pass
            if sock_fd in ready:
                try:
                    data = sock.recv(4096)
                except (BlockingIOError, InterruptedError):
                    data = b"?"
                except OSError:
                    return self._gone()
                if not data:
                    return self._gone()
                # Anything a client sends on its event stream is ignored.

    def _gone(self):
        """Why the connection failed: the reader fell behind, or went away."""
        return OVERFLOWED if self._overflowed else CLIENT_GONE

    def dispose(self):
        with self._lock:
            if self._disposed:
                return
            self._disposed = True
            self._ended.set()
            self._aborted = True
            self._sock = None
            self._queue.clear()
            for fd in (self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
