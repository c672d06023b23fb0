"""Serving what a run ships (``tfrun --ship``) to the Mesos agents' fetchers.

``BundleServer`` serves a few named files over HTTP, for the run's lifetime,
at ``http://HOST:PORT/<token>/<name>``: the token is fresh per run
(``secrets.token_urlsafe``), so the URL is the credential, as the
rendezvous' secret is for the tasks. Only GET and HEAD (other methods: 405);
any other path gets 404. What peers without the token make it say (404s,
refused connections, a client gone before it asked for a file) goes
through a ``RefusalLog`` (``tfmesos.refusal_log``, as the rendezvous'
refusals): the first few each in a line, the path quoted and escaped
(``terminal_text.quoted``), then a count at most once a minute, and what is
still counted as it stops. A file it cannot open for a peer that has the
token is this side's failure, never a refusal nor a 404: a 503 (out of file
descriptors, ``ulimit -n``; else a 500) whose reason names the cause, as
the fetcher's failure then does, and one line for each file and error.
Like the rendezvous, it never lets clients hold
it:

* a connection must send its request line within ``line_timeout`` seconds
  (a fetcher sends it at once) and its whole request within
  ``request_timeout``, however it trickles in (a deadline per request, not
  per read);
* at ``max_connections`` connections at once, a newcomer drops the oldest
  one that has not asked for a file with the token yet, so idle or
  trickling peers without the token only crowd each other out, never a
  fetch; a download in progress is never dropped for a newcomer (with every
  place a download's, the newcomer is closed at once);
* at most ``max_clients`` files are sent at once; a send must keep up
  ``MIN_RATE`` bytes a second on average, and a client that reads nothing
  for ``idle_timeout`` seconds is dropped;
* every connection closes after its one response (HTTP/1.0), and a client
  that goes away mid-response is one log line, not a traceback.

``stop()`` closes the listener and every connection: nothing is served after
the run.
"""

import collections
import errno
import hmac
import http.server
import logging
import os
import secrets
import socket
import socketserver
import sys
import threading
import time
from typing import Optional

from mesos_local import parse_request_within, stop_serving

from ..exceptions import TFMesosError
from ..protocol.hostport import format_address
from ..protocol.wire import shut_down
from ..refusal_log import RefusalLog
from ..terminal_text import quoted

logger = logging.getLogger(__name__)

MAX_CLIENTS = 16
IDLE_TIMEOUT = 30.0
REQUEST_TIMEOUT = 10.0
LINE_TIMEOUT = 5.0        # seconds to send the request line (a fetcher sends it at once)
MIN_RATE = 64 << 10       # bytes/s a download must average (its deadline)
MAX_HEADER_BYTES = 16 << 10    # a request's headers together: a fetcher sends a few hundred
MIN_TRANSFER = 60.0       # seconds any download may take


# A file it serves that cannot be opened: what passes is a 503 (try again),
# the rest a 500; what to do about it, in its reason and its line.
_TRANSIENT = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN})
_FIXES = {errno.EMFILE: "this process is out of file descriptors: raise ulimit -n, or run "
                        "fewer tasks",
          errno.ENFILE: "the system is out of file descriptors (fs.file-max)"}


class BundleServerError(TFMesosError):
    """The bundle server cannot listen."""


class BundleServer:
    """Serves ``files`` (name -> path on this machine). ``bind_host`` None
    listens on every address (IPv6 and IPv4 where the host can)."""

    def __init__(self, files=None, bind_host=None, port=0, max_clients=MAX_CLIENTS,
                 idle_timeout=IDLE_TIMEOUT, request_timeout=REQUEST_TIMEOUT,
                 max_connections=None, line_timeout=LINE_TIMEOUT):
        self.token = secrets.token_urlsafe(32)
        self._files = dict(files or {})
        self._lock = threading.Lock()
        self.served: collections.Counter[str] = collections.Counter()   # name -> complete GETs
        self.not_found = 0
        self._open_failures: set[tuple[str, Optional[int]]] = set()   # said: (name, errno)
        # What peers without the token make it say (404s, refused or dropped
        # connections): a few lines, then a count (as the rendezvous' refusals).
        self.refusals = RefusalLog("connection", logger=logger, prefix="bundle server: ")
        try:
            self._server = _Server(self, bind_host, port, max_clients, idle_timeout,
                                   request_timeout, max_connections or 8 * max_clients,
                                   min(line_timeout, request_timeout))
        except OSError as exc:
            raise BundleServerError("cannot listen on %s:%s to serve the shipped files: %s"
                                    % (bind_host or "*", port, exc.strerror or exc)) from exc
        self.port = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={
            "poll_interval": 0.25}, name="bundle-server", daemon=True)
        self._thread.start()

    def add(self, name, path):
        with self._lock:
            self._files[name] = path

    def path_of(self, name):
        return "/%s/%s" % (self.token, name)

    def url(self, host, name):
        """The URL agents fetch ``name`` at, ``host`` being this machine's
        advertised address."""
        return "http://%s%s" % (format_address(host, self.port), self.path_of(name))

    def lookup(self, path):
        """The file a request path names, or None (compared in constant time)."""
        token, _, name = path.lstrip("/").partition("/")
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            return None
        with self._lock:
            return self._files.get(name)

    def cannot_open(self, name, exc):
        """A file it serves could not be opened (``exc``): said once for
        each file and error, and the (status, reason) its fetcher gets: 503
        for what passes (out of file descriptors or memory), else 500. The
        reason names the cause, as the fetcher's failure then does."""
        fix = _FIXES.get(exc.errno, "")
        with self._lock:
            first = (name, exc.errno) not in self._open_failures
            self._open_failures.add((name, exc.errno))
        if first:
            logger.warning("bundle server: cannot open %s to serve it: %s%s", quoted(name),
                           exc, fix and " (%s)" % fix)
        reason = "cannot open the file to serve: %s" % (exc.strerror or type(exc).__name__)
        return (503 if exc.errno in _TRANSIENT else 500), reason + (fix and " (%s)" % fix)

    def stop(self):
        """Stop serving (idempotent): the port closes, open downloads end."""
        self._server.close(self._thread)
        self.refusals.flush(final=True)   # refusals counted since the last line


class _Connection:
    """What the server knows of one accepted connection."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.waiting = True   # has not asked for a file with the token yet


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, owner: BundleServer, host: Optional[str], port: int, max_clients: int,
                 idle_timeout: float, request_timeout: float, max_connections: int,
                 line_timeout: float) -> None:
        self.owner = owner
        self.idle_timeout = idle_timeout
        self.request_timeout = request_timeout
        self.line_timeout = line_timeout
        self.senders = threading.BoundedSemaphore(max_clients)
        self._max_connections = max_connections
        self._closing = threading.Event()
        # Every open connection, oldest first; one leaves as it is closed
        # (shutdown_request) or dropped. Sockets are shut down under the lock
        # only while here, so never one already closed (its number reused).
        self._connections: dict[socket.socket, _Connection] = {}
        self._lock = threading.Lock()
        if host is None and socket.has_dualstack_ipv6():
            self.address_family = socket.AF_INET6
            super().__init__(("", port), _Handler, bind_and_activate=False)
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        else:
            host = host or "0.0.0.0"
            self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
            super().__init__((host.strip("[]"), port), _Handler, bind_and_activate=False)
        try:
            self.server_bind()
            self.server_activate()
        except BaseException:
            self.server_close()
            raise

    def server_bind(self):
        # Not HTTPServer.server_bind: it looks the host name up (slow, pointless here).
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "tfmesos", self.socket.getsockname()[1]

    def process_request(self, request, client_address):
        """Admit a connection. At ``max_connections`` the oldest one that has
        not asked for a file yet is dropped for it (so idle or slow peers
        without the token cannot keep a fetch out); a download in progress
        never is: with every place a download's, the newcomer is refused."""
        refused = dropped = None
        with self._lock:
            if self._closing.is_set():
                refused = "stopping"
            elif len(self._connections) >= self._max_connections:
                victim = next((sock for sock, known in self._connections.items()
                               if known.waiting), None)
                if victim is None:
                    refused = "every place is a download in progress"
                else:
                    dropped = (victim, self._connections.pop(victim))
            if refused is None:
                self._connections[request] = _Connection(client_address[0])
        if dropped is not None:
            # Said before the close, as expire() does: a client that saw its
            # connection closed finds it said.
            sock, known = dropped
            self.owner.refusals.refused(known.peer, "dropped as the oldest of too many "
                                        "connections that have not asked for a file yet")
            shut_down(sock)
        if refused is not None:
            self.owner.refusals.refused(client_address[0], refused)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self._lock:
            self._connections.pop(request, None)
        super().shutdown_request(request)

    def authenticated(self, request) -> None:
        """``request`` asked for a file with the token: it is never dropped
        for a newcomer, and what it does is said."""
        with self._lock:
            known = self._connections.get(request)
            if known is not None:
                known.waiting = False

    def expire(self, request, why: Optional[str] = None, client: str = "") -> bool:
        """Shut ``request`` down, if still open: whether it had not asked for
        a file yet (then ``why``, a refusal of ``client``, is said first: a
        client that saw its connection closed finds it said)."""
        with self._lock:
            known = self._connections.get(request)
            if known is None:
                return False
            if known.waiting and why is not None:
                self.owner.refusals.refused(client, why)
            shut_down(request)
            return known.waiting

    def service_actions(self):
        self.owner.refusals.flush()   # a count held for a period is said

    def handle_error(self, request, client_address):
        """One line for a client that went away (not socketserver's traceback);
        one without the token is a refusal (a few said, then counted)."""
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            with self._lock:
                known = self._connections.get(request)
            if known is None:   # dropped for a newcomer: said then
                return
            if known.waiting:
                self.owner.refusals.refused(client_address[0], "went away mid-request: %s"
                                            % quoted(str(error)))
                return
            logger.warning("bundle server: %s went away mid-request: %s", client_address[0],
                           error)
        else:
            logger.error("bundle server: serving %s failed", client_address[0], exc_info=True)

    def close(self, thread):
        """Stop ``serve_forever`` (run by ``thread``) at once, and the connections."""
        if self._closing.is_set():
            return
        self._closing.set()
        if thread is not threading.current_thread():
            stop_serving(self, thread)
        else:   # its own loop: it ends when this request returns
            self._BaseServer__shutdown_request = True
        self.server_close()
        with self._lock:
            for request in self._connections:
                shut_down(request)




class _Handler(http.server.BaseHTTPRequestHandler):
    # Headers and body (an event of a stream) are separate writes: the second
    # must not wait for the client's delayed ACK (socketserver sets TCP_NODELAY).
    disable_nagle_algorithm = True
    server_version = "tfmesos-bundle"
    sys_version = ""
    protocol_version = "HTTP/1.0"
    server: _Server   # the server that made it (socketserver's BaseServer)

    def setup(self):
        super().setup()
        self.connection.settimeout(self.server.idle_timeout)   # each read and write
        self._deadline: Optional[threading.Timer] = None
        self._began = time.monotonic()
        # Its request line soon (a fetcher sends it at once), the whole
        # request within request_timeout, however it trickles.
        self._limit(self.server.line_timeout, "sent no request line within %.0f s"
                    % self.server.line_timeout)

    def parse_request(self):
        """The request line came: the rest of the request's time for its headers."""
        self._limit(max(0.0, self._began + self.server.request_timeout - time.monotonic()),
                    "sent no whole request within %.0f s" % self.server.request_timeout)
        # parse_headers reads lines only
        return parse_request_within(self, super().parse_request, MAX_HEADER_BYTES)

    def finish(self):
        self._limit(None)
        super().finish()

    def _limit(self, seconds, why=None):
        """From now on the connection has ``seconds`` left (None: no deadline):
        past them it is shut down, whatever the client is doing (``why``: a
        refusal said then, if it still has not asked for a file)."""
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        if seconds is not None:
            self._deadline = threading.Timer(seconds, self._expire, args=(why,))
            self._deadline.daemon = True
            self._deadline.start()

    def _expire(self, why):
        self.server.expire(self.request, why, self.client_address[0])

    def do_HEAD(self):
        self._serve(body=False)

    def do_GET(self):
        self._serve(body=True)

    def _refuse(self):
        self.send_response(405)
        self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_CONNECT = do_TRACE = _refuse

    def _serve(self, body):
        owner = self.server.owner
        path = owner.lookup(self.path.split("?", 1)[0])
        if path is None:
            with owner._lock:
                owner.not_found += 1
            owner.refusals.refused(self.client_address[0], "asked for '%s': not found (404)"
                                   % quoted(self.path, 120))
            self.send_error(404)
            return
        self.server.authenticated(self.request)
        try:
            handle = open(path, "rb")
        except OSError as exc:
            # This side's failure, not the peer's (it had the token): out of
            # file descriptors was a 404 and a refusal, the cause nowhere.
            self.send_error(*owner.cannot_open(self.path.rsplit("/", 1)[-1], exc))
            return
        with handle:
            size = os.fstat(handle.fileno()).st_size
            # At most max_clients sends at once; one waits for a slot within
            # what is left of its request's time.
            if not self.server.senders.acquire(timeout=self.server.request_timeout):
                self.send_error(503, "too many downloads at once; try again")
                return
            try:
                self._limit(max(MIN_TRANSFER, size / MIN_RATE))
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                if body:
                    sent = self.connection.sendfile(handle)
                    if sent == size:
                        name = self.path.rsplit("/", 1)[-1]
                        with owner._lock:
                            owner.served[name] += 1
            finally:
                self.server.senders.release()

    def log_message(self, format, *args):
        logger.debug("bundle server: %s " + format, self.client_address[0], *args)


__all__ = ["BundleServer", "BundleServerError", "MAX_CLIENTS", "IDLE_TIMEOUT",
           "REQUEST_TIMEOUT"]
