"""The scheduler side of the rendezvous: where tasks register their address
and receive their role, and where replica tasks send their output back.

Protocol (frames of ``wire``, each bound to its connection, direction and
sequence number). Scheduler -> task, on accept: ``{"type": "challenge",
"nonce": N, "protocol": wire.PROTOCOL}``. Task -> scheduler, within ``register_timeout`` of the accept
and in at most ``wire.SMALL_FRAME`` bytes: ``{"type": "register", "task_id":
T, "host": H, "port": P}``; the scheduler answers ``{"type": "registered"}``.
Later, task -> scheduler: ``{"type": "log", "stream": "stdout", "data": L}``,
``{"type": "metrics", "now": T, "points": [...], "dropped": N}``
(``protocol.metric_points``) and ``{"type": "exit", "code": N}``; scheduler -> task: ``{"type": "start",
...}`` once the cluster is complete, ``{"type": "ping"}`` every
``ping_interval``, ``{"type": "stop"}``; to a registration of an attempt it
forgot (ended, lost or replaced), ``{"type": "over"}`` instead of
``registered``, and the task stops. A task answers each ping with
``{"type": "pong"}`` (unless it is sending something else right then).
The exit message may carry ``"usage": U``, what the command used as the
task measured it (an object: ``wall_s``, ``cpu_s``, ``user_s``,
``system_s``, ``peak_rss_mb``, ``peak_tree_rss_mb``, ``peak_gpu_mb``,
``sample_interval_s``, ``samples`` [{``t``, ``cpu_s``, ``rss_mb``,
``gpu_mb``}] and, in a memory-limited cgroup, ``cgroup`` {``limit_mb``,
``peak_mb``, ``oom_kills``}; ``tfmesos.task.usage``); it reaches the run
as ``TaskExited.usage`` (anything but an object: None). Its ``"stopped":
true`` says the scheduler's stop cut the command short (``false``: it had
ended by itself; absent from older task sides): ``TaskExited.stopped``.
Before its exit frame, a task of ``tfmesos.run`` sends its function's
outcome: ``{"type": "result", ...}`` and ``{"type": "result_data", ...}``
frames (``tfmesos.task.result_file``), kept, bounded, in ``results``
(``core.result_inbox.ResultInbox``), not on the events queue; the scheduler
answers ``{"type": "result_received"}`` once the result came whole (the
task sends it again when its connection drops before that).

A registered connection from which nothing at all came for
``stall_timeout`` is stalled (a network partition leaves TCP silent, not
closed, for many minutes): it is closed, and reported as
``TaskDisconnected(reason="stalled")`` with ``since`` the moment the task
was last heard from. Silence is counted only while this process runs: when
the ping loop wakes more than half a ``stall_timeout`` late (the process
itself did not run: a starved machine, a native call holding the
interpreter, a stopped process), what the tasks sent meanwhile may not be
read yet, so every task gets a whole ``stall_timeout`` from then.

A task whose connection dropped may register again on a new connection
(``tfmesos.task.connection`` retries for a grace period): it is accepted while the
task is still expected and its old connection is gone, gets the last
``start`` message again, and ``TaskRegistered`` is reported again.

A connection that sends a bad MAC, garbage, an oversized frame, an unknown
task id or one whose connection is still alive, or no registration in time
is closed; other tasks are not disturbed (each is logged, past the first
few a count at most once a minute: ``RefusalLog``). At most ``max_pending``
connections (``max_pending_per_peer`` per address) may be unregistered at
once: a new one evicts the oldest, so idle or slow clients cannot lock tasks
out. Everything that happens is put on the ``events`` queue as
``tfmesos.core.events``: ``TaskRegistered``, ``TaskOutput``, ``TaskMetrics``,
``TaskExited``, ``TaskDisconnected``.

Mesos' word of a task's end and the task's own last frames travel apart
(agent, master, driver thread; the task's connection, its relay thread):
on a loaded machine the update can reach the queue first, and the run
would tell the task's failure before the output that explains it.
``put_after_reports`` puts such an update after what the task's connection
still delivers: when that connection ends (its ``TaskDisconnected``), or
``REPORTS_WAIT`` seconds later at the latest (a connection that stays open:
a partition, a descriptor some other process holds).
"""

import collections
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Optional

from ..exceptions import RendezvousError
from ..protocol import metric_points, wire
from .events import TaskDisconnected, TaskExited, TaskMetrics, TaskOutput, TaskRegistered
from .metric_clock import MetricClock
from .rendezvous_refusals import RefusalLog
from .result_inbox import ResultInbox

if TYPE_CHECKING:
    import queue

logger = logging.getLogger(__name__)

DROPPED_FOR_ROOM = "dropped as the oldest of too many unregistered connections"
ACCEPT_BACKOFF = (0.05, 1.0)    # first and longest wait after a failed accept()
MAX_OVER = 65536                # attempts it forgot that it tells so (newest kept)
STALL_PINGS = 2.5               # pings a task may leave unanswered before it is stalled
REPORTS_WAIT = 2.0              # longest a task's end waits for its connection (as forget's linger)


class _Link:
    """One accepted connection: its socket, channel and send lock."""

    def __init__(self, sock: socket.socket, peer: tuple[Any, ...], secret: bytes) -> None:
        self.sock = sock
        self.peer = peer
        self.channel = wire.Channel.for_scheduler(secret)
        self.accepted = time.monotonic()
        self.heard = self.accepted   # when its last frame came
        self.stalled = False         # closed for silence
        self.task_id = ""             # once it registered
        self.metric_clock = MetricClock()   # where its metric points land here
        self.send_lock = threading.Lock()  # frames from two threads must not interleave
        self.held: list[object] = []   # events put once this connection ends (put_after_reports)
        self.hold_timer: Optional[threading.Timer] = None
        self.dropped = False          # for room, unregistered (Rendezvous._admit)

    def send(self, message: dict[str, Any]) -> None:
        with self.send_lock:
            wire.send(self.sock, self.channel, message)


class Rendezvous:
    """``stall_timeout`` (default ``STALL_PINGS`` pings): how long a
    registered connection may stay silent."""

    def __init__(self, secret: bytes, events: "queue.SimpleQueue[object]",
                 bind_host: Optional[str] = None, port: int = 0,
                 register_timeout: float = 30.0, max_pending: int = 256,
                 max_pending_per_peer: int = 64, ping_interval: float = 10.0,
                 stall_timeout: Optional[float] = None,
                 name_of: Callable[[str], str] = str,
                 reports_wait: Optional[float] = None,
                 refusals: Optional[RefusalLog] = None) -> None:
        self._secret = secret
        self._refusals = refusals or RefusalLog()
        self._events = events
        self._register_timeout = register_timeout
        self._max_pending = max_pending
        self._max_per_peer = max_pending_per_peer
        self._ping_interval = ping_interval
        self._stall_timeout = stall_timeout or STALL_PINGS * ping_interval
        self._name_of = name_of   # a task id as the run names its task, for messages
        self._reports_wait = REPORTS_WAIT if reports_wait is None else reports_wait
        self._expected: set[str] = set()
        # Attempts it forgot (ended, lost, replaced): told so when they register again.
        # (The latest MAX_OVER: a run restarting for days keeps no more.)
        self._over: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._connections: dict[str, _Link] = {}   # task_id -> registered _Link
        # unregistered _Link -> None, oldest first
        self._pending: collections.OrderedDict[_Link, None] = collections.OrderedDict()
        # task_id -> the start message, sent again on re-registration
        self._starts: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._gone = threading.Condition(self._lock)   # a connection left
        self._closed = threading.Event()
        self.results = ResultInbox()   # tfmesos.run's outcomes, by task id
        try:
            self._listener = _listen(bind_host, port)
        except OSError as exc:
            raise RendezvousError("cannot listen on %s:%s for task registrations: %s"
                                  % (bind_host or "*", port, exc)) from exc
        self.port = self._listener.getsockname()[1]
        self._threads = [threading.Thread(target=self._accept_loop, name="rendezvous-accept",
                                          daemon=True),
                         threading.Thread(target=self._ping_loop, name="rendezvous-ping",
                                          daemon=True)]
        for thread in self._threads:
            thread.start()

    def expect(self, task_id: str) -> None:
        """Allow ``task_id`` to register (called as the task is launched)."""
        with self._lock:
            self._expected.add(task_id)
            self._over.pop(task_id, None)

    def forget(self, task_id: str, linger: float = 2.0) -> None:
        """A task that ended: refuse it from now on. What it sent before it
        ended (its last output, often its error) is still read for
        ``linger`` seconds; then its connection is dropped."""
        with self._lock:
            if task_id in self._expected:
                self._over[task_id] = None
                if len(self._over) > MAX_OVER:
                    self._over.popitem(last=False)
            self._expected.discard(task_id)
            self._starts.pop(task_id, None)
            link = self._connections.get(task_id)
        if link is not None:
            timer = threading.Timer(linger, self._drop, (task_id, link))
            timer.daemon = True
            timer.start()

    def put_after_reports(self, task_id: str, event: object) -> None:
        """Put ``event`` (Mesos' word of ``task_id``'s end) on the events
        queue after everything the task's connection still delivers: at once
        when it has none, else when it ended, or ``reports_wait`` seconds
        from now at the latest. A second event while one waits goes after it."""
        with self._lock:
            link = self._connections.get(task_id)
            if link is None or self._closed.is_set():
                self._events.put(event)
                return
            link.held.append(event)
            if link.hold_timer is not None:
                return
            timer = link.hold_timer = threading.Timer(self._reports_wait, self._release, (link,))
            timer.daemon = True
        timer.start()   # (one cancelled meanwhile returns at once)

    def _release(self, link: _Link) -> None:
        with self._lock:
            self._put_held(link)

    def _put_held(self, link: _Link) -> None:
        """(Under the lock.) What waited for ``link`` to end goes on the queue."""
        held, link.held = link.held, []
        for event in held:
            self._events.put(event)
        if link.hold_timer is not None:
            link.hold_timer.cancel()
            link.hold_timer = None

    def _drop(self, task_id: str, link: _Link) -> None:
        with self._lock:
            if self._connections.get(task_id) is link:
                del self._connections[task_id]
                self._gone.notify_all()
        wire.shut_down(link.sock)

    def send(self, task_id: str, message: dict[str, Any]) -> bool:
        """Send to one task; False when it is not connected (now)."""
        with self._lock:
            link = self._connections.get(task_id)
            if message.get("type") == "start" and task_id in self._expected:
                self._starts[task_id] = message
        if link is None or task_id not in self._expected:
            return False
        try:
            link.send(message)
            return True
        except OSError:
            return False

    def close(self, linger: float = 0.0) -> None:
        """Close everything: connected tasks see it and stop. With ``linger``,
        first wait up to that long for the tasks to close their connections
        themselves (after a ``stop``), so that their last output arrives."""
        with self._lock:
            self._gone.wait_for(lambda: not self._connections, timeout=linger)
        self._closed.set()
        wire.shut_down(self._listener)
        self._listener.close()
        with self._lock:
            links = list(self._connections.values()) + list(self._pending)
            self._connections, self._pending = {}, collections.OrderedDict()
        for link in links:
            wire.shut_down(link.sock)  # its thread closes it
        self._refusals.flush(final=True)   # refusals counted since the last line

    # -- accepting ------------------------------------------------------------

    def _accept_loop(self) -> None:
        """Accept until closed; a failing accept() (EMFILE, ENFILE, ...) is
        retried with a growing back-off and logged once per failing streak."""
        delay: Optional[float] = None
        while not self._closed.is_set():
            try:
                sock, peer = self._listener.accept()
            except OSError as exc:
                if self._closed.is_set():
                    return
                if delay is None:
                    logger.warning("the rendezvous cannot accept connections (%s); retrying", exc)
                    delay = ACCEPT_BACKOFF[0]
                self._closed.wait(delay)
                delay = min(delay * 2, ACCEPT_BACKOFF[1])
                continue
            if delay is not None:
                logger.info("the rendezvous accepts connections again")
                delay = None
            wire.no_delay(sock)
            self._start(_Link(sock, peer, self._secret))

    def _start(self, link: _Link) -> None:
        """Admit a new connection (evicting the oldest unregistered one when
        the limits are reached) and serve it in its own thread."""
        victim = self._admit(link)
        if victim is not None:
            # Said before the close: a client that saw it closed finds it said.
            self._refusals.refused(victim.peer[0], DROPPED_FOR_ROOM)
            wire.shut_down(victim.sock)
        try:
            threading.Thread(target=self._serve, args=(link,), daemon=True,
                             name="rendezvous-%s:%s" % link.peer[:2]).start()
        except RuntimeError as exc:  # no thread left: a flood, said as the refusals are
            self._refusals.refused(link.peer[0], "no thread left to serve it (%s)" % exc)
            self._unpend(link)
            link.sock.close()

    def _admit(self, link: _Link) -> Optional[_Link]:
        with self._lock:
            if self._closed.is_set():
                wire.shut_down(link.sock)
                return None
            same_peer = [other for other in self._pending if other.peer[0] == link.peer[0]]
            victim = None
            if len(same_peer) >= self._max_per_peer:
                victim = same_peer[0]
            elif len(self._pending) >= self._max_pending:
                victim = next(iter(self._pending))
            if victim is not None:
                victim.dropped = True
                del self._pending[victim]
            self._pending[link] = None
            return victim

    def _unpend(self, link: _Link) -> None:
        with self._lock:
            self._pending.pop(link, None)

    # -- one connection -------------------------------------------------------

    def _serve(self, link: _Link) -> None:
        registered: Optional[TaskRegistered]
        try:
            try:
                registered = self._register(link)
            except (wire.WireError, OSError) as exc:
                if not self._closed.is_set() and not link.dropped:   # a drop was said (_start)
                    self._refusals.refused(link.peer[0], exc)
                registered = None
            finally:
                self._unpend(link)
            if registered is not None:
                self._events.put(registered)
                self._relay(link)
        finally:
            link.sock.close()

    def _register(self, link: _Link) -> TaskRegistered:
        """Challenge, registration, confirmation; the ``TaskRegistered`` event."""
        deadline = link.accepted + self._register_timeout
        sock = link.sock
        wire.enable_keepalive(sock)
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            sock.sendall(link.channel.challenge())
            message = wire.receive(sock, link.channel, wire.SMALL_FRAME, deadline)
            link.heard = time.monotonic()
        except socket.timeout:
            raise wire.WireError("no registration within %.0f s" % self._register_timeout) \
                from None
        task_id, host, port = _registration(message)
        link.channel.bind(task_id)
        sock.settimeout(None)
        with link.send_lock:  # nothing may reach the task before the confirmation
            self._claim(link, task_id)
            start = self._starts.get(task_id)
            try:
                for reply in ({"type": "registered"}, start):
                    if reply is not None:
                        sock.sendall(link.channel.seal(reply))
            except OSError:
                pass  # _relay sees the connection gone and reports it
        return TaskRegistered(task_id, host, port)

    def _claim(self, link: _Link, task_id: str) -> None:
        """Make ``link`` the connection of ``task_id``, or refuse it."""
        with self._lock:
            if link not in self._pending:
                raise wire.WireError("dropped before it registered")
            if task_id in self._over:
                # An attempt the run gave up (Mesos reported it lost, its agent
                # cut off from the master) that still runs: it stops at once,
                # not after retrying for its failover timeout.
                try:
                    link.sock.sendall(link.channel.seal({"type": "over"}))
                except OSError:
                    pass
                raise wire.WireError("task id %r is an attempt the run gave up: told it to stop"
                                     % task_id)
            if task_id not in self._expected:
                raise wire.WireError("unknown task id %r" % task_id)
            if task_id in self._connections:
                raise wire.WireError("task %r registered twice" % task_id)
            del self._pending[link]
            link.task_id = task_id
            self._connections[task_id] = link

    def _relay(self, link: _Link) -> None:
        """Put what a registered task sends on the events queue until its
        connection ends."""
        task_id = link.task_id
        try:
            while True:
                message = wire.receive(link.sock, link.channel)
                link.heard = time.monotonic()
                kind = message["type"]
                if kind == "log":
                    self._events.put(TaskOutput(task_id, str(message.get("stream", "stdout")),
                                                str(message.get("data", ""))))
                elif kind == "metrics":
                    self._metrics(link, message)
                elif kind in ("result", "result_data"):
                    if self.results.feed(task_id, message):
                        self._receipt(link)
                elif kind == "exit" and isinstance(message.get("code"), int):
                    self.results.exited(task_id)
                    usage, stopped = message.get("usage"), message.get("stopped")
                    self._events.put(TaskExited(
                        task_id, message["code"], usage if isinstance(usage, dict) else None,
                        stopped=stopped if isinstance(stopped, bool) else None))
        except (wire.WireError, OSError) as exc:
            if not isinstance(exc, wire.ConnectionClosed) and not self._closed.is_set():
                logger.warning("dropped the rendezvous connection of %s: %s", task_id, exc)
        finally:
            if not self._closed.is_set():
                self.results.dropped(task_id)   # frames of a result may be lost
            with self._lock:  # so a re-registration's event comes after this one
                if self._connections.get(task_id) is link:
                    del self._connections[task_id]
                    self._gone.notify_all()
                    if not self._closed.is_set():
                        self._events.put(TaskDisconnected(task_id, link.heard, "stalled")
                                         if link.stalled else TaskDisconnected(task_id))
                self._put_held(link)   # after everything this connection delivered

    @staticmethod
    def _receipt(link: _Link) -> None:
        """Tell the task its result came whole: until then it keeps it, and
        sends it again when its connection drops."""
        try:
            link.send({"type": "result_received"})
        except OSError:
            pass   # the connection ends: what it still holds is read first

    def _metrics(self, link: _Link, message: dict[str, Any]) -> None:
        """A metrics frame as a ``TaskMetrics`` event, its points placed on
        this machine's clock (``metric_clock``). A malformed frame is left
        out."""
        parsed = metric_points.parse_frame(message)
        if parsed is None:
            logger.warning("left out a malformed metrics frame from %s", link.task_id)
            return
        sent, points, dropped = parsed
        self._events.put(TaskMetrics(link.task_id, link.metric_clock.place(sent, points), dropped))

    def _ping_loop(self) -> None:
        """Ping every registered task; close the connections that stalled."""
        last = resumed = time.monotonic()
        while not self._closed.wait(self._ping_interval):
            self._refusals.flush()
            with self._lock:
                links = list(self._connections.items())
            now = time.monotonic()
            if now - last - self._ping_interval > self._stall_timeout / 2:
                resumed = now    # this process was paused: the tasks were not
            last = now
            for task_id, link in links:
                if now - max(link.heard, resumed) > self._stall_timeout:
                    self._stall(link, now)
                else:
                    self.send(task_id, {"type": "ping"})

    def _stall(self, link: _Link, now: float) -> None:
        """Close ``link``, silent too long; its thread reports it."""
        logger.warning("nothing came from %s for %.0f s: its rendezvous connection stalled",
                       self._name_of(link.task_id), now - link.heard)
        link.stalled = True
        wire.shut_down(link.sock)


def _registration(message: Mapping[str, Any]) -> tuple[str, str, int]:
    """``(task_id, host, port)`` of a well-formed register message."""
    task_id, host, port = message.get("task_id"), message.get("host"), message.get("port")
    if message["type"] != "register" or not isinstance(task_id, str) or not task_id \
            or not isinstance(host, str) or not host or isinstance(port, bool) \
            or not isinstance(port, int) or not 0 < port < 65536:
        raise wire.WireError("malformed registration %r" % (message,))
    return task_id, host, port




def _listen(host: Optional[str], port: int) -> socket.socket:
    """A listening socket on ``host``; None: every address, IPv6 and IPv4
    alike where the host can (an advertised address may be either)."""
    if host is None:
        if socket.has_dualstack_ipv6():
            return socket.create_server(("", port), family=socket.AF_INET6, backlog=128,
                                        dualstack_ipv6=True)
        host = "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=128)
