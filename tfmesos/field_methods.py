"""``__eq__``, ``__hash__`` and ``__repr__`` for dataclasses, written once.

``@dataclasses.dataclass`` writes these methods anew for every class: it
generates each one's source and compiles it (CPython 3.11
Lib/dataclasses.py, ``_create_fn``), about 0.1-0.2 ms a method, and the
dozens of classes tfrun imports made that a good part of its start-up. A
class that inherits them from here is declared
``@dataclasses.dataclass(eq=False, repr=False)`` (and ``frozen=True`` for
``FrozenFieldMethods``) and behaves as if the decorator had written them
(``_cmp_fn``, ``_hash_fn`` and ``_repr_fn`` there): equal to an instance
of the very same class whose compared fields are equal, a hash of the
hashed fields (frozen classes; others are unhashable, as a dataclass with
``eq`` is), and ``Name(field=value, ...)`` of the fields not declared
``repr=False``, ``...`` for an instance already being shown.

This module imports nothing of tfmesos: every layer may use it.
"""

import dataclasses
import operator
import threading
from typing import Any, Callable

_Key = Callable[[Any], tuple]


def _getter(names: tuple[str, ...]) -> _Key:
    """A function from an instance to the tuple of its ``names``' values."""
    if len(names) > 1:
        return operator.attrgetter(*names)   # a tuple already
    if names:
        one = operator.attrgetter(names[0])
        return lambda self: (one(self),)
    return lambda self: ()


class _Fields:
    """What the methods read of a class' fields, found once per class."""

    def __init__(self, cls: type) -> None:
        fields = dataclasses.fields(cls)
        self.compared = _getter(tuple(f.name for f in fields if f.compare))
        self.hashed = _getter(tuple(f.name for f in fields
                                    if (f.compare if f.hash is None else f.hash)))
        self.shown = tuple(f.name for f in fields if f.repr)


_found: dict[type, _Fields] = {}


def _fields(cls: type) -> _Fields:
    found = _found.get(cls)
    if found is None:   # two threads may both find it: the same answer
        found = _found[cls] = _Fields(cls)
    return found


_showing = threading.local()   # ids of the instances this thread's repr() is in


class FieldMethods:
    """``__eq__`` and ``__repr__`` by the dataclass' fields; unhashable."""

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            key = _fields(self.__class__).compared
            result: bool = key(self) == key(other)
            return result
        return NotImplemented

    # __hash__: None, as Python makes it for a class that defines __eq__
    # alone (and as a dataclass with eq that is not frozen has it).

    def __repr__(self) -> str:
        showing = _showing.__dict__.setdefault("ids", set())
        if id(self) in showing:
            return "..."
        showing.add(id(self))
        try:
            return "%s(%s)" % (self.__class__.__qualname__, ", ".join(
                "%s=%r" % (name, getattr(self, name)) for name in _fields(self.__class__).shown))
        finally:
            showing.discard(id(self))


class FrozenFieldMethods(FieldMethods):
    """``FieldMethods`` and ``__hash__`` by the hashed fields, for frozen
    dataclasses (``eq`` and ``frozen``: the decorator's ``_hash_add``)."""

    def __hash__(self) -> int:
        return hash(_fields(self.__class__).hashed(self))
