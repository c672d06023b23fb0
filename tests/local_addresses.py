"""This machine's addresses, for tests that need one the agents of a
remote master could reach (no packet is sent: a UDP socket's connect only
picks the route)."""

import ipaddress
import socket

# TEST-NET-1 (RFC 5737): documentation only, never contacted.
ELSEWHERE = "192.0.2.10"


def non_loopback_address():
    """An address of this machine that is not loopback (the local end of
    the route to ``ELSEWHERE``), or None where it has none."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((ELSEWHERE, 5050))
            address = probe.getsockname()[0]
    except OSError:
        return None
    return None if ipaddress.ip_address(address).is_loopback else address


def is_this_machine(address):
    """Whether a socket here can bind ``address``."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True
