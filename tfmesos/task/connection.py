"""The task's side of the rendezvous: what the scheduler put in the task's
environment (``TaskEnv``) and the connection to the scheduler.

``Connection.register`` connects, answers the scheduler's challenge and
registers (``wire`` has the protocol); ``receive`` answers the scheduler's
pings. When the connection drops later (or nothing came through it for
``IDLE_TIMEOUT``: a network partition leaves TCP silent), and not because
the scheduler said ``stop`` or the task closed it, a background thread
registers again on a new connection for up to ``REREGISTER_GRACE`` seconds;
a refused connection means the scheduler is gone and ends that at once.
Meanwhile ``receive`` waits, and ``send`` never blocks: it keeps the last
``SEND_BUFFER`` messages and sends them once registered again, so log
forwarding survives a reconnection; it raises (``ConnectionError``) only
once the scheduler is gone for good. A frame the kernel took before a drop
is lost with the connection: ``generation`` counts the connections lost, so
that a sender of frames that belong together (``result_file``) sends them
again when it changed meanwhile, and ``wait_receipt`` waits for the
scheduler's word that they all came (a drop noticed only after the last
frame went loses them too).

A run that survives its scheduler (``TaskEnv.failover_timeout`` > 0:
``tfrun --failover``, ``--detach``) gives a new scheduler the time to take
the framework over: after a drop the task registers again for up to
``failover_timeout`` seconds, a refused connection is not the end, and
between tries it asks the master where the run's rendezvous is now
(``rediscover``, loaded then): a new address is tried next, a framework
that Mesos says is over ends it at once. A new scheduler refuses the task
until it adopted it: that is tried again too. ``flush`` waits for a
registration and the kept messages to go out (the exit frame of a command
that ended meanwhile), ``abandon`` stops that wait (SIGTERM).
"""

import collections
import random
import socket
import sys
import threading
import time

from ..protocol import task_env, wire
from ..protocol.hostport import format_address, lookup_host
from .replica_guard import SIGNAL_SLICE
from .task_environ import ProtocolMismatchError, TaskError

IDLE_TIMEOUT = task_env.SCHEDULER_SILENCE   # the scheduler pings every 10 s
CONNECT_TIMEOUT = 30.0    # the first registration, all tries together
HANDSHAKE_TIMEOUT = 10.0  # one try: connect, challenge, confirmation
REREGISTER_GRACE = 30.0   # registering again after a dropped connection
RETRY_DELAYS = (0.1, 1.0)  # first and longest wait between tries
FAILOVER_DELAYS = (0.05, 5.0)  # the same while waiting for a new scheduler (each asks the master)
# For this long after the loss the master is asked every FAILOVER_DELAYS[0]
# (then the wait doubles): a relaunched scheduler (tfmesos attach's new task)
# takes over within about a second, and doubling from the start left the
# tasks 0.5-2 s behind it (tries at 0.5, 1.5, 3.5 s); every 0.25 s left
# them 0.125 s behind on average, every 0.1 s 0.05 s (the last of two
# workers 0.1 s behind as often as not: the run's lines come back with
# its last task). 100 questions at most, and a run's tasks together ask
# at most FAILOVER_READS_PER_SECOND (``failover_delays``): from 4 tasks
# on, each asks less often than every FAILOVER_DELAYS[0].
FAILOVER_QUICK = 5.0
# What all of a run's tasks ask of the master together while quick: each
# /master/frameworks answer carries the framework's tasks, so a big job's
# tasks ask less often (1,000 tasks: each every 5 s, 200 reads a second).
FAILOVER_READS_PER_SECOND = 64.0
SEND_BUFFER = 1000        # messages kept while reconnecting


class _Link:
    """One registered connection: its socket and channel. Its socket is
    closed when the last thread that holds the link lets go of it
    (``_lost`` and ``close`` only shut it down): until then its descriptor's
    number is not reused."""

    def __init__(self, sock, channel):
        self.sock = sock
        self.channel = channel

    def __del__(self):
        try:
            self.sock.close()
        except Exception:
            pass


class Connection:
    """The task's end of the rendezvous connection: ``register``, then
    ``send`` / ``receive`` until ``close``."""

    def __init__(self, env):
        self.env = env
        self.failover = env.failover_timeout > 0   # a new scheduler may take over
        self._address = env.rendezvous   # where the rendezvous is (a new scheduler's: moves)
        self._rediscovery = None         # rediscover.Rediscovery, once needed
        self._abandoned = False          # flush waits no more
        self._received = False           # the scheduler has the result (``result_received``)
        self._registration: dict = {}    # register() sets it, before any handshake
        self._link = None
        self.generation = 0      # connections lost so far
        self._state = "new"      # new -> connected <-> reconnecting -> gone
        self._gone = "not registered"
        self._stopping = False   # the scheduler said stop: a drop is the end
        self._started = False
        self._unsent: collections.deque[dict] = collections.deque(maxlen=SEND_BUFFER)
        self._lock = threading.Condition()
        self._send_lock = threading.Lock()  # frames and sequence numbers stay in order
        self._closing = threading.Event()

    def register(self, host, port):
        """Register ``host:port`` as this task's address; TaskError when the
        scheduler cannot be reached within ``CONNECT_TIMEOUT``."""
        self._registration = {"type": "register", "task_id": self.env.task_id,
                              "host": host, "port": port}
        self._attach(self._register_until(time.monotonic() + CONNECT_TIMEOUT, False, first=True))

    def send(self, message):
        """Send ``message``, or keep it while reconnecting."""
        with self._send_lock:
            with self._lock:
                link, state = self._link, self._state
            if link is None:
                if state != "reconnecting":
                    raise ConnectionError("no connection to the tfmesos scheduler: %s"
                                          % self._gone)
                self._unsent.append(message)
                return
            try:
                wire.send(link.sock, link.channel, message)
            except OSError as exc:
                self._unsent.append(message)
                self._lost(link, exc)

    def receive(self):
        """The next message other than a ping or a repeated start; waits
        through a reconnection; ConnectionClosed once the scheduler is gone."""
        while True:
            link = self._current()
            try:
                message = wire.receive(link.sock, link.channel)
            except socket.timeout:
                self._lost(link, "the scheduler was silent for %.0f s" % IDLE_TIMEOUT)
                continue
            except (wire.WireError, OSError) as exc:
                self._lost(link, exc)
                continue
            kind = message["type"]
            if kind == "ping":
                self._pong(link)
                continue
            if kind == "start" and self._started:
                continue  # a start comes again after each re-registration
            if kind == "result_received":
                with self._lock:
                    self._received = True
                    self._lock.notify_all()
                continue
            self._started = self._started or kind == "start"
            if kind == "stop":
                with self._lock:
                    self._stopping = True
            return message

    def _pong(self, link):
        """Answer a ping: the scheduler counts a connection it hears nothing
        from as stalled. Skipped while another frame is being sent (the
        scheduler hears that one), so that reading never waits for sending."""
        if not self._send_lock.acquire(blocking=False):
            return
        try:
            with self._lock:
                current = self._link is link
            if current:
                wire.send(link.sock, link.channel, {"type": "pong"})
        except OSError as exc:
            self._lost(link, exc)
        finally:
            self._send_lock.release()

    def flush(self, timeout=None):
        """Wait until the messages ``send`` kept while reconnecting went out
        on a registered connection: True once they did (at once when none
        are kept), False when the scheduler is gone for good, ``abandon``
        was called or ``timeout`` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def settled():
            return self._state != "reconnecting" or self._abandoned

        while True:
            with self._lock:
                while not settled():
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._lock.wait(SIGNAL_SLICE if left is None else min(left, SIGNAL_SLICE))
                if self._abandoned:
                    return False
            with self._send_lock:   # an _attach under way has sent what was kept
                with self._lock:
                    if self._state == "connected":
                        return not self._unsent
                    if self._state != "reconnecting":
                        return False
            # lost again while sending what was kept: wait for the next registration

    def expect_receipt(self):
        """A copy of ``tfmesos.run``'s result is about to be sent: the
        generation to pass ``wait_receipt``."""
        with self._lock:
            self._received = False
            return self.generation

    def wait_receipt(self, generation, timeout):
        """Whether the scheduler said it has the result (``result_received``),
        waiting up to ``timeout`` s while the connection of ``generation``
        (``expect_receipt``'s) holds, or registers again: False at once
        when it was lost since (the copy is sent again), or the scheduler
        said stop or is gone (nothing reads its answer any more), or
        ``abandon`` was called. A receipt comes only while ``receive`` is
        called (the replica's watch of its scheduler)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self._received:
                left = deadline - time.monotonic()
                if (left <= 0 or self.generation != generation or self._stopping
                        or self._abandoned or self._state not in ("connected", "reconnecting")):
                    return False
                self._lock.wait(min(left, SIGNAL_SLICE))
            return True

    def abandon(self):
        """Stop ``flush`` from waiting (the task is being killed)."""
        with self._lock:
            self._abandoned = True
            self._lock.notify_all()

    def close(self):
        """End the connection for good: no reconnection after this."""
        self._closing.set()
        with self._lock:
            link, self._link = self._link, None
            self._state, self._gone = "gone", "connection closed"
            self._lock.notify_all()
        if link is not None:
            _shut_down(link.sock)   # closed with the link (a reader may be on it)

    # -- registering ----------------------------------------------------------

    def _register_until(self, deadline, refused_is_final, first=False):
        """A registered ``_Link``, trying until ``deadline``; TaskError if none.
        With failover, a refusal is never final, and the master is asked
        between tries where the rendezvous is now (TaskError when it says
        the run is over). A scheduler of another protocol is final but for
        a new scheduler of a failover run (one of this protocol may take
        the run over before the deadline)."""
        delays = failover_delays(self.env.failover_tasks) if self.failover else RETRY_DELAYS
        refused_is_final = refused_is_final and not self.failover
        started = time.monotonic()
        delay = delays[0]
        error: Exception
        while True:
            try:
                return self._handshake(deadline)
            except ConnectionRefusedError as exc:
                if refused_is_final:
                    raise TaskError("the tfmesos scheduler at %s is gone (%s)"
                                    % (self._where(), exc)) from None
                error = exc
            except wire.ProtocolMismatch as exc:
                if first or not self.failover:
                    raise ProtocolMismatchError("cannot register with the tfmesos scheduler at "
                                                "%s: %s" % (self._where(), exc)) from None
                error = exc
            except (wire.WireError, OSError) as exc:
                error = exc
            if self._closing.is_set():
                raise TaskError("the connection was closed")
            if self.failover and self._rediscover(deadline):
                continue   # a new address: try it at once
            if time.monotonic() + delay > deadline:
                raise TaskError("cannot register with the tfmesos scheduler at %s: %s"
                                % (self._where(), error))
            # Spread out: a job's tasks lose their scheduler at one moment, and
            # each try asks the master (/master/frameworks) while failing over.
            self._closing.wait(delay * random.uniform(0.75, 1.25) if self.failover else delay)
            delay = next_delay(delay, delays, time.monotonic() - started, self.failover)

    def _where(self):
        return format_address(*self._address)

    def _rediscover(self, deadline):
        """Ask the master where the rendezvous is: True when it moved (the
        next try goes there); TaskError when Mesos says the run is over."""
        if time.monotonic() >= deadline:
            return False
        from . import rediscover  # the failover path only: http.client is not cheap
        if self._rediscovery is None:
            self._rediscovery = rediscover.Rediscovery(self.env.master, self.env.framework_id)
        try:
            address = self._rediscovery.rendezvous(max(deadline - time.monotonic(), 0.5))
        except rediscover.FrameworkGone as exc:
            raise TaskError("the run is over: %s" % exc) from None
        if address is None or address == self._address:
            return False
        self._address = address
        return True

    def _handshake(self, deadline):
        """One try: connect, answer the challenge, register, get the confirmation."""
        timeout = min(HANDSHAKE_TIMEOUT, max(deadline - time.monotonic(), 0.5))
        host, port = self._address
        # (typeshed has the host a str; getaddrinfo takes bytes as well)
        sock = socket.create_connection((lookup_host(host), port),  # type: ignore[arg-type]
                                        timeout=timeout)
        wire.no_delay(sock)
        try:
            until = time.monotonic() + timeout
            payload = wire.read_frame(sock, wire.SMALL_FRAME, until)
            channel = wire.Channel.from_challenge(self.env.secret, payload)
            wire.send(sock, channel, self._registration)
            channel.bind(self.env.task_id)
            reply = wire.receive(sock, channel, wire.SMALL_FRAME, until)
            if reply["type"] == "over":
                raise TaskError("the scheduler gave this attempt up (Mesos reported it ended "
                                "or lost, and the run replaced it)")
            if reply["type"] != "registered":
                raise wire.WireError("the scheduler answered %r to the registration"
                                     % reply["type"])
            wire.enable_keepalive(sock)
            sock.settimeout(IDLE_TIMEOUT)
        except BaseException:
            sock.close()
            raise
        return _Link(sock, channel)

    def _attach(self, link):
        """Make ``link`` the connection, then send what was kept meanwhile."""
        with self._send_lock:
            with self._lock:
                if self._closing.is_set():
                    _close(link.sock)
                    return
                self._link, self._state = link, "connected"
                self._lock.notify_all()
            while self._unsent:
                try:
                    wire.send(link.sock, link.channel, self._unsent[0])
                except OSError as exc:
                    self._lost(link, exc)
                    return
                self._unsent.popleft()

    # -- losing the connection ------------------------------------------------

    def _current(self):
        with self._lock:
            while self._state == "reconnecting":
                self._lock.wait()
            if self._state != "connected":
                raise wire.ConnectionClosed(self._gone)
            return self._link

    def _lost(self, link: "_Link", reason: object) -> None:
        """``link`` failed: register again, unless the end was expected."""
        with self._lock:
            if self._link is not link:
                return  # already handled
            self._link = None
            self.generation += 1
            final = self._stopping or self._closing.is_set()
            if final:
                self._state, self._gone = "gone", "connection closed (%s)" % reason
            else:
                self._state = "reconnecting"
            self._lock.notify_all()   # a wait_receipt: the copy is sent again
        # Shut down, not closed: that wakes every thread blocked on it (the
        # reader's poll, a sender's), and its descriptor stays this socket's
        # while any thread holds the link (``_Link.__del__`` closes it).
        # Closed here, its number went to the reconnecting thread's new
        # socket while the woken reader had yet to look again: its poll found
        # nothing to read on the new socket and slept on, waiting on the old
        # one only (poll registers its waits on its first pass), for
        # IDLE_TIMEOUT; nobody read the new connection (its receipt, the
        # pings), and the scheduler closed it as stalled.
        _shut_down(link.sock)
        if not final:
            threading.Thread(target=self._reconnect, args=(reason,), daemon=True,
                             name="tfmesos-reconnect").start()

    def _reconnect(self, reason):
        grace = self.env.failover_timeout if self.failover else REREGISTER_GRACE
        tell("tfmesos: lost the connection to the scheduler (%s); registering again%s"
              % (reason, " (up to %g s for a scheduler to take the run over)" % grace
                 if self.failover else ""))
        try:
            link = self._register_until(time.monotonic() + grace, True)
        except TaskError as exc:
            with self._lock:
                if self._state == "reconnecting":
                    self._state, self._gone = "gone", str(exc)
                self._lock.notify_all()
            tell("tfmesos: %s; giving up" % exc)
            return
        self._attach(link)
        tell("tfmesos: registered again%s" % (" at " + self._where() if self.failover else ""))


def tell(line):
    """``line`` on the task's stderr, its sandbox's: one that cannot be
    written (a full disk) stops nothing (the reconnecting thread, the
    command's pumps)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass


def failover_delays(tasks):
    """FAILOVER_DELAYS for one of a run's ``tasks``: the first wait long
    enough that all of them together ask the master at most
    FAILOVER_READS_PER_SECOND times a second (never longer than the
    longest wait)."""
    first, longest = FAILOVER_DELAYS
    return (min(max(first, tasks / FAILOVER_READS_PER_SECOND), longest), longest)


def next_delay(delay, delays, elapsed, failover):
    """The wait before the next try to register, after one of ``delay``
    seconds, ``elapsed`` seconds into the tries: ``delays`` (first,
    longest) doubling, but for ``FAILOVER_QUICK`` seconds the first one again
    while waiting for a new scheduler (``failover``)."""
    if failover and elapsed < FAILOVER_QUICK:
        return delays[0]
    return min(delay * 2, delays[1])


def _shut_down(sock):
    """Wake whoever reads or writes ``sock`` with an end of file or an error."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _close(sock):
    """Wake a reader of ``sock`` with an end of file, then close it (a
    socket no other thread has)."""
    _shut_down(sock)
    sock.close()
