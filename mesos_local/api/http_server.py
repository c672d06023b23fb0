"""The local master's HTTP server (stdlib ``ThreadingHTTPServer``, HTTP/1.1).

``POST /api/v1/scheduler`` is checked in the order Mesos' ``master/http.cpp``
checks it: authentication when the master has credentials (401 with a
``WWW-Authenticate`` challenge, before anything else, as libprocess
authenticates a route's realm before its handler runs), leadership
(307/503), Content-Type (400/415), JSON or protobuf (400: ``proto.py``
reads a protobuf Call into the dict its JSON would be), the Call as the master
reads it (``LocalMaster.parse_call``: as Mesos' parser does, or strictly;
400 naming the field), Mesos' call validation (400, including a SUBSCRIBE
whose ``FrameworkInfo.principal`` is not the authenticated one), Accept for
SUBSCRIBE and RECONCILE_OPERATIONS (406; JSON where allowed, else protobuf);
then SUBSCRIBE streams chunked RecordIO of Events in that encoding and every other
call goes to the master (202, or 400/403 for stream, principal and
framework mismatches). ``GET`` of the read endpoints (``endpoints.py``:
``/master/state``, ``/master/tasks``, ``/metrics/snapshot``, ...) and
``/health`` complete the surface; like Mesos' read-only endpoints by default
they are not authenticated, and they show no secrets. ``GET /files/read``
and ``/files/browse`` answer as a Mesos master's do: a sandbox is served by
its agent only (``agent_http.py``), so every path is 404 here
(``files.nothing_attached``); they ask for the master's credentials when it
has them.
``POST /api/v1`` (the v1 operator API) and ``POST /master/teardown``
(``operator.py``) ask for them too (realm ``mesos-master-readwrite``), then
redirect to the leader, then read the body, as the scheduler endpoint; the
operator's SUBSCRIBE streams as a scheduler's does (``stream.py``). Every
path reaches its endpoint as libprocess routes it (``routes.py``: the
longest route that prefixes it, ``/state`` the master's ``/master/state``).

Bounds, so that slow, greedy or malformed clients cannot exhaust it:

* one **deadline** per request (``request_deadline``): request line,
  headers and body must all be in by then, however slowly they trickle
  (``deadlines.py``); a stream, once subscribed, is not bound by it;
* at most ``max_connections`` open **connections** (one handler thread
  each); past that one gives way for a newcomer (one without an
  authenticated call, else an idle one of the principal that holds the
  most: ``process_request``), and where none can (every one a stream or in
  a call) a new connection gets a 503 and is closed at once;
* credentials are checked from the headers, **before a body is read**: a
  401 (or a 404 for an unknown path) closes the connection with its body
  unread;
* bodies of at most 64 MiB, JSON **nested** at most 100 levels deep and
  holding only **finite** numbers (``json_body.py``: a 400 naming the
  field); Mesos' range for ``failover_timeout`` and bounded framework
  names and labels (``frameworks.py``); JSONP callbacks that are
  JavaScript identifiers (``endpoints.py``);
* out of **file descriptors** (``ulimit -n``): an ``accept()`` that fails
  is said once and tried again after ``ACCEPT_RETRY`` seconds, not in a
  spin; a SUBSCRIBE whose stream cannot be made (its pipe) is a 503 naming
  the cause, and leaves no framework behind.
"""

import collections
import dataclasses
import errno
import logging
import socket
import socketserver
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

from ..errors import CallError
from . import endpoints, files, operator, proto, routes, validation
from .auth import CHALLENGE, OPERATOR_CHALLENGE, READONLY_CHALLENGE, UNAUTHORIZED_BODY
from .deadlines import Deadlines, end_connection
from .endpoints import redirect_location
from .header_budget import parse_request_within
from .host_names import ipv6_only_address
from .serve_stop import stop_serving
from .state_json import VERSION
from .stream import ABORTED, CLIENT_GONE, CLOSED, OVERFLOWED

log = logging.getLogger(__name__)

# The routes (routes.resolve) of the operator's endpoints (POST only,
# authenticated in realm mesos-master-readwrite, answered by the leader:
# operator.py) and of all POST-only ones.
_OPERATOR_ROUTES = (routes.OPERATOR, routes.TEARDOWN)
_POST_ROUTES = (routes.SCHEDULER,) + _OPERATOR_ROUTES
_FILES = {routes.READ_FILE: files.READ_PATH, routes.BROWSE_FILES: files.BROWSE_PATH}
JSON = "application/json"
_MAX_BODY = 64 * 1024 * 1024
REFUSAL_SAID_EVERY = 60.0   # seconds: a connection refused for want of a thread, said once
MAX_HEADER_BYTES = 64 * 1024   # a request's headers together (431 past it)


_TEXT = "text/plain; charset=utf-8"
ACCEPT_RETRY = 0.1   # seconds before accept() is tried again, out of file descriptors
_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_BUSY_BODY = b"Too many connections (%d): try again later"
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
         b"Content-Length: %d\r\nConnection: close\r\n\r\n")


class _BodyError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def principal_error(call, principal):
    """Mesos' check that a SUBSCRIBE's ``FrameworkInfo.principal``, when
    set, is the authenticated principal (``validation::scheduler::call::
    validate``, src/master/validation.cpp); an error message or None."""
    if principal is None or call.get("type") != "SUBSCRIBE":
        return None
    declared = call["subscribe"]["framework_info"].get("principal")
    if declared is not None and declared != principal:
        return ("Authenticated principal '%s' does not match principal '%s' set in "
                "`FrameworkInfo`" % (principal, declared))
    return None


def _shut_down(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


@dataclasses.dataclass
class _Held:
    """What the server knows of an open connection: whether a call on it
    was authenticated (``vouched``) and as whom (``principal``; None on a
    master without credentials), whether it waits for its next call
    (``idle``) or carries a subscription's stream (``streaming``)."""

    vouched: bool = False
    principal: Optional[str] = None
    idle: bool = False
    streaming: bool = False


def out_of_descriptors(exc):
    """What to do about ``exc`` when it is out of file descriptors (EMFILE,
    ENFILE), for after its words; else ""."""
    if exc.errno == errno.EMFILE:
        return " (raise ulimit -n of the process that runs the local master)"
    if exc.errno == errno.ENFILE:
        return " (the system's: fs.file-max)"
    return ""


class MasterHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    request_deadline = 30.0     # seconds for a whole request, headers and body
    max_connections = 256       # open connections, each with its handler thread

    thread_name = "local-master-http"

    def __init__(self, master: Any, host: str, port: int, handler: Any = None) -> None:
        self.master = master   # the LocalMaster (not named here: it imports this module)
        self.deadlines = Deadlines()
        if ":" in host or ipv6_only_address(host):
            self.address_family = socket.AF_INET6
        # Every open connection, oldest first, and what may drop it for a
        # newcomer (``process_request``).
        self._connections: dict[socket.socket, _Held] = {}
        self._connections_lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._refusal_said: Optional[float] = None   # when a refused thread was last said
        self._accept_failed = False   # said once: accept() out of file descriptors
        super().__init__((host, port), handler or _Handler)
        bound = self.server_name
        if bound in ("0.0.0.0", "::", ""):
            bound = "127.0.0.1" if self.address_family == socket.AF_INET else "::1"
        self.url_host = "[%s]" % bound if ":" in bound else bound

    def server_bind(self):
        # HTTPServer.server_bind resolves the FQDN, which can hang on bad DNS.
        socketserver.TCPServer.server_bind(self)
        # (host, port[, flow, scope]) as the socket has it: the host as text
        self.server_name, self.server_port = self.socket.getsockname()[:2]

    def get_request(self):
        """``accept()``. Out of file descriptors (or memory) the connection
        stays queued and socketserver's loop would try again at once, for
        as long as it lasts, without a word: it is said once, and the loop
        waits a little before the next try."""
        try:
            return super().get_request()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                if not self._accept_failed:
                    self._accept_failed = True
                    log.warning("local master: cannot accept a connection: %s%s", exc,
                                out_of_descriptors(exc))
                time.sleep(ACCEPT_RETRY)
            raise

    def process_request(self, request, client_address):
        """Admit a connection. At ``max_connections`` one gives way for it
        (``_to_drop``): the oldest on which no call was authenticated (a
        peer without credentials that holds connections, idle or sending
        half a request, crowds out only its like), else the oldest idle one
        of the principal that holds the most (one principal cannot lock
        the others out; a client's kept-alive connection closed while idle
        is opened again). With every connection a subscription's stream or
        in a call, the newcomer is refused at once (503)."""
        dropped = None
        with self._connections_lock:
            full = len(self._connections) >= self.max_connections
            if full:
                dropped = self._to_drop()
                if dropped is not None:
                    del self._connections[dropped]
                    full = False
                    # Shut down under the lock, while it is one of ours: its
                    # handler closes it (its number free for reuse) only
                    # after it has left this table (shutdown_request).
                    _shut_down(dropped)
            if not full:
                self._connections[request] = _Held()
        if dropped is not None:
            log.debug("dropped a connection of the %d open for one from %s",
                      self.max_connections, client_address)
        if full:
            body = _BUSY_BODY % self.max_connections
            end_connection(request, _BUSY % len(body) + body)
            request.close()
            return
        super().process_request(request, client_address)

    def _to_drop(self):
        """The connection that gives way for a newcomer, or None (under
        ``_connections_lock``)."""
        unvouched = next((sock for sock, held in self._connections.items()
                          if not held.vouched), None)
        if unvouched is not None:
            return unvouched
        idle = [(sock, held) for sock, held in self._connections.items()
                if held.idle and not held.streaming]
        if not idle:
            return None
        counts = collections.Counter(held.principal for held in self._connections.values())
        most = max(counts[held.principal] for _, held in idle)
        return next(sock for sock, held in idle if counts[held.principal] == most)

    def vouch(self, request, principal=None):
        """A call on ``request`` was authenticated as ``principal`` (or needs
        no credentials on this master: None): it is in a call, and gives way
        for a newcomer only as ``_to_drop`` says."""
        with self._connections_lock:
            held = self._connections.get(request)
            if held is not None:
                held.vouched, held.principal, held.idle = True, principal, False

    def waiting(self, request, idle=True):
        """``request``'s connection waits for its next call (kept alive);
        ``idle`` False: a call's request line came (a GET of the state as
        much as an authenticated POST), it is in a call until the next wait."""
        with self._connections_lock:
            held = self._connections.get(request)
            if held is not None:
                held.idle = idle

    def streaming(self, request):
        """``request``'s connection is a subscription's stream: never dropped."""
        with self._connections_lock:
            held = self._connections.get(request)
            if held is not None:
                held.streaming = True

    def handle_error(self, request, client_address):
        # A client that went away (or was cut off at its deadline) is not an
        # error of the server's; anything else is logged, not printed.
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            log.debug("connection from %s ended: %s", client_address, error)
        elif isinstance(error, RuntimeError) and "new thread" in str(error):
            # process_request's thread refused ("can't start new thread": the
            # process limit, ulimit -u, reached): the connection is closed
            # (shutdown_request); said in a line at most once a minute.
            now, level = time.monotonic(), logging.DEBUG
            if self._refusal_said is None or now - self._refusal_said >= REFUSAL_SAID_EVERY:
                self._refusal_said, level = now, logging.WARNING
            log.log(level, "refused a connection from %s: no thread to serve it (%s)",
                    client_address[0] if isinstance(client_address, tuple) else client_address,
                    error)
        else:
            log.exception("error handling a request from %s", client_address)

    def shutdown_request(self, request):
        with self._connections_lock:
            self._connections.pop(request, None)
        super().shutdown_request(request)

    def start(self):
        self.deadlines.start()
        thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
            name=self.thread_name)
        # RuntimeError where no thread is to be had: stop() then waits for no
        # serve_forever (shutdown() would wait for one forever).
        thread.start()
        self._thread = thread

    def stop(self):
        if self._thread is not None:
            stop_serving(self, self._thread)
        self.deadlines.stop()
        self.server_close()
        self.end_connections()

    def end_connections(self):
        """Shut the open connections down: idle keep-alive and stalled streams."""
        with self._connections_lock:
            for sock in self._connections:
                _shut_down(sock)


class _Handler(BaseHTTPRequestHandler):
    # Headers and body (an event of a stream) are separate writes: the second
    # must not wait for the client's delayed ACK (socketserver sets TCP_NODELAY).
    server: MasterHTTPServer   # the server that made it (socketserver's BaseServer)
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server_version = "Mesos/%s (mesos_local)" % VERSION
    sys_version = ""

    def log_message(self, fmt, *args):
        log.debug("%s %s", self.address_string(), fmt % args)

    # -- one deadline per request -------------------------------------------------

    def setup(self):
        super().setup()
        self._requests = 0

    def handle_one_request(self):
        # The first request of a connection that never comes is answered
        # 408; a kept-alive connection left idle is just closed (a client
        # that reuses it would otherwise read a stale 408 as its answer).
        reply = _TIMED_OUT if self._requests == 0 else b""
        if self._requests:
            self.server.waiting(self.connection)
        self._requests += 1
        self._body_read = False
        deadlines = self.server.deadlines
        deadlines.arm(self, self.connection, self.server.request_deadline, reply)
        try:
            super().handle_one_request()
        finally:
            deadlines.disarm(self)

    def parse_request(self):
        self.server.waiting(self.connection, idle=False)   # its request line came
        return parse_request_within(self, super().parse_request, MAX_HEADER_BYTES)

    def _request_in(self):
        """Whether the request arrived within its deadline (which now stops)."""
        if self.server.deadlines.disarm(self):
            return True
        self.close_connection = True
        return False

    def _body_pending(self):
        headers = getattr(self, "headers", None)
        if headers is None:
            return False
        return bool(headers.get("Content-Length", "0").strip() not in ("", "0")
                    or "chunked" in headers.get("Transfer-Encoding", "").lower())

    # -- replies ----------------------------------------------------------------

    def _reply(self, status, body=b"", content_type=_TEXT, headers=()):
        if isinstance(body, str):
            body = body.encode("utf-8")
        self.send_response(status)
        if self.close_connection or (self._body_pending() and not self._body_read):
            # A body left unread (or a request cut short) ends the connection:
            # say so, so that the client does not send its next call on it.
            self.send_header("Connection", "close")
        if body:
            self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _authenticated(self):
        """Whether the request may go on; sets ``self.principal`` (None when
        the master has no credentials). Otherwise answers 401, challenging
        in the realm Mesos routes the path in (the operator's endpoints:
        ``mesos-master-readwrite``; ``/files``: ``mesos-master-readonly``)."""
        master = self.server.master
        self.principal = None
        if master.authenticates:
            self.principal = master.authenticate(self.headers.get("Authorization"))
        if self.principal is not None or not master.authenticates:
            self.server.vouch(self.connection, self.principal)
            return True
        self._reply(401, UNAUTHORIZED_BODY, headers=[("WWW-Authenticate", self._challenge())])
        return False

    def _challenge(self):
        """The WWW-Authenticate challenge of this request's path."""
        if self._target in _OPERATOR_ROUTES:
            return OPERATOR_CHALLENGE
        if self._target in _FILES:
            return READONLY_CHALLENGE
        return CHALLENGE

    def _leader_redirect(self):
        """Answer 307/503 when this master does not lead; True if answered."""
        leader = self.server.master.leader()
        if leader is None:
            return False
        if leader == "":
            self._reply(503, "No leader elected")
        else:
            self._reply(307, headers=[("Location", redirect_location(leader, self.path))])
        return True

    # -- routing -----------------------------------------------------------------

    @property
    def _route(self):
        return urllib.parse.urlsplit(self.path).path

    @property
    def _target(self):
        """The endpoint the path reaches (``routes.resolve``), or None."""
        return routes.resolve(self._route)

    @property
    def _query(self):
        return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))

    def do_GET(self):
        if not self._request_in():
            return
        path, target = self._route, self._target
        endpoint = endpoints.find(target)
        if target == routes.HEALTH:
            self._reply(200)
        elif endpoint is not None:
            query = dict(self._query)
            query[endpoints.LOCAL_ADDRESS] = tuple(self.connection.getsockname()[:2])
            reply = endpoint.reply(self.server.master, path, query, self.path)
            self._reply(reply.status, reply.body, reply.content_type or _TEXT, reply.headers)
        elif target in _FILES:
            if self._authenticated():
                reply = files.reply(_FILES[target], self._query, files.nothing_attached)
                self._reply(reply.status, reply.body, reply.content_type or _TEXT)
        elif target in _POST_ROUTES:
            if self._authenticated() and not self._leader_redirect():
                self._reply(405, "Expecting one of { 'POST' }, but received 'GET'",
                            headers=[("Allow", "POST")])
        else:
            self._reply(404)

    def do_POST(self):
        # Mesos' order (authentication, then leadership), all from the
        # headers: nothing is read of a body that will not be handled.
        target = self._target
        if target not in _POST_ROUTES:
            self._reply(404)
            return
        if not self._authenticated() or self._leader_redirect():
            return
        body = self._body_or_reply()
        if body is None:
            return
        if target == routes.SCHEDULER:
            self._scheduler(body)
            return
        master = self.server.master
        if target == routes.OPERATOR:
            reply = operator.call_reply(master, self.headers.get("Content-Type"),
                                        self.headers.get("Accept"), body)
            if isinstance(reply, operator.Stream):
                self._stream(reply.subscription, (), reply.ended, reply.content_type,
                             proto.MASTER_EVENT)
                return
        else:
            reply = operator.teardown_reply(master, body)
        self._reply(reply.status, reply.body, reply.content_type or _TEXT)

    def _other_method(self):
        if not self._request_in():
            return
        if self.command == "HEAD":
            self.close_connection = True   # the reply's body is not the client's to read
        target = self._target
        if target in _POST_ROUTES:
            if not self._authenticated():
                return
            if target != routes.SCHEDULER and self._leader_redirect():
                return
            self._reply(405, "Expecting one of { 'POST' }, but received '%s'" % self.command,
                        headers=[("Allow", "POST")])
        else:
            self._reply(404)

    # A POST endpoint answers any other method 405, as Mesos' (master/http.cpp:
    # MethodNotAllowed({"POST"})); HEAD and OPTIONS too, not Python's 501 page.
    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _other_method

    # -- bodies ------------------------------------------------------------------

    def _body_or_reply(self):
        """The request's body, read within its deadline and size bound; None
        (answered, or cut off at the deadline) when it is not."""
        try:
            body = self._read_body()
        except _BodyError as exc:
            if self._request_in():
                self.close_connection = True
                self._reply(exc.status, str(exc))
            return None
        if not self._request_in():
            return None
        return body

    def _read_body(self):
        self._body_read = True
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        text = self.headers.get("Content-Length")
        if text is None:
            return b""
        try:
            length = int(text)
        except ValueError:
            raise _BodyError(400, "Invalid Content-Length %r" % text) from None
        if length < 0 or length > _MAX_BODY:
            raise _BodyError(413, "Request body of %d bytes is too large" % length)
        body = self.rfile.read(length)
        if len(body) < length:
            raise _BodyError(400, "The request body ended after %d of %d bytes"
                             % (len(body), length))
        return body

    def _read_chunked(self):
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise _BodyError(400, "Malformed chunked request body") from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            total += size
            if total > _MAX_BODY:
                raise _BodyError(413, "Request body is too large")
            parts.append(self.rfile.read(size))
            self.rfile.readline(1024)

    # -- the scheduler API ---------------------------------------------------------

    def _scheduler(self, body):
        call = operator.read_call(self.headers.get("Content-Type"), body, proto.SCHEDULER_CALL,
                                  "Failed to parse body into Call protobuf")
        if isinstance(call, endpoints.Reply):
            self._reply(call.status, call.body, call.content_type or _TEXT)
            return
        try:
            call = self.server.master.parse_call(call)
        except validation.SchemaError as exc:
            self._reply(400, "Failed to convert JSON into Call protobuf: %s" % exc)
            return
        try:
            validation.check_call(call)
        except validation.CallValidationError as exc:
            self._reply(400, "Failed to validate scheduler::Call: %s" % exc)
            return
        refused = principal_error(call, self.principal)
        if refused is not None:
            self._reply(400, "Failed to validate scheduler::Call: %s" % refused)
            return
        kind = call["type"]
        if kind == "UNKNOWN":
            self._reply(501, "Call type UNKNOWN is not implemented")
            return
        # Mesos decides the Accept type only for the calls answered with a
        # body (Master::Http::scheduler): JSON where allowed, else protobuf.
        accept = JSON
        if kind in ("SUBSCRIBE", "RECONCILE_OPERATIONS"):
            header = self.headers.get("Accept")
            accept = endpoints.negotiate(header if header and header.strip() else None,
                                         operator.ANSWERS, operator.NOT_ACCEPTABLE)
            if isinstance(accept, endpoints.Reply):    # (an empty header: as none)
                self._reply(accept.status, accept.body)
                return
        stream_id = self.headers.get("Mesos-Stream-Id")
        if kind == "SUBSCRIBE":
            if stream_id is not None:
                self._reply(400, "Subscribe calls should not include the 'Mesos-Stream-Id' "
                                 "header")
                return
            self._subscribe(call, accept)
            return
        try:
            status, content_type, reply = self.server.master.scheduler_call(
                call, stream_id, self.principal)
        except CallError as exc:
            self._reply(exc.status, exc.message)
            return
        if reply and content_type == JSON and accept == proto.PROTOBUF_TYPE:
            reply, content_type = proto.encode_json(proto.SCHEDULER_RESPONSE, reply), accept
        self._reply(status, reply, content_type or _TEXT)

    def _subscribe(self, call, content_type):
        master = self.server.master
        # Where this scheduler reached the master: its agents' /files are there too.
        try:
            subscription = master.subscribe(call, self.principal,
                                            address=self.connection.getsockname()[:2])
        except OSError as exc:   # its stream's pipe: out of file descriptors
            self._reply(503, "the local master cannot stream: %s%s"
                        % (exc, out_of_descriptors(exc)))
            return
        self._stream(subscription, [("Mesos-Stream-Id", subscription.stream_id),
                                    ("Cache-Control", "no-cache")], master.stream_ended,
                     content_type, proto.SCHEDULER_EVENT)

    def _stream(self, subscription, headers, ended, content_type=JSON, event=None):
        """Answer 200 and write ``subscription``'s RecordIO frames, one HTTP
        chunk each, until it ends (``Subscription.pump``); then tell
        ``ended(subscription, reason)``. A scheduler's SUBSCRIBE and an
        operator's are both served so; in protobuf (``content_type``),
        each record a serialized ``event`` message."""
        reason = CLOSED
        if content_type == proto.PROTOBUF_TYPE:
            subscription.encoder = proto.frame_encoder(event)
        self.server.streaming(self.connection)
        try:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.flush()
            sock = self.connection
            sock.settimeout(max(30.0, 3 * subscription.heartbeat_interval))

            def write_chunk(data):
                self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))

            reason = subscription.pump(write_chunk, sock)
            if reason == CLOSED:
                try:
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass
            elif reason in (ABORTED, OVERFLOWED):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        except OSError:
            reason = OVERFLOWED if subscription.overflowed else CLIENT_GONE
        finally:
            self.close_connection = True
            subscription.dispose()
            ended(subscription, reason)
