"""``application/x-protobuf`` on the local master's scheduler and operator
APIs and on its agents' v1 API, as Mesos serves both encodings
(src/master/http.cpp ``Master::Http::scheduler`` and ``api``,
src/slave/http.cpp ``Http::api``, src/common/http.cpp): each test compiles
apache/mesos' official protos (the copies in ``mesos_local/proto/``) with
protoc (grpcio-tools) into a temporary directory and drives the master with
the generated classes: Calls serialized, Responses and RecordIO streams of
Events parsed. The master's own descriptors, which it builds from the same
sources at run time without protoc, are compared to protoc's. Plain
``true``/``sleep`` tasks only.
"""

import getpass
import http.client
import importlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.parse

import pytest
import requests
from fixtures_master import clients, launch_running, make_local_master
from mesos_http_client import task_info
from waiting import wait_until

from mesos_local.api import proto

PROTOBUF = "application/x-protobuf"
PB = {"Content-Type": PROTOBUF, "Accept": PROTOBUF}
CLOSED = object()


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    """The official protos compiled by protoc: ``pb.mesos``, ``pb.scheduler``,
    ``pb.master``, ``pb.agent`` (the generated ``*_pb2`` modules)."""
    import grpc_tools
    out = tmp_path_factory.mktemp("mesos_pb2")
    includes = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    # protoc in a process of its own: its extension carries a libprotobuf of
    # its own, which crashed (SIGSEGV) in a pytest worker that had loaded
    # torch's before (CI, both xdist workers).
    compiled = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", proto.SCHEMA_DIR,
                               "-I", includes, "--python_out=%s" % out]
                              + list(proto.SCHEMA_FILES), capture_output=True, text=True,
                              timeout=120)
    assert compiled.returncode == 0, compiled.stderr
    for folder, _, _ in os.walk(out / "mesos"):   # regular packages: nothing else named mesos wins
        open(os.path.join(folder, "__init__.py"), "a").close()
    sys.path.insert(0, str(out))
    try:
        modules = {name.split("/")[-1][:-len(".proto")]: importlib.import_module(
            name[:-len(".proto")].replace("/", ".") + "_pb2") for name in proto.SCHEMA_FILES}
    finally:
        sys.path.remove(str(out))

    class Modules:
        pass
    namespace = Modules()
    namespace.__dict__.update(modules)
    return namespace


def _fields(descriptor):
    return [(f.name, f.number, f.type, f.is_repeated, f.is_required,
             f.message_type.full_name if f.message_type else None,
             f.enum_type.full_name if f.enum_type else None,
             f.has_default_value, f.default_value if f.has_default_value else None,
             f.containing_oneof.name if f.containing_oneof else None,
             f.message_type.GetOptions().map_entry if f.message_type else None)
            for f in descriptor.fields]


def _types(file_descriptor):
    """Full name -> fields (messages) or values (enums), nested ones included."""
    found = {}

    def enum(descriptor):
        found[descriptor.full_name] = [(v.name, v.number) for v in descriptor.values]

    def message(descriptor):
        found[descriptor.full_name] = _fields(descriptor)
        for nested in descriptor.nested_types:
            message(nested)
        for nested in descriptor.enum_types:
            enum(nested)
    for descriptor in file_descriptor.message_types_by_name.values():
        message(descriptor)
    for descriptor in file_descriptor.enum_types_by_name.values():
        enum(descriptor)
    return found


def test_the_runtime_descriptors_are_protocs(pb):
    pool = proto.pool()
    compared = 0
    for name in proto.SCHEMA_FILES:
        theirs = _types(getattr(pb, name.split("/")[-1][:-len(".proto")]).DESCRIPTOR)
        ours = _types(pool.FindFileByName(name))
        assert sorted(ours) == sorted(theirs), name
        for full_name, shape in theirs.items():
            assert ours[full_name] == shape, full_name
        compared += len(theirs)
    assert compared > 400


LAZY = """
import sys, urllib.request
from mesos_local import LocalMaster
master = LocalMaster(agents=[])
master.start()
try:
    def call(body, content_type):
        request = urllib.request.Request(master.url + "/api/v1", data=body,
                                         headers={"Content-Type": content_type})
        return urllib.request.urlopen(request, timeout=30).read()
    call(b'{"type": "GET_HEALTH"}', "application/json")
    print(sorted(name for name in sys.modules if name.startswith("google")))
    call(b"\\x08\\x01", "application/x-protobuf")
    print("google.protobuf" in sys.modules)
finally:
    master.stop()
"""


def test_the_schemas_are_read_on_the_first_protobuf_request_only():
    out = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "True"], out


# -- helpers ------------------------------------------------------------------------------------

def read_records(response, sink):
    """RecordIO records (docs/recordio.md) of ``response`` into ``sink``, then CLOSED."""
    buffer = b""
    try:
        while True:
            data = response.read1(65536)
            if not data:
                break
            buffer += data
            while b"\n" in buffer:
                header, _, rest = buffer.partition(b"\n")
                if len(rest) < int(header):
                    break
                sink.put(rest[:int(header)])
                buffer = rest[int(header):]
    except (OSError, http.client.HTTPException, ValueError, AttributeError):
        pass
    sink.put(CLOSED)


class ProtobufStream:
    """A SUBSCRIBE (scheduler or operator) sent and read in protobuf."""

    def __init__(self, url, path, call, event_class):
        parsed = urllib.parse.urlsplit(url)
        self.connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
        self.connection.request("POST", path, call.SerializeToString(), PB)
        self.response = self.connection.getresponse()
        self.event_class = event_class
        self.records = queue.Queue()
        if self.response.status == 200:
            threading.Thread(target=read_records, args=(self.response, self.records),
                             daemon=True).start()

    def next_event(self, kind, timeout=30):
        """The next event of ``kind`` (others are skipped), parsed and checked."""
        deadline = time.monotonic() + timeout
        while True:
            record = self.records.get(timeout=max(0.1, deadline - time.monotonic()))
            assert record is not CLOSED, "the stream ended before a %s event" % kind
            event = self.event_class.FromString(record)
            assert event.IsInitialized()
            if self.event_class.Type.Name(event.type) == kind:
                return event

    def close(self):
        self.connection.close()


@pytest.fixture
def streams():
    made = []

    def open_stream(*args):
        stream = ProtobufStream(*args)
        made.append(stream)
        return stream
    try:
        yield open_stream
    finally:
        for stream in made:
            stream.close()


def post(url, call, headers=PB):
    body = call if isinstance(call, bytes) else call.SerializeToString()
    return requests.post(url, data=body, headers=headers, timeout=10)


def as_json_too(pb_module, url, call, response_class):
    """(the Response in protobuf, the same call's JSON Response parsed into
    the generated class): the JSON fits master.proto field for field."""
    from google.protobuf import json_format
    reply = post(url, call)
    assert reply.status_code == 200, reply.text
    assert reply.headers["Content-Type"] == PROTOBUF
    message = response_class.FromString(reply.content)
    assert message.IsInitialized()
    as_json = requests.post(url, data=json.dumps(json_format.MessageToDict(
        call, preserving_proto_field_name=True)), timeout=10,
        headers={"Content-Type": "application/json"})
    assert as_json.status_code == 200, as_json.text
    return message, json_format.ParseDict(as_json.json(), response_class())


def agent_bases(master):
    return ["http://" + agent["pid"].rpartition("@")[2] for agent in master.state()["slaves"]]


# -- the scheduler API --------------------------------------------------------------------------

def test_a_scheduler_in_protobuf_runs_a_task(pb, make_local_master, streams):
    master = make_local_master()
    url = master.url + "/api/v1/scheduler"
    Call, Event = pb.scheduler.Call, pb.scheduler.Event
    subscribe = Call(type=Call.SUBSCRIBE)
    subscribe.subscribe.framework_info.user = getpass.getuser()
    subscribe.subscribe.framework_info.name = "protobuf-framework"
    stream = streams(master.url, "/api/v1/scheduler", subscribe, Event)
    assert stream.response.status == 200
    assert stream.response.getheader("Content-Type") == PROTOBUF
    stream_id = stream.response.getheader("Mesos-Stream-Id")
    subscribed = stream.next_event("SUBSCRIBED").subscribed
    assert subscribed.heartbeat_interval_seconds == 0.5
    framework_id = subscribed.framework_id
    assert master.state()["frameworks"][0]["id"] == framework_id.value
    stream.next_event("HEARTBEAT")
    offer = stream.next_event("OFFERS").offers.offers[0]
    assert offer.framework_id == framework_id and offer.resources

    headers = dict(PB, **{"Mesos-Stream-Id": stream_id})
    accept = Call(type=Call.ACCEPT, framework_id=framework_id)
    accept.accept.offer_ids.append(offer.id)
    operation = accept.accept.operations.add(type=pb.mesos.Offer.Operation.LAUNCH)
    task = operation.launch.task_infos.add(name="true", agent_id=offer.agent_id)
    task.task_id.value = "pb-task"
    task.command.value = "true"
    for name, value in (("cpus", 0.1), ("mem", 32)):
        resource = task.resources.add(name=name, type=pb.mesos.Value.SCALAR)
        resource.scalar.value = value
    accept.accept.filters.refuse_seconds = 0
    reply = post(url, accept, headers)
    assert (reply.status_code, reply.content) == (202, b"")

    states = []
    while not states or states[-1] != "TASK_FINISHED":
        status = stream.next_event("UPDATE").update.status
        assert status.task_id.value == "pb-task", status
        states.append(pb.mesos.TaskState.Name(status.state))
        assert status.uuid and status.agent_id == offer.agent_id
        ack = Call(type=Call.ACKNOWLEDGE, framework_id=framework_id)
        ack.acknowledge.agent_id.CopyFrom(status.agent_id)
        ack.acknowledge.task_id.CopyFrom(status.task_id)
        ack.acknowledge.uuid = status.uuid
        reply = post(url, ack, headers)
        assert reply.status_code == 202, reply.text
    assert states[0] in ("TASK_STARTING", "TASK_RUNNING"), states
    wait_until(lambda: not master.state()["frameworks"][0]["tasks"],
               message=lambda: "the task's last update was not acknowledged")

    # Unknown fields are skipped, as ParseFromString skips them (field 1000, a varint).
    revive = Call(type=Call.REVIVE, framework_id=framework_id).SerializeToString()
    assert post(url, revive + b"\xc0\x3e\x01", headers).status_code == 202
    # A body that is no Call, or lacks a required field, is refused in Mesos' words.
    for body in (b"\xff\xff\xff", b'{"type": "REVIVE"}', Call(
            type=Call.ACKNOWLEDGE, framework_id=framework_id,
            acknowledge=Call.Acknowledge(uuid=b"x")).SerializePartialToString()):
        reply = post(url, body, headers)
        assert (reply.status_code, reply.text) == (400, "Failed to parse body into Call protobuf")
    reply = post(url, revive, {"Content-Type": "text/plain", "Mesos-Stream-Id": stream_id})
    assert (reply.status_code, reply.text) == (
        415, "Expecting 'Content-Type' of application/json or application/x-protobuf")
    reply = post(url, subscribe, {"Content-Type": PROTOBUF, "Accept": "text/html"})
    assert (reply.status_code, reply.text) == (
        406, "Expecting 'Accept' to allow 'application/x-protobuf' or 'application/json'")

    teardown = Call(type=Call.TEARDOWN, framework_id=framework_id)
    assert post(url, teardown, headers).status_code == 202
    wait_until(lambda: not master.state()["frameworks"])


def test_a_json_subscribe_that_accepts_only_protobuf_streams_protobuf(pb, make_local_master):
    master = make_local_master()
    body = json.dumps({"type": "SUBSCRIBE", "subscribe": {"framework_info": {
        "user": getpass.getuser(), "name": "mixed"}}})
    parsed = urllib.parse.urlsplit(master.url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    try:
        connection.request("POST", "/api/v1/scheduler", body,
                           {"Content-Type": "application/json", "Accept": PROTOBUF})
        response = connection.getresponse()
        assert response.status == 200 and response.getheader("Content-Type") == PROTOBUF
        records: queue.Queue = queue.Queue()
        threading.Thread(target=read_records, args=(response, records), daemon=True).start()
        record = records.get(timeout=30)
        assert record is not CLOSED
        event = pb.scheduler.Event.FromString(record)
        assert event.type == pb.scheduler.Event.SUBSCRIBED and event.subscribed.framework_id.value
    finally:
        connection.close()


# -- the operator API ---------------------------------------------------------------------------

def test_operator_calls_and_events_in_protobuf(pb, make_local_master, clients, streams):
    master = make_local_master()
    url = master.url + "/api/v1"
    Call, Response, Event = pb.master.Call, pb.master.Response, pb.master.Event
    stream = streams(master.url, "/api/v1", Call(type=Call.SUBSCRIBE), Event)
    assert stream.response.status == 200
    assert stream.response.getheader("Content-Type") == PROTOBUF
    subscribed = stream.next_event("SUBSCRIBED").subscribed
    assert subscribed.heartbeat_interval_seconds == 0.5
    assert len(subscribed.get_state.get_agents.agents) == 1
    stream.next_event("HEARTBEAT")

    client = clients(master)
    launch_running(client, master, "sleeper", "sleep 30")
    added = stream.next_event("TASK_ADDED").task_added.task
    assert added.task_id.value == "sleeper"
    updated = stream.next_event("TASK_UPDATED").task_updated
    assert updated.status.task_id.value == "sleeper"

    for kind in ("GET_STATE", "GET_AGENTS", "GET_TASKS", "GET_FRAMEWORKS", "GET_HEALTH",
                 "GET_VERSION"):
        message, from_json = as_json_too(pb, url, Call(type=getattr(Call, kind)), Response)
        assert Response.Type.Name(message.type) == kind
        assert message == from_json, kind
    tasks = post(url, Call(type=Call.GET_TASKS))
    [task] = Response.FromString(tasks.content).get_tasks.tasks
    assert task.task_id.value == "sleeper" and task.state == pb.mesos.TASK_RUNNING
    state = Response.FromString(post(url, Call(type=Call.GET_STATE)).content).get_state
    assert state.get_tasks.tasks[0].task_id.value == "sleeper"
    assert state.get_agents.agents[0].agent_info.id == task.agent_id

    # A protobuf Call answered in JSON where the request allows it (Mesos' preference).
    reply = post(url, Call(type=Call.GET_HEALTH), {"Content-Type": PROTOBUF})
    assert reply.headers["Content-Type"] == "application/json"
    assert reply.json() == {"type": "GET_HEALTH", "get_health": {"healthy": True}}
    read = Call(type=Call.READ_FILE)
    read.read_file.path = "/nowhere"
    read.read_file.offset = 0
    assert post(url, read).status_code == 404
    assert post(url, b"\xff\xff\xff").text == "Failed to parse body into Call protobuf"
    assert post(url, b"\xff\xff\xff").status_code == 400
    reply = post(url, Call(type=Call.GET_HEALTH), {"Content-Type": "text/plain"})
    assert (reply.status_code, reply.text) == (
        415, "Expecting 'Content-Type' of application/json or application/x-protobuf")
    reply = post(url, Call(type=Call.GET_HEALTH), {"Content-Type": PROTOBUF, "Accept": "text/html"})
    assert (reply.status_code, reply.text) == (
        406, "Expecting 'Accept' to allow 'application/x-protobuf' or 'application/json'")

    client.kill("sleeper")
    while pb.mesos.TaskState.Name(stream.next_event("TASK_UPDATED").task_updated.state) \
            != "TASK_KILLED":
        pass


# -- the agents' API ----------------------------------------------------------------------------

def test_an_agent_answers_in_protobuf(pb, make_local_master, clients):
    master = make_local_master()
    client = clients(master)
    launch_running(client, master, "sleeper", "sleep 30")
    [base] = agent_bases(master)
    Call, Response = pb.agent.Call, pb.agent.Response
    for kind in ("GET_STATE", "GET_TASKS", "GET_HEALTH", "GET_CONTAINERS"):
        message, from_json = as_json_too(pb, base + "/api/v1", Call(type=getattr(Call, kind)),
                                         Response)
        assert Response.Type.Name(message.type) == kind
        for container in list(message.get_containers.containers) + list(
                from_json.get_containers.containers):
            assert container.HasField("resource_statistics")
            container.ClearField("resource_statistics")    # a sample of now: not the same
        assert message == from_json, kind
    state = Response.FromString(post(base + "/api/v1", Call(type=Call.GET_STATE)).content)
    [task] = state.get_state.get_tasks.launched_tasks
    assert task.task_id.value == "sleeper"
    reply = post(base + "/api/v1", b"\xff\xff\xff")
    assert (reply.status_code, reply.text) == (400, "Failed to parse body into a protobuf object")
    client.kill("sleeper")
    client.wait_state("sleeper", "TASK_KILLED")
