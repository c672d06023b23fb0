"""The task's rendezvous connection lets go of a lost socket's descriptor
only once no thread holds the link: the reader may still be in a poll() on
its number. Closed at once, the number went to the reconnecting thread's
new socket, and the reader's poll, woken by the shutdown, looked again at
the new socket, found nothing and slept on for IDLE_TIMEOUT, waiting on the
old one only: nobody read the new connection (its receipt, its pings), and
the scheduler closed it as stalled (test_run_function's dropped-connection
test, once in a dozen CI runs)."""

import gc
import socket

from tfmesos.task.connection import Connection, _Link
from tfmesos.task.task_environ import TaskEnv

SECRET = b"k" * 32


def lost_link(monkeypatch):
    """A connection whose link (a socket pair's end) was lost; the link,
    its peer, and the connection (no reconnecting thread)."""
    monkeypatch.setattr(Connection, "_reconnect", lambda self, reason: None)
    conn = Connection(TaskEnv(("127.0.0.1", 1), SECRET, "task-1", "127.0.0.1", 0))
    mine, peer = socket.socketpair()
    link = _Link(mine, None)
    conn._link, conn._state = link, "connected"
    conn._lost(link, "broken pipe")
    return link, peer, conn


def test_a_lost_sockets_number_is_not_reused_while_a_thread_holds_its_link(monkeypatch):
    link, peer, conn = lost_link(monkeypatch)
    number = link.sock.fileno()
    assert number != -1            # not closed: a reader's poll may still wait on it
    peer.settimeout(5)
    assert peer.recv(1) == b""     # shut down: every thread on it woke
    new = socket.socket()          # the reconnecting thread's
    try:
        assert new.fileno() != number
    finally:
        new.close()
        peer.close()


def test_a_lost_socket_is_closed_once_no_thread_holds_its_link(monkeypatch):
    link, peer, conn = lost_link(monkeypatch)
    sock = link.sock
    del link
    gc.collect()
    assert sock.fileno() == -1
    peer.close()


def test_a_closed_connections_socket_goes_with_its_last_holder(monkeypatch):
    conn = Connection(TaskEnv(("127.0.0.1", 1), SECRET, "task-1", "127.0.0.1", 0))
    mine, peer = socket.socketpair()
    held = _Link(mine, None)
    conn._link, conn._state = held, "connected"
    conn.close()
    assert mine.fileno() != -1 and peer.recv(1) == b""
    del held
    gc.collect()
    assert mine.fileno() == -1
    peer.close()
