"""The task entry's end of ``tfmesos.log_metrics`` in replica mode: a unix
datagram socket its hooks and command (and whatever they start) send points
to (``$TFMESOS_METRICS_SOCKET``), and a thread that sends them on to tfrun
in ``metrics`` frames over the task's rendezvous connection
(``protocol.metric_points`` has the bounds).

The socket lives in a directory of its own (mode 0700: only the task's user
reaches it) in the sandbox, or in the temporary directory when the
sandbox's path is too long for a socket's (a Mesos agent's always is). A
relay that is killed (SIGKILL: an OOM kill, a kill after the grace period)
cannot remove its directory there: the next relay that starts in that
temporary directory does (``_sweep``), so that an agent's /tmp does not
fill with them. A flood costs the command
nothing: its datagrams are dropped once the socket's queue is full; the
thread keeps at most ``MAX_POINTS`` points (``Batcher``) and sends a frame
at most every ``FLUSH_INTERVAL`` seconds.
"""

import binascii
import os
import socket
import stat
import sys
import threading
import time

from ..protocol import json_documents, wire
from ..protocol.metric_points import MAX_DATAGRAM, Batcher, counted, parse_dropped, parse_point

MAX_PATH = 100           # bytes of a unix socket's path (108 with the final NUL)
POLL = 0.25              # seconds between looks at the batch while nothing comes
PREFIX = "tfmesos-metrics-"
SOCKET_NAME = "m"
SWEEP_AGE = 60.0         # seconds: younger directories are not probed


def _directory():
    """A new private directory for the socket: in the working directory (the
    sandbox) when its path is short enough, else in $TMPDIR or /tmp."""
    name = _host_prefix() + os.urandom(6).hex()
    cwd = os.getcwd()
    for base in (cwd, os.environ.get("TMPDIR"), "/tmp"):
        if base and len(os.path.join(base, name, SOCKET_NAME)) <= MAX_PATH:
            if base != cwd:
                _sweep(base)
            try:
                path = os.path.join(base, name)
                os.mkdir(path, 0o700)
                return path
            except OSError:
                continue
    raise OSError("no directory for the metrics socket")


def _host_prefix():
    """The names of this host's relay directories start with it: a shared
    temporary directory (NFS) may hold another host's live relays, whose
    sockets refuse a connection from here."""
    return "%s%08x-" % (PREFIX, binascii.crc32(os.uname().nodename.encode()))


def _sweep(base):
    """Remove from the shared ``base`` what killed relays left: this user's
    (and this host's) directories older than ``SWEEP_AGE`` whose socket nobody is bound to
    any more. Anything else — another user's, a live relay's, a young one
    (its relay may be starting: a burst of tasks probes nothing), one that
    is not a plain directory — is left alone."""
    try:
        prefix = _host_prefix()
        names = [name for name in os.listdir(base) if name.startswith(prefix)]
    except OSError:
        return
    uid, old = os.geteuid(), time.time() - SWEEP_AGE
    for name in names:
        directory = os.path.join(base, name)
        path = os.path.join(directory, SOCKET_NAME)
        try:
            info = os.lstat(directory)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mtime > old:
                continue
            if stat.S_ISSOCK(os.lstat(path).st_mode) and not _bound(path):
                os.unlink(path)
        except FileNotFoundError:
            pass    # no socket: its relay never bound one
        except OSError:
            continue
        try:
            os.rmdir(directory)
        except OSError:
            pass    # not empty (a live relay's socket): left alone


def _bound(path):
    """Whether a socket is bound at ``path`` (a relay that lives)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        probe.connect(path)
        return True
    except ConnectionRefusedError:
        return False
    except OSError:
        return True     # cannot tell: left alone
    finally:
        probe.close()


class MetricsRelay:
    """``send(message)`` sends a frame to tfrun (``Connection.send``); ``path``
    is the socket's. ``start``, then ``close`` once the command ended."""

    def __init__(self, send, clock=time.monotonic):
        self._send = send
        self._clock = clock
        self._directory = _directory()
        self.path = os.path.join(self._directory, SOCKET_NAME)
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
        self.dropped_by_senders = 0   # points the command's processes dropped (their count)
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
        point = told = None
        try:
            if len(data) <= MAX_DATAGRAM:
                item = json_documents.loads(data)
                point = parse_point(item)
                told = parse_dropped(item)
        except ValueError:   # not JSON, or "[[[[..." nested past the parser's depth
            pass
        if point is not None:
            self._batcher.add(point)
        elif told is not None:
            self.dropped_by_senders = counted(self.dropped_by_senders, told)
        else:
            self.malformed += 1

    def _flush(self):
        batch = self._batcher.take(self._clock())
        if batch is None and (self.malformed or self.dropped_by_senders):
            batch = [], 0                 # a count alone is said too
        if batch is None or self._broken:
            return
        points, dropped = batch
        try:
            self._send({"type": "metrics", "now": round(time.time(), 3),
                        "points": [list(point) for point in points],
                        "dropped": counted(dropped + self.malformed,
                                           self.dropped_by_senders)})
            self.malformed = self.dropped_by_senders = 0
        except (OSError, wire.WireError) as exc:
            self._broken = True
            print("tfmesos: cannot send metrics to tfrun: %s" % exc, file=sys.stderr,
                  flush=True)

