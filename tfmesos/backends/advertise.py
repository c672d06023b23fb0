"""The address the tasks of a run reach its rendezvous (and its bundle
server) at: given (``--advertise-address``, ``$TFMESOS_ADVERTISE_ADDRESS``),
else the local address of the route towards the Mesos master.

A given address is checked before anything starts (``checked``): it must
be an IP address or a host name that resolves, an address of this machine
(a socket here can bind it), and not loopback where the tasks run on other
hosts. Otherwise every task would fail to connect, attempt after attempt,
with nothing said about why."""

import ipaddress
import re
import shlex
import socket
import urllib.parse
from collections.abc import Mapping
from typing import Any, Optional, Union

from ..exceptions import TFMesosError

ENV = "TFMESOS_ADVERTISE_ADDRESS"
CONNECT_PROBE = 1.0   # seconds an address of the master may take to answer (advertise_address)
# Where an address was given, as an error names it with the address (a
# %-slot): the run's field (``error_fields``, worded by the caller), or the
# environment variable.
OPTION = "{advertise_address=%s}"
FROM_ENV = ENV + " %s"
# RFC 1123 host names: dot-separated labels of letters, digits and inner '-'.
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)\Z")
# One address a host name resolves to: (its IP address, the socket family,
# the socket address to bind, an IPv6 one with its zone).
Resolved = tuple[Union[ipaddress.IPv4Address, ipaddress.IPv6Address], socket.AddressFamily,
                 tuple[Any, ...]]


def advertise_address(explicit: Optional[str], master_url: str,
                      environ: Mapping[str, str], what: str = "the Mesos master") -> str:
    """The address tasks use to reach this process's rendezvous, for a
    remote master at ``master_url``: the explicit setting, else
    ``$TFMESOS_ADVERTISE_ADDRESS``, else the local address of the route
    towards the master (``what``: what ``master_url`` is, as an error
    names it). A loopback address is refused unless the master is on this
    host too: the tasks of a remote master run on other hosts."""
    parts = urllib.parse.urlsplit(master_url)
    host = parts.hostname or "127.0.0.1"
    found = given_address(explicit, environ)
    if found[0] is None:
        return _route_to(host, parts.port, what)
    given, source = found
    # A master whose name does not resolve is the driver's to report.
    master = _addresses(host)
    elsewhere = master and not any(_bindable(each) for each in master)
    return checked(given, source, "the Mesos master %s is on another host" % host
                   if elsewhere else None)


def given_address(explicit: Optional[str], environ: Mapping[str, str]
                  ) -> Union[tuple[str, str], tuple[None, None]]:
    """(address, where it was given) of an explicit setting, else of
    ``$TFMESOS_ADVERTISE_ADDRESS``; (None, None) when neither is set."""
    if explicit:
        return explicit, OPTION
    if environ.get(ENV):
        return environ[ENV], FROM_ENV
    return None, None


def checked(address: str, source: str = OPTION, elsewhere: Optional[str] = None) -> str:
    """``address`` once it names this machine: TFMesosError, one line naming
    the fix, when it is malformed, does not resolve, or is not an address of
    this machine, or is loopback while ``elsewhere`` (why the tasks run on
    other hosts) is given."""
    why = malformed(address, source)
    if why:
        raise why
    quoted = shlex.quote(address)
    resolved = _addresses(address)
    if not resolved:
        raise TFMesosError.about(source + " does not resolve: give an address of this machine "
                                 "that the agents can reach", quoted)
    if elsewhere and all(ip.is_loopback for ip, _, _ in resolved):
        raise TFMesosError.about("tasks on the agents cannot reach tfmesos at %s, a loopback "
                                 "address, while %s: pass {advertise_address} (or set "
                                 "TFMESOS_ADVERTISE_ADDRESS) with an address of this host that "
                                 "the agents can reach", address, elsewhere)
    if not any(_bindable(each) for each in resolved):
        raise TFMesosError.about(source + " is not an address of this machine (no socket here "
                                 "can bind it): give one of its addresses that the agents can "
                                 "reach", quoted)
    return address


def malformed(address: object, source: str = OPTION) -> Optional[TFMesosError]:
    """Why ``address`` is neither an IP address nor a host name (a
    TFMesosError, one line naming the fix), or None when it is one; nothing
    is looked up. ``source``: where it was given (``OPTION``, ``FROM_ENV``)."""
    if isinstance(address, str) and _well_formed(address):
        return None
    text = shlex.quote(address) if isinstance(address, str) else repr(address)
    return TFMesosError.about(source + " is neither an IP address nor a host name: give an "
                              "address of this machine (without a port) that the agents can "
                              "reach", text)


def bind_address(address: str) -> Optional[str]:
    """The address the run's listeners (the rendezvous, the bundle server)
    bind for the advertised ``address``, so that they listen there and not
    on every interface: itself when it is an IP address; for a host name,
    the one address of this machine it names (its loopback addresses count
    only when it names no other: 127.0.0.1 first of several); None (every
    address) when it names several others."""
    try:
        ipaddress.ip_address(address.split("%", 1)[0])
        return address
    except ValueError:
        pass
    found = [resolved for resolved in _addresses(address) if _bindable(resolved)]
    outside = sorted({str(ip) for ip, _, _ in found if not ip.is_loopback})
    if outside:
        return outside[0] if len(outside) == 1 else None
    inside = sorted({str(ip) for ip, _, _ in found})
    if len(inside) == 1:
        return inside[0]
    return next((each for each in ("127.0.0.1", "::1") if each in inside), None)


def _well_formed(address: str) -> bool:
    """An IP address (IPv6 with a zone too), or a host name by RFC 1123."""
    try:
        ipaddress.ip_address(address.split("%", 1)[0])
        return True
    except ValueError:
        pass
    name = address[:-1] if address.endswith(".") else address
    return 0 < len(name) <= 253 and all(_LABEL.match(label) for label in name.split("."))


def _route_to(host: str, port: Optional[int], what: str = "the Mesos master") -> str:
    """The local address of the route towards ``host`` (nothing is sent),
    of its first address; for a name with addresses of both families, of
    the first that answers a TCP connection (``CONNECT_PROBE`` seconds
    each), as the driver's connection takes the first that answers. Such
    a name lists its IPv6 address first (RFC 6724), while a Mesos master
    listens on IPv4 only ("Mesos doesn't listen on IPv6 sockets",
    src/slave/flags.cpp, --ip6): the first address's route alone had the
    tasks told an IPv6 address of this host, which they could not reach."""
    try:
        found = socket.getaddrinfo(host, port or 5050, 0, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise TFMesosError("%s's host name %r does not resolve (%s): fix the "
                           "master address" % (what, host, exc.strerror)) from None
    for family, _, _, _, sockaddr in found if len({each[0] for each in found}) > 1 else ():
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.settimeout(CONNECT_PROBE)
                probe.connect(sockaddr)
                return str(probe.getsockname()[0])
        except OSError:
            continue
    error: Optional[OSError] = None
    for family, _, _, _, sockaddr in found:
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as probe:
                probe.connect(sockaddr)  # UDP: no packet is sent
                return str(probe.getsockname()[0])
        except OSError as exc:
            error = error or exc
    raise TFMesosError.about("cannot tell which local address tasks can reach (no route "
                             "to %s %s: %s); pass {advertise_address} or set "
                             "TFMESOS_ADVERTISE_ADDRESS", what, host, error) from None


def _addresses(host: str) -> list[Resolved]:
    """(IP address, socket address) of each address ``host`` names (none
    when it does not resolve)."""
    try:
        found = {(info[0], info[4]) for info in socket.getaddrinfo(host, 0, 0,
                                                                   socket.SOCK_DGRAM)}
    except (socket.gaierror, UnicodeError):
        return []
    return [(ipaddress.ip_address(str(sockaddr[0]).split("%")[0]), family, sockaddr)
            for family, sockaddr in found]


def is_loopback(address: str) -> bool:
    """Whether ``address`` (an IP address or a host name) names only
    loopback addresses (one that does not resolve: False)."""
    found = _addresses(address.strip("[]"))
    return bool(found) and all(ip.is_loopback for ip, _, _ in found)


def resolves(host: str) -> bool:
    """Whether ``host`` (a name or an IP address) names any address here."""
    return bool(_addresses(host.strip("[]")))


def on_this_host(host: str) -> bool:
    """Whether ``host`` (a name or an IP address) names this machine: it
    resolves, and a socket here can bind every address it names (loopback
    included); nothing is sent."""
    found = _addresses(host.strip("[]"))
    return bool(found) and all(_bindable(each) for each in found)


def _bindable(resolved: Resolved) -> bool:
    ip, family, sockaddr = resolved
    if ip.is_loopback:
        return True
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind(sockaddr)      # an IPv6 address keeps its zone
            return True
    except OSError:
        return False


