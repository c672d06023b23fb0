"""The bundle server (``tfmesos.ship.bundle_server``) against peers that
have no token: what they make it say, and that they cannot keep the
agents' fetchers out (its plain serving is in test_ship.py)."""

import logging
import socket
import time
import urllib.error
import urllib.request

import pytest
from waiting import wait_until

from tfmesos.refusal_log import FIRST_REFUSALS
from tfmesos.ship.bundle_server import BundleServer

pytestmark = pytest.mark.timeout(120)

LOGGER = "tfmesos.ship.bundle_server"


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "f.zip"
    path.write_bytes(b"x" * 1000)
    server = BundleServer({"f.zip": str(path)}, bind_host="127.0.0.1")
    yield server
    server.stop()


def fetch(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno >= logging.WARNING]


def test_404s_are_said_a_few_then_counted_and_the_count_said_at_stop(small, caplog):
    # 2000 requests for /nopeN were 2000 lines in tfrun's output.
    caplog.set_level(logging.WARNING, logger=LOGGER)
    for number in range(40):
        with pytest.raises(urllib.error.HTTPError) as caught:
            fetch("http://127.0.0.1:%d/nope%d" % (small.port, number))
        caught.value.close()     # its response's socket
        assert caught.value.code == 404
    assert small.not_found == 40
    said = warnings(caplog)
    assert len(said) == FIRST_REFUSALS, "%d lines: %s" % (len(said), said[-1])
    assert said[0] == "bundle server: refused a connection from 127.0.0.1: asked for " \
                      "'/nope0': not found (404)"
    assert said[-1].endswith("(more are counted, said at most once in 60 s)"), said
    small.stop()     # the count is said as it stops
    said = warnings(caplog)
    assert len(said) == FIRST_REFUSALS + 1, said
    assert said[-1].startswith("bundle server: refused %d more connections in the last "
                               % (40 - FIRST_REFUSALS)), said[-1]
    assert said[-1].endswith("(the latest from 127.0.0.1: asked for '/nope39': not found "
                             "(404))"), said[-1]


def test_headers_past_their_bound_are_a_431(small):
    # 16 KiB of request line and headers (a fetcher sends a few hundred bytes):
    # Python's own bounds let 6.4 MB be held per connection, 128 of them.
    fat = "".join("X-Fat-%d: %s\r\n" % (number, "x" * 10000) for number in range(2))
    with socket.create_connection(("127.0.0.1", small.port), timeout=30) as sock:
        sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n"
                      % (small.path_of("f.zip"), fat)).encode())
        reply = sock.recv(200)
    assert reply.startswith(b"HTTP/1.0 431") or reply.startswith(b"HTTP/1.1 431"), reply
    with socket.create_connection(("127.0.0.1", small.port), timeout=30) as sock:
        sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n"
                      % (small.path_of("f.zip"), "X-Fat: %s\r\n" % ("x" * 10000))).encode())
        assert sock.recv(200).startswith(b"HTTP/1.0 200")   # within the bound: served


def test_a_path_is_quoted_escaped_in_its_line(small, caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with socket.create_connection(("127.0.0.1", small.port), timeout=30) as conn:
        conn.sendall(b"GET /\x1b[2J\xe2\x80\xae" + b"y" * 500 + b" HTTP/1.0\r\n\r\n")
        assert conn.recv(100).startswith(b"HTTP/1.0 404")
    said = wait_until(lambda: warnings(caplog), 30)
    assert len(said) == 1 and "\x1b" not in said[0] and "\\x1b[2J" in said[0], said
    assert not any(0x80 <= ord(c) <= 0x9f for c in said[0]) and len(said[0]) < 300, said


# A server's time limits for the tests of its caps: well past the 30 s that
# closed_by_server waits, so that a closing it sees is a drop or a refusal,
# not a silent connection timed out.
PATIENT = {"line_timeout": 120.0, "request_timeout": 120.0, "idle_timeout": 120.0}


def closed_by_server(conn, timeout=30):
    """Whether the server closed ``conn`` (its next read is the end) within ``timeout``."""
    conn.settimeout(timeout)
    try:
        return conn.recv(100) == b""
    except ConnectionResetError:
        return True
    except OSError:      # timed out: still open
        return False


def test_idle_connections_past_the_cap_cannot_keep_a_fetch_out(tmp_path):
    # 130 connections that sent one byte or nothing, held open: the token's
    # fetch failed at once (RemoteDisconnected), again and again, for as
    # long as they were renewed (the 10 s request timeout).
    path = tmp_path / "f.zip"
    path.write_bytes(b"x" * 1000)
    small = BundleServer({"f.zip": str(path)}, bind_host="127.0.0.1", **PATIENT)
    idle = []
    try:
        for number in range(130):
            conn = socket.create_connection(("127.0.0.1", small.port), timeout=30)
            idle.append(conn)
            if number % 2:
                conn.sendall(b"G")
        url = small.url("127.0.0.1", "f.zip")
        for _ in range(3):
            assert fetch(url) == b"x" * 1000
        # The oldest of those still to ask for a file made room.
        assert closed_by_server(idle[0])
    finally:
        for conn in idle:
            conn.close()
        small.stop()


def start_download(server, name):
    """A GET of ``name`` whose response has begun (its headers read), the
    client then reading nothing: a fetch in progress."""
    conn = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    try:
        conn.sendall(b"GET %s HTTP/1.0\r\n\r\n" % server.path_of(name).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(1)
            assert chunk, "closed before its response"
            head += chunk
        assert head.startswith(b"HTTP/1.0 200"), head
    except BaseException:
        conn.close()
        raise
    return conn


def big_file(tmp_path):
    """(a sparse file larger than any socket buffers here, its size): its
    download stays in progress while its client reads nothing."""
    path, size = tmp_path / "big.tar.gz", 96 << 20
    with open(path, "wb") as handle:
        handle.truncate(size)
    return str(path), size


def read_all(conn):
    received = 0
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            return received
        received += len(chunk)


def test_a_fetch_in_progress_is_never_dropped_for_a_newcomer(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    path, size = big_file(tmp_path)
    server = BundleServer({"big.tar.gz": path}, bind_host="127.0.0.1", max_clients=2,
                          max_connections=3, **PATIENT)
    downloads, newcomers = [], []
    try:
        for _ in range(2):   # each kept as it starts: closed below should the next fail
            downloads.append(start_download(server, "big.tar.gz"))
        # One place left: each newcomer takes it from the one before.
        for _ in range(6):
            newcomers.append(socket.create_connection(("127.0.0.1", server.port), timeout=30))
        for conn in newcomers[:-1]:
            assert closed_by_server(conn)
        # Every place a download's: a newcomer is refused, the downloads go on.
        for conn in downloads:
            conn.settimeout(60)
        assert [read_all(conn) for conn in downloads] == [size, size]
    finally:
        for conn in downloads + newcomers:
            conn.close()
        server.stop()
    dropped = [line for line in warnings(caplog) if "dropped" in line]
    assert dropped and dropped[0] == (
        "bundle server: refused a connection from 127.0.0.1: dropped as the oldest of too many "
        "connections that have not asked for a file yet"), warnings(caplog)


def test_a_download_holding_every_place_refuses_newcomers(tmp_path):
    path, size = big_file(tmp_path)
    server = BundleServer({"big.tar.gz": path}, bind_host="127.0.0.1", max_clients=1,
                          max_connections=1, **PATIENT)
    download = newcomer = None
    try:
        download = start_download(server, "big.tar.gz")
        newcomer = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        assert closed_by_server(newcomer)
        download.settimeout(60)
        assert read_all(download) == size
    finally:
        for conn in (download, newcomer):
            if conn is not None:
                conn.close()
        server.stop()


def test_a_silent_connection_is_said_refused_before_it_is_closed(tmp_path, monkeypatch):
    # Said after the shutdown, on the timer's thread: a loaded machine's
    # client saw its connection closed and the test read the warnings before
    # the refusal was said (CI: "... sent no request line within 2 s" in []).
    from tfmesos.ship import bundle_server
    order = []
    real_shut_down = bundle_server.shut_down
    monkeypatch.setattr(bundle_server, "shut_down",
                        lambda sock: (order.append("closed"), real_shut_down(sock)))
    path = tmp_path / "f.zip"
    path.write_bytes(b"data")
    server = BundleServer({"f.zip": str(path)}, bind_host="127.0.0.1", line_timeout=1.0,
                          request_timeout=120.0)
    monkeypatch.setattr(server.refusals, "refused", lambda peer, why: order.append(why))
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as silent:
            assert closed_by_server(silent, 60)
    finally:
        server.stop()
    assert order[:2] == ["sent no request line within 1 s", "closed"], order


def test_a_connection_has_a_few_seconds_to_send_its_request_line(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    path = tmp_path / "f.zip"
    path.write_bytes(b"data")
    server = BundleServer({"f.zip": str(path)}, bind_host="127.0.0.1", line_timeout=2.0,
                          request_timeout=120.0)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as silent, \
                socket.create_connection(("127.0.0.1", server.port), timeout=60) as asking:
            asking.sendall(b"GET %s HTTP/1.0\r\n" % server.path_of("f.zip").encode())
            # The silent one is cut off at its line's deadline; the one whose
            # line came still has its request's time for its headers.
            assert closed_by_server(silent, 60)
            asking.sendall(b"\r\n")
            answer = b""
            while True:
                chunk = asking.recv(1 << 16)
                if not chunk:
                    break
                answer += chunk
            assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"\r\n\r\ndata")
    finally:
        server.stop()
    assert "bundle server: refused a connection from 127.0.0.1: sent no request line within " \
           "2 s" in warnings(caplog)


def test_a_connection_dropped_for_a_newcomer_finds_its_refusal_said_once_it_sees_the_close(
        tmp_path, caplog, monkeypatch):
    # The drop closed it, then said it: a loaded machine (here a slow log)
    # let the client see the close first, as expire() already said first.
    from tfmesos.refusal_log import RefusalLog
    slow = RefusalLog.refused

    def slowly(self, *args, **kwargs):
        time.sleep(0.3)
        return slow(self, *args, **kwargs)

    monkeypatch.setattr(RefusalLog, "refused", slowly)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    path = tmp_path / "f.zip"
    path.write_bytes(b"data")
    server = BundleServer({"f.zip": str(path)}, bind_host="127.0.0.1", max_connections=1,
                          **PATIENT)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as oldest, \
                socket.create_connection(("127.0.0.1", server.port), timeout=30):
            assert closed_by_server(oldest)
            assert warnings(caplog) == [
                "bundle server: refused a connection from 127.0.0.1: dropped as the oldest of "
                "too many connections that have not asked for a file yet"], warnings(caplog)
    finally:
        server.stop()


# -- a file the server cannot open ---------------------------------------------------

def test_a_file_it_cannot_open_is_a_503_with_the_reason_not_a_404_nor_a_refusal(
        small, caplog, monkeypatch):
    # Out of file descriptors (ulimit -n), open() failed with EMFILE and the
    # fetcher got "HTTP Error 404: Not Found" (hint: "check that it exists"),
    # each a peer's refusal in tfrun's output, the real cause nowhere.
    import tfmesos.ship.bundle_server as bundle_server

    def no_descriptors(*args, **kwargs):
        raise OSError(24, "Too many open files", args[0])

    caplog.set_level(logging.WARNING, logger=LOGGER)
    monkeypatch.setattr(bundle_server, "open", no_descriptors, raising=False)
    for _ in range(3):
        with pytest.raises(urllib.error.HTTPError) as caught:
            fetch("http://127.0.0.1:%d%s" % (small.port, small.path_of("f.zip")))
        caught.value.close()
        assert caught.value.code == 503
        assert "Too many open files" in caught.value.reason, caught.value.reason
        assert "ulimit -n" in caught.value.reason, caught.value.reason
    assert small.not_found == 0
    said = warnings(caplog)
    assert not any("refused" in line for line in said), said
    # Said once, in one line, with what to do.
    assert len(said) == 1, said
    assert said[0].startswith("bundle server: cannot open f.zip to serve it: [Errno 24] Too "
                              "many open files"), said[0]
    assert "ulimit -n" in said[0], said[0]
    monkeypatch.undo()
    assert fetch("http://127.0.0.1:%d%s" % (small.port, small.path_of("f.zip"))) == b"x" * 1000


def test_a_file_gone_from_under_it_is_a_server_error_not_a_refusal(small, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    (tmp_path / "f.zip").unlink()
    with pytest.raises(urllib.error.HTTPError) as caught:
        fetch("http://127.0.0.1:%d%s" % (small.port, small.path_of("f.zip")))
    caught.value.close()
    assert caught.value.code == 500 and "No such file or directory" in caught.value.reason
    assert small.not_found == 0
    said = warnings(caplog)
    assert len(said) == 1 and said[0].startswith("bundle server: cannot open f.zip"), said


SERVE_OUT_OF_DESCRIPTORS = r"""
import os, resource, sys, time
from tfmesos.ship.bundle_server import BundleServer
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
server = BundleServer({"f.zip": sys.argv[1]}, bind_host="127.0.0.1")
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
os.close(held.pop())     # one left: for the connection accepted, none for the file
print(server.port, server.path_of("f.zip"), flush=True)
sys.stdin.read()         # until the test is done
server.stop()
"""


def test_a_server_out_of_file_descriptors_says_so_to_the_fetcher_and_in_its_output(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "f.zip"
    path.write_bytes(b"x" * 1000)
    child = subprocess.Popen([sys.executable, "-c", SERVE_OUT_OF_DESCRIPTORS, str(path)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        port, url_path = child.stdout.readline().split()
        with pytest.raises(urllib.error.HTTPError) as caught:
            fetch("http://127.0.0.1:%s%s" % (port, url_path))
        caught.value.close()
        code, reason = caught.value.code, caught.value.reason
    finally:
        _, stderr = child.communicate("", timeout=60)
    assert code == 503 and "Too many open files" in reason, (code, reason, stderr)
    assert "404" not in stderr and "refused" not in stderr, stderr
    assert "cannot open f.zip to serve it: [Errno 24] Too many open files" in stderr, stderr
