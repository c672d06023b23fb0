"""A failed ``tfmesos.run`` task's outcome reaches the scheduler before its
runner exits.

The exit of a runner whose ``fn`` raised closes what it held open, its
process group's connections above all (torch's gloo, JAX's): its peers
fail at once, and their errors ("Connection closed by peer") must not reach
tfmesos before the cause. So the runner (``function_runner``), once it wrote
a failed outcome, says so on a socket its task entry made (``WRITTEN``),
and waits, up to ``ACK_WAIT`` s, for the entry's answer (``SENT``): the
entry sent the outcome over its rendezvous connection and, where the
scheduler confirms results (its start message's ``result_receipt``), the
scheduler has it whole. The scheduler takes the failure whose outcome came
whole first (``core/function_results.remote_failure``): a peer's comes later.

The command inherits its end of the socket pair (``replica_guard.start``'s
``keep``), named by ``TFMESOS_OUTCOME_FD``; the runner takes it before
``fn`` runs and keeps it from what ``fn`` starts. Nothing here may fail
a task: without the channel the outcome goes once the command ended, as
it always could.
"""

import os
import stat
import threading

from ..protocol import task_env

WRITTEN = b"w"     # runner to entry: the outcome file is written
SENT = b"s"        # entry to runner: it went (and came whole, where confirmed)
# The longest a failed runner waits for SENT: the entry waits for the
# scheduler's receipt, which a loaded scheduler gives late; past this the
# runner exits and the outcome still goes once the command ended.
ACK_WAIT = 20.0


class EntryEnd:
    """The task entry's end: ``keep`` (the descriptor the command
    inherits) and ``env`` for the command; ``serve(send)`` calls ``send()``
    when the runner says its outcome is written, then answers; ``close``."""

    def __init__(self):
        # Here, not for the runner (3 ms of its start); the entry has it.
        import socket
        self._mine, self._theirs = socket.socketpair()
        self._thread = None

    @property
    def keep(self):
        return (self._theirs.fileno(),)

    def env(self):
        return {task_env.OUTCOME_FD: str(self._theirs.fileno())}

    def serve(self, send):
        self._thread = threading.Thread(target=self._serve, args=(send,), daemon=True)
        self._thread.start()
        return self

    def _serve(self, send):
        try:
            if self._mine.recv(1) != WRITTEN:
                return      # close(): the command ended without a word
            send()
            self._mine.sendall(SENT)
        except OSError:
            pass

    def close(self):
        import socket
        try:
            self._mine.shutdown(socket.SHUT_RDWR)   # ends a recv under way
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(ACK_WAIT)
        self._mine.close()
        self._theirs.close()


class RunnerEnd:
    """The runner's end (``take``): ``announce`` once a failed outcome is
    written; without a channel it does nothing. Plain descriptor calls:
    the runner imports no ``socket`` for it."""

    def __init__(self, fd=None):
        self._fd = fd
        self._socket = None if fd is None else _identity(fd)

    @classmethod
    def take(cls, environ):
        """The end ``TFMESOS_OUTCOME_FD`` names, when it is a socket, kept
        from the processes ``fn`` starts (the variable too: a runner they
        start must not take whatever holds that number there); else one
        that does nothing."""
        try:
            fd = int(environ.pop(task_env.OUTCOME_FD, None) or "")
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                return cls()
            os.set_inheritable(fd, False)
            return cls(fd)
        except (ValueError, OSError):
            return cls()

    def announce(self, wait=ACK_WAIT):
        """Say the outcome is written; return once the entry sent it, or
        after ``wait`` s, or at once without an entry to tell."""
        fd, self._fd = self._fd, None
        if fd is None or _identity(fd) != self._socket:
            return   # fn closed it: that number is another file's now, not to touch
        try:
            import select
            os.set_blocking(fd, False)   # fn may have filled it: its wait is bounded too
            if select.select([], [fd], [], wait)[1]:
                os.write(fd, WRITTEN)
                if select.select([fd], [], [], wait)[0]:
                    os.read(fd, 1)    # SENT, or the end of the entry
        except OSError:
            pass
        finally:
            os.close(fd)


def _identity(fd):
    """(device, inode) of the open file ``fd``, or None when it is closed."""
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return found.st_dev, found.st_ino
