"""Replica mode on the task side: the user's command (and the hooks) in
its own process group, its output forwarded to ``tfrun``, stopped when the
scheduler asks or goes away."""

import os
import signal
import subprocess
import sys
import threading

from . import wire

KILL_GRACE = 5.0


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
