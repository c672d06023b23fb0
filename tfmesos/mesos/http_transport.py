"""HTTP plumbing of the scheduler driver: connections (stdlib ``http.client``,
TLS through ``ssl``), headers, the leader's URL from a redirect, and closing
a connection another thread is reading."""

import base64
import http.client
import json
import socket
import ssl
import threading
import urllib.parse

from ..exceptions import MesosCallError, MesosConnectionError, MesosError

API_PATH = "/api/v1/scheduler"


def ssl_context(verify, ca_bundle):
    if not verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=ca_bundle)


def open_connection(url, timeout, context):
    """An unopened ``http.client`` connection to the master at base ``url``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        return http.client.HTTPSConnection(parts.hostname, parts.port or 443,
                                           timeout=timeout, context=context)
    return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)


def basic_auth(principal, secret):
    """The Authorization header value for ``principal``, or None."""
    if not principal:
        return None
    token = base64.b64encode(("%s:%s" % (principal, secret or "")).encode()).decode()
    return "Basic " + token


def headers(auth=None, stream_id=None):
    result = {"Content-Type": "application/json", "Accept": "application/json",
              "User-Agent": "tfmesos"}
    if stream_id:
        result["Mesos-Stream-Id"] = stream_id
    if auth:
        result["Authorization"] = auth
    return result


def api_path(base_url):
    return urllib.parse.urlsplit(base_url).path.rstrip("/") + API_PATH


def redirect_base(url, location):
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


def shutdown_socket(conn):
    """Unblock a thread reading ``conn`` without closing it under its feet."""
    sock = conn.sock if conn is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def shutdown_connection(conn):
    if conn is not None:
        shutdown_socket(conn)
        conn.close()


def describe(exc):
    """A one-line account of a connection error for messages."""
    text = str(exc) or type(exc).__name__
    return "%s: %s" % (type(exc).__name__, text) if not isinstance(exc, MesosError) else text


class CallConnection:
    """The kept-alive connection every call but SUBSCRIBE goes over (Mesos
    wants them on another connection than the subscription stream)."""

    def __init__(self, timeout, context, auth):
        self._timeout = timeout
        self._context = context
        self._auth = auth
        self._lock = threading.Lock()
        self._conn = None
        self._url = None

    def post(self, url, call, stream_id):
        """Send ``call`` to the master at ``url``; 200/202 or raise ``MesosError``."""
        kind = call.get("type")
        body = json.dumps(call).encode("utf-8")
        call_headers = headers(self._auth, stream_id)
        with self._lock:
            for attempt in (0, 1):
                conn = self._connection(url)
                reused = conn.sock is not None
                try:
                    conn.request("POST", api_path(url), body=body, headers=call_headers)
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
                    raise MesosConnectionError("%s call to the Mesos master at %s failed: %s"
                                               % (kind, url, describe(exc))) from exc
        if response.status not in (200, 202):
            raise MesosCallError("Mesos master at %s refused %s: HTTP %d %s" % (
                url, kind, response.status, payload.decode("utf-8", "replace").strip()[:500]),
                status=response.status)

    def _connection(self, url):
        if self._conn is None or self._url != url:
            if self._conn is not None:
                self._conn.close()
            self._conn = open_connection(url, self._timeout, self._context)
            self._url = url
        return self._conn

    def close(self):
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
