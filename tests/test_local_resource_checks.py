"""What Mesos' master refuses before it launches anything, refused here too:
the embedded master must be at least as strict as Mesos (apache/mesos
src/common/resources.cpp ``Resources::validate``, src/common/values.cpp
``convertToFixed``, src/master/master.cpp ``Master::accept``,
src/common/validation.cpp ``validateVolume``), and follow what its
allocator does to a framework's filters when it disconnects
(src/master/allocator/mesos/hierarchical.cpp ``deactivateFramework``)."""

import base64
import uuid

import pytest
import requests
from fixtures_master import clients, local_master, make_local_master, small_agent
from mesos_http_client import ports, scalar, task_info
from waiting import wait_until

from tfmesos.core.jobs import Job
from tfmesos.exceptions import SpecError

pytestmark = pytest.mark.timeout(120)


def task_error(client, task_id):
    status = client.next_update(task_id)
    assert status["state"] == "TASK_ERROR", status
    assert status["reason"] == "REASON_TASK_INVALID" and status["source"] == "SOURCE_MASTER"
    return status["message"]


@pytest.mark.parametrize("resources, message", [
    # Fixed point with three decimals: a non-zero amount that rounds to 0.
    ([scalar("cpus", 0.0004), scalar("mem", 32)],
     "Resource 'cpus' is invalid: Invalid scalar resource: value <= 0"),
    ([scalar("cpus", 0.1), scalar("mem", 0.0004)],
     "Resource 'mem' is invalid: Invalid scalar resource: value <= 0"),
    ([scalar("cpus", 0.1), scalar("mem", 32), {"name": "ports", "type": "RANGES"}],
     "Resource 'ports' is invalid: Invalid ranges resource"),
    ([{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1},
       "ranges": {"range": [{"begin": 1, "end": 2}]}}, scalar("mem", 32)],
     "Resource 'cpus' is invalid: Invalid scalar resource"),
], ids=["tiny cpus", "tiny mem", "ranges without ranges", "scalar with ranges"])
def test_a_malformed_resource_is_a_task_error(local_master, clients, resources, message):
    client = clients(local_master)
    offer = client.next_offers()[0]
    info = task_info("t", offer, "true")
    info["resources"] = resources
    client.launch(offer, [info])
    assert task_error(client, "t") == message


def test_an_invalid_resource_fails_every_task_of_its_launch(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("good", offer, "sleep 1"),
                          task_info("bad", offer, "true", extra_resources=[ports((31005, 31001))])])
    for task_id in ("good", "bad"):
        assert task_error(client, task_id) == \
            "Resource 'ports' is invalid: Invalid ranges resource: begin > end"


def test_a_launch_with_an_id_is_a_task_error(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.call("ACCEPT", {"offer_ids": [offer["id"]], "operations": [
        {"type": "LAUNCH", "id": {"value": "op1"},
         "launch": {"task_infos": [task_info("with-id", offer, "true")]}}]})
    assert task_error(client, "with-id") == \
        "The `id` field cannot be set on LAUNCH operations"


def test_a_task_with_resource_limits_is_refused_as_its_agent_cannot_hold_them(local_master,
                                                                                clients):
    # TaskInfo.limits were taken and ignored (the memory request held it, no
    # CPU quota); these agents do not claim TASK_RESOURCE_LIMITS, and Mesos
    # refuses such a task for them (validateResourceLimits).
    client = clients(local_master)
    offer = client.next_offers()[0]
    info = task_info("limited", offer, "true", cpus=0.5, mem=64)
    info["limits"] = {"mem": {"value": 512}, "cpus": {"value": 1}}
    client.launch(offer, [info])
    assert task_error(client, "limited") == "Agent is not capable of handling task resource limits"
    assert "TASK_RESOURCE_LIMITS" not in [c for agent in local_master.state()["slaves"]
                                          for c in agent["capabilities"]]


def test_half_a_thousandth_rounds_away_from_zero_as_llround(make_local_master, clients):
    # 3.0005 cpus of an offer of 3 (3000.5 thousandths, exactly): 3.001 to
    # Mesos (llround), 3 to Python's round (halves to even).
    client = clients(make_local_master(agents=[small_agent(cpus=3)]))
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("over", offer, "true", cpus=3.0005)])
    assert "Task uses more resources cpus:3.001" in task_error(client, "over")


def test_an_acknowledgement_whose_uuid_is_no_uuid_is_refused(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    answer = client.call("ACKNOWLEDGE", {"agent_id": offer["agent_id"],
                                         "task_id": {"value": "t"},
                                         "uuid": base64.b64encode(bytes(16)).decode()},
                         check=False)
    assert (answer.status_code, answer.text) == (
        400, "Failed to validate scheduler::Call: Not a valid UUID")


def test_a_volume_with_a_host_path_and_a_source_is_a_task_error(make_local_master, clients):
    master = make_local_master(container_runner=None)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("vol", offer, "true", container={
        "type": "MESOS", "mesos": {"image": {"type": "DOCKER", "docker": {"name": "busybox"}}},
        "volumes": [{"container_path": "/x", "host_path": "/tmp", "mode": "RO",
                     "source": {"type": "HOST_PATH", "host_path": {"path": "/tmp"}}}]})])
    assert "Invalid volume: Only one of them should be set" in task_error(client, "vol")


def test_a_disconnected_frameworks_filters_are_cleared(local_master, clients):
    # A framework failing over gets its agents offered again at once (its
    # declines held them back for refuse_seconds after a takeover here).
    client = clients(local_master, failover_timeout=60)
    client.decline(client.next_offers(), refuse_seconds=600)
    client.no_event("OFFERS", 0.5)
    client.close()
    wait_until(lambda: not local_master.state()["frameworks"][0]["connected"], 30,
               message="the master never saw the stream gone")
    again = clients(local_master, failover_timeout=60, framework_id=client.framework_id)
    assert again.next_offers(timeout=10)


def test_a_job_asks_for_no_amount_mesos_keeps_as_zero():
    for field in ("cpus", "mem"):
        with pytest.raises(SpecError, match="must be at least 0.0005"):
            Job("worker", 1, **{field: 0.0004})
    assert Job("worker", 1, cpus=0.0005).cpus == 0.001   # as Mesos keeps it


def test_an_operation_acknowledgement_without_its_agent_is_refused(local_master, clients):
    # Mesos refuses it before anything (src/master/validation.cpp:
    # "Expecting 'agent_id' to be present"); it was taken here, 202.
    client = clients(local_master)
    reply = client.post({"type": "ACKNOWLEDGE_OPERATION_STATUS",
                         "framework_id": {"value": client.framework_id},
                         "acknowledge_operation_status": {
                             "uuid": base64.b64encode(uuid.uuid4().bytes).decode(),
                             "operation_id": {"value": "op"}}},
                        headers={"Mesos-Stream-Id": client.stream_id})
    assert (reply.status_code, reply.text) == (
        400, "Failed to validate scheduler::Call: Expecting 'agent_id' to be present")


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS"])
def test_the_scheduler_endpoint_answers_other_methods_405(local_master, method):
    # Python's 501 HTML page, where Mesos answers MethodNotAllowed({"POST"}).
    reply = requests.request(method, local_master.url + "/api/v1/scheduler", timeout=30)
    assert reply.status_code == 405 and reply.headers["Allow"] == "POST"
