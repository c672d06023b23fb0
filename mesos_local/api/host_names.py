"""What a host name the master is given names: its IPv6 address when it
names IPv6 addresses only (where the master listens then, and what its
MasterInfo says)."""

import socket
from typing import Optional


def ipv6_only_address(name: str) -> Optional[str]:
    """The first address of ``name`` when it names IPv6 addresses only,
    else None (an IPv4 address, a name with an IPv4 address, one that does
    not resolve). An IPv4 address is not looked up, and a name is given as
    ASCII bytes: a str loads the idna codec (encodings.idna, stringprep,
    unicodedata), ms of every embedded master's start."""
    if not name or name.replace(".", "").isdigit():
        return None
    try:
        found = socket.getaddrinfo(name.encode("ascii") if name.isascii() else name, 0, 0,
                                   socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return None
    if not found or any(family != socket.AF_INET6 for family, *_ in found):
        return None
    return str(found[0][4][0])
