"""What a ``tfmesos.run`` task's failure says in the calling process
(``core.function_run``): the task's exception, unpickled here when it can
be, as the ``__cause__`` of a ``RemoteTaskError`` whose message holds the
remote traceback, whose frames of code cloudpickle carried by value are
named by the caller's own files and lines (``local_sources``,
``readable``)."""

import dis
import inspect
import linecache
import logging
import pickle
import re
from collections.abc import Mapping, Sequence
from types import CodeType
from typing import TYPE_CHECKING, Optional

from ..exceptions import RemoteTaskError, TaskFailed

if TYPE_CHECKING:
    from .result_inbox import Result

logger = logging.getLogger(__name__)
# local_sources': {code name: [(file, first line, last line)]}.
Sources = dict[str, list[tuple[str, int, int]]]


def remote_error(task: str, result: "Result", failure: TaskFailed,
                 sources: Optional[Sources] = None) -> RemoteTaskError:
    """The ``RemoteTaskError`` of ``result`` (a ``result_inbox.Result`` of
    status "error": its ``error`` says what happened, "raised Type:
    message", "returned a value that ...") from ``task``, which ``failure``
    ended."""
    message = "%s %s" % (task, result.error or "raised an exception")
    text = readable(result.traceback, sources or {})
    if text:
        message += "\n\n-- the traceback in %s --\n%s" % (task, text.rstrip())
    cause: Optional[BaseException] = None
    if result.complete and result.data:
        try:
            loaded = pickle.loads(bytes(result.data))
        except Exception as exc:
            logger.debug("%s's exception does not unpickle here: %r", task, exc)
        else:
            cause = loaded if isinstance(loaded, BaseException) else None
    error = RemoteTaskError(message, task, failure.state, failure.exit_code, text)
    error.__cause__ = cause
    return error


# A frame of code cloudpickle carried by value: it names no file (cloudpickle 3.1).
_DYNAMIC = re.compile(r'^( *)File "<dynamic-code>", line (\d+), in (\S+)$')


def local_sources(fn: object) -> Sources:
    """``{name: [(file, first line, last line)]}`` of the code that may run
    by value in the tasks: ``fn``'s, the functions of its module's globals,
    and the functions defined inside them."""
    codes: list[CodeType] = []
    seen: set[int] = set()
    pending = [getattr(fn, "__code__", None)]
    pending += [getattr(value, "__code__", None)
                for value in list((getattr(fn, "__globals__", None) or {}).values())
                if inspect.isfunction(value)]
    while pending:
        code = pending.pop()
        if code is None or id(code) in seen:
            continue
        seen.add(id(code))
        codes.append(code)
        pending.extend(const for const in code.co_consts if inspect.iscode(const))
    sources: Sources = {}
    for code in codes:
        lines = [line for _, line in dis.findlinestarts(code) if line]
        if lines:
            sources.setdefault(code.co_name, []).append(
                (code.co_filename, min(code.co_firstlineno, *lines), max(lines)))
    return sources


def readable(text: str, sources: Mapping[str, Sequence[tuple[str, int, int]]]) -> str:
    """A remote traceback's frames of code carried by value, named by the
    caller's file and line, with the source line where it has it."""
    out = []
    for line in text.splitlines(keepends=True):
        found = _DYNAMIC.match(line.rstrip("\n"))
        if found:
            indent, number, name = found.group(1), int(found.group(2)), found.group(3)
            for filename, first, last in sources.get(name, ()):
                if first <= number <= last:
                    line = '%sFile "%s", line %d, in %s\n' % (indent, filename, number, name)
                    source = linecache.getline(filename, number).strip()
                    if source:
                        line += "%s  %s\n" % (indent, source)
                    break
        out.append(line)
    return "".join(out)


__all__ = ["Sources", "remote_error", "local_sources", "readable"]
