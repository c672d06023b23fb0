"""A master's HTTP endpoints through a proxy, for the tests of what tfmesos
reads of a master: ``MasterProxy(master_url, mode)`` forwards every request
to the master (``/master/state``, ``/master/frameworks``, ``/api/v1``, its
event stream as it comes) and counts them by path (``count``), and answers
the operator API's ``SUBSCRIBE`` as a master may that does not serve it as
tfmesos wants (``mode``):

* ``"pass"``: forwarded, the stream passed on record by record;
* ``"refuse"``: ``501 Call type SUBSCRIBE is not supported``, what the
  embedded master answered before it had the stream (an older Mesos: 404);
* ``"silent"``: forwarded up to the master's SUBSCRIBED, then nothing
  more (no HEARTBEAT), the connection held open: a stream gone silent;
* ``"forged"``: 200 and a RecordIO header that announces a record of 1 TiB.

Every other call goes through unchanged. ``subscribed_at``: when each
SUBSCRIBED was passed on (``time.monotonic()``); ``first_at(path)``: when
``path`` was first asked for.
"""

import collections
import http.client
import http.server
import json
import socket
import threading
import time
import urllib.parse

from tfmesos.mesos import recordio

FORGED_SIZE = 1 << 40
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class MasterProxy:
    def __init__(self, master_url, mode="pass"):
        self.upstream = urllib.parse.urlsplit(master_url)
        self.mode = mode
        self.counts = collections.Counter()
        self.times = {}
        self.subscribed_at = []
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._streams = set()      # the upstream sockets of the streams being passed on
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                proxy._handle(self, None)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                proxy._handle(self, self.rfile.read(length))

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def count(self, path):
        with self._lock:
            return self.counts[path]

    def first_at(self, path):
        with self._lock:
            return self.times.get(path)

    def _handle(self, handler, body):
        path = urllib.parse.urlsplit(handler.path).path
        call = None
        if body and path.startswith("/api/v1"):
            try:
                call = json.loads(body).get("type")
            except (ValueError, AttributeError):
                pass
        key = "SUBSCRIBE" if call == "SUBSCRIBE" else path
        with self._lock:
            self.counts[key] += 1
            self.times.setdefault(key, time.monotonic())
        if call == "SUBSCRIBE" and self.mode == "refuse":
            return _reply(handler, 501, b"Call type SUBSCRIBE is not supported")
        if call == "SUBSCRIBE" and self.mode == "forged":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            _chunk(handler, b"%d\n{" % FORGED_SIZE)
            handler.close_connection = True
            return None
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        try:
            headers = {name: value for name, value in handler.headers.items()
                       if name.lower() not in HOP_HEADERS}
            conn.request(handler.command, handler.path, body=body, headers=headers)
            response = conn.getresponse()
            if call == "SUBSCRIBE" and response.status == 200:
                return self._stream(handler, conn, response)
            payload = response.read()
            handler.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in HOP_HEADERS:
                    handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            return None
        finally:
            conn.close()

    def _stream(self, handler, conn, response):
        """Pass the master's event stream on, record by record (in
        ``silent`` mode: up to SUBSCRIBED, then nothing while the proxy runs)."""
        handler.send_response(200)
        for name, value in response.getheaders():
            if name.lower() not in HOP_HEADERS:
                handler.send_header(name, value)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        decoder = recordio.Decoder()
        passed_subscribed = False
        handler.close_connection = True
        # Reads block until the master sends or close() shuts the socket: a
        # read timeout would end the stream at the first quiet second (a
        # socket file that timed out reads no more).
        conn.sock.settimeout(None)
        with self._lock:
            self._streams.add(conn.sock)
        while not self.closing.is_set():
            try:
                data = response.read1(65536)
            except (OSError, http.client.HTTPException, ValueError, AttributeError):
                return
            if not data:
                break
            for record in decoder.feed(data):
                if self.mode == "silent" and passed_subscribed:
                    continue
                if json.loads(record).get("type") == "SUBSCRIBED":
                    passed_subscribed = True
                    with self._lock:
                        self.subscribed_at.append(time.monotonic())
                try:
                    _chunk(handler, recordio.encode(record))
                except OSError:
                    return
        try:
            _chunk(handler, b"")
        except OSError:
            pass

    def close(self):
        self.closing.set()
        with self._lock:
            for sock in self._streams:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(10)


def _chunk(handler, data):
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    handler.wfile.flush()


def _reply(handler, status, text):
    handler.send_response(status)
    handler.send_header("Content-Type", "text/plain; charset=utf-8")
    handler.send_header("Content-Length", str(len(text)))
    handler.end_headers()
    handler.wfile.write(text)
