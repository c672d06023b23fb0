"""The embedded master's operator side, as Mesos' master serves it: the v1
operator API ``POST /api/v1`` (``Master::Http::api``, src/master/http.cpp;
include/mesos/v1/master/master.proto), the legacy ``POST
/master/teardown`` and reconciliation updates that carry the task's
``container_status`` (``Master::reconcile``, src/master/master.cpp).

Every response is checked against the ``mesos.v1.master.Response``
message (``messages.py``, transcribed from master.proto), as the schema
tests check the scheduler's events.
"""

import base64
import json
import socket

import pytest
import requests
from fixtures_master import clients, launch_running, leftover_processes, make_local_master
from mesos_http_client import CLOSED, task_info
from waiting import wait_until

from mesos_local.api import files
from mesos_local.api.validation import SchemaError, validate_message

CREDENTIALS = {"alice": "s3cret"}
JSON = {"Content-Type": "application/json"}


def operator(master, call, auth=None, headers=None, path="/api/v1"):
    """POST a ``master.Call`` (a dict, or raw bytes) to the operator API."""
    data = call if isinstance(call, bytes) else json.dumps(call)
    return requests.post(master.url + path, data=data, auth=auth,
                         headers=dict(JSON, **(headers or {})), allow_redirects=False,
                         timeout=10)


def response_of(master, call, **kwargs):
    """The operator's ``Response`` to ``call``, checked against master.proto."""
    reply = operator(master, call, **kwargs)
    assert reply.status_code == 200, (call, reply.status_code, reply.text)
    assert reply.headers["Content-Type"] == "application/json"
    document = reply.json()
    validate_message("master.Response", document)
    assert document["type"] == call["type"]
    return document


def get(master, kind, **kwargs):
    """The ``get_x`` part of the Response to a ``GET_X`` call."""
    return response_of(master, {"type": kind}, **kwargs)[kind.lower()]


def teardown_form(master, body, auth=None, path="/master/teardown"):
    return requests.post(master.url + path, data=body, auth=auth, allow_redirects=False,
                         headers={"Content-Type": "application/x-www-form-urlencoded"},
                         timeout=10)


# --- the reads ---------------------------------------------------------------------------------

def test_each_read_answers_a_response_of_master_proto(make_local_master, clients):
    master = make_local_master(strict=True)
    client = clients(master)
    launch_running(client, master, "sleeper", "sleep 60")

    assert response_of(master, {"type": "GET_HEALTH"}) == {
        "type": "GET_HEALTH", "get_health": {"healthy": True}}
    version = get(master, "GET_VERSION")["version_info"]
    assert version["version"] == master.version_json()["version"]
    flags = {f["name"]: f["value"] for f in get(master, "GET_FLAGS")["flags"]}
    assert flags["port"] == str(master.port)
    got_master = get(master, "GET_MASTER")
    assert got_master["master_info"]["id"] == master.id
    assert got_master["start_time"] == master.start_time

    [agent] = get(master, "GET_AGENTS")["agents"]
    state = master.state()
    assert agent["agent_info"]["id"]["value"] == state["slaves"][0]["id"]
    assert agent["active"] is True and agent["version"]
    assert {r["name"] for r in agent["total_resources"]} >= {"cpus", "mem", "ports"}
    assert {r["name"] for r in agent["allocated_resources"]} == {"cpus", "mem"}
    assert agent["registered_time"]["nanoseconds"] > 0

    frameworks = get(master, "GET_FRAMEWORKS")
    [framework] = frameworks["frameworks"]
    assert frameworks["completed_frameworks"] == []
    assert framework["framework_info"]["id"]["value"] == client.framework_id
    assert framework["framework_info"]["name"] == client.framework_info["name"]
    assert framework["active"] and framework["connected"] and not framework["recovered"]
    cpus = [r for r in framework["allocated_resources"] if r["name"] == "cpus"]
    assert cpus == [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1},
                     "role": "*", "allocation_info": {"role": "*"}}]

    tasks = get(master, "GET_TASKS")
    assert tasks["completed_tasks"] == [] and tasks["unreachable_tasks"] == []
    [task] = tasks["tasks"]
    assert task["task_id"] == {"value": "sleeper"} and task["state"] == "TASK_RUNNING"
    assert task["framework_id"]["value"] == client.framework_id
    assert [s["state"] for s in task["statuses"]] == ["TASK_STARTING", "TASK_RUNNING"] \
        or [s["state"] for s in task["statuses"]] == ["TASK_RUNNING"]
    running = task["statuses"][-1]
    assert running["task_id"] == {"value": "sleeper"}
    assert running["container_status"]["network_infos"][0]["ip_addresses"][0][
        "ip_address"] == "127.0.0.1"

    assert get(master, "GET_EXECUTORS") == {"executors": []}
    whole = get(master, "GET_STATE")
    assert set(whole) == {"get_tasks", "get_executors", "get_frameworks", "get_agents"}
    assert whole["get_tasks"]["tasks"][0]["task_id"] == {"value": "sleeper"}
    assert whole["get_frameworks"]["frameworks"][0]["framework_info"]["id"] == \
        framework["framework_info"]["id"]
    assert whole["get_agents"]["agents"][0]["agent_info"]["id"] == agent["agent_info"]["id"]


def test_the_response_schema_is_master_proto():
    validate_message("master.Response", {"type": "READ_FILE",
                                         "read_file": {"size": 3, "data": "b3V0"}})
    with pytest.raises(SchemaError, match="healthy: required field missing"):
        validate_message("master.Response", {"type": "GET_HEALTH", "get_health": {}})
    with pytest.raises(SchemaError, match="data: expected a base64 string"):
        validate_message("master.Response", {"type": "READ_FILE",
                                             "read_file": {"size": 3, "data": "out!"}})
    with pytest.raises(SchemaError, match="GetFrameworks.Framework has no field 'id'"):
        validate_message("master.Response", {"type": "GET_FRAMEWORKS", "get_frameworks": {
            "frameworks": [{"id": "F", "framework_info": {"user": "u", "name": "n"},
                            "active": True, "connected": True, "recovered": False}]}})
    with pytest.raises(SchemaError, match="'GET_NOTHING' is not a value of master.Call.Type"):
        validate_message("master.Call", {"type": "GET_NOTHING"})


# --- TEARDOWN ----------------------------------------------------------------------------------

def test_teardown_kills_the_tasks_and_completes_the_framework(make_local_master, clients):
    master = make_local_master()
    client = clients(master)
    launch_running(client, master, "victim", "sleep 60")
    assert leftover_processes(master)
    call = {"type": "TEARDOWN", "teardown": {"framework_id": {"value": client.framework_id}}}
    reply = operator(master, call)
    assert (reply.status_code, reply.content) == (200, b"")
    assert client.next_event(CLOSED, timeout=30)
    wait_until(lambda: not leftover_processes(master),
               message=lambda: "left: %s" % leftover_processes(master))
    frameworks = get(master, "GET_FRAMEWORKS")
    assert frameworks["frameworks"] == []
    [done] = frameworks["completed_frameworks"]
    assert done["framework_info"]["id"]["value"] == client.framework_id
    assert not done["active"] and not done["connected"]
    assert done["unregistered_time"]["nanoseconds"] > 0
    tasks = get(master, "GET_TASKS")
    assert tasks["tasks"] == []
    [killed] = tasks["completed_tasks"]
    assert killed["state"] == "TASK_KILLED"
    assert killed["statuses"][-1]["reason"] == "REASON_FRAMEWORK_REMOVED"
    again = operator(master, call)      # only a registered framework (http.cpp _teardown)
    assert (again.status_code, again.text) == (400, "No framework found with specified ID")


def test_the_legacy_teardown_endpoint(make_local_master, clients):
    master = make_local_master()
    client = clients(master)
    missing = teardown_form(master, "")
    assert (missing.status_code, missing.text) == (
        400, "Missing 'frameworkId' query parameter in the request body")
    unknown = teardown_form(master, "frameworkId=nope")
    assert (unknown.status_code, unknown.text) == (400, "No framework found with specified ID")
    assert requests.get(master.url + "/master/teardown", timeout=10).status_code == 405
    done = teardown_form(master, "frameworkId=%s" % client.framework_id, path="/teardown")
    assert (done.status_code, done.content) == (200, b"")
    assert client.next_event(CLOSED, timeout=30)
    state = master.state()
    assert state["frameworks"] == [] and state["completed_frameworks"][0]["id"] == \
        client.framework_id


# --- UPDATE_FRAMEWORK (the scheduler's call), seen by the operator ------------------------------

def test_update_framework_is_answered_as_mesos_and_shows(make_local_master, clients):
    master = make_local_master(strict=True)
    client = clients(master)
    info = dict(client.framework_info, name="renamed", webui_url="http://ui:1")
    reply = client.call("UPDATE_FRAMEWORK", {"framework_info": info}, check=False)
    assert (reply.status_code, reply.content) == (200, b"")     # Master::updateFramework: OK()
    [framework] = get(master, "GET_FRAMEWORKS")["frameworks"]
    assert framework["framework_info"]["name"] == "renamed"
    assert framework["framework_info"]["webui_url"] == "http://ui:1"
    other = dict(info, id={"value": "another"})
    mismatch = client.call("UPDATE_FRAMEWORK", {"framework_info": other}, check=False)
    assert (mismatch.status_code, mismatch.text) == (
        400, "Failed to validate scheduler::Call: "
             "'framework_id' differs from 'update_framework.framework_info.id'")
    user = client.call("UPDATE_FRAMEWORK", {"framework_info": dict(info, user="someone-else")},
                       check=False)
    assert user.status_code == 400
    assert user.text.startswith("FrameworkInfo update is not valid: Updating "
                                "'FrameworkInfo.user' is unsupported")


# --- READ_FILE ---------------------------------------------------------------------------------

def test_read_file_reads_a_tasks_sandbox(make_local_master, clients):
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("printer", offer, "printf 'hello\\nworld\\n'; mkdir sub")],
                  filters={"refuse_seconds": 0})
    client.wait_state("printer", "TASK_FINISHED", timeout=30)
    sandbox = files.virtual_path(client.framework_id, "printer")

    def read(path, offset, length=None):
        request = {"path": path, "offset": offset}
        if length is not None:
            request["length"] = length
        return operator(master, {"type": "READ_FILE", "read_file": request})

    def read_ok(*args):
        reply = read(*args)
        assert reply.status_code == 200, reply.text
        document = reply.json()
        validate_message("master.Response", document)
        assert document["type"] == "READ_FILE"
        result = document["read_file"]
        return result["size"], base64.b64decode(result["data"])

    assert read_ok(sandbox + "/stdout", 0) == (12, b"hello\nworld\n")
    assert read_ok(sandbox + "/stdout", 6, 3) == (12, b"wor")
    assert read_ok(sandbox + "/stdout", 6, 0) == (12, b"")        # the size only
    assert read_ok(sandbox + "/stdout", 100) == (12, b"")
    assert read_ok(sandbox + "/stdout", "6", "5") == (12, b"world")   # uint64 as strings
    assert read(sandbox + "/nothing", 0).status_code == 404
    assert read("/frameworks/x/executors/y/runs/latest/stdout", 0).status_code == 404
    escape = read(sandbox + "/../../../../../../../../etc/passwd", 0)
    assert escape.status_code in (400, 404), escape.text
    directory = read(sandbox + "/sub", 0)
    assert (directory.status_code, directory.text) == (400, "Cannot read a directory.\n")
    negative = read(sandbox + "/stdout", -1)
    assert negative.status_code == 400 and "offset" in negative.text
    no_request = operator(master, {"type": "READ_FILE"})
    assert (no_request.status_code, no_request.text) == (
        400, "Failed to validate master::Call: Expecting 'read_file' to be present")


# --- refusals ----------------------------------------------------------------------------------

@pytest.mark.parametrize("strict", [False, True])
def test_bad_calls_are_refused_as_mesos_refuses_them(make_local_master, strict):
    master = make_local_master(strict=strict)
    url = master.url + "/api/v1"
    health = json.dumps({"type": "GET_HEALTH"})
    no_type = requests.post(url, data=health, timeout=10)
    assert (no_type.status_code, no_type.text) == (400, "Expecting 'Content-Type' to be present")
    protobuf = requests.post(url, data=b"\x08\x01", timeout=10,
                             headers={"Content-Type": "application/x-protobuf"})
    assert protobuf.status_code == 415
    bad_json = operator(master, b"{not json")
    assert bad_json.status_code == 400
    assert bad_json.text.startswith("Failed to parse body into JSON: ")
    not_a_type = operator(master, {"type": "GET_EVERYTHING"})
    assert not_a_type.status_code == 400
    untyped = operator(master, {})
    assert (untyped.status_code, untyped.text) == (
        400, "Failed to validate master::Call: Expecting 'type' to be present")
    unknown = operator(master, {"type": "UNKNOWN"})
    assert (unknown.status_code, unknown.content) == (501, b"")
    unserved = operator(master, {"type": "GET_QUOTA"})
    assert unserved.status_code == 501 and "GET_QUOTA" in unserved.text
    assert operator(master, {"type": "GET_HEALTH"},
                    headers={"Accept": "application/x-protobuf"}).status_code == 406
    assert requests.get(url, timeout=10).status_code == 405
    if strict:
        field = operator(master, {"type": "GET_HEALTH", "get_health": {}})
        assert field.status_code == 400 and "get_health: unknown field" in field.text
    else:   # Mesos' parser skips what it does not know
        assert operator(master, {"type": "GET_HEALTH", "get_health": {}}).status_code == 200
    assert get(master, "GET_HEALTH", path="/master/api/v1") == {"healthy": True}


def test_a_master_that_does_not_lead_redirects(make_local_master):
    master = make_local_master()
    master.set_leader("http://10.0.0.1:5050")
    for path in ("/api/v1", "/master/teardown"):
        reply = operator(master, {"type": "GET_HEALTH"}, path=path)
        assert reply.status_code == 307
        assert reply.headers["Location"] == "//10.0.0.1:5050" + path
    master.set_leader("")
    assert operator(master, {"type": "GET_HEALTH"}).status_code == 503


# --- authentication ----------------------------------------------------------------------------

def test_credentials_are_asked_for_before_the_body_is_read(make_local_master, clients):
    master = make_local_master(credentials=CREDENTIALS)
    auth = tuple(CREDENTIALS.items())[0]
    client = clients(master, auth=auth)
    for path in ("/api/v1", "/master/api/v1", "/master/teardown", "/teardown"):
        refused = operator(master, {"type": "GET_HEALTH"}, path=path)
        assert refused.status_code == 401, path
        assert refused.headers["WWW-Authenticate"] == 'Basic realm="mesos-master-readwrite"'
        wrong = operator(master, {"type": "GET_HEALTH"}, path=path, auth=("alice", "nope"))
        assert wrong.status_code == 401
    host, port = master.url.rsplit("/", 1)[-1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"POST /api/v1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 41943040\r\n\r\n")      # and not one byte of it
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 401"), reply[:200]
    assert b"Connection: close" in reply
    assert get(master, "GET_HEALTH", auth=auth) == {"healthy": True}
    call = {"type": "TEARDOWN", "teardown": {"framework_id": {"value": client.framework_id}}}
    assert operator(master, call).status_code == 401
    assert master.state()["frameworks"]                 # untouched
    assert operator(master, call, auth=auth).status_code == 200


# --- reconciliation ----------------------------------------------------------------------------

def test_reconciliation_carries_the_tasks_container_status(make_local_master, clients):
    master = make_local_master(strict=True)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("rec", offer, "sleep 60")], filters={"refuse_seconds": 0})
    running = client.wait_state("rec", "TASK_RUNNING")
    expected = running["container_status"]
    validate_message("ContainerStatus", expected)
    client.call("RECONCILE", {"tasks": []})
    implicit = client.next_update("rec")
    client.call("RECONCILE", {"tasks": [{"task_id": {"value": "rec"},
                                         "agent_id": offer["agent_id"]}]})
    explicit = client.next_update("rec")
    for status in (implicit, explicit):     # the client checked each Event's schema
        assert status["reason"] == "REASON_RECONCILIATION" and "uuid" not in status
        assert status["state"] == "TASK_RUNNING"
        assert status["container_status"] == expected
        assert "labels" not in status      # Master::reconcile passes no labels
    with pytest.raises(SchemaError, match="container_status.container_id.value"):
        validate_message("TaskStatus", dict(implicit, container_status={"container_id": {}}))
