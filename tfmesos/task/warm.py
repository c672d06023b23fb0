"""A warm task interpreter: ``python [-S] -m tfmesos.task.warm FD``.

The embedded master's agent starts one per run (``tfmesos.backends.warm_runner``)
with the interpreter, flags and ``PYTHON*`` variables of the run's replica
tasks. It imports the task entry once, then forks one child per task launch
it is asked for: the child is what ``/bin/sh -c "exec PYTHON [-S] -m
tfmesos.task"`` would have started — the task's environment, working
directory, sandbox stdout/stderr, its own session, its cgroups joined first —
without paying for an interpreter start and the task entry's imports again.
A real Mesos agent always execs the command: the TaskInfo is the same
either way.

Requests and replies are JSON lines on the socket ``FD``:

    -> {"launch": {"env": {...}, "cwd": DIR, "stdout": PATH, "stderr": PATH,
                   "cgroups": [".../cgroup.procs", ...]}}
    <- {"pid": PID}                   (or {"error": TEXT})
    <- {"exit": PID, "status": CODE}  (when it ends; CODE < 0: killed by -CODE)

The interpreter is single-threaded (forking it is safe) and leaves when the
socket closes: its children are the tasks, which outlive it as they would
outlive an agent restart.
"""

import ctypes
import json
import os
import select
import signal
import sys
import traceback

from . import entry
from .replica_guard import close_inherited

MAX_REQUEST = 1 << 20
ENTRY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")


def _say(fd, message):
    os.write(fd, (json.dumps(message) + "\n").encode())


def _open_onto(path, fd, flags):
    opened = os.open(path, flags, 0o644)
    if opened != fd:
        os.dup2(opened, fd)
        os.close(opened)


def _memory_regions():
    """(arg_start, arg_end, env_start, env_end) of this process, as proc(5)
    gives them (/proc/PID/stat fields 48-51)."""
    with open("/proc/self/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return tuple(int(value) for value in fields[45:49])


def _overwrite(start, end, data):
    """The memory from ``start`` to ``end`` holds ``data`` then NULs, when it fits."""
    if len(data) <= end - start:
        ctypes.memmove(start, data.ljust(end - start, b"\0"), end - start)


def _show_as_task(environ):
    """Make /proc/PID/cmdline and /proc/PID/environ (``ps``, tools, the
    agent's own search for a task's processes) read as those of the exec'd
    ``PYTHON -S -m tfmesos.task`` with the task's environment: the kernel
    reads both from the blocks the process was exec'd with, which a fork
    keeps; they are rewritten in place, as setproctitle(3) does. argv[0]
    stays where it is (glibc's program_invocation_name points at it); the
    environment block is no longer referenced once os.environ was replaced."""
    try:
        arg_start, arg_end, env_start, env_end = _memory_regions()
        # PYTHON [-S] -m tfmesos.task.warm FD -> PYTHON [-S] -m tfmesos.task
        argv = [os.fsencode(arg) for arg in sys.orig_argv[:-2]] + [b"tfmesos.task"]
        _overwrite(arg_start, arg_end, b"\0".join(argv) + b"\0")
        _overwrite(env_start, env_end, b"".join(
            os.fsencode(name) + b"=" + os.fsencode(value) + b"\0"
            for name, value in environ.items()))
    except (OSError, ValueError, IndexError):
        pass    # only what tools show of the task: never a reason to fail it


def _become_task(request):
    """In the forked child: turn into the task, then run the task entry
    (never returns)."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        for procs in request.get("cgroups") or ():   # first: all it does is accounted
            with open(procs, "w") as handle:
                handle.write("0")
        _open_onto(os.devnull, 0, os.O_RDONLY)
        _open_onto(request["stdout"], 1, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        _open_onto(request["stderr"], 2, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        close_inherited()    # the socket to the agent above all
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[0] = os.getcwd()      # as ``-m`` sets it
        sys.argv = [ENTRY_PATH]
        _show_as_task(request["env"])
    except BaseException:  # noqa: BLE001 - the child must never return to the loop
        os.write(2, ("tfmesos: the warm task interpreter could not start the task:\n%s"
                     % traceback.format_exc()).encode())
        os._exit(127)
    try:
        entry.run()
    finally:
        os._exit(1)


def _reap(fd):
    """Report every child that ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _say(fd, {"exit": pid, "status": os.waitstatus_to_exitcode(status)})


def serve(fd):
    """Fork tasks on request until the socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # the agent stops it, not a Ctrl-C
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    os.set_blocking(wake_read, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    _say(fd, {"ready": os.getpid()})
    pending = b""
    while True:
        readable, _, _ = select.select([fd, wake_read], [], [])
        if wake_read in readable:
            try:
                os.read(wake_read, 512)
            except BlockingIOError:
                pass
            _reap(fd)
        if fd not in readable:
            continue
        data = os.read(fd, 65536)
        if not data:
            return
        pending += data
        if len(pending) > MAX_REQUEST:
            return
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)["launch"]
            try:
                pid = os.fork()
            except OSError as exc:
                _say(fd, {"error": "cannot fork: %s" % exc})
                continue
            if pid == 0:
                _become_task(request)
            _say(fd, {"pid": pid})
        _reap(fd)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
    os._exit(0)    # nothing to flush or finalize: the agent waits for this exit
