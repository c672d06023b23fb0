"""Decoding the ``MasterInfo`` a Mesos master registers in ZooKeeper.

A master contending for leadership writes its ``MasterInfo`` as JSON
(``JSON::protobuf(MasterInfo)``, Mesos >= 0.24) into a ``json.info_<seq>``
znode; :func:`master_url_from_info` turns that into the master's base URL.
Pure: no ZooKeeper, no kazoo (see :mod:`tfmesos.mesos.zookeeper`).
"""

import ipaddress
import json
import re
from typing import Any, Optional, Union

from tfmesos.mesos.master_address import SCHEMES
from tfmesos.terminal_text import quoted

__all__ = ["decode_master_info", "master_url_from_info"]

# What a MasterInfo's host may hold: a host name, an IPv4 or IPv6 address
# (with its zone); not what a URL or a terminal would read otherwise.
_HOST = re.compile(r"[A-Za-z0-9._:%-]+")

Decoded = tuple[Optional[str], Optional[str]]   # (url, None) or (None, why it is unusable)


def master_url_from_info(data: Union[bytes, bytearray, str], scheme: str = "http") -> str:
    """Base URL of the master described by a JSON ``MasterInfo``.

    ``data`` is the content of a ``json.info_<seq>`` znode (bytes or str),
    as written by Mesos' ``JSON::protobuf(MasterInfo)``. The address comes
    from ``address.hostname`` or ``address.ip`` with ``address.port`` (Mesos
    >= 0.24), else from the deprecated top-level ``hostname`` or ``ip`` with
    ``port``, else from ``pid`` (``master@10.0.0.1:5050``). Over http the
    IP comes first, as Mesos' scheduler library connects to the leader's
    (src/scheduler/scheduler.cpp: ``upid.address.ip``): a master's host name
    need not resolve where its frameworks run. Over https the host name
    comes first: the one its certificate names. The top-level ``ip`` is
    the IPv4 ``s_addr`` -- network byte order -- read as a uint32 on a
    little-endian host, so 10.0.0.1 is 16777226 (MESOS-1201).

    Raises ``ValueError`` naming what is missing or malformed.
    """
    check_scheme(scheme)
    info = _json_object(data)
    host: Optional[str] = None
    port: Any = None
    address = info.get("address")
    by_name = scheme == "https"
    if isinstance(address, dict):
        name, ip = _nonempty_str(address.get("hostname")), _nonempty_str(address.get("ip"))
        host = (name or ip) if by_name else (ip or name)
        port = address.get("port")
    if host is None:
        name, ip = _nonempty_str(info.get("hostname")), _ip_from_uint32(info.get("ip"))
        host = (name or ip) if by_name else (ip or name)
        port = info.get("port") if port is None else port
    if host is None and isinstance(info.get("pid"), str) and "@" in info["pid"]:
        pid_host, _, pid_port = info["pid"].rpartition("@")[2].rpartition(":")
        host = pid_host or None
        port = int(pid_port) if port is None and pid_port.isdigit() else port
    if host is None:
        raise ValueError("it names no address (no address.hostname, address.ip, hostname, ip or pid)")
    if not _HOST.fullmatch(host):
        raise ValueError("its host '%s' is no host name or IP address" % (quoted(host, 80),))
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError("it has no valid port (got %s)" % (quoted(repr(port), 80),))
    if ":" in host and not host.startswith("["):
        host = "[%s]" % (host,)
    return "%s://%s:%s" % (scheme, host, port)


def check_scheme(scheme: str) -> None:
    """``ValueError`` unless ``scheme`` is ``"http"`` or ``"https"``."""
    if scheme not in SCHEMES:
        raise ValueError("scheme must be one of %s, not %r" % (", ".join(SCHEMES), scheme))


def _json_object(data: Union[bytes, bytearray, str]) -> dict[str, Any]:
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("it is not UTF-8 text (a protobuf MasterInfo?)") from None
    try:
        info = json.loads(data)
    except ValueError as exc:
        raise ValueError("it is not valid JSON (%s)" % (exc,)) from None
    if not isinstance(info, dict):
        raise ValueError("it is not a JSON object")
    return info


def _nonempty_str(value: object) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def _ip_from_uint32(value: object) -> Optional[str]:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**32:
        return None
    return str(ipaddress.IPv4Address(value.to_bytes(4, "little")))


def decode_master_info(node: str, data: Union[bytes, bytearray, str], scheme: str) -> Decoded:
    """``(url, None)`` for a usable MasterInfo in ``node``, else ``(None, why)``."""
    try:
        return master_url_from_info(data, scheme), None
    except ValueError as exc:
        return None, "the leader's znode %s holds no usable MasterInfo: %s" % (node, exc)
