"""The pieces of the operator API that need no master: how libprocess
routes a path (``ProcessManager::handle``, ``ProcessBase::consume``,
3rdparty/libprocess/src/process.cpp; stout's ``Path::dirname``), how it
reads an Accept header (``Request::_acceptsMediaType``,
3rdparty/libprocess/src/http.cpp), and the bounds of an event stream:
a reader that falls behind is dropped, its queue freed, and the oldest
subscriber closed past the most there may be (``Master::subscribe``)."""

import socket
import threading

import pytest
from waiting import wait_until

from mesos_local.api.endpoints import accepts
from mesos_local.api.routes import dirname, resolve
from mesos_local.api.stream import CLOSED, OVERFLOWED, Subscription, frame
from mesos_local.subscribers import Subscribers


@pytest.mark.parametrize("path, route", [
    ("/api/v1", "master/api/v1"),
    ("/api/v1/operator", "master/api/v1"),              # pymesos' operator driver
    ("/api/v1/", "master/api/v1"),
    ("/master/api/v1/x/y", "master/api/v1"),
    ("/api/v1/scheduler", "master/api/v1/scheduler"),
    ("/api/v1/scheduler/x", "master/api/v1/scheduler"),
    ("/master/api/v1/scheduler", "master/api/v1/scheduler"),
    ("/state", "master/state"),                          # the master is the delegate
    ("//state", "master/state"),
    ("/master/state/", "master/state"),
    ("/master/state/x/y", "master/state"),
    ("/master/state-summary", "master/state-summary"),
    ("/master/state.json", "master/state.json"),
    ("/teardown/x", "master/teardown"),
    ("/health", "master/health"),
    ("/metrics/snapshot", "metrics/snapshot"),
    ("/metrics/snapshot/x", "metrics/snapshot"),
    ("/files/read", "files/read"),
    ("/files/browse/", "files/browse"),
    ("/version", "version/"),
    ("/version/", "version/"),
    ("/version/x", None),                                # "" is only the whole name
    ("/master/metrics/snapshot", None),                  # the master has no such route
    ("/master/files/read", None),
    ("/master/version", None),
    ("/api", None),
    ("/master", None),
    ("/", None),
    ("", None),
    ("/metrics", None),
    ("/nope/state", None),
])
def test_a_path_reaches_the_longest_route_that_prefixes_it(path, route):
    assert resolve(path) == route


def test_dirname_is_stouts():
    assert [dirname(p) for p in ("a/b/c", "a", "", ".", "a//b", "/a", "/", "a/b/")] == \
        ["a/b", ".", ".", ".", "a", "/", "/", "a"]


@pytest.mark.parametrize("header, json_ok, protobuf_ok", [
    (None, True, True),                         # no header: anything
    ("application/json", True, False),
    ("application/x-protobuf", False, True),
    ("application/*", True, True),
    ("*/*", True, True),
    ("text/html", False, False),
    ("", False, False),                         # present and empty: nothing
    ("application/json;q=0, */*", False, True),  # the most specific decides
    ("application/json; q=0.5", True, False),
    ("application/json;q=x", False, False),     # a q that is no number
    ("Application/JSON", True, False),
    ("text/html, application/json", True, False),
])
def test_accept_headers_are_read_as_libprocess_reads_them(header, json_ok, protobuf_ok):
    assert accepts(header, "application/json") is json_ok
    assert accepts(header, "application/x-protobuf") is protobuf_ok


def _event(size):
    return {"type": "HEARTBEAT", "pad": "x" * size}


def test_a_stream_is_dropped_once_more_than_its_bound_waits():
    first = _event(5000)
    subscription = Subscription(None, 15.0, max_queued=1000, first=[first])
    try:
        assert subscription.queued_bytes == len(frame(first))   # not counted
        assert subscription.send(_event(3000))    # one event, however large, may wait
        assert not subscription.overflowed
        assert not subscription.send(_event(10))  # then nothing past the bound
        assert subscription.overflowed and subscription.queued_bytes == 0
        assert not subscription.send(_event(10))
    finally:
        subscription.dispose()
    unbounded = Subscription("framework", 15.0)
    try:
        for _ in range(100):
            assert unbounded.send(_event(1000))
    finally:
        unbounded.dispose()


def test_a_pump_blocked_on_a_reader_that_does_not_read_is_cut_off():
    server, client = socket.socketpair()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    subscription = Subscription(None, 15.0, max_queued=64 * 1024)
    result = []
    pump = threading.Thread(target=lambda: result.append(
        subscription.pump(server.sendall, server)), daemon=True)
    try:
        pump.start()
        sent = 0
        while subscription.send(_event(4000)):
            sent += 1
            assert sent < 10000, "never dropped"
        pump.join(30)
        assert result == [OVERFLOWED]
        assert subscription.queued_bytes == 0
    finally:
        subscription.dispose()
        server.close()
        client.close()


def test_a_stream_that_is_read_ends_with_what_was_queued():
    server, client = socket.socketpair()
    subscription = Subscription(None, 15.0, max_queued=1024, first=[{"type": "SUBSCRIBED"}])
    result = []
    pump = threading.Thread(target=lambda: result.append(
        subscription.pump(server.sendall, server)), daemon=True)
    try:
        pump.start()
        subscription.send({"type": "HEARTBEAT"})
        subscription.close()
        pump.join(30)
        assert result == [CLOSED]
        server.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            chunk = client.recv(4096)
            if not chunk:
                break
            data += chunk
        assert data == frame({"type": "SUBSCRIBED"}) + frame({"type": "HEARTBEAT"})
    finally:
        subscription.dispose()
        server.close()
        client.close()


def test_subscribers_drop_the_slow_one_keep_the_others_and_close_the_oldest():
    subscribers = Subscribers(heartbeat_interval=15.0, max_subscribers=2, buffer_bytes=1000)
    built = []

    def event():
        built.append(1)
        return _event(600)

    subscribers.send(event)
    assert built == []                       # no subscriber: no event is even built
    slow = subscribers.subscribe({"type": "SUBSCRIBED"})      # never pumped
    fast = subscribers.subscribe({"type": "SUBSCRIBED"})
    made = [slow, fast]
    server, client = socket.socketpair()
    received = []
    reader = threading.Thread(target=lambda: received.extend(iter(
        lambda: client.recv(65536), b"")), daemon=True)
    pump = threading.Thread(target=fast.pump, args=(server.sendall, server), daemon=True)
    try:
        reader.start()
        pump.start()
        subscribers.send(event)
        wait_until(lambda: fast.queued_bytes == 0, message="the pump took nothing")
        subscribers.send(event)
        assert built == [1, 1]               # built once for all subscribers
        assert slow.overflowed and not fast.overflowed
        assert list(subscribers.subscribed.values()) == [fast]
        newest = subscribers.subscribe({"type": "SUBSCRIBED"})
        third = subscribers.subscribe({"type": "SUBSCRIBED"})
        made += [newest, third]
        assert list(subscribers.subscribed.values()) == [newest, third]   # fast was oldest
        pump.join(30)                        # closed: it wrote what it had, then ended
        assert not fast.send({"type": "HEARTBEAT"})
        subscribers.ended(newest)
        assert list(subscribers.subscribed.values()) == [third]
        server.shutdown(socket.SHUT_WR)
        reader.join(30)
        assert b"".join(received).count(b'"pad"') == 2
    finally:
        subscribers.close_all()
        for subscription in made:
            subscription.dispose()
        server.close()
        client.close()
