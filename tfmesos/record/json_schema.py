"""The JSON Schema (draft 2020-12) of run.json, made from the classes of
``schema``, committed as ``docs/run.schema.json``::

    python -m tfmesos.record.json_schema > docs/run.schema.json
"""

import dataclasses
import json
import sys
import typing
from typing import Any

from .record_codec import INT_MAX, INT_MIN, JSON_TYPES, Record, TypeForm, field_types, optional_of
from .schema import SCHEMA_DIALECT, TIME_PATTERN, RunFile, Time


def _type_schema(kind: TypeForm, defs: dict[str, Any]) -> dict[str, Any]:
    inner = optional_of(kind)
    if inner is not None:
        schema = _type_schema(inner, defs)
        if "type" in schema:
            return dict(schema, type=[schema["type"], "null"])
        return {"anyOf": [schema, {"type": "null"}]}
    if typing.get_origin(kind) is list:
        return {"type": "array", "items": _type_schema(typing.get_args(kind)[0], defs)}
    if isinstance(kind, type) and issubclass(kind, Record):
        if kind.__name__ not in defs:
            defs[kind.__name__] = _object_schema(kind, defs)
        return {"$ref": "#/$defs/%s" % kind.__name__}
    if kind is Time:
        return {"type": "string", "pattern": TIME_PATTERN}
    if kind is int:   # every integer an int64 (record_codec); a field may bound it further
        return {"type": "integer", "minimum": INT_MIN, "maximum": INT_MAX}
    return {"type": JSON_TYPES[kind]}


def _object_schema(cls: type[Record], defs: dict[str, Any]) -> dict[str, Any]:
    hints = field_types(cls)  # type: ignore[arg-type]  # (a class is hashable: python/mypy#11470)
    properties = {}
    for field in dataclasses.fields(cls):
        schema = {"description": field.metadata["description"],
                  **_type_schema(hints[field.name], defs), **field.metadata}
        if "enum" in schema and optional_of(hints[field.name]) is not None:
            schema["enum"] = schema["enum"] + [None]
        properties[field.name] = schema
    return {"type": "object", "description": " ".join((cls.__doc__ or "").split()),
            "properties": properties, "required": list(properties),
            "additionalProperties": False}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of run.json (what this version writes)."""
    defs: dict[str, Any] = {}
    root = _object_schema(RunFile, defs)
    return dict({"$schema": SCHEMA_DIALECT, "title": "tfmesos run.json"}, **root,
                **{"$defs": dict(sorted(defs.items()))})


def schema_text() -> str:
    """``docs/run.schema.json``'s text."""
    return json.dumps(json_schema(), indent=2) + "\n"


if __name__ == "__main__":
    sys.stdout.write(schema_text())
