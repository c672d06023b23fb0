"""``application/x-protobuf`` on the v1 APIs: Calls read from protobuf
into the dicts a JSON body gives, and Responses and Events (kept as
Mesos' JSON) written as protobuf, as Mesos' master and agents serve both
(src/master/http.cpp ``Master::Http::scheduler`` and ``api``;
src/slave/http.cpp ``Http::api``; src/common/http.cpp ``serialize`` and
``deserialize``).

The schemas are apache/mesos' own ``.proto`` files (``mesos_local/proto/``,
vendored), read into descriptors on the first protobuf request only
(``proto_parser.py``, then ``google.protobuf``'s ``DescriptorPool`` and
``message_factory``, in a pool of their own): nothing is paid for JSON.

The dicts are Mesos' JSON mapping (stout's ``JSON::Protobuf`` and
``protobuf::parse``, 3rdparty/stout/include/stout/protobuf.hpp): fields by
their ``.proto`` names, enums by name, 64-bit integers as JSON numbers,
bytes in base64, maps as objects. Reading protobuf, fields the schema does
not know are skipped, as Mesos' ``ParseFromString`` skips them; a body
that does not parse, or lacks a required field, is refused (what
``ParseFromString`` returns false for). Writing, ``None`` is left out, and
so (with a warning, once per field) is a key the schema does not have or a
value its field cannot hold.
"""

import base64
import binascii
import logging
import os
import threading

PROTOBUF_TYPE = "application/x-protobuf"
JSON_TYPE = "application/json"

# The messages of each API (package mesos.v1).
SCHEDULER_CALL = "mesos.v1.scheduler.Call"
SCHEDULER_EVENT = "mesos.v1.scheduler.Event"
SCHEDULER_RESPONSE = "mesos.v1.scheduler.Response"
MASTER_CALL = "mesos.v1.master.Call"
MASTER_EVENT = "mesos.v1.master.Event"
MASTER_RESPONSE = "mesos.v1.master.Response"
AGENT_CALL = "mesos.v1.agent.Call"
AGENT_RESPONSE = "mesos.v1.agent.Response"

# The vendored schemas, each after what it imports.
SCHEMA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "proto")
SCHEMA_FILES = (
    "mesos/v1/mesos.proto", "mesos/v1/allocator/allocator.proto",
    "mesos/v1/maintenance/maintenance.proto", "mesos/v1/quota/quota.proto",
    "mesos/v1/resource_provider/resource_provider.proto",
    "mesos/v1/scheduler/scheduler.proto", "mesos/v1/executor/executor.proto",
    "mesos/v1/master/master.proto", "mesos/v1/agent/agent.proto",
)

log = logging.getLogger(__name__)
_lock = threading.Lock()
_classes: dict = {}     # full name -> message class, once the pool is built
_pool = None
_reported: set = set()


class ProtobufDecodeError(ValueError):
    """A body that is not a serialized message of the expected type."""


def pool():
    """The DescriptorPool of Mesos' v1 schemas (built on the first call)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = _build_pool()
        return _pool


def _build_pool():
    from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2

    from .proto_parser import build
    sources = []
    for name in SCHEMA_FILES:
        with open(os.path.join(SCHEMA_DIR, name), encoding="utf-8") as source:
            sources.append((name, source.read()))
    duration = descriptor_pb2.FileDescriptorProto()
    duration_pb2.DESCRIPTOR.CopyToProto(duration)
    built = descriptor_pool.DescriptorPool()
    built.Add(duration)
    for proto in build(sources, known=[duration]):
        built.Add(proto)
    log.debug("read Mesos' v1 schemas from %s", SCHEMA_DIR)
    return built


def message_class(full_name):
    """The message class of ``full_name`` (``mesos.v1.scheduler.Call``)."""
    cls = _classes.get(full_name)
    if cls is None:
        from google.protobuf import message_factory
        cls = message_factory.GetMessageClass(pool().FindMessageTypeByName(full_name))
        _classes[full_name] = cls
    return cls


# -- reading: protobuf -> Mesos' JSON as dicts -------------------------------------

def decode(full_name, body):
    """A serialized ``full_name`` as the dict its JSON would be; raises
    ProtobufDecodeError where Mesos' ``ParseFromString`` fails."""
    from google.protobuf.message import DecodeError
    message = message_class(full_name)()
    try:
        message.ParseFromString(body)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ProtobufDecodeError(str(exc)) from None
    if not message.IsInitialized():
        raise ProtobufDecodeError("missing required fields: %s"
                                  % ", ".join(message.FindInitializationErrors()))
    return to_dict(message)


def to_dict(message):
    """A message as stout's ``JSON::Protobuf`` writes it (the fields set)."""
    document: dict = {}
    for field, value in message.ListFields():
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            document[field.name] = {str(key): _value(value_field, item)
                                    for key, item in value.items()}
        elif _repeated(field):
            document[field.name] = [_value(field, item) for item in value]
        else:
            document[field.name] = _value(field, value)
    return document


def _repeated(field):
    try:
        return field.is_repeated
    except AttributeError:      # protobuf before 5.29 has only label
        return field.label == field.LABEL_REPEATED


def _is_map(field):
    return (field.type == field.TYPE_MESSAGE
            and field.message_type.GetOptions().map_entry)


def _value(field, value):
    if field.type == field.TYPE_MESSAGE:
        return to_dict(value)
    if field.type == field.TYPE_ENUM:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known is not None else value
    if field.type == field.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    return value


# -- writing: Mesos' JSON as dicts -> protobuf --------------------------------------

def encode(full_name, document):
    """``document`` (a message as Mesos' JSON, parsed) serialized as ``full_name``."""
    message = message_class(full_name)()
    _fill(message, document)
    return message.SerializePartialToString()


def encode_json(full_name, body):
    """A JSON body (bytes) of ``full_name`` re-encoded as protobuf."""
    import json
    return encode(full_name, json.loads(body))


def frame_encoder(full_name):
    """A RecordIO frame of JSON (``<length>\\n<record>``) to the same
    record in protobuf: what a stream writes for a protobuf reader."""
    def reframe(data):
        record = encode_json(full_name, data[data.index(b"\n") + 1:])
        return b"%d\n%s" % (len(record), record)
    return reframe


def _fill(message, document):
    descriptor = message.DESCRIPTOR
    for name, value in document.items():
        field = descriptor.fields_by_name.get(name)
        if field is None:
            _report(descriptor.full_name, name, "no such field")
        elif value is not None:
            try:
                _fill_field(message, field, value)
            except (AttributeError, TypeError, ValueError) as exc:
                # A value the field cannot hold: left out, as a key it lacks.
                message.ClearField(name)
                _report(descriptor.full_name, name, exc)


def _fill_field(message, field, value):
    name = field.name
    if _is_map(field):
        _fill_map(getattr(message, name), field, value)
    elif _repeated(field):
        items = value if isinstance(value, list) else [value]
        target = getattr(message, name)
        for item in items:
            if item is None:
                continue
            if field.type == field.TYPE_MESSAGE:
                _fill(target.add(), item)
            else:
                converted = _scalar(field, item)
                if converted is not None:
                    target.append(converted)
    elif field.type == field.TYPE_MESSAGE:
        sub = getattr(message, name)
        sub.SetInParent()
        _fill(sub, value)
    else:
        converted = _scalar(field, value)
        if converted is not None:
            setattr(message, name, converted)


def _fill_map(target, field, value):
    key_field = field.message_type.fields_by_name["key"]
    value_field = field.message_type.fields_by_name["value"]
    for key, item in value.items():
        key = _scalar(key_field, key)
        if value_field.type == value_field.TYPE_MESSAGE:
            _fill(target[key], item)
        else:
            target[key] = _scalar(value_field, item)


def _scalar(field, value):
    kind = field.type
    if kind == field.TYPE_ENUM:
        if isinstance(value, int):
            return value
        known = field.enum_type.values_by_name.get(value)
        return known.number if known is not None else None
    if kind == field.TYPE_BYTES:
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        try:
            return base64.b64decode(value)
        except (binascii.Error, ValueError):
            return value.encode("utf-8")
    if kind == field.TYPE_STRING:
        return str(value)
    if kind == field.TYPE_BOOL:
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if kind in (field.TYPE_DOUBLE, field.TYPE_FLOAT):
        return float(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return int(float(value))
    return int(value)


def _report(message, name, problem):
    if (message, name) not in _reported:
        _reported.add((message, name))
        log.warning("%s.%s left out of its protobuf: %s", message, name, problem)


__all__ = ["PROTOBUF_TYPE", "ProtobufDecodeError", "decode", "encode", "encode_json",
           "frame_encoder", "to_dict", "message_class", "pool"]
