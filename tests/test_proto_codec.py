"""The embedded master's protobuf codec (``mesos_local/api/proto.py``) and
its reader of Mesos' ``.proto`` files (``proto_parser.py``), without a
master: dicts in Mesos' JSON mapping (stout's ``JSON::Protobuf``: fields by
their .proto names, enums by name, 64-bit integers as numbers, bytes in
base64, maps as objects) to protobuf and back. test_protobuf_api checks
the same against protoc's classes and a running master.
"""

import logging

import pytest

from mesos_local.api import proto
from mesos_local.api.proto_parser import ProtoSyntaxError, build

FRAMEWORK = {
    "user": "u", "name": "n", "failover_timeout": 604800.0, "checkpoint": False,
    "capabilities": [{"type": "MULTI_ROLE"}, {"type": "GPU_RESOURCES"}],
    "roles": ["ml/team", "*"],
    "offer_filters": {"ml/team": {"min_allocatable_resources": {"quantities": [
        {"quantities": {"cpus": {"value": 0.5}, "mem": {"value": 64.0}}}]}}},
    "labels": {"labels": [{"key": "k", "value": "v"}]},
}


def roundtrip(name, document):
    return proto.decode(name, proto.encode(name, document))


def test_messages_go_through_protobuf_and_back_unchanged():
    assert roundtrip("mesos.v1.FrameworkInfo", FRAMEWORK) == FRAMEWORK
    status = {"task_id": {"value": "t"}, "state": "TASK_RUNNING", "timestamp": 1.5,
              "uuid": "MDEyMzQ1Njc4OWFiY2RlZg==", "source": "SOURCE_EXECUTOR"}
    assert roundtrip("mesos.v1.TaskStatus", status) == status
    # uint64 beyond 2**63 stays a number, as stout writes it (not a string)
    stats = {"timestamp": 2.0, "mem_limit_bytes": 2 ** 63 + 5}
    assert roundtrip("mesos.v1.ResourceStatistics", stats) == stats


def test_what_json_writes_in_other_forms_is_read_as_protobuf_would_hold_it():
    # numbers as strings (protobuf's own JSON mapping), enums by number, one
    # value for a repeated field, null for unset
    document = {"task_id": {"value": "t"}, "state": 1, "timestamp": "3",
                "message": None, "reason": "REASON_COMMAND_EXECUTOR_FAILED"}
    assert roundtrip("mesos.v1.TaskStatus", document) == {
        "task_id": {"value": "t"}, "state": "TASK_RUNNING", "timestamp": 3.0,
        "reason": "REASON_COMMAND_EXECUTOR_FAILED"}
    assert roundtrip("mesos.v1.FrameworkInfo", {"user": "u", "name": "n", "roles": "r"})[
        "roles"] == ["r"]


def test_a_key_the_schema_lacks_or_a_bad_value_is_left_out_with_a_warning(caplog):
    caplog.set_level(logging.WARNING, logger="mesos_local.api.proto")
    body = proto.encode("mesos.v1.master.Response", {
        "type": "GET_HEALTH", "get_health": {"healthy": True, "not_in_master_proto": 1}})
    assert proto.decode("mesos.v1.master.Response", body) == {
        "type": "GET_HEALTH", "get_health": {"healthy": True}}
    assert "not_in_master_proto left out of its protobuf: no such field" in caplog.text
    assert proto.decode("mesos.v1.TaskStatus", proto.encode("mesos.v1.TaskStatus", {
        "task_id": {"value": "t"}, "state": "TASK_RUNNING", "timestamp": "soon"})) == {
        "task_id": {"value": "t"}, "state": "TASK_RUNNING"}
    assert "TaskStatus.timestamp left out of its protobuf" in caplog.text


def test_reading_skips_unknown_fields_and_refuses_what_ParseFromString_refuses():
    call = proto.encode(proto.SCHEDULER_CALL, {"type": "REVIVE",
                                               "framework_id": {"value": "f"}})
    unknown = b"\xc0\x3e\x07"        # field 1000, varint 7
    assert proto.decode(proto.SCHEDULER_CALL, call + unknown) == {
        "type": "REVIVE", "framework_id": {"value": "f"}}
    with pytest.raises(proto.ProtobufDecodeError):
        proto.decode(proto.SCHEDULER_CALL, b"\xff\xff\xff")
    missing = proto.encode(proto.SCHEDULER_CALL, {"type": "ACKNOWLEDGE", "acknowledge": {
        "uuid": "YWJj"}})           # no agent_id, task_id: required
    with pytest.raises(proto.ProtobufDecodeError, match="acknowledge.agent_id"):
        proto.decode(proto.SCHEDULER_CALL, missing)


def test_a_stream_frame_is_reencoded_whole():
    encode = proto.frame_encoder(proto.MASTER_EVENT)
    frame = encode(b'20\n{"type":"HEARTBEAT"}')
    length, _, record = frame.partition(b"\n")
    assert int(length) == len(record)
    assert proto.decode(proto.MASTER_EVENT, record) == {"type": "HEARTBEAT"}


def test_the_reader_names_what_it_does_not_read():
    with pytest.raises(ProtoSyntaxError, match=r"a\.proto:1: only proto2 is read"):
        build([("a.proto", 'syntax = "proto3";')])
    with pytest.raises(ProtoSyntaxError, match=r"b\.proto: type 'Nowhere' \(in p.M\)"):
        build([("b.proto", "package p;\nmessage M { optional Nowhere x = 1; }")])
    with pytest.raises(ProtoSyntaxError, match=r"c\.proto:3: 'service' is not read"):
        build([("c.proto", "package p;\n\nservice S {}")])
    [parsed] = build([("d.proto", """package p;
        // nested scopes resolve innermost first, as protoc resolves them
        message A { message B { optional int32 v = 1 [default = -3]; } }
        message C { message A { optional string w = 1; }
                    optional A a = 1; optional .p.A.B b = 2; map<string, A.B> m = 3;
                    oneof o { string s = 4; } reserved 9 to 11; }""")])
    c = parsed.message_type[1]
    assert [f.type_name for f in c.field] == [".p.C.A", ".p.A.B", ".p.C.MEntry", ""]
    assert c.nested_type[1].name == "MEntry" and c.nested_type[1].options.map_entry
    assert parsed.message_type[0].nested_type[0].field[0].default_value == "-3"
    assert c.field[3].oneof_index == 0
