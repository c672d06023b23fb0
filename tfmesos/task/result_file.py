"""``tfmesos.run``'s outcomes on the task side: the file the runner
(``function_runner``) writes, and how the task entry sends it to the
scheduler over its rendezvous connection, before the exit frame.

The entry of a function run (``TFMESOS_FUNCTION`` in its environment) makes
a private directory in the sandbox and tells the command where to write
(``TFMESOS_RESULT_FILE``): the replica guard closes every other descriptor
in the command (but the ``outcome_channel``'s), and a file in the sandbox is there on every agent, shared
with nobody. The file is one JSON line (the header: ``status`` "ok" or
"error", ``error`` what happened, "raised Type: message" or "returned a
value that ...", ``traceback`` text), then the pickled value or exception
(possibly empty). Once the command ended (or, for a failure, once the
runner said it is written: ``outcome_channel``), the entry sends

* ``{"type": "result", "status", "error", "traceback", "size": N}``, then
* ``{"type": "result_data", "offset": O, "data": BASE64}`` frames of at most
  ``CHUNK`` bytes each until ``N`` bytes went,

(all of them again, from the header, when the connection dropped meanwhile
or, where the scheduler answers ``{"type": "result_received"}`` once it has
them all (the start message's ``result_receipt``), before that answer: the
frames the kernels held at a drop are lost, and the scheduler takes a
header again as the start of a new copy), so the pickle never
leaves the JSON frames of ``protocol.wire`` (the scheduler keeps the
bytes; only ``tfmesos.run`` unpickles them, in the calling process: the
value its own function returned). At most
``MAX_RESULT`` bytes (``TFMESOS_MAX_RESULT`` when smaller) from the task
whose value is the call's ``.value`` (the chief, else worker 0); every
other task's at most its share of ``MAX_OTHER_RESULTS``
(``TFMESOS_MAX_OTHER_RESULT``, ``other_limit``): the caller holds at most
both. The runner refuses a larger value, naming the bound; a larger file
is not sent.
"""

import base64
import json
import os
import shutil
import stat
import sys
import threading

from ..protocol import json_documents, task_env

MAX_RESULT = 64 << 20       # bytes of one pickled result
MAX_OTHER_RESULTS = 256 << 20   # bytes of the other tasks' results together
CHUNK = 512 << 10           # raw bytes per frame: ~700 kB of base64, under wire.MAX_FRAME
MAX_HEADER = 1 << 20        # bytes of the header line
MAX_TRACEBACK = 64 << 10    # characters of a traceback kept (its end)
MAX_ERROR = 4096            # characters of the "Type: message" line
RESENDS = 3                 # copies sent again after a dropped connection
# How long a copy's receipt is waited for (``Connection.wait_receipt``): the
# scheduler answers at its last frame; a connection silent this long is
# lost anyway (``connection.IDLE_TIMEOUT``), and the copy sent again.
RECEIPT_WAIT = 60.0


def result_limit(environ):
    """The bound of a pickled result: ``MAX_RESULT``, or the run's when smaller."""
    try:
        given = int(environ.get(task_env.MAX_RESULT) or MAX_RESULT)
    except ValueError:
        given = MAX_RESULT
    return max(0, min(given, MAX_RESULT))


def other_limit(environ):
    """The bound of the value of a task whose value is not ``.value``: its
    share of ``MAX_OTHER_RESULTS``, which the run sets, at most ``result_limit``."""
    limit = result_limit(environ)
    try:
        given = int(environ.get(task_env.MAX_OTHER_RESULT) or limit)
    except ValueError:
        given = limit
    return max(0, min(given, limit))


def clip_traceback(text):
    return text if len(text) <= MAX_TRACEBACK else \
        "[... %d characters cut]\n" % (len(text) - MAX_TRACEBACK) + text[-MAX_TRACEBACK:]


class OutcomeNotWritten(OSError):
    """The runner could not write its outcome (the sandbox's disk is full):
    one line to say, no traceback."""


def write_outcome(path, header, data=b""):
    """The runner's side: write the file at ``path`` whole or not at all
    (OutcomeNotWritten)."""
    partial = path + ".partial"
    try:
        with open(partial, "wb") as handle:
            handle.write(json.dumps(header, separators=(",", ":")).encode("utf-8") + b"\n")
            handle.write(data)
        os.replace(partial, path)
    except OSError as exc:
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise OutcomeNotWritten("tfmesos: cannot write the function's outcome to %s (%s): "
                                "free space in the task's sandbox" % (path, exc.strerror or exc)
                                ) from None


def read_outcome(path, limit):
    """(header, data) of the file at ``path``; None when there is none; a
    header of status "error" naming the problem when it is malformed or
    over ``limit``."""
    try:
        # Never a FIFO's open, which waits for a writer forever, nor a
        # link's target: the runner writes a file there, nothing else.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _failed("the runner's result file cannot be read (%s)"
                       % (exc.strerror or exc)), b""
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return _failed("the runner's result file is no file"), b""
        line = handle.readline(MAX_HEADER)
        try:
            header = json_documents.loads(line)
            if not isinstance(header, dict):
                raise ValueError("not an object")
        except ValueError:
            return _failed("the runner's result file is malformed"), b""
        size = os.fstat(handle.fileno()).st_size - len(line)
        if size > limit:
            return _failed("the pickled result has %d bytes, over the %d byte bound"
                           % (size, limit)), b""
        return header, handle.read(limit + 1)[:limit]


def _failed(text):
    return {"status": "error", "error": "left no usable result: %s" % text, "traceback": ""}


class ResultFile:
    """Where one function run's command writes its outcome: ``env`` for
    the command, ``send`` once it ended."""

    def __init__(self, directory, limit):
        self.directory = directory
        self.path = os.path.join(directory, "result")
        self.limit = limit
        self._lock = threading.Lock()
        self._sent = False   # the outcome went (by send_written: before the command ended)

    @classmethod
    def prepare(cls, environ):
        """A ``ResultFile`` for a function run (``TFMESOS_FUNCTION`` set),
        else None: a private directory in the sandbox."""
        if not environ.get(task_env.FUNCTION):
            return None
        import tempfile
        directory = tempfile.mkdtemp(prefix="tfmesos-result-",
                                     dir=environ.get("MESOS_SANDBOX") or None)
        return cls(directory, result_limit(environ))

    def env(self):
        return {task_env.RESULT_FILE: self.path}

    def send_written(self, conn, receipt=False):
        """Send the outcome while the command still runs: its runner wrote
        a failure's and waits (``outcome_channel``). ``send`` then sends
        nothing again."""
        self._send_once(conn, receipt)

    def send(self, conn, receipt=False):
        """Send the outcome (nothing when the command wrote none, or it
        went already), then remove the directory. Never raises: the exit
        frame follows. ``receipt``: the scheduler says when it has the
        whole result (its start message's ``result_receipt``): a copy is
        sent again when the connection dropped before that, even after its
        last frame."""
        try:
            self._send_once(conn, receipt)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _send_once(self, conn, receipt):
        with self._lock:
            if not self._sent:
                self._sent = self._send(conn, receipt)

    def _send(self, conn, receipt):
        """Send the outcome; whether the file was there (a word on the
        channel before it was written is no outcome yet)."""
        try:
            outcome = read_outcome(self.path, self.limit)
            if outcome is None:
                return False
            header, data = outcome
            for _ in range(1 + RESENDS):
                # A copy goes on a registered connection, not into what send
                # keeps while reconnecting: a second copy of a big result
                # held in memory took a task past its mem.
                conn.flush()
                generation = conn.expect_receipt() if receipt else conn.generation
                self._send_copy(conn, header, data, generation)
                if receipt and conn.wait_receipt(generation, RECEIPT_WAIT):
                    break
                if conn.generation == generation:
                    break
        except Exception as exc:   # the exit frame must still go
            try:
                print("tfmesos: cannot send the function's result: %s" % exc, file=sys.stderr,
                      flush=True)
            except OSError:
                pass   # its sandbox's disk is full
        return True

    @staticmethod
    def _send_copy(conn, header, data, generation):
        """The header and data frames, until the connection's ``generation``
        changes (it dropped: this copy is lost)."""
        conn.send({"type": "result", "status": str(header.get("status")),
                   "error": str(header.get("error") or "")[:MAX_ERROR],
                   "traceback": clip_traceback(str(header.get("traceback") or "")),
                   "size": len(data)})
        for offset in range(0, len(data), CHUNK):
            if conn.generation != generation:
                return
            conn.send({"type": "result_data", "offset": offset, "data": base64.b64encode(
                data[offset:offset + CHUNK]).decode("ascii")})
