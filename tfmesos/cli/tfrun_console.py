"""tfrun's console while a run goes (``core.console.Console``): ``running()``
puts a ``ConsoleStream`` in place of ``sys.stdout`` and ``sys.stderr``
for the run, so that everything tfrun writes, from any thread, is written
in order by the console's thread and a reader that does not read never
stops the run; as the run ends, it waits for what is queued to be written
and puts the streams back. The tasks' output goes through
``write_output``: left out when the console is far behind. ``tfrun.print_log``
turns a closed pipe into the run's stop.
"""

import contextlib
import os
import select
import sys
from collections.abc import Iterator
from typing import Any, Callable, Optional, TextIO

from ..core.console import BACKLOG, Console


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
            console.finish()
        finally:
            sys.stdout, sys.stderr = real["stdout"], real["stderr"]


def write_if_taken(stuck: Optional[str], lines: "list[tuple[str, str]]") -> None:
    """Write ``lines`` ((stream name, text), what ``Console.abandon`` left
    over) straight to ``sys.stdout``/``sys.stderr`` (the real ones), each
    only where its stream takes it at once: not into the file the writer is
    ``stuck`` in (2>&1 into one pipe), not into a pipe that is full."""
    def file_of(stream: Any) -> Optional[tuple[int, int]]:
        try:
            found = os.fstat(stream.fileno())
        except (AttributeError, OSError, ValueError):
            return None
        return found.st_dev, found.st_ino
    stuck_file = file_of(getattr(sys, stuck)) if stuck else None
    for name, text in lines:
        stream = getattr(sys, name)
        try:
            if stuck_file is not None and file_of(stream) == stuck_file:
                continue
            descriptor = stream.fileno()
            if select.select([], [descriptor], [], 0)[1]:
                os.write(descriptor, text.encode(getattr(stream, "encoding", None) or "utf-8",
                                                 "replace"))
        except (AttributeError, OSError, ValueError):
            continue


__all__ = ["ConsoleStream", "running", "write_if_taken"]
