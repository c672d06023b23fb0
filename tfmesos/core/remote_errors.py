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
    error = as_cause_type(message, task, failure.state, failure.exit_code, text, cause) \
        if cause is not None else None
    if error is None:
        error = RemoteTaskError(message, task, failure.state, failure.exit_code, text)
    error.__cause__ = cause
    return error


# -- the error as its cause's type too -----------------------------------------
#
# As Ray's RayTaskError.as_instanceof_cause (python/ray/exceptions.py): the
# error is of a class made once per cause class, a subclass of both
# RemoteTaskError and the cause's class, so that ``except ZeroDivisionError``
# catches a remote ZeroDivisionError and ``except RemoteTaskError`` too.
# Unlike Ray's, the error is made as a copy of the cause (its args, errno,
# ...: what its class' C fields hold too), whose str() is RemoteTaskError's
# message; its args are the cause's.

_TYPED: "dict[type, Optional[type]]" = {}
# The builtin exceptions' fields kept in C (Objects/exceptions.c).
_C_FIELDS = ("errno", "strerror", "filename", "filename2", "name", "path", "msg", "lineno",
             "offset", "text", "end_lineno", "end_offset", "value", "obj")


def _typed_str(self: RemoteTaskError) -> str:
    return self.__dict__.get("_message", "")


def _typed_reduce(self: RemoteTaskError) -> tuple:
    return (_rebuild, (self.__dict__.get("_message", ""), self.task, self.state, self.exit_code,
                       self.remote_traceback, self.__dict__.get("_remote_cause")))


def _rebuild(message: str, task: Optional[str], state: Optional[str], exit_code: Optional[int],
             remote_traceback: str, cause: Optional[BaseException]) -> RemoteTaskError:
    """A pickled error again (its class is made, not importable)."""
    error = as_cause_type(message, task, state, exit_code, remote_traceback, cause) \
        if cause is not None else None
    if error is None:
        error = RemoteTaskError(message, task, state, exit_code, remote_traceback)
    error.__cause__ = cause
    return error


def typed_class(cause_type: type) -> Optional[type]:
    """``RemoteTaskError(cause_type)``, a subclass of both; None for a type
    that is not an ``Exception`` (a remote ``SystemExit`` must not end the
    caller) or that cannot be subclassed so."""
    if cause_type in _TYPED:
        return _TYPED[cause_type]
    made: Optional[type] = None
    if issubclass(cause_type, Exception) and not issubclass(cause_type, RemoteTaskError):
        name = "RemoteTaskError(%s)" % cause_type.__name__
        try:
            made = type(name, (RemoteTaskError, cause_type), {
                "__module__": RemoteTaskError.__module__, "__qualname__": name,
                "__doc__": RemoteTaskError.__doc__, "__str__": _typed_str,
                "__reduce__": _typed_reduce})
        except TypeError as exc:   # a layout conflict, a class that refuses subclasses
            logger.debug("no RemoteTaskError of %s: %s", cause_type, exc)
    _TYPED[cause_type] = made
    return made


def as_cause_type(message: str, task: Optional[str], state: Optional[str],
                  exit_code: Optional[int], remote_traceback: str, cause: BaseException
                  ) -> Optional[RemoteTaskError]:
    """The ``RemoteTaskError`` of ``cause`` that is also of ``cause``'s type
    (``typed_class``): a copy of it, its message ``message``; None when
    there cannot be one."""
    cls = typed_class(type(cause))
    if cls is None:
        return None
    # Made as unpickling made the cause (``BaseException.__reduce__``:
    # the class called with its args, then its __dict__), but for the class.
    args = cause.args
    try:
        try:
            error = cls.__new__(cls, *args)
        except TypeError:
            # MemoryError's own __new__ (its free list) refuses a subclass with
            # another base first: "MemoryError.__new__(X) is not safe".
            error = BaseException.__new__(cls, *args)
        try:
            type(cause).__init__(error, *args)   # OSError's errno, ... from its args
        except Exception:
            BaseException.__init__(error, *args)
        error.__dict__.update(vars(cause))
        for name in _C_FIELDS:   # not in its args nor __dict__ (OSError's filename, ...)
            if hasattr(cause, name):
                try:
                    setattr(error, name, getattr(cause, name))
                except (AttributeError, TypeError):
                    pass
    except Exception as exc:
        logger.debug("no RemoteTaskError of %r: %s", cause, exc)
        return None
    error.__dict__.update(_message=message, _remote_cause=cause, task=task, state=state,
                          exit_code=exit_code, remote_traceback=remote_traceback)
    return error


# A frame of code cloudpickle carried by value: it names no file (cloudpickle 3.1).
DYNAMIC_CODE = "<dynamic-code>"   # the file cloudpickle names for code it carried by value
_DYNAMIC = re.compile(r'^( *)File "%s", line (\d+), in (\S+)$' % DYNAMIC_CODE)


def _functions_in(value: object, module: Optional[str]) -> list:
    """The functions ``value`` holds that may run by value: itself, what a
    decorator wraps (``__wrapped__``, its closure's functions), and, for a
    class of ``module``, its methods (static, class, a property's too)."""
    if inspect.isfunction(value):
        found = [value]
        wrapped = getattr(value, "__wrapped__", None)
        if inspect.isfunction(wrapped):   # (a builtin one carries no code)
            found.append(wrapped)
        for cell in value.__closure__ or ():
            try:
                content = cell.cell_contents
            except ValueError:   # an empty cell
                continue
            if inspect.isfunction(content):
                found.append(content)
        return found
    if inspect.isclass(value) and getattr(value, "__module__", None) == module:
        found = []
        for member in vars(value).values():
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            parts = (member.fget, member.fset, member.fdel) if isinstance(member, property) \
                else (member,)
            found += [part for part in parts if inspect.isfunction(part)]
        return found
    return []


def local_sources(fn: object) -> Sources:
    """``{name: [(file, first line, last line)]}`` of the code that may run
    by value in the tasks: ``fn``'s (and what it wraps: a decorated
    function), the functions and the methods of the classes of its
    module's globals, and the functions defined inside them. A method or
    a decorated function's own frame named no file ("<dynamic-code>")."""
    module = getattr(fn, "__module__", None)
    functions = _functions_in(fn, module)
    for value in list((getattr(fn, "__globals__", None) or {}).values()):
        functions += _functions_in(value, module)
    codes: list[CodeType] = []
    seen: set[int] = set()
    done: set[int] = set()
    pending = []
    while functions:
        function = functions.pop()
        if id(function) in done:
            continue
        done.add(id(function))
        pending.append(function.__code__)
        functions += _functions_in(function, module)[1:]   # what it wraps
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


__all__ = ["DYNAMIC_CODE", "Sources", "remote_error", "as_cause_type", "typed_class", "local_sources",
           "readable"]
