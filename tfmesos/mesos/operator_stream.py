"""A Mesos master's operator event stream, read from outside any framework
(docs/operator-http-api.md, "Events"; ``mesos.v1.master.Call.SUBSCRIBE``
and ``Event`` in include/mesos/v1/master/master.proto): ``POST /api/v1``
with ``{"type": "SUBSCRIBE"}`` answers 200 and keeps the connection open
with a RecordIO stream (docs/recordio.md) of JSON events: SUBSCRIBED (the
whole state, ``get_state``, and ``heartbeat_interval_seconds``), then each
change as the master sees it (``operator_state``) and a HEARTBEAT every
interval (Mesos: 15 s, ``DEFAULT_HEARTBEAT_INTERVAL``,
src/master/constants.hpp).

* ``OperatorStream``: one subscription, read event by event, reached and
  authenticated as ``MasterReader`` reaches the master (its leader, its
  TLS settings, ``MESOS_PRINCIPAL``/``MESOS_SECRET`` as Basic
  credentials), a 307 to the leader followed once;
* ``OperatorFeed``: a stream read by a thread of its own into an
  ``OperatorState``, for a caller that does other things meanwhile (reads
  sandboxes, waits for Ctrl-C) and asks for the state when it wants it.

Errors (``MesosError``s): ``StreamRefused``, there is no stream to be had
(a master that does not serve it: an older Mesos answers 404, others 405,
415 or 501; credentials it refuses; no JSON stream; no connection): the
caller reads the master as it would without a stream (``/master/state``,
``/master/frameworks``). ``StreamLost``, a stream that stopped being one:
it ended, nothing came for ``MISSED_HEARTBEATS`` heartbeat intervals
(Mesos' clients resubscribe after a few missed heartbeats), or it sent
what is no event (a record over ``max_event`` bytes, not RecordIO, not a
JSON object): the caller falls back likewise, saying why.
"""

import http.client
import json
import logging
import math
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Optional, TypeVar

from ..exceptions import MesosError
from ..terminal_text import MAX_QUOTED, SHOWN_AT_MOST, quoted
from . import recordio
from .http_transport import TLS, describe, open_connection, redirect_base, shutdown_connection
from .operator_state import OperatorState

logger = logging.getLogger(__name__)

MISSED_HEARTBEATS = 3          # intervals without an event after which a stream is dead
DEFAULT_HEARTBEAT = 15.0       # Mesos' interval, where SUBSCRIBED names none that makes sense
MAX_HEARTBEAT = 60.0           # a longer interval is taken as this: a dead stream is noticed
MAX_EVENT = recordio.MAX_RECORD_SIZE   # bytes of one event at most (SUBSCRIBED: the whole state)
READ_SIZE = 64 * 1024
JSON_TYPE = "application/json"

T = TypeVar("T")


class OperatorStreamError(MesosError):
    """The operator event stream cannot be read."""


class StreamRefused(OperatorStreamError):
    """The master gives no operator event stream (its HTTP status, if any,
    in ``status``): read it without one."""

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.status = status


class StreamLost(OperatorStreamError):
    """The stream stopped being one: it ended, went silent or sent what is
    no event."""


def heartbeat_interval(value: Any) -> float:
    """SUBSCRIBED's ``heartbeat_interval_seconds``: a finite one above 0, at
    most MAX_HEARTBEAT; else Mesos' DEFAULT_HEARTBEAT."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        return DEFAULT_HEARTBEAT
    return min(float(value), MAX_HEARTBEAT)


class OperatorStream:
    """A subscription to the operator event stream of the master at
    ``url`` (its base URL). Opening it reads up to SUBSCRIBED:
    ``subscribed`` (its body: ``get_state``, ``heartbeat_interval_seconds``)
    and ``heartbeat`` (the interval, seconds). ``next_event()`` then gives
    each event in order, HEARTBEATs included; ``close()`` from any thread
    ends a read in progress (StreamLost)."""

    def __init__(self, url: str, auth: Optional[str] = None, tls: TLS = None,
                 timeout: float = 10.0, max_event: int = MAX_EVENT) -> None:
        self.url = url
        self._timeout = timeout
        self._decoder = recordio.Decoder(max_event)
        self._pending: list[bytes] = []
        self._closed = False
        self._conn, self._response = self._open(url, auth, tls, timeout)
        self.heartbeat = DEFAULT_HEARTBEAT
        try:
            first = self._read_event(None)
            if first.get("type") != "SUBSCRIBED" or not isinstance(first.get("subscribed"),
                                                                     Mapping):
                raise StreamLost("the operator event stream of the Mesos master at %s began "
                                 "with %s, not SUBSCRIBED"
                                 % (self.url, str(first.get("type"))[:40]))
        except BaseException:
            self.close()
            raise
        self.subscribed: Mapping[str, Any] = first["subscribed"]
        self.heartbeat = heartbeat_interval(self.subscribed.get("heartbeat_interval_seconds"))
        self._last = time.monotonic()

    @classmethod
    def of(cls, reader: Any, max_event: int = MAX_EVENT) -> "OperatorStream":
        """The stream of the master a ``master_reads.MasterReader`` reads,
        reached and authenticated as it reaches it."""
        return cls(reader.leader(), reader.auth, reader.tls, reader.timeout, max_event)

    @property
    def bound(self) -> float:
        """Seconds without any event after which the stream is dead."""
        return MISSED_HEARTBEATS * self.heartbeat

    def _open(self, url: str, auth: Optional[str], tls: TLS, timeout: float
              ) -> "tuple[http.client.HTTPConnection, http.client.HTTPResponse]":
        body = json.dumps({"type": "SUBSCRIBE"}).encode("utf-8")
        headers = {"Content-Type": JSON_TYPE, "Accept": JSON_TYPE, "User-Agent": "tfmesos"}
        if auth:
            headers["Authorization"] = auth
        for _ in range(2):
            conn = open_connection(url, timeout, tls)
            try:
                conn.request("POST", urllib.parse.urlsplit(url).path.rstrip("/") + "/api/v1",
                             body=body, headers=headers)
                response = conn.getresponse()
            except (OSError, http.client.HTTPException, MesosError) as exc:
                shutdown_connection(conn)
                raise StreamRefused("cannot subscribe to the operator event stream of the "
                                    "Mesos master at %s: %s" % (url, describe(exc))) from None
            location = response.getheader("Location")
            if response.status == 307 and location:
                shutdown_connection(conn)
                url = self.url = redirect_base(url, location)
                continue
            if response.status != 200:
                text = _body_text(response)
                shutdown_connection(conn)
                raise StreamRefused(("the Mesos master at %s does not serve the operator event "
                                     "stream: SUBSCRIBE answered HTTP %d %s"
                                     % (url, response.status, text)).rstrip(),
                                    response.status)
            kind = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
            message = (response.getheader("Message-Content-Type") or "").split(";")[0] \
                .strip().lower()
            if kind != JSON_TYPE and not (kind == "application/recordio"
                                          and message == JSON_TYPE):
                shutdown_connection(conn)
                raise StreamRefused("the Mesos master at %s answered SUBSCRIBE with %r, not a "
                                    "JSON stream" % (url, kind[:60]))
            return conn, response
        shutdown_connection(conn)
        raise StreamRefused("the Mesos master at %s redirected SUBSCRIBE twice" % url)

    def next_event(self) -> Mapping[str, Any]:
        """The next event (a JSON object with a ``type``); StreamLost when
        the stream ended, broke, or nothing came for ``bound`` seconds."""
        return self._read_event(self._last + self.bound)

    def _read_event(self, deadline: Optional[float]) -> Mapping[str, Any]:
        """The next event; ``deadline`` (monotonic): when the stream is
        dead if none came (None: each read waits the connection's timeout,
        as before SUBSCRIBED)."""
        while not self._pending:
            wait = self._timeout if deadline is None else deadline - time.monotonic()
            if wait <= 0:
                raise self._silent()
            sock = self._conn.sock
            try:
                if sock is not None:
                    sock.settimeout(wait)
                data = self._response.read1(READ_SIZE)
            except TimeoutError:
                raise self._silent() if deadline is not None else StreamLost(
                    "the Mesos master at %s sent no SUBSCRIBED event within %.1f s"
                    % (self.url, wait)) from None
            except (OSError, http.client.HTTPException, ValueError, AttributeError) as exc:
                # AttributeError, ValueError: http.client reading a connection closed meanwhile.
                raise StreamLost(self._ended("it broke: %s" % describe(exc))) from None
            if not data:
                raise StreamLost(self._ended("it ended"))
            try:
                self._pending.extend(self._decoder.feed(data))
            except recordio.RecordIOError as exc:
                raise StreamLost("the operator event stream of the Mesos master at %s is "
                                 "refused: %s" % (self.url, exc)) from None
        record = self._pending.pop(0)
        try:
            event = json.loads(record)
        except ValueError:
            event = None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise StreamLost("the operator event stream of the Mesos master at %s is refused: "
                             "a record of %d bytes is no JSON event" % (self.url, len(record)))
        self._last = time.monotonic()
        return event

    def _silent(self) -> StreamLost:
        return StreamLost("the operator event stream of the Mesos master at %s went silent: "
                          "no event or heartbeat for %.1f s (%d heartbeat intervals)"
                          % (self.url, self.bound, MISSED_HEARTBEATS))

    def _ended(self, how: str) -> str:
        if self._closed:
            return "the operator event stream was closed"
        return "the operator event stream of the Mesos master at %s ended: %s" % (self.url, how)

    def close(self) -> None:
        self._closed = True
        shutdown_connection(self._conn)


def _body_text(response: http.client.HTTPResponse) -> str:
    try:
        return quoted(response.read(SHOWN_AT_MOST * MAX_QUOTED)) if response.length != 0 else ""
    except (OSError, http.client.HTTPException):
        return ""


class OperatorFeed:
    """An ``OperatorStream`` read by a daemon thread into an
    ``OperatorState``. ``read(function)`` calls ``function(state)`` with
    the state as the events so far made it, or raises the StreamLost that
    ended the stream; ``wait(version, timeout)`` waits for a change after
    ``version`` (the count of events that changed the state).
    ``on_change(state)``: called by that thread after each event that
    changed the state, as ``read`` calls its function (one at a time, with
    the feed's lock held: it must be short), so that a caller sees every
    change, not only the latest state."""

    def __init__(self, stream: OperatorStream,
                 on_change: Optional[Callable[[OperatorState], None]] = None) -> None:
        self._stream = stream
        self._on_change = on_change
        self._state = OperatorState(stream.subscribed.get("get_state") or {})
        self._changed = threading.Condition()
        self._error: Optional[StreamLost] = None
        self._closing = False
        self.version = 0
        self._thread = threading.Thread(target=self._run, name="tfmesos-operator-stream",
                                        daemon=True)
        self._thread.start()

    @classmethod
    def of(cls, reader: Any, on_change: Optional[Callable[[OperatorState], None]] = None,
           max_event: int = MAX_EVENT) -> "OperatorFeed":
        """The feed of the master a ``MasterReader`` reads (StreamRefused,
        StreamLost: none)."""
        return cls(OperatorStream.of(reader, max_event), on_change)

    @property
    def heartbeat(self) -> float:
        return self._stream.heartbeat

    def _run(self) -> None:
        try:
            while True:
                event = self._stream.next_event()
                with self._changed:
                    if self._state.apply(event):
                        self.version += 1
                        if self._on_change is not None:
                            self._on_change(self._state)
                        self._changed.notify_all()
        except StreamLost as exc:
            error = exc
        except Exception as exc:   # a bug must not leave a caller waiting: it is a loss
            logger.debug("operator event stream reader failed", exc_info=True)
            error = StreamLost("the operator event stream of the Mesos master at %s failed: "
                               "%s" % (self._stream.url, describe(exc)))
        with self._changed:
            self._error = error
            self._changed.notify_all()
        self._stream.close()

    def read(self, function: Callable[[OperatorState], T]) -> T:
        with self._changed:
            if self._error is not None and not self._closing:
                raise self._error
            return function(self._state)

    def wait(self, version: int, timeout: float) -> int:
        """The version once it is past ``version``, or after ``timeout``
        seconds; StreamLost when the stream ended meanwhile."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self.version == version and self._error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            if self._error is not None and not self._closing:
                raise self._error
            return self.version

    def close(self) -> None:
        with self._changed:
            self._closing = True
        self._stream.close()
        self._thread.join(5)


__all__ = ["OperatorStream", "OperatorFeed", "OperatorStreamError", "StreamRefused",
           "StreamLost", "heartbeat_interval", "MISSED_HEARTBEATS", "MAX_EVENT"]
