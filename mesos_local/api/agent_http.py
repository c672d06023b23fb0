"""One local agent's HTTP server: each agent listens on an address of its
own, named by its ``pid`` in ``/master/state``, ``GET_AGENTS`` and its
offers' ``url``, and serves there what a Mesos agent serves
(src/slave/http.cpp, src/files/files.cpp; docs/endpoints/slave/):

* ``GET /state`` (also ``/slave(1)/state``, ``/state.json``): the agent's
  state JSON (``agent_json.render_state``);
* ``GET /monitor/statistics``: each running executor's statistics;
* ``GET /files/read``, ``/files/browse``: this agent's sandboxes
  (``files.py``);
* ``POST /api/v1`` (also ``/slave(1)/api/v1``): the agent v1 API's read
  calls (``agent_api.py``) and ``ATTACH_CONTAINER_OUTPUT`` (a running
  container's output, streamed: ``attach_output.py``);
* ``POST /api/v1/executor``: the v1 executor API its custom executors
  speak (``executor_api.py``, ``executors.py``);
* ``GET /health``, ``/version``, ``/flags`` (the agent's: ``port``,
  ``hostname``, ``work_dir``).

Paths are routed as libprocess routes them (``routes.resolve_in``: the
process ``slave(1)`` is the delegate). Authentication follows the master's
rules, as a Mesos agent applies them: with credentials, ``/files`` and
``/api/v1`` ask for them (the agent's ``mesos-agent-readwrite`` realm for
the API); ``/state`` and ``/monitor/statistics`` are read endpoints, open
unless ``--authenticate_http_readonly`` (never set here). The server is the
master's (``http_server.py``): the same request deadline, connection
bound and body limit, so idle or greedy clients are cut off as there.

Every agent server of a master shares one ``AgentListeners``: one thread
that accepts on all their sockets and one request-deadline watcher, so that
a master of thousands of agents (a simulated fleet) holds a socket per
agent, not two threads each polling 20 times a second.
"""

import logging
import selectors
import socket
import threading
from typing import Any, Optional

from . import agent_api, agent_json, attach_output, executor_api, files, routes
from .auth import UNAUTHORIZED_BODY
from .deadlines import Deadlines
from .endpoints import Reply, json_reply
from .http_server import MasterHTTPServer, _Handler
from .operator import Stream
from .state_json import render_version

log = logging.getLogger(__name__)

DELEGATE = "slave(1)"
ROUTES = {
    DELEGATE: frozenset(("api/v1", "api/v1/executor", "state", "state.json", "health",
                         "flags")),
    "monitor": frozenset(("statistics", "statistics.json")),   # ResourceMonitorProcess
    "files": frozenset(("read", "browse")),
    "version": frozenset(("",)),
}
API = DELEGATE + "/api/v1"
EXECUTOR_API = DELEGATE + "/api/v1/executor"
_STATE = (DELEGATE + "/state", DELEGATE + "/state.json")
_STATISTICS = ("monitor/statistics", "monitor/statistics.json")
_FILES = {"files/read": files.READ_PATH, "files/browse": files.BROWSE_PATH}
AGENT_REALM = "mesos-agent-readwrite"
AGENT_CHALLENGE = 'Basic realm="%s"' % AGENT_REALM
# /files: READONLY_HTTP_AUTHENTICATION_REALM (src/slave/main.cpp:840, constants.hpp:178).
AGENT_READONLY_CHALLENGE = 'Basic realm="mesos-agent-readonly"'


class AgentListeners:
    """The one thread that accepts connections for every agent server of a
    master (each connection is then handled in a thread of its own, as the
    master's server does), and their shared request deadlines."""

    def __init__(self) -> None:
        self.deadlines = Deadlines()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    def add(self, server: "AgentHTTPServer") -> None:
        """Accept for ``server`` from now on (starting the thread at the first)."""
        with self._lock:
            if self._closed:
                return
            self._selector.register(server.socket, selectors.EVENT_READ, server)
            if self._thread is None:
                self.deadlines.start()
                thread = threading.Thread(target=self._run, daemon=True,
                                          name="local-agents-http")
                thread.start()   # RuntimeError where no thread is to be had: none to join
                self._thread = thread
        self._wake()

    def remove(self, server: "AgentHTTPServer") -> None:
        with self._lock:
            try:
                self._selector.unregister(server.socket)
            except (KeyError, ValueError):
                pass
        self._wake()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake()
        if thread is not None:
            thread.join(5)
        self.deadlines.stop()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    break
            for key, _ in self._selector.select(1.0):
                if key.data is None:
                    try:
                        self._wake_r.recv(4096)
                    except OSError:
                        pass
                    continue
                # BaseServer._handle_request_noblock: accept, verify, then
                # process_request (a thread per connection, as serve_forever).
                key.data._handle_request_noblock()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


class AgentHTTPServer(MasterHTTPServer):
    """The server of ``agent`` (a master ``Agent``), of ``master``; it
    accepts through ``listeners`` (shared by the master's agents)."""

    # ATTACH_CONTAINER_OUTPUT: the heartbeat (Mesos' --http_heartbeat_interval)
    # and how long a write may wait for a client that reads nothing.
    attach_heartbeat_interval = 30.0
    attach_write_timeout = 30.0

    def __init__(self, master: Any, agent: Any, host: str, port: int,
                 listeners: AgentListeners) -> None:
        self.agent = agent
        self.output_lock = threading.Lock()
        self.output_streams: set[attach_output.OutputStream] = set()   # streaming now
        self.dropped_outputs = 0        # streams dropped for a client that read nothing
        super().__init__(master, host, port, handler=_AgentHandler)
        self.deadlines = listeners.deadlines
        self.listeners = listeners

    def start(self) -> None:
        self.listeners.add(self)

    def stop(self) -> None:
        """Accept no more; end the open connections (the shared deadlines
        and thread stop with ``AgentListeners.close``)."""
        self.listeners.remove(self)
        self.server_close()
        self.end_connections()


class _AgentHandler(_Handler):
    server: AgentHTTPServer

    @property
    def _target(self):
        return routes.resolve_in(self._route, ROUTES, DELEGATE)

    def _challenge(self):
        return AGENT_READONLY_CHALLENGE if self._target in _FILES else AGENT_CHALLENGE

    def do_GET(self):
        if not self._request_in():
            return
        target = self._target
        master, agent = self.server.master, self.server.agent
        query = self._query
        if target == DELEGATE + "/health":
            self._reply(200)
            return
        if target == "version/":
            reply = json_reply(render_version(), query)
        elif target == DELEGATE + "/flags":     # Http::flags: {"flags": _flags()}
            reply = json_reply({"flags": agent_json.render_flags(agent, self.server.server_port)},
                               query)
        elif target in _STATE:
            address = (self.connection.getsockname()[0], self.server.server_port)
            hostname = (master.master_info or {}).get("hostname", "")
            reply = json_reply(master.read(lambda _m, records: agent_json.render_state(
                agent, records, address, master.start_time, hostname)), query)
        elif target in _STATISTICS:
            reply = json_reply(master.read(
                lambda _m, records: agent_json.render_monitor(agent, records)), query)
        elif target in _FILES:
            if not self._authenticated():
                return
            reply = files.reply(_FILES[target], query, master.agent_sandboxes(agent.id))
        elif target == API:
            if self._authenticated():
                self._reply(405, "Expecting one of { 'POST' }, but received 'GET'",
                            headers=[("Allow", "POST")])
            return
        elif target == EXECUTOR_API:
            self._reply(405, "Expecting one of { 'POST' }, but received 'GET'",
                        headers=[("Allow", "POST")])
            return
        else:
            self._reply(404)
            return
        self._reply(reply.status, reply.body, reply.content_type or "text/plain; charset=utf-8",
                    reply.headers)

    def do_POST(self):
        if self._target == EXECUTOR_API:
            self._executor()
            return
        if self._target != API:
            self._reply(404)
            return
        if not self._authenticated():
            return
        body = self._body_or_reply()
        if body is None:
            return
        master, agent = self.server.master, self.server.agent
        call = agent_api.read(self.headers.get("Content-Type"), body)
        if isinstance(call, Reply):
            reply = call
        elif isinstance(call, dict) and call.get("type") == attach_output.CALL:
            answer = attach_output.attach(master, agent, call, self.headers)
            if isinstance(answer, attach_output.OutputStream):
                self._stream_output(answer)
                return
            reply = answer
        else:
            reply = agent_api.call_reply(master, agent, call, self.headers.get("Accept"))
        self._reply(reply.status, reply.body, reply.content_type or "text/plain; charset=utf-8")

    def _stream_output(self, stream):
        """Answer 200 and pump an ATTACH_CONTAINER_OUTPUT stream, one HTTP
        chunk a record, until the container ends (then the last chunk) or
        the client goes (``attach_output.py``); each write may wait
        ``attach_write_timeout`` seconds for the client."""
        server = self.server
        stream.heartbeat_interval = server.attach_heartbeat_interval
        with server.output_lock:
            server.output_streams.add(stream)
        reason = attach_output.CLIENT_GONE
        try:
            self.send_response(200)
            for name, value in stream.headers:
                self.send_header(name, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            sock = self.connection
            sock.settimeout(server.attach_write_timeout)

            def write_chunk(data):
                self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))

            reason = stream.pump(write_chunk, sock)
            if reason == attach_output.ENDED:
                self.wfile.write(b"0\r\n\r\n")
            else:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            self.close_connection = True
            stream.close()
            with server.output_lock:
                server.output_streams.discard(stream)
                if reason == attach_output.DROPPED:
                    server.dropped_outputs += 1
            if reason == attach_output.DROPPED:
                log.warning("agent %s: an ATTACH_CONTAINER_OUTPUT client (%s) was dropped: it "
                            "took nothing for %.0f s", server.agent.id, self.address_string(),
                            server.attach_write_timeout)

    def _executor(self):
        """``/api/v1/executor`` (``executor_api.py``): authenticated (an
        executor's token) where the master has credentials, from the
        headers, before the body is read; SUBSCRIBE streams."""
        master = self.server.master
        allowed, principal = executor_api.authenticate(master, self.headers.get("Authorization"))
        if not allowed:
            self._reply(401, UNAUTHORIZED_BODY,
                        headers=[("WWW-Authenticate", executor_api.CHALLENGE)])
            return
        body = self._body_or_reply()
        if body is None:
            return
        reply = executor_api.call_reply(master, self.server.agent,
                                        self.headers.get("Content-Type"),
                                        self.headers.get("Accept"), body, principal)
        if isinstance(reply, Stream):
            self._stream(reply.subscription, (), reply.ended)
            return
        self._reply(reply.status, reply.body, reply.content_type or "text/plain; charset=utf-8")

    def _other_method(self):
        if not self._request_in():
            return
        if self._target == EXECUTOR_API:
            self._reply(405, "Expecting one of { 'POST' }, but received '%s'" % self.command,
                        headers=[("Allow", "POST")])
        elif self._target == API:
            if self._authenticated():
                self._reply(405, "Expecting one of { 'POST' }, but received '%s'"
                            % self.command, headers=[("Allow", "POST")])
        else:
            self._reply(404)

    do_PUT = do_DELETE = do_PATCH = _other_method


__all__ = ["AgentHTTPServer", "AgentListeners", "ROUTES", "DELEGATE"]
