"""host:port strings and free ports, for the launcher and the task entry
(a leaf module: the task entry imports it, so it must stay cheap)."""

import socket

# typing for the checkers only, as in protocol/wire.py (the task entry imports this).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Union


def format_address(host: str, port: int) -> str:
    """``host:port``, with brackets around an IPv6 host."""
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def free_port(host: str = "") -> int:
    """A TCP port that is free on ``host`` now (all interfaces by default);
    a host name binds its first address, of its own family (a name of an
    IPv6 address only did not bind as IPv4)."""
    family: socket.AddressFamily = socket.AF_INET
    address: Any = (host, 0)
    if host:
        family, _, _, _, address = socket.getaddrinfo(lookup_host(host), 0, 0,
                                                      socket.SOCK_STREAM)[0]
    with socket.socket(family) as sock:
        sock.bind(address)
        port: int = sock.getsockname()[1]
        return port


def host_name(text: str) -> "Union[str, None]":
    """``text`` as a task's host in ``host:port`` strings: an IP address
    (an IPv6 one without the brackets it may be given in) or a host name
    (RFC 1123 labels, and '_', which names Docker's and Mesos' own
    hosts may hold: ``myproj_worker_1``, as ``-m`` takes them); None for
    anything else (a port, a space, a URL)."""
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            socket.inet_pton(socket.AF_INET6, text.split("%", 1)[0])
            return text
        except (OSError, ValueError):
            return None
    name = text[:-1] if text.endswith(".") else text
    labels = name.split(".")
    if not 0 < len(name) <= 253 or not all(
            0 < len(label) <= 63 and label[0] != "-" and label[-1] != "-"
            and all(c.isascii() and (c.isalnum() or c in "-_") for c in label)
            for label in labels):
        return None
    return text


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
