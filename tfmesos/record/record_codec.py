"""``Record``, the base of run.json's classes (``schema``): each class's
dict form, out (``to_dict``) and in (``from_dict``) by its fields' types.

Reading goes through decoders made once per type (``_decoder``,
``_record_decoder``); a value they refuse is read again value by value
(``Record._checked``, ``_load``), whose ``SchemaError`` says where it is
in the file (``run.json.tasks[0].attempts[0].exit_code: expected
integer, got str``). Keys a class does not know are ignored; a key a
document lacks reads as the field's default.
"""

import dataclasses
import functools
import math
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Optional, TypeVar

from ..field_methods import FieldMethods


class SchemaError(ValueError):
    """A run.json value that does not fit its class; says where."""


# Every integer of run.json is one of int64's, what its JSON readers hold; a
# field's ``minimum`` and ``maximum`` (JSON Schema keywords in its metadata,
# ``described``) bound it further: an exit code.
INT_MIN, INT_MAX = -(2 ** 63), 2 ** 63 - 1


def int_bounds(field: "dataclasses.Field[Any]") -> tuple[int, int]:
    """The range of an integer ``field``'s values."""
    return (field.metadata.get("minimum", INT_MIN), field.metadata.get("maximum", INT_MAX))


def out_of_range(where: str, low: int, high: int, value: object) -> SchemaError:
    """The error of an integer out of its range (never said whole: it may
    have hundreds of digits)."""
    return SchemaError("%s: expected integer from %d to %d, got %s out of range"
                       % (where, low, high, json_kind(value)))


def described(doc: str, default: Any = None, factory: Optional[Callable[[], Any]] = None,
              **schema: Any) -> Any:
    """A dataclass field with its description (and extra JSON Schema
    keywords such as ``enum`` or ``const``) kept in its metadata (Any, as
    ``dataclasses.field``: the field's default stands for its type)."""
    metadata = dict(schema, description=doc)
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


# A type as a field's annotation holds it: str, Optional[Time], list[Task], a
# Record class, ... (a value of typing's, which no static type describes).
TypeForm = Any
R = TypeVar("R", bound="Record")


class Record(FieldMethods):
    """A class of run.json: ``from_dict`` and ``to_dict`` by its fields' types.
    Each is ``@dataclasses.dataclass(eq=False, repr=False)``: ``==`` and
    ``repr`` are ``FieldMethods``', the same as the decorator's, not
    compiled for each class at every start."""

    if TYPE_CHECKING:   # every Record class is a dataclass
        __dataclass_fields__: ClassVar[dict[str, "dataclasses.Field[Any]"]]

    @classmethod
    def from_dict(cls: type[R], data: object, where: Optional[str] = None) -> R:
        try:
            return _record_decoder(cls)(data)  # type: ignore[arg-type]  # (python/mypy#11470)
        except _Mismatch:   # decoded again, for the message that says where
            return cls._checked(data, where or cls.__name__)

    @classmethod
    def _checked(cls: type[R], data: object, where: str) -> R:
        """``from_dict`` value by value, each checked with where it is in
        the file; a value that does not fit is a ``SchemaError`` saying so."""
        if not isinstance(data, dict):
            raise SchemaError("%s: expected an object, got %s" % (where, json_kind(data)))
        hints = field_types(cls)  # type: ignore[arg-type]  # (a class is hashable: python/mypy#11470)
        values = {}
        for field in dataclasses.fields(cls):
            if field.name in data:
                at = "%s.%s" % (where, field.name)
                raw = data[field.name]
                low, high = int_bounds(field)
                if (low, high) != (INT_MIN, INT_MAX) and _integral(raw) \
                        and not low <= raw <= high:   # an exit code's range, said
                    raise out_of_range(at, low, high, raw)
                values[field.name] = _load(hints[field.name], raw, at)
        record = cls(**values)
        why = record.inconsistency()
        if why:
            raise SchemaError("%s: %s" % (where, why))
        return record

    def inconsistency(self) -> Optional[str]:
        """Why values each of their field's type do not go together, or None
        (a class whose fields must agree says how)."""
        return None

    def to_dict(self) -> dict[str, Any]:
        names = field_names(type(self))  # type: ignore[arg-type]  # (python/mypy#11470)
        return {name: _dump(getattr(self, name)) for name in names}


@functools.cache
def field_names(cls: type[Record]) -> tuple[str, ...]:
    """The field names of a Record class, in order (asked at every save)."""
    return tuple(field.name for field in dataclasses.fields(cls))


@functools.cache
def field_types(cls: type[Record]) -> dict[str, TypeForm]:
    """{field name: its type} of a Record class."""
    return typing.get_type_hints(cls)


JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def json_kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def optional_of(kind: TypeForm) -> Optional[TypeForm]:
    """X for Optional[X], else None."""
    if typing.get_origin(kind) is typing.Union:
        others = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        if len(others) == 1:
            return others[0]
    return None


def _load(kind: TypeForm, value: object, where: str) -> Any:
    inner = optional_of(kind)
    if inner is not None:
        return None if value is None else _load(inner, value, where)
    if typing.get_origin(kind) is list:
        if not isinstance(value, list):
            raise SchemaError("%s: expected a list, got %s" % (where, json_kind(value)))
        [item] = typing.get_args(kind)
        return [_load(item, v, "%s[%d]" % (where, i)) for i, v in enumerate(value)]
    if isinstance(kind, type) and issubclass(kind, Record):
        return kind._checked(value, where)
    kind = getattr(kind, "__supertype__", kind)   # Time is a str
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if kind is float:
            try:
                return float(value)
            except OverflowError:   # an int of hundreds of digits
                raise SchemaError("%s: expected number, got int out of range" % where) from None
        if kind is int and _integral(value):
            if not INT_MIN <= value <= INT_MAX:
                raise out_of_range(where, INT_MIN, INT_MAX, value)
            return int(value)
    if kind in (str, bool) and isinstance(value, kind):
        return value
    raise SchemaError("%s: expected %s, got %s" % (where, JSON_TYPES[kind], json_kind(value)))


def _integral(value: object) -> bool:
    """Whether a JSON number is an integer's (1, 2.0: not 2.5, inf, nan)."""
    if type(value) is int:
        return True
    return type(value) is float and math.isfinite(value) and value == int(value)


class _Mismatch(Exception):
    """A value the fast decoders do not take: ``from_dict`` decodes it again
    with ``_load``, whose ``SchemaError`` says where it is."""


# The fast decoders: what ``_load`` does, without building a where-string
# for every value or asking ``typing`` a value's type at every value, made
# once per type. ``tfmesos runs``, ``show`` and ``attach`` read every run
# record of the runs directory: 500 records took 1.5 s to decode, ~90% of
# it in ``_load``. ``test_schema`` holds them to ``_load``'s answers.

@functools.cache
def _decoder(kind: TypeForm) -> Callable[[object], Any]:
    """``_load(kind, value, ...)`` as a function of the value alone; raises
    ``_Mismatch`` where ``_load`` raises a ``SchemaError``."""
    inner = optional_of(kind)
    if inner is not None:
        decode_inner = _decoder(inner)
        return lambda value: None if value is None else decode_inner(value)
    if typing.get_origin(kind) is list:
        [item] = typing.get_args(kind)
        decode_item = _decoder(item)
        # A list of scalars that are all of their field's type as JSON gives
        # it (a metric's 500 steps and values) is taken whole.
        scalar = optional_of(item) or item
        taken = {getattr(scalar, "__supertype__", scalar)} & set(_SCALARS)
        if taken and scalar is not item:
            taken.add(type(None))

        ints = int in taken

        def decode_list(value: object) -> list[Any]:
            if not isinstance(value, list):
                raise _Mismatch
            if taken and set(map(type, value)) <= taken:
                if ints and value and not _int64s(value):
                    raise _Mismatch
                return list(value)
            return [decode_item(v) for v in value]
        return decode_list
    if isinstance(kind, type) and issubclass(kind, Record):
        return _record_decoder(kind)  # type: ignore[arg-type]  # (python/mypy#11470)
    return _SCALARS.get(getattr(kind, "__supertype__", kind), _refuse)   # Time is a str


def _int64s(values: list[Any]) -> bool:
    """Whether ``values`` (ints, and Nones where the items are optional) are
    int64's: by their min and max, not a comparison for each (a metric's 500 steps
    in one run of ten made ``tfmesos runs`` over 500 runs 3% slower)."""
    try:
        return INT_MIN <= min(values) and max(values) <= INT_MAX
    except TypeError:   # a None among them
        numbers = [v for v in values if v is not None]
        return not numbers or (INT_MIN <= min(numbers) and max(numbers) <= INT_MAX)


def _refuse(value: object) -> Any:
    raise _Mismatch


def _decode_float(value: object) -> float:
    if type(value) is float:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:   # an int of hundreds of digits
            raise _Mismatch from None
    raise _Mismatch


def _decode_int(value: object) -> int:
    if type(value) is int:
        if INT_MIN <= value <= INT_MAX:
            return value
        raise _Mismatch
    if _integral(value) and INT_MIN <= value <= INT_MAX:   # type: ignore[operator]  # a float
        return int(value)   # type: ignore[call-overload]  # (_integral: a float)
    raise _Mismatch


def _decode_str(value: object) -> str:
    if isinstance(value, str):
        return value
    raise _Mismatch


def _decode_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise _Mismatch


_SCALARS: dict[TypeForm, Callable[[object], Any]] = {
    float: _decode_float, int: _decode_int, str: _decode_str, bool: _decode_bool}


@functools.cache
def _record_decoder(cls: type[R]) -> Callable[[object], R]:
    """``cls.from_dict`` without the checks' where-strings: a dict's known
    keys decoded by their fields' decoders, the others ignored, a missing
    one left to its default."""
    hints = field_types(cls)  # type: ignore[arg-type]  # (python/mypy#11470)
    fields = tuple((field.name, _bounded(_decoder(hints[field.name]), field))
                   for field in dataclasses.fields(cls))
    checks = cls.inconsistency is not Record.inconsistency

    def decode_record(value: object) -> R:
        if not isinstance(value, dict):
            raise _Mismatch
        record = cls(**{name: decode(value[name]) for name, decode in fields if name in value})
        if checks and record.inconsistency():
            raise _Mismatch
        return record
    return decode_record


def _bounded(decode: Callable[[object], Any],
             field: "dataclasses.Field[Any]") -> Callable[[object], Any]:
    """``decode`` refusing an integer out of ``field``'s own range (its
    ``minimum``, ``maximum``); ``decode`` itself for a field without one."""
    if "minimum" not in field.metadata and "maximum" not in field.metadata:
        return decode
    low, high = int_bounds(field)

    def decode_bounded(value: object) -> Any:
        decoded = decode(value)
        if type(decoded) is int and not low <= decoded <= high:
            raise _Mismatch
        return decoded
    return decode_bounded


def _dump(value: object) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_dump(item) for item in value]
    return value
