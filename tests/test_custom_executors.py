"""Custom executors on the local master (``TaskInfo.executor``; issue 34,
item 4): a scheduler (the raw HTTP test client) launches tasks on an
executor written against the raw v1 executor API (``raw_executor.py``, a
plain Python process), as Mesos' agents run one (src/slave/slave.cpp,
src/slave/http.cpp, docs/executor-http-api.md)."""

import base64
import http.client
import json
import os
import sys
import types
import uuid

import pytest
import requests
from conftest import MARKER, marked_processes
from fixtures_master import (
    clients,
    leftover_processes,
    local_master,
    make_local_master,
    marked_environment,
    pymesos_path,
    read_file,
)
from fixtures_netns import namespaces, root_only
from local_users import nobody
from mesos_http_client import scalar, task_info
from waiting import wait_until

from mesos_local.api import validation as schema
from mesos_local.containerizer.cgroups import isolation_problem
from mesos_local.containerizer.environment import DEFAULT_PATH
from tfmesos.mesos.recordio import Decoder

EXECUTOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "raw_executor.py")


def b64(text):
    return base64.b64encode(text.encode()).decode()


def executor_info(executor_id="ex", command=None, **fields):
    info = {"executor_id": {"value": executor_id}, "name": "raw executor",
            "command": {"value": command or "%s %s" % (sys.executable, EXECUTOR)},
            "resources": [scalar("cpus", 0.1), scalar("mem", 32)]}
    info.update(fields)
    return info


def executor_task(task_id, offer, executor, data=None):
    info = task_info(task_id, offer, "unused")
    del info["command"]
    info["executor"] = executor
    if data is not None:
        info["data"] = b64(data)
    return info


def next_message(client, timeout=30):
    event = client.next_event("MESSAGE", timeout=timeout)["message"]
    return event, base64.b64decode(event["data"]).decode()


def messages_until(client, wanted, timeout=30):
    """The executor's messages (text) until one equal to ``wanted``."""
    seen = []
    while wanted not in seen:
        seen.append(next_message(client, timeout)[1])
    return seen


def task_errors(client, count, others=True):
    """The next ``count`` TASK_ERROR updates (each REASON_TASK_INVALID) as
    {task_id: message}; any other update is acknowledged (where it has a
    uuid) or, with ``others`` false, fails the test."""
    seen = {}
    while len(seen) < count:
        status = client.next_update(timeout=30)
        if status["state"] == "TASK_ERROR":
            assert status["reason"] == "REASON_TASK_INVALID"
            seen[status["task_id"]["value"]] = status["message"]
        else:
            assert others, status
            if "uuid" in status:
                client.acknowledge(status)
    return seen


def agent_base(master):
    pid = master.state()["slaves"][0]["pid"]
    return "http://" + pid.rpartition("@")[2]


def events_of(sandbox):
    text = read_file(os.path.join(sandbox, "events.jsonl"))
    return [json.loads(line) for line in text.splitlines()]


def wait_gone(master, timeout=30):
    wait_until(lambda: not leftover_processes(master), timeout,
               message=lambda: "left over: %s" % leftover_processes(master))


def test_two_tasks_on_one_executor(make_local_master, clients):
    """One executor process runs both tasks: SUBSCRIBED then a LAUNCH each,
    updates forwarded with its uuids, ACKNOWLEDGED for each, MESSAGEs both
    ways, KILL as a KILL event; SHUTDOWN ends it (FAILURE, status 0)."""
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    agent_id = offer["agent_id"]
    executor = executor_info()
    client.launch(offer, [executor_task("t1", offer, executor, data="finish"),
                          executor_task("t2", offer, executor)])
    running = client.wait_state("t1", "TASK_RUNNING", timeout=30)
    assert running["source"] == "SOURCE_EXECUTOR"
    assert running["executor_id"] == {"value": "ex"} and running["agent_id"] == agent_id
    finished = client.wait_state("t1", "TASK_FINISHED", timeout=30)
    assert base64.b64decode(finished["data"]) == b"done"
    client.wait_state("t2", "TASK_RUNNING", timeout=30)

    # The executor hears ACKNOWLEDGED for each of its updates (it tells us so).
    acked = messages_until(client, "acked t2 TASK_RUNNING")
    assert {"acked t1 TASK_RUNNING", "acked t1 TASK_FINISHED"} <= set(acked)

    client.call("MESSAGE", {"agent_id": agent_id, "executor_id": {"value": "ex"},
                            "data": b64("hello")})
    event, text = next_message(client)
    assert text == "echo hello"
    assert event["agent_id"] == agent_id and event["executor_id"] == {"value": "ex"}

    client.kill("t2")
    killed = client.wait_state("t2", "TASK_KILLED", timeout=30)
    assert killed["source"] == "SOURCE_EXECUTOR"

    sandbox = master.sandbox("t1")
    assert sandbox == master.sandbox("t2") and "/executors/ex/runs/" in sandbox
    env = json.loads(read_file(os.path.join(sandbox, "env.json"), contains="}"))
    assert env["MESOS_AGENT_ENDPOINT"] == agent_base(master).partition("//")[2]
    assert env["MESOS_SLAVE_PID"] == "slave(1)@" + env["MESOS_AGENT_ENDPOINT"]
    assert (env["MESOS_FRAMEWORK_ID"], env["MESOS_EXECUTOR_ID"]) == (client.framework_id, "ex")
    assert env["MESOS_DIRECTORY"] == env["MESOS_SANDBOX"] == sandbox
    assert env["MESOS_CHECKPOINT"] == env["MESOS_HTTP_COMMAND_EXECUTOR"] == "0"
    assert env["MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD"] == "5secs"
    assert env["MESOS_SLAVE_ID"] == agent_id["value"] and env["LIBPROCESS_PORT"] == "0"
    assert env["LIBPROCESS_IP"] == env["MESOS_AGENT_ENDPOINT"].rpartition(":")[0]
    # No Mesos agent sets these (no such names in Mesos' src/).
    assert "MESOS_AGENT_ID" not in env and "MESOS_TASK_ID" not in env

    # The agent's /state: one executor with both tasks, its own directory;
    # the master's: the framework's executor and each task's executor_id.
    state = requests.get(agent_base(master) + "/state", timeout=10).json()
    [executor_json] = state["frameworks"][0]["executors"]
    assert (executor_json["id"], executor_json["name"]) == ("ex", "raw executor")
    assert executor_json["directory"] == sandbox and executor_json["tasks"] == []
    assert [t["id"] for t in executor_json["completed_tasks"]] == ["t1", "t2"]
    master_state = master.state()["frameworks"][0]
    assert [e["executor_id"] for e in master_state["executors"]] == ["ex"]
    assert {t["executor_id"] for t in master_state["completed_tasks"]} == {"ex"}
    operator = requests.post(master.url + "/api/v1", json={"type": "GET_EXECUTORS"},
                             timeout=10).json()
    schema.validate_message("master.Response", operator)
    assert [e["executor_info"]["executor_id"]["value"]
            for e in operator["get_executors"]["executors"]] == ["ex"]

    client.call("SHUTDOWN", {"agent_id": agent_id, "executor_id": {"value": "ex"}})
    failure = client.next_event("FAILURE", timeout=30)["failure"]
    assert failure == {"agent_id": agent_id, "executor_id": {"value": "ex"}, "status": 0}
    events = events_of(sandbox)
    for event in events:
        schema.validate_message("executor.Event", event)
    kinds = [event["type"] for event in events]
    assert kinds[0] == "SUBSCRIBED" and kinds.count("SUBSCRIBED") == 1
    assert [e["launch"]["task"]["task_id"]["value"] for e in events if e["type"] == "LAUNCH"] \
        == ["t1", "t2"]
    assert kinds[-1] == "SHUTDOWN" and "KILL" in kinds and "MESSAGE" in kinds
    subscribed = events[0]["subscribed"]
    assert subscribed["executor_info"]["executor_id"] == {"value": "ex"}
    assert subscribed["executor_info"]["framework_id"] == {"value": client.framework_id}
    assert subscribed["framework_info"]["id"] == {"value": client.framework_id}
    assert subscribed["agent_info"]["id"] == agent_id
    assert subscribed["container_id"]["value"] in sandbox
    wait_gone(master)


@root_only
def test_executor_in_an_agent_network_namespace(namespaces, make_local_master, clients):
    """An agent in a namespace of its own: its executor reaches the agent at
    the hub's address (MESOS_AGENT_ENDPOINT), where its server listens too."""
    master = make_local_master(network_namespaces=True)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [executor_task("t1", offer, executor_info(), data="finish")])
    client.wait_state("t1", "TASK_FINISHED", timeout=30)
    env = json.loads(read_file(os.path.join(master.sandbox("t1"), "env.json"), contains="}"))
    host = env["MESOS_AGENT_ENDPOINT"].rpartition(":")[0]
    assert host == master.network.hub_address != "127.0.0.1"
    client.call("SHUTDOWN", {"agent_id": offer["agent_id"], "executor_id": {"value": "ex"}})
    client.next_event("FAILURE", timeout=30)
    wait_gone(master)


def test_a_command_tasks_executor_is_named_after_it_and_shutdown_kills_it(local_master,
                                                                          clients):
    # Its updates named no executor, and SHUTDOWN of it was ignored (the task
    # ran on): on Mesos its executor's id is the task's, its updates carry it,
    # and shut down it kills its task (CommandExecutor::shutdown).
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("cmd", offer, "sleep 60")])
    running = client.wait_state("cmd", "TASK_RUNNING", timeout=30)
    assert running["executor_id"] == {"value": "cmd"}
    client.call("SHUTDOWN", {"agent_id": offer["agent_id"], "executor_id": {"value": "cmd"}})
    killed = client.wait_state("cmd", "TASK_KILLED", timeout=30)
    assert (killed["source"], killed["executor_id"]) == ("SOURCE_EXECUTOR", {"value": "cmd"})


def test_executor_death_fails_its_tasks(make_local_master, clients):
    """An executor that exits: its live task TASK_FAILED from the agent
    (REASON_EXECUTOR_TERMINATED), a FAILURE with its wait status; its
    resources come back, and a next task with its id starts a new one."""
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    agent_id = offer["agent_id"]
    client.launch(offer, [executor_task("t1", offer, executor_info())],
                  filters={"refuse_seconds": 0})
    client.wait_state("t1", "TASK_RUNNING", timeout=30)
    client.call("MESSAGE", {"agent_id": agent_id, "executor_id": {"value": "ex"},
                            "data": b64("exit 3")})
    failed = client.wait_state("t1", "TASK_FAILED", timeout=30)
    assert (failed["source"], failed["reason"], failed["message"]) == (
        "SOURCE_AGENT", "REASON_EXECUTOR_TERMINATED", "Executor terminated")
    assert "uuid" in failed
    failure = client.next_event("FAILURE", timeout=30)["failure"]
    assert failure == {"agent_id": agent_id, "executor_id": {"value": "ex"}, "status": 3 << 8}
    wait_gone(master)
    assert master.state()["slaves"][0]["used_resources"]["cpus"] == 0   # its own too
    offer = client.next_offers(timeout=30)[0]
    client.launch(offer, [executor_task("t2", offer, executor_info(), data="finish")])
    client.wait_state("t2", "TASK_FINISHED", timeout=30)


def test_executor_that_never_subscribes_is_killed(make_local_master, clients):
    """``--executor_registration_timeout``: destroyed, its task TASK_FAILED
    with REASON_EXECUTOR_REGISTRATION_TIMEOUT (Slave::registerExecutorTimeout)."""
    master = make_local_master(executor_registration_timeout=0.5)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [executor_task("t1", offer, executor_info(command="sleep 60"))])
    failed = client.wait_state("t1", "TASK_FAILED", timeout=30)
    assert (failed["source"], failed["reason"], failed["message"]) == (
        "SOURCE_AGENT", "REASON_EXECUTOR_REGISTRATION_TIMEOUT",
        "Executor did not register within 500ms")
    failure = client.next_event("FAILURE", timeout=30)["failure"]
    assert failure["status"] == 9     # SIGKILL
    wait_gone(master)


def test_teardown_shuts_the_executor_down(make_local_master, clients):
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [executor_task("t1", offer, executor_info())])
    client.wait_state("t1", "TASK_RUNNING", timeout=30)
    sandbox = master.sandbox("t1")
    client.call("TEARDOWN")
    wait_gone(master)
    assert events_of(sandbox)[-1] == {"type": "SHUTDOWN"}


def test_deaf_executor_is_destroyed_after_its_grace_period(make_local_master, clients):
    """SHUTDOWN to an executor that ignores it: destroyed after
    ``shutdown_grace_period`` (Slave::shutdownExecutorTimeout)."""
    master = make_local_master(executor_registration_timeout=0.5)
    client = clients(master)
    offer = client.next_offers()[0]
    executor = executor_info(command="trap '' TERM; sleep 60",
                             shutdown_grace_period={"nanoseconds": 200000000})
    client.launch(offer, [executor_task("t1", offer, executor)])
    client.call("SHUTDOWN", {"agent_id": offer["agent_id"], "executor_id": {"value": "ex"}})
    failure = client.next_event("FAILURE", timeout=30)["failure"]
    assert failure["status"] == 9
    wait_gone(master)


def test_invalid_executor_tasks(make_local_master, clients):
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    no_command = executor_info("a")
    del no_command["command"]
    default = executor_info("b", type="DEFAULT")
    del default["command"]
    foreign = executor_info("c", framework_id={"value": "someone-else"})
    big = executor_info("d", resources=[scalar("cpus", 4)])
    client.launch(offer, [
        executor_task("no-command", offer, no_command),
        executor_task("default", offer, default),
        executor_task("foreign", offer, foreign),
        executor_task("big", offer, big),
        executor_task("first", offer, executor_info("e")),
        executor_task("other", offer, executor_info("e", name="another name")),
        dict(executor_task("negative-grace", offer, executor_info("f")),
             kill_policy={"grace_period": {"nanoseconds": -1}}),
        dict(executor_task("no-resources", offer, executor_info("g")), resources=[]),
        executor_task("negative-shutdown-grace", offer, executor_info(
            "h", shutdown_grace_period={"nanoseconds": "-1e3"})),
    ])
    expected = {
        "no-command": "'ExecutorInfo.command' must be set",
        "default": "'ExecutorInfo.type' must be 'CUSTOM'",
        "foreign": "ExecutorInfo has an invalid FrameworkID (Actual: someone-else vs "
                   "Expected: %s)" % client.framework_id,
        "big": "Total resources cpus:4.1; mem:32 required by task and its executor is more "
               "than available",
        "other": "ExecutorInfo is not compatible with existing ExecutorInfo with same "
                 "ExecutorID",
        # validateTask before validateExecutor (src/master/validation.cpp:1842-1843)
        "negative-grace": "Task's 'kill_policy.grace_period' must be non-negative",
        "no-resources": "Task uses no resources",
        "negative-shutdown-grace": "ExecutorInfo's 'shutdown_grace_period' must be "
                                   "non-negative",
    }
    seen = task_errors(client, len(expected))
    for task_id, text in expected.items():
        assert seen[task_id].startswith(text), (task_id, seen[task_id])


def test_bad_executor_calls(make_local_master, clients):
    """Each answered once with Mesos' wording (Http::executor), the body
    bounded, the connection not held."""
    master = make_local_master(executor_shutdown_grace_period=0.2)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [executor_task("t1", offer, executor_info(command="sleep 60"))])
    url = agent_base(master) + "/api/v1/executor"
    ids = {"framework_id": {"value": client.framework_id}, "executor_id": {"value": "ex"}}

    def post(body, content_type="application/json", **headers):
        if content_type is not None:
            headers["Content-Type"] = content_type
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return requests.post(url, data=data, headers=headers, timeout=10)

    def expect(response, status, text):
        assert (response.status_code, response.text) == (status, text)
        assert int(response.headers["Content-Length"]) == len(response.content)

    expect(post({}, content_type=None), 400, "Expecting 'Content-Type' to be present")
    assert post({}, content_type="text/plain").status_code == 415
    assert post({}, content_type="application/x-protobuf").status_code == 415
    assert post("{", ).text.startswith("Failed to parse body into JSON")
    response = post({"type": "SUBSCRIBE", "subscribe": {}})
    assert response.status_code == 400
    assert response.text.startswith("Failed to convert JSON into Call protobuf")
    expect(post(dict(ids)), 400, "Failed to validate Executor::Call: Expecting 'type' to be "
                                 "present")
    expect(post(dict(ids, type="SUBSCRIBE")), 400,
           "Failed to validate Executor::Call: Expecting 'subscribe' to be present")
    status = {"task_id": {"value": "t1"}, "state": "TASK_RUNNING",
              "uuid": base64.b64encode(uuid.uuid4().bytes).decode()}   # a valid UUID
    expect(post(dict(ids, type="UPDATE", update={"status": status})), 400,
           "Failed to validate Executor::Call: Received Call from executor ex of framework %s "
           "with invalid source, expecting 'SOURCE_EXECUTOR'" % client.framework_id)
    status["source"] = "SOURCE_EXECUTOR"
    expect(post(dict(ids, type="UPDATE", update={"status": dict(status, uuid=b64("x"))})),
           400, "Failed to validate Executor::Call: Not a valid UUID")
    expect(post(dict(ids, type="UPDATE", update={"status": dict(status,
                                                                  state="TASK_STAGING")})),
           400, "Failed to validate Executor::Call: Received TASK_STAGING from executor ex of "
                "framework %s which is not allowed" % client.framework_id)
    expect(post(dict(ids, type="SUBSCRIBE", subscribe={}), Accept="text/html"), 406,
           "Expecting 'Accept' to allow 'application/json' (the local agent does not speak "
           "'application/x-protobuf')")
    expect(post(dict(ids, type="UPDATE", update={"status": status})), 403,
           "Executor is not subscribed")
    expect(post(dict(ids, type="MESSAGE", message={"data": b64("x")},
                     framework_id={"value": "nobody"})), 400, "Framework cannot be found")
    expect(post(dict(ids, type="MESSAGE", message={"data": b64("x")},
                     executor_id={"value": "nobody"})), 400, "Executor cannot be found")
    assert post(dict(ids, type="HEARTBEAT")).status_code == 202
    response = requests.get(url, timeout=10)
    assert response.status_code == 405 and response.headers["Allow"] == "POST"
    client.call("TEARDOWN")
    wait_gone(master)


@pytest.mark.parametrize("seconds, text", [
    (5, "5secs"), (60, "1mins"), (90, "90secs"), (0.5, "500ms"), (1.5, "1500ms"),
    (900, "15mins"), (0, "0ns"), (7200, "2hrs")])
def test_durations_as_stout_writes_them(seconds, text):
    from mesos_local.api.state_json import master_flags
    from mesos_local.durations import stringify_duration
    assert stringify_duration(seconds) == text
    # /flags and /state's flags write them as the executor environment does
    master = types.SimpleNamespace(
        port=5050, work_dir="", allocation_interval=seconds, filter_gpu_resources=True,
        root_submissions=True, authenticates=False, max_operator_event_stream_subscribers=1000,
        master_info=None)
    assert master_flags(master)["allocation_interval"] == text


def test_pymesos_executor_driver(make_local_master, clients, pymesos_path):
    """pymesos' MesosExecutorDriver (``pymesos_executor.py``) runs two tasks
    and echoes a message (pymesos 0.3.15 on http-parser's pure-Python
    parser: fixtures_master.pymesos_path)."""
    # The executor starts from the agent's environment, not this one's.
    path = os.pathsep.join(pymesos_path)
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    script = os.path.join(os.path.dirname(EXECUTOR), "pymesos_executor.py")
    executor = executor_info("pm", command="%s %s" % (sys.executable, script))
    executor["command"]["environment"] = {"variables": [{"name": "PYTHONPATH",
                                                         "value": path}]}
    client.launch(offer, [executor_task("a", offer, executor, data="finish"),
                          executor_task("b", offer, executor)])
    finished = client.wait_state("a", "TASK_FINISHED", timeout=30)
    assert finished["source"] == "SOURCE_EXECUTOR"
    client.wait_state("b", "TASK_RUNNING", timeout=30)
    client.call("MESSAGE", {"agent_id": offer["agent_id"], "executor_id": {"value": "pm"},
                            "data": b64("hi")})
    assert next_message(client)[1] == "echo hi"
    client.kill("b")
    client.wait_state("b", "TASK_KILLED", timeout=30)
    client.call("SHUTDOWN", {"agent_id": offer["agent_id"], "executor_id": {"value": "pm"}})
    assert client.next_event("FAILURE", timeout=30)["failure"]["executor_id"] == {"value": "pm"}
    wait_gone(master)


# --- task groups (LAUNCH_GROUP) ------------------------------------------------------------

def default_executor(executor_id="group", **fields):
    """An ExecutorInfo for Mesos' default executor (its resources as
    ``group::internal::validateExecutor`` asks: cpus, mem and disk)."""
    info = {"executor_id": {"value": executor_id}, "type": "DEFAULT",
            "resources": [scalar("cpus", 0.1), scalar("mem", 32), scalar("disk", 10)]}
    info.update(fields)
    return info


def launch_group(client, offer, executor, tasks):
    """ACCEPT with one LAUNCH_GROUP. Each task with a command carries the
    suite's leak marker in its own environment: a nested container gets
    none of the agent's (``executor_environment``), as on Mesos, so the
    marker must come with the task for the leak checks to see it."""
    for task in tasks:
        if "command" in task:
            variables = task["command"].setdefault("environment", {}).setdefault(
                "variables", [])
            variables.append({"name": MARKER, "value": os.environ[MARKER]})
    return client.call("ACCEPT", {"offer_ids": [offer["id"]], "filters": {"refuse_seconds": 0},
                                  "operations": [{"type": "LAUNCH_GROUP", "launch_group": {
                                      "executor": executor, "task_group": {"tasks": tasks}}}]})


def shared_volume(container_path="shared", path="data"):
    return {"type": "MESOS", "volumes": [{
        "container_path": container_path, "mode": "RW",
        "source": {"type": "SANDBOX_PATH", "sandbox_path": {"type": "PARENT", "path": path}}}]}


def states_until_terminal(client, task_ids, timeout=30):
    """task id -> [its states], read (and acknowledged) until each is terminal."""
    terminal = {"TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST"}
    states = {task_id: [] for task_id in task_ids}
    last = {}
    while any(not states[t] or states[t][-1] not in terminal for t in task_ids):
        status = client.next_update(timeout=timeout)
        if "uuid" in status:
            client.acknowledge(status)
        task_id = status["task_id"]["value"]
        if task_id in states:
            states[task_id].append(status["state"])
            last[task_id] = status
    return states, last


def test_task_group_shares_a_sandbox_volume(make_local_master, clients):
    """Two tasks of one group on the default executor: nested sandboxes
    (containers/<id>, linked from tasks/<task id>), a PARENT SANDBOX_PATH
    volume both see, STARTING/RUNNING/FINISHED from the executor; the
    executor ends with its last task (FAILURE, status 0)."""
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    writer = task_info("writer", offer, "echo shared-data > shared/f",
                       container=shared_volume())
    reader = task_info("reader", offer, "while [ ! -s shared/f ]; do sleep 0.05; done; "
                                        "cat shared/f",
                       container=shared_volume())
    launch_group(client, offer, default_executor(), [writer, reader])
    states, last = states_until_terminal(client, ["writer", "reader"])
    assert states == {"writer": ["TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"],
                      "reader": ["TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"]}
    assert last["reader"]["source"] == "SOURCE_EXECUTOR"
    failure = client.next_event("FAILURE", timeout=30)["failure"]
    assert failure["executor_id"] == {"value": "group"} and failure["status"] == 0
    sandbox = master.sandbox("reader")
    executor_sandbox = sandbox.rpartition("/containers/")[0]
    assert "/executors/group/runs/" in executor_sandbox
    assert os.path.realpath(os.path.join(executor_sandbox, "tasks", "reader")) == sandbox
    assert read_file(os.path.join(sandbox, "stdout")) == "shared-data\n"
    assert read_file(os.path.join(executor_sandbox, "data", "f")) == "shared-data\n"
    wait_gone(master)


def test_a_group_task_gets_the_environment_mesos_default_executor_gives_it(
        make_local_master, clients):
    """A nested container gets none of its executor's environment: no agent
    variables (``executorEnvironment``, --executor_environment_variables),
    since the agent launches it with none (``Http::_launchContainer``,
    src/slave/http.cpp), only MESOS_SANDBOX (``MesosContainerizerProcess::
    _launch``), its CommandInfo's variables, to which the default executor
    adds MESOS_CONTAINER_IP (its own address) and MESOS_ALLOCATION_ROLE
    (``DefaultExecutor::launchGroup``, src/launcher/default_executor.cpp),
    and PATH when unset (launch.cpp); this master's GPU variables too."""
    master = make_local_master(executor_environment=marked_environment(AGENT_SET="agent"))
    client = clients(master)
    offer = client.next_offers()[0]
    task = task_info("env", offer, "/usr/bin/env",
                     env={"MINE": "mine", "MESOS_CONTAINER_IP": "mine"})
    task["command"].update({"shell": False, "arguments": ["env", "-0"]})
    launch_group(client, offer, default_executor(), [task])
    states, _ = states_until_terminal(client, ["env"])
    assert states["env"][-1] == "TASK_FINISHED"
    sandbox = master.sandbox("env")
    output = read_file(os.path.join(sandbox, "stdout"))
    env = dict(item.partition("=")[::2] for item in output.split("\0") if item)
    assert env == {"PATH": DEFAULT_PATH, "MESOS_SANDBOX": sandbox, "MINE": "mine",
                   "MESOS_CONTAINER_IP": "127.0.0.1", "MESOS_ALLOCATION_ROLE": "*",
                   "CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void",
                   MARKER: os.environ[MARKER]}   # launch_group's, as the task's own
    wait_gone(master)


def test_the_suites_leak_check_sees_a_running_group_task(make_local_master, clients):
    """A group task gets no agent variables, so the session's leak check
    (conftest.marked_processes) sees it only by the marker launch_group
    gives it: blind to group tasks otherwise (review rv2)."""
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    launch_group(client, offer, default_executor(), [
        task_info("sleeper", offer, "exec sleep 321")])
    client.wait_state("sleeper", "TASK_RUNNING")
    wait_until(lambda: any(cmd == "sleep 321" for _, cmd in marked_processes()), 30,
               message=lambda: "marked: %s" % marked_processes())
    client.call("KILL", {"task_id": {"value": "sleeper"}, "agent_id": offer["agent_id"]})
    client.wait_state("sleeper", "TASK_KILLED", timeout=30)
    wait_gone(master)


def second_user():
    """``nobody``, the local user the tests switch to."""
    return nobody("switching users needs root").pw_name


def test_a_group_of_another_user_runs_in_sandboxes_given_to_it(make_local_master, clients):
    """A group of a second local user (``nobody``): each nested sandbox is
    that user's (made and given below the executor's sandbox, which the
    user owns: sandbox_dirs.make_sandbox), and so is the PARENT volume."""
    user = second_user()
    master = make_local_master()
    client = clients(master, user=user)
    offer = client.next_offers()[0]
    who = 'id -un; stat -c %%U "$MESOS_SANDBOX" shared/.; touch shared/by-%s'
    launch_group(client, offer, default_executor(), [
        task_info("first", offer, who % "first", container=shared_volume()),
        task_info("second", offer, who % "second", container=shared_volume())])
    states, _ = states_until_terminal(client, ["first", "second"])
    assert {task: seen[-1] for task, seen in states.items()} == {
        "first": "TASK_FINISHED", "second": "TASK_FINISHED"}
    for task_id in ("first", "second"):
        sandbox = master.sandbox(task_id)
        assert read_file(os.path.join(sandbox, "stdout")) == "%s\n%s\n%s\n" % ((user,) * 3)
    executor_sandbox = master.sandbox("first").rpartition("/containers/")[0]
    assert sorted(os.listdir(os.path.join(executor_sandbox, "data"))) == [
        "by-first", "by-second"]
    wait_gone(master)


def test_task_group_shares_its_fate(make_local_master, clients):
    """One task failing kills the rest of its group (TASK_KILLED), as the
    default executor's default restart policy does."""
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    launch_group(client, offer, default_executor(), [
        task_info("bad", offer, "exit 3"), task_info("long", offer, "sleep 60")])
    states, last = states_until_terminal(client, ["bad", "long"])
    assert states["bad"][-1] == "TASK_FAILED" and states["long"][-1] == "TASK_KILLED"
    assert last["bad"]["message"] == "Command exited with status 3"
    assert "reason" not in last["bad"]
    assert client.next_event("FAILURE", timeout=30)["failure"]["status"] == 0
    wait_gone(master)


def test_killing_a_group_task_kills_the_group(make_local_master, clients):
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    launch_group(client, offer, default_executor(), [
        task_info("a", offer, "sleep 60"), task_info("b", offer, "sleep 60")])
    client.wait_state("a", "TASK_RUNNING", timeout=30)
    # The agent plays the default executor: nobody may speak for it.
    forged = {"type": "SUBSCRIBE", "framework_id": {"value": client.framework_id},
              "executor_id": {"value": "group"}, "subscribe": {}}
    response = requests.post(agent_base(master) + "/api/v1/executor", json=forged, timeout=10)
    assert response.status_code == 403 and "default executor" in response.text
    client.kill("a")
    states, _ = states_until_terminal(client, ["a", "b"])
    assert states["a"][-1] == states["b"][-1] == "TASK_KILLED"
    wait_gone(master)


def test_task_group_on_a_custom_executor(make_local_master, clients):
    """A custom executor gets the group in one LAUNCH_GROUP event."""
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    executor = executor_info("custom", type="CUSTOM",
                             resources=[scalar("cpus", 0.1), scalar("mem", 32),
                                        scalar("disk", 10)])
    launch_group(client, offer, executor, [
        task_info("g1", offer, "unused", data=b64("finish")),
        task_info("g2", offer, "unused", data=b64("finish"))])
    client.wait_state("g1", "TASK_FINISHED", timeout=30)
    client.wait_state("g2", "TASK_FINISHED", timeout=30)
    events = events_of(master.sandbox("g1"))
    groups = [e for e in events if e["type"] == "LAUNCH_GROUP"]
    assert len(groups) == 1 and [t["task_id"]["value"] for t in groups[0]["launch_group"][
        "task_group"]["tasks"]] == ["g1", "g2"]
    for event in events:
        schema.validate_message("executor.Event", event)
    client.call("SHUTDOWN", {"agent_id": offer["agent_id"],
                             "executor_id": {"value": "custom"}})
    wait_gone(master)


def test_invalid_task_groups(make_local_master, clients):
    """A group is refused whole: every task TASK_ERROR with the reason."""
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    untyped = default_executor("untyped")
    del untyped["type"]
    cases = [
        (untyped, {}, "'ExecutorInfo.type' must be set"),
        (default_executor("diskless", resources=[scalar("cpus", 0.1), scalar("mem", 32)]), {},
         "Executor 'diskless' uses no disk"),
        (default_executor("commanding", command={"value": "true"}), {},
         "'ExecutorInfo.command' must not be set for 'DEFAULT' executor"),
        (default_executor("huge", resources=[scalar("cpus", 8), scalar("mem", 32),
                                             scalar("disk", 10)]), {},
         "Total resources cpus:8.2; mem:96; disk:10 required by task group and its executor "
         "are more than available"),
        # Each task is validated as LAUNCH's are (src/master/validation.cpp:2180-2186).
        (default_executor(), {"max_completion_time": {"nanoseconds": -1}},
         "Task 'x4' is invalid: Task's `max_completion_time` must be non-negative"),
        (default_executor(), {"health_check": {"type": "TCP"}},
         "Task 'x5' is invalid: Task uses invalid health check: Expecting 'tcp' to be set "
         "for TCP health check"),
        (default_executor(), {"resources": []}, "Task 'x6' is invalid: Task uses no resources"),
    ]
    for index, (executor, fields, _) in enumerate(cases):
        launch_group(client, offer, executor, [
            dict(task_info("x%d" % index, offer, "true"), **fields),
            task_info("y%d" % index, offer, "true")])
        offer = client.next_offers(timeout=30)[0]
    seen = task_errors(client, 2 * len(cases), others=False)
    for index, (_, _, text) in enumerate(cases):
        assert seen["x%d" % index].startswith(text), seen["x%d" % index]
        assert seen["y%d" % index] == seen["x%d" % index]


def test_sandbox_path_volumes_are_checked(make_local_master, clients):
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("plain", offer, "true", container=shared_volume())],
                  filters={"refuse_seconds": 0})
    status = client.next_update("plain", timeout=30)
    assert status["state"] == "TASK_ERROR"
    assert "for the tasks of a task group (LAUNCH_GROUP) only" in status["message"]
    offer = client.next_offers(timeout=30)[0]
    launch_group(client, offer, default_executor(), [
        task_info("escape", offer, "true", container=shared_volume(path="../../x")),
        task_info("fine", offer, "true")])
    for task_id in ("escape", "fine"):
        status = client.next_update(task_id, timeout=30)
        assert status["state"] == "TASK_ERROR"
        assert "path '../../x' must be relative and inside the sandbox" in status["message"]


def test_no_root_submissions_covers_executors_and_groups(make_local_master, clients):
    """With root submissions refused, an executor's ``command.user`` root
    (the local authorizer's RUN_TASK user after the task's own) refuses its
    task, and a group with a task of root is refused whole."""
    user = second_user()
    master = make_local_master(root_submissions=False)
    client = clients(master, user=user)
    offer = client.next_offers()[0]
    executor = executor_info()
    executor["command"]["user"] = "root"
    client.launch(offer, [executor_task("t1", offer, executor)],
                  filters={"refuse_seconds": 0})
    status = client.next_update("t1", timeout=30)
    assert (status["state"], status["reason"]) == ("TASK_ERROR", "REASON_TASK_UNAUTHORIZED")
    assert "under user 'root'" in status["message"]
    offer = client.next_offers(timeout=30)[0]
    as_root = task_info("g-root", offer, "true")
    as_root["command"]["user"] = "root"
    launch_group(client, offer, default_executor(), [task_info("g-user", offer, "true"),
                                                     as_root])
    for task_id in ("g-user", "g-root"):
        status = client.next_update(task_id, timeout=30)
        assert (status["state"], status["reason"]) == ("TASK_ERROR",
                                                       "REASON_TASK_UNAUTHORIZED")
    assert master.state()["slaves"][0]["used_resources"]["cpus"] == 0


def test_executors_are_authenticated_where_the_master_has_credentials(make_local_master,
                                                                      clients):
    """As Mesos' --authenticate_http_executors: each executor's calls carry
    its own token (MESOS_EXECUTOR_AUTHENTICATION_TOKEN); none or another's
    is 401 before the body is read, one executor's token naming another 403."""
    master = make_local_master(credentials={"fw": "secret"})
    client = clients(master, auth=("fw", "secret"))
    offer = client.next_offers()[0]
    client.launch(offer, [executor_task("t1", offer, executor_info("ex")),
                          executor_task("t2", offer, executor_info("ex2"))])
    client.wait_state("t1", "TASK_RUNNING", timeout=30)
    client.wait_state("t2", "TASK_RUNNING", timeout=30)
    env = json.loads(read_file(os.path.join(master.sandbox("t1"), "env.json"), contains="}"))
    token = env["MESOS_EXECUTOR_AUTHENTICATION_TOKEN"]
    url = agent_base(master) + "/api/v1/executor"
    call = {"type": "MESSAGE", "framework_id": {"value": client.framework_id},
            "executor_id": {"value": "ex"}, "message": {"data": b64("x")}}
    for header in (None, "Bearer not-a-token", "Basic " + b64("fw:secret")):
        headers = {"Content-Type": "application/json"}
        if header is not None:
            headers["Authorization"] = header
        response = requests.post(url, json=call, headers=headers, timeout=10)
        assert response.status_code == 401 and response.text == "401 Unauthorized."
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="mesos-agent-executor"'
    bearer = {"Authorization": "Bearer " + token}
    assert requests.post(url, json=call, headers=bearer, timeout=10).status_code == 202
    response = requests.post(url, json=dict(call, executor_id={"value": "ex2"}),
                             headers=bearer, timeout=10)
    assert response.status_code == 403
    assert "does not contain an 'eid' claim with the executor ID ex2" in response.text
    client.call("TEARDOWN")
    wait_gone(master)


def test_an_executor_s_token_is_not_good_for_its_namesake_on_another_agent(make_local_master,
                                                                           clients):
    # One framework, one executor id on two agents: the ids match, the
    # container (Mesos' 'cid' claim) does not.
    from fixtures_master import small_agent
    master = make_local_master(agents=[small_agent(), small_agent()],
                               credentials={"fw": "secret"})
    client = clients(master, auth=("fw", "secret"))
    offers = client.next_offers()
    while len(offers) < 2:
        offers += client.next_offers(timeout=30)
    for index, offer in enumerate(offers[:2]):
        client.launch(offer, [executor_task("t%d" % index, offer, executor_info("ex"))])
    endpoints, tokens = [], []
    for index in range(2):
        client.wait_state("t%d" % index, "TASK_RUNNING", timeout=30)
        env = json.loads(read_file(os.path.join(master.sandbox("t%d" % index), "env.json"),
                                   contains="}"))
        endpoints.append(env["MESOS_AGENT_ENDPOINT"])
        tokens.append(env["MESOS_EXECUTOR_AUTHENTICATION_TOKEN"])
    assert endpoints[0] != endpoints[1]
    call = {"type": "MESSAGE", "framework_id": {"value": client.framework_id},
            "executor_id": {"value": "ex"}, "message": {"data": b64("x")}}
    for own, other in ((0, 1), (1, 0)):
        bearer = {"Authorization": "Bearer " + tokens[own]}
        mine = requests.post("http://%s/api/v1/executor" % endpoints[own], json=call,
                             headers=bearer, timeout=10)
        assert mine.status_code == 202
        forged = requests.post("http://%s/api/v1/executor" % endpoints[other], json=call,
                               headers=bearer, timeout=10)
        assert forged.status_code == 403 and "'cid' claim" in forged.text
    client.call("TEARDOWN")
    wait_gone(master)


def test_removed_agent_takes_its_executors(make_local_master, clients):
    """remove_agent: the custom executor and a task group's processes are
    killed, their tasks lost (TASK_LOST, REASON_AGENT_REMOVED), one FAILURE
    for the agent and none for its executors."""
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    agent_id = offer["agent_id"]["value"]
    client.launch(offer, [executor_task("custom", offer, executor_info())],
                  filters={"refuse_seconds": 0})
    client.wait_state("custom", "TASK_RUNNING", timeout=30)
    offer = client.next_offers(timeout=30)[0]
    launch_group(client, offer, default_executor(), [task_info("grouped", offer, "sleep 60")])
    client.wait_state("grouped", "TASK_RUNNING", timeout=30)
    master.remove_agent(agent_id)
    lost = [client.next_update(timeout=30) for _ in range(2)]
    assert {status["task_id"]["value"] for status in lost} == {"custom", "grouped"}
    assert {(status["state"], status["reason"]) for status in lost} == {
        ("TASK_LOST", "REASON_AGENT_REMOVED")}
    assert client.next_event("FAILURE", timeout=30)["failure"] == {"agent_id": {"value": agent_id}}
    wait_gone(master)
    client.no_event("FAILURE", 0.5)


class ExecutorStream:
    """The test speaking for an executor: a SUBSCRIBE stream read as RecordIO."""

    def __init__(self, master, framework_id, executor_id, subscribe=None):
        host, _, port = agent_base(master).partition("//")[2].rpartition(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        body = {"type": "SUBSCRIBE", "framework_id": {"value": framework_id},
                "executor_id": {"value": executor_id}, "subscribe": subscribe or {}}
        self.conn.request("POST", "/api/v1/executor", json.dumps(body),
                          {"Content-Type": "application/json"})
        self.response = self.conn.getresponse()
        assert self.response.status == 200
        assert self.response.getheader("Content-Type") == "application/json"
        self.decoder = Decoder()
        self.pending = []

    def next(self):
        while not self.pending:
            data = self.response.read1(65536)
            if not data:
                return None
            self.pending.extend(json.loads(record) for record in self.decoder.feed(data))
        event = self.pending.pop(0)
        schema.validate_message("executor.Event", event)
        return event

    def close(self):
        self.conn.close()


def test_resubscription_and_duplicate_updates(make_local_master, clients):
    """The test speaks for an executor whose process only sleeps: a second
    SUBSCRIBE replaces the first stream, carries its unacknowledged updates
    (taken once: a uuid seen before is dropped, still ACKNOWLEDGED)."""
    master = make_local_master(executor_shutdown_grace_period=0.2)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [executor_task("t1", offer, executor_info(command="sleep 60"))])
    first = ExecutorStream(master, client.framework_id, "ex")
    assert first.next()["type"] == "SUBSCRIBED"
    launch = first.next()
    assert launch["type"] == "LAUNCH" and launch["launch"]["task"]["task_id"]["value"] == "t1"
    url = agent_base(master) + "/api/v1/executor"
    ids = {"framework_id": {"value": client.framework_id}, "executor_id": {"value": "ex"}}
    running = {"task_id": {"value": "t1"}, "state": "TASK_RUNNING", "source": "SOURCE_EXECUTOR",
               "uuid": base64.b64encode(uuid.uuid4().bytes).decode()}
    assert requests.post(url, json=dict(ids, type="UPDATE", update={"status": running}),
                         timeout=10).status_code == 202
    acked = first.next()
    assert acked == {"type": "ACKNOWLEDGED", "acknowledged": {
        "task_id": {"value": "t1"}, "uuid": running["uuid"]}}
    status = client.next_update("t1", timeout=30)
    assert (status["state"], status["uuid"]) == ("TASK_RUNNING", running["uuid"])
    client.acknowledge(status)

    finished = dict(running, state="TASK_FINISHED",
                    uuid=base64.b64encode(uuid.uuid4().bytes).decode())
    second = ExecutorStream(master, client.framework_id, "ex", subscribe={
        "unacknowledged_updates": [{"status": running}, {"status": finished}]})
    assert first.next() is None             # the first stream ends
    assert second.next()["type"] == "SUBSCRIBED"
    assert [second.next()["acknowledged"]["uuid"] for _ in range(2)] == [
        running["uuid"], finished["uuid"]]
    status = client.next_update("t1", timeout=30)
    assert (status["state"], status["uuid"]) == ("TASK_FINISHED", finished["uuid"])
    client.acknowledge(status)
    client.no_event("UPDATE", 0.5)          # the RUNNING sent again was not forwarded
    first.close()
    second.close()
    client.call("SHUTDOWN", {"agent_id": offer["agent_id"], "executor_id": {"value": "ex"}})
    wait_gone(master)


def test_command_line_executor_flags():
    from mesos_local import command_line
    parser = command_line.build_parser()
    args = parser.parse_args(["--no-docker", "--executor-registration-timeout", "2.5",
                              "--executor-shutdown-grace-period", "0"])
    master = command_line.make_master(args, {})
    assert (master.executor_registration_timeout, master.executor_shutdown_grace_period) == (
        2.5, 0.0)
    defaults = command_line.make_master(parser.parse_args(["--no-docker"]), {})
    assert (defaults.executor_registration_timeout,
            defaults.executor_shutdown_grace_period) == (60.0, 5.0)
    master.stop()
    defaults.stop()
    with pytest.raises(SystemExit):
        parser.parse_args(["--executor-registration-timeout", "nan"])


def _memory_limit(master, name):
    """memory.limit_in_bytes (v1) or memory.max (v2) of the cgroup ``name``, or None."""
    layout = master.isolator.layout
    memory = os.path.join(master.isolator.directories[layout.roots["cgroups/mem"][0]], name)
    for filename in ("memory.limit_in_bytes", "memory.max"):
        path = os.path.join(memory, filename)
        if os.path.exists(path):
            return int(open(path).read().strip())
    return None


@pytest.mark.skipif(isolation_problem() is not None, reason=str(isolation_problem()))
def test_executor_cgroups_hold_it_and_its_live_tasks(make_local_master, clients):
    """Under cgroups/mem an executor's container is limited to its own and
    its live tasks' mem (Slave::computeExecutorLimits), resized as they come
    and go."""
    master = make_local_master(isolation="cgroups/mem")
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [executor_task("t1", offer, executor_info()),
                          dict(executor_task("t2", offer, executor_info()),
                               resources=[scalar("cpus", 0.1), scalar("mem", 64)])])
    client.wait_state("t1", "TASK_RUNNING", timeout=30)
    client.wait_state("t2", "TASK_RUNNING", timeout=30)
    wait_until(lambda: _memory_limit(master, "ex") == (32 + 32 + 64) << 20,
               message=lambda: "memory limit %s" % _memory_limit(master, "ex"))
    client.kill("t2")
    client.wait_state("t2", "TASK_KILLED", timeout=30)
    wait_until(lambda: _memory_limit(master, "ex") == (32 + 32) << 20,
               message=lambda: "memory limit %s" % _memory_limit(master, "ex"))
    client.call("TEARDOWN")
    wait_gone(master)



def volume_below_shared(task_sandbox, parent):
    """The agent prepares a task's (sandbox ``task_sandbox``) SANDBOX_PATH
    volume ``shared/new`` of the executor's sandbox ``parent``
    (``Executors._sandbox_volumes``)."""
    from types import SimpleNamespace

    from mesos_local.executors import Executors
    task = SimpleNamespace(sandbox=str(task_sandbox), plan=SimpleNamespace(
        user=None, sandbox_volumes=[("PARENT", "shared/new", "volume")]))
    agent_side = SimpleNamespace(launcher=SimpleNamespace(
        user_switch=SimpleNamespace(task_user=lambda user: None)))
    Executors._sandbox_volumes(agent_side, SimpleNamespace(info={}),
                               SimpleNamespace(sandbox=str(parent)), task)


def test_a_sandbox_path_volume_never_leads_out_through_a_task_s_link(tmp_path):
    # A group task owns the executor's sandbox: a link it planted there must
    # not make the agent (root) create and chown a directory elsewhere.
    parent, outside = tmp_path / "executor", tmp_path / "outside"
    (tmp_path / "task").mkdir()
    parent.mkdir()
    outside.mkdir()
    (parent / "shared").symlink_to(outside)
    with pytest.raises(OSError, match="leads out of the sandbox"):
        volume_below_shared(tmp_path / "task", parent)
    assert not (outside / "new").exists()


def test_a_sandbox_path_volume_never_follows_a_link_planted_after_a_check(tmp_path,
                                                                         monkeypatch):
    # A task of an earlier group swaps 'shared' (a directory when the agent
    # looks) for a link out while the agent prepares a volume below it.
    parent, outside = tmp_path / "executor", tmp_path / "outside"
    (tmp_path / "task").mkdir()
    (parent / "shared").mkdir(parents=True)
    outside.mkdir()
    swapped = []

    def swap():
        if not swapped:
            swapped.append(True)
            (parent / "shared").rename(parent / "was-shared")
            (parent / "shared").symlink_to(outside)

    realpath, mkdir = os.path.realpath, os.mkdir

    def realpath_then_swap(path, *args, **kwargs):
        resolved = realpath(path, *args, **kwargs)
        swap()
        return resolved

    def swap_then_mkdir(*args, **kwargs):
        swap()
        return mkdir(*args, **kwargs)

    monkeypatch.setattr(os.path, "realpath", realpath_then_swap)
    monkeypatch.setattr(os, "mkdir", swap_then_mkdir)
    with pytest.raises(OSError, match="leads out of the sandbox"):
        volume_below_shared(tmp_path / "task", parent)
    monkeypatch.undo()
    assert swapped and not (outside / "new").exists()
