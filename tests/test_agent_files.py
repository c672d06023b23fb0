"""Reading a failed task's sandbox through its agent's /files
(``tfmesos.mesos.agent_files``, ``tfmesos.core.sandbox_tails``): the agent's
URL from its offer, the last lines of stdout and stderr, a hard time limit,
and no way for a read to fail or hold the run; the failure policy keeps what
it read and the record's hint reads it."""

import logging
import socket
import time

import pytest
from addict import Dict
from fixtures_agents import finished_task, silent_agent
from fixtures_master import clients, local_master, make_local_master, small_agent
from policy_helpers import FakeRun

from tfmesos.core.events import StatusUpdate
from tfmesos.core.jobs import Job
from tfmesos.core.placement import Assignment, TaskRequest, place
from tfmesos.core.sandbox_tails import TAIL_BYTES, TAIL_LINES, SandboxTails
from tfmesos.core.scheduler import Launch
from tfmesos.core.slots import make_slots
from tfmesos.exceptions import TaskFailed
from tfmesos.mesos.agent_files import (
    AgentFiles,
    AgentFilesError,
    agent_base_url,
    last_lines,
    read_tails,
    sandbox_path,
)
from tfmesos.record.run_record import RunRecord
from tfmesos.record.schema import RunFile

URL = {"scheme": "http", "address": {"hostname": "node-1", "ip": "10.0.0.5", "port": 5051},
       "path": "/slave(1)"}


def test_the_agents_base_url_comes_from_the_offer():
    assert agent_base_url(URL) == "http://10.0.0.5:5051"
    assert agent_base_url(URL, "https") == "https://10.0.0.5:5051"
    assert agent_base_url({"scheme": "http", "address": {"hostname": "node-1",
                                                          "port": 5051}}) == "http://node-1:5051"
    assert agent_base_url({"scheme": "http", "address": {"ip": "fd00::5", "port": 5051}}) == \
        "http://[fd00::5]:5051"
    for broken in (None, {}, {"address": {"ip": "10.0.0.5"}}, {"address": {"port": 5051}},
                   {"address": {"ip": "10.0.0.5", "port": "5051"}}, "http://x:1"):
        assert agent_base_url(broken) is None
    assert sandbox_path("F-1", "tfmesos.ab.worker.0.1") == \
        "/frameworks/F-1/executors/tfmesos.ab.worker.0.1/runs/latest"


def test_placement_keeps_the_offers_url_with_the_launch():
    offer = {"id": {"value": "o1"}, "agent_id": {"value": "a1"}, "hostname": "node-1",
             "url": URL, "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}},
                                       {"name": "mem", "type": "SCALAR",
                                        "scalar": {"value": 512}}]}
    [assignment] = place([TaskRequest("w", 0.5, 128)], [offer]).launches["o1"]
    assert assignment.agent_url == URL
    del offer["url"]
    assert place([TaskRequest("w", 0.5, 128)], [offer]).launches["o1"][0].agent_url is None


def test_last_lines():
    assert last_lines("a\nb\nc\n", True, 2) == ["b", "c"]
    assert last_lines("tail of a line\nb\nc", False, 5) == ["b", "c"]   # cut in a line
    assert last_lines("epoch 1\r epoch 2\r epoch 3\ndone\n", True, 5) == [" epoch 3", "done"]
    assert last_lines("", True, 5) == []
    assert last_lines("one\r\ntwo\r\n", True, 5) == ["one", "two"]


# -- against the embedded master ------------------------------------------------------

def test_read_tails_of_an_embedded_masters_task(local_master, clients):
    client = clients(local_master)
    base, path = finished_task(client, "talker",
                               "seq 1 5000 >&2; echo 'the end' >&2; echo out")
    tails = read_tails(base, path, max_bytes=1000, lines=3)
    assert tails == {"stdout": ["out"], "stderr": ["4999", "5000", "the end"]}
    # A file shorter than max_bytes is read whole, its first line kept.
    assert read_tails(base, path, names=("stdout",), lines=20) == {"stdout": ["out"]}
    with pytest.raises(AgentFilesError, match="404") as missing:
        read_tails(base, sandbox_path(client.framework_id, "nobody"))
    assert not missing.value.unreachable


def test_the_embedded_masters_sandboxes_need_its_credentials(make_local_master, clients):
    master = make_local_master(agents=[small_agent()], credentials={"run": "pw"})
    client = clients(master, auth=("run", "pw"))
    base, path = finished_task(client, "talker", "echo hi >&2")
    with pytest.raises(AgentFilesError, match="401"):
        read_tails(base, path)
    from tfmesos.mesos.http_transport import basic_auth
    assert read_tails(base, path, auth=basic_auth("run", "pw"))["stderr"] == ["hi"]


# -- agents that do not answer as they should --------------------------------------------

def test_a_silent_agent_costs_the_timeout_and_no_more(silent_agent):
    started = time.monotonic()
    with pytest.raises(AgentFilesError, match="did not answer within") as error:
        read_tails(silent_agent, "/frameworks/f/executors/e/runs/latest", timeout=0.5)
    assert error.value.unreachable
    assert time.monotonic() - started < 5    # bounded by the timeout, whatever the load


def test_a_silent_agent_is_said_one_way_whichever_timeout_ends_the_wait(silent_agent):
    """The reader's own socket timeout (what ends the wait when the
    machine is loaded and ``read_tails``' join comes later) says it as
    ``read_tails`` does: it said "TimeoutError: timed out" instead."""
    agent = AgentFiles(silent_agent, 0.3, None, None)
    try:
        with pytest.raises(AgentFilesError, match="did not answer within 0.3 s") as error:
            agent.get("/files/browse", path="/frameworks/f/executors/e/runs/latest")
    finally:
        agent.close()
    assert error.value.unreachable


def test_a_refused_connection_is_unreachable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]         # bound, not listening: refused
        with pytest.raises(AgentFilesError) as error:
            read_tails("http://127.0.0.1:%d" % port, "/frameworks/f/executors/e/runs/latest")
    assert error.value.unreachable


# -- SandboxTails: what the run asks ----------------------------------------------------

def launch_on(task_id, url):
    slot = make_slots([Job("worker", 1)])[0]
    return Launch(slot, task_id, 1, "o1",
                  Assignment(None, "o1", "a1", "node-1", [], 31000, [], [], url))


class Reader:
    """``read_tails`` that answers from a list: dicts returned, exceptions raised."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def __call__(self, base, path, names, max_bytes, lines, timeout, auth, context):
        self.calls.append((base, path, names, max_bytes, lines, auth))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_sandbox_tails_reads_the_launchs_agent_with_the_runs_credentials():
    reader = Reader({"stdout": [], "stderr": ["boom"]})
    tails = SandboxTails(lambda: "F-1", credentials=lambda: ("run", "pw"), read=reader)
    tails.launched(launch_on("t1", URL))
    assert tails.read("t1", "worker:0") == {"stdout": [], "stderr": ["boom"]}
    [(base, path, names, max_bytes, lines, auth)] = reader.calls
    assert (base, path, names) == ("http://10.0.0.5:5051", sandbox_path("F-1", "t1"),
                                   ("stdout", "stderr"))
    assert (max_bytes, lines) == (TAIL_BYTES, TAIL_LINES) == (8192, 20)
    assert auth.startswith("Basic ")


def test_https_masters_have_https_agents():
    reader = Reader({"stdout": [], "stderr": []})
    tails = SandboxTails(lambda: "F-1", master_url=lambda: "https://master:5050", read=reader)
    tails.launched(launch_on("t1", URL))
    tails.read("t1", "worker:0")
    assert reader.calls[0][0] == "https://10.0.0.5:5051"


def test_nothing_is_read_without_an_agent_url_or_a_framework_id():
    reader = Reader()
    tails = SandboxTails(lambda: None, read=reader)
    tails.launched(launch_on("t1", URL))
    assert tails.read("t1", "worker:0") is None
    tails = SandboxTails(lambda: "F-1", read=reader)
    tails.launched(launch_on("t2", None))
    assert tails.read("t2", "worker:0") is None and tails.read("t3", "worker:0") is None
    assert reader.calls == []


def test_a_failed_read_is_one_log_line_and_a_silent_agent_is_not_asked_again(caplog):
    reader = Reader(AgentFilesError("http://10.0.0.5:5051/files/browse answered 404"),
                    {"stdout": [], "stderr": ["x"]},
                    AgentFilesError("http://10.0.0.5:5051 did not answer", unreachable=True),
                    RuntimeError("a bug"))
    tails = SandboxTails(lambda: "F-1", read=reader)
    other = dict(URL, address={"ip": "10.0.0.6", "port": 5051})
    for task_id, url in (("t1", URL), ("t2", URL), ("t3", URL), ("t4", URL), ("t5", other)):
        tails.launched(launch_on(task_id, url))
    with caplog.at_level(logging.INFO, logger="tfmesos.core.sandbox_tails"):
        assert tails.read("t1", "worker:0") is None          # 404: asked again later
        assert tails.read("t2", "worker:0") == {"stdout": [], "stderr": ["x"]}
        assert tails.read("t3", "worker:0") is None          # silent: not asked again
        assert tails.read("t4", "worker:0") is None
        assert tails.read("t5", "worker:1") is None          # another agent: a bug, logged
    assert [call[0] for call in reader.calls] == ["http://10.0.0.5:5051"] * 3 + [
        "http://10.0.0.6:5051"]
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert len(messages) == 3
    assert messages[0] == ("INFO", "cannot read the sandbox of worker:0: "
                                   "http://10.0.0.5:5051/files/browse answered 404")
    assert messages[1][0] == "WARNING" and "not asking that agent again" in messages[1][1]
    assert messages[2][0] == "ERROR" and "reading the sandbox of worker:1 failed" in \
        messages[2][1]


# -- the failure policy and the record ---------------------------------------------------

class FakeTails:
    def __init__(self, tail):
        self.tail, self.asked = tail, []

    def read(self, task_id, name):
        self.asked.append((task_id, name))
        return self.tail


def test_a_launch_failure_reads_the_sandbox_and_says_its_last_line(caplog):
    tails = FakeTails({"stdout": [], "stderr": ["Traceback ...", "ImportError: no tfmesos", ""]})
    run = FakeRun([Job("worker", 1)], sandboxes=tails)
    worker = run.slots.named("worker:0")
    task_id = worker.task_id
    with caplog.at_level(logging.WARNING, logger="tfmesos.core.reactions"):
        run.status("worker:0", "TASK_FAILED", "Command exited with status 1")
    assert tails.asked == [(task_id, "worker:0")]
    assert "it said: ImportError: no tfmesos; relaunching (attempt 2 of 3)" in caplog.text
    # An end the master reported: the task never reached an agent.
    run.launch(worker)
    run.events.handle(_status(worker, "TASK_DROPPED", "SOURCE_MASTER"))
    assert len(tails.asked) == 1


def _status(slot, state, source):
    return StatusUpdate(Dict(task_id={"value": slot.task_id}, state=state, message="",
                             source=source, agent_id={"value": slot.agent_id}))


def test_the_record_keeps_the_tail_and_its_hint_reads_it(tmp_path):
    slots = make_slots([Job("worker", 1)])
    record = RunRecord(str(tmp_path), RunFile(), slots, forwarding=True)
    record.launched(launch_on("t-1", URL)._replace(slot=slots.named("worker:0")))
    record.status(Dict(task_id={"value": "t-1"}, state="TASK_FAILED", source="SOURCE_EXECUTOR",
                       message="Command exited with status 127"))
    record.sandbox_tail("t-1", {"stdout": ["starting"], "stderr": ["sh: 1: exec: python: "
                                                                  "not found"]})
    record.sandbox_tail("t-unknown", {"stdout": [], "stderr": ["ignored"]})
    record.ended(TaskFailed("worker:0 failed", "worker:0", "TASK_FAILED", 127), "forming")
    record.finish()
    data = record.snapshot()
    [attempt] = data["tasks"][0]["attempts"]
    assert attempt["sandbox_tail"] == {"stdout": ["starting"],
                                       "stderr": ["sh: 1: exec: python: not found"]}
    assert attempt["hint"].startswith("'python' does not exist on the agent")
    assert data["outcome"]["hint"] == attempt["hint"]
    number, tail = record.last_sandbox_tail("worker:0")
    assert number == 1 and tail.stderr == ["sh: 1: exec: python: not found"]
    assert record.last_sandbox_tail("nobody") is None


def test_the_lines_mesos_own_programs_log_in_a_sandbox_are_not_the_tasks():
    # A Mesos agent's command executor logs to the sandbox's stderr after
    # the command ended (src/launcher/executor.cpp; glog to stderr,
    # src/logging/logging.cpp): "the task said: ... Received ACKNOWLEDGED
    # event" on a cluster (found by a review helper against the sources).
    # The task's own glog-style lines stay.
    tail = ("Traceback (most recent call last):\n"
            "OSError: [Errno 28] No space left on device\n"
            "I1201 17:55:02.120001  4241 executor.cpp:1041] Command exited with status 1 "
            "(pid: 4250)\n"
            "I1201 17:55:02.124001  4241 executor.cpp:190] Received ACKNOWLEDGED event\n"
            "F1201 17:55:02.124001  4241 train.cc:12] Check failed: x\n")
    assert last_lines(tail, True, 3) == ["Traceback (most recent call last):",
                                         "OSError: [Errno 28] No space left on device",
                                         "F1201 17:55:02.124001  4241 train.cc:12] Check failed: x"]
