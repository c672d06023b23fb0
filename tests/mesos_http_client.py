"""A tiny Mesos v1 scheduler HTTP client for tests of the local master.

It subscribes, reads the RecordIO event stream on a background thread into
a queue (checking every event against the Event schema, so the master's own
output stays protocol-correct), and sends calls with the stream id. It is
deliberately not the tfmesos driver: tests of the master must not depend on
the code the master is there to check.
"""

import base64
import getpass
import http.client
import json
import queue
import socket
import threading
import time
import urllib.parse

import requests

from mesos_local.api import validation as schema
from tfmesos.mesos.recordio import Decoder

CLOSED = "__STREAM_CLOSED__"   # pseudo event type put on the queue at EOF


class StreamError(AssertionError):
    pass


class SchedulerClient:
    """One scheduler: ``subscribe()``, then ``call(...)`` and ``next_event(...)``.
    ``auth``: (principal, secret) sent as HTTP basic authentication."""

    def __init__(self, url, name="test-framework", user=None, capabilities=(),
                 failover_timeout=None, framework_id=None, roles=None, role=None,
                 extra_info=None, auth=None):
        self.url = url.rstrip("/")
        parsed = urllib.parse.urlsplit(self.url)
        self.host, self.port = parsed.hostname, parsed.port
        # As Mesos' scheduler drivers fill it in: a user the agents know, whose
        # tasks they can run (the local master switches to it as root).
        info = {"user": getpass.getuser() if user is None else user, "name": name}
        if capabilities:
            info["capabilities"] = [{"type": c} for c in capabilities]
        if failover_timeout is not None:
            info["failover_timeout"] = failover_timeout
        if roles is not None:
            info["roles"] = list(roles)
        if role is not None:
            info["role"] = role
        if framework_id is not None:
            info["id"] = {"value": framework_id}
        info.update(extra_info or {})
        self.framework_info = info
        self.framework_id = framework_id
        self.stream_id = None
        self.events = queue.Queue()
        self.all_events = []
        self._backlog = []
        self._conn = None
        self._thread = None
        self._session = requests.Session()
        self._session.auth = auth
        self._auth_header = None
        if auth is not None:
            self._auth_header = "Basic " + base64.b64encode(
                ("%s:%s" % auth).encode()).decode()
        self.subscribed = None

    # -- the stream ------------------------------------------------------------

    def subscribe(self, timeout=10, expect_error=False):
        """SUBSCRIBE; returns the SUBSCRIBED event (or the ERROR event when
        ``expect_error``)."""
        body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": self.framework_info}}
        if self.framework_id is not None:
            body["framework_id"] = {"value": self.framework_id}
            self.framework_info["id"] = {"value": self.framework_id}
        self._conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        request_headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._auth_header is not None:
            request_headers["Authorization"] = self._auth_header
        self._conn.request("POST", "/api/v1/scheduler", json.dumps(body), request_headers)
        response = self._conn.getresponse()
        if response.status != 200:
            text = response.read().decode("utf-8", "replace")
            self._conn.close()
            raise StreamError("SUBSCRIBE answered %d: %s" % (response.status, text))
        self.stream_id = response.getheader("Mesos-Stream-Id")
        self.response = response
        self._conn.sock.settimeout(None)
        self._thread = threading.Thread(target=self._read, args=(response,), daemon=True)
        self._thread.start()
        if expect_error:
            return self.next_event("ERROR", timeout=timeout)
        event = self.next_event(timeout=timeout)
        if event["type"] != "SUBSCRIBED":
            raise StreamError("first event is %s, not SUBSCRIBED: %r" % (event["type"], event))
        self.subscribed = event
        self.framework_id = event["subscribed"]["framework_id"]["value"]
        self.framework_info["id"] = {"value": self.framework_id}
        return event

    def _read(self, response):
        decoder = Decoder()
        try:
            while True:
                data = response.read1(65536)
                if not data:
                    break
                for record in decoder.feed(data):
                    event = json.loads(record)
                    schema.validate_message("Event", event)
                    event["_received"] = time.monotonic()
                    self.all_events.append(event)
                    self.events.put(event)
        except (OSError, http.client.HTTPException, ValueError, AttributeError) as exc:
            # AttributeError: http.client reading a response closed under it by close().
            self.events.put({"type": CLOSED, "error": repr(exc)})
            return
        self.events.put({"type": CLOSED})

    def next_event(self, types=None, timeout=10, skip=("HEARTBEAT",)):
        """The next event of one of ``types`` (a name or tuple; None = any not
        in ``skip``). Other events stay queued for later calls, except
        heartbeats, which are dropped unless asked for. TimeoutError if none."""
        if isinstance(types, str):
            types = (types,)

        def wanted(event):
            if types is None:
                return event["type"] not in skip
            return event["type"] in types

        for index, event in enumerate(self._backlog):
            if wanted(event):
                return self._backlog.pop(index)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no %s event within %s s" % (types or "new", timeout))
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            if wanted(event):
                return event
            if event["type"] == CLOSED:
                self._backlog.append(event)
                raise StreamError("stream closed while waiting for %s: %r" % (types, event))
            if event["type"] != "HEARTBEAT":
                self._backlog.append(event)

    def drain(self):
        """Forget every event received so far."""
        self._backlog.clear()
        while True:
            try:
                self.events.get_nowait()
            except queue.Empty:
                return

    def no_event(self, types, seconds):
        """Assert that no event of ``types`` arrives within ``seconds``."""
        try:
            event = self.next_event(types, timeout=seconds)
        except TimeoutError:
            return
        raise AssertionError("unexpected %s event: %r" % (event["type"], event))

    def next_update(self, task_id=None, timeout=10):
        """The next TaskStatus (of ``task_id``); ``_received`` is when it came."""
        while True:
            event = self.next_event("UPDATE", timeout=timeout)
            status = dict(event["update"]["status"], _received=event["_received"])
            if task_id is None or status["task_id"]["value"] == task_id:
                return status

    def next_offers(self, timeout=10):
        return self.next_event("OFFERS", timeout=timeout)["offers"]["offers"]

    def close(self):
        """Hang up the stream (as a crashed scheduler would)."""
        if self._conn is not None and self._conn.sock is not None:
            try:
                self._conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._conn.close()
        if self._thread is not None:
            self._thread.join(5)
        self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    # -- calls ---------------------------------------------------------------------

    def post(self, body, headers=None, content_type="application/json", raw=None):
        """POST anything to /api/v1/scheduler; returns the requests.Response."""
        all_headers = {"Content-Type": content_type} if content_type else {}
        all_headers.update(headers or {})
        data = raw if raw is not None else json.dumps(body)
        return self._session.post(self.url + "/api/v1/scheduler", data=data,
                                  headers=all_headers, allow_redirects=False, timeout=10)

    def call(self, kind, payload=None, check=True, stream_id=True, **body):
        """A call with framework_id and the stream id; ``payload`` is the
        sub-message (e.g. ``{"offer_ids": [...]}`` for DECLINE)."""
        call = {"type": kind, "framework_id": {"value": self.framework_id}}
        if payload is not None:
            call[kind.lower()] = payload
        call.update(body)
        headers = {}
        if stream_id is True:
            headers["Mesos-Stream-Id"] = self.stream_id
        elif stream_id:
            headers["Mesos-Stream-Id"] = stream_id
        response = self.post(call, headers)
        if check and response.status_code != 202:
            raise AssertionError("%s answered %d: %s" % (kind, response.status_code,
                                                         response.text))
        return response

    def launch(self, offer, task_infos, filters=None, check=True):
        payload = {"offer_ids": [offer["id"]],
                   "operations": [{"type": "LAUNCH", "launch": {"task_infos": task_infos}}]}
        if filters is not None:
            payload["filters"] = filters
        return self.call("ACCEPT", payload, check=check)

    def decline(self, offers, refuse_seconds=None):
        payload = {"offer_ids": [o["id"] for o in offers]}
        if refuse_seconds is not None:
            payload["filters"] = {"refuse_seconds": refuse_seconds}
        return self.call("DECLINE", payload)

    def acknowledge(self, status):
        status = {k: v for k, v in status.items() if not k.startswith("_")}
        return self.call("ACKNOWLEDGE", {"agent_id": status["agent_id"],
                                         "task_id": status["task_id"],
                                         "uuid": status["uuid"]})

    def kill(self, task_id, grace=None, agent_id=None):
        payload = {"task_id": {"value": task_id}}
        if agent_id is not None:
            payload["agent_id"] = {"value": agent_id}
        if grace is not None:
            payload["kill_policy"] = {"grace_period": {"nanoseconds": int(grace * 1e9)}}
        return self.call("KILL", payload)

    def wait_state(self, task_id, state, timeout=10, ack=True):
        """Read (and acknowledge) updates of ``task_id`` until ``state``;
        returns that status."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.next_update(task_id, timeout=max(0.01, deadline - time.monotonic()))
            if ack and "uuid" in status:
                self.acknowledge(status)
            if status["state"] == state:
                return status


def scalar(name, value, allocation_role=None):
    resource = {"name": name, "type": "SCALAR", "scalar": {"value": value}}
    if allocation_role is not None:
        resource["allocation_info"] = {"role": allocation_role}
    return resource


def ports(*ranges):
    return {"name": "ports", "type": "RANGES",
            "ranges": {"range": [{"begin": b, "end": e} for b, e in ranges]}}


def task_info(task_id, offer, command, cpus=0.1, mem=32, extra_resources=(), env=None,
              **fields):
    """A command TaskInfo on the offer's agent."""
    info = {"name": task_id, "task_id": {"value": task_id}, "agent_id": offer["agent_id"],
            "resources": [scalar("cpus", cpus), scalar("mem", mem)] + list(extra_resources),
            "command": {"value": command}}
    if env:
        info["command"]["environment"] = {
            "variables": [{"name": k, "value": v} for k, v in env.items()]}
    info.update(fields)
    return info


def offered(offer, name):
    """An offer's scalar (or ranges list for ports)."""
    for resource in offer["resources"]:
        if resource["name"] == name:
            if resource["type"] == "SCALAR":
                return resource["scalar"]["value"]
            return [(r["begin"], r["end"]) for r in resource["ranges"]["range"]]
    return None
