"""The task entry's end of ``tfmesos.log_metrics`` in replica mode: a unix
datagram socket its hooks and command (and whatever they start) send points
to (``$TFMESOS_METRICS_SOCKET``), and a thread that sends them on to tfrun
in ``metrics`` frames over the task's rendezvous connection
(``protocol.metric_points`` has the bounds).

The socket lives in a directory of its own (mode 0700: only the task's user
reaches it) in the sandbox, or in the temporary directory when the
sandbox's path is too long for a socket's. A flood costs the command
nothing: its datagrams are dropped once the socket's queue is full; the
thread keeps at most ``MAX_POINTS`` points (``Batcher``) and sends a frame
at most every ``FLUSH_INTERVAL`` seconds.
"""

import json
import os
import socket
import sys
import threading
import time

from ..protocol import wire
from ..protocol.metric_points import MAX_DATAGRAM, Batcher, parse_point

MAX_PATH = 100           # bytes of a unix socket's path (108 with the final NUL)
POLL = 0.25              # seconds between looks at the batch while nothing comes


def _directory():
    """A new private directory for the socket: in the working directory (the
    sandbox) when its path is short enough, else in $TMPDIR or /tmp."""
    name = "tfmesos-metrics-" + os.urandom(6).hex()
    for base in (os.getcwd(), os.environ.get("TMPDIR"), "/tmp"):
        if base and len(os.path.join(base, name, "m")) <= MAX_PATH:
            try:
                path = os.path.join(base, name)
                os.mkdir(path, 0o700)
                return path
            except OSError:
                continue
    raise OSError("no directory for the metrics socket")


class MetricsRelay:
    """``send(message)`` sends a frame to tfrun (``Connection.send``); ``path``
    is the socket's. ``start``, then ``close`` once the command ended."""

    def __init__(self, send, clock=time.monotonic):
        self._send = send
        self._clock = clock
        self._directory = _directory()
        self.path = os.path.join(self._directory, "m")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._sock.bind(self.path)
            self._sock.settimeout(POLL)
        except OSError:
            self._remove()
            raise
        self._batcher = Batcher()
        self._closing = threading.Event()
        self._broken = False    # the connection is gone: nothing more is sent
        self.malformed = 0      # datagrams that were not points
        self._thread = threading.Thread(target=self._loop, name="tfmesos-metrics", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def close(self, timeout=2.0):
        """Take what is queued, send the last batch, remove the socket."""
        self._closing.set()
        self._wake()
        self._thread.join(timeout)
        self._remove()

    def _wake(self):
        """An empty datagram ends the thread's wait now, not a POLL later
        (the task's exit waits for it)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as waker:
                waker.setblocking(False)
                waker.sendto(b"", self.path)
        except OSError:
            pass    # a full queue: the thread is reading anyway

    def _remove(self):
        self._sock.close()
        for remove, path in ((os.unlink, self.path), (os.rmdir, self._directory)):
            try:
                remove(path)
            except OSError:
                pass

    def _loop(self):
        while not self._closing.is_set():
            try:
                self._take(self._sock.recv(MAX_DATAGRAM + 1))
            except socket.timeout:
                pass
            except OSError:
                break
            if self._batcher.due(self._clock()):
                self._flush()
        self._sock.setblocking(False)
        while True:    # what came before the command ended
            try:
                self._take(self._sock.recv(MAX_DATAGRAM + 1))
            except OSError:
                break
        self._flush()

    def _take(self, data):
        if not data:
            return      # close()'s wake-up (or an empty datagram: nothing to take)
        try:
            point = parse_point(json.loads(data)) if len(data) <= MAX_DATAGRAM else None
        except (ValueError, RecursionError):   # not JSON, or "[[[[..." nested past the stack
            point = None
        if point is None:
            self.malformed += 1
        else:
            self._batcher.add(point)

    def _flush(self):
        batch = self._batcher.take(self._clock())
        if batch is None or self._broken:
            return
        points, dropped = batch
        try:
            self._send({"type": "metrics", "now": round(time.time(), 3),
                        "points": [list(point) for point in points],
                        "dropped": dropped + self.malformed})
            self.malformed = 0
        except (OSError, wire.WireError) as exc:
            self._broken = True
            print("tfmesos: cannot send metrics to tfrun: %s" % exc, file=sys.stderr,
                  flush=True)

