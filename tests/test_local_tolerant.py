"""The embedded master reads calls as real Mesos does by default (stout's
parser, ``mesos_local/api/stout.py``), logging each tolerated deviation
once per framework; strict on request (``strict=True``, ``--strict``,
``$MESOS_LOCAL_STRICT``, which this suite sets)."""

import copy
import logging

import pytest
from conftest import STRICT_ENV
from fixtures_master import make_local_master, small_agent
from mesos_http_client import SchedulerClient, scalar
from schema_calls import accept_call, full_task, subscribe_call
from tfrun_helpers import SMALL, run_tfrun

from mesos_local import LocalMaster
from mesos_local import command_line as cli
from mesos_local.api import stout
from mesos_local.api import validation as schema

DEVIATIONS = "mesos_local.api.stout"


def avmesos_task(offer, task_id, command="true"):
    """A TaskInfo as avmesos sends it: ``slave_id`` added (Offer.accept), and
    the loose JSON other clients write."""
    return {"name": task_id, "task_id": {"value": task_id}, "agent_id": offer["agent_id"],
            "slave_id": offer["agent_id"],
            "resources": [scalar("cpus", 0.1), scalar("mem", "32")],
            "command": {"value": command, "shell": "true", "uris": None}, "labels": None}


# --- the parser ------------------------------------------------------------------------------

def test_what_stout_tolerates():
    task = full_task()
    task["slave_id"] = {"value": "S0"}
    task["labels"] = None
    task["command"]["shell"] = "true"
    task["resources"][0]["scalar"]["value"] = "1.5"
    task["discovery"]["ports"]["ports"][0]["visibility"] = "GALAXY"   # optional enum
    task["resources"][3] = None                                         # null element
    call = accept_call(task)
    call["accept"]["offer_ids"] = {"value": "O1"}                       # one, not an array
    call["subscribe"] = None
    parsed, deviations = stout.parse("Call", call)
    info = parsed["accept"]["operations"][0]["launch"]["task_infos"][0]
    assert "slave_id" not in info and "labels" not in info and "subscribe" not in parsed
    assert info["command"]["shell"] is True
    assert info["resources"][0]["scalar"]["value"] == 1.5
    assert len(info["resources"]) == 3
    assert "visibility" not in info["discovery"]["ports"]["ports"][0]
    assert parsed["accept"]["offer_ids"] == [{"value": "O1"}]
    prefix = "Call.accept.operations[0].launch.task_infos[0]"
    assert {(d.path, d.mesos) for d in deviations} == {
        (prefix + ".slave_id", "skips it"),
        (prefix + ".labels", "leaves the field unset"),
        (prefix + ".command.shell", "parses it as JSON"),
        (prefix + ".discovery.ports.ports[0].visibility", "drops it (the field stays unset)"),
        (prefix + ".resources[3]", "skips the element"),
        ("Call.accept.offer_ids", "takes it as a one-element array"),
        ("Call.subscribe", "leaves the field unset")}
    # The result is what the strict checker accepts: the handlers see one shape.
    schema.validate(parsed)


def test_subscribe_credentials_are_skipped_as_mesos_does():
    call = subscribe_call(principal="p")
    call["subscribe"]["credentials"] = [{"principal": "p", "secret": "s"}]
    parsed, deviations = stout.parse("Call", call)
    assert "credentials" not in parsed["subscribe"]
    assert [d.path for d in deviations] == ["Call.subscribe.credentials"]


def test_calls_that_are_already_valid_have_no_deviations():
    for call in (accept_call(full_task()),
                 subscribe_call(roles=["tf"], capabilities=[{"type": "MULTI_ROLE"}])):
        parsed, deviations = stout.parse("Call", copy.deepcopy(call))
        assert deviations == []
        schema.validate(parsed)


@pytest.mark.parametrize("mutate, text", [
    (lambda t: t.__setitem__("name", 7), "Not expecting a JSON number for field 'name'"),
    (lambda t: t.__setitem__("command", [{"value": "x"}]),
     "Not expecting a JSON array for field 'command'"),
    (lambda t: t["command"].__setitem__("value", {"x": 1}),
     "Not expecting a JSON object for field 'value'"),
    (lambda t: t["command"].__setitem__("shell", "maybe"),
     "Failed to parse 'maybe' as a JSON boolean for field 'shell'"),
    (lambda t: t["resources"][0].__setitem__("type", "VECTOR"),
     "Failed to find enum for 'VECTOR'"),                           # a required enum
    (lambda t: t.__setitem__("data", "not base64!"), "Failed to base64 decode"),
    (lambda t: t.__setitem__("task_id", None), "task_infos[0].task_id: Missing required field"),
    (lambda t: t["resources"][2]["ranges"]["range"][0].__setitem__("begin", -1),
     "out of range for uint64"),
])
def test_what_mesos_refuses_too(mutate, text):
    task = full_task()
    mutate(task)
    with pytest.raises(schema.SchemaError, match=text.replace("[", r"\[").replace("]", r"\]")):
        stout.parse("Call", accept_call(task))


# --- the master --------------------------------------------------------------------------------

def test_tolerant_master_runs_avmesos_style_launches_and_warns_once(make_local_master, caplog):
    master = make_local_master(strict=False)
    assert not master.strict
    client = SchedulerClient(master.url)
    try:
        client.subscribe()
        with caplog.at_level(logging.WARNING, logger=DEVIATIONS):
            offer = client.next_offers()[0]
            client.launch(offer, [avmesos_task(offer, "a"), avmesos_task(offer, "b")])
            client.wait_state("a", "TASK_FINISHED")
            client.wait_state("b", "TASK_FINISHED")
            offer = client.next_offers()[0]
            client.launch(offer, [avmesos_task(offer, "c")])
            client.wait_state("c", "TASK_FINISHED")
    finally:
        client.close()
    lines = [r.getMessage() for r in caplog.records if r.name == DEVIATIONS]
    slave_id = [line for line in lines if "slave_id" in line]
    assert len(slave_id) == 1, lines           # once per framework, not once per task
    assert "unknown field (TaskInfo has no field 'slave_id'); real Mesos skips it" in slave_id[0]
    assert "framework %s" % client.framework_id in slave_id[0]
    assert any("command.shell" in line and "parses it as JSON" in line for line in lines)
    assert any(".labels: null; real Mesos leaves the field unset" in line for line in lines)
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == DEVIATIONS)


def test_strict_master_refuses_the_same_launch(make_local_master):
    master = make_local_master(strict=True)
    client = SchedulerClient(master.url)
    try:
        client.subscribe()
        offer = client.next_offers()[0]
        response = client.launch(offer, [avmesos_task(offer, "a")], check=False)
    finally:
        client.close()
    assert response.status_code == 400
    assert "task_infos[0].slave_id: unknown field (TaskInfo has no field 'slave_id')" \
        in response.text


def test_the_default_is_tolerant_and_the_environment_makes_it_strict(monkeypatch):
    monkeypatch.delenv(STRICT_ENV)
    assert LocalMaster(agents=[small_agent()]).strict is False
    assert cli.make_master(cli.build_parser().parse_args(["--no-docker"]), {}).strict is False
    for value, strict in (("1", True), ("true", True), ("0", False), ("", False)):
        monkeypatch.setenv(STRICT_ENV, value)
        assert LocalMaster(agents=[small_agent()]).strict is strict
    monkeypatch.setenv(STRICT_ENV, "1")
    assert LocalMaster(agents=[small_agent()], strict=False).strict is False
    assert cli.make_master(cli.build_parser().parse_args(["--no-strict", "--no-docker"]), {}).strict is False
    assert cli.make_master(cli.build_parser().parse_args(["--no-docker"]), {}).strict is True


def test_the_suites_tfrun_runs_use_a_strict_embedded_master():
    # The suite sets the variable (conftest); a tfrun run inherits it, and
    # its embedded master says which way it reads calls (-v: INFO logs).
    result = run_tfrun("-v", "-w", "1", "-s", "0", *SMALL, "--", "true", timeout=90)
    assert result.returncode == 0, result.stderr
    [line] = [line for line in result.stderr.splitlines() if "local master" in line
              and "listening on" in line]
    assert ", strict calls" in line and "tolerant" not in line, line
