"""The driver's transport: how it reaches the master. ``HTTPTransport`` is
the real one (the SUBSCRIBE stream of ``subscription``, the call
connection of ``http_transport``, masters found by ``detection``);
``mock_transport.MockTransport`` keeps a master in memory for unit tests
of the driver and of what drives it.

A transport gives the driver a *stream* (``open_stream``: an object with
``run()`` and ``watch_leader()``, the driver's stream and leader-watch
threads, which put ``subscription.Received`` / ``StreamLost`` / ``Fatal``
on the driver's queue; ``state()``; ``interrupt()``; and the attributes
``subscribed``, ``leader_url``, ``master_info``, ``closing``,
``suppressed_roles``), carries every other call (``post``) and lets go of
what it holds (``close``).
"""

from .detection import make_detector
from .http_transport import CallConnection
from .subscription import Subscription


class HTTPTransport:
    """The Mesos v1 scheduler HTTP API at ``address`` (a parsed master
    string, ``master_address.parse_master``; ``master_text`` as given)."""

    def __init__(self, address, master_text, context, auth, timeout, scheme="http",
                 detector=None, **stream_options):
        self._detector = detector or make_detector(address, scheme=scheme)
        self._master_text = master_text
        self._context = context
        self._auth = auth
        self._timeout = timeout
        self._stream_options = stream_options
        self._caller = CallConnection(timeout, context, auth)

    def open_stream(self, framework, events, stopping):
        return Subscription(framework, self._detector, self._master_text, events, stopping,
                            timeout=self._timeout, ssl=self._context, auth=self._auth,
                            **self._stream_options)

    def post(self, url, call, stream_id):
        self._caller.post(url, call, stream_id)

    def close(self):
        self._caller.close()
        self._detector.close()


__all__ = ["HTTPTransport"]
