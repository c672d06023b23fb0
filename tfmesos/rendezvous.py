"""The scheduler side of the rendezvous: where tasks register their address
and receive their role, and where replica tasks send their output back.

Protocol (frames of ``wire``), task -> scheduler:
  ``{"type": "register", "task_id": T, "host": H, "port": P}`` first, within
  ``register_timeout``; later ``{"type": "log", "stream": "stdout", "data": L}``
  and ``{"type": "exit", "code": N}``.
Scheduler -> task: ``{"type": "start", ...}`` once the cluster is complete,
``{"type": "ping"}`` now and then, ``{"type": "stop"}``.

A connection that sends a bad MAC, garbage, an oversized frame, an unknown
or already registered task id, or nothing at all is closed; other tasks are
not disturbed. Everything that happens is put on the ``events`` queue as
``tfmesos.events``: ``TaskRegistered``, ``TaskOutput``, ``TaskExited``,
``TaskDisconnected``.
"""

import logging
import socket
import threading

from . import wire
from .events import TaskDisconnected, TaskExited, TaskOutput, TaskRegistered
from .exceptions import RendezvousError

logger = logging.getLogger(__name__)


class Rendezvous:
    def __init__(self, secret, events, bind_host="0.0.0.0", port=0, register_timeout=30.0,
                 max_pending=64, ping_interval=10.0):
        self._secret = secret
        self._events = events
        self._register_timeout = register_timeout
        self._ping_interval = ping_interval
        self._expected = set()
        self._connections = {}   # task_id -> socket
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()  # frames from two threads must not interleave
        self._closed = threading.Event()
        self._pending = threading.BoundedSemaphore(max_pending)
        try:
            self._listener = socket.create_server((bind_host, port), backlog=128)
        except OSError as exc:
            raise RendezvousError("cannot listen on %s:%s for task registrations: %s"
                                  % (bind_host, port, exc)) from exc
        self.port = self._listener.getsockname()[1]
        self._threads = [threading.Thread(target=self._accept_loop, name="rendezvous-accept",
                                          daemon=True),
                         threading.Thread(target=self._ping_loop, name="rendezvous-ping",
                                          daemon=True)]
        for thread in self._threads:
            thread.start()

    def expect(self, task_id):
        """Allow ``task_id`` to register (called as the task is launched)."""
        with self._lock:
            self._expected.add(task_id)

    def forget(self, task_id):
        """A task that ended: refuse it and drop its connection."""
        with self._lock:
            self._expected.discard(task_id)
            sock = self._connections.pop(task_id, None)
        _close(sock)

    def send(self, task_id, message):
        """Send to one task; False when it is not connected any more."""
        with self._lock:
            sock = self._connections.get(task_id)
        if sock is None:
            return False
        try:
            with self._send_lock:
                wire.send(sock, self._secret, message)
            return True
        except OSError:
            return False

    def close(self):
        """Close everything: connected tasks see it and stop."""
        self._closed.set()
        _close(self._listener)
        with self._lock:
            socks, self._connections = list(self._connections.values()), {}
        for sock in socks:
            _close(sock)

    def _accept_loop(self):
        while not self._closed.is_set():
            try:
                sock, peer = self._listener.accept()
            except OSError:
                return
            if not self._pending.acquire(blocking=False):
                logger.warning("too many unregistered connections; refusing %s", peer)
                _close(sock)
                continue
            threading.Thread(target=self._serve, args=(sock, peer), daemon=True,
                             name="rendezvous-%s:%s" % peer[:2]).start()

    def _serve(self, sock, peer):
        task_id = None
        try:
            try:
                task_id = self._register(sock)
            finally:
                self._pending.release()
            if task_id is None:
                return
            sock.settimeout(None)
            while True:
                message = wire.receive(sock, self._secret)
                kind = message["type"]
                if kind == "log":
                    self._events.put(TaskOutput(task_id, str(message.get("stream", "stdout")),
                                                str(message.get("data", ""))))
                elif kind == "exit" and isinstance(message.get("code"), int):
                    self._events.put(TaskExited(task_id, message["code"]))
        except (wire.WireError, OSError) as exc:
            if task_id is None:
                logger.warning("refused a rendezvous connection from %s: %s", peer[0], exc)
        finally:
            if task_id is not None:
                with self._lock:
                    mine = self._connections.get(task_id) is sock
                    if mine:
                        del self._connections[task_id]
                if mine and not self._closed.is_set():
                    self._events.put(TaskDisconnected(task_id))
            _close(sock)

    def _register(self, sock):
        sock.settimeout(self._register_timeout)
        wire.enable_keepalive(sock)
        try:
            message = wire.receive(sock, self._secret)
        except socket.timeout:
            raise wire.WireError("no registration within %.0f s" % self._register_timeout) from None
        task_id, host, port = message.get("task_id"), message.get("host"), message.get("port")
        if message["type"] != "register" or not isinstance(task_id, str) \
                or not isinstance(host, str) or not host \
                or not isinstance(port, int) or not 0 < port < 65536:
            raise wire.WireError("malformed registration %r" % (message,))
        with self._lock:
            if task_id not in self._expected:
                raise wire.WireError("unknown task id %r" % task_id)
            if task_id in self._connections:
                raise wire.WireError("task %r registered twice" % task_id)
            self._connections[task_id] = sock
        self._events.put(TaskRegistered(task_id, host, port))
        return task_id

    def _ping_loop(self):
        while not self._closed.wait(self._ping_interval):
            with self._lock:
                task_ids = list(self._connections)
            for task_id in task_ids:
                self.send(task_id, {"type": "ping"})


def _close(sock):
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
