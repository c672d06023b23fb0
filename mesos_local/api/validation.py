"""Checking scheduler calls against the Mesos v1 messages (``messages.py``).

Real Mesos converts a JSON body into protobuf and silently drops fields it
does not know, so a misspelt or v0 field name simply does nothing there. The
local master is the one place such mistakes can show, so it checks every call
against the table of ``messages.py`` and rejects unknown fields, wrong JSON
types, bad enum names and missing required fields, naming the field:
``Call.accept.operations[0].launch.task_infos[0].resurces: unknown field``.
Then ``check_call`` applies Mesos' own call validation.
"""

import base64
import binascii
import math
import re
from typing import NoReturn, Optional

from .messages import ENUMS, MESSAGES

__all__ = ["SchemaError", "CallValidationError", "validate", "validate_message",
           "check_call", "fields_of", "MESSAGES", "ENUMS"]


class SchemaError(ValueError):
    """The JSON does not match the protobuf message (field named in the text)."""


class CallValidationError(ValueError):
    """A well-formed Call that Mesos' call validation would refuse."""


_INT_RANGES = {
    "int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1),
    "uint32": (0, 2 ** 32 - 1), "uint64": (0, 2 ** 64 - 1),
}
_NUMERIC_STRING = re.compile(r"^-?(\d+)(\.\d*)?([eE][-+]?\d+)?\Z")


class _Field:
    __slots__ = ("kind", "ref", "repeated", "required")
    kind: str               # enum, map, int, string, bool, bytes, double, any, message
    ref: Optional[str]      # the enum, map value, int type or message it names
    repeated: bool
    required: bool

    def __init__(self, spec: str) -> None:
        self.required = spec.endswith("!")
        spec = spec.rstrip("!")
        self.repeated = spec.startswith("[")
        spec = spec.strip("[]")
        if spec.startswith("enum:"):
            self.kind, self.ref = "enum", spec[5:]
        elif spec.startswith("map:"):
            self.kind, self.ref = "map", spec[4:]
        elif spec in _INT_RANGES:
            self.kind, self.ref = "int", spec
        elif spec in ("string", "bool", "bytes", "double", "any"):
            self.kind, self.ref = spec, None
        else:
            self.kind, self.ref = "message", spec


def _compile() -> dict[str, dict[str, _Field]]:
    table: dict[str, dict[str, _Field]] = {}
    for name, fields in MESSAGES.items():
        table[name] = {field: _Field(spec) for field, spec in fields.items()}
    for name, compiled in table.items():  # the table must be closed
        for field in compiled.values():
            target = ENUMS if field.kind == "enum" else MESSAGES
            if field.kind in ("enum", "message") and field.ref not in target:
                raise AssertionError("schema: %s refers to unknown %s" % (name, field.ref))
            if field.kind == "map" and field.ref not in MESSAGES and field.ref != "string":
                raise AssertionError("schema: %s map of unknown %s" % (name, field.ref))
    return table


_TABLE = _compile()


def fields_of(name):
    """``{field name: _Field}`` of message ``name`` (``kind``, ``ref``,
    ``repeated``, ``required``), for the tolerant parser (``stout.py``)."""
    return _TABLE[name]


def _kind_of(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _fail(path: str, message: str) -> NoReturn:
    raise SchemaError("%s: %s" % (path, message))


def _check_scalar(field, value, path):
    kind = field.kind
    if kind == "string":
        if not isinstance(value, str):
            _fail(path, "expected a string, got %s" % _kind_of(value))
    elif kind == "bool":
        if not isinstance(value, bool):
            _fail(path, "expected a boolean (true/false), got %s" % _kind_of(value))
    elif kind == "int":
        low, high = _INT_RANGES[field.ref]
        number = value
        if isinstance(value, str) and _NUMERIC_STRING.match(value.strip()):
            number = float(value) if any(c in value for c in ".eE") else int(value)
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            _fail(path, "expected an integer (%s), got %s" % (field.ref, _kind_of(value)))
        if isinstance(number, float):
            if not math.isfinite(number) or number != int(number):
                _fail(path, "expected an integer (%s), got %r" % (field.ref, value))
            number = int(number)
        if not low <= number <= high:
            _fail(path, "%r is out of range for %s" % (value, field.ref))
    elif kind == "double":
        number = value
        if isinstance(value, str) and _NUMERIC_STRING.match(value.strip()):
            number = float(value)
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            _fail(path, "expected a number, got %s" % _kind_of(value))
        if not math.isfinite(float(number)):
            _fail(path, "expected a finite number, got %r" % (value,))
    elif kind == "bytes":
        if not isinstance(value, str):
            _fail(path, "expected a base64 string, got %s" % _kind_of(value))
        try:
            base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            # Not echoed: a bytes field may hold a secret (Secret.Value.data).
            _fail(path, "expected a base64 string, got %d characters that are not one"
                  % len(value))
    elif kind == "enum":
        allowed = ENUMS[field.ref]
        if not isinstance(value, str):
            _fail(path, "expected an enum name of %s (a string), got %s"
                  % (field.ref, _kind_of(value)))
        if value not in allowed:
            _fail(path, "%r is not a value of %s (one of %s)"
                  % (value, field.ref, ", ".join(allowed)))
    elif kind == "any":
        if not isinstance(value, dict):
            _fail(path, "expected an object, got %s" % _kind_of(value))


def _check_value(field, value, path):
    if value is None:
        _fail(path, "null is not allowed (leave the field out instead)")
    if field.kind == "message":
        _check_message(field.ref, value, path)
    elif field.kind == "map":
        if not isinstance(value, dict):
            _fail(path, "expected an object (a protobuf map), got %s" % _kind_of(value))
        for key, item in value.items():
            sub = "%s[%r]" % (path, key)
            if item is None:
                _fail(sub, "null is not allowed")
            if field.ref == "string":
                if not isinstance(item, str):
                    _fail(sub, "expected a string, got %s" % _kind_of(item))
            else:
                _check_message(field.ref, item, sub)
    else:
        _check_scalar(field, value, path)


def _check_message(name, value, path):
    if not isinstance(value, dict):
        _fail(path, "expected an object (%s), got %s" % (name, _kind_of(value)))
    fields = _TABLE[name]
    for key, item in value.items():
        field = fields.get(key)
        sub = "%s.%s" % (path, key)
        if field is None:
            _fail(sub, "unknown field (%s has no field %r)" % (name, key))
        if field.repeated:
            if not isinstance(item, list):
                _fail(sub, "expected an array (repeated field), got %s" % _kind_of(item))
            for index, element in enumerate(item):
                _check_value(field, element, "%s[%d]" % (sub, index))
        else:
            _check_value(field, item, sub)
    for key, field in fields.items():
        if field.required and key not in value:
            _fail("%s.%s" % (path, key), "required field missing")


def validate_message(name, value, path=None):
    """Check ``value`` (parsed JSON) against message ``name``; raise SchemaError."""
    if name not in _TABLE:
        raise KeyError("no message %r in the schema" % name)
    _check_message(name, value, path or name)


def decode_uuid(text):
    """The 16 bytes of a base64 ``uuid``; CallValidationError otherwise."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError, AttributeError):
        raise CallValidationError("'uuid' is not valid base64") from None
    if len(raw) != 16:
        raise CallValidationError("Invalid UUID: 'uuid' must be 16 bytes, got %d" % len(raw))
    if not 1 <= raw[6] >> 4 <= 5:
        # stout's UUID::fromBytes: boost's version() must be 1-5
        # (3rdparty/stout/include/stout/uuid.hpp:49-65)
        raise CallValidationError("Not a valid UUID")
    return raw


_SUBMESSAGE = {
    "ACCEPT": "accept", "DECLINE": "decline", "ACCEPT_INVERSE_OFFERS": "accept_inverse_offers",
    "DECLINE_INVERSE_OFFERS": "decline_inverse_offers", "KILL": "kill",
    "SHUTDOWN": "shutdown", "ACKNOWLEDGE": "acknowledge",
    "ACKNOWLEDGE_OPERATION_STATUS": "acknowledge_operation_status",
    "RECONCILE": "reconcile", "RECONCILE_OPERATIONS": "reconcile_operations",
    "MESSAGE": "message", "REQUEST": "request", "UPDATE_FRAMEWORK": "update_framework",
}


def check_call(call):
    """Mesos' own call validation (``master/validation.cpp``) on a schema-valid
    Call: the type and its sub-message present, ``framework_id`` on every call
    but SUBSCRIBE and matching ``framework_info.id`` there and in
    UPDATE_FRAMEWORK, a 16 byte uuid in ACKNOWLEDGE. Raises CallValidationError."""
    kind = call.get("type")
    if kind is None:
        raise CallValidationError("Expecting 'type' to be present")
    if kind == "SUBSCRIBE":
        if "subscribe" not in call:
            raise CallValidationError("Expecting 'subscribe' to be present")
        info_id = call["subscribe"]["framework_info"].get("id")
        if info_id != call.get("framework_id"):
            raise CallValidationError(
                "'framework_id' differs from 'subscribe.framework_info.id'")
        return
    if "framework_id" not in call:
        raise CallValidationError("Expecting 'framework_id' to be present")
    sub = _SUBMESSAGE.get(kind)
    if sub is not None and sub not in call:
        raise CallValidationError("Expecting '%s' to be present" % sub)
    if kind == "UPDATE_FRAMEWORK" \
            and call["framework_id"] != call["update_framework"]["framework_info"].get("id"):
        raise CallValidationError(
            "'framework_id' differs from 'update_framework.framework_info.id'")
    if kind == "ACKNOWLEDGE":
        decode_uuid(call["acknowledge"]["uuid"])
    if kind == "ACKNOWLEDGE_OPERATION_STATUS":
        decode_uuid(call["acknowledge_operation_status"]["uuid"])
        if "agent_id" not in call["acknowledge_operation_status"]:
            # src/master/validation.cpp (scheduler::call::validate): an
            # operation of the master alone is never acknowledged.
            raise CallValidationError("Expecting 'agent_id' to be present")


def validate(call):
    """Check a scheduler Call (parsed JSON): structure, then Mesos' rules.

    Raises SchemaError (a field is unknown, of the wrong type, or missing) or
    CallValidationError (well-formed but refused); both are ValueErrors whose
    text names the field.
    """
    validate_message("Call", call)
    check_call(call)
