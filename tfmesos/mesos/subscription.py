"""The driver's SUBSCRIBE stream: find the leading master, subscribe (following
307 redirects), read its RecordIO events, notice a silent or broken stream,
re-subscribe with jittered back-off (capped at 15 s, as pymesos does), and
give up after ``connect_timeout`` without a subscription: every wait (the
detector, connecting, the answer, the back-off) is capped by the time left,
and a static list of masters none of whose names resolve fails at once, one
whose every master refuses connections (nothing listens at the port) after
``refused_timeout`` -- before the first subscription only: once a master
was reached, a refusal is a master restarting or failing over.

What it learns goes on the driver's queue, in order, as ``Received``,
``StreamLost`` or ``Fatal``; the driver's dispatcher thread calls the
scheduler's callbacks from there.
"""

import http.client
import json
import logging
import queue
import random
import threading
import time
import urllib.parse
from typing import Any, Optional

from addict import Dict

from ..exceptions import DriverAborted, MesosConnectionError, MesosError
from ..terminal_text import quoted
from . import calls, recordio
from .decoding import decode_event
from .detector import UNREACHED_WAIT, Detector, NoLeader, StaticDetector
from .http_transport import (
    UnknownHost,
    api_path,
    describe,
    headers,
    open_connection,
    redirect_base,
    shutdown_connection,
    shutdown_socket,
)
from .stream_items import Fatal, Received, StreamLost
from .subscribe_answer import Unrecoverable, check_stream, heartbeat_interval, refusal

logger = logging.getLogger(__name__)

_MAX_REDIRECTS = 5
MAX_UNAVAILABLE_BODY = 4096   # bytes of a 503's body read for its words


def unavailable(url: str, response: http.client.HTTPResponse) -> str:
    """Why the master at ``url`` answered SUBSCRIBE with 503: it has no
    leader yet (Mesos' words, src/master/http.cpp: "No leader elected",
    "Not the leading master"; or none), else what its body says (the
    embedded master out of file descriptors), in one line."""
    try:
        said = response.read(MAX_UNAVAILABLE_BODY).decode("utf-8", "replace").strip()
    except (OSError, http.client.HTTPException):
        said = ""
    if not said or "lead" in said.lower():
        return "the Mesos master at %s has no leader yet (503)" % url
    return "the Mesos master at %s is unavailable (503): %s" % (url, quoted(said))


class _StreamEnded(Exception):
    """The subscription stream ended; re-subscribe."""


class _OutOfTime(MesosConnectionError):
    """``connect_timeout`` ran out during an attempt."""


class Subscription:
    """The stream of one driver. ``framework`` is the driver's FrameworkInfo
    dict (its ``id`` is set from SUBSCRIBED, so re-subscriptions fail over);
    ``stopping`` is the driver's stop event; ``options`` holds ``timeout``,
    ``ssl``, ``auth``, ``heartbeat_misses``, ``backoff_cap``, ``connect_timeout``,
    ``refused_timeout``, ``quiet_retries`` (no warning while no master is
    reached: at INFO level).
    """

    def __init__(self, framework: dict[str, Any], detector: Detector, master_text: str,
                 events: queue.Queue[object], stopping: threading.Event, **options: Any) -> None:
        self.framework = framework
        self._detector = detector
        self._master_text = master_text
        self._events = events
        self._stopping = stopping
        self._timeout = options["timeout"]
        self._ssl = options["ssl"]
        self._auth = options["auth"]
        self._heartbeat_misses = options["heartbeat_misses"]
        self._backoff_cap = options["backoff_cap"]
        self._connect_timeout = options["connect_timeout"]
        self._refused_timeout = options.get("refused_timeout", self._connect_timeout)
        self._refused_since: Optional[float] = None   # every master refused every attempt since
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None
        self.leader_url: Optional[str] = None
        self.stream_id: Optional[str] = None
        self.subscribed = False
        self.asking = False     # a SUBSCRIBE sent, its answer not read yet
        self._answered = threading.Event()   # a SUBSCRIBED was read (ever)
        self.master_info: Any = None   # the leader's MasterInfo (an addict.Dict), once subscribed
        self.last_url: Optional[str] = None   # the master last subscribed to, kept once lost
        self._leader_news: Optional[str] = None   # why watch_leader closed the stream
        self.closing = False  # the driver is stopping: a closed stream is expected
        self.suppressed_roles: set[str] = set()   # kept suppressed across re-subscriptions
        self._give_up_at = time.monotonic() + self._connect_timeout
        self._warned = bool(options.get("quiet_retries"))   # a caller that says it itself
        self._subscribed_once = False

    def stop_subscribing(self) -> None:
        """The driver stops: a stream that ends from now on is expected, and
        a SUBSCRIBE not sent yet is not sent (one sent is ``asking``: its
        answer is what ``await_answer`` waits for). Under the lock that
        ``_post`` sets ``asking`` under: a stop never misses a SUBSCRIBE
        the master may take."""
        with self._lock:
            self.closing = True

    def await_answer(self, timeout: float) -> bool:
        """Whether subscribed, once the answer to a SUBSCRIBE in flight was
        read (``timeout`` s at most)."""
        if self.asking and not self.subscribed:
            self._answered.wait(timeout)
        return self.subscribed

    def state(self) -> tuple[Optional[str], Optional[str], bool]:
        """``(leader URL, Mesos-Stream-Id, subscribed)``, read together."""
        with self._lock:
            return self.leader_url, self.stream_id, self.subscribed

    def masters_known(self) -> list[str]:
        """Where the framework may be subscribed to again: the master last
        subscribed to, then those the detector names now (no wait; none
        when it cannot say)."""
        urls = [self.last_url] if self.last_url else []
        try:
            found = self._detector.candidates()
        except (MesosError, RuntimeError) as exc:   # RuntimeError: a closed detector
            logger.debug("no candidates from the detector: %s", exc)
            found = ()
        return urls + [url for url in found if url not in urls]

    def interrupt(self) -> None:
        """Unblock the stream thread (it notices and closes the connection)
        and, once the driver is stopping, the leader-watch thread."""
        with self._lock:
            conn = self._conn
        shutdown_socket(conn)
        changed = getattr(self._detector, "leaders_changed", None)
        if changed is not None and self._stopping.is_set():
            changed.set()   # wakes watch_leader, which sees the stop

    def run(self) -> None:
        """The stream thread. An error it does not expect (a bug, a detector
        that fails) stops the driver as ``DriverAborted`` rather than ending
        the thread silently, which would leave the driver waiting forever."""
        try:
            self._run()
        except Exception as exc:  # noqa: B902 - reported through the queue
            logger.debug("the subscription stream failed", exc_info=True)
            error = DriverAborted("the Mesos subscription stream failed: %s: %s"
                                  % (type(exc).__name__, exc))
            error.__cause__ = exc
            self._events.put(Fatal(error))

    def _run(self) -> None:
        backoff = 0.5
        self._give_up_at = time.monotonic() + self._connect_timeout
        last_error = "no attempt yet"
        while not self._stopping.is_set():
            if self._time_left() <= 0:
                self._events.put(Fatal(MesosConnectionError(
                    "could not subscribe to the Mesos master %s for %.0f s: %s"
                    % (self._master_text, self._connect_timeout, last_error))))
                return
            try:
                self._subscribe_once()
                last_error = "the master closed the subscription stream"
            except Unrecoverable as fatal:
                self._events.put(Fatal(fatal.error))
                return
            except _OutOfTime:
                pass   # the error before says more
            except (OSError, http.client.HTTPException, recordio.RecordIOError,
                    MesosError, _StreamEnded, ValueError, AttributeError) as exc:
                # AttributeError: http.client reading a connection shut down meanwhile.
                # The detector's look waited a second or the time left: not said
                # beside the driver's own wait.
                last_error = (exc.unwaited if isinstance(exc, NoLeader) else
                              str(exc) if isinstance(exc, _StreamEnded) else describe(exc))
            if self._stopping.is_set() or self.closing:
                return
            with self._lock:
                lost, self.subscribed = self.subscribed, False
                news, self._leader_news = self._leader_news, None
                if lost:
                    self._conn = None
            if lost:
                self._give_up_at = time.monotonic() + self._connect_timeout
                backoff = 0.5
                if news is not None:   # we closed it ourselves: the master did nothing
                    logger.warning("%s; re-subscribing", news)
                else:
                    logger.warning("lost the Mesos subscription (%s); re-subscribing",
                                   last_error)
                self._events.put(StreamLost())
            elif self._time_left() > 0:
                self._retrying(last_error)
            self._stopping.wait(max(0.0, min(backoff * random.uniform(0.8, 1.2),
                                             self._time_left(), self._refusals_left())))
            backoff = min(backoff * 2, self._backoff_cap)

    def _retrying(self, last_error: str) -> None:
        """Say that the master is not reachable: as a warning the first time
        before any subscription (a user waits), else at INFO level."""
        if not self._warned:
            self._warned = True
            logger.warning("cannot reach the Mesos master %s yet (%s); retrying for %.0f s more",
                           self._master_text, last_error,
                           max(0.0, min(self._time_left(), self._refusals_left())))
        else:
            logger.info("Mesos master not reachable yet (%s); retrying", last_error)

    def _time_left(self) -> float:
        """Seconds until the driver gives up (the subscription's absence is
        bounded by ``connect_timeout``)."""
        return self._give_up_at - time.monotonic()

    def _refusals_left(self) -> float:
        """Seconds until refusals alone end the wait (the last attempt is
        made then), or infinity while no master refuses."""
        if self._refused_since is None:
            return float("inf")
        return self._refused_since + self._refused_timeout - time.monotonic()

    def _budget(self) -> float:
        """Seconds the next step of a subscription attempt may take: the
        call ``timeout``, capped by the time left."""
        left = self._time_left()
        if left <= 0:
            raise _OutOfTime("no subscription within %.0f s" % self._connect_timeout)
        return min(self._timeout, left)

    def watch_leader(self) -> None:
        """The leader-watch thread: a new leader in ZooKeeper ends the stream,
        so that the stream thread subscribes to it."""
        changed = getattr(self._detector, "leaders_changed", None)
        if changed is None or isinstance(self._detector, StaticDetector):
            return   # a static list of masters names no new leader
        while not self._stopping.is_set():
            if changed.wait(0.5):
                if self._stopping.is_set():
                    return
                changed.clear()
                news = "the Mesos leader changed (%s)" % self._named_leader()
                with self._lock:
                    self.leader_url = None
                    conn = self._conn
                    if self.subscribed:   # said when the stream thread sees it end
                        self._leader_news = news
                logger.debug("%s; closing the subscription", news)
                shutdown_socket(conn)

    def _named_leader(self) -> str:
        """What the detector names as the leader now, in words: "ZooKeeper
        names HOST:PORT now" (or names none: why)."""
        where = "ZooKeeper" if getattr(self._detector, "zk_url", None) else "the detector"
        try:
            url = self._detector.leader(0.0)
        except (MesosError, RuntimeError) as exc:   # RuntimeError: closed meanwhile
            said = exc.unwaited if isinstance(exc, NoLeader) else str(exc)
            return "%s names no leader now: %s" % (where, said)
        return "%s names %s now" % (where, urllib.parse.urlsplit(url).netloc or url)

    def _candidates(self) -> list[str]:
        urls = [self.leader_url] if self.leader_url else []
        for url in self._detector.candidates() or [self._leader()]:
            if url not in urls:
                urls.append(url)
        return urls

    def _leader(self) -> str:
        """The detector's leader. Before the first subscription, while the
        detector never reached its servers (ZooKeeper), it is waited for a
        second at a time, and whether they all refuse is looked at in
        between (``_check_detector_listening``); once reached, whether it
        refuses the run's credentials (``Detector.denied``)."""
        if self._subscribed_once:
            return self._detector.leader(self._budget())
        if self._detector.reached():
            # A second at a time: credentials ZooKeeper refuses end the wait.
            try:
                return self._detector.leader(min(self._budget(), UNREACHED_WAIT))
            except MesosConnectionError:
                denied = self._detector.denied()
                if denied is not None:
                    raise Unrecoverable(MesosConnectionError(denied)) from None
                raise
        try:
            return self._detector.leader(
                min(self._budget(), UNREACHED_WAIT, max(0.0, self._refusals_left())))
        except MesosConnectionError:
            self._check_detector_listening()
            raise

    def _check_detector_listening(self) -> None:
        """Give up after ``refused_timeout`` when every server the detector
        reads refused every look since (nothing listens there), as for a
        static list of masters (``_check_listening``)."""
        refusal = self._detector.refusing()
        if self._refused_for_long(refusal is not None):
            raise Unrecoverable(MesosConnectionError.about(
                "%s (or {connect_timeout} to wait longer)", refusal))

    def _refused_for_long(self, refused: bool) -> bool:
        """Whether every look since ``refused_timeout`` ago was refused,
        this one (``refused``) included."""
        if not refused:
            self._refused_since = None
            return False
        now = time.monotonic()
        if self._refused_since is None:
            self._refused_since = now
        return now - self._refused_since >= self._refused_timeout

    def _subscribe_once(self) -> None:
        last: Optional[Exception] = None
        unknown: set[str] = set()   # masters whose host name does not resolve
        refused: set[str] = set()   # masters where nothing listens at the port
        for first in self._candidates():
            url = first
            for _ in range(_MAX_REDIRECTS):
                try:
                    redirect = self._subscribe_at(url)
                except _OutOfTime as exc:
                    raise (last or exc) from exc
                except UnknownHost as exc:
                    if url == first:
                        unknown.add(first)
                    last = exc
                    break
                except (OSError, http.client.HTTPException, MesosConnectionError) as exc:
                    if isinstance(exc, ConnectionRefusedError) and url == first:
                        refused.add(first)
                    last = exc
                    break
                if redirect is None:
                    return  # a stream was read to its end
                url = redirect
        self._check_resolvable(unknown, last)
        self._check_listening(refused, unknown)
        raise last or MesosConnectionError("no Mesos master known")

    def _check_resolvable(self, unknown: set[str], last: Optional[Exception]) -> None:
        """Before the first subscription, give up at once when no master of a
        static list resolves: waiting cannot help (a DNS server that does not
        answer is retried, and so is everything once subscribed)."""
        if self._subscribed_once or not isinstance(self._detector, StaticDetector) or \
                not unknown.issuperset(self._detector.urls):
            return
        if len(self._detector.urls) == 1:
            error = MesosConnectionError("%s: fix the master address" % last)
        else:
            hosts = ", ".join(urllib.parse.urlsplit(url).hostname or url
                              for url in self._detector.urls)
            error = MesosConnectionError("none of the Mesos masters' host names resolve (%s): "
                                         "fix the master address" % hosts)
        raise Unrecoverable(error)

    def _check_listening(self, refused: set[str], unknown: set[str]) -> None:
        """Before the first subscription, give up after ``refused_timeout``
        when every master of a static list refused every connection (or does
        not resolve): nothing listens there, and a master that starts takes
        less than that to listen."""
        urls = self._detector.urls if isinstance(self._detector, StaticDetector) else None
        if not self._refused_for_long(
                not self._subscribed_once and urls is not None and bool(refused)
                and (refused | unknown).issuperset(urls)):
            return
        places = ", ".join(urllib.parse.urlsplit(url).netloc for url in urls or ()
                           if url in refused)
        raise Unrecoverable(MesosConnectionError.about(
            "nothing listens at %s: check the port (or {connect_timeout} to wait longer)",
            places))

    def _subscribe_at(self, url: str) -> Optional[str]:
        """Subscribe at ``url``: read the stream (returns None when it ends),
        or return the URL the master redirected to. Until SUBSCRIBED, every
        step waits ``_budget()`` at most."""
        body = json.dumps(calls.subscribe(self.framework, self.suppressed_roles))
        conn = open_connection(url, self._budget(), self._ssl)
        with self._lock:
            if self._stopping.is_set():
                return None
            self._conn = conn
        try:
            response = self._post(url, conn, body)
            if response is None:
                return None
            if response.status == 307:
                location = response.getheader("Location") or ""
                response.read()
                return redirect_base(url, location)
            if response.status == 503:
                raise MesosConnectionError(unavailable(url, response))
            if response.status != 200:
                raise refusal(url, response, self._auth)
            check_stream(url, response)
            self._read_stream(url, conn, response)
            return None
        finally:
            shutdown_connection(conn)
            with self._lock:
                self.asking = False
                if self._conn is conn:
                    self._conn = None

    def _post(self, url: str, conn: http.client.HTTPConnection,
              body: str) -> Optional[http.client.HTTPResponse]:
        """Connect, send SUBSCRIBE and read the answer's headers, each step
        within the budget; None when the driver stopped meanwhile."""
        budget = self._budget()
        try:
            conn.connect()
            if self._stopping.is_set():
                return None   # interrupt() came before the socket existed
            budget = self._budget()
            conn.sock.settimeout(budget)
            # From here the master may take it: a stop waits for its answer
            # (await_answer), not while a master that is not there is
            # being connected to (up to ANSWER_WAIT of every early Ctrl-C).
            with self._lock:
                if self.closing:
                    return None   # stop() came first: it waits for no answer
                self.asking = True
            conn.request("POST", api_path(url), body=body.encode("utf-8"),
                         headers=headers(self._auth))
            return conn.getresponse()
        except TimeoutError as exc:
            what = "answer" if conn.sock is not None else "accept the connection"
            raise MesosConnectionError("the Mesos master at %s did not %s within %.1f s"
                                       % (url, what, budget)) from exc

    def _read_stream(self, url: str, conn: http.client.HTTPConnection,
                     response: http.client.HTTPResponse) -> None:
        stream_id = response.getheader("Mesos-Stream-Id")
        decoder = recordio.Decoder()
        while not self._stopping.is_set():
            try:
                data = response.read1(65536)
            except TimeoutError as exc:
                waited = (conn.sock.gettimeout() if conn.sock else None) or 0.0
                if not self.subscribed:
                    raise MesosConnectionError("the master at %s sent no SUBSCRIBED event "
                                               "within %.1f s" % (url, waited)) from exc
                raise _StreamEnded("no event from the master for %.1f s (missed heartbeats)"
                                   % waited) from exc
            if not data:
                return
            for record in decoder.feed(data):
                event = decode_event(record)
                kind = event.get("type")
                if kind == "SUBSCRIBED":
                    self._on_subscribed(url, conn, stream_id, event.subscribed)
                elif kind == "ERROR":
                    raise Unrecoverable(MesosError("Mesos master error: %s"
                                                    % quoted(str(event.error.message))))
                elif kind != "HEARTBEAT":
                    self._events.put(Received(kind, event))

    def _on_subscribed(self, url: str, conn: http.client.HTTPConnection,
                       stream_id: Optional[str], subscribed: Any) -> None:
        if not stream_id:
            raise Unrecoverable(MesosError("the master at %s sent no Mesos-Stream-Id header"
                                            % url))
        interval = heartbeat_interval(subscribed.get("heartbeat_interval_seconds"))
        if conn.sock is not None:
            conn.sock.settimeout(interval * self._heartbeat_misses)
        self._warned = self._subscribed_once = True
        with self._lock:
            self.framework["id"] = {"value": subscribed.framework_id.value}
            self.leader_url = self.last_url = url
            self.stream_id = stream_id
            self.subscribed = True
            self.asking = False
            self.master_info = subscribed.get("master_info") or Dict()
        self._answered.set()
        self._events.put(Received("SUBSCRIBED", subscribed))
