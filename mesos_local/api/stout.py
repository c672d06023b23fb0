"""Reading a Call as real Mesos reads it: the local master's default.

Mesos turns a JSON body into protobuf with stout's parser
(3rdparty/stout/include/stout/protobuf.hpp, ``protobuf::parse``), which is
lenient in ways other clients rely on (avmesos adds a v0 ``slave_id`` to
every TaskInfo, for one):

* a field the message does not have is skipped;
* ``null`` leaves the field unset, also inside arrays;
* a string is parsed as JSON for a number or boolean field (``"true"``,
  ``"5"``; ``"Infinity"`` for doubles; numbers as strings are what
  protobuf's JSON mapping writes, so only booleans count as a deviation);
* an unknown name of an optional enum is dropped (the field stays unset);
  of a required one it is an error;
* one value where an array is expected counts as a one-element array;
* a number for an integer field is converted as C++ does (truncated);
* required fields are checked last, on what is left (``IsInitialized``).

Anything else (an object for a string, a number for a string or enum, an
array for a singular field, bad base64) is an error, as in stout.

``parse`` returns the Call as Mesos would hold it, in the same JSON shape
the strict validator (``schema.py``) accepts, and every tolerated
``Deviation``; ``DeviationLog`` logs each kind of deviation once per
framework at WARNING, saying what real Mesos does with it.
``LocalMaster(strict=True)`` / ``--strict`` skips all this and refuses
such calls with 400 instead (``schema.validate_message``).
"""

import base64
import binascii
import collections
import json
import logging
import math
import os
import re
import sys
import threading
from typing import Any

from .messages import ENUMS
from .validation import SchemaError, fields_of

log = logging.getLogger(__name__)

Deviation = collections.namedtuple("Deviation", "path problem mesos")
STRICT_ENV = "MESOS_LOCAL_STRICT"


def strict_default():
    """``LocalMaster(strict=None)``: strict when $MESOS_LOCAL_STRICT is
    1/true/yes/on (tfmesos' test suite sets it), else tolerant like Mesos."""
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")

_UNSET = object()
_INT_RANGES = {
    "int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1),
    "uint32": (0, 2 ** 32 - 1), "uint64": (0, 2 ** 64 - 1),
}
_JSON_KIND = {bool: "boolean", str: "string", list: "array", dict: "object",
              int: "number", float: "number"}


def _json_kind(value):
    return _JSON_KIND.get(type(value), type(value).__name__)


def _error(path, text):
    raise SchemaError("%s: %s" % (path, text))


def _not_expecting(path, value, name):
    # stout's own words: "Not expecting a JSON number for field 'name'".
    _error(path, "Not expecting a JSON %s for field '%s'" % (_json_kind(value), name))


def parse(name, value, path=None):
    """``(the message as Mesos holds it, [Deviation])``; SchemaError where
    Mesos would answer 400 too."""
    deviations: list[Deviation] = []
    path = path or name
    if not isinstance(value, dict):
        _error(path, "Expecting a JSON object")
    return _message(name, value, path, deviations), deviations


def _message(name, value, path, deviations):
    fields = fields_of(name)
    out = {}
    for key, item in value.items():
        sub = "%s.%s" % (path, key)
        field = fields.get(key)
        if field is None:
            deviations.append(Deviation(sub, "unknown field (%s has no field %r)" % (name, key),
                                        "skips it"))
            continue
        parsed = _field(field, key, item, sub, deviations)
        if parsed is not _UNSET:
            out[key] = parsed
    for key, field in fields.items():
        if field.required and key not in out:
            _error("%s.%s" % (path, key), "Missing required field")
    return out


def _field(field, name, item, path, deviations):
    if item is None:
        deviations.append(Deviation(path, "null", "leaves the field unset"))
        return _UNSET
    if not field.repeated:
        if isinstance(item, list):
            _not_expecting(path, item, name)
        return _single(field, name, item, path, deviations)
    if not isinstance(item, list):
        deviations.append(Deviation(path, "a single %s for a repeated field" % _json_kind(item),
                                    "takes it as a one-element array"))
        item = [item]
    values: list[Any] = []
    _elements(field, name, item, path, deviations, values)
    # An empty repeated field is an unset one in protobuf.
    return values if values else _UNSET


def _elements(field, name, items, path, deviations, values):
    for index, element in enumerate(items):
        sub = "%s[%d]" % (path, index)
        if element is None:
            deviations.append(Deviation(sub, "null in an array", "skips the element"))
        elif isinstance(element, list):   # stout applies an inner array element-wise
            deviations.append(Deviation(sub, "a nested array", "flattens it"))
            _elements(field, name, element, sub, deviations, values)
        else:
            parsed = _single(field, name, element, sub, deviations)
            if parsed is not _UNSET:
                values.append(parsed)


def _single(field, name, item, path, deviations):
    kind = field.kind
    if kind == "message":
        if not isinstance(item, dict):
            _not_expecting(path, item, name)
        return _message(field.ref, item, path, deviations)
    if kind == "map":
        return _map(field, name, item, path, deviations)
    if kind == "any":
        if not isinstance(item, dict):
            _not_expecting(path, item, name)
        return item
    if kind == "string":
        if not isinstance(item, str):
            _not_expecting(path, item, name)
        return item
    if kind == "bytes":
        if not isinstance(item, str):
            _not_expecting(path, item, name)
        try:
            base64.b64decode(item.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            _error(path, "Failed to base64 decode bytes field '%s'" % name)
        return item
    if kind == "enum":
        return _enum(field, name, item, path, deviations)
    if kind == "bool":
        return _bool(name, item, path, deviations)
    return _number(field, name, item, path, deviations)


def _map(field, name, item, path, deviations):
    if not isinstance(item, dict):
        _not_expecting(path, item, name)
    out = {}
    for key, value in item.items():
        sub = "%s[%r]" % (path, key)
        if value is None:
            deviations.append(Deviation(sub, "null map value", "keeps the key with an "
                                                              "empty value"))
            out[key] = "" if field.ref == "string" else {}
        elif field.ref == "string":
            if not isinstance(value, str):
                _not_expecting(sub, value, "value")
            out[key] = value
        else:
            if not isinstance(value, dict):
                _not_expecting(sub, value, "value")
            out[key] = _message(field.ref, value, sub, deviations)
    return out


def _enum(field, name, item, path, deviations):
    if not isinstance(item, str):
        _not_expecting(path, item, name)
    if item in ENUMS[field.ref]:
        return item
    if field.required:
        _error(path, "Failed to find enum for '%s'" % item)
    # proto2's rule, which stout follows for optional enums.
    deviations.append(Deviation(path, "%r is not a value of %s" % (item, field.ref),
                                "drops it (the field stays unset)"))
    return _UNSET


def _from_string(item, path, name, what, deviations):
    """A JSON value parsed from a string, as stout does for numbers and booleans."""
    text = item.strip()
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):   # RecursionError: "[[[...": no number either
        value = None
    if what == "a number" and text in ("Infinity", "-Infinity"):
        value = float(text)
    ok = isinstance(value, bool) if what == "a boolean" else (
        isinstance(value, (int, float)) and not isinstance(value, bool))
    if not ok:
        _error(path, "Failed to parse %r as a JSON %s for field '%s'"
               % (item, what.split()[-1], name))
    if what == "a boolean":   # numbers as strings are protobuf's own JSON mapping
        deviations.append(Deviation(path, "the string %r for %s field" % (item, what),
                                    "parses it as JSON"))
    return value


def _bool(name, item, path, deviations):
    if isinstance(item, bool):
        return item
    if isinstance(item, str):
        return _from_string(item, path, name, "a boolean", deviations)
    _not_expecting(path, item, name)


def _number(field, name, item, path, deviations):
    if isinstance(item, str):
        item = _from_string(item, path, name, "a number", deviations)
    elif isinstance(item, bool) or not isinstance(item, (int, float)):
        _not_expecting(path, item, name)
    if field.kind == "double":
        if math.isinf(item):    # kept finite so that it can be written back as JSON
            return math.copysign(sys.float_info.max, item)
        return float(item)
    if isinstance(item, float):
        if not math.isfinite(item):
            _error(path, "%r is out of range for %s" % (item, field.ref))
        if item != int(item):
            deviations.append(Deviation(path, "%r for an integer field" % item,
                                        "truncates it"))
        item = int(item)
    low, high = _INT_RANGES[field.ref]
    if not low <= item <= high:
        _error(path, "%r is out of range for %s" % (item, field.ref))
    return item


class DeviationLog:
    """Logs each tolerated deviation once per framework (WARNING), keyed by
    its path without array indices: one line for ``slave_id`` in all of a
    framework's TaskInfos, not one per task."""

    MAX_KEYS = 10000

    def __init__(self):
        self._lock = threading.Lock()
        self._seen = set()

    def report(self, call, deviations, source=None):
        """Log ``deviations`` of ``call``, once per kind and per framework
        (``source``: who sent it, when not a framework)."""
        if not deviations:
            return
        framework = source or _framework_of(call)
        for deviation in deviations:
            key = (framework, re.sub(r"\[[^\]]*\]", "[]", deviation.path), deviation.mesos)
            with self._lock:
                if key in self._seen or len(self._seen) >= self.MAX_KEYS:
                    continue
                self._seen.add(key)
            log.warning("%s: %s: %s; real Mesos %s, and so does this master (said once per "
                        "framework; --strict refuses such calls)",
                        framework, deviation.path, deviation.problem, deviation.mesos)


def _framework_of(call):
    framework_id = call.get("framework_id")
    if isinstance(framework_id, dict) and isinstance(framework_id.get("value"), str):
        return "framework %s" % framework_id["value"]
    info = call.get("subscribe", {}).get("framework_info", {}) \
        if isinstance(call.get("subscribe"), dict) else {}
    name = info.get("name") if isinstance(info, dict) else None
    return "new framework %r" % (name if isinstance(name, str) else "?")


__all__ = ["parse", "Deviation", "DeviationLog", "strict_default", "STRICT_ENV"]
