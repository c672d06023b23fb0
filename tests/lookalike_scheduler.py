"""A look-alike of a victim's run, registered by an attacker (tests of
``cli.run_lookup``): ``python3 lookalike_scheduler.py PLAN.json``.

Standard library only, so that another local user (``nobody``, who reads
neither this checkout's virtual environment nor root's home) runs it with
the system's Python. PLAN: ``master`` (http://host:port), ``auth``
([principal, secret] or null), ``user``, ``labels`` ([{key, value}]: the
victim's, copied from ``/master/state``), ``tasks`` ([{id, name, command,
env}]). It subscribes a new framework (failover timeout one hour),
launches every task on the first offer, waits until each runs, prints
``framework ID`` and leaves without tearing anything down: the framework
stays, disconnected, its tasks running, as a crashed scheduler's would.
"""

import base64
import http.client
import json
import sys
import time
import urllib.parse

TIMEOUT = 60.0


class Stream:
    """The RecordIO event stream of a SUBSCRIBE (``<length>\\n<json>``)."""

    def __init__(self, response):
        self.response, self.buffer = response, b""

    def _fill(self):
        data = self.response.read1(65536)
        if not data:
            raise SystemExit("the master ended the stream")
        self.buffer += data

    def event(self):
        while b"\n" not in self.buffer:
            self._fill()
        length, self.buffer = self.buffer.split(b"\n", 1)
        size = int(length)
        while len(self.buffer) < size:
            self._fill()
        record, self.buffer = self.buffer[:size], self.buffer[size:]
        return json.loads(record)


def main(path):
    with open(path) as handle:
        plan = json.load(handle)
    url = urllib.parse.urlsplit(plan["master"])
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if plan.get("auth"):
        headers["Authorization"] = "Basic " + base64.b64encode(
            ("%s:%s" % tuple(plan["auth"])).encode()).decode()
    info = {"user": plan["user"], "name": plan.get("name", "train"),
            "failover_timeout": 3600.0, "labels": {"labels": plan["labels"]}}
    stream_conn = http.client.HTTPConnection(url.hostname, url.port, timeout=TIMEOUT)
    stream_conn.request("POST", "/api/v1/scheduler", json.dumps(
        {"type": "SUBSCRIBE", "subscribe": {"framework_info": info}}), headers)
    response = stream_conn.getresponse()
    if response.status != 200:
        raise SystemExit("SUBSCRIBE: %d %s" % (response.status, response.read()[:300]))
    stream_id = response.getheader("Mesos-Stream-Id")
    events = Stream(response)
    framework_id = None
    waiting = {task["id"] for task in plan["tasks"]}
    launched = False
    deadline = time.monotonic() + TIMEOUT

    def call(body):
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=TIMEOUT)
        try:
            conn.request("POST", "/api/v1/scheduler", json.dumps(body),
                         dict(headers, **{"Mesos-Stream-Id": stream_id}))
            answer = conn.getresponse()
            answer.read()
            if answer.status not in (200, 202):
                raise SystemExit("%s: %d" % (body["type"], answer.status))
        finally:
            conn.close()

    while waiting and time.monotonic() < deadline:
        event = events.event()
        kind = event["type"]
        if kind == "SUBSCRIBED":
            framework_id = event["subscribed"]["framework_id"]["value"]
        elif kind == "OFFERS" and not launched:
            offer = event["offers"]["offers"][0]
            infos = [{"name": task["name"], "task_id": {"value": task["id"]},
                      "agent_id": offer["agent_id"],
                      "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                                    {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}],
                      "command": {"value": task["command"], "environment": {"variables": [
                          {"name": k, "value": v} for k, v in task.get("env", {}).items()]}}}
                     for task in plan["tasks"]]
            call({"type": "ACCEPT", "framework_id": {"value": framework_id},
                  "accept": {"offer_ids": [offer["id"]], "operations": [
                      {"type": "LAUNCH", "launch": {"task_infos": infos}}]}})
            launched = True
        elif kind == "UPDATE":
            status = event["update"]["status"]
            if "uuid" in status:
                call({"type": "ACKNOWLEDGE", "framework_id": {"value": framework_id},
                      "acknowledge": {"agent_id": status["agent_id"],
                                      "task_id": status["task_id"], "uuid": status["uuid"]}})
            if status["state"] == "TASK_RUNNING":
                waiting.discard(status["task_id"]["value"])
            elif status["state"] != "TASK_STAGING" and status["state"] != "TASK_STARTING":
                raise SystemExit("task %s: %s %s" % (status["task_id"]["value"],
                                                     status["state"], status.get("message")))
    if waiting:
        raise SystemExit("tasks never ran: %s" % sorted(waiting))
    print("framework %s" % framework_id, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
