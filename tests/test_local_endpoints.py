"""The read endpoints tools use, built from the master's state as Mesos builds
them (src/master/readonly_handler.cpp, src/common/http.cpp,
src/master/metrics.cpp): shapes, query parameters, jsonp, redirects, and
authentication only where the master's mode asks for it."""

import json

import pytest
import requests
from fixtures_master import clients, local_master, make_local_master, small_agent
from mesos_http_client import task_info


def get(master, path, **params):
    response = requests.get(master.url + path, params=params, allow_redirects=False,
                            timeout=10)
    return response


def get_json(master, path, **params):
    response = get(master, path, **params)
    assert response.status_code == 200, (path, response.status_code, response.text)
    assert response.headers["Content-Type"] == "application/json"
    return response.json()


@pytest.fixture
def running(make_local_master, clients):
    """A master with one framework and tasks: ``sleeper`` running, ``done``
    finished; yields (master, client)."""
    master = make_local_master(agents=[small_agent(cpus=4, mem=1024)])
    client = clients(master, name="endpoints", capabilities=["MULTI_ROLE"], roles=["ml"])
    offer = client.next_offers()[0]
    resources = [{"name": n, "type": "SCALAR", "scalar": {"value": v},
                  "allocation_info": {"role": "ml"}} for n, v in (("cpus", 0.5), ("mem", 64))]
    client.launch(offer, [task_info("done", offer, "true", resources=resources)])
    client.wait_state("done", "TASK_FINISHED")
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("sleeper", offer, "sleep 600", resources=resources)])
    client.wait_state("sleeper", "TASK_RUNNING")
    yield master, client
    client.kill("sleeper")
    client.wait_state("sleeper", "TASK_KILLED")


def test_every_endpoint_also_at_the_master_path(running):
    master, _ = running
    for name in ("state", "state.json", "state-summary", "slaves", "frameworks", "tasks",
                 "tasks.json", "roles", "roles.json", "flags"):
        assert get_json(master, "/master/" + name).keys() == get_json(master, "/" + name).keys()
    assert get_json(master, "/master/frameworks/")["frameworks"]   # mesos-cli adds the slash
    assert "master/uptime_secs" in get_json(master, "/metrics/snapshot")


def test_slaves_and_state_carry_what_tools_read(running):
    master, client = running
    [agent] = get_json(master, "/slaves")["slaves"]
    assert agent["active"] is True and agent["deactivated"] is False
    assert agent["used_resources"]["cpus"] == 0.5 and agent["resources"]["cpus"] == 4
    state = get_json(master, "/master/state")
    assert state["capabilities"] == ["AGENT_UPDATE", "AGENT_DRAINING", "QUOTA_V2"]
    assert state["slaves"][0]["deactivated"] is False
    [framework] = state["frameworks"]
    assert framework["roles"] == ["ml"] and "role" not in framework   # MULTI_ROLE: "roles"
    [sleeper] = framework["tasks"]
    for status in sleeper["statuses"]:
        container = status["container_status"]
        assert container["container_id"]["value"]
        assert container["network_infos"] == [
            {"ip_addresses": [{"protocol": "IPv4", "ip_address": "127.0.0.1"}]}]
    ids = {s["container_status"]["container_id"]["value"] for s in sleeper["statuses"]}
    assert len(ids) == 1
    # The updates the framework got carry it too (an agent adds it to each).
    updates = [e["update"]["status"] for e in client.all_events if e["type"] == "UPDATE"
               and e["update"]["status"]["task_id"]["value"] == "sleeper"]
    assert {u["container_status"]["container_id"]["value"] for u in updates} == ids
    assert get_json(master, "/slaves", slave_id="nope")["slaves"] == []


def test_a_single_role_framework_shows_role(make_local_master, clients):
    master = make_local_master()
    clients(master, role="analytics")
    [framework] = get_json(master, "/frameworks")["frameworks"]
    assert framework["role"] == "analytics" and "roles" not in framework
    assert [r["name"] for r in get_json(master, "/roles")["roles"]] == ["analytics"]


def test_frameworks_and_tasks_queries(running):
    master, client = running
    frameworks = get_json(master, "/master/frameworks")
    assert [f["name"] for f in frameworks["frameworks"]] == ["endpoints"]
    assert frameworks["completed_frameworks"] == [] and frameworks["unregistered_frameworks"] == []
    assert get_json(master, "/frameworks", framework_id="other")["frameworks"] == []
    tasks = get_json(master, "/tasks")["tasks"]
    assert [t["id"] for t in tasks] == ["sleeper", "done"]                 # newest first
    assert [t["id"] for t in get_json(master, "/tasks", order="asc")["tasks"]] == \
        ["done", "sleeper"]
    assert [t["id"] for t in get_json(master, "/tasks", limit=1)["tasks"]] == ["sleeper"]
    assert [t["id"] for t in get_json(master, "/tasks", limit=1, offset=1)["tasks"]] == ["done"]
    assert len(get_json(master, "/tasks", limit=-1)["tasks"]) == 2        # mesos-cli's query
    assert get_json(master, "/tasks", offset=5)["tasks"] == []
    assert [t["id"] for t in get_json(master, "/tasks", task_id="done")["tasks"]] == ["done"]
    assert get_json(master, "/tasks", framework_id="other")["tasks"] == []
    done = get_json(master, "/tasks", task_id="done")["tasks"][0]
    assert done["state"] == "TASK_FINISHED" and done["framework_id"] == client.framework_id
    assert done["role"] == "ml" and done["executor_id"] == ""


def test_state_summary_counts_tasks(running):
    master, client = running
    summary = get_json(master, "/master/state-summary")
    [agent] = summary["slaves"]
    assert agent["TASK_RUNNING"] == 1 and agent["TASK_FINISHED"] == 1
    assert agent["framework_ids"] == [client.framework_id]
    [framework] = summary["frameworks"]
    assert framework["TASK_RUNNING"] == 1 and framework["slave_ids"] == [agent["id"]]
    assert "tasks" not in framework and framework["active"] is True


def test_roles_flags_and_metrics(running):
    master, client = running
    [role] = get_json(master, "/master/roles")["roles"]
    assert role["name"] == "ml" and role["frameworks"] == [client.framework_id]
    assert role["allocated"] == {"cpus": 0.5, "mem": 64}
    flags = get_json(master, "/master/flags")["flags"]
    assert flags["port"] == str(master.port) and flags["allocation_interval"] == "50ms"
    assert flags["authenticate_http_frameworks"] == flags["authenticate_http_readwrite"] == \
        flags["authenticate_http_readonly"] == "false"
    assert all(isinstance(value, str) for value in flags.values())
    metrics = get_json(master, "/metrics/snapshot")
    assert metrics["master/tasks_running"] == 1 and metrics["master/tasks_finished"] == 1
    assert metrics["master/frameworks_active"] == 1 and metrics["master/slaves_active"] == 1
    assert metrics["master/cpus_total"] == 4 and metrics["master/cpus_used"] == 0.5
    assert metrics["master/cpus_percent"] == 0.125 and metrics["master/elected"] == 1
    assert all(isinstance(value, (int, float)) for value in metrics.values())


def test_a_metrics_timeout_is_read_as_libprocess_reads_a_duration(running):
    """MetricsProcess::_snapshot (3rdparty/libprocess/src/metrics/metrics.cpp)
    parses ?timeout= with Duration::parse: a monitor that sends a bare
    number or '5s' gets 400 from Mesos, so it must here too."""
    master, _ = running
    for good in ("5secs", "1.5mins", "100ms", "0ns", "2weeks"):
        reply = get(master, "/metrics/snapshot", timeout=good)
        assert reply.status_code == 200 and reply.json()["master/elected"] == 1, good
    for bad, words in (("5", "Invalid duration '5'"),
                       ("5s", "Unknown duration unit 's'; supported units are 'ns', 'us', 'ms', "
                              "'secs', 'mins', 'hrs', 'days', and 'weeks'"),
                       ("secs", "Failed to convert '' to number"),
                       ("1.2.3secs", "Failed to convert '1.2.3' to number")):
        reply = get(master, "/metrics/snapshot", timeout=bad)
        assert (reply.status_code, reply.text) == (
            400, "Invalid timeout '%s': %s.\n" % (bad, words)), bad


def test_jsonp(running):
    master, _ = running
    for path in ("/master/state", "/master/state-summary", "/slaves", "/frameworks", "/tasks",
                 "/roles", "/flags", "/metrics/snapshot"):
        response = get(master, path, jsonp="cb")
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "text/javascript"
        assert response.text.startswith("cb(") and response.text.endswith(");")
        json.loads(response.text[3:-2])


def test_redirect_and_leadership(local_master):
    response = get(local_master, "/master/redirect")
    assert response.status_code == 307
    assert response.headers["Location"] == "//127.0.0.1:%d" % local_master.port
    assert get(local_master, "/redirect").headers["Location"] == \
        "//127.0.0.1:%d" % local_master.port
    assert get(local_master, "/master/redirect/state").status_code == 404
    local_master.set_leader("http://10.0.0.9:5050")
    assert get(local_master, "/master/redirect").headers["Location"] == "//10.0.0.9:5050"
    moved = get(local_master, "/master/tasks", limit=3)
    assert moved.status_code == 307
    assert moved.headers["Location"] == "//10.0.0.9:5050/master/tasks?limit=3"
    assert get(local_master, "/master/flags").status_code == 200   # any master answers
    local_master.set_leader("")
    assert get(local_master, "/master/state").status_code == 503
    assert get_json(local_master, "/metrics/snapshot")["master/elected"] == 0


def test_read_endpoints_need_no_credentials_and_scheduler_calls_still_do(make_local_master):
    master = make_local_master(credentials={"alice": "secret"})
    for path in ("/master/state", "/master/tasks", "/metrics/snapshot", "/master/flags"):
        assert get(master, path).status_code == 200, path
    flags = get_json(master, "/master/flags")["flags"]
    assert flags["authenticate_http_frameworks"] == "true"
    # The operator API and /master/teardown (Mesos' read-write endpoints) need
    # credentials; the read endpoints above do not.
    assert (flags["authenticate_http_readwrite"], flags["authenticate_http_readonly"]) == \
        ("true", "false")
    assert get_json(master, "/master/state")["flags"] == flags
    assert "secret" not in get(master, "/master/state").text
    response = requests.post(master.url + "/api/v1/scheduler", timeout=10, json={
        "type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "u", "name": "n"}}})
    assert response.status_code == 401


def test_state_json_statuses_are_what_mesos_keeps_and_writes(local_master, clients):
    # Master::updateTask (src/master/master.cpp) replaces the last status
    # when a new one has the same state, and json(TaskStatus)
    # (src/common/http.cpp) writes no message: here /master/state kept every
    # repeated state and each status' message.
    from mesos_http_client import task_info
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("twice", offer, "sleep 60")], filters={"refuse_seconds": 0})
    client.wait_state("twice", "TASK_RUNNING", timeout=30)
    with local_master._records.lock:           # what an executor's second RUNNING does
        task = next(t for f in local_master._records.frameworks.values()
                    for t in f.tasks.values() if t.id == "twice")
        local_master._updates.record(task, "TASK_RUNNING", "SOURCE_EXECUTOR",
                                     message="again", with_uuid=False)
    client.call("TEARDOWN")
    local_master.wait_until(lambda state: state["completed_frameworks"], 30)
    [done] = local_master.state()["completed_frameworks"][0]["completed_tasks"]
    assert [status["state"] for status in done["statuses"]] == [
        "TASK_STARTING", "TASK_RUNNING", "TASK_KILLED"], done["statuses"]
    assert not any("message" in status for status in done["statuses"]), done["statuses"]

