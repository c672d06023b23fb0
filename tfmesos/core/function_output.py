"""What ``tfmesos.run``'s caller sees of its tasks (``function_run``):
which tasks' output is shown (``logs=``, as tfrun's ``--logs``), their
lines prefixed ``[job:index]`` on this process' stdout or stderr, and
tfmesos' own lines, written by a console's thread (``console.Console``):
a caller whose output nobody reads (a script piped to a pager left on one
page) never holds the run up."""

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Callable, Optional, Union

from ..exceptions import SpecError
from .console import Console, CurrentStreams
from .jobs import Job

if TYPE_CHECKING:
    from .slots import TaskSlot

MAX_LINE = 64 * 1024   # characters of an unfinished output line held back


def logs_choice(logs: Union[str, Iterable[object], None], jobs: Iterable[Job]
                ) -> "Callable[[TaskSlot], bool]":
    """Which tasks' output is shown (as tfrun's ``--logs``): None, every
    worker, the chief and the evaluator; "all", "none", or a list of
    ``job`` / ``job:i,j``."""
    if logs is None:
        return lambda slot: slot.job.name in ("worker", "chief", "evaluator")
    if isinstance(logs, str):
        logs = [logs]
    elif isinstance(logs, (bytes, int, float)) or not isinstance(logs, Iterable):
        raise SpecError("logs=%r: give 'all', 'none', or a list of JOB or JOB:INDEX,... "
                        "like ['worker:0,2']" % (logs,))
    jobs = list(jobs)
    names = {job.name for job in jobs}
    indices_of = {job.name: job.task_indices() for job in jobs}
    chosen: set[tuple[str, Optional[int]]] = set()   # (job, None): all of its tasks
    for text in logs:
        text = str(text).strip()
        if text in ("all", "none"):
            chosen.update((name, None) for name in names if text == "all")
            continue
        name, _, indices = text.partition(":")
        if name not in names:
            raise SpecError("logs %r: no job %r in this run; jobs: %s (or 'all', 'none')"
                            % (text, name, ", ".join(sorted(names))))
        try:
            picked = [int(i) for i in indices.split(",")] if indices else None
        except ValueError:
            raise SpecError("logs %r: use JOB or JOB:INDEX,... like worker:0,2" % text) from None
        if picked is None:
            chosen.add((name, None))
            continue
        for index in picked:
            if index not in indices_of[name]:   # shown nothing, silently, before
                raise SpecError("logs %r: %s has no task %d (its tasks: %d to %d)" % (
                    text, name, index, indices_of[name][0], indices_of[name][-1]))
            chosen.add((name, index))
    return lambda slot: (slot.job.name, None) in chosen or slot.key in chosen


class Printer:
    """The tasks' output, each line prefixed ``[job:index] ``, and tfmesos'
    own lines (``say``), on this process' stdout or stderr as they are when
    written (a notebook's cell), through a console of its own: past its
    backlog the tasks' output is left out, said in one line; a stream
    that refuses writes (nobody reads it any more) is left alone: the run
    directory has everything. ``close`` writes what is left and waits
    until it was written (a wait Ctrl-C cuts short)."""

    def __init__(self, console: Optional[Console] = None) -> None:
        self._open: dict[tuple[str, str], str] = {}   # (task, stream) -> its unfinished line
        self._console = console or Console(CurrentStreams(), prog="tfmesos")

    def __call__(self, slot: "TaskSlot", stream: str, text: str) -> None:
        key = (slot.name, stream)
        *lines, rest = (self._open.pop(key, "") + text).split("\n")
        if len(rest) > MAX_LINE:
            lines, rest = lines + [rest], ""
        if rest:
            self._open[key] = rest
        if lines:
            self._write(stream, "".join("[%s] %s\n" % (slot.name, line) for line in lines))

    def say(self, text: str) -> None:
        """tfmesos' own line, in order with the tasks' output; never left out."""
        self._write("stderr", "tfmesos: %s\n" % text, output=False)

    def say_as(self, task_name: str, line: str) -> None:
        """A line of task ``task_name``'s, said by tfmesos (never left out)."""
        self._write("stderr", "[%s] %s\n" % (task_name, line), output=False)

    def close(self) -> None:
        for (name, stream), rest in sorted(self._open.items()):
            self._write(stream, "[%s] %s\n" % (name, rest))
        self._open.clear()
        self._console.finish()

    def _write(self, stream: str, text: str, output: bool = True) -> None:
        try:
            self._console.write(stream, text, output=output)
        except (OSError, ValueError):
            pass    # an earlier write was refused: nobody reads it any more


def say(text: str) -> None:
    try:
        print("tfmesos: %s" % text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


__all__ = ["logs_choice", "Printer", "say", "MAX_LINE"]
