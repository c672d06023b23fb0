"""A console that never holds a run up: everything written to stdout and
stderr while a run goes, from any thread, is written in order by a thread
of its own, so that a reader that does not read (``tfrun ... | less`` left
on one page, a terminal stopped with Ctrl-S, a script of ``tfmesos.run``
piped to a pager) never stops the run: its tasks' exits and failures are
acted on, its deadlines kept, whatever the console does. tfrun puts it in
place of ``sys.stdout`` and ``sys.stderr`` (``cli/tfrun_console.py``);
``tfmesos.run`` writes the tasks' output and its own lines through one
(``function_output.Printer``).

A write queues its text; the writer thread writes it to the real stream,
in the order written. What waits is bounded: past ``BACKLOG`` bytes not
yet written, the tasks' output (``output=True``) is left out, counted,
and once the console caught up one line says how much (every byte of it
is in the run directory: ``tfmesos logs``); the launcher's own lines are
never left out.

Where the writer thread cannot start (no thread to be had: the process
limit, ``ulimit -u``, reached), the writing thread writes what is queued
itself: the console then waits for its reader as a plain stream does, but
never for a writer that does not exist.

A write the real stream refuses (a closed pipe, a full disk) is raised
by the next write to that stream, from whichever thread writes it; a
closed pipe under the tasks' output also calls ``on_closed`` at once
(tfrun stops the run: its reader went away).
"""

import collections
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Callable, Optional, TextIO

BACKLOG = 16 << 20     # bytes queued at most before the tasks' output is left out


class Console:
    """The writer of ``streams`` (name -> the real stream, looked up at
    each write: ``sys.stdout`` as it is then, a notebook's cell), one
    thread; ``prog`` begins its own line (tfrun, tfmesos)."""

    def __init__(self, streams: "Mapping[str, TextIO]", backlog: int = BACKLOG,
                 on_closed: Optional[Callable[[], None]] = None, prog: str = "tfrun") -> None:
        self._streams = streams
        self._prog = prog
        self._backlog = backlog
        self._on_closed = on_closed
        self.closed = False        # a closed pipe refused the tasks' output
        self._cond = threading.Condition()
        self._queue: collections.deque = collections.deque()   # (name, text, output)
        self._queued = 0           # bytes in the queue
        self._busy = False         # the writer holds an item it took
        self._writing: Optional[str] = None   # the stream of that item
        self._left_out = 0         # the tasks' output bytes not written, not yet said
        self._errors: dict[str, BaseException] = {}   # stream -> what writing it raised
        self._thread: Optional[threading.Thread] = None
        self._closing = False      # close(): the writer ends once the queue is empty
        self.abandoned = False     # abandon(): nothing waited for, nothing queued any more

    def write(self, name: str, text: str, output: bool = False) -> None:
        """Queue ``text`` for the stream ``name``; ``output``: the tasks'
        output, left out past the backlog. Raises what the last write of
        that stream raised."""
        with self._cond:
            if self.abandoned:
                return
            error = self._errors.pop(name, None)
            if error is not None:
                raise error
            if output and self._queued >= self._backlog:
                self._left_out += len(text)
                return
            self._queue.append((name, text, output))
            self._queued += len(text)
            direct = False
            if self._thread is None or not self._thread.is_alive():
                self._closing = False
                thread = threading.Thread(target=self._write_all,
                                          name="%s-console" % self._prog, daemon=True)
                try:
                    thread.start()
                except RuntimeError:
                    # No thread to be had ("can't start new thread": the
                    # process limit, ulimit -u, reached): written here, by
                    # the writing thread, rather than queued for a writer
                    # that never comes (a drain would wait forever).
                    self._thread = None
                    direct = True
                else:
                    self._thread = thread
            self._cond.notify_all()
        if direct:
            self._write_queued()

    def drain(self, timeout: Optional[float] = None) -> bool:
        """Wait until everything queued was written (a wait Ctrl-C can
        cut short); False when ``timeout`` passed first."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self.abandoned or (not self._queue and not self._busy), timeout)

    def abandon(self) -> "tuple[Optional[str], list[tuple[str, str]]]":
        """Wait for the reader no more (the process is leaving: a run ended
        by a signal whose sender waits for its end): what is queued is left
        out, and the write under way is not waited for; writes from now on
        are left out too. Returns the stream that write is stuck in (None:
        none) and the launcher's own lines queued for the other streams
        (name, text), in order: the caller may write them where they are
        taken at once."""
        with self._cond:
            stuck = self._writing if self._busy else None
            lines = [(name, text) for name, text, output in self._queue
                     if not output and name != stuck]
            self._queued -= sum(len(text) for _, text, _ in self._queue)
            self._queue.clear()
            self.abandoned = True
            self._cond.notify_all()
        return stuck, lines

    def finish(self) -> None:
        """Wait until everything queued was written (in slices: a Ctrl-C
        is seen between them), then let the writer thread end."""
        try:
            while not self.drain(0.5):
                pass
        finally:
            self.close()

    def take_errors(self) -> "dict[str, BaseException]":
        """What writing each stream raised that no write raised yet (a
        stream whose last write failed), forgotten here."""
        with self._cond:
            errors, self._errors = self._errors, {}
        return errors

    def close(self) -> None:
        """The writer thread ends once everything queued is written (a
        later write starts another)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def _write_all(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closing)
                if not self._queue:
                    self._thread = None
                    return
                name, text, output = self._queue.popleft()
                self._busy, self._writing = True, name
            self._write_taken(name, text, output)

    def _write_queued(self) -> None:
        """Write what is queued in the calling thread (no writer thread
        could start), unless another writer holds an item (it writes the
        rest): the queue is empty, or that writer's, on return."""
        while True:
            with self._cond:
                if not self._queue or self._busy:
                    return
                name, text, output = self._queue.popleft()
                self._busy, self._writing = True, name
            self._write_taken(name, text, output)

    def _write_taken(self, name: str, text: str, output: bool) -> None:
        """Write the item a writer took (``_busy``), and account for it."""
        try:
            _write(self._streams[name], text)
            error = None
        except (OSError, ValueError) as exc:
            error = exc
        closed = output and isinstance(error, BrokenPipeError) and not self.closed
        with self._cond:
            self._queued -= len(text)
            self._busy, self._writing = False, None
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
        return ("%s: warning: the tasks' output came faster than this console was read: "
                "%d bytes of it are not shown here (tfmesos logs shows all of it)\n"
                % (self._prog, self._left_out))


class CurrentStreams(Mapping[str, TextIO]):
    """``sys.stdout`` and ``sys.stderr`` as they are at each write (a
    notebook puts its cell's in place as each cell runs)."""

    def __getitem__(self, name: str) -> TextIO:
        if name not in ("stdout", "stderr"):
            raise KeyError(name)
        stream: TextIO = getattr(sys, name)
        return stream

    def __iter__(self) -> Iterator[str]:
        return iter(("stdout", "stderr"))

    def __len__(self) -> int:
        return 2


def _write(stream: TextIO, text: str) -> None:
    try:
        stream.write(text)
    except UnicodeEncodeError:   # a stream that is not UTF-8 and not backslashreplace'd
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()


__all__ = ["BACKLOG", "Console", "CurrentStreams"]
