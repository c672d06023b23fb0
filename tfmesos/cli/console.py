"""tfrun's console while a run goes: everything it writes to stdout and
stderr, from any thread, is written in order by a thread of its own, so
that a reader that does not read (``tfrun ... | less`` left on one page,
a terminal stopped with Ctrl-S) never stops the run: its tasks' exits and
failures are acted on, its deadlines kept, whatever the console does.

``running()`` puts a ``ConsoleStream`` in place of ``sys.stdout``
and ``sys.stderr`` for the run and, as it ends, waits for what is queued
to be written and puts the streams back. A write queues its text; the
writer thread writes it to the real stream, in the order written.

What waits is bounded: past ``BACKLOG`` bytes not yet written, the tasks'
output (``write_output``) is left out, counted, and once the console
caught up one line says how much (every byte of it is in the run
directory: ``tfmesos logs``); tfrun's own lines are never left out.

A write the real stream refuses (a closed pipe, a full disk) is raised
by the next write to that stream, from whichever thread writes it
(``tfrun.print_log`` turns a closed pipe into the run's stop); a closed
pipe under the tasks' output also calls ``on_closed`` at once (tfrun
stops the run: its reader went away).
"""

import collections
import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any, Callable, Optional, TextIO

BACKLOG = 16 << 20     # bytes queued at most before the tasks' output is left out


class Console:
    """The writer of ``streams`` (name -> the real stream), one thread."""

    def __init__(self, streams: "dict[str, TextIO]", backlog: int = BACKLOG,
                 on_closed: Optional[Callable[[], None]] = None) -> None:
        self._streams = streams
        self._backlog = backlog
        self._on_closed = on_closed
        self.closed = False        # a closed pipe refused the tasks' output
        self._cond = threading.Condition()
        self._queue: collections.deque = collections.deque()   # (name, text, output)
        self._queued = 0           # bytes in the queue
        self._busy = False         # the writer holds an item it took
        self._left_out = 0         # the tasks' output bytes not written, not yet said
        self._errors: dict[str, BaseException] = {}   # stream -> what writing it raised
        self._thread: Optional[threading.Thread] = None

    def write(self, name: str, text: str, output: bool = False) -> None:
        """Queue ``text`` for the stream ``name``; ``output``: the tasks'
        output, left out past the backlog. Raises what the last write of
        that stream raised."""
        with self._cond:
            error = self._errors.pop(name, None)
            if error is not None:
                raise error
            if output and self._queued >= self._backlog:
                self._left_out += len(text)
                return
            self._queue.append((name, text, output))
            self._queued += len(text)
            if self._thread is None:
                self._thread = threading.Thread(target=self._write_all, name="tfrun-console",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def drain(self, timeout: Optional[float] = None) -> bool:
        """Wait until everything queued was written (a wait Ctrl-C can
        cut short); False when ``timeout`` passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy,
                                       timeout)

    def _write_all(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue)
                name, text, output = self._queue.popleft()
                self._busy = True
            try:
                _write(self._streams[name], text)
                error = None
            except (OSError, ValueError) as exc:
                error = exc
            closed = output and isinstance(error, BrokenPipeError) and not self.closed
            with self._cond:
                self._queued -= len(text)
                self._busy = False
                if error is not None:
                    self._errors[name] = error
                self.closed = self.closed or closed
                if self._left_out and not self._queue:
                    line = self._left_out_line()
                    self._queue.append(("stderr", line, False))
                    self._queued += len(line)
                    self._left_out = 0
                self._cond.notify_all()
            if closed and self._on_closed is not None:
                self._on_closed()

    def _left_out_line(self) -> str:
        return ("tfrun: warning: the tasks' output came faster than this console was read: "
                "%d bytes of it are not shown here (tfmesos logs shows all of it)\n"
                % self._left_out)


def _write(stream: TextIO, text: str) -> None:
    try:
        stream.write(text)
    except UnicodeEncodeError:   # a stream that is not UTF-8 and not backslashreplace'd
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()


class ConsoleStream:
    """``sys.stdout``/``sys.stderr`` while a ``Console`` writes them: a
    text stream whose writes queue, everything else the real stream's."""

    def __init__(self, console: Console, name: str, real: TextIO) -> None:
        self.console = console
        self._name = name
        self.real = real

    def write(self, text: str) -> int:
        self.console.write(self._name, text)
        return len(text)

    def write_output(self, text: str) -> int:
        """A task's output: left out when the console is far behind."""
        self.console.write(self._name, text, output=True)
        return len(text)

    def flush(self) -> None:
        pass   # the writer flushes after every write

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@contextlib.contextmanager
def running(on_closed: Optional[Callable[[], None]] = None,
            backlog: int = BACKLOG) -> Iterator[Console]:
    """``sys.stdout`` and ``sys.stderr`` written by a ``Console`` while the
    block runs; as it ends, what is queued is written (the wait Ctrl-C cuts
    short) and the streams are put back. A block already inside one uses
    that one."""
    inside = next((stream for stream in (sys.stdout, sys.stderr)
                   if isinstance(stream, ConsoleStream)), None)
    if inside is not None:
        yield inside.console
        return
    real = {"stdout": sys.stdout, "stderr": sys.stderr}
    console = Console(real, backlog, on_closed)
    sys.stdout = ConsoleStream(console, "stdout", real["stdout"])
    sys.stderr = ConsoleStream(console, "stderr", real["stderr"])
    try:
        yield console
    finally:
        try:
            while not console.drain(0.5):
                pass   # in slices: a Ctrl-C is seen between them
        finally:
            sys.stdout, sys.stderr = real["stdout"], real["stderr"]


__all__ = ["BACKLOG", "Console", "ConsoleStream", "running"]
