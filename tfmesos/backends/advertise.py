"""The address the tasks of a run reach its rendezvous (and its bundle
server) at: given (``--advertise-address``, ``$TFMESOS_ADVERTISE_ADDRESS``),
else the local address of the route towards the Mesos master."""

import ipaddress
import socket
import urllib.parse

from ..exceptions import TFMesosError


def advertise_address(explicit, master_url, environ):
    """The address tasks use to reach this process's rendezvous: the explicit
    setting, else the local address of the route towards the Mesos master.
    A loopback address is refused unless the master is on this host too: the
    tasks of a remote master run on other hosts."""
    parts = urllib.parse.urlsplit(master_url)
    host = parts.hostname or "127.0.0.1"
    chosen = explicit or environ.get("TFMESOS_ADVERTISE_ADDRESS") or _route_to(host, parts.port)
    if _addresses(chosen, loopback_only=True) and not _on_this_host(host):
        raise TFMesosError("tasks on the agents cannot reach tfmesos at %s, a loopback address, "
                           "while the Mesos master %s is on another host: pass "
                           "--advertise-address (or set TFMESOS_ADVERTISE_ADDRESS) with an "
                           "address of this host that the agents can reach" % (chosen, host))
    return chosen


def _route_to(host, port):
    try:
        socket.getaddrinfo(host, port or 5050)
    except socket.gaierror as exc:
        raise TFMesosError("the Mesos master's host name %r does not resolve (%s): fix the "
                           "master address" % (host, exc.strerror)) from None
    try:
        with socket.socket(_family(host), socket.SOCK_DGRAM) as probe:
            probe.connect((host, port or 5050))  # UDP: no packet is sent
            return probe.getsockname()[0]
    except OSError as exc:
        raise TFMesosError("cannot tell which local address tasks can reach (no route to the "
                           "Mesos master %s: %s); pass --advertise-address or set "
                           "TFMESOS_ADVERTISE_ADDRESS" % (host, exc)) from None


def _addresses(host, loopback_only=False):
    """The IP addresses ``host`` names (with ``loopback_only``: all of them
    loopback, else an empty list)."""
    try:
        found = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except (socket.gaierror, UnicodeError):
        return []
    ips = [ipaddress.ip_address(address.split("%")[0]) for address in found]
    if loopback_only and not all(ip.is_loopback for ip in ips):
        return []
    return ips


def _on_this_host(host):
    """Whether ``host`` is this machine: a loopback address, or one that a
    socket here can bind."""
    for ip in _addresses(host):
        if ip.is_loopback:
            return True
        try:
            with socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                               socket.SOCK_DGRAM) as probe:
                probe.bind((str(ip), 0))
                return True
        except OSError:
            continue
    return False


def _family(host):
    try:
        return socket.getaddrinfo(host, None)[0][0]
    except socket.gaierror:
        return socket.AF_INET
