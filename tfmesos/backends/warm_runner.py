"""Warm task starts: the embedded master forks a run's replica tasks from an
interpreter that has the task entry imported already (``tfmesos.task.warm``).

tfrun knows, before its master starts, the exact command and ``PYTHON*``
variables its replica tasks will have (``WarmSpec``,
``core.taskinfo.warm_task_command``; ``TFMESOS_WARM_TASKS=0`` turns warm
starts off), and
starts the warm interpreter with them at once, in parallel with the rest of
its start-up; the master's agent then runs its tasks through this runner. A
launch whose command and ``PYTHON*`` variables match is forked from it
(about 1 ms, against 30-60 ms for an interpreter start and the task entry's
imports); anything else — another interpreter or flag, a container, an
agent with its own network namespace or filesystem view — is started by
``ProcessRunner`` as always. The TaskInfo is the same either way: a Mesos
agent runs the very same command with ``/bin/sh -c``.

If the warm interpreter dies, the tasks it started are killed and reported
killed (their exit statuses were its to collect), and later launches go the
ordinary way.
"""

import json
import logging
import os
import shlex
import signal
import socket
import subprocess
import threading

from mesos_local.containerizer.runner import GroupLeaderTask, ProcessRunner, RunnerError

log = logging.getLogger(__name__)

ENTRY_MODULE = "tfmesos.task.warm"
# Room in the warm interpreter's environment block for each forked task's
# own environment (task/warm.py, _show_as_task).
ROOM_VARIABLE, ROOM = "TFMESOS_WARM_ROOM", 32768
START_TIMEOUT = 30.0
LOST = -signal.SIGKILL       # the status of a task whose warm interpreter died


class WarmSpec:
    """What the tasks forked warm run: ``command`` (the shell command of
    their CommandInfo, ``exec PYTHON [-S] -m tfmesos.task``: its interpreter
    and flags start the warm one) and, from ``environment`` (theirs, as far as
    it is known before they launch), ``python_env``: the ``PYTHON*``
    variables, which the warm interpreter starts with and every launch must
    match."""

    def __init__(self, command, environment):
        words = shlex.split(command)    # exec PYTHON [-S] -m tfmesos.task
        self.command = command
        self.python = words[1]
        self.flags = ["-S"] if words[2:3] == ["-S"] else []
        self.python_env = python_variables(environment)


def python_variables(environment):
    """The variables that shape an interpreter's start, sorted pairs."""
    return tuple(sorted((k, v) for k, v in environment.items() if k.startswith("PYTHON")))


def matches(spec, launch):
    """Whether ``launch`` (a runner.TaskLaunch) may be forked warm."""
    return (launch.image is None and launch.shell and launch.command == spec.command
            and launch.netns is None and not launch.hidden_paths
            and python_variables(launch.env) == spec.python_env)


class WarmInterpreter:
    """The agent's side of one ``tfmesos.task.warm`` process."""

    def __init__(self, spec):
        self.spec = spec
        self._closing = False
        self._launching = threading.Lock()    # one request and its reply at a time
        self._lock = threading.Lock()
        self._tasks = {}                      # pid -> _WarmTask, until its exit is known
        self._replies = []                    # _WarmTask or an error's text, in order
        self._replied = threading.Condition(self._lock)
        self._alive = True
        ours, theirs = socket.socketpair()
        self._sock = ours
        # This process's environment (not the tasks': the interpreter is the
        # agent's), with room for each forked task's own (task/warm.py).
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.update(spec.python_env)
        env[ROOM_VARIABLE] = "x" * ROOM
        # Its stderr is tfrun's: it writes only when it cannot start (an import
        # error), which the user must see; its tasks write to their sandboxes.
        self._proc = subprocess.Popen(
            [spec.python, *spec.flags, "-m", ENTRY_MODULE, str(theirs.fileno())], env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd="/",
            pass_fds=(theirs.fileno(),), start_new_session=True)
        theirs.close()
        self._reader = self._sock.makefile("rb")
        self._thread = threading.Thread(target=self._read, name="warm-tasks", daemon=True)
        self._thread.start()

    @property
    def alive(self):
        return self._alive

    def launch(self, launch):
        """Fork the task ``launch`` describes; a RunningTask."""
        request = {"launch": {
            "env": launch.env, "cwd": launch.sandbox, "stdout": launch.stdout_path,
            "stderr": launch.stderr_path,
            "cgroups": launch.cgroups.procs_files() if launch.cgroups is not None else []}}
        with self._launching:   # replies come in the order of the requests
            try:
                self._sock.sendall((json.dumps(request) + "\n").encode())
            except OSError as exc:
                raise RunnerError("the warm task interpreter is gone: %s" % exc) from exc
            with self._lock:
                if not self._replied.wait_for(lambda: self._replies or not self._alive,
                                              timeout=START_TIMEOUT):
                    raise RunnerError("the warm task interpreter did not answer in %d s"
                                      % START_TIMEOUT)
                if not self._replies:
                    raise RunnerError("the warm task interpreter is gone")
                reply = self._replies.pop(0)
        if isinstance(reply, str):
            raise RunnerError("cannot start %r: %s" % (launch.command, reply))
        return reply

    def _read(self):
        try:
            for line in self._reader:
                message = json.loads(line)
                with self._lock:
                    if "exit" in message:
                        task = self._tasks.pop(message["exit"], None)
                        if task is not None:
                            task.ended(message["status"])
                    elif "pid" in message:
                        # Known before its exit can be read: that comes later in the stream.
                        task = self._tasks[message["pid"]] = _WarmTask(message["pid"])
                        self._replies.append(task)
                        self._replied.notify_all()
                    elif "error" in message:
                        self._replies.append(message["error"])
                        self._replied.notify_all()
        except (OSError, ValueError) as exc:
            log.warning("warm task interpreter: %s", exc)
        with self._lock:
            self._alive = False
            orphans, self._tasks = list(self._tasks.values()), {}
            self._replied.notify_all()
        if orphans:
            log.error("the warm task interpreter ended (%s); killing the %d task(s) it "
                      "started", _describe(self._wait_end()), len(orphans))
        elif not self._closing:
            log.warning("the warm task interpreter ended (%s); tasks start the ordinary way",
                        _describe(self._wait_end()))
        for task in orphans:
            task.kill()
            task.ended(LOST)

    def _wait_end(self):
        """Its exit code, as it ends after its socket closed (None: not yet)."""
        try:
            return self._proc.wait(1)
        except subprocess.TimeoutExpired:
            return None

    def close(self):
        """Stop the interpreter (its tasks are the master's to stop first)."""
        self._closing = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._thread.join(10)
        self._reader.close()
        self._sock.close()


def _describe(returncode):
    if returncode is None:
        return "its socket closed"
    if returncode < 0:
        return "killed by signal %d" % -returncode
    return "exit code %d" % returncode


class _WarmTask(GroupLeaderTask):
    """A task forked by the warm interpreter: its exit status comes from it."""

    def __init__(self, pid):
        self.pid = pid
        self._status = None
        self._done = threading.Event()

    def ended(self, status):
        if not self._done.is_set():
            self._status = status
            self._done.set()

    def wait(self, timeout=None):
        if not self._done.wait(timeout):
            return None
        return self._status


class WarmProcessRunner(ProcessRunner):
    """``ProcessRunner`` that forks the launches ``matches`` from a warm
    interpreter started at once (``WarmInterpreter``)."""

    def __init__(self, spec):
        self.warm = WarmInterpreter(spec)

    def launch(self, launch):
        if self.warm.alive and matches(self.warm.spec, launch):
            return self.warm.launch(launch)
        return super().launch(launch)

    def close(self):
        self.warm.close()


def start_warm_runner(command):
    """The embedded master's runner with its warm interpreter started for
    ``command`` (``(command, environment)``, ``core.taskinfo.warm_task_command``),
    or None without one."""
    return None if command is None else WarmProcessRunner(WarmSpec(*command))


__all__ = ["WarmSpec", "WarmInterpreter", "WarmProcessRunner", "matches", "python_variables",
           "start_warm_runner"]
