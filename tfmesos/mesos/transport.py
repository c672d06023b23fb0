"""The driver's transport: how it reaches the master. ``Transport`` is the
contract (a ``typing.Protocol``, checked by mypy against both transports);
``HTTPTransport`` is the real one (the SUBSCRIBE stream of
``subscription``, the call connection of ``http_transport``, masters found
by ``detection``); ``mock_transport.MockTransport`` keeps a master in
memory for unit tests of the driver and of what drives it.

A transport gives the driver a *stream* (``open_stream``: a ``Stream``,
whose ``run()`` and ``watch_leader()`` are the driver's stream and
leader-watch threads, which put ``subscription.Received`` / ``StreamLost``
/ ``Fatal`` on the driver's queue), carries every other call (``post``)
and lets go of what it holds (``close``).
"""

import queue
import threading
from collections.abc import Mapping
from typing import Any, Optional, Protocol, runtime_checkable

from .detection import make_detector
from .detector import Detector
from .http_transport import TLS, CallConnection
from .master_address import MasterSpec, without_password
from .subscription import Subscription


@runtime_checkable
class Stream(Protocol):
    """One driver's subscription, as the driver sees it. Its attributes are
    read by the driver's threads; ``suppressed_roles`` is the driver's to
    set, ``closing`` through ``stop_subscribing``."""

    subscribed: bool                # SUBSCRIBED and the stream still open
    leader_url: Optional[str]       # base URL of the master subscribed to
    master_info: Any                # that master's MasterInfo (an addict.Dict), or None
    closing: bool                   # the driver is stopping: a closed stream is expected
    suppressed_roles: set[str]      # carried by every re-subscription

    def run(self) -> None:
        """The stream thread: subscribe, and put what the master sends on
        the driver's queue until the driver stops."""

    def watch_leader(self) -> None:
        """The leader-watch thread (returns at once where no leader can change)."""

    def state(self) -> tuple[Optional[str], Optional[str], bool]:
        """``(leader URL, Mesos-Stream-Id, subscribed)``, read together."""

    def interrupt(self) -> None:
        """Unblock the stream's threads: the driver is stopping."""

    def stop_subscribing(self) -> None:
        """The driver stops: a stream that ends is expected (``closing``),
        and a SUBSCRIBE not sent yet is never sent."""

    def await_answer(self, timeout: float) -> bool:
        """Whether subscribed, once the answer to a SUBSCRIBE in flight was
        read (``timeout`` s at most)."""

    def masters_known(self) -> list[str]:
        """Base URLs where the framework may subscribe again (the master
        last subscribed to first), the subscription lost."""


@runtime_checkable
class Transport(Protocol):
    """How a ``MesosSchedulerDriver`` reaches its master."""

    def open_stream(self, framework: dict[str, Any], events: queue.Queue[object],
                    stopping: threading.Event) -> Stream:
        """The stream of a driver whose FrameworkInfo is ``framework`` (its
        ``id`` set once subscribed), that puts what it learns on ``events``
        and ends once ``stopping`` is set."""

    def post(self, url: str, call: Mapping[str, Any], stream_id: Optional[str]) -> None:
        """Send ``call`` to the master at ``url``; raise ``MesosError`` unless
        it is accepted."""

    def close(self) -> None:
        """Let go of connections and detectors (the driver stopped)."""


class HTTPTransport:
    """The Mesos v1 scheduler HTTP API at ``address`` (a parsed master
    string, ``master_address.parse_master``; ``master_text`` as given)."""

    def __init__(self, address: MasterSpec, master_text: str, context: TLS,
                 auth: Optional[str], timeout: float, scheme: str = "http",
                 detector: Optional[Detector] = None, **stream_options: Any) -> None:
        self._detector = detector or make_detector(address, scheme=scheme)
        self._master_text = without_password(master_text)
        self._context = context
        self._auth = auth
        self._timeout = timeout
        self._stream_options = stream_options
        self._caller = CallConnection(timeout, context, auth)

    def open_stream(self, framework: dict[str, Any], events: queue.Queue[object],
                    stopping: threading.Event) -> Subscription:
        return Subscription(framework, self._detector, self._master_text, events, stopping,
                            timeout=self._timeout, ssl=self._context, auth=self._auth,
                            **self._stream_options)

    def post(self, url: str, call: Mapping[str, Any], stream_id: Optional[str]) -> None:
        self._caller.post(url, call, stream_id)

    def close(self) -> None:
        self._caller.close()
        self._detector.close()


__all__ = ["HTTPTransport", "Stream", "Transport"]
