"""The task entry point, ``python -m tfmesos.server``: what every Mesos task
of a tfmesos run executes.

It registers its address with the scheduler's rendezvous, waits for its role
and the cluster spec, then either serves a TensorFlow gRPC server
(fine-grained mode) or runs the user's command (replica mode), sending its
output back. When the scheduler goes away the task stops, and kills what it
started: no orphans. TensorFlow is imported only in fine-grained mode.
"""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from . import wire
from .hostport import free_port

IDLE_TIMEOUT = 60.0     # the scheduler pings every 10 s; silence this long means it is gone
CONNECT_TIMEOUT = 30.0
KILL_GRACE = 5.0


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


def run_fine_grained(conn, start):
    import tensorflow as tf  # only this mode needs it

    server = tf.distribute.Server(tf.train.ClusterSpec(start["cluster"]), job_name=start["job"],
                                  task_index=start["index"], protocol="grpc", start=True)
    print("tfmesos: TensorFlow server %s for /job:%s/task:%d is up"
          % (server.target, start["job"], start["index"]), flush=True)
    try:
        while conn.receive()["type"] != "stop":
            pass
    except (wire.WireError, OSError) as exc:
        print("tfmesos: scheduler gone (%s); stopping" % exc, flush=True)
    return 0


def working_directory(submitter_cwd):
    """Where a replica command runs: the submitter's working directory when
    this machine has it (the embedded master, a shared filesystem), as the
    original TFMesos did, so relative paths in the command work; else the
    task's sandbox (None: stay where Mesos started the task)."""
    if submitter_cwd and os.path.isdir(submitter_cwd):
        return submitter_cwd
    if submitter_cwd:
        print("tfmesos: %s does not exist here; running the command in the sandbox %s"
              % (submitter_cwd, os.getcwd()), file=sys.stderr, flush=True)
    return None


class ReplicaCommand:
    """The user's command in its own process group, output forwarded."""

    def __init__(self, conn, start):
        self.conn = conn
        self.forward = bool(start.get("forward_logs"))
        env = dict(os.environ)
        env.update(start.get("env") or {})
        self.env = env
        self.cmd = start["cmd"]
        self.cwd = working_directory(start.get("cwd"))
        self.popen = None
        self.stopping = threading.Event()
        self.finished = threading.Event()

    def run_hook(self, cmd):
        return subprocess.call(cmd, shell=True, env=self.env, cwd=self.cwd)

    def run(self):
        self.popen = subprocess.Popen(self.cmd, shell=True, env=self.env, cwd=self.cwd,
                                      stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True)
        pumps = [threading.Thread(target=self._pump, args=(stream, name, target), daemon=True)
                 for stream, name, target in ((self.popen.stdout, "stdout", sys.stdout),
                                              (self.popen.stderr, "stderr", sys.stderr))]
        for pump in pumps:
            pump.start()
        threading.Thread(target=self._watch_scheduler, daemon=True).start()
        code = self.popen.wait()
        self.finished.set()
        self._signal(signal.SIGKILL)  # what the command left behind in its group
        for pump in pumps:
            pump.join(10)
        return code if code >= 0 else 128 - code

    def _pump(self, stream, name, target):
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            target.write(line)
            target.flush()
            if self.forward:
                try:
                    self.conn.send({"type": "log", "stream": name, "data": line[:65536]})
                except OSError:
                    self.forward = False

    def _watch_scheduler(self):
        try:
            while self.conn.receive()["type"] != "stop":
                pass
            reason = "the scheduler asked to stop"
        except (wire.WireError, OSError) as exc:
            reason = "scheduler gone (%s)" % exc
        if self.popen.poll() is None:
            print("tfmesos: %s; stopping the command" % reason, file=sys.stderr, flush=True)
            self.kill()

    def kill(self):
        """SIGTERM the command's group, SIGKILL it after a grace period."""
        self.stopping.set()
        if self.popen is None:
            return
        self._signal(signal.SIGTERM)
        if not self.finished.wait(KILL_GRACE):
            self._signal(signal.SIGKILL)

    def _signal(self, signum):
        try:
            os.killpg(self.popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def run_replica(conn, start):
    command = ReplicaCommand(conn, start)
    # Mesos kills a task with SIGTERM; a handler must not block, so a thread escalates.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=command.kill,
                                                              daemon=True).start())
    hooks = start.get("hooks") or {}
    code = command.run_hook(hooks["initializer"]) if hooks.get("initializer") else 0
    if code == 0:
        code = command.run()
    if hooks.get("finalizer") and not command.stopping.is_set():
        command.run_hook(hooks["finalizer"])
    try:
        conn.send({"type": "exit", "code": code})
    except OSError:
        pass
    return code


def main(environ=None):
    environ = os.environ if environ is None else environ
    try:
        env = TaskEnv.from_environ(environ)
        port = env.port or free_port()
        conn = Connection(env)
        conn.send({"type": "register", "task_id": env.task_id, "host": env.host, "port": port})
        try:
            start = conn.receive()
        except (wire.WireError, OSError) as exc:
            raise TaskError("no start message from the scheduler: %s" % exc) from None
        if start["type"] != "start":
            raise TaskError("the scheduler sent %r instead of start" % start["type"])
        print("tfmesos: %s task %d of %s, cluster %s"
              % (start["mode"], start["index"], start["job"], json.dumps(start["cluster"])),
              flush=True)
        if start["mode"] == "fine":
            code = run_fine_grained(conn, start)
        else:
            code = run_replica(conn, start)
        conn.close()
        return code
    except TaskError as exc:
        print("tfmesos task error: %s" % exc, file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # TensorFlow's server threads do not shut down cleanly; leave at once.
    os._exit(code)
