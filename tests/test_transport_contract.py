"""Both transports of the driver keep its contract, ``transport.Transport``,
and their streams ``transport.Stream``: mypy checks the annotated
assignments below (this file is in its ``files``: a method renamed or a
signature changed in one transport fails it), these tests the members at
run time."""

import queue
import threading

from tfmesos.mesos.detector import StaticDetector
from tfmesos.mesos.http_transport import TLSContext
from tfmesos.mesos.master_address import parse_master
from tfmesos.mesos.mock_transport import MockTransport
from tfmesos.mesos.transport import HTTPTransport, Stream, Transport


def _open(transport: Transport) -> Stream:
    events: queue.Queue[object] = queue.Queue()
    return transport.open_stream({"user": "u", "name": "n"}, events, threading.Event())


def test_the_mock_transport_keeps_the_contract() -> None:
    transport: Transport = MockTransport()
    stream = _open(transport)
    assert isinstance(transport, Transport)
    assert isinstance(stream, Stream)
    assert stream.state() == (None, None, False)
    transport.close()


def test_the_http_transport_keeps_the_contract() -> None:
    address = parse_master("127.0.0.1:5050")
    transport: Transport = HTTPTransport(
        address, "127.0.0.1:5050", TLSContext(True, None), None, 1.0,
        detector=StaticDetector(address.urls), heartbeat_misses=3, backoff_cap=1.0,
        connect_timeout=1.0)
    try:
        stream = _open(transport)   # nothing connects before the stream runs
        assert isinstance(transport, Transport)
        assert isinstance(stream, Stream)
        assert stream.state() == (None, None, False)
    finally:
        transport.close()
