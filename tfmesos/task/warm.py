"""A pre-started task interpreter: ``python [-S] -m tfmesos.task.warm FD``.

tfrun starts a few of these for the embedded master of a run
(``tfmesos.backends.warm_runner``), with the interpreter, flags and
start-up variables (``PYTHON*``, the locale's, the dynamic linker's) of the
run's replica tasks, before the tasks are known. Each imports the task
entry, then waits for exactly one launch on the socket ``FD`` and becomes
that task in place: its cgroups joined first, stdin /dev/null and stdout
and stderr the sandbox's, every other inherited descriptor closed, the
sandbox its working directory, the task's environment its own, ``sys.path``
and ``sys.argv`` as ``-m tfmesos.task`` sets them; then it runs the task
entry. It is a separate interpreter, so it has its own hash seed, and the
encodings its start-up chose are those of the task's environment. Its
session and process group are its own from its start, and its parent is
the agent, which waits for it as for the exec'd command.

What /proc shows is left as it is: the command line is this one, the
environment the one it was started with; the task's processes carry the
task's (``os.environ`` is replaced before anything starts them).

One request, one reply, JSON lines on the socket ``FD``:

    -> {"launch": {"env": {...}, "cwd": DIR, "stdout": PATH, "stderr": PATH,
                   "cgroups": [".../cgroup.procs", ...]}}
    <- {"took": PID}       (in the task's cgroups: from here on it is the task)
    <- {"error": TEXT}     (it could not join them; it exits 127)

The socket closed before a launch came (tfrun ended, or needs it no more):
it exits 0.
"""

import os
import sys

# typing for the checkers only, as in protocol/wire.py (the task entry imports this).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional


def _start_changes():
    """(what this interpreter started with, what its start-up changed in
    it): PEP 538 sets LC_CTYPE=C.UTF-8 where the locale is C. The same
    start with the task's environment changes that one alike."""
    try:
        with open("/proc/self/environ", "rb") as block:
            started = dict(entry.split(b"=", 1) for entry in block.read().split(b"\0")
                           if b"=" in entry)
    except OSError:
        return dict(os.environb), {}
    changes: dict[bytes, Optional[bytes]] = {
        name: value for name, value in os.environb.items() if started.get(name) != value}
    changes.update((name, None) for name in started if name not in os.environb)
    return started, changes


# Read first, before any import may change the environment.
_STARTED_WITH, _START_CHANGES = _start_changes()

import json  # noqa: E402
import time  # noqa: E402

from . import entry  # noqa: E402
from .replica_guard import close_inherited  # noqa: E402

MAX_REQUEST = 1 << 20
CANNOT_START = 127
ENTRY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")


def _say(fd, message):
    os.write(fd, (json.dumps(message) + "\n").encode())


def _read_request(fd):
    """The one launch request, or None when the socket closed first."""
    pending = b""
    while b"\n" not in pending:
        data = os.read(fd, 65536)
        if not data or len(pending) > MAX_REQUEST:
            return None
        pending += data
    return json.loads(pending.split(b"\n", 1)[0])["launch"]


def _open_onto(path, fd, flags):
    opened = os.open(path, flags, 0o644)
    if opened != fd:
        os.dup2(opened, fd)
        os.close(opened)


def task_environment(env):
    """The task's environment as the exec'd interpreter would hold it once
    started: ``env`` with what this one's start-up changed in its own,
    where ``env`` had what it started with."""
    environ = {os.fsencode(name): os.fsencode(value) for name, value in env.items()}
    for name, value in _START_CHANGES.items():
        if environ.get(name) == _STARTED_WITH.get(name):
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = value
    return environ


def _names_cwd(path):
    try:
        return path is not None and os.path.isabs(path) and os.path.samefile(path, ".") \
            and b"/./" not in path + b"/" and b"/../" not in path + b"/"
    except OSError:
        return False


def _become(request):
    """Turn this process into the task ``request`` describes (after the
    reply went out: the socket is closed with the rest)."""
    _open_onto(os.devnull, 0, os.O_RDONLY)
    _open_onto(request["stdout"], 1, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    _open_onto(request["stderr"], 2, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    close_inherited()
    os.chdir(request["cwd"])
    environ = task_environment(request["env"])
    # What ``/bin/sh -c "exec ..."`` adds to the command's environment: PWD,
    # which a POSIX shell sets at its start (kept where it names the
    # working directory already).
    if not _names_cwd(environ.get(b"PWD")):
        environ[b"PWD"] = os.fsencode(os.getcwd())
    os.environb.clear()
    os.environb.update(environ)
    if hasattr(time, "tzset"):
        time.tzset()     # TZ as the task has it, read when ``time`` was imported
    if not getattr(sys.flags, "safe_path", False):   # -P, PYTHONSAFEPATH (3.11)
        sys.path[0] = os.getcwd()      # as ``-m`` sets it
    sys.argv = [ENTRY_PATH]


def serve(fd):
    """Wait for one launch and become it (never returns then); return when
    the socket closed first."""
    request = _read_request(fd)
    if request is None:
        return
    try:
        for procs in request.get("cgroups") or ():   # first: all it does is accounted
            with open(procs, "w") as handle:
                handle.write("0")
    except OSError as exc:
        _say(fd, {"error": "cannot join the cgroup %s: %s" % (procs, exc)})
        os._exit(CANNOT_START)
    try:
        _say(fd, {"took": os.getpid()})
    except OSError:
        os._exit(CANNOT_START)    # the agent is gone: no one would wait for the task
    try:
        _become(request)
    except BaseException as exc:
        os.write(2, ("tfmesos: the pre-started task interpreter could not become the "
                     "task: %s\n" % exc).encode("utf-8", "replace"))
        os._exit(CANNOT_START)
    entry.run()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
