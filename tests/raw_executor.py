"""A custom Mesos executor written against the raw v1 executor HTTP API
(docs/executor-http-api.md), standard library only: what a framework's own
executor does, for tests of the local master's /api/v1/executor.

It subscribes at ``http://$MESOS_AGENT_ENDPOINT/api/v1/executor`` and
writes every event it gets, as one JSON line, to ``events.jsonl`` in its
sandbox (and its environment to ``env.json``). On ``LAUNCH`` (each task of
a ``LAUNCH_GROUP``) it sends TASK_RUNNING; a task whose ``data`` is ``finish`` then sends TASK_FINISHED
(with ``data``), any other waits for ``KILL`` (TASK_KILLED). Each
``ACKNOWLEDGED`` is told to the scheduler as a MESSAGE ``acked <task>
<state>``; a ``MESSAGE`` from the scheduler is answered ``echo <data>``, and
``exit N`` makes it exit with status N at once. ``SHUTDOWN`` kills its
tasks (TASK_KILLED) and exits 0; so does the end of its stream.
"""

import base64
import http.client
import json
import os
import sys
import uuid

ENDPOINT = os.environ["MESOS_AGENT_ENDPOINT"]
FRAMEWORK_ID = {"value": os.environ["MESOS_FRAMEWORK_ID"]}
EXECUTOR_ID = {"value": os.environ["MESOS_EXECUTOR_ID"]}
SANDBOX = os.environ["MESOS_SANDBOX"]
HOST, _, PORT = ENDPOINT.rpartition(":")
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
if os.environ.get("MESOS_EXECUTOR_AUTHENTICATION_TOKEN"):   # the agent authenticates us
    HEADERS["Authorization"] = "Bearer " + os.environ["MESOS_EXECUTOR_AUTHENTICATION_TOKEN"]


def post(call):
    """A call on a connection of its own (the stream's is busy); its status."""
    body = dict(call, framework_id=FRAMEWORK_ID, executor_id=EXECUTOR_ID)
    conn = http.client.HTTPConnection(HOST.strip("[]"), int(PORT), timeout=30)
    try:
        conn.request("POST", "/api/v1/executor", json.dumps(body), HEADERS)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


UNACKED = {}    # uuid -> state


def update(task_id, state, data=None):
    status = {"task_id": task_id, "state": state, "source": "SOURCE_EXECUTOR",
              "uuid": base64.b64encode(uuid.uuid4().bytes).decode()}
    if data is not None:
        status["data"] = base64.b64encode(data).decode()
    UNACKED[status["uuid"]] = state
    answer = post({"type": "UPDATE", "update": {"status": status}})
    if answer != 202:
        raise SystemExit("UPDATE answered %d" % answer)


def message(text):
    post({"type": "MESSAGE", "message": {"data": base64.b64encode(text.encode()).decode()}})


def records(response):
    """The RecordIO records of the stream (docs/recordio.md)."""
    while True:
        line = response.readline()
        if not line:
            return
        size = int(line.strip())
        data = b""
        while len(data) < size:
            more = response.read(size - len(data))
            if not more:
                return
            data += more
        yield json.loads(data)


def main():
    with open(os.path.join(SANDBOX, "env.json"), "w") as out:
        json.dump(dict(os.environ), out)
    log = open(os.path.join(SANDBOX, "events.jsonl"), "a", buffering=1)
    conn = http.client.HTTPConnection(HOST.strip("[]"), int(PORT), timeout=None)
    body = {"type": "SUBSCRIBE", "framework_id": FRAMEWORK_ID, "executor_id": EXECUTOR_ID,
            "subscribe": {}}
    conn.request("POST", "/api/v1/executor", json.dumps(body), HEADERS)
    response = conn.getresponse()
    if response.status != 200:
        raise SystemExit("SUBSCRIBE answered %d: %s" % (response.status, response.read()))
    live = {}      # task id -> TaskID
    for event in records(response):
        log.write(json.dumps(event) + "\n")
        kind = event["type"]
        if kind in ("LAUNCH", "LAUNCH_GROUP"):
            tasks = [event["launch"]["task"]] if kind == "LAUNCH" \
                else event["launch_group"]["task_group"]["tasks"]
            for task in tasks:
                live[task["task_id"]["value"]] = task["task_id"]
                update(task["task_id"], "TASK_RUNNING")
                if base64.b64decode(task.get("data", "")) == b"finish":
                    update(task["task_id"], "TASK_FINISHED", data=b"done")
                    live.pop(task["task_id"]["value"])
        elif kind == "KILL":
            task_id = event["kill"]["task_id"]
            if live.pop(task_id["value"], None) is not None:
                update(task_id, "TASK_KILLED")
        elif kind == "ACKNOWLEDGED":
            acked = event["acknowledged"]
            state = UNACKED.pop(acked["uuid"], "?")
            message("acked %s %s" % (acked["task_id"]["value"], state))
        elif kind == "MESSAGE":
            text = base64.b64decode(event["message"]["data"]).decode()
            if text.startswith("exit "):
                os._exit(int(text.split()[1]))
            message("echo " + text)
        elif kind == "SHUTDOWN":
            for task_id in list(live.values()):
                update(task_id, "TASK_KILLED")
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
