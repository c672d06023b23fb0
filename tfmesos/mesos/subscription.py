"""The driver's SUBSCRIBE stream: find the leading master, subscribe (following
307 redirects), read its RecordIO events, notice a silent or broken stream,
re-subscribe with jittered back-off (capped at 15 s, as pymesos does), and
give up after ``connect_timeout`` without a subscription.

What it learns goes on the driver's queue, in order, as ``Received``,
``StreamLost`` or ``Fatal``; the driver's dispatcher thread calls the
scheduler's callbacks from there.
"""

import dataclasses
import http.client
import json
import logging
import random
import threading
import time
from typing import Any

from addict import Dict

from ..exceptions import MesosCallError, MesosConnectionError, MesosError
from . import calls, recordio
from .decoding import decode_event
from .http_transport import (api_path, describe, headers, open_connection, redirect_base,
                             shutdown_connection, shutdown_socket)

logger = logging.getLogger(__name__)

_MAX_REDIRECTS = 5
# SUBSCRIBE answers that re-subscribing cannot fix (bad call, credentials).
_FATAL_STATUSES = (400, 401, 403, 404, 415)


@dataclasses.dataclass(frozen=True)
class Received:
    """An event the master sent (``kind`` is its ``type``)."""

    kind: str
    event: Any


@dataclasses.dataclass(frozen=True)
class StreamLost:
    """The subscription is gone; the stream thread re-subscribes."""


@dataclasses.dataclass(frozen=True)
class Fatal:
    """Reconnecting cannot help: ``error`` stops the driver."""

    error: BaseException


class _StreamEnded(Exception):
    """The subscription stream ended; re-subscribe."""


class _Unrecoverable(Exception):
    """Stop the driver: reconnecting cannot help."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


class Subscription:
    """The stream of one driver. ``framework`` is the driver's FrameworkInfo
    dict (its ``id`` is set from SUBSCRIBED, so re-subscriptions fail over);
    ``stopping`` is the driver's stop event; ``options`` holds ``timeout``,
    ``ssl``, ``auth``, ``heartbeat_misses``, ``backoff_cap``, ``connect_timeout``.
    """

    def __init__(self, framework, detector, master_text, events, stopping, **options):
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
        self._lock = threading.Lock()
        self._conn = None
        self.leader_url = None
        self.stream_id = None
        self.subscribed = False
        self.master_info = None
        self.closing = False  # the driver is stopping: a closed stream is expected
        self.suppressed_roles = set()   # kept suppressed across re-subscriptions

    def state(self):
        """``(leader URL, Mesos-Stream-Id, subscribed)``, read together."""
        with self._lock:
            return self.leader_url, self.stream_id, self.subscribed

    def interrupt(self):
        """Unblock the stream thread (it notices and closes the connection)."""
        with self._lock:
            conn = self._conn
        shutdown_socket(conn)

    def run(self):
        """The stream thread."""
        backoff = 0.5
        unsubscribed_since = time.monotonic()
        last_error = "no attempt yet"
        while not self._stopping.is_set():
            try:
                self._subscribe_once()
                last_error = "the master closed the subscription stream"
            except _Unrecoverable as fatal:
                self._events.put(Fatal(fatal.error))
                return
            except (OSError, http.client.HTTPException, recordio.RecordIOError,
                    MesosError, _StreamEnded, ValueError, AttributeError) as exc:
                # AttributeError: http.client reading a connection shut down meanwhile.
                last_error = describe(exc)
            if self._stopping.is_set() or self.closing:
                return
            if self.subscribed:
                with self._lock:
                    self.subscribed = False
                    self._conn = None
                unsubscribed_since = time.monotonic()
                backoff = 0.5
                logger.warning("lost the Mesos subscription (%s); re-subscribing", last_error)
                self._events.put(StreamLost())
            elif time.monotonic() - unsubscribed_since > self._connect_timeout:
                self._events.put(Fatal(MesosConnectionError(
                    "could not subscribe to the Mesos master %s for %.0f s: %s"
                    % (self._master_text, self._connect_timeout, last_error))))
                return
            else:
                logger.info("Mesos master not reachable yet (%s); retrying", last_error)
            self._stopping.wait(backoff * random.uniform(0.8, 1.2))
            backoff = min(backoff * 2, self._backoff_cap)

    def watch_leader(self):
        """The leader-watch thread: a new leader in ZooKeeper ends the stream,
        so that the stream thread subscribes to it."""
        changed = getattr(self._detector, "leaders_changed", None)
        if changed is None:
            return
        while not self._stopping.is_set():
            if changed.wait(0.5):
                changed.clear()
                with self._lock:
                    self.leader_url = None
                    conn = self._conn
                logger.info("the Mesos leader changed; re-subscribing")
                shutdown_socket(conn)

    def _candidates(self):
        urls = [self.leader_url] if self.leader_url else []
        for url in self._detector.candidates() or [self._detector.leader(self._timeout)]:
            if url not in urls:
                urls.append(url)
        return urls

    def _subscribe_once(self):
        last = None
        for url in self._candidates():
            for _ in range(_MAX_REDIRECTS):
                try:
                    url = self._subscribe_at(url)
                except (OSError, http.client.HTTPException, MesosConnectionError) as exc:
                    last = exc
                    break
                if url is None:
                    return  # a stream was read to its end
        raise last or MesosConnectionError("no Mesos master known")

    def _subscribe_at(self, url):
        """Subscribe at ``url``: read the stream (returns None when it ends),
        or return the URL the master redirected to."""
        body = json.dumps(calls.subscribe(self.framework, self.suppressed_roles))
        conn = open_connection(url, self._timeout, self._ssl)
        with self._lock:
            if self._stopping.is_set():
                return None
            self._conn = conn
        try:
            conn.request("POST", api_path(url), body=body.encode("utf-8"),
                         headers=headers(self._auth))
            response = conn.getresponse()
            if response.status == 307:
                location = response.getheader("Location") or ""
                response.read()
                return redirect_base(url, location)
            if response.status == 503:
                response.read()
                raise MesosConnectionError("the Mesos master at %s has no leader yet (503)" % url)
            if response.status != 200:
                text = response.read().decode("utf-8", "replace").strip()[:500]
                error = MesosCallError("Mesos master at %s refused SUBSCRIBE: HTTP %d %s"
                                       % (url, response.status, text), status=response.status)
                if response.status in _FATAL_STATUSES:
                    raise _Unrecoverable(error)
                raise error
            self._read_stream(url, conn, response)
            return None
        finally:
            shutdown_connection(conn)
            with self._lock:
                if self._conn is conn:
                    self._conn = None

    def _read_stream(self, url, conn, response):
        stream_id = response.getheader("Mesos-Stream-Id")
        decoder = recordio.Decoder()
        while not self._stopping.is_set():
            try:
                data = response.read1(65536)
            except TimeoutError as exc:
                raise _StreamEnded("no event from the master for %.1f s (missed heartbeats)"
                                   % (conn.sock.gettimeout() if conn.sock else 0)) from exc
            if not data:
                return
            for record in decoder.feed(data):
                event = decode_event(record)
                kind = event.get("type")
                if kind == "SUBSCRIBED":
                    self._on_subscribed(url, conn, stream_id, event.subscribed)
                elif kind == "ERROR":
                    raise _Unrecoverable(MesosError("Mesos master error: %s"
                                                    % event.error.message))
                elif kind != "HEARTBEAT":
                    self._events.put(Received(kind, event))

    def _on_subscribed(self, url, conn, stream_id, subscribed):
        if not stream_id:
            raise _Unrecoverable(MesosError("the master at %s sent no Mesos-Stream-Id header"
                                            % url))
        interval = float(subscribed.get("heartbeat_interval_seconds") or 15.0)
        if conn.sock is not None:
            conn.sock.settimeout(interval * self._heartbeat_misses)
        with self._lock:
            self.framework["id"] = {"value": subscribed.framework_id.value}
            self.leader_url = url
            self.stream_id = stream_id
            self.subscribed = True
            self.master_info = subscribed.get("master_info") or Dict()
        self._events.put(Received("SUBSCRIBED", subscribed))
