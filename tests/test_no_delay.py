"""Every TCP connection that carries small messages both ways has Nagle's
algorithm off: a frame held back until the peer acknowledges the previous
one waits for the peer's delayed ACK (up to 40 ms on Linux) — a start
message took 35 ms to reach tasks that had just registered."""

import socket

from rendezvous_client import SECRET, make_rendezvous
from waiting import wait_until

from mesos_local.api.http_server import _Handler as MasterHandler
from tfmesos.mesos.http_transport import connect_within
from tfmesos.ship.bundle_server import _Handler as BundleHandler
from tfmesos.task.connection import Connection
from tfmesos.task.task_environ import TaskEnv


def no_delay(sock):
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_both_ends_of_a_rendezvous_connection_send_at_once():
    rdv = make_rendezvous()
    rdv.expect("t1")
    conn = Connection(TaskEnv(("127.0.0.1", rdv.port), SECRET, "t1", "127.0.0.1", 2222))
    try:
        conn.register("127.0.0.1", 2222)
        assert no_delay(conn._link.sock)
        wait_until(lambda: "t1" in rdv._connections, 30)
        assert no_delay(rdv._connections["t1"].sock)
    finally:
        conn.close()
        rdv.close()


def test_the_driver_s_connection_to_the_master_sends_at_once():
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        sock = connect_within(listener.getsockname()[:2], 5)
        try:
            assert no_delay(sock)
        finally:
            sock.close()
    finally:
        listener.close()


def test_the_http_servers_answer_at_once():
    # socketserver.StreamRequestHandler.setup() sets TCP_NODELAY when asked.
    assert MasterHandler.disable_nagle_algorithm
    assert BundleHandler.disable_nagle_algorithm
