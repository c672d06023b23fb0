"""Servers stop at once (``mesos_local/api/serve_stop.py``): their loop is
woken, not left to notice the shutdown at its next poll. Each server here
polls once an hour, so a stop that waited for the poll never returns."""

import socket
import socketserver
import threading

import pytest

from mesos_local.api.serve_stop import stop_serving, wake_address
from tfmesos.ship import bundle_server
from tfmesos.ship.bundle_server import BundleServer

pytestmark = pytest.mark.timeout(60)

AN_HOUR = 3600.0


@pytest.fixture
def hourly_polls(monkeypatch):
    real = socketserver.BaseServer.serve_forever
    monkeypatch.setattr(bundle_server._Server, "serve_forever",
                        lambda self, poll_interval=0.5: real(self, AN_HOUR), raising=False)


@pytest.mark.parametrize("host", [None, "127.0.0.1", "0.0.0.0"])
def test_a_bundle_server_stops_without_waiting_for_its_poll(hourly_polls, host):
    server = BundleServer(bind_host=host)
    server.stop()
    assert not server._thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.parametrize("family,host,v6_only,woken_at", [
    (socket.AF_INET, "0.0.0.0", None, "127.0.0.1"),
    (socket.AF_INET6, "::", 0, "127.0.0.1"),     # dual-stack: IPv4 reaches it
    (socket.AF_INET6, "::", 1, "::1"),
])
def test_a_wildcard_server_is_woken_on_its_loopback(family, host, v6_only, woken_at):
    if family == socket.AF_INET6 and not ipv6_loopback():
        pytest.skip("no IPv6 loopback here")

    class Server(socketserver.TCPServer):
        address_family = family

        def server_bind(self):
            if v6_only is not None:
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, v6_only)
            super().server_bind()

    handled = []

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            handled.append(self.client_address)

    server = Server((host, 0), Handler)
    try:
        assert wake_address(server) == (woken_at, server.server_address[1])
        thread = threading.Thread(target=server.serve_forever, args=(AN_HOUR,), daemon=True)
        thread.start()
        stop_serving(server, thread)
        assert not thread.is_alive()
        assert handled == []         # the waking connection is never handled
    finally:
        server.server_close()


def test_stopping_a_closed_server_again_is_harmless():
    server = socketserver.TCPServer(("127.0.0.1", 0), socketserver.BaseRequestHandler)
    thread = threading.Thread(target=server.serve_forever, args=(AN_HOUR,), daemon=True)
    thread.start()
    stop_serving(server, thread)
    server.server_close()
    stop_serving(server, thread)     # its socket is closed: no wake, no error
    assert not thread.is_alive()
