"""The tasks of a master that died (SIGKILL, a crash) end, as the tasks of
a Mesos agent that died do.

In Mesos the agent is a process of its own, and each executor notices when
its connection to the agent breaks (src/executor/executor.cpp,
``disconnected``; docs/agent-recovery.md): the executor of a framework
that does not checkpoint shuts down at once, killing its task (SIGTERM,
SIGKILL after its grace: src/launcher/executor.cpp, ``shutdown``); that of
one that checkpoints (``FrameworkInfo.checkpoint``) waits for the agent to
come back and recover it, and shuts down once the agent's
``--recovery_timeout`` (``MESOS_RECOVERY_TIMEOUT``, default 15 minutes,
src/slave/constants.hpp) passed without it. Here the agents live in the
master's process and no master recovers them: its tasks end as they would
(``LocalMaster(recovery_timeout=...)``, ``--recovery-timeout``).

This is done by one watchdog per master, started at its first task's
launch (``Watchdog``): this file run as a script, ``python -I -S
watchdog.py RECOVERY_TIMEOUT``, in a session of its own (a Ctrl-C to the
master's terminal does not reach it), not a fork of the threaded master
(as ``cleanup.py``'s cleaner). Its standard input is one end of a
socket pair whose other end only the master holds (close-on-exec: no task
inherits it; a socket, not a pipe, so that a write to a watchdog that is
gone is an error and never a SIGPIPE, whatever the master's process did
with that signal). The master writes a line as each task starts and ends;
every line ends with a newline (a last line without one is cut short by
the master's death and ignored), its fields split by spaces:

* ``watch KEY PGID SINCE GRACE CHECKPOINT MARKER CGROUP...``: a task's
  processes (``watch_line``): its process group and start (clock ticks,
  ``-`` for none), its grace, ``1`` if its framework checkpoints, its
  ``MESOS_SANDBOX=...`` for the processes that left the group and its
  cgroups, both in hex (any byte goes);
* ``container KEY GRACE CHECKPOINT ID DOCKER``: a Docker task's container
  (``container_line``): its id (or name) on the engine and the absolute
  path of the ``docker`` command, in hex as the marker;
* ``forget KEY``: that task ended (the master destroyed it itself);
* ``exit``: at ``stop()``, once the master killed every task itself: the
  watchdog exits, killing nothing.

End of file without ``exit`` is the master's death: the watchdog ends
every task it still watches, then exits (early once none is left). A
process task gets SIGTERM, then SIGKILL after its grace. A container goes
as Mesos' docker executor (src/docker/executor.cpp, run by the executor
driver, src/exec/exec.cpp, which shuts it down when its agent is gone, or
after the recovery timeout for a checkpointing framework) stops its
container at its ``shutdown``: ``docker stop -t GRACE ID`` (the
container's stop signal, SIGKILL after the grace), then ``docker rm -f
ID``, as the master removes the containers of its tasks; the watchdog runs
the ``docker`` command line the master's ``PATH`` found as it watched the
container (``docker_command``: refused where another user could replace
it, or a directory above it, since it runs with the master's rights), with
the master's environment (``DOCKER_HOST``, ``DOCKER_CONTEXT``...). Without
it, or with an engine that does not answer, the container is left to the
next master's start (below).

What else a killed master leaves, its work directory, cgroup
directories and the containers the watchdog did not remove (or did not
watch yet: a container is watched once the engine started it), the next
master's start removes (``cleanup.py``, ``cgroups.remove_stale``; on that
engine, ``docker_runner.remove_orphans``); with isolation that start kills
what is still in a dead master's cgroups at once, recovery timeout or not:
no master recovers another's tasks.

Standard library only and nothing of the package, as ``cleanup.py``, and
a light start (no ``json``, ``logging`` or ``typing``: a few milliseconds
of CPU beside the first tasks' start; the ``docker`` command runs only
once the master died).
"""

from __future__ import annotations

import _thread
import os
import sys
import time

# The watchdog process imports only the above (its start is on the way to
# the first task's: socket, and the enum that signal imports, took 9 of its
# 10 ms); the master's side imports what it uses in its methods, modules the
# master has loaded.
SIGTERM, SIGKILL = 15, 9   # their numbers in POSIX (XSI), as kill -15, kill -9
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    import weakref
    from collections.abc import Iterable

RECOVERY_TIMEOUT = 900.0   # seconds: Mesos' agent flag --recovery_timeout (15 mins)
WRITE_WAIT = 5.0           # seconds a line may wait for room in the socket
EXIT_WAIT = 2.0            # seconds stop() waits for the watchdog to exit
IDLE_POLL = 1.0            # seconds between looks while tasks wait out the recovery timeout
KILL_POLL = 0.05           # ... while tasks are being killed
KILL_TIMEOUT = 5.0         # seconds of SIGKILL after which a task's processes are given up
DOCKER_TIMEOUT = 60.0      # seconds a docker command may take past the grace, then is killed

# Watchdogs closed without waiting (``close(wait=False)``: a master's
# ``stop(detached_cleanup=True)``, as every ``tfmesos.run`` stops its own),
# not reaped yet: each close, and each watchdog's start, reaps those that
# exited, as ``cleanup.start_cleaner`` reaps its cleaners; until then each
# is this process' child, its pid never another's. A lock: the masters of
# runs submitted together stop in threads of their own.
_unreaped: list[int] = []
_reaping = _thread.allocate_lock()


def _reap_exited() -> None:
    from .cleanup import reap_exited  # the master's side only: the script imports none
    reap_exited(_unreaped, _reaping)


# -- the master's side ---------------------------------------------------------

# Every watchdog of this process: a forked child (multiprocessing's default
# on Linux, a caller's own fork) inherits the master's end of each socket,
# close-on-exec or not, and while it held one the watchdog never read its
# end of file: a master SIGKILLed then left its tasks running until that
# child exited. The child closes its copies (``_forget_in_child``).
_watchdogs: weakref.WeakSet[Watchdog] | None = None   # made with the first: the master's side


def _forget_in_child() -> None:
    """In a forked child: close the inherited sockets (not through the
    locks, which a thread of the parent may have held at the fork) and take
    each watchdog for closed, to be neither written to nor started again."""
    for dog in list(_watchdogs or ()):
        held, dog._socket = dog._socket, None
        dog._closed = True
        if held is not None:
            try:
                held.close()
            except OSError:
                pass


class Watchdog:
    """One master's watchdog: ``watch`` starts it (on the first task),
    ``forget`` a task that ended, ``close`` (``stop()``, after its tasks
    ended) lets it exit. Thread-safe; never raises: a watchdog that cannot
    start or went away is logged once and the master goes on without."""

    def __init__(self, recovery_timeout: float = RECOVERY_TIMEOUT,
                 owner: str | None = None) -> None:
        """``owner``: the name of the master's cgroups (``Isolator.name``),
        on the watchdog's command line: while it runs, the next master
        leaves them be (``cgroups.remove_stale``)."""
        import itertools
        import threading
        self.recovery_timeout = recovery_timeout
        self.owner = owner
        self.pid: int | None = None
        self._socket: socket.socket | None = None   # the master's end
        self._lock = threading.Lock()
        self._keys = itertools.count(1)
        self._closed = False   # it watches no more tasks
        self._broken = False   # nothing more can be written
        global _watchdogs
        if _watchdogs is None:
            import weakref
            _watchdogs = weakref.WeakSet()
            os.register_at_fork(after_in_child=_forget_in_child)
        _watchdogs.add(self)

    def watch(self, pgid: int | None, since: int | None, marker: bytes | None,
              cgroups: Iterable[str], grace: float, checkpoint: bool) -> int | None:
        """Watch a task's processes: its group ``pgid`` (None: none), those
        whose environment holds ``marker`` (``MESOS_SANDBOX=...``), those
        in ``cgroups``, none started before ``since`` (clock ticks); SIGTERM,
        then SIGKILL after ``grace`` seconds. Its key for ``forget``, or None."""
        key = next(self._keys)
        line = watch_line(key, pgid, since, marker, cgroups, grace, checkpoint)
        return key if self._send(line) else None

    def watch_container(self, container: str, grace: float, checkpoint: bool) -> int | None:
        """Watch a Docker task's ``container`` (the engine's id): stopped
        (``docker stop -t GRACE``) and removed, by the ``docker`` command
        this master's ``PATH`` finds now (``docker_command``: none that
        another user could replace). Its key for ``forget``, or None (left to
        the next master's ``remove_orphans``)."""
        docker = docker_command()
        if docker is None:
            return None
        key = next(self._keys)
        line = container_line(key, container, grace, checkpoint, docker)
        return key if self._send(line) else None

    def forget(self, key: int | None) -> None:
        if key is not None:
            self._send(b"forget %d\n" % key)

    def close(self, wait: bool = True) -> None:
        """Tell it to exit, killing nothing; ``wait``: reap it (bounded),
        else leave it to the next close or start (``_reap_exited``), or to
        init once this process exits."""
        with self._lock:
            self._closed = True
            if self._socket is None:
                return
            if not self._broken:
                self._write(b"exit\n")
            self._socket.close()
            self._socket = None
            pid = self.pid
        if not wait:
            if pid is not None:
                with _reaping:
                    _unreaped.append(pid)
            _reap_exited()
            return
        deadline = time.monotonic() + EXIT_WAIT
        while pid is not None:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] != 0:
                    break
            except ChildProcessError:
                break
            if time.monotonic() >= deadline:
                _warn("the watchdog (pid %d) did not exit within %g s", pid, EXIT_WAIT)
                break
            time.sleep(0.005)

    def _send(self, line: bytes) -> bool:
        with self._lock:
            if self._closed:
                return False
            if self._socket is None and not self._start():
                return False
            return self._write(line)

    def _start(self) -> bool:
        """Start the watchdog (under the lock); False when it could not."""
        import socket
        _reap_exited()
        mine, theirs = socket.socketpair()   # neither inherited by what this process execs
        argv = [sys.executable, "-I", "-S", os.path.abspath(__file__),
                repr(float(self.recovery_timeout))] + ([self.owner] if self.owner else [])
        actions = [(os.POSIX_SPAWN_DUP2, theirs.fileno(), 0),
                   (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                   (os.POSIX_SPAWN_DUP2, 1, 2)]
        try:
            self.pid = os.posix_spawn(sys.executable, argv, os.environ, file_actions=actions,
                                      setsid=True)
        except (OSError, NotImplementedError) as exc:   # setsid needs glibc 2.26
            theirs.close()
            mine.close()
            self._closed = True
            _warn("cannot start the watchdog (%s): the tasks of this master will outlive it "
                  "if it is killed", exc)
            return False
        theirs.close()
        mine.setblocking(False)   # a watchdog that stopped reading stalls no task
        self._socket = mine
        try:   # its start yields to the tasks' (it reads what waits in the socket after)
            os.setpriority(os.PRIO_PROCESS, self.pid,
                           min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10))
        except OSError:
            pass
        return True

    def _write(self, data: bytes) -> bool:
        import select
        import socket
        mine = self._socket
        deadline = time.monotonic() + WRITE_WAIT
        while data and mine is not None:
            try:
                data = data[mine.send(data, socket.MSG_NOSIGNAL):]
                continue
            except BlockingIOError:
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    select.select([], [mine], [], remaining)
                    continue
                why = "it read nothing for %g s" % WRITE_WAIT
            except OSError as exc:   # EPIPE: it is gone
                why = "it is gone (%s)" % exc
            # Its stream is cut mid-line: nothing more can be sent. The socket
            # stays open, so that it does not take this for the master's death.
            self._closed = self._broken = True
            _warn("the watchdog (pid %s) watches no more tasks: %s", self.pid, why)
            return False
        return True


def _warn(text: str, *args: object) -> None:
    import logging  # here: the watchdog process does without
    logging.getLogger("mesos_local.watchdog").warning(text, *args)


def watch_line(key: int, pgid: int | None, since: int | None, marker: bytes | None,
               cgroups: Iterable[str], grace: float, checkpoint: bool) -> bytes:
    """``watch KEY PGID SINCE GRACE CHECKPOINT MARKER CGROUP...``: numbers,
    ``-`` for none, paths and the marker in hex (any byte goes)."""
    fields = [b"watch", b"%d" % key, b"-" if pgid is None else b"%d" % pgid,
              b"-" if since is None else b"%d" % since, repr(float(grace)).encode(),
              b"1" if checkpoint else b"0", marker.hex().encode() if marker else b"-"]
    fields += [os.fsencode(path).hex().encode() for path in cgroups]
    return b" ".join(fields) + b"\n"


def parse_watch(fields: list[bytes]) -> dict:
    """What ``watch_line`` wrote (its fields after ``watch``); ValueError."""
    def number(field: bytes) -> int | None:
        return None if field == b"-" else int(field)
    key, pgid, since, grace, checkpoint, marker = fields[:6]
    return {"key": int(key), "pgid": number(pgid), "since": number(since),
            "grace": float(grace), "checkpoint": checkpoint == b"1",
            "marker": None if marker == b"-" else bytes.fromhex(marker.decode()),
            "cgroups": [os.fsdecode(bytes.fromhex(path.decode())) for path in fields[6:]]}


def docker_command() -> str | None:
    """The ``docker`` command's absolute path on this process' ``PATH``, if
    only its owner (root or this user) can change it and the directories
    it lies in: the watchdog runs it with the master's rights, which are
    root's where tasks switch users. None (and a warning) otherwise."""
    import shutil
    found = shutil.which("docker")
    if found is None:
        _warn("no docker command on PATH: a Docker task's container outlives a killed master "
              "until the next master on that engine removes it")
        return None
    command = path = os.path.realpath(found)
    while True:
        stat = os.stat(path)
        # A sticky directory (/tmp) others may write: none can replace what is not theirs.
        shared = stat.st_mode & 0o022 and not (path != command and stat.st_mode & 0o1000)
        if stat.st_uid not in (0, os.geteuid()) or shared:
            _warn("%s, the docker command, is not run for a killed master: %s is writable by "
                  "others or another user's", found, path)
            return None
        parent = os.path.dirname(path)
        if parent == path:
            return command
        path = parent


def container_line(key: int, container: str, grace: float, checkpoint: bool,
                   docker: str) -> bytes:
    """``container KEY GRACE CHECKPOINT ID DOCKER``: ``ID`` the container's,
    ``DOCKER`` the absolute path of the command that removes it, both hex."""
    return b"container %d %s %s %s %s\n" % (key, repr(float(grace)).encode(),
                                             b"1" if checkpoint else b"0",
                                             container.encode().hex().encode(),
                                             os.fsencode(docker).hex().encode())


def parse_container(fields: list[bytes]) -> dict:
    """What ``container_line`` wrote (its fields after ``container``); ValueError."""
    key, grace, checkpoint, container, docker = fields
    name = bytes.fromhex(container.decode()).decode("ascii")
    if not name or name.startswith("-"):
        raise ValueError("not a container: %r" % name)
    command = os.fsdecode(bytes.fromhex(docker.decode()))
    if not os.path.isabs(command):
        raise ValueError("not an absolute path: %r" % command)
    return {"key": int(key), "grace": float(grace), "checkpoint": checkpoint == b"1",
            "container": name, "docker": command}


# -- the watchdog's side -----------------------------------------------------------

def _stat(pid: str) -> tuple[int, int] | None:
    """(process group, start ticks) of a live, non-zombie ``pid`` (proc(5):
    fields 5 and 22 of /proc/PID/stat), or None."""
    try:
        with open("/proc/%s/stat" % pid, "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return None if fields[0] == b"Z" else (int(fields[2]), int(fields[19]))
    except (OSError, IndexError, ValueError):
        return None


def _cgroup_pids(directory: str) -> set[int]:
    """``cleanup.cgroup_pids``: each script runs by path, alone (``-I``),
    and can import neither the package nor the other."""
    try:
        with open(os.path.join(directory, "cgroup.procs"), encoding="ascii") as handle:
            return {int(pid) for pid in handle.read().split()}
    except (OSError, ValueError):
        return set()


class Ending:
    """(What ``containerizer/process_tree.py`` does for a live master,
    ``_scan`` and ``Destruction``, standard library only: keep the two in
    step.) A watched task of a dead master, from ``due`` (monotonic) on:
    SIGTERM, then SIGKILL after its grace; ``done`` once two looks in a row
    find none of its processes (a process forked while a look listed /proc
    shows in the next)."""

    def __init__(self, task: dict, due: float) -> None:
        self.pgid = task["pgid"]
        self.since = task["since"] or 0
        self.marker = task["marker"]
        self.cgroups = task["cgroups"]
        self.grace = max(0.0, task["grace"])
        self.due = due
        self.kill_at: float | None = None
        self.give_up: float | None = None
        self.clean = 0
        self.done = False

    def look(self, table: dict, now: float) -> None:
        """Signal its processes as its time says; ``table``: pid -> (group,
        start) of every live process but this one."""
        found = set()
        for path in self.cgroups:
            found |= _cgroup_pids(path)
        for pid, (group, start) in table.items():
            if start < self.since:
                continue
            if group == self.pgid or (self.marker is not None and self.marker in _environ(pid)):
                found.add(pid)
        if not found:
            self.clean += 1
            self.done = self.clean >= 2
            return
        self.clean = 0
        if now < self.due:
            return
        if self.kill_at is None:
            self.kill_at = now + self.grace
            _signal(found, SIGTERM)
        if now >= self.kill_at:
            if self.give_up is None:
                self.give_up = now + KILL_TIMEOUT
            _signal(found, SIGKILL)
            self.done = now >= self.give_up


_ENVIRON: dict[int, frozenset] = {}   # one look's environments, read once each


def _environ(pid: int) -> frozenset:
    if pid not in _ENVIRON:
        try:
            with open("/proc/%d/environ" % pid, "rb") as handle:
                _ENVIRON[pid] = frozenset(handle.read().split(b"\0"))
        except OSError:
            _ENVIRON[pid] = frozenset()
    return _ENVIRON[pid]


def _signal(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def _processes() -> dict[int, tuple[int, int]]:
    me = os.getpid()
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            found = _stat(name)
            if found is not None:
                table[int(name)] = found
    return table


class ContainerEnding:
    """A watched container of a dead master, from ``due`` (monotonic) on:
    ``docker stop -t GRACE``, then ``docker rm -f``, each a child of this
    process (killed once ``DOCKER_TIMEOUT`` passed beyond the grace: an
    engine that does not answer); ``done`` once the last exited, or once
    none could be started (no ``docker`` command)."""

    def __init__(self, task: dict, due: float) -> None:
        container, docker = task["container"], task["docker"]
        grace = max(0.0, task["grace"])
        seconds = int(-(-grace // 1))   # whole seconds (docker stop's), rounded up
        # each command, and how long it may take before it is killed
        self.commands = [([docker, "stop", "-t", str(seconds), "--", container],
                          grace + DOCKER_TIMEOUT),
                         ([docker, "rm", "-f", "--", container], DOCKER_TIMEOUT)]
        self.due = due
        self.child: int | None = None
        self.give_up = 0.0
        self.done = False

    def look(self, table: dict, now: float) -> None:
        if now < self.due:
            return
        if self.child is not None:
            if not _reaped(self.child, kill=now >= self.give_up):
                return
            self.child = None
        while self.commands and self.child is None:
            command, limit = self.commands.pop(0)
            self.child = _spawn(command)
            self.give_up = now + limit
        self.done = self.child is None


def _spawn(argv: list[str]) -> int | None:
    """Start ``argv`` (its command an absolute path), its standard input
    /dev/null (not the master's socket); its pid, or None."""
    try:
        return os.posix_spawn(argv[0], argv, os.environ,
                               file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)])
    except OSError:
        return None


def _reaped(pid: int, kill: bool) -> bool:
    """Whether the child ``pid`` exited (and is reaped); ``kill``: SIGKILL
    it first, and reap it."""
    try:
        if kill:
            os.kill(pid, SIGKILL)
            os.waitpid(pid, 0)
            return True
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except OSError:   # ChildProcessError: not ours to wait for (any more)
        return True


def end_tasks(tasks: Iterable[dict], recovery_timeout: float) -> None:
    """End the watched ``tasks`` of a master that died: at once, or after
    ``recovery_timeout`` seconds for those of a checkpointing framework."""
    start = time.monotonic()
    endings: list[Ending | ContainerEnding] = [
        (ContainerEnding if "container" in task else Ending)(
            task, start + (recovery_timeout if task["checkpoint"] else 0.0))
        for task in tasks]
    while endings:
        _ENVIRON.clear()
        processes = any(isinstance(ending, Ending) for ending in endings)
        table, now = _processes() if processes else {}, time.monotonic()
        for ending in endings:
            ending.look(table, now)
        endings = [ending for ending in endings if not ending.done]
        if endings:
            busy = any(now >= ending.due for ending in endings)
            nearest = min(ending.due for ending in endings)
            time.sleep(KILL_POLL if busy else max(KILL_POLL, min(IDLE_POLL, nearest - now)))


def watch(stream, recovery_timeout: float) -> None:
    """Read the master's lines from ``stream`` until ``exit`` (return) or
    the end of the stream (the master died: end what it left)."""
    tasks: dict[int, dict] = {}
    for line in stream:
        if not line.endswith(b"\n"):
            break   # the master died in the middle of a line
        fields = line.split()
        try:
            if fields == [b"exit"]:
                return
            if fields[0] == b"watch":
                task = parse_watch(fields[1:])
                tasks[task["key"]] = task
            elif fields[0] == b"container":
                task = parse_container(fields[1:])
                tasks[task["key"]] = task
            elif fields[0] == b"forget":
                tasks.pop(int(fields[1]), None)
        except (IndexError, ValueError):
            continue   # not the master's: nothing to go by
    end_tasks(tasks.values(), recovery_timeout)


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):   # [OWNER]: read by the next master (Watchdog)
        sys.stderr.write("usage: watchdog.py RECOVERY_TIMEOUT [OWNER] < PIPE\n")
        return 2
    with os.fdopen(0, "rb") as stream:   # its end of the master's socket pair
        watch(stream, float(argv[0]))
    return 0


def watched_owners() -> set[str]:
    """The owners (``Watchdog(owner=...)``) of the watchdogs running now:
    processes of this user (a master's watchdog runs as its master; anyone
    can start a process whose command line reads as one)."""
    # Any install's (another master may run another copy of mesos_local).
    script = b"/mesos_local/watchdog.py"
    owners = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat("/proc/%s" % pid).st_uid != os.geteuid():
                continue
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        at = next((i for i, word in enumerate(argv[:4]) if word.endswith(script)), None)
        if at is not None and len(argv) > at + 2 and argv[at + 2]:
            owners.add(os.fsdecode(argv[at + 2]))
    return owners


__all__ = ["RECOVERY_TIMEOUT", "Watchdog", "watched_owners", "watch_line", "parse_watch",
           "container_line", "parse_container", "end_tasks", "watch"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
