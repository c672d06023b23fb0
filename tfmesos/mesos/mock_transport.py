"""A Mesos master in memory, for unit tests of the driver and of what drives
it (``MesosSchedulerDriver(..., transport=MockTransport())``): no socket,
no thread of its own. The driver subscribes at once; every call it makes
is kept in ``calls`` (the Call bodies, in order); the test sends events
(``offer``, ``update``, ``send``), drops the stream (``lose_stream``),
makes calls fail (``refuse``) or go unanswered (``lose_answer``).
"""

import queue
import threading
from collections.abc import Mapping
from typing import Any, Optional

from addict import Dict

from ..exceptions import MesosCallError, MesosConnectionError
from .stream_items import Fatal, Received, StreamLost

URL = "http://mock-master:5050"


class MockTransport:
    """The driver's transport (``transport``), with a master that answers
    every call 202 unless told otherwise."""

    def __init__(self, framework_id: str = "mock-framework", url: str = URL,
                 heartbeat_interval: float = 15.0, answer_after: float = 0.0) -> None:
        self.framework_id = framework_id
        self.answer_after = answer_after   # seconds before SUBSCRIBED is read
        self.url = url
        self.heartbeat_interval = heartbeat_interval
        self.calls: list[Mapping[str, Any]] = []
        self._refused: dict[str, MesosCallError] = {}   # call type -> the error it gets
        self._unanswered: dict[str, bool] = {}   # call type -> whether its next one arrives
        self._lock = threading.Lock()
        self._stream: Optional[_Stream] = None

    # -- the driver's side ---------------------------------------------------------

    def open_stream(self, framework: dict[str, Any], events: queue.Queue[object],
                    stopping: threading.Event) -> "_Stream":
        self._stream = _Stream(self, framework, events, stopping)
        return self._stream

    def _opened(self) -> "_Stream":
        if self._stream is None:
            raise RuntimeError("no driver has opened a stream on this transport yet")
        return self._stream

    def post(self, url: str, call: Mapping[str, Any], stream_id: Optional[str]) -> None:
        kind = str(call.get("type"))
        with self._lock:
            error: Optional[Exception] = self._refused.get(kind)
            arrives = self._unanswered.pop(kind, None)
            if error is None and arrives is not False:
                self.calls.append(call)
            if error is None and arrives is not None:
                error = MesosConnectionError("%s call to the Mesos master at %s failed: timed out"
                                             % (kind, url), maybe_delivered=True)
        if error is not None:
            raise error

    def close(self) -> None:
        pass

    # -- the test's side -------------------------------------------------------------

    def calls_of(self, kind: str) -> list[Mapping[str, Any]]:
        """The calls of type ``kind`` (``ACCEPT``, ``KILL``, ...) made so far."""
        with self._lock:
            return [call for call in self.calls if call.get("type") == kind]

    def send(self, kind: str, body: Optional[Mapping[str, Any]] = None) -> None:
        """The master sends an event of type ``kind`` (its ``kind.lower()``
        field is ``body``)."""
        event = Dict({"type": kind})
        if body is not None:
            event[kind.lower()] = Dict(body)
        self._opened().events.put(Received(kind, event))

    def offer(self, *offers: Mapping[str, Any]) -> None:
        """An OFFERS event with ``offers`` (Offer dicts)."""
        self.send("OFFERS", {"offers": list(offers)})

    def update(self, status: Mapping[str, Any]) -> None:
        """An UPDATE event with ``status`` (a TaskStatus dict)."""
        self.send("UPDATE", {"status": status})

    def lose_stream(self) -> None:
        """The subscription drops; the driver is told (``disconnected``)."""
        stream = self._opened()
        stream.subscribed = False
        stream.events.put(StreamLost())

    def give_up(self, message: str = "the mock master is gone") -> None:
        """The driver gives up: what it does after ``connect_timeout``."""
        self._opened().events.put(Fatal(MesosConnectionError(message)))

    def lose_answer(self, kind: str, arrives: bool = True) -> None:
        """The next call of type ``kind`` gets no answer, as a timeout leaves
        it (``MesosConnectionError``, ``maybe_delivered``); ``arrives``:
        whether the master got it all the same (it is in ``calls``)."""
        with self._lock:
            self._unanswered[kind] = arrives

    def answer(self, kind: str) -> None:
        """Calls of type ``kind`` are answered 202 again (after ``refuse``)."""
        with self._lock:
            self._refused.pop(kind, None)

    def refuse(self, kind: str, status: int = 400,
               message: str = "refused by the mock master") -> None:
        """Calls of type ``kind`` fail from now on, as Mesos refuses them."""
        with self._lock:
            self._refused[kind] = MesosCallError(
                "Mesos master at %s refused %s: HTTP %d %s" % (self.url, kind, status, message),
                status=status)


class _Stream:
    """The driver's stream: subscribed at once, then idle until the driver
    stops."""

    def __init__(self, transport: MockTransport, framework: dict[str, Any],
                 events: queue.Queue[object], stopping: threading.Event) -> None:
        self._transport = transport
        self._framework = framework
        self.events = events
        self._stopping = stopping
        self.subscribed = False
        self.leader_url: Optional[str] = None
        self.stream_id: Optional[str] = None
        self.master_info: Any = None
        self.closing = False
        self.suppressed_roles: set[str] = set()
        self.asking = True     # a SUBSCRIBE sent at once, answered after answer_after
        self._answered = threading.Event()

    def stop_subscribing(self) -> None:
        self.closing = True

    def await_answer(self, timeout: float) -> bool:
        if self.asking and not self.subscribed:
            self._answered.wait(timeout)
        return self.subscribed

    def run(self) -> None:
        transport = self._transport
        if transport.answer_after and self._stopping.wait(transport.answer_after):
            self.asking = False
            return
        framework_id = (self._framework.get("id") or {}).get("value") or transport.framework_id
        self._framework["id"] = {"value": framework_id}
        self.master_info = Dict(id="mock-master", hostname="mock-master", port=5050)
        self.leader_url, self.stream_id, self.subscribed = transport.url, "mock-stream", True
        self.asking = False
        self._answered.set()
        self.events.put(Received("SUBSCRIBED", Dict(
            framework_id={"value": framework_id},
            heartbeat_interval_seconds=transport.heartbeat_interval,
            master_info=self.master_info)))
        self._stopping.wait()

    def watch_leader(self) -> None:
        return

    def state(self) -> tuple[Optional[str], Optional[str], bool]:
        return self.leader_url, self.stream_id, self.subscribed

    def interrupt(self) -> None:
        pass

    def masters_known(self) -> list[str]:
        return [self._transport.url]


__all__ = ["MockTransport", "URL"]
