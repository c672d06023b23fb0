"""HTTP plumbing of the scheduler driver: connections (stdlib ``http.client``,
TLS through ``ssl``), headers, the leader's URL from a redirect, and closing
a connection another thread is reading.

Connections resolve and connect within their ``timeout`` (``getaddrinfo``
has no timeout of its own), and a host name that does not resolve raises
``UnknownHost``."""

import base64
import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from ..exceptions import MesosCallError, MesosConnectionError, MesosError
from ..terminal_text import quoted

API_PATH = "/api/v1/scheduler"

# getaddrinfo's answers: (family, type, proto, canonical name, socket address)
AddressInfo = tuple[socket.AddressFamily, socket.SocketKind, int, str, Any]


def ssl_context(verify: bool, ca_bundle: Optional[str]) -> ssl.SSLContext:
    if not verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=ca_bundle)


class TLSContext:
    """The ``ssl_context`` of the driver's settings, made on first use."""

    def __init__(self, verify: bool, ca_bundle: Optional[str]) -> None:
        self._settings = (verify, ca_bundle)
        self._context: Optional[ssl.SSLContext] = None
        self._lock = threading.Lock()

    def get(self) -> ssl.SSLContext:
        with self._lock:
            if self._context is None:
                self._context = ssl_context(*self._settings)
            return self._context


# TLS of an https connection: made at once, on first use, or none (http only).
TLS = Union[ssl.SSLContext, TLSContext, None]

# getaddrinfo errors that say the name does not exist; others (EAI_AGAIN: the
# DNS server did not answer) may pass.
_NO_SUCH_NAME = frozenset(getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA")
                          if hasattr(socket, name))


class UnknownHost(MesosConnectionError):
    """A master's host name does not resolve (``host`` names it)."""

    def __init__(self, host: str, error: OSError) -> None:
        super().__init__("the Mesos master's host name %r does not resolve (%s)"
                         % (host, error.strerror or error))
        self.host = host


def open_connection(url: str, timeout: Optional[float], context: TLS) -> http.client.HTTPConnection:
    """An unopened ``http.client`` connection to the master at base ``url``;
    opening it takes ``timeout`` seconds at most, name resolution included.
    ``context``: an ``ssl.SSLContext`` or a ``TLSContext`` (https only)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        raise MesosConnectionError("the URL %r names no host" % url)
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            parts.hostname, parts.port or 443, timeout=timeout,
            context=context.get() if isinstance(context, TLSContext) else context)
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    # http.client's hook for socket.create_connection (an attribute typeshed leaves out)
    conn._create_connection = connect_within  # type: ignore[attr-defined]
    return conn


def connect_within(address: tuple[str, int], timeout: Any,
                   source_address: Optional[tuple[str, int]] = None, **_: Any) -> socket.socket:
    """``socket.create_connection`` that resolves and connects within
    ``timeout`` seconds in all, whatever the number of addresses (a number;
    anything else, as http.client's default-timeout sentinel, is passed on)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        return socket.create_connection(address, timeout, source_address)  # no timeout
    host, port = address
    deadline = time.monotonic() + timeout
    last: Optional[OSError] = None
    for family, kind, proto, _name, sockaddr in resolve(host, port, timeout):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(left)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        sock.settimeout(timeout)
        # Calls and their answers are small writes: none may wait for a delayed ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise last or TimeoutError("connecting to %s:%s timed out" % (host, port))


def resolve(host: str, port: int, timeout: float) -> Sequence[AddressInfo]:
    """``getaddrinfo`` for a TCP connection, waiting ``timeout`` seconds at
    most; ``UnknownHost`` when the name does not exist."""
    if _is_address(host):   # no lookup; as bytes, no idna codec either (hostport.lookup_host)
        return socket.getaddrinfo(host.encode("ascii"), port, type=socket.SOCK_STREAM)
    answer: list[Any] = []   # the thread's: getaddrinfo's list, or its exception
    lookup = threading.Thread(target=_lookup, args=(host, port, answer), daemon=True,
                              name="tfmesos-resolve")
    lookup.start()
    lookup.join(timeout)
    if not answer:
        raise TimeoutError("resolving %s took more than %.1f s" % (host, timeout))
    if isinstance(answer[0], socket.gaierror) and answer[0].errno in _NO_SUCH_NAME:
        raise UnknownHost(host, answer[0])
    if isinstance(answer[0], BaseException):
        raise answer[0]
    return answer[0]


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _lookup(host: str, port: int, answer: list[Any]) -> None:
    try:
        answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
    except Exception as exc:  # noqa: B902 - handed to the waiting thread
        answer.append(exc)


def basic_auth(principal: Optional[str], secret: Optional[str]) -> Optional[str]:
    """The Authorization header value for ``principal``, or None."""
    if not principal:
        return None
    token = base64.b64encode(("%s:%s" % (principal, secret or "")).encode()).decode()
    return "Basic " + token


def basic_principal(auth: Optional[str]) -> Optional[str]:
    """The principal of a ``basic_auth`` header value, or None."""
    if not auth:
        return None
    return base64.b64decode(auth.partition(" ")[2]).decode().partition(":")[0]


def headers(auth: Optional[str] = None, stream_id: Optional[str] = None) -> dict[str, str]:
    result = {"Content-Type": "application/json", "Accept": "application/json",
              "User-Agent": "tfmesos"}
    if stream_id:
        result["Mesos-Stream-Id"] = stream_id
    if auth:
        result["Authorization"] = auth
    return result


def api_path(base_url: str) -> str:
    return urllib.parse.urlsplit(base_url).path.rstrip("/") + API_PATH


def redirect_base(url: str, location: str) -> str:
    """The base URL of the leader named by a 307 ``Location`` header (Mesos
    sends a scheme-relative ``//host:port/api/v1/scheduler``)."""
    target = urllib.parse.urljoin(url, location)
    parts = urllib.parse.urlsplit(target)
    if not parts.hostname:
        raise MesosConnectionError("the Mesos master at %s redirected to %r" % (url, location))
    path = parts.path
    if path.endswith(API_PATH):
        path = path[:-len(API_PATH)]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path.rstrip("/"), "", ""))


def shutdown_socket(conn: Optional[http.client.HTTPConnection]) -> None:
    """Unblock a thread reading ``conn`` without closing it under its feet."""
    sock = conn.sock if conn is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def shutdown_connection(conn: Optional[http.client.HTTPConnection]) -> None:
    if conn is not None:
        shutdown_socket(conn)
        conn.close()


def describe(exc: BaseException) -> str:
    """A one-line account of a connection error for messages."""
    if isinstance(exc, (http.client.IncompleteRead, http.client.RemoteDisconnected)):
        return "the master closed the connection"   # (its process ended, or it was cut)
    if isinstance(exc, MesosError):   # tfmesos' own words, outside text already quoted
        return str(exc) or type(exc).__name__
    # Others' may hold the server's words (BadStatusLine: its status line).
    return "%s: %s" % (type(exc).__name__, quoted(str(exc)) or type(exc).__name__)


class CallConnection:
    """The kept-alive connection every call but SUBSCRIBE goes over (Mesos
    wants them on another connection than the subscription stream)."""

    def __init__(self, timeout: float, context: TLS, auth: Optional[str]) -> None:
        self._timeout = timeout
        self._context = context
        self._auth = auth
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None
        self._url: Optional[str] = None

    def post(self, url: str, call: Mapping[str, Any], stream_id: Optional[str]) -> None:
        """Send ``call`` to the master at ``url``; 200/202 or raise ``MesosError``."""
        kind = call.get("type")
        body = json.dumps(call).encode("utf-8")
        call_headers = headers(self._auth, stream_id)
        with self._lock:
            sent = False
            for attempt in (0, 1):
                conn = self._connection(url)
                reused = conn.sock is not None
                try:
                    conn.request("POST", api_path(url), body=body, headers=call_headers)
                    sent = True
                    response = conn.getresponse()
                    payload = response.read()
                    break
                except (OSError, http.client.HTTPException) as exc:
                    conn.close()
                    self._conn = None
                    # A kept-alive connection the master closed: retry once on a new one.
                    if attempt == 0 and reused and isinstance(
                            exc, (http.client.RemoteDisconnected, BrokenPipeError,
                                  ConnectionResetError)):
                        continue
                    # Sent whole (now, or before a retry) but unanswered (a
                    # timeout): the master may have carried the call out (a
                    # LAUNCH: its tasks run).
                    raise MesosConnectionError("%s call to the Mesos master at %s failed: %s"
                                               % (kind, url, describe(exc)),
                                               maybe_delivered=sent) from exc
        if response.status not in (200, 202):
            raise MesosCallError("Mesos master at %s refused %s: HTTP %d %s" % (
                url, kind, response.status, quoted(payload)),
                status=response.status)

    def _connection(self, url: str) -> http.client.HTTPConnection:
        if self._conn is None or self._url != url:
            if self._conn is not None:
                self._conn.close()
            self._conn = open_connection(url, self._timeout, self._context)
            self._url = url
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
