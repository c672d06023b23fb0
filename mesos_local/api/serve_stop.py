"""Ending a ``socketserver`` server's ``serve_forever()`` at once.

``serve_forever(poll_interval)`` looks at its shutdown flag only between
polls, so ``shutdown()`` alone waits for the next one (on average half the
interval). Set the flag, then wake its ``select()`` with a connection:
socketserver checks the flag right after select (bpo-35017), so the loop
ends now and the connection is never handled."""

import socket

WILDCARDS = ("", "0.0.0.0", "::")


def wake_address(server):
    """Where a connection reaches ``server``'s listening socket: its bound
    host (loopback for a wildcard: IPv4's where it takes IPv4, a dual-stack
    socket's included) and port."""
    host, port = server.socket.getsockname()[:2]
    if host in WILDCARDS:
        v6_only = server.address_family == socket.AF_INET6 and server.socket.getsockopt(
            socket.IPPROTO_IPV6, socket.IPV6_V6ONLY)
        host = "::1" if v6_only else "127.0.0.1"
    return host, port


def stop_serving(server, thread, timeout=5.0):
    """End ``server.serve_forever()``, which runs on ``thread`` (not this
    one), and wait (at most ``timeout`` s) for ``thread``."""
    server._BaseServer__shutdown_request = True
    try:
        host, port = wake_address(server)   # OSError: its socket is closed already
        # The address as bytes: getaddrinfo encodes a str host with the
        # idna codec (CPython Modules/socketmodule.c, socket_getaddrinfo),
        # whose imports (stringprep, unicodedata) every stop paid for.
        socket.create_connection((host.encode("ascii"), port), timeout=1).close()
    except OSError:
        pass
    server.shutdown()
    thread.join(timeout)


__all__ = ["stop_serving", "wake_address"]
