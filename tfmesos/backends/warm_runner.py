"""Warm task starts: the embedded master hands a run's replica tasks to task
interpreters started ahead of them (``tfmesos.task.warm``), each of which
becomes one task.

tfrun knows, before its master starts, the command its replica tasks will
run, how many there are and, as far as the run decides it, their
environment (``WarmSpec``, ``core.taskinfo.warm_task_command``;
``TFMESOS_WARM_TASKS=0`` turns warm starts off). At once, in parallel with
the rest of its start-up, it starts a pool of interpreters, one per task up
to ``POOL_CAP``, with the tasks' interpreter and flags and, in an
environment otherwise its own, the variables an interpreter reads as it
starts (``interpreter_variables``: ``PYTHON*``, the locale's, the dynamic
linker's and malloc's) set as the tasks will have them. Each imports the
task entry and waits. The master's agent then runs its tasks through this
runner: a launch whose command and interpreter variables match takes an
idle interpreter, whose start and imports (30-60 ms of CPU) are behind it,
or, when none is left, one started for it; anything else — another
interpreter or flag, other such variables, a container, an agent with its
own network namespace or filesystem view, a task of another user than this
process's — is started by ``ProcessRunner`` as always. The TaskInfo is the
same either way: a Mesos agent runs the very same command with ``/bin/sh
-c``.

Each interpreter is a separate process, a child of the agent in a session
of its own: its own hash seed (or the ``PYTHONHASHSEED`` the tasks set),
the encodings the tasks' environment gives, and the agent waits for the
task it became as for an exec'd command (``ProcessTask``). As tasks take
interpreters, a ``warm-refill`` thread starts others: one per task still
expected, and one spare for a relaunch or a restart once launches paused.
/proc shows each as it is: ``PYTHON [-S] -m tfmesos.task.warm FD`` with the
environment it was started with; the agent finds a task's processes by its
process group, cgroups, or the ``MESOS_SANDBOX`` of their environment (the
task's: the interpreter took it before starting anything). What differs
from an exec'd task: the memory an interpreter touched before it joined
the task's cgroups stays charged where it started (a few MB).

An idle interpreter that ends (it could not start, or was killed) turns the
pool off with a warning: tasks then start the ordinary way. Idle
interpreters leave when their socket closes (tfrun ended), and are stopped
when the runner closes.
"""

import json
import logging
import os
import select
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import Any, Optional, Union

from mesos_local import ProcessRunner, ProcessTask, RunnerError, RunningTask, TaskLaunch

from ..protocol.task_env import PATH_REST

log = logging.getLogger(__name__)

ENTRY_MODULE = "tfmesos.task.warm"
POOL_CAP = 8            # interpreters started ahead, at most
SPARE = 1               # kept once every expected task started: relaunches, restarts
SPARE_DELAY = 2.0       # seconds after the last launch: not while tasks start
TAKE_TIMEOUT = 30.0     # for an interpreter to take a launch (it may still be importing)

# Read as an interpreter starts (before any of the task's code runs):
# Python's own, the locale (the stdio and filesystem encodings, PEP 538's
# coercion), what the dynamic linker and glibc's malloc read at exec, and
# HOME (``site``'s user directory).
INTERPRETER_PREFIXES = ("PYTHON", "LC_", "LD_", "MALLOC_")
INTERPRETER_NAMES = ("LANG", "LANGUAGE", "GLIBC_TUNABLES", "HOME")


def is_interpreter_variable(name: str) -> bool:
    return name.startswith(INTERPRETER_PREFIXES) or name in INTERPRETER_NAMES


def interpreter_variables(environment: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables of ``environment`` that shape an interpreter's start,
    sorted pairs."""
    return tuple(sorted((k, v) for k, v in environment.items() if is_interpreter_variable(k)))


class WarmSpec:
    """What the tasks started warm run: ``command`` (the shell command of
    their CommandInfo, ``exec PYTHON [-S] -m tfmesos.task``: its interpreter
    and flags start the warm ones), ``variables``: the interpreter variables
    of ``environment`` (theirs, as far as it is known before they launch),
    which the interpreters start with and every launch must match; ``size``:
    how many to start ahead, one per task of the ``tasks`` expected, at most
    ``POOL_CAP``."""

    def __init__(self, command: str, environment: Mapping[str, str], tasks: int = 1) -> None:
        # [PATH=DIR"${PATH:+:$PATH}"] exec PYTHON [-S] -m tfmesos.task
        # (core.taskinfo.task_command): DIR, where the shell would put it
        # first on the task's PATH, the runner puts it (``path_first``).
        words = shlex.split(command)
        self.path_first: Optional[str] = None
        if words[0].startswith("PATH=") and words[0].endswith(PATH_REST):
            self.path_first = words.pop(0)[len("PATH="):-len(PATH_REST)]
        self.command = command
        self.python = words[1]
        self.flags = ["-S"] if words[2:3] == ["-S"] else []
        self.variables = interpreter_variables(environment)
        self.tasks = max(1, tasks)
        self.size = min(POOL_CAP, self.tasks)


def matches(spec: WarmSpec, launch: TaskLaunch) -> bool:
    """Whether ``launch`` (a runner.TaskLaunch) may be started warm."""
    # A task of another user (``run_as``) is exec'd as that user: the warm
    # interpreters are this process's user's.
    return (launch.image is None and launch.shell and launch.command == spec.command
            and launch.netns is None and not launch.hidden_paths
            and launch.run_as is None
            and interpreter_variables(launch.env) == spec.variables)


def interpreter_environment(spec: WarmSpec, environ: Optional[Mapping[str, str]] = None
                            ) -> dict[str, str]:
    """A warm interpreter's environment: this process's (``environ``), its
    interpreter variables replaced by the tasks'."""
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in environ.items() if not is_interpreter_variable(k)}
    env.update(spec.variables)
    return env


class _Interpreter:
    """One ``tfmesos.task.warm`` process, and the agent's end of its socket."""

    def __init__(self, spec: WarmSpec, env: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair()
        try:
            # Its stderr is tfrun's until it becomes a task: it writes there
            # only when it cannot start (an import error), which the user must see.
            self.popen = subprocess.Popen(
                [spec.python, *spec.flags, "-m", ENTRY_MODULE, str(theirs.fileno())], env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd="/",
                pass_fds=(theirs.fileno(),), start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours

    @property
    def pid(self) -> int:
        return self.popen.pid

    def hand_over(self, request: dict[str, Any], timeout: float) -> Union[dict[str, Any], str]:
        """Send the launch ``request``; its reply (``{"took": PID}`` or
        ``{"error": TEXT}``), else why there is none (a string: it ended,
        or did not answer in ``timeout`` seconds; it is stopped then)."""
        try:
            self.sock.settimeout(timeout)    # a stopped interpreter reads nothing
            self.sock.sendall((json.dumps({"launch": request}) + "\n").encode())
            reply = json.loads(_read_line(self.sock, timeout) or "null")
        except (TimeoutError, socket.timeout):   # one and the same from 3.10 on
            reply = "did not answer in %d s" % timeout
        except (OSError, ValueError):
            reply = None
        self._close_socket()
        if isinstance(reply, dict):
            return reply
        self.stop()
        return reply or "ended (%s)" % _describe(self.popen)

    def stop(self) -> int:
        """Stop an interpreter that is not a task (idle, or failed)."""
        self._close_socket()
        if self.popen.poll() is None:
            try:
                self.popen.kill()
            except OSError:
                pass
        return self.popen.wait()

    def _close_socket(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def _read_line(sock: socket.socket, timeout: float) -> Optional[bytes]:
    """One line from ``sock``; None at its end, TimeoutError when none came
    in ``timeout`` seconds."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLHUP)
    data = b""
    while b"\n" not in data:
        if not poller.poll(timeout * 1000):
            raise TimeoutError
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data.split(b"\n", 1)[0]


class WarmPool:
    """The interpreters started ahead for ``spec``'s tasks, refilled as
    tasks take them. ``alive``: whether launches may still take one."""

    def __init__(self, spec: WarmSpec) -> None:
        self.spec = spec
        self._env = interpreter_environment(spec)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._idle: list[_Interpreter] = []   # oldest first
        self._taken = 0          # launches that matched, warm or not
        self._last_taken = time.monotonic()
        self._alive = True
        self._closing = False
        # The first ones are started on the refill thread too: each Popen
        # holds tfrun's main thread ~6 ms, which goes on with the run's start.
        self._started = threading.Event()   # the first ones are started (or could not be)
        self._refill_thread = threading.Thread(target=self._refill, name="warm-refill",
                                               daemon=True)
        self._refill_thread.start()

    @property
    def alive(self) -> bool:
        return self._alive

    @property
    def idle_pids(self) -> list[int]:
        """The pids of the interpreters waiting for a launch, oldest first."""
        with self._lock:
            return [interpreter.pid for interpreter in self._idle]

    def started(self, timeout: Optional[float] = None) -> bool:
        """Wait until the first interpreters are started (``spec.size``,
        unless the pool turned off meanwhile); whether they are."""
        return self._started.wait(timeout)

    def take(self) -> Optional[_Interpreter]:
        """An interpreter for a matching launch (started now if none is
        idle), or None: launch it the ordinary way. The first ones are
        waited for: one started beside them would be one too many."""
        self._started.wait(TAKE_TIMEOUT)
        with self._lock:
            if not self._alive:
                return None
            self._taken += 1
            self._last_taken = time.monotonic()
            interpreter = self._idle.pop(0) if self._idle else None
            self._changed.notify_all()
        return interpreter or self._start()

    def lost(self, why: str) -> None:
        """A taken interpreter never took its launch: ``why``."""
        self._turn_off("a warm task interpreter %s" % why)

    def close(self) -> None:
        """Stop the idle interpreters (the tasks are the master's to stop)."""
        with self._lock:
            self._closing = True
        self._turn_off(None)
        self._refill_thread.join(10)

    def _missing(self) -> int:
        """How many more interpreters to start now (0: none yet), under the lock."""
        expected = min(self.spec.size, self.spec.tasks - self._taken)
        if len(self._idle) < expected:
            return expected - len(self._idle)
        if len(self._idle) < SPARE and time.monotonic() >= self._last_taken + SPARE_DELAY:
            return SPARE - len(self._idle)
        return 0

    def _start(self) -> Optional[_Interpreter]:
        try:
            return _Interpreter(self.spec, self._env)
        except OSError as exc:
            self._turn_off("a warm task interpreter cannot start (%s)" % exc)
            return None

    def _start_idle(self) -> bool:
        interpreter = self._start()
        if interpreter is None:
            return False
        # The watch's own descriptor of the socket: taken and closed by a
        # launch, the socket's number may be reused before the watch polls.
        watched = os.dup(interpreter.sock.fileno())
        with self._lock:
            alive = self._alive
            if alive:
                self._idle.append(interpreter)
        if not alive:       # turned off meanwhile
            os.close(watched)
            interpreter.stop()
            return False
        watch = threading.Thread(target=self._watch, args=(interpreter, watched),
                                 name="warm-watch", daemon=True)
        try:
            watch.start()
        except RuntimeError as exc:   # no thread to be had (ulimit -u reached): no warm starts
            os.close(watched)
            self._turn_off("no thread to watch a warm task interpreter (%s)" % exc)
            return False
        return True

    def _watch(self, interpreter: _Interpreter, fd: int) -> None:
        """Until ``interpreter`` ends idle (its socket closes) or replies to
        a launch (taken): the former turns the pool off."""
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLHUP)
            while not poller.poll():
                pass
        finally:
            os.close(fd)
        with self._lock:
            if interpreter not in self._idle:
                return          # taken, or stopped by _turn_off
            self._idle.remove(interpreter)
            closing = self._closing
        interpreter.stop()
        if not closing:
            self._turn_off("a warm task interpreter ended (%s)" % _describe(interpreter.popen))

    def _refill(self) -> None:
        """Start interpreters as launches take them: one per task still
        expected at once; the spare once launches paused for SPARE_DELAY.
        First, the pool's first ``spec.size``."""
        try:
            for _ in range(self.spec.size):
                if not self._start_idle():
                    return
        finally:
            self._started.set()
        while True:
            with self._lock:
                while self._alive and not self._missing():
                    spare_due = self._last_taken + SPARE_DELAY - time.monotonic()
                    self._changed.wait(spare_due if spare_due > 0 and not self._idle else None)
                if not self._alive:
                    return
            if not self._start_idle():
                return

    def _turn_off(self, why: Optional[str]) -> None:
        """No more warm starts: stop the idle interpreters; ``why`` (None:
        the runner closes) is said once."""
        with self._lock:
            was_alive, self._alive = self._alive, False
            idle, self._idle = self._idle, []
            self._changed.notify_all()
        for interpreter in idle:
            interpreter.stop()
        if was_alive and why is not None:
            log.warning("%s; tasks start the ordinary way", why)


def _describe(popen: "subprocess.Popen[bytes]") -> str:
    returncode = popen.poll()
    if returncode is None:
        return "no answer"
    if returncode < 0:
        return "killed by signal %d" % -returncode
    return "exit code %d" % returncode


class WarmProcessRunner(ProcessRunner):
    """``ProcessRunner`` that hands the launches ``matches`` to interpreters
    started ahead (``WarmPool``)."""

    def __init__(self, spec: WarmSpec) -> None:
        self.warm = WarmPool(spec)

    def launch(self, launch: TaskLaunch) -> RunningTask:
        interpreter = self.warm.take() if matches(self.warm.spec, launch) else None
        if interpreter is None:
            return super().launch(launch)
        env = dict(launch.env)
        if self.warm.spec.path_first is not None:   # as PATH=DIR"${PATH:+:$PATH}"
            env["PATH"] = self.warm.spec.path_first + (
                ":" + env["PATH"] if env.get("PATH") else "")
        request = {"env": env, "cwd": launch.sandbox, "stdout": launch.stdout_path,
                   "stderr": launch.stderr_path,
                   "cgroups": launch.cgroups.procs_files() if launch.cgroups is not None else []}
        reply = interpreter.hand_over(request, TAKE_TIMEOUT)
        if not isinstance(reply, dict):
            self.warm.lost("%s before it took task %s" % (reply, launch.task_id))
            return super().launch(launch)
        if "error" in reply:
            interpreter.popen.wait()
            raise RunnerError("cannot start %r: %s" % (launch.command, reply["error"]))
        return ProcessTask(interpreter.popen)

    def close(self) -> None:
        self.warm.close()


def start_warm_runner(command: Optional[tuple[str, Mapping[str, str], int]]
                      ) -> Optional[WarmProcessRunner]:
    """The embedded master's runner with its warm interpreters started for
    ``command`` (``(command, environment, tasks)``,
    ``core.taskinfo.warm_task_command``), or None without one."""
    return None if command is None else WarmProcessRunner(WarmSpec(*command))


__all__ = ["WarmSpec", "WarmPool", "WarmProcessRunner", "matches", "interpreter_variables",
           "interpreter_environment", "start_warm_runner"]
