"""The leader of the process group of a replica task's hook or command: a
fork of the task entry (``python -m tfmesos.task``), ``start(command, env)``.

Linux's parent-death signal (PR_SET_PDEATHSIG) reaches only the process that
set it, not what it starts: so the guard sets it for itself and, when the
task entry dies (SIGKILL, the OOM killer), stops its whole group — SIGTERM,
then SIGKILL after a grace period — grandchildren included. The signal fires
when the *thread* that forked the guard ends: start guards from the main
thread.

The task entry stops the group with SIGTERM too: the guard then waits for the
command and exits with its status (128 + N for signal N). A SIGTERM before
the command started (or once the task entry is gone) makes the guard stop the
group itself, so the command never starts; one that comes while it is being
started reaches the command, as one after it does.

A fork, not a second interpreter (``python -I -S``: 20-35 ms a start). The
task entry has threads (the scheduler watch, output pumps, the usage
monitor) whose locks a fork may copy held, so the child takes none: no
logging, no print, no sys.stdout, no imports (``ctypes``' prctl is resolved
in the parent); its one message goes out by ``os.write(2, ...)``, and it
ends by ``os._exit``, never back in the parent's code.
"""

import os
import select
import signal
import time
import warnings

PR_SET_PDEATHSIG = 1
CANNOT_START = 127        # as a shell reports a command it cannot run
# Ignored by Python (SIGPIPE, SIGXFSZ), or handled by the guard: the command
# gets them at their defaults.
DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ)

_libc = None              # (prctl, get_errno), resolved before the first fork
# The longest the task entry's main thread waits at once for what a signal
# should end (the command, a new scheduler): Python runs a handler in the
# main thread once that thread runs again, and a signal the kernel gave
# another thread (any that does not block it) does not interrupt its wait.
SIGNAL_SLICE = 0.5


class _Stop(Exception):
    """Take the group down."""


class Guard:
    """A started guard: ``pid`` (also its group's and session's id),
    ``stdout`` and ``stderr`` (the command's output as binary files, when
    captured, else None), ``wait()``."""

    def __init__(self, pid, stdout=None, stderr=None):
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = None

    def wait(self):
        """The guard's exit code once it ended (-N: killed by signal N)."""
        if self.returncode is None:
            _until_ended(self.pid)
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode


def _until_ended(pid):
    """Return once the child ``pid`` ended (not reaped), looking up every
    ``SIGNAL_SLICE`` so that the handlers of signals meanwhile run; at once
    where there are no pidfds (Linux < 5.3: ``waitpid`` then blocks)."""
    try:
        fd = os.pidfd_open(pid)   # Python 3.9+, Linux 5.3+
    except (AttributeError, OSError):
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not poller.poll(SIGNAL_SLICE * 1000):
            pass
    finally:
        os.close(fd)


def start(command, env, cwd=None, capture=False, grace=5.0, keep=()):
    """Fork a guard that runs ``/bin/sh -c command`` with the environment
    ``env`` in ``cwd`` (None: this one), stdin /dev/null, stdout and stderr
    to pipes (``capture``) or this process's, and of this process'
    descriptors only those in ``keep``. Returns its ``Guard`` once its
    group exists (so a SIGTERM to the group can no longer miss it)."""
    _resolve_libc()
    parent = os.getpid()
    stdin = os.open(os.devnull, os.O_RDONLY)
    ready, set_up = os.pipe()   # EOF: the child has its session and closed what it inherited
    pipes = [os.pipe(), os.pipe()] if capture else []
    # Blocked until the child has its own handler: the task entry's handler
    # must never run in the child.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns of fork() with threads running: the child
            # keeps to the above.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
            if pid == 0:
                _child(parent, grace, command, env, cwd, stdin, [w for _, w in pipes], keep)
    except BaseException:
        for fd in [ready] + [r for r, _ in pipes]:
            os.close(fd)
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for fd in [stdin, set_up] + [w for _, w in pipes]:
            os.close(fd)
    os.read(ready, 1)
    os.close(ready)
    return Guard(pid, *[os.fdopen(r, "rb") for r, _ in pipes])


def _child(parent, grace, command, env, cwd, stdin, outputs, keep):
    """The forked guard: never returns."""
    code = CANNOT_START
    try:
        os.setsid()
        os.dup2(stdin, 0)
        for fd, output in enumerate(outputs, 1):
            os.dup2(output, fd)
        close_inherited(keep=keep)   # the rendezvous socket above all; the parent goes on
        for fd in keep:
            os.set_inheritable(fd, True)   # through the exec of the command
        if cwd:
            os.chdir(cwd)
        code = main(parent, grace, command, env)
    except BaseException as exc:
        _say("cannot start the command: %s" % exc)
    finally:
        os._exit(code)


def close_inherited(lowest=3, keep=()):
    """Close every descriptor from ``lowest`` up but those in ``keep`` (as
    ``_posixsubprocess`` does: those listed in /proc/self/fd, else all up
    to the limit)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        for fd in sorted(fd for fd in keep if fd >= lowest):
            os.closerange(lowest, fd)
            lowest = fd + 1
        os.closerange(lowest, os.sysconf("SC_OPEN_MAX"))
        return
    for fd in fds:
        if fd >= lowest and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass   # the listing's own descriptor, already closed


def _say(message):
    try:
        os.write(2, ("tfmesos guard: %s\n" % message).encode("utf-8", "replace"))
    except OSError:
        pass


def _resolve_libc():
    global _libc
    if _libc is None:
        import ctypes
        _libc = (ctypes.CDLL(None, use_errno=True).prctl, ctypes.get_errno)
    return _libc


def _running(pid):
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == 0
    except ChildProcessError:
        return False


def _stop_group(child, grace):
    """SIGTERM the group, SIGKILL it after ``grace``: the guard dies with it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while child and time.monotonic() < deadline and _running(child):
        time.sleep(0.05)
    os.killpg(0, signal.SIGKILL)


def _others_in_group():
    """Whether a live process other than this one is in this group."""
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == me and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _spawn(command, env):
    """``/bin/sh -c command``'s pid, called with SIGTERM blocked (see
    ``main``); a SIGTERM that came meanwhile may have come before the
    command existed, so the group gets it again (the command at most twice,
    in that window only). The command starts with no signal blocked."""
    child = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", command], env,
                           setsigdef=DEFAULT_SIGNALS, setsigmask=())
    if signal.SIGTERM in signal.sigpending():
        os.killpg(0, signal.SIGTERM)
    return child


def main(parent, grace, command, env):
    """The guard's work, in its own group (the forked child's, or made here):
    guard the task entry ``parent``, run ``command``; its exit code."""
    if os.getpgrp() != os.getpid():   # the group it stops must be its own
        os.setsid()
    child = None
    stopped: list[float] = []   # when the task entry's stop (SIGTERM) came

    def on_sigterm(signum, frame):
        if child is None or os.getppid() != parent:
            raise _Stop()
        if not stopped:
            stopped.append(time.monotonic())

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})   # blocked by start()
        prctl, get_errno = _resolve_libc()
        if prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0):
            _say("prctl failed: %s" % os.strerror(get_errno()))
        if os.getppid() != parent:  # the task entry died before the death signal was set
            raise _Stop()
        # The command has started once posix_spawn returns, but the handler
        # learns it only from ``child``: a SIGTERM in between (a stop just
        # after the start) would stop the group as if nothing had started,
        # SIGKILL at once. So SIGTERM waits, blocked, until ``child`` is set.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            child = _spawn(command, env)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        status = os.waitpid(child, 0)[1]
        if stopped:
            # The shell may end of the SIGTERM before what it started (sh -c
            # 'python3 train.py': dash does not exec it): the rest of the
            # group keeps the rest of its grace to end (a checkpoint saved
            # on SIGTERM), before the task entry SIGKILLs what is left.
            while time.monotonic() < stopped[0] + grace and _others_in_group():
                time.sleep(0.05)
    except _Stop:
        _stop_group(child, grace)
        return 128 + signal.SIGKILL   # not reached: the guard is in its group
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code
