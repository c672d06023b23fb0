"""Embedded agents that answer where they say they are (issue 34, item 3):
each agent's one HTTP server is the address ``/master/state``,
``/master/slaves``, the operator's ``GET_AGENTS`` and offers name, and it
serves there what a Mesos agent serves (src/slave/http.cpp;
docs/agent-http-api.md, docs/endpoints/slave/state.md): ``/state``,
``/slave(1)/state``, ``/monitor/statistics``, ``/files/*`` and the agent v1
API's read calls. Plain ``sleep``/``echo`` tasks only.
"""

import base64
import importlib.util
import json
import os
import socket
import stat

import pytest
import requests
from fixtures_master import clients, launch_running, make_local_master, read_file
from mesos_http_client import task_info
from operator_helpers import _Reader, get, raw_request, read_head, read_reply
from waiting import wait_until

from mesos_local.agent import AgentSpec
from mesos_local.api import proto
from mesos_local.api.files import virtual_path
from mesos_local.api.validation import validate_message

JSON = {"Content-Type": "application/json"}
AGENTS = [AgentSpec(hostname="node-a", cpus=1, mem=256, disk=64, gpus=0),
          AgentSpec(hostname="node-b", cpus=1, mem=256, disk=64, gpus=0)]


def agent_call(base, call, path="/api/v1", **kwargs):
    data = call if isinstance(call, bytes) else json.dumps(call)
    return requests.post(base + path, data=data, headers=dict(JSON, **kwargs.pop("headers", {})),
                         timeout=10, **kwargs)


def agent_get(base, call):
    reply = agent_call(base, call)
    assert reply.status_code == 200, (call, reply.status_code, reply.text)
    document = reply.json()
    assert document["type"] == call["type"]
    return document[call["type"].lower()]


def bases(master):
    """{agent id: http://host:port} from /master/state's pids."""
    return {agent["id"]: "http://" + agent["pid"].rpartition("@")[2]
            for agent in master.state()["slaves"]}


def test_agents_listen_where_the_master_says(make_local_master):
    master = make_local_master(agents=AGENTS)
    state = master.state()
    slaves = {agent["id"]: agent for agent in state["slaves"]}
    listed = {agent["id"]: agent for agent in requests.get(
        master.url + "/master/slaves", timeout=10).json()["slaves"]}
    operator = {agent["agent_info"]["id"]["value"]: agent
                for agent in get(master, "GET_AGENTS")["agents"]}
    assert len(slaves) == 2 and set(slaves) == set(listed) == set(operator)
    ports = set()
    for agent_id, slave in slaves.items():
        host_port = slave["pid"].rpartition("@")[2]
        assert slave["pid"] == listed[agent_id]["pid"] == operator[agent_id]["pid"]
        assert slave["pid"].startswith("slave(1)@")
        port = int(host_port.rpartition(":")[2])
        assert slave["port"] == operator[agent_id]["agent_info"]["port"] == port != master.port
        ports.add(port)
        for path in ("/state", "/slave(1)/state", "/state.json", "/slave(1)/state/"):
            own = requests.get("http://%s%s" % (host_port, path), timeout=10)
            assert own.status_code == 200, (path, own.text)
            document = own.json()
            assert (document["id"], document["pid"]) == (agent_id, slave["pid"])
            assert document["hostname"] == slave["hostname"]
            assert document["resources"]["cpus"] == 1
        health = agent_get("http://" + host_port, {"type": "GET_HEALTH"})
        assert health == {"healthy": True}
    assert len(ports) == 2


def test_a_running_task_on_its_agent(make_local_master, clients):
    master = make_local_master(agents=AGENTS)
    client = clients(master)
    offer = client.next_offers()[0]
    agent_id = offer["agent_id"]["value"]
    base = bases(master)[agent_id]
    other = next(url for other_id, url in bases(master).items() if other_id != agent_id)
    url = offer["url"]["address"]
    assert "http://%s:%d" % (url["ip"], url["port"]) == base   # Offer.url names it too
    client.launch(offer, [task_info("sleeper", offer, "echo hello-agent; exec sleep 60")],
                  filters={"refuse_seconds": 0})
    client.wait_state("sleeper", "TASK_RUNNING")
    framework_id = client.framework_id

    state = requests.get(base + "/state", timeout=10).json()
    [framework] = state["frameworks"]
    assert framework["id"] == framework_id
    [executor] = framework["executors"]
    assert executor["id"] == executor["source"] == "sleeper"
    assert executor["directory"] == master.sandbox("sleeper")
    assert [task["id"] for task in executor["tasks"]] == ["sleeper"]
    assert executor["tasks"][0]["state"] == "TASK_RUNNING"
    assert requests.get(other + "/state", timeout=10).json()["frameworks"] == []

    def measured():
        # TASK_RUNNING comes as the task's process starts: its shell may still
        # be exec'ing sleep, whose resident memory /proc then reads as 0.
        [stats] = requests.get(base + "/monitor/statistics", timeout=10).json()
        return stats if stats["statistics"].get("mem_rss_bytes") else None
    stats = wait_until(measured, 30, message="the sleeper's memory was never measured")
    assert (stats["executor_id"], stats["framework_id"]) == ("sleeper", framework_id)
    numbers = stats["statistics"]
    assert numbers["cpus_limit"] == 0.1 and numbers["mem_limit_bytes"] == 32 << 20
    assert numbers["mem_rss_bytes"] > 0 and numbers["timestamp"] > 0
    assert numbers["cpus_user_time_secs"] >= 0 and numbers["cpus_system_time_secs"] >= 0
    assert requests.get(other + "/monitor/statistics", timeout=10).json() == []

    tasks = agent_get(base, {"type": "GET_TASKS"})
    assert [t["task_id"]["value"] for t in tasks["launched_tasks"]] == ["sleeper"]
    [container] = agent_get(base, {"type": "GET_CONTAINERS"})["containers"]
    assert container["executor_id"]["value"] == "sleeper"
    assert container["framework_id"]["value"] == framework_id
    assert container["resource_statistics"]["mem_rss_bytes"] > 0
    frameworks = agent_get(base, {"type": "GET_FRAMEWORKS"})["frameworks"]
    assert [f["framework_info"]["id"]["value"] for f in frameworks] == [framework_id]
    executors = agent_get(base, {"type": "GET_EXECUTORS"})["executors"]
    assert [e["executor_info"]["executor_id"]["value"] for e in executors] == ["sleeper"]
    whole = agent_get(base, {"type": "GET_STATE"})
    assert whole["get_tasks"] == agent_get(base, {"type": "GET_TASKS"})

    sandbox = virtual_path(framework_id, "sleeper")
    listed = agent_get(base, {"type": "LIST_FILES", "list_files": {"path": sandbox}})
    names = {info["path"].rpartition("/")[2] for info in listed["file_infos"]}
    assert {"stdout", "stderr"} <= names
    read = agent_get(base, {"type": "READ_FILE",
                            "read_file": {"path": sandbox + "/stdout", "offset": 0}})
    assert b"hello-agent\n" in base64.b64decode(read["data"])
    assert requests.get(base + "/files/read", params={"path": sandbox + "/stdout", "offset": 0},
                        timeout=10).json()["data"].find("hello-agent") >= 0
    # Only its own sandboxes: the other agent has none of them.
    assert agent_call(other, {"type": "READ_FILE", "read_file": {
        "path": sandbox + "/stdout", "offset": 0}}).status_code == 404

    client.kill("sleeper")
    client.wait_state("sleeper", "TASK_KILLED")
    done = agent_get(base, {"type": "GET_TASKS"})
    assert done["launched_tasks"] == []
    assert [t["task_id"]["value"] for t in done["completed_tasks"]] == ["sleeper"]
    assert requests.get(base + "/monitor/statistics", timeout=10).json() == []


@pytest.mark.parametrize("body, status, words", [
    ({"type": "LAUNCH_CONTAINER"}, 501, "Call type LAUNCH_CONTAINER is not supported"),
    ({"type": "UNKNOWN"}, 501, ""),
    (b"{not json", 400, "Failed to parse body into JSON"),
    ({"type": "NO_SUCH_CALL"}, 400, "Failed to convert JSON into Call protobuf"),
    ({}, 400, "Expecting 'type' to be present"),
    ({"type": "READ_FILE"}, 400, "Expecting 'read_file' to be present"),
    ({"type": "READ_FILE", "read_file": {"path": "/x", "offset": -1}}, 400, "Not a uint64"),
    ({"type": "LIST_FILES", "list_files": {"path": "/nowhere"}}, 404, ""),
])
def test_bad_calls_are_refused_as_mesos_refuses_them(make_local_master, body, status, words):
    master = make_local_master(agents=AGENTS[:1])
    [base] = bases(master).values()
    reply = agent_call(base, body)
    assert reply.status_code == status, reply.text
    assert words in reply.text


def test_content_types_methods_and_paths(make_local_master):
    master = make_local_master(agents=AGENTS[:1])
    [base] = bases(master).values()
    health = json.dumps({"type": "GET_HEALTH"})
    assert requests.post(base + "/api/v1", data=health, timeout=10).status_code == 400
    reply = requests.post(base + "/api/v1", data=health, timeout=10,   # JSON, not protobuf
                          headers={"Content-Type": "application/x-protobuf"})
    assert (reply.status_code, reply.text) == (400, "Failed to parse body into a protobuf object")
    reply = requests.post(base + "/api/v1", data=health, timeout=10,
                          headers={"Content-Type": "application/recordio"})
    assert reply.status_code == 415
    reply = agent_call(base, {"type": "GET_HEALTH"}, headers={"Accept": "text/html"})
    assert reply.status_code == 406
    assert requests.get(base + "/api/v1", timeout=10).status_code == 405
    assert agent_call(base, {"type": "GET_HEALTH"}, path="/slave(1)/api/v1").status_code == 200
    assert requests.get(base + "/master/state", timeout=10).status_code == 404
    assert requests.get(base + "/nothing/here", timeout=10).status_code == 404


def test_a_call_s_body_is_parsed_once(make_local_master, monkeypatch):
    """The agent reads a POST /api/v1 body once, whichever call it holds
    (it read it twice: once to see whether it was ATTACH_CONTAINER_OUTPUT)."""
    from mesos_local.api import json_body
    master = make_local_master(agents=AGENTS[:1])
    [base] = bases(master).values()
    parsed = []
    parse = json_body.parse
    monkeypatch.setattr(json_body, "parse", lambda body: parsed.append(body) or parse(body))
    assert agent_call(base, {"type": "GET_HEALTH"}).status_code == 200
    assert agent_call(base, attach_body("no-such-container")).status_code == 404
    assert len(parsed) == 2
    if importlib.util.find_spec("google.protobuf") is not None:
        decoded = []
        decode = proto.decode
        monkeypatch.setattr(proto, "decode",
                            lambda message, body: decoded.append(body) or decode(message, body))
        body = proto.encode("mesos.v1.agent.Call", {"type": "GET_HEALTH"})
        reply = requests.post(base + "/api/v1", data=body, timeout=10,
                              headers={"Content-Type": "application/x-protobuf"})
        assert reply.status_code == 200 and len(decoded) == 1


def test_version_and_flags_as_a_mesos_agent_answers_them(make_local_master):
    """GET_VERSION, GET_FLAGS (pymesos' MesosOperatorAgentDriver calls both:
    501 before) and ``/flags``, as ``Http::getVersion``, ``Http::getFlags``
    and ``Http::flags`` answer (src/slave/http.cpp): ``version()`` as the
    master's, the agent's flags (those ``/state`` lists) in name order;
    protobuf too."""
    master = make_local_master(agents=AGENTS[:1])
    [base] = bases(master).values()
    version = agent_get(base, {"type": "GET_VERSION"})["version_info"]
    assert version == get(master, "GET_VERSION")["version_info"]
    flags = agent_get(base, {"type": "GET_FLAGS"})["flags"]
    assert [f["name"] for f in flags] == sorted(f["name"] for f in flags)
    named = {f["name"]: f["value"] for f in flags}
    assert named["port"] == base.rpartition(":")[2] and named["hostname"] == "node-a"
    assert requests.get(base + "/state", timeout=10).json()["flags"] == named
    for path in ("/flags", "/slave(1)/flags"):
        assert requests.get(base + path, timeout=10).json() == {"flags": named}
    for kind in ("GET_VERSION", "GET_FLAGS"):
        reply = agent_call(base, {"type": kind}, headers={"Accept": proto.PROTOBUF_TYPE})
        assert reply.headers["Content-Type"] == proto.PROTOBUF_TYPE
        assert proto.decode(proto.AGENT_RESPONSE, reply.content) == agent_call(
            base, {"type": kind}).json()


def test_authentication_follows_the_master(make_local_master):
    master = make_local_master(agents=AGENTS[:1], credentials={"alice": "s3cret"})
    [base] = bases(master).values()
    assert requests.get(base + "/state", timeout=10).status_code == 200   # a read endpoint
    refused = agent_call(base, {"type": "GET_HEALTH"})
    assert refused.status_code == 401 and refused.text == "401 Unauthorized."
    assert refused.headers["WWW-Authenticate"] == 'Basic realm="mesos-agent-readwrite"'
    assert agent_call(base, {"type": "GET_HEALTH"}, auth=("alice", "s3cret")).status_code == 200
    refused = requests.get(base + "/files/browse", params={"path": "/x"}, timeout=10)
    assert refused.status_code == 401 and refused.text == "401 Unauthorized."
    assert refused.headers["WWW-Authenticate"] == 'Basic realm="mesos-agent-readonly"'


def test_an_added_agent_listens_before_it_is_announced(make_local_master):
    master = make_local_master(agents=AGENTS[:1])
    added = master.add_agent(AgentSpec(hostname="node-c", cpus=1, mem=128, disk=8, gpus=0))
    base = bases(master)[added]
    assert requests.get(base + "/state", timeout=10).json()["id"] == added
    [agent] = [a for a in get(master, "GET_AGENTS")["agents"]
               if a["agent_info"]["id"]["value"] == added]
    assert agent["pid"] == "slave(1)@" + base.partition("//")[2]


def test_idle_clients_are_cut_off(make_local_master):
    master = make_local_master(agents=AGENTS[:1])
    [base] = bases(master).values()
    host, port = base.partition("//")[2].rsplit(":", 1)
    for server in master._agent_servers:
        server.request_deadline = 0.5
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"POST /api/v1 HTTP/1.1\r\nContent-Length: 10\r\n\r\n{")
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408")


def files_read(base, path):
    """The text of ``path`` through ``/files/read`` (None: 404)."""
    reply = requests.get(base + "/files/read", params={"path": path, "offset": 0}, timeout=10)
    if reply.status_code == 404:
        return None
    assert reply.status_code == 200, (path, reply.status_code, reply.text)
    return reply.json()["data"]


def test_sandboxes_are_laid_out_as_mesos_lays_them_out(make_local_master, clients):
    """src/slave/paths.cpp: ``<work_dir>/slaves/<agent>/frameworks/<fw>/
    executors/<executor>/runs/<container>`` (a command task's executor id is
    its task id), ``runs/latest`` the newest run; the agent attaches each
    run's real path, ``runs/latest`` and the virtual path (Framework::
    addExecutor, src/slave/slave.cpp), so a tool that reads ``directory``
    from ``/state`` finds ``<directory>/stdout``."""
    master = make_local_master(agents=AGENTS[:1])
    client = clients(master)
    [base] = bases(master).values()
    directories = []
    for word in ("first", "second"):      # one task id, run twice
        offer = client.next_offers()[0]
        client.launch(offer, [task_info("echoer", offer, "echo %s-run" % word)],
                      filters={"refuse_seconds": 0})
        client.wait_state("echoer", "TASK_FINISHED")
        state = requests.get(base + "/state", timeout=10).json()
        [framework] = state["frameworks"]
        executors = framework["completed_executors"]
        assert [e["id"] for e in executors] == ["echoer"] * len(executors)
        executor = executors[-1]
        expected = os.path.join(state["flags"]["work_dir"], "slaves", state["id"], "frameworks",
                                client.framework_id, "executors", "echoer", "runs",
                                executor["container"])
        assert executor["directory"] == expected == master.sandbox("echoer")
        # The master's /state names it too (its tasks' own ``sandbox``).
        [done] = [t for t in master.state()["frameworks"][0]["completed_tasks"]
                  if t["statuses"][0]["container_status"]["container_id"]["value"]
                  == executor["container"]]
        assert done["sandbox"] == expected
        directories.append(expected)
    first, second = directories
    assert first != second
    runs = os.path.dirname(second)
    assert os.readlink(os.path.join(runs, "latest")) == second
    assert sorted(os.listdir(runs)) == sorted(["latest", os.path.basename(first),
                                               os.path.basename(second)])
    # Every run by its real path; the latest by runs/latest and the virtual path.
    assert files_read(base, first + "/stdout") == "first-run\n"
    assert files_read(base, second + "/stdout") == "second-run\n"
    assert files_read(base, runs + "/latest/stdout") == "second-run\n"
    virtual = virtual_path(client.framework_id, "echoer")
    assert files_read(base, virtual + "/stdout") == "second-run\n"
    read = agent_get(base, {"type": "READ_FILE", "read_file": {"path": first + "/stdout",
                                                                "offset": 0}})
    assert base64.b64decode(read["data"]) == b"first-run\n"
    listed = agent_get(base, {"type": "LIST_FILES", "list_files": {"path": first}})
    assert {info["path"] for info in listed["file_infos"]} >= {first + "/stdout",
                                                                first + "/stderr"}
    browsed = requests.get(base + "/files/browse", params={"path": runs + "/latest"},
                           timeout=10).json()
    assert runs + "/latest/stdout" in {info["path"] for info in browsed}
    # Not the master: a Mesos master attaches no sandbox (src/master/master.cpp).
    assert files_read(master.url, first + "/stdout") is None
    # Nothing else is attached: the executor's directory, a run that is
    # not one, the agent's work_dir, a path that leaves the run.
    for path in (os.path.dirname(runs) + "/runs", runs + "/nothing/stdout",
                 state["flags"]["work_dir"], os.path.dirname(first) + "/x/../latest/stdout"):
        assert files_read(base, path) is None, path
    escape = requests.get(base + "/files/read", params={"path": first + "/../../../../x",
                                                        "offset": 0}, timeout=10)
    assert escape.status_code in (400, 404)


# -- ATTACH_CONTAINER_OUTPUT ------------------------------------------------------------

RECORDIO = (("Content-Type", "application/json"), ("Accept", "application/recordio"),
            ("Message-Accept", "application/json"))


def attach_body(container_id):
    return json.dumps({"type": "ATTACH_CONTAINER_OUTPUT", "attach_container_output": {
        "container_id": {"value": container_id}}}).encode()


class OutputReader:
    """An ATTACH_CONTAINER_OUTPUT stream read the hard way (one socket, the
    chunked body and the RecordIO records split by hand)."""

    def __init__(self, base, container_id, headers=RECORDIO, **kwargs):
        self.sock = raw_request(base, "/api/v1", attach_body(container_id), headers, **kwargs)
        self.reader = _Reader(self.sock)
        self.status, self.headers = read_head(self.reader)
        self.pending = b""
        self.output = {"STDOUT": b"", "STDERR": b""}
        self.seen = []           # every record
        self.ended = False

    def records(self):
        """The records of the next chunk ([] at the terminating chunk)."""
        size = int(self.reader.line(), 16)
        if size == 0:
            self.reader.line()
            self.ended = True
            return []
        self.pending += self.reader.exactly(size)
        self.reader.line()
        out = []
        while b"\n" in self.pending:
            header, rest = self.pending.split(b"\n", 1)
            if len(rest) < int(header):
                break
            out.append(json.loads(rest[:int(header)]))
            self.pending = rest[int(header):]
        self.seen += out
        for record in out:
            if record["type"] == "DATA":
                data = record["data"]
                self.output[data["type"]] += base64.b64decode(data["data"])
        return out

    def until(self, predicate):
        while not predicate(self) and not self.ended:
            self.records()
        return self

    def close(self):
        self.sock.close()


def container_of(base, task_id):
    state = requests.get(base + "/state", timeout=10).json()
    return next(e["container"] for f in state["frameworks"] for e in f["executors"]
                if e["id"] == task_id)


def agent_server(master):
    [server] = master._agent_servers
    return server


def test_attach_container_output_streams_what_the_container_writes_after_the_call(
        make_local_master, clients):
    master = make_local_master(agents=AGENTS[:1])
    client = clients(master)
    [base] = bases(master).values()
    command = ("echo before; until [ -e go ]; do sleep 0.02; done; echo out-line; "
               "echo err-line >&2; until [ -e stop ]; do sleep 0.02; done; echo last")
    launch_running(client, master, "talker", command)
    sandbox = master.sandbox("talker")
    read_file(os.path.join(sandbox, "stdout"), contains="before")
    container_id = container_of(base, "talker")
    stream = OutputReader(base, container_id)
    try:
        assert stream.status == 200
        assert stream.headers["content-type"] == "application/recordio"
        assert stream.headers["message-content-type"] == "application/json"
        assert stream.headers["transfer-encoding"] == "chunked"
        wait_until(lambda: agent_server(master).output_streams)   # attached: now write
        open(os.path.join(sandbox, "go"), "w").close()
        stream.until(lambda s: s.output["STDOUT"] == b"out-line\n"
                     and s.output["STDERR"] == b"err-line\n")
        assert not stream.ended
        open(os.path.join(sandbox, "stop"), "w").close()
        stream.until(lambda s: False)       # the container ends, so does the stream
        assert stream.ended
        # What was written before the call is not sent, as Mesos sends it.
        assert stream.output == {"STDOUT": b"out-line\nlast\n", "STDERR": b"err-line\n"}
    finally:
        stream.close()
    client.wait_state("talker", "TASK_FINISHED")
    wait_until(lambda: not agent_server(master).output_streams)
    # An ended container is not found any more (Slave::getExecutor: live ones).
    reply = agent_call(base, json.loads(attach_body(container_id)))
    assert reply.status_code == 404
    assert reply.text == "Container %s cannot be found" % container_id


def test_attach_without_accept_answers_json_records_and_a_second_client_too(
        make_local_master, clients):
    master = make_local_master(agents=AGENTS[:1])
    client = clients(master)
    [base] = bases(master).values()
    launch_running(client, master, "ticker", "until [ -e stop ]; do echo tick; sleep 0.05; done")
    container_id = container_of(base, "ticker")
    agent_server(master).attach_heartbeat_interval = 0.1
    plain = OutputReader(base, container_id, headers=(("Content-Type", "application/json"),))
    other = OutputReader(base, container_id)
    try:
        # For backwards compatibility Mesos answers application/json (Http::api).
        assert plain.status == 200 and plain.headers["content-type"] == "application/json"
        assert "message-content-type" not in plain.headers
        beat = {"type": "CONTROL", "control": {"type": "HEARTBEAT", "heartbeat": {
            "interval": {"nanoseconds": 100000000}}}}
        for stream in (plain, other):
            stream.until(lambda s: s.output["STDOUT"].count(b"tick\n") >= 2 and beat in s.seen)
            assert set(stream.output["STDOUT"].split(b"\n")) <= {b"tick", b""}
        open(os.path.join(master.sandbox("ticker"), "stop"), "w").close()
        for stream in (plain, other):
            stream.until(lambda s: False)
            assert stream.ended
    finally:
        plain.close()
        other.close()


def test_attach_refusals_hold_nothing_open(make_local_master, clients):
    master = make_local_master(agents=AGENTS[:1])
    client = clients(master)
    [base] = bases(master).values()
    launch_running(client, master, "quiet", "exec sleep 60")
    container_id = container_of(base, "quiet")
    good = json.loads(attach_body(container_id))
    cases = [
        (attach_body("no-such-container"), (), 404, "Container no-such-container cannot be found"),
        (json.dumps({"type": "ATTACH_CONTAINER_OUTPUT"}).encode(), (), 400,
         "Expecting 'attach_container_output' to be present"),
        (attach_body("a.b"), (), 400,
         "'attach_container_output.container_id' is invalid: 'ContainerID.value' 'a.b' "
         "contains invalid characters"),
        (json.dumps({"type": "ATTACH_CONTAINER_OUTPUT", "attach_container_output": {}}).encode(),
         (), 400, "Missing required fields"),
        (json.dumps(good).encode(), (("Accept", "text/html"),), 406,
         "Expecting 'Accept' to allow application/json or application/x-protobuf or "
         "application/recordio"),
        (json.dumps(good).encode(), (("Accept", "application/recordio"),
                                     ("Message-Accept", "text/html")), 406,
         "Expecting 'Message-Accept' to allow application/json or application/x-protobuf"),
        (json.dumps(good).encode(), (("Accept", "application/json"),
                                     ("Message-Accept", "application/json")), 406,
         "Expecting 'Message-Accept' to be not set for non-streaming responses"),
        (json.dumps(good).encode(), (("Message-Content-Type", "application/json"),), 415,
         "Expecting 'Message-Content-Type' to be not set for non-streaming requests"),
        # Http::_api: RecordIO only for the calls that stream.
        (json.dumps({"type": "GET_HEALTH"}).encode(), (("Accept", "application/recordio"),), 406,
         "Streaming response is not supported for GET_HEALTH call"),
        (json.dumps({"type": "LAUNCH_NESTED_CONTAINER_SESSION",
                     "launch_nested_container_session": {"container_id": {"value": "x"}}}).encode(),
         (("Accept", "application/recordio"),), 501,
         "Call type LAUNCH_NESTED_CONTAINER_SESSION is not supported by the local agent"),
    ]
    for body, headers, status, words in cases:
        answer, head, text = read_reply(base, "/api/v1", body,
                                        (("Content-Type", "application/json"),) + headers)
        assert (answer, text.decode()) == (status, words) or (
            answer == status and words in text.decode()), (headers, answer, text)
        assert int(head["content-length"]) == len(text)      # a whole answer, not a stream
    assert not agent_server(master).output_streams
    client.kill("quiet")
    client.wait_state("quiet", "TASK_KILLED")


def test_attach_clients_that_read_nothing_or_hang_up_are_let_go(make_local_master, clients):
    """Nothing is buffered for a client: the files are read as fast as it
    takes them, and one that takes nothing for attach_write_timeout is
    dropped; one that hangs up while the container is silent is noticed."""
    master = make_local_master(agents=AGENTS[:1])
    server = agent_server(master)
    server.attach_write_timeout = 0.5
    client = clients(master)
    [base] = bases(master).values()
    flood = ("until [ -e go ]; do sleep 0.02; done; "
             "python3 -c \"import sys; [sys.stdout.write('x' * 65536) for _ in range(512)]\"; "
             "exec sleep 60")
    launch_running(client, master, "flood", flood)
    container_id = container_of(base, "flood")
    silent = OutputReader(base, container_id, receive_buffer=4096)   # never read
    try:
        assert silent.status == 200
        wait_until(lambda: server.output_streams)
        open(os.path.join(master.sandbox("flood"), "go"), "w").close()
        wait_until(lambda: server.dropped_outputs == 1, timeout=60,
                   message=lambda: "still streaming: %d" % len(server.output_streams))
        wait_until(lambda: not server.output_streams)
    finally:
        silent.close()
    # One that hangs up on a container that writes nothing more.
    gone = OutputReader(base, container_id)
    wait_until(lambda: server.output_streams)
    gone.sock.shutdown(socket.SHUT_RDWR)
    gone.close()
    wait_until(lambda: not server.output_streams)
    assert server.dropped_outputs == 1
    client.kill("flood")
    client.wait_state("flood", "TASK_KILLED")


def test_attach_in_protobuf(make_local_master, clients):
    """A protobuf call, and records in protobuf as Message-Accept asks
    (mesos.v1.agent.ProcessIO of the vendored agent.proto)."""
    proto = pytest.importorskip("mesos_local.api.proto")
    pytest.importorskip("google.protobuf")
    master = make_local_master(agents=AGENTS[:1])
    client = clients(master)
    [base] = bases(master).values()
    launch_running(client, master, "pb", "until [ -e stop ]; do echo pb-line; sleep 0.05; done")
    container_id = container_of(base, "pb")
    body = proto.encode("mesos.v1.agent.Call", json.loads(attach_body(container_id)))
    headers = (("Content-Type", "application/x-protobuf"), ("Accept", "application/recordio"),
               ("Message-Accept", "application/x-protobuf"))
    sock = raw_request(base, "/api/v1", body, headers)
    try:
        reader = _Reader(sock)
        status, head = read_head(reader)
        assert status == 200
        assert head["message-content-type"] == "application/x-protobuf"
        pending, seen = b"", b""
        while b"pb-line\npb-line\n" not in seen:
            size = int(reader.line(), 16)
            pending += reader.exactly(size)
            reader.line()
            while b"\n" in pending:
                header, rest = pending.split(b"\n", 1)
                if len(rest) < int(header):
                    break
                record = proto.decode("mesos.v1.agent.ProcessIO", rest[:int(header)])
                pending = rest[int(header):]
                assert record["type"] == "DATA" and record["data"]["type"] == "STDOUT"
                seen += base64.b64decode(record["data"]["data"])
    finally:
        sock.close()
    open(os.path.join(master.sandbox("pb"), "stop"), "w").close()
    client.wait_state("pb", "TASK_FINISHED")


# --- an agent's READ_FILE and LIST_FILES (a master serves neither: test_local_files) ---

def _hello_sandbox(make_local_master, clients, task_id):
    """(the agent's base URL, the virtual path of the sandbox) of a task
    ``task_id`` that printed two lines and made a directory ``sub``."""
    master = make_local_master()
    client = clients(master)
    [base] = bases(master).values()
    offer = client.next_offers()[0]
    client.launch(offer, [task_info(task_id, offer, "printf 'hello\\nworld\\n'; mkdir sub")],
                  filters={"refuse_seconds": 0})
    client.wait_state(task_id, "TASK_FINISHED", timeout=30)
    return base, virtual_path(client.framework_id, task_id)


def test_list_files_lists_a_sandbox_as_file_infos(make_local_master, clients):
    base, sandbox = _hello_sandbox(make_local_master, clients, "lister")

    def list_files(path):
        return agent_call(base, {"type": "LIST_FILES", "list_files": {"path": path}})

    reply = list_files(sandbox)
    assert reply.status_code == 200, reply.text
    document = reply.json()
    validate_message("master.Response", document)   # agent.proto's alike
    infos = {info["path"]: info for info in document["list_files"]["file_infos"]}
    browsed = requests.get(base + "/files/browse", params={"path": sandbox},
                           timeout=10).json()
    assert list(infos) == [entry["path"] for entry in browsed]    # sorted by name, the same
    stdout = infos[sandbox + "/stdout"]
    assert stdout["size"] == 12 and stat.S_ISREG(stdout["mode"])
    assert stat.S_ISDIR(infos[sandbox + "/sub"]["mode"])
    assert stdout["mtime"]["nanoseconds"] % 10 ** 9 == 0 and stdout["mtime"]["nanoseconds"] > 0
    assert stdout["nlink"] == 1 and stdout["uid"] and stdout["gid"]
    assert list_files(sandbox + "/sub").json() == {"type": "LIST_FILES", "list_files": {}}
    assert (list_files(sandbox + "/nothing").status_code, list_files(sandbox + "/nothing")
            .content) == (404, b"")
    escape = list_files(sandbox + "/../../../../../../../../etc")
    assert escape.status_code in (400, 404), escape.text
    bare = agent_call(base, {"type": "LIST_FILES"})
    assert (bare.status_code, bare.text) == (
        400, "Failed to validate agent::Call: Expecting 'list_files' to be present")
    no_path = agent_call(base, {"type": "LIST_FILES", "list_files": {}})
    assert no_path.status_code == 400 and "path" in no_path.text


def test_read_file_reads_a_tasks_sandbox(make_local_master, clients):
    base, sandbox = _hello_sandbox(make_local_master, clients, "printer")

    def read(path, offset, length=None):
        request = {"path": path, "offset": offset}
        if length is not None:
            request["length"] = length
        return agent_call(base, {"type": "READ_FILE", "read_file": request})

    def read_ok(*args):
        reply = read(*args)
        assert reply.status_code == 200, reply.text
        document = reply.json()
        validate_message("master.Response", document)   # agent.proto's alike
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
    no_request = agent_call(base, {"type": "READ_FILE"})
    assert (no_request.status_code, no_request.text) == (
        400, "Failed to validate agent::Call: Expecting 'read_file' to be present")
