"""The operator API's event stream as Mesos' master serves it: ``SUBSCRIBE``
to ``/api/v1`` answers a chunked RecordIO stream of ``mesos.v1.master.Event``
(include/mesos/v1/master/master.proto; docs/operator-http-api.md, "Events"):
SUBSCRIBED with ``get_state`` and ``heartbeat_interval_seconds``, a
HEARTBEAT, then TASK_ADDED, TASK_UPDATED, FRAMEWORK_ADDED/UPDATED/REMOVED,
AGENT_ADDED/REMOVED as the master sees them happen (``Master::Subscribers::
send``, src/master/master.cpp; ``protobuf::master::event::create*``,
src/common/protobuf_utils.cpp) and HEARTBEATs. Each event is read off a raw
socket (``operator_helpers.py``) and checked against master.proto's Event.

The stream is bounded per subscriber: one that does not read is dropped
once more than ``operator_event_buffer`` bytes wait for it, and the others
go on; bad SUBSCRIBE calls get one 4xx in Mesos' words and hold nothing open.
"""

import json
import time

import pytest
from fixtures_master import clients, make_local_master, small_agent
from mesos_http_client import CLOSED as HTTP_CLOSED
from mesos_http_client import task_info
from operator_helpers import CLOSED, OperatorStream, get, raw_request, read_reply, response_of
from waiting import wait_until

from mesos_local.api.validation import validate_message

JSON_HEADERS = (("Content-Type", "application/json"),)
SUBSCRIBE = json.dumps({"type": "SUBSCRIBE"}).encode()


@pytest.fixture
def streams():
    """``subscribe(master, **kwargs)`` -> an OperatorStream, closed at the end."""
    made = []

    def subscribe(master, **kwargs):
        stream = OperatorStream(master.url, **kwargs)
        made.append(stream)
        return stream

    try:
        yield subscribe
    finally:
        for stream in made:
            stream.close()


def subscribers(master):
    return master.read(lambda m, records: len(records.subscribers))


def metric(master, name):
    metrics = response_of(master, {"type": "GET_METRICS", "get_metrics": {}})[
        "get_metrics"]["metrics"]
    return next(m["value"] for m in metrics if m["name"] == name)


def test_a_subscriber_gets_the_state_then_every_change(make_local_master, clients, streams):
    master = make_local_master()
    stream = streams(master)
    assert stream.status == 200
    assert stream.headers["content-type"] == "application/json"
    assert stream.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in stream.headers
    subscribed = stream.next_event(skip=())
    assert subscribed["type"] == "SUBSCRIBED"
    assert subscribed["subscribed"]["heartbeat_interval_seconds"] == 0.5
    assert subscribed["subscribed"]["get_state"] == get(master, "GET_STATE")
    assert stream.next_event(skip=())["type"] == "HEARTBEAT"    # right after SUBSCRIBED
    assert metric(master, "master/operator_event_stream_subscribers") == 1.0

    client = clients(master)
    added = stream.next_event()
    assert added["type"] == "FRAMEWORK_ADDED"
    framework = added["framework_added"]["framework"]
    assert framework["framework_info"]["id"]["value"] == client.framework_id
    assert framework["framework_info"]["name"] == client.framework_info["name"]
    assert (framework["active"], framework["connected"], framework["recovered"]) == (
        True, True, False)
    assert framework["reregistered_time"] == framework["registered_time"]
    assert framework["unregistered_time"] == {"nanoseconds": 0}
    assert "offers" not in framework and "allocated_resources" not in framework

    offer = client.next_offers()[0]
    client.launch(offer, [task_info("sleeper", offer, "sleep 60")],
                  filters={"refuse_seconds": 0})
    task = stream.next_event()
    assert task["type"] == "TASK_ADDED"
    task = task["task_added"]["task"]
    assert (task["task_id"], task["state"]) == ({"value": "sleeper"}, "TASK_STAGING")
    assert task["framework_id"]["value"] == client.framework_id
    assert task["agent_id"] == offer["agent_id"]
    assert "statuses" not in task

    running = client.wait_state("sleeper", "TASK_RUNNING")
    starting = stream.next_event()["task_updated"]
    assert starting["framework_id"]["value"] == client.framework_id
    assert (starting["status"]["state"], starting["state"]) == ("TASK_STARTING",
                                                                "TASK_STARTING")
    updated = stream.next_event()["task_updated"]
    assert (updated["status"]["state"], updated["state"]) == ("TASK_RUNNING", "TASK_RUNNING")
    assert updated["status"]["uuid"] == running["uuid"]
    assert updated["status"]["container_status"] == running["container_status"]

    # GET_TASKS: the update last forwarded to the framework (Master::forward).
    [listed] = get(master, "GET_TASKS")["tasks"]
    assert (listed["status_update_state"], listed["status_update_uuid"]) == (
        "TASK_RUNNING", running["uuid"])

    client.kill("sleeper")
    client.wait_state("sleeper", "TASK_KILLED", timeout=30)
    killed = stream.next_event()["task_updated"]
    assert (killed["status"]["state"], killed["state"]) == ("TASK_KILLED", "TASK_KILLED")

    client.call("TEARDOWN")
    removed = stream.next_event()
    assert removed["type"] == "FRAMEWORK_REMOVED"
    assert removed["framework_removed"]["framework_info"]["id"]["value"] == client.framework_id

    for _ in range(2):   # and every heartbeat interval, a HEARTBEAT
        stream.next_event("HEARTBEAT")
    master.stop()        # the stream ends with the master
    stream.next_event(CLOSED)


def test_a_framework_that_fails_over_or_updates_its_info_is_updated(make_local_master, clients,
                                                                    streams):
    master = make_local_master()
    stream = streams(master)
    first = clients(master, failover_timeout=60)
    stream.next_event("FRAMEWORK_ADDED")
    info = dict(first.framework_info, name="renamed")
    first.call("UPDATE_FRAMEWORK", {"framework_info": info}, check=False)
    renamed = stream.next_event()
    assert renamed["type"] == "FRAMEWORK_UPDATED"
    assert renamed["framework_updated"]["framework"]["framework_info"]["name"] == "renamed"
    first.close()        # no event: Mesos sends none when a framework disconnects
    again = clients(master, name="renamed", failover_timeout=60,
                    framework_id=first.framework_id)
    failed_over = stream.next_event()
    assert failed_over["type"] == "FRAMEWORK_UPDATED"
    framework = failed_over["framework_updated"]["framework"]
    assert framework["framework_info"]["id"]["value"] == again.framework_id
    assert framework["connected"] and framework["active"]
    assert framework["reregistered_time"]["nanoseconds"] > \
        framework["registered_time"]["nanoseconds"]


def test_agents_added_and_removed_with_their_tasks(make_local_master, clients, streams):
    master = make_local_master()
    stream = streams(master)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("stranded", offer, "sleep 60")],
                  filters={"refuse_seconds": 0})
    client.wait_state("stranded", "TASK_RUNNING")
    new_agent = master.add_agent(small_agent(cpus=2, mem=1024))
    added = stream.next_event("AGENT_ADDED")["agent_added"]["agent"]
    assert added["agent_info"]["id"]["value"] == new_agent
    assert added["active"] is True and added["registered_time"]["nanoseconds"] > 0
    assert {r["name"] for r in added["total_resources"]} >= {"cpus", "mem"}

    lost_agent = offer["agent_id"]["value"]
    master.remove_agent(lost_agent)
    lost = stream.next_event(("TASK_UPDATED", "AGENT_REMOVED"))
    assert lost["type"] == "TASK_UPDATED"      # its tasks first, as __removeSlave
    status = lost["task_updated"]["status"]
    assert (status["state"], status["reason"], lost["task_updated"]["state"]) == (
        "TASK_LOST", "REASON_AGENT_REMOVED", "TASK_LOST")
    removed = stream.next_event(("TASK_UPDATED", "AGENT_REMOVED"))
    assert removed["type"] == "AGENT_REMOVED"
    assert removed["agent_removed"] == {"agent_id": {"value": lost_agent}}


def test_a_subscriber_that_does_not_read_is_dropped_and_the_others_go_on(
        make_local_master, clients, streams):
    buffer = 1024 * 1024
    master = make_local_master(operator_event_buffer=buffer)
    fast = streams(master)
    fast.next_event("SUBSCRIBED")
    # A dashboard that subscribes and never reads: the kernel buffers fill
    # (a small receive window), then the master's queue for it.
    slow = raw_request(master.url, "/api/v1", SUBSCRIBE, JSON_HEADERS, receive_buffer=4096)
    try:
        wait_until(lambda: subscribers(master) == 2, message="the second subscriber never came")
        # Each round ~400 KB of events: a framework of 100 labels of 2 KB comes and goes.
        labels = [{"key": "k%03d" % i + "k" * 1000, "value": "v" * 1000} for i in range(100)]
        rounds = 0
        while subscribers(master) > 1:
            assert rounds < 100, "a subscriber that never reads was never dropped"
            rounds += 1
            client = clients(master, name="f%d" % rounds, extra_info={"labels": {
                "labels": labels}})
            event = fast.next_event("FRAMEWORK_ADDED")
            assert event["framework_added"]["framework"]["framework_info"]["name"] == \
                "f%d" % rounds
            client.call("TEARDOWN")
            event = fast.next_event("FRAMEWORK_REMOVED")
            assert event["framework_removed"]["framework_info"]["name"] == "f%d" % rounds
            client.close()
            # What waits for the subscribers never passes the bound (one
            # event of ~210 KB may go past it: it is then dropped).
            waiting = master.read(lambda m, records: records.subscribers.queued_bytes())
            assert waiting <= buffer + 256 * 1024
        assert rounds > 2        # it took the kernel's buffers and the master's to fill
        # The slow one's connection was shut down: it reads what was sent, then its end.
        slow.settimeout(30)
        data = b""
        while True:
            try:
                chunk = slow.recv(1 << 20)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
        assert data.startswith(b"HTTP/1.1 200 OK")
        assert not data.endswith(b"\r\n0\r\n\r\n")        # cut off, not ended
    finally:
        slow.close()
    # The other subscriber is still served: a framework, a heartbeat.
    clients(master, name="after")
    assert fast.next_event("FRAMEWORK_ADDED")["framework_added"]["framework"][
        "framework_info"]["name"] == "after"
    fast.next_event("HEARTBEAT")
    assert metric(master, "master/operator_event_stream_subscribers") == 1.0


def test_past_the_most_subscribers_the_oldest_is_closed(make_local_master, streams):
    master = make_local_master(max_operator_event_stream_subscribers=2)
    oldest, second = streams(master), streams(master)
    for stream in (oldest, second):
        stream.next_event("SUBSCRIBED")
    third = streams(master)
    third.next_event("SUBSCRIBED")
    oldest.next_event(CLOSED)          # Master::subscribe: the BoundedHashMap drops it
    assert oldest.clean_end is True
    assert subscribers(master) == 2
    second.next_event("HEARTBEAT")
    third.next_event("HEARTBEAT")
    flags = {f["name"]: f["value"] for f in get(master, "GET_FLAGS")["flags"]}
    assert flags["max_operator_event_stream_subscribers"] == "2"


@pytest.mark.parametrize("strict", [True, False])
def test_bad_subscribe_calls_get_one_4xx_and_nothing_stays_open(make_local_master, streams,
                                                                strict):
    master = make_local_master(strict=strict)
    url = master.url
    cases = [
        (b"{not json", JSON_HEADERS, 400, "Failed to parse body into JSON: "),
        (SUBSCRIBE, (), 400, "Expecting 'Content-Type' to be present"),
        (SUBSCRIBE, (("Content-Type", "text/plain"),), 415,
         "Expecting 'Content-Type' of application/json"),
        (SUBSCRIBE, JSON_HEADERS + (("Accept", "text/html"),), 406,
         "Expecting 'Accept' to allow 'application/x-protobuf' or 'application/json'"),
        (b"\xff\xff", (("Content-Type", "application/x-protobuf"),), 400,
         "Failed to parse body into Call protobuf"),
        (b'{"type": "SUBSCRIBE", "get_metrics": 5}', JSON_HEADERS, 400,
         "Failed to convert JSON into Call protobuf: "),
    ]
    for body, headers, status, text in cases:
        got, head, answer = read_reply(url, "/api/v1", body, headers)
        assert (got, answer.decode()[:len(text)]) == (status, text), (body, headers, answer)
        assert "transfer-encoding" not in head
    unknown_field = b'{"type": "SUBSCRIBE", "subscribe": {}}'   # no such field in master.Call
    if strict:
        got, _, answer = read_reply(url, "/api/v1", unknown_field, JSON_HEADERS)
        assert got == 400 and b"subscribe: unknown field" in answer, answer
    else:           # Mesos' parser skips it: a subscription
        stream = OperatorStream(url, headers=JSON_HEADERS)
        try:
            stream_body = stream.next_event("SUBSCRIBED")
        finally:
            stream.close()
        assert stream_body["subscribed"]["heartbeat_interval_seconds"] == 0.5
    wait_until(lambda: subscribers(master) == 0,
               message=lambda: "%d subscribers left" % subscribers(master))


def test_the_stream_is_served_at_every_path_under_api_v1(make_local_master, streams):
    master = make_local_master()
    for path in ("/api/v1/operator", "/master/api/v1", "/api/v1/"):
        stream = streams(master, path=path)
        assert stream.status == 200, path
        event = stream.next_event("SUBSCRIBED")
        validate_message("master.Response.GetState", event["subscribed"]["get_state"])


def test_streams_end_cleanly_when_the_master_stops_however_late_their_thread_runs(
        make_local_master, clients, streams, monkeypatch):
    """stop() closes each stream, then shuts the open connections down: a
    handler thread that gets the CPU only after that (a loaded machine) must
    still have written the stream's last chunk, or a reader sees a body cut
    off (CI: @dcos/mesos-client never completed)."""
    from mesos_local.api import stream as stream_module
    pump = stream_module.Subscription.pump

    def late_pump(self, write_chunk, sock):
        reason = pump(self, write_chunk, sock)
        time.sleep(0.5)      # the thread is descheduled before it writes the end
        return reason

    monkeypatch.setattr(stream_module.Subscription, "pump", late_pump)
    master = make_local_master()
    stream = streams(master)
    stream.next_event("SUBSCRIBED", skip=())
    client = clients(master)
    stream.next_event("FRAMEWORK_ADDED")
    master.stop()
    assert stream.next_event(CLOSED)["type"] == CLOSED
    assert stream.clean_end is True
    closed = client.next_event(HTTP_CLOSED)
    assert "error" not in closed, closed      # the scheduler's stream ended as cleanly
