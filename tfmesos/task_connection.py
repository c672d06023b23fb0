"""The task's side of the rendezvous: what the scheduler put in the task's
environment (``TaskEnv``) and the connection to the scheduler."""

import dataclasses
import socket
import threading
import time

from . import wire

IDLE_TIMEOUT = 60.0     # the scheduler pings every 10 s; silence this long means it is gone
CONNECT_TIMEOUT = 30.0


class TaskError(Exception):
    """The task cannot do its job; the message is printed, exit status 1."""


@dataclasses.dataclass(frozen=True)
class TaskEnv:
    """What the scheduler put in the task's environment."""

    rendezvous: tuple   # (host, port)
    secret: bytes
    task_id: str
    host: str           # the address other tasks reach this one at
    port: int           # 0: pick a free one

    @classmethod
    def from_environ(cls, environ):
        missing = [name for name in ("TFMESOS_RENDEZVOUS", "TFMESOS_SECRET", "TFMESOS_TASK_ID")
                   if not environ.get(name)]
        if missing:
            raise TaskError("%s not set: this entry point is started by the tfmesos scheduler, "
                            "not by hand" % ", ".join(missing))
        host, _, port = environ["TFMESOS_RENDEZVOUS"].rpartition(":")
        try:
            secret = bytes.fromhex(environ["TFMESOS_SECRET"])
            rendezvous = (host.strip("[]"), int(port))
            task_port = int(environ.get("TFMESOS_PORT") or 0)
        except ValueError as exc:
            raise TaskError("malformed tfmesos task environment: %s" % exc) from None
        task_host = (environ.get("TFMESOS_TASK_HOST") or environ.get("TFMESOS_OFFER_HOST")
                     or socket.getfqdn())
        return cls(rendezvous, secret, environ["TFMESOS_TASK_ID"], task_host, task_port)


class Connection:
    """The task's end of the rendezvous connection."""

    def __init__(self, env):
        self.env = env
        self._send_lock = threading.Lock()
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while True:
            try:
                self.sock = socket.create_connection(env.rendezvous, timeout=10)
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise TaskError("cannot reach the tfmesos scheduler at %s:%d: %s"
                                    % (env.rendezvous + (exc,))) from None
                time.sleep(1)
        wire.enable_keepalive(self.sock)
        self.sock.settimeout(IDLE_TIMEOUT)

    def send(self, message):
        with self._send_lock:
            wire.send(self.sock, self.env.secret, message)

    def receive(self):
        """The next message other than a ping."""
        while True:
            try:
                message = wire.receive(self.sock, self.env.secret)
            except socket.timeout:
                raise wire.ConnectionClosed("the scheduler was silent for %.0f s" % IDLE_TIMEOUT)
            if message["type"] != "ping":
                return message

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
