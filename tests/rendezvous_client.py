"""A hand-driven task end of a rendezvous connection, and the fixture bits
the rendezvous tests share."""

import json
import os
import queue
import socket
import time

from conftest import marked_processes
from processes import TASK_ENTRY

from tfmesos.core.jobs import Job
from tfmesos.core.launch import ClusterRun
from tfmesos.core.rendezvous import Rendezvous
from tfmesos.core.spec import RunSpec
from tfmesos.protocol import wire

SECRET = b"s" * 32


def make_rendezvous(**options):
    events = queue.Queue()
    # Hand-driven clients answer no pings: only the stall tests stall them.
    options = dict(dict(bind_host="127.0.0.1", register_timeout=1.0, ping_interval=0.2,
                        stall_timeout=60.0), **options)
    server = Rendezvous(SECRET, events, **options)
    server.events = events
    return server


def next_event(rdv, kind, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            event = rdv.events.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            break
        if isinstance(event, kind):
            return event
    raise AssertionError("no %s event" % kind.__name__)


def no_event(rdv, kind, wait=0.5):
    """True when no ``kind`` event arrives within ``wait`` seconds."""
    try:
        next_event(rdv, kind, wait)
    except AssertionError:
        return True
    return False


class Client:
    """Speaks the protocol by hand, so tests can capture and replay frames."""

    def __init__(self, port, secret=SECRET, forged=False):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.secret = secret
        self.forged = forged  # the secret is wrong: answer the challenge unchecked
        self.channel = None

    def challenge(self):
        """Read the challenge; the channel to answer it."""
        payload = wire.read_frame(self.sock, wire.SMALL_FRAME)
        if self.forged:
            nonce = bytes.fromhex(json.loads(payload[wire.MAC_SIZE:])["nonce"])
            self.channel = wire.Channel(self.secret, nonce, wire.TO_SCHEDULER)
            self.channel.received = 1
        else:
            self.channel = wire.Channel.from_challenge(self.secret, payload)
        return self.channel

    def register(self, task_id="good", host="h", port=2222):
        """Send a registration; returns the frame as sent."""
        self.challenge()
        frame = self.send({"type": "register", "task_id": task_id, "host": host, "port": port})
        self.channel.bind(task_id)
        return frame

    def registered(self):
        """Read the confirmation."""
        assert self.receive() == {"type": "registered"}
        return self

    def send(self, message):
        frame = self.channel.seal(message)
        self.sock.sendall(frame)
        return frame

    def receive(self):
        return wire.receive(self.sock, self.channel)

    def receive_not_ping(self):
        while True:
            message = self.receive()
            if message["type"] != "ping":
                return message

    def refused(self):
        """True when the server closes the connection (whatever it sent first)."""
        return refused(self.sock)

    def close(self):
        self.sock.close()


def admitted(rdv, sock):
    """True once the rendezvous holds ``sock``'s connection as unregistered."""
    port = sock.getsockname()[1]
    return any(link.peer[1] == port for link in list(rdv._pending))


def refused(sock, timeout=30):
    """True when the server closed ``sock`` within ``timeout`` (data before is skipped)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except socket.timeout:
        return False
    return True


def replica_run(command="true", **options):
    """A ClusterRun of 1 ps + 2 workers running ``command`` on the embedded master."""
    jobs = [Job("ps", 1, cpus=0.2, mem=128), Job("worker", 2, cpus=0.2, mem=128)]
    return ClusterRun(RunSpec(launch_timeout=90, jobs=jobs, mode="replica", command=command,
                              master="local"),
                      environ=dict(os.environ, MESOS_MASTER=""), **options)


def finish(run):
    """Run to the end; returns wait_finished's code. Always stops the run."""
    try:
        run.wait_ready()
        return run.wait_finished()
    finally:
        stop(run)


def stop(run):
    """Stop ``run`` and wait (bounded) for its task processes to go."""
    run.stop()
    deadline = time.monotonic() + 10
    while any(TASK_ENTRY in p[1] for p in marked_processes()) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
