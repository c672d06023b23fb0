"""host:port strings and free ports, for the launcher and the task entry
(a leaf module: the task entry imports it, so it must stay cheap)."""

import socket

# typing for the checkers only, as in protocol/wire.py (the task entry imports this).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Union


def format_address(host: str, port: int) -> str:
    """``host:port``, with brackets around an IPv6 host."""
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def free_port(host: str = "") -> int:
    """A TCP port that is free on ``host`` now (all interfaces by default)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def lookup_host(host: str) -> "Union[str, bytes]":
    """``host`` as ``socket.getaddrinfo`` takes it without loading the idna
    codec (encodings.idna, stringprep, unicodedata: a few ms of every task's
    start): ``getaddrinfo`` encodes a str host with that codec, whose ASCII
    fast path gives the name's ASCII bytes once its labels' lengths are
    checked (CPython Lib/encodings/idna.py, ``Codec.encode``; Modules/
    socketmodule.c, ``socket_getaddrinfo``); such a name is given as those
    bytes here, any other as it is (the codec then encodes or refuses it)."""
    if not host.isascii():
        return host
    *labels, last = host.split(".")
    if all(0 < len(label) < 64 for label in labels) and len(last) < 64:
        return host.encode("ascii")
    return host
