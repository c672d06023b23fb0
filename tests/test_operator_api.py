"""The embedded master's operator side, as Mesos' master serves it: the v1
operator API ``POST /api/v1`` (``Master::Http::api``, src/master/http.cpp;
include/mesos/v1/master/master.proto), the legacy ``POST
/master/teardown`` and reconciliation updates that carry the task's
``container_status`` (``Master::reconcile``, src/master/master.cpp); every
endpoint at every path under it, as libprocess routes a path to the longest
route that prefixes it (``ProcessBase::consume``,
3rdparty/libprocess/src/process.cpp). The operator's event stream
(SUBSCRIBE) is test_operator_events.py's.

Every response is checked against the ``mesos.v1.master.Response``
message (``messages.py``, transcribed from master.proto), as the schema
tests check the scheduler's events.
"""

import base64
import json
import logging
import socket
import stat

import pytest
import requests
from fixtures_master import clients, launch_running, leftover_processes, make_local_master
from mesos_http_client import CLOSED, scalar, task_info
from operator_helpers import get, operator, response_of
from waiting import wait_until

from mesos_local.api import files
from mesos_local.api.validation import SchemaError, validate_message

CREDENTIALS = {"alice": "s3cret"}


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


def test_the_reads_of_what_the_local_master_never_sets_answer_as_mesos(make_local_master):
    master = make_local_master()
    # WeightsHandler::get sets get_weights only to add a WeightInfo.
    assert response_of(master, {"type": "GET_WEIGHTS"}) == {"type": "GET_WEIGHTS"}
    assert get(master, "GET_OPERATIONS") == {}
    assert get(master, "GET_QUOTA") == {"status": {}}
    assert get(master, "GET_MAINTENANCE_STATUS") == {"status": {}}
    assert get(master, "GET_MAINTENANCE_SCHEDULE") == {"schedule": {}}
    assert get(master, "GET_ROLES") == {}               # no framework, no role
    assert get(master, "GET_LOGGING_LEVEL") == {"level": 0}


def test_get_metrics_is_the_metrics_snapshot(make_local_master):
    master = make_local_master()
    metrics = get(master, "GET_METRICS")["metrics"]
    names = [m["name"] for m in metrics]
    assert names == sorted(names)                       # a std::map, by name
    snapshot = requests.get(master.url + "/metrics/snapshot", timeout=10).json()
    assert set(names) == set(snapshot)
    values = {m["name"]: m["value"] for m in metrics}
    assert values["master/slaves_active"] == 1.0
    assert values["master/operator_event_stream_subscribers"] == 0.0
    timed = {"type": "GET_METRICS", "get_metrics": {"timeout": {"nanoseconds": 10 ** 9}}}
    assert response_of(master, timed)["get_metrics"]["metrics"]
    bare = operator(master, {"type": "GET_METRICS"})
    assert (bare.status_code, bare.text) == (
        400, "Failed to validate master::Call: Expecting 'get_metrics' to be present")


def test_get_roles_lists_each_role_with_its_frameworks_and_resources(make_local_master,
                                                                     clients):
    master = make_local_master()
    client = clients(master, capabilities=["MULTI_ROLE"], roles=["ml"])
    launch_running(client, master, "trainer", "sleep 60",
                   resources=[scalar(name, value, allocation_role="ml")
                              for name, value in (("cpus", 0.5), ("mem", 64))])
    [role] = get(master, "GET_ROLES")["roles"]
    assert (role["name"], role["weight"], role["frameworks"]) == (
        "ml", 1.0, [{"value": client.framework_id}])
    amounts = {}
    for resource in role["resources"]:     # cpus, mem, disk, gpus: scalars only
        assert resource["type"] == "SCALAR" and set(resource) == {"name", "type", "scalar"}
        amounts[resource["name"]] = resource["scalar"]["value"]
    assert set(amounts) <= {"cpus", "mem", "disk", "gpus"}
    assert amounts["cpus"] >= 0.5 and amounts["mem"] >= 64


def test_a_number_given_as_a_string_nested_past_the_parsers_depth_is_a_400(make_local_master):
    # stout parses a number from a string (as "3" for 3); one that is "[[[..."
    # 5,000 deep ended the handler in a RecursionError: the connection closed
    # with no answer, a traceback in the master's process (tfrun's stderr).
    master = make_local_master(strict=False)   # as tfrun's: Mesos' tolerant parsing
    reply = operator(master, {"type": "SUBSCRIBE", "subscribe": {"framework_info": {
        "user": "nobody", "name": "deep", "failover_timeout": "[" * 5000 + "]" * 5000}}},
        path="/api/v1/scheduler")
    assert reply.status_code == 400
    assert reply.text.startswith("Failed to convert JSON into Call protobuf: ")
    assert "as a JSON number for field 'failover_timeout'" in reply.text


def test_set_logging_level_holds_for_its_duration(make_local_master):
    master = make_local_master()
    logger = logging.getLogger("mesos_local")
    before = logger.level

    def set_level(level, seconds):
        call = {"type": "SET_LOGGING_LEVEL", "set_logging_level": {
            "level": level, "duration": {"nanoseconds": int(seconds * 1e9)}}}
        reply = operator(master, call)
        assert (reply.status_code, reply.content) == (200, b"")   # OK(), no body

    set_level(2, 3600)
    assert get(master, "GET_LOGGING_LEVEL") == {"level": 2}
    assert logger.getEffectiveLevel() == logging.DEBUG       # VLOG prints now
    set_level(1, 0.2)          # the latest duration counts (Logging::revert)
    assert get(master, "GET_LOGGING_LEVEL") == {"level": 1}
    wait_until(lambda: get(master, "GET_LOGGING_LEVEL") == {"level": 0},
               message="the verbosity did not revert")
    assert logger.level == before
    missing = operator(master, {"type": "SET_LOGGING_LEVEL", "set_logging_level": {"level": 1}})
    assert missing.status_code == 400
    assert missing.text.startswith("Failed to convert JSON into Call protobuf: ")
    assert "duration" in missing.text
    bare = operator(master, {"type": "SET_LOGGING_LEVEL"})
    assert (bare.status_code, bare.text) == (
        400, "Failed to validate master::Call: Expecting 'set_logging_level' to be present")


# --- routes ------------------------------------------------------------------------------------

def test_every_endpoint_answers_at_every_path_under_it(make_local_master):
    master = make_local_master()
    url = master.url
    for path in ("/api/v1/operator", "/master/api/v1/x/y", "/api/v1/"):   # pymesos' operator
        assert get(master, "GET_HEALTH", path=path) == {"healthy": True}, path
    assert requests.get(url + "/api/v1/operator", timeout=10).status_code == 405
    scheduler = requests.post(url + "/api/v1/scheduler/x", data=b"{}", timeout=10)
    assert (scheduler.status_code, scheduler.text) == (
        400, "Expecting 'Content-Type' to be present")       # the scheduler's, not a 404
    for path in ("/master/state/", "/state/x", "/master/state-summary/x/y"):
        reply = requests.get(url + path, timeout=10)
        assert reply.status_code == 200 and "slaves" in reply.json(), path
    assert requests.get(url + "/metrics/snapshot/", timeout=10).json()["master/elected"] == 1.0
    assert requests.get(url + "/health/x", timeout=10).status_code == 200
    browse = requests.get(url + "/files/browse/x", timeout=10)
    assert (browse.status_code, browse.text) == (400, "Expecting 'path=value' in query.\n")
    teardown = teardown_form(master, "", path="/master/teardown/x")
    assert teardown.status_code == 400 and "frameworkId" in teardown.text
    # No route prefixes these: libprocess answers 404.
    for path in ("/master/metrics/snapshot", "/version/x", "/api", "/master", "/", "/nope"):
        assert requests.get(url + path, timeout=10).status_code == 404, path
    assert requests.post(url + "/api", data=b"{}", timeout=10).status_code == 404


# --- TEARDOWN ----------------------------------------------------------------------------------

def test_a_framework_failing_over_has_no_unregistered_time_until_it_is_removed(
        make_local_master, clients):
    # Mesos sets unregistered_time in Master::removeFramework only
    # (src/master/master.cpp): a disconnected framework shows 0 in state.json
    # and none in GET_FRAMEWORKS. It was set at the disconnection here, so
    # tfmesos runs --master counted down a failover no real master times.
    master = make_local_master()
    client = clients(master, failover_timeout=600)
    framework_id = client.framework_id
    master.drop_subscription(framework_id)
    wait_until(lambda: not master.state()["frameworks"][0]["connected"])
    assert master.state()["frameworks"][0]["unregistered_time"] == 0
    [away] = get(master, "GET_FRAMEWORKS")["frameworks"]
    assert not away["connected"] and "unregistered_time" not in away, away
    operator(master, {"type": "TEARDOWN", "teardown": {"framework_id": {"value": framework_id}}})
    [done] = get(master, "GET_FRAMEWORKS")["completed_frameworks"]
    assert done["unregistered_time"]["nanoseconds"] > 0


def test_teardown_kills_the_tasks_and_completes_the_framework(make_local_master, clients):
    master = make_local_master()
    client = clients(master)
    launch_running(client, master, "victim", "sleep 60")
    # (TASK_RUNNING may come before the exec that gives it its environment)
    wait_until(lambda: leftover_processes(master), message="the task's process never showed")
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
    # stout's stringify(bool), not Python's: 'False' to 'True' before
    checkpoint = client.call("UPDATE_FRAMEWORK", {"framework_info": dict(
        info, checkpoint=not info.get("checkpoint", False))}, check=False)
    assert checkpoint.status_code == 400 and checkpoint.text.endswith(
        "Updating 'FrameworkInfo.checkpoint' is unsupported; attempted to update from "
        "'%s' to '%s'" % (("true", "false") if info.get("checkpoint") else ("false", "true")))
    # A framework never re-subscribed has its registration time as Mesos'
    # reregistered_time (src/master/framework.cpp, model() in src/master/http.cpp).
    assert framework["reregistered_time"] == framework["registered_time"]


# --- READ_FILE ---------------------------------------------------------------------------------

def test_read_file_and_list_files_are_validated_then_find_no_sandbox(make_local_master, clients):
    """A Mesos master validates the call, then its Files has no sandbox
    attached (src/master/master.cpp): 404 (agents answer them:
    test_agent_endpoints)."""
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("printer", offer, "printf 'hello'")],
                  filters={"refuse_seconds": 0})
    client.wait_state("printer", "TASK_FINISHED", timeout=30)
    sandbox = files.virtual_path(client.framework_id, "printer")
    for call in ({"type": "READ_FILE", "read_file": {"path": sandbox + "/stdout", "offset": 0}},
                 {"type": "LIST_FILES", "list_files": {"path": sandbox}}):
        assert (operator(master, call).status_code, operator(master, call).content) == (404, b"")
    no_request = operator(master, {"type": "READ_FILE"})
    assert (no_request.status_code, no_request.text) == (
        400, "Failed to validate master::Call: Expecting 'read_file' to be present")
    no_path = operator(master, {"type": "LIST_FILES", "list_files": {}})
    assert no_path.status_code == 400 and "path" in no_path.text
# --- refusals ----------------------------------------------------------------------------------

@pytest.mark.parametrize("strict", [False, True])
def test_bad_calls_are_refused_as_mesos_refuses_them(make_local_master, strict):
    master = make_local_master(strict=strict)
    url = master.url + "/api/v1"
    health = json.dumps({"type": "GET_HEALTH"})
    no_type = requests.post(url, data=health, timeout=10)
    assert (no_type.status_code, no_type.text) == (400, "Expecting 'Content-Type' to be present")
    # A GET_HEALTH Call in protobuf (type = 1), answered in JSON: the
    # request accepts anything (test_protobuf_api has the rest).
    protobuf = requests.post(url, data=b"\x08\x01", timeout=10,
                             headers={"Content-Type": "application/x-protobuf"})
    assert protobuf.status_code == 200 and protobuf.json()["type"] == "GET_HEALTH"
    garbled = requests.post(url, data=b"\xff\xff", timeout=10,
                            headers={"Content-Type": "application/x-protobuf"})
    assert (garbled.status_code, garbled.text) == (400, "Failed to parse body into Call protobuf")
    other = requests.post(url, data=health, timeout=10, headers={"Content-Type": "text/plain"})
    assert (other.status_code, other.text) == (
        415, "Expecting 'Content-Type' of application/json or application/x-protobuf")
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
    unserved = operator(master, {"type": "RESERVE_RESOURCES", "reserve_resources": {}})
    assert unserved.status_code == 501 and "RESERVE_RESOURCES" in unserved.text
    in_protobuf = operator(master, {"type": "GET_HEALTH"},
                           headers={"Accept": "application/x-protobuf"})
    assert (in_protobuf.status_code, in_protobuf.headers["Content-Type"]) == (
        200, "application/x-protobuf")
    assert operator(master, {"type": "GET_HEALTH"},
                    headers={"Accept": "text/html"}).status_code == 406
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
    for path in ("/api/v1", "/master/api/v1", "/master/teardown", "/teardown",
                 "/api/v1/operator"):
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
