"""The bundle server (``tfmesos.ship.bundle_server``) against peers that
have no token: what they make it say, and that they cannot keep the
agents' fetchers out (its plain serving is in test_ship.py)."""

import logging
import socket
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


def test_a_path_is_quoted_escaped_in_its_line(small, caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with socket.create_connection(("127.0.0.1", small.port), timeout=30) as conn:
        conn.sendall(b"GET /\x1b[2J\xe2\x80\xae" + b"y" * 500 + b" HTTP/1.0\r\n\r\n")
        assert conn.recv(100).startswith(b"HTTP/1.0 404")
    said = wait_until(lambda: warnings(caplog), 30)
    assert len(said) == 1 and "\x1b" not in said[0] and "\\x1b[2J" in said[0], said
    assert not any(0x80 <= ord(c) <= 0x9f for c in said[0]) and len(said[0]) < 300, said
