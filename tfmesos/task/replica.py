"""Replica mode on the task side: the user's command (and the hooks) in
its own process group under a guard (``replica_guard``) that takes the group
down with the task entry, its output forwarded to ``tfrun`` in bounded
chunks, stopped when the scheduler asks, goes away or Mesos sends SIGTERM;
what the command used (``usage``) goes with the exit message; what it
logs with ``tfmesos.log_metrics`` goes to tfrun too (``metrics_relay``).
"Goes away" is the connection's verdict: in a run that survives its
scheduler, the command runs on while the connection waits for a new one.
A sandbox file that cannot be written (a full disk) is written no more,
said once: the output still goes on to tfrun; a fault of the task's own in
passing output on stops the command, said too, rather than leave it blocked
on a pipe no one reads."""

import codecs
import fcntl
import os
import selectors
import signal
import sys
import threading
import time

from ..protocol import task_env, wire
from . import replica_guard
from .bundle_dir import sandbox_directory
from .connection import tell
from .line_forwarder import LineForwarder
from .metrics_relay import MetricsRelay
from .quiet import NoiseFilter, min_log_level, task_gpus
from .usage import UsageMonitor

KILL_GRACE = task_env.STOP_GRACE   # SIGTERM, then SIGKILL this much later
STOPPED = 128 + signal.SIGTERM  # exit code of a task stopped before its command ran
READ_SIZE = 64 * 1024       # bytes per read of the command's output
# Once the command's group is gone, how long its output pumps have, all
# together, to reach the end of the output; a process that left the group
# (setsid) and holds the pipes would make it never come.
DRAIN_TIME = 1.0
PUMP_WAIT = 10.0            # then for the pumps told to stop, to send what they read
SECRET_WORDS = ("SECRET", "TOKEN", "PASSWORD", "KEY")
TORCH_LOG_DIR = "torchelastic"   # torchrun's log folder in a torch run's sandbox


def working_directory(submitter_cwd):
    """Where a replica command runs: the submitter's working directory when
    this machine has it (the embedded master, a shared filesystem), as the
    original TFMesos did, so relative paths in the command work; else the
    task's sandbox (None: stay where Mesos started the task)."""
    if submitter_cwd and os.path.isdir(submitter_cwd):
        return submitter_cwd
    if submitter_cwd:
        tell("tfmesos: %s does not exist here; running the command in the sandbox %s"
              % (submitter_cwd, os.getcwd()))
    return None


def is_secret(name):
    """Whether ``name`` is a tfmesos variable that holds a secret (the
    rendezvous key): kept from the user's command and hooks."""
    return name.startswith("TFMESOS_") and any(word in name for word in SECRET_WORDS)


def command_environment(environ, extra=None):
    """The environment of the hooks and the command: the task's, plus
    ``extra``, less the secrets."""
    env = dict(environ)
    env.update(extra or {})
    return {name: value for name, value in env.items() if not is_secret(name)}


def torch_log_dir(env, sandbox):
    """``env`` with ``PET_LOG_DIR`` (the default of torchrun's
    ``--log-dir``) in ``sandbox`` when it is a torch run's (``PET_NNODES``,
    ``training_frameworks``) and sets none. Unless told, torchrun makes a
    folder for every run in the temporary folder, ``torchelastic_*``, and
    never removes it (torch/distributed/elastic/multiprocessing/api.py
    ``DefaultLogsSpecs``): one left on an agent for every task of every
    run. In the sandbox, Mesos removes it with the rest (``--gc_delay``);
    a sandbox this task cannot write to (an image's user other than the
    sandbox's owner) keeps torchrun's default, which would fail there."""
    if "PET_NNODES" not in env or "PET_LOG_DIR" in env or not os.access(sandbox, os.W_OK):
        return env
    return dict(env, PET_LOG_DIR=os.path.join(sandbox, TORCH_LOG_DIR))


def exit_code(returncode):
    """A guard's return code as a shell reports it (signal N: 128 + N)."""
    return returncode if returncode >= 0 else 128 - returncode


class _Child:
    """A guard (``replica_guard.Guard``: a hook or the command) and
    whether it was reaped."""

    def __init__(self, guard):
        self.guard = guard
        self.ended = threading.Event()

    def signal(self, signum):
        try:
            os.killpg(self.guard.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _join(threads, seconds):
    """Wait ``seconds`` in all for ``threads`` to end; whether they did."""
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(thread.is_alive() for thread in threads)


def _what_is_there(fd):
    """The data the pipe ``fd`` holds now, without waiting for more: at
    most its capacity, however fast a writer refills it."""
    try:
        # Linux's F_GETPIPE_SZ, which fcntl names from Python 3.10 on.
        left = fcntl.fcntl(fd, getattr(fcntl, "F_GETPIPE_SZ", 1032))
    except OSError:   # not a pipe
        left = 1 << 20
    os.set_blocking(fd, False)
    while left > 0:
        try:
            data = os.read(fd, min(READ_SIZE, left))
        except BlockingIOError:
            return
        if not data:
            return
        left -= len(data)
        yield data


def _byte_sink(target, failed):
    """Writes bytes to ``target`` (the task's own stdout or stderr: the
    sandbox files get everything) until a write fails (a full disk, an I/O
    error); then calls ``failed(exc)`` and writes nothing more: the pump
    goes on reading the command's output and forwarding it."""
    out = getattr(target, "buffer", None)
    if out is None:
        def write(data):
            target.write(data.decode("utf-8", "replace"))
            target.flush()
    else:
        def write(data):
            out.write(data)
            out.flush()
    broken = False

    def sink(data):
        nonlocal broken
        if broken:
            return
        try:
            write(data)
        except OSError as exc:
            broken = True
            failed(exc)
    return sink


def _monitor(pid, started):
    """A started UsageMonitor of the command ``pid``, which began at
    ``started`` (``time.monotonic()``), or None: measuring must never fail
    the task."""
    try:
        return UsageMonitor.for_task(pid, os.environ, started=started).start()
    except Exception as exc:
        tell("tfmesos: cannot measure the command's usage: %s" % exc)
        return None


def _report(monitor):
    try:
        return monitor.stop() if monitor is not None else None
    except Exception as exc:
        tell("tfmesos: cannot measure the command's usage: %s" % exc)
        return None


class ReplicaCommand:
    """The hooks and the user's command, each under a guard in its own
    process group, output forwarded; ``kill`` stops whichever runs and
    keeps the next from starting. Spawns from the main thread only: a
    thread's exit would fire the guard's parent-death signal."""

    def __init__(self, conn, start):
        self.conn = conn
        self.forward = bool(start.get("forward_logs"))
        self.env = torch_log_dir(command_environment(os.environ, start.get("env")),
                                 sandbox_directory(os.environ))
        self.cmd = start["cmd"]
        self.cwd = working_directory(start.get("cwd"))
        self.stopping = threading.Event()
        self.stop_requested = False   # the scheduler said stop (not SIGTERM, not gone)
        self.cut_short = False   # the stop came before the command ended by itself
        self.done = threading.Event()  # run_replica is through: a lost connection is no news
        self._lock = threading.Lock()
        self._child = None
        self._command = None   # the command's _Child once it started
        self.keep = ()   # descriptors the command inherits (replica_guard.start's keep)
        self.usage = None   # what the command used (usage.UsageMonitor's report)

    def _spawn(self, cmd, command):
        """``cmd`` (the user's ``command``, else a hook) started under a
        guard, its output captured, or None when stopping."""
        with self._lock:
            if self.stopping.is_set():
                return None
            self._child = _Child(replica_guard.start(cmd, self.env, cwd=self.cwd,
                                                     capture=True, grace=KILL_GRACE,
                                                     keep=self.keep if command else ()))
            if command:
                self._command = self._child
            return self._child

    @staticmethod
    def _reap(child):
        code = child.guard.wait()
        child.ended.set()
        child.signal(signal.SIGKILL)  # what it left behind in its group
        return exit_code(code)

    def run_hook(self, which, cmd):
        """The ``which`` hook (initializer, finalizer): its output forwarded
        as the command's is (it went to the sandbox alone, which the
        embedded master removes), and its failure said there; its exit code."""
        code = self._run(cmd, command=False)
        if code not in (0, STOPPED) and not self.stopping.is_set():
            self.say("tfmesos: the %s exited with code %d%s" % (
                which, code, "; the command did not run" if which == "initializer" else ""))
        return code

    def say(self, line):
        """``line`` on the task's stderr, forwarded as its output is."""
        tell(line)
        if self.forward:
            self._send_log("stderr", [line + "\n"])

    def run(self):
        return self._run(self.cmd, command=True)

    def _run(self, cmd, command):
        # The command's wall time counts from here: its monitor begins after
        # the pumps, which on a loaded agent can be a while.
        started = time.monotonic()
        child = self._spawn(cmd, command)
        if child is None:
            return STOPPED
        noise = NoiseFilter(min_log_level(self.env), task_gpus(self.env))
        stop, stopping = os.pipe()   # stopping closed: the pumps read what is there and end
        pumps = [threading.Thread(target=self._pump, args=(stream, name, target, quiet, stop),
                                  daemon=True)
                 for stream, name, target, quiet in (
                     (child.guard.stdout, "stdout", sys.stdout, None),
                     (child.guard.stderr, "stderr", sys.stderr, noise))]
        for pump in pumps:
            pump.start()
        monitor = _monitor(child.guard.pid, started) if command else None
        code = self._reap(child)
        if command:
            self.usage = _report(monitor)
        # Past DRAIN_TIME, what still holds the pipes escaped the group: the
        # command's own output is in them already.
        _join(pumps, DRAIN_TIME)
        os.close(stopping)
        if _join(pumps, PUMP_WAIT):
            os.close(stop)   # else a pump may still select on it
        return code

    def _pump(self, stream, name, target, noise=None, stop=None):
        """Copy ``stream`` to ``target``, less what ``noise`` (a
        ``quiet.NoiseFilter``) drops, and forward it in bounded fragments;
        until its end, or once ``stop`` (a pipe's read end) is readable,
        until what the pipe holds then was read. ``target`` that cannot be
        written is said once and left (``_byte_sink``); any other failure
        stops the command, which would block on a pipe no one reads."""
        try:
            self._copy(stream, name, target, noise, stop)
        except Exception as exc:
            self.say("tfmesos: cannot pass on the command's %s (%s: %s); stopping it"
                     % (name, type(exc).__name__, exc))
            self.kill("cannot pass on the command's %s" % name)
        finally:
            stream.close()

    def _copy(self, stream, name, target, noise, stop):
        def failed(exc):
            self.say("tfmesos: cannot write the sandbox's %s (%s): %s" % (
                name, exc.strerror or exc, "its output goes on to tfrun only" if self.forward
                else "the rest of it is lost"))

        sink, fd = _byte_sink(target, failed), stream.fileno()
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        lines = LineForwarder()

        def pass_on(data):
            if noise is not None:
                data = noise.feed(data)
            self._pass_on(sink, name, lines, decoder, data)

        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            if stop is not None:
                selector.register(stop, selectors.EVENT_READ)
            while True:
                ready = {key.fd for key, _ in selector.select(
                    lines.timeout() if self.forward else None)}
                if not ready:
                    self._send_log(name, lines.poll())
                    continue
                if stop in ready:
                    for data in _what_is_there(fd):
                        pass_on(data)
                    break
                data = os.read(fd, READ_SIZE)
                if not data:
                    break
                pass_on(data)
        if noise is not None:
            self._pass_on(sink, name, lines, decoder, noise.close())
        if self.forward:
            self._send_log(name, lines.feed(decoder.decode(b"", True)) + lines.close())

    def _pass_on(self, sink, name, lines, decoder, data):
        if data:
            sink(data)
            if self.forward:
                self._send_log(name, lines.feed(decoder.decode(data)))

    def _send_log(self, name, fragments):
        for fragment in fragments:
            if not self.forward:
                return
            try:
                self.conn.send({"type": "log", "stream": name, "data": fragment})
            except (wire.WireError, OSError):
                self.forward = False

    def watch_scheduler(self):
        """Stop when the scheduler says so or goes away (a thread)."""
        try:
            while self.conn.receive()["type"] != "stop":
                pass
            reason = "the scheduler asked to stop"
            self.stop_requested = True
        except (wire.WireError, OSError) as exc:
            reason = "scheduler gone (%s)" % exc
        if not self.done.is_set():
            self.kill(reason)

    def kill(self, reason):
        """SIGTERM the running hook or command's group, SIGKILL it after a
        grace period; nothing starts afterwards."""
        with self._lock:
            if self.stopping.is_set():
                return
            self.stopping.set()
            child = self._child
            self.cut_short = self._command is None or not self._command.ended.is_set()
        tell("tfmesos: %s; stopping" % reason)
        if child is None or child.ended.is_set():
            return
        child.signal(signal.SIGTERM)
        if not child.ended.wait(KILL_GRACE):
            child.signal(signal.SIGKILL)


def _relay(conn, env):
    """A started ``MetricsRelay`` whose socket the hooks and the command
    find in ``env``, or None: metrics must never fail the task."""
    try:
        relay = MetricsRelay(conn.send).start()
    except OSError as exc:
        tell("tfmesos: metrics cannot be logged in this task: %s" % exc)
        return None
    env[task_env.METRICS_SOCKET] = relay.path
    return relay


def _result_file():
    """``result_file.ResultFile`` of a run of ``tfmesos.run``, else None (the
    module is loaded only then)."""
    if not os.environ.get(task_env.FUNCTION):
        return None
    from .result_file import ResultFile
    return ResultFile.prepare(os.environ)


def _outcome_channel(conn, receipt, result, command):
    """The entry's end of ``outcome_channel``, serving, its descriptor in
    ``command``'s keep and environment; None when it cannot be made (the
    outcome then goes once the command ended)."""
    from .outcome_channel import EntryEnd
    try:
        end = EntryEnd()
    except OSError:
        return None
    command.keep = end.keep
    command.env.update(end.env())
    return end.serve(lambda: result.send_written(conn, receipt))


def run_replica(conn, start):
    """Initializer, command, finalizer; the exit message. Returns the exit
    code: the command's, the initializer's when it failed; 0 when the
    scheduler said stop before the command ended (the run is over or
    restarting: a clean end; the exit message says ``stopped``);
    ``STOPPED`` (or the killed process's code) when SIGTERM or the
    scheduler's absence stopped it before the command ended."""
    command = ReplicaCommand(conn, start)
    relay = _relay(conn, command.env)
    result = _result_file()     # tfmesos.run: where the runner writes the outcome
    receipt = bool(start.get("result_receipt"))
    channel = None   # outcome_channel.EntryEnd: a failure's outcome goes before its runner exits
    if result is not None:
        command.env.update(result.env())
        channel = _outcome_channel(conn, receipt, result, command)
    # Mesos kills a task with SIGTERM; a handler must not block, so a thread
    # escalates. The exit frame then waits for no new scheduler (Connection.flush).
    def terminated():
        abandon = getattr(conn, "abandon", None)   # tests' stand-ins may lack it
        if abandon is not None:
            abandon()
        command.kill("SIGTERM received")

    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(
        target=terminated, daemon=True).start())
    threading.Thread(target=command.watch_scheduler, daemon=True).start()
    hooks = start.get("hooks") or {}
    code = command.run_hook("initializer", hooks["initializer"]) \
        if hooks.get("initializer") else 0
    if code == 0:
        code = command.run()
    if hooks.get("finalizer") and not command.stopping.is_set():
        command.run_hook("finalizer", hooks["finalizer"])
    command.done.set()
    if relay is not None:
        relay.close()   # the last metrics go before the exit message
    stopped = command.stop_requested and command.cut_short
    if stopped:
        # The run is over (or restarting): a clean end, TASK_FINISHED, not the
        # killed command's code, which Mesos would report as TASK_FAILED; the
        # exit message says it was stopped (the run's record: TASK_KILLED).
        code = 0
    if result is not None:
        # before the exit frame, on the same connection
        result.send(conn, receipt=receipt)
    if channel is not None:
        channel.close()
    message = {"type": "exit", "code": code, "stopped": stopped}
    if command.usage is not None:
        message["usage"] = command.usage
    try:
        conn.send(message)
    except (wire.WireError, OSError):
        pass
    return code
