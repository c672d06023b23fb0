"""host:port strings and free ports, for the launcher and the task entry
(a leaf module: the task entry imports it, so it must stay cheap)."""

import socket


def format_address(host: str, port: int) -> str:
    """``host:port``, with brackets around an IPv6 host."""
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def free_port(host: str = "") -> int:
    """A TCP port that is free on ``host`` now (all interfaces by default)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
