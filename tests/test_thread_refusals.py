"""The embedded master's parts where a thread cannot start (``RuntimeError:
can't start new thread``: the user's process limit, ``ulimit -u``,
reached): what did start stops without waiting for what did not, and a
connection refused for want of a thread is one line, not a traceback."""

import logging
import socket
import threading

import pytest

from mesos_local.api.deadlines import Deadlines
from mesos_local.api.http_server import MasterHTTPServer
from mesos_local.loop import MasterLoop

pytestmark = pytest.mark.timeout(60)


def refusing(monkeypatch, refused=lambda thread: True):
    """``threading.Thread.start`` refuses the threads ``refused`` names."""
    real = threading.Thread.start

    def start(self):
        if refused(self):
            raise RuntimeError("can't start new thread")
        return real(self)
    monkeypatch.setattr(threading.Thread, "start", start)


def stops_within(stop, seconds=10):
    """Whether ``stop()`` returned within ``seconds`` (on a thread of its own)."""
    done = threading.Event()
    errors = []

    def run():
        try:
            stop()
        except BaseException as exc:   # (the test's, reported below)
            errors.append(exc)
        done.set()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert done.wait(seconds), "%s waits for a thread that never started" % stop
    assert not errors, errors


def test_a_master_server_whose_thread_cannot_start_stops_at_once(monkeypatch):
    server = MasterHTTPServer(None, "127.0.0.1", 0)
    refusing(monkeypatch, lambda thread: thread.name == server.thread_name)
    with pytest.raises(RuntimeError):
        server.start()
    monkeypatch.undo()
    stops_within(server.stop)   # shutdown() waited forever for a serve_forever never run


def test_a_loop_and_deadlines_whose_thread_cannot_start_are_joined_harmlessly(monkeypatch):
    loop, deadlines = MasterLoop(None, None), Deadlines()
    refusing(monkeypatch)
    with pytest.raises(RuntimeError):
        loop.start()
    with pytest.raises(RuntimeError):
        deadlines.start()
    monkeypatch.undo()
    stops_within(lambda: loop.join(1))        # "cannot join thread before it is started"
    stops_within(deadlines.stop)


def test_a_connection_without_a_thread_to_serve_it_is_closed_and_said_in_a_line(
        monkeypatch, caplog):
    server = MasterHTTPServer(None, "127.0.0.1", 0)
    server.start()
    try:
        refusing(monkeypatch,
                 lambda thread: getattr(thread, "_target", None) == server.process_request_thread)
        caplog.set_level(logging.DEBUG, logger="mesos_local.api.http_server")
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as sock:
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                assert sock.recv(100) == b""   # closed, unanswered
        monkeypatch.undo()
    finally:
        monkeypatch.undo()
        server.stop()
    records = [r for r in caplog.records if "no thread to serve it" in r.getMessage()]
    assert len(records) == 3, [r.getMessage() for r in caplog.records]
    assert [r.levelno for r in records] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert records[0].getMessage() == ("refused a connection from 127.0.0.1: no thread to serve "
                                       "it (can't start new thread)")
    assert not any(r.exc_info for r in caplog.records), "a traceback"
