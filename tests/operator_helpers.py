"""Calls to the operator API for tests: ``operator`` (a POST),
``response_of`` and ``get`` (a ``Response`` checked against master.proto),
and ``OperatorStream``, a subscriber to its event stream read the hard way:
one raw TCP connection, the HTTP/1.1 response parsed by hand, its chunked
body decoded, the RecordIO records split (docs/recordio.md), each event
checked against ``mesos.v1.master.Event`` (``messages.py``). No HTTP or
Mesos client library is involved in the stream, so the test sees exactly
the bytes the master writes.
"""

import json
import queue
import socket
import threading
import time
import urllib.parse

import requests

from mesos_local.api.validation import validate_message

CLOSED = "__STREAM_CLOSED__"   # pseudo event type put on the queue at the stream's end
JSON = {"Content-Type": "application/json"}


def operator(master, call, auth=None, headers=None, path="/api/v1"):
    """POST a ``master.Call`` (a dict, or raw bytes) to the operator API."""
    data = call if isinstance(call, bytes) else json.dumps(call)
    return requests.post(master.url + path, data=data, auth=auth,
                         headers=dict(JSON, **(headers or {})), allow_redirects=False,
                         timeout=10)


def response_of(master, call, **kwargs):
    """The operator's ``Response`` to ``call``, checked against master.proto."""
    reply = operator(master, call, **kwargs)
    assert reply.status_code == 200, (call, reply.status_code, reply.text)
    assert reply.headers["Content-Type"] == "application/json"
    document = reply.json()
    validate_message("master.Response", document)
    assert document["type"] == call["type"]
    return document


def get(master, kind, **kwargs):
    """The ``get_x`` part of the Response to a ``GET_X`` call."""
    call = {"type": kind}
    if kind == "GET_METRICS":       # validation::master::call::validate wants it
        call["get_metrics"] = {}
    return response_of(master, call, **kwargs)[kind.lower()]


def raw_request(url, path, body, headers=(), timeout=30, receive_buffer=None):
    """A connected socket on which ``POST path`` with ``body`` was sent;
    ``receive_buffer``: its SO_RCVBUF, set before it connects."""
    parsed = urllib.parse.urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(timeout)
    try:
        sock.connect((parsed.hostname, parsed.port))
    except OSError:
        sock.close()
        raise
    lines = ["POST %s HTTP/1.1" % path, "Host: %s" % parsed.netloc,
             "Content-Length: %d" % len(body)]
    lines += ["%s: %s" % pair for pair in headers]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    return sock


class _Reader:
    """Buffered reads of a socket: lines, exact counts."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""

    def _more(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("connection closed")
        self.buffer += data

    def line(self):
        while b"\r\n" not in self.buffer:
            self._more()
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def exactly(self, count):
        while len(self.buffer) < count:
            self._more()
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data


def read_head(reader):
    """(status, {lower-case header: value}) of an HTTP/1.1 response."""
    status = int(reader.line().split(b" ", 2)[1])
    headers = {}
    while True:
        line = reader.line()
        if not line:
            return status, headers
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()


def read_reply(url, path, body, headers=(), timeout=30):
    """(status, headers, body) of a POST answered with a whole response;
    the connection is then closed."""
    with raw_request(url, path, body, headers, timeout) as sock:
        reader = _Reader(sock)
        status, head = read_head(reader)
        return status, head, reader.exactly(int(head.get("content-length", "0")))


class OperatorStream:
    """``SUBSCRIBE`` to ``url``'s operator API (at ``path``); events arrive
    on a thread, ``next_event`` hands them out in order."""

    def __init__(self, url, path="/api/v1", headers=(("Content-Type", "application/json"),),
                 timeout=30):
        body = json.dumps({"type": "SUBSCRIBE"}).encode()
        self.sock = raw_request(url, path, body, headers, timeout)
        self.reader = _Reader(self.sock)
        self.status, self.headers = read_head(self.reader)
        self.events: queue.Queue = queue.Queue()
        self.received = []
        self.clean_end = None      # True: the terminating chunk came; False: cut off
        self._thread = threading.Thread(target=self._read, daemon=True)
        if self.status == 200:
            self.sock.settimeout(None)
            self._thread.start()

    def _read(self):
        pending = b""        # RecordIO bytes not yet a whole record
        try:
            while True:
                size = int(self.reader.line().split(b";")[0], 16)
                if size == 0:
                    self.reader.line()
                    self.clean_end = True
                    break
                pending += self.reader.exactly(size)
                self.reader.line()
                while b"\n" in pending:
                    header, rest = pending.split(b"\n", 1)
                    length = int(header)
                    if len(rest) < length:
                        break
                    event = json.loads(rest[:length])
                    pending = rest[length:]
                    validate_message("master.Event", event)
                    event["_received"] = time.monotonic()
                    self.received.append(event)
                    self.events.put(event)
        except (OSError, EOFError, ValueError) as exc:
            self.clean_end = False
            self.events.put({"type": CLOSED, "error": repr(exc)})
            return
        self.events.put({"type": CLOSED})

    def next_event(self, types=None, timeout=30, skip=("HEARTBEAT",)):
        """The next event of one of ``types`` (a name or a tuple; None: any
        not in ``skip``); events before it of other types are passed over.
        TimeoutError when none comes, AssertionError if the stream ends."""
        if isinstance(types, str):
            types = (types,)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no %s event within %s s" % (types or "new", timeout))
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            if event["type"] == CLOSED and CLOSED not in (types or ()):
                raise AssertionError("the stream ended while waiting for %s: %r"
                                     % (types, event))
            if (event["type"] in types) if types else (event["type"] not in skip):
                return event

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self._thread.is_alive():
            self._thread.join(10)
        self.sock.close()
