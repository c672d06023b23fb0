"""Unit tests of the local master's pure parts: the Call schema, Mesos' call
validation, resource arithmetic, AgentSpec and TaskInfo planning."""

import base64
import copy

import pytest
from schema_calls import UUID, accept_call, full_task, subscribe_call

from mesos_local import AgentSpec, AgentSpecError
from mesos_local.api import validation as schema
from mesos_local.containerizer.executor import describe_exit
from mesos_local.containerizer.planning import (
    TaskInvalid,
    build_launch,
    check_id,
    gpu_count,
    plan_task,
)
from mesos_local.resources import ResourceError, Resources
from mesos_local.resources import parse as parse_resources


def error_of(call):
    with pytest.raises(ValueError) as info:
        schema.validate(call)
    return str(info.value)


# --- structure -------------------------------------------------------------------

def test_valid_calls_pass():
    schema.validate(subscribe_call(
        roles=["tf", "*"], capabilities=[{"type": "MULTI_ROLE"}, {"type": "GPU_RESOURCES"}],
        failover_timeout=3600, hostname="h", checkpoint=True,
        offer_filters={"tf": {"min_allocatable_resources": {"quantities": [
            {"quantities": {"cpus": {"value": 1}}}]}}}))
    schema.validate(accept_call(full_task()))
    docker_task = full_task()
    docker_task["container"] = {"type": "DOCKER", "docker": {
        "image": "img", "network": "HOST", "force_pull_image": True, "privileged": False,
        "parameters": [{"key": "shm-size", "value": "1g"}]}}
    schema.validate(accept_call(docker_task))
    for call in (
            {"type": "DECLINE", "framework_id": {"value": "F"},
             "decline": {"offer_ids": [{"value": "O"}], "filters": {"refuse_seconds": 5.0}}},
            {"type": "REVIVE", "framework_id": {"value": "F"}},
            {"type": "SUPPRESS", "framework_id": {"value": "F"}, "suppress": {"roles": ["r"]}},
            {"type": "KILL", "framework_id": {"value": "F"}, "kill": {
                "task_id": {"value": "t"}, "kill_policy": {"grace_period": {"nanoseconds": 5}}}},
            {"type": "ACKNOWLEDGE", "framework_id": {"value": "F"}, "acknowledge": {
                "agent_id": {"value": "S"}, "task_id": {"value": "t"}, "uuid": UUID}},
            {"type": "RECONCILE", "framework_id": {"value": "F"}, "reconcile": {"tasks": [
                {"task_id": {"value": "t"}, "agent_id": {"value": "S"}}]}},
            {"type": "TEARDOWN", "framework_id": {"value": "F"}},
            {"type": "MESSAGE", "framework_id": {"value": "F"}, "message": {
                "agent_id": {"value": "S"}, "executor_id": {"value": "E"}, "data": ""}}):
        schema.validate(call)


@pytest.mark.parametrize("mutate, path, text", [
    (lambda t: t.__setitem__("resurces", []),
     "Call.accept.operations[0].launch.task_infos[0].resurces", "unknown field"),
    (lambda t: t["resources"][0].__setitem__("slave_id", {"value": "S0"}),
     "task_infos[0].resources[0].slave_id", "unknown field"),
    (lambda t: t["command"].__setitem__("shell", "true"),
     "task_infos[0].command.shell", "expected a boolean"),
    (lambda t: t["resources"][1]["scalar"].__setitem__("value", True),
     "resources[1].scalar.value", "expected a number, got a boolean"),
    (lambda t: t.__setitem__("name", 7), "task_infos[0].name", "expected a string"),
    (lambda t: t["container"].__setitem__("type", "RKT"),
     "task_infos[0].container.type", "'RKT' is not a value of ContainerInfo.Type"),
    (lambda t: t.__setitem__("resources", {"name": "cpus"}),
     "task_infos[0].resources", "expected an array"),
    (lambda t: t.__setitem__("command", [{"value": "x"}]),
     "task_infos[0].command", "expected an object"),
    (lambda t: t["resources"][2]["ranges"]["range"][0].__setitem__("begin", -1),
     "range[0].begin", "out of range for uint64"),
    (lambda t: t["resources"][2]["ranges"]["range"][0].__setitem__("begin", 31000.5),
     "range[0].begin", "expected an integer"),
    (lambda t: t.__setitem__("data", "not base64!"), "task_infos[0].data", "base64"),
    (lambda t: t.__delitem__("agent_id"), "task_infos[0].agent_id", "required field missing"),
    (lambda t: t["command"].__setitem__("user", None),
     "task_infos[0].command.user", "null is not allowed"),
    (lambda t: t["limits"].__setitem__("mem", 5), "task_infos[0].limits['mem']",
     "expected an object"),
    (lambda t: t["container"]["mesos"]["image"]["docker"].__setitem__("image", "x"),
     "image.docker.image", "unknown field"),
])
def test_schema_errors_name_the_field(mutate, path, text):
    task = full_task()
    mutate(task)
    message = error_of(accept_call(task))
    assert path in message and text in message, message


def test_numbers_as_protobuf_json_allows():
    task = full_task()
    task["resources"][2]["ranges"]["range"][0]["begin"] = "31000"     # numeric string
    task["resources"][2]["ranges"]["range"][0]["end"] = 31001.0       # integral float
    task["resources"][0]["scalar"]["value"] = "1.5"
    schema.validate(accept_call(task))


def test_subscribe_requires_user_and_name():
    call = subscribe_call()
    del call["subscribe"]["framework_info"]["user"]
    assert "Call.subscribe.framework_info.user: required field missing" in error_of(call)


def test_v0_and_unknown_top_level_fields_are_rejected():
    call = subscribe_call()
    call["subscribe"]["framework_info"]["slave_id"] = {"value": "x"}
    assert "framework_info.slave_id: unknown field" in error_of(call)
    assert "Call.framwork_id: unknown field" in error_of(
        {"type": "TEARDOWN", "framwork_id": {"value": "F"}})
    assert "expected an object (Call)" in error_of([1, 2])


def test_unsupported_operations_still_parse():
    call = accept_call()
    call["accept"]["operations"] = [{"type": "RESERVE", "reserve": {"resources": [
        {"name": "cpus", "type": "SCALAR", "scalar": {"value": 1},
         "reservations": [{"type": "DYNAMIC", "role": "r"}]}]}}]
    schema.validate(call)


# --- Mesos' call validation -----------------------------------------------------------

@pytest.mark.parametrize("call, text", [
    ({"framework_id": {"value": "F"}}, "Expecting 'type' to be present"),
    ({"type": "TEARDOWN"}, "Expecting 'framework_id' to be present"),
    ({"type": "KILL", "framework_id": {"value": "F"}}, "Expecting 'kill' to be present"),
    ({"type": "SUBSCRIBE"}, "Expecting 'subscribe' to be present"),
    (dict(subscribe_call(), framework_id={"value": "F"}),
     "'framework_id' differs from 'subscribe.framework_info.id'"),
    ({"type": "ACKNOWLEDGE", "framework_id": {"value": "F"}, "acknowledge": {
        "agent_id": {"value": "S"}, "task_id": {"value": "t"},
        "uuid": base64.b64encode(b"abc").decode()}}, "must be 16 bytes"),
])
def test_call_validation(call, text):
    with pytest.raises(schema.CallValidationError, match=text):
        schema.validate(call)


def test_event_schema_checks_the_masters_output():
    schema.validate_message("Event", {"type": "UPDATE", "update": {"status": {
        "task_id": {"value": "t"}, "state": "TASK_RUNNING", "source": "SOURCE_EXECUTOR",
        "uuid": UUID, "timestamp": 1.5, "agent_id": {"value": "S"}}}})
    with pytest.raises(schema.SchemaError, match="'TASK_DONE' is not a value of TaskState"):
        schema.validate_message("Event", {"type": "UPDATE", "update": {"status": {
            "task_id": {"value": "t"}, "state": "TASK_DONE"}}})


# --- resources --------------------------------------------------------------------------

def test_resource_arithmetic_is_exact():
    offer = Resources.of(cpus=1, mem=1000, ports=[(31000, 31009)])
    used = Resources.of(cpus=0.1, mem=0.3, ports=[(31002, 31003)])
    for _ in range(10):
        offer.subtract(Resources.of(cpus=0.1))
    assert offer.get("cpus") == 0
    left = Resources.of(cpus=1, mem=1000, ports=[(31000, 31009)]).subtract(used)
    assert left.ports == [[31000, 31001], [31004, 31009]]
    assert left.to_state()["ports"] == "[31000-31001, 31004-31009]"
    assert left.add(used) == Resources.of(cpus=1, mem=1000, ports=[(31000, 31009)])
    assert not Resources.of(cpus=0.005, mem=31).allocatable()
    assert Resources.of(mem=32).allocatable()


def test_parse_resources():
    parsed = parse_resources(full_task()["resources"])
    assert parsed == Resources.of(cpus=1.5, mem=1024, gpus=1, ports=[(31000, 31001)])
    with pytest.raises(ResourceError, match="no resource named 'fpgas'"):
        parse_resources([{"name": "fpgas", "type": "SCALAR", "scalar": {"value": 1}}])
    with pytest.raises(ResourceError, match="offered as RANGES, not SCALAR"):
        parse_resources([{"name": "ports", "type": "SCALAR", "scalar": {"value": 1}}])
    with pytest.raises(ResourceError, match="named twice"):
        parse_resources([{"name": "ports", "type": "RANGES", "ranges": {"range": [
            {"begin": 1, "end": 5}]}}, {"name": "ports", "type": "RANGES", "ranges": {
                "range": [{"begin": 5, "end": 5}]}}])
    with pytest.raises(ResourceError, match="MULTI_ROLE framework must set allocation_info"):
        parse_resources([{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}}],
                        multi_role=True, role="tf")
    with pytest.raises(ResourceError, match="only unreserved"):
        parse_resources([{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1},
                          "role": "tf"}])


# --- AgentSpec and TaskInfo planning -----------------------------------------------------

def test_agent_spec():
    spec = AgentSpec(cpus=2, mem=512, disk=100, ports=[(31000, 31100)], gpus=["3", "5"],
                     attributes={"rack": "r1", "speed": 2.5})
    assert spec.ports == ((31000, 31100),) and spec.gpus == ("3", "5")
    assert spec.resolve("/tmp")[4] == ("3", "5")
    assert AgentSpec(cpus=1, mem=1, disk=1, gpus=2).resolve("/tmp")[4] == ("0", "1")
    cpus, mem, disk, _, _ = AgentSpec(gpus=0).resolve("/tmp")
    assert cpus >= 1 and mem > 0 and disk > 0
    for bad in (dict(cpus=-1), dict(ports=[(5, 1)]), dict(gpus="2"), dict(gpus=-1),
                dict(attributes={"a": [1]}), dict(hostname="")):
        with pytest.raises(AgentSpecError):
            AgentSpec(**bad)


def test_plan_task_and_launch():
    plan = plan_task(full_task())
    assert plan.image == "tensorflow/tensorflow:latest" and plan.containerizer == "MESOS"
    assert plan.force_pull and plan.kill_grace == 2.5 and plan.max_completion == 60
    assert plan.env == {"A": "1", "S": "0123456789abcdef"}
    assert plan.volumes == [("/srv/data", "/data", "RO")]
    launch = build_launch(plan, "worker-0", "F", "S0", "/sb", ["1"], True, {"PATH": "/bin"})
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "1" and launch.env["MESOS_SANDBOX"] == "/sb"
    assert launch.env["A"] == "1" and launch.env["PATH"] == "/bin"
    no_gpu = build_launch(plan, "w", "F", "S0", "/sb", [], True, {})
    assert no_gpu.env["CUDA_VISIBLE_DEVICES"] == ""
    argv_task = full_task()
    del argv_task["container"]
    argv_task["command"] = {"shell": False, "value": "/usr/bin/env",
                            "arguments": ["env", "-i", "true"]}
    plan = plan_task(argv_task)
    assert build_launch(plan, "w", "F", "S", "/sb", [], False, {}).argv() == [
        "/usr/bin/env", "-i", "true"]


@pytest.mark.parametrize("mutate, text", [
    (lambda t: t.__setitem__("executor", {"executor_id": {"value": "e"}}),
     r"at least one \(but not both\) of CommandInfo or ExecutorInfo"),
    (lambda t: t.__delitem__("command"), "needs 'command'"),
    (lambda t: t["container"]["mesos"]["image"].__setitem__("type", "APPC"),
     "only DOCKER images"),
    (lambda t: t.__setitem__("container", {"type": "DOCKER", "docker": {
        "image": "i", "network": "BRIDGE"}}), "network BRIDGE"),
    (lambda t: t["command"]["environment"]["variables"].append({"name": "X"}),
     "'X' of type 'VALUE' must have a value set"),
    (lambda t: t["command"].pop("value"), "must be set when shell is true"),
])
def test_plan_task_refusals(mutate, text):
    task = copy.deepcopy(full_task())
    mutate(task)
    with pytest.raises(TaskInvalid, match=text):
        plan_task(task)


def test_ids_and_gpus_and_exit_messages():
    for bad in ("", ".", "..", "a/b", "a\\b", "a\nb"):
        with pytest.raises(TaskInvalid):
            check_id("TaskID", bad)
    with pytest.raises(TaskInvalid, match="whole number"):
        gpu_count(Resources.of(gpus=0.5))
    assert describe_exit(3) == "Command exited with status 3"
    assert describe_exit(-9) == "Command terminated with signal Killed"
    assert describe_exit(-15) == "Command terminated with signal Terminated"


def test_local_master_imports_without_tensorflow():
    import subprocess
    import sys
    code = ("import sys; sys.modules['tensorflow'] = None; "
            "import mesos_local, mesos_local.command_line, mesos_local.api.http_server")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
