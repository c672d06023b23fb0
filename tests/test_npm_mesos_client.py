"""A dashboard written with npm's ``@dcos/mesos-client`` (DC/OS' operator
stream client, not this project's), unchanged, in node
(``mesos_client_stream.js``, in a jsdom page of the master's origin: the
client is written for browsers and needs their XMLHttpRequest), subscribed
to the embedded master's operator event stream while a task runs and ends,
and asking for the tasks (its ``request``) once it saw the task finish.

scripts/test.sh installs the packages into the npm prefix that
TFMESOS_TEST_NPM names; where it is set, a missing package (or node) fails
the test; unset, the test is skipped."""

import json
import os
import queue
import shutil
import subprocess
import threading

import pytest
from fixtures_master import clients, make_local_master
from mesos_http_client import task_info

from mesos_local.api.validation import validate_message

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = ("@dcos/mesos-client", "jsdom")


@pytest.fixture
def node_modules():
    prefix = os.environ.get("TFMESOS_TEST_NPM")
    if not prefix:
        pytest.skip("TFMESOS_TEST_NPM (the npm prefix scripts/test.sh installs into) is unset")
    modules = os.path.join(prefix, "node_modules")
    missing = [p for p in PACKAGES if not os.path.isfile(os.path.join(modules, p, "package.json"))]
    assert not missing, "TFMESOS_TEST_NPM=%s lacks %s (scripts/test.sh installs them)" % (
        prefix, ", ".join(missing))
    assert shutil.which("node"), "TFMESOS_TEST_NPM is set but node is not on PATH"
    return modules


class NodeStream:
    """mesos_client_stream.js against ``url``: its JSON lines in a queue,
    its stderr in the file ``stderr_path`` (a pipe read only at the end
    would block node once it wrote 64 KiB to it)."""

    def __init__(self, url, modules, stderr_path, timeout=60):
        self.stderr_path = stderr_path
        with open(stderr_path, "w") as stderr:
            self.process = subprocess.Popen(
                ["node", os.path.join(HERE, "mesos_client_stream.js"), url, str(timeout)],
                stdout=subprocess.PIPE, stderr=stderr, text=True,
                env=dict(os.environ, NODE_PATH=modules))
        self.lines = queue.Queue()
        self.seen = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def until(self, wanted, timeout=30):
        """The first record for which ``wanted(record)`` holds (all kept in ``seen``)."""
        while True:
            try:
                record = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError("not seen in %s s; seen: %s" % (timeout, self.seen)) from None
            assert record is not None, "the node client ended: %s %s" % (
                self.seen, self.stderr())
            self.seen.append(record)
            if wanted(record):
                return record

    def stderr(self):
        """The last 4000 characters node wrote to stderr so far."""
        with open(self.stderr_path, errors="replace") as stderr:
            return stderr.read()[-4000:]

    def events(self, kind):
        return [r["event"] for r in self.seen if r.get("event", {}).get("type") == kind]

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self.reader.join(timeout=30)


def task_update(task_id, state):
    def wanted(record):
        event = record.get("event", {})
        status = event.get("task_updated", {}).get("status", {})
        return (event.get("type") == "TASK_UPDATED" and status.get("task_id") == {"value": task_id}
                and status.get("state") == state)
    return wanted


def test_dcos_mesos_client_follows_a_task_through_the_operator_stream(make_local_master,
                                                                       node_modules, clients,
                                                                       tmp_path):
    master = make_local_master()
    node = NodeStream(master.url, node_modules, tmp_path / "node.stderr")
    try:
        subscribed = node.until(lambda r: r.get("event", {}).get("type") == "SUBSCRIBED")["event"]
        assert subscribed["subscribed"]["heartbeat_interval_seconds"] > 0
        agents = subscribed["subscribed"]["get_state"]["get_agents"]["agents"]
        assert len(agents) == 1
        client = clients(master)
        offer = client.next_offers()[0]
        client.launch(offer, [task_info("t", offer, "echo hi")])
        client.wait_state("t", "TASK_FINISHED", timeout=30)
        node.until(task_update("t", "TASK_FINISHED"))
        # the client's request(), asked once it saw the task finish
        tasks = node.until(lambda r: r.get("request") == "GET_TASKS")
        master.stop()
        # The master closes the stream (a clean end of the chunked body):
        # the client completes and node exits.
        end = node.until(lambda r: "end" in r)
        node.process.wait(timeout=30)
    finally:
        node.stop()
    assert end == {"end": "complete"}, (end, node.stderr())
    assert node.process.returncode == 0
    added = node.events("TASK_ADDED")
    assert [e["task_added"]["task"]["task_id"] for e in added] == [{"value": "t"}]
    assert added[0]["task_added"]["task"]["state"] == "TASK_STAGING"
    # each status in order; TaskUpdated.state is the task's latest state,
    # which may be ahead of its status (include/mesos/v1/master/master.proto)
    updated = [e["task_updated"] for e in node.events("TASK_UPDATED")]
    states = [u["status"]["state"] for u in updated]
    assert states == ["TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"], states
    assert updated[-1]["state"] == "TASK_FINISHED"
    framework = node.events("FRAMEWORK_ADDED")[0]["framework_added"]["framework"]
    assert framework["framework_info"]["id"] == {"value": client.framework_id}
    for record in node.seen:
        if "event" in record:
            validate_message("master.Event", record["event"])
    assert "response" in tasks, tasks
    validate_message("master.Response", tasks["response"])
    # Completed once the scheduler acknowledged its terminal update, in
    # "tasks" until then (mesos_local/updates.py, acknowledge, as Mesos'
    # master): the npm client may ask before this test's client acknowledged.
    listed = tasks["response"]["get_tasks"]
    [task] = listed["tasks"] + listed["completed_tasks"]
    assert task["task_id"] == {"value": "t"} and task["state"] == "TASK_FINISHED"
