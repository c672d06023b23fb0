"""The scheduler API's Call bodies as pure functions (``mesos.v1.scheduler.Call``
in include/mesos/v1/scheduler/scheduler.proto): the driver adds
``framework_id`` and sends them; tests check them against the local
master's schema without a connection."""

import base64
import copy
from typing import Any


def encode_data(data):
    """bytes -> base64 text, as Mesos JSON carries ``bytes`` fields."""
    return base64.b64encode(data).decode("ascii")


def decode_data(text):
    return base64.b64decode(text)


def _as_list(ids):
    if isinstance(ids, dict):
        return [ids]
    return list(ids)


def subscribe(framework_info, suppressed_roles=()):
    framework = copy.deepcopy(framework_info)
    call: dict[str, Any] = {"type": "SUBSCRIBE", "subscribe": {"framework_info": framework}}
    if suppressed_roles:
        call["subscribe"]["suppressed_roles"] = sorted(suppressed_roles)
    if "id" in framework:  # re-subscription: Mesos wants the id in both places
        call["framework_id"] = framework["id"]
    return call


def accept(offer_ids, operations, filters=None):
    body = {"offer_ids": _as_list(offer_ids), "operations": list(operations)}
    if filters is not None:
        body["filters"] = filters
    return {"type": "ACCEPT", "accept": body}


def launch(offer_ids, task_infos, filters=None):
    return accept(offer_ids, [{"type": "LAUNCH", "launch": {"task_infos": list(task_infos)}}],
                  filters)


def decline(offer_ids, filters=None):
    body = {"offer_ids": _as_list(offer_ids)}
    if filters is not None:
        body["filters"] = filters
    return {"type": "DECLINE", "decline": body}


def revive(roles=()):
    call: dict[str, Any] = {"type": "REVIVE"}
    if roles:
        call["revive"] = {"roles": list(roles)}
    return call


def suppress(roles=()):
    call: dict[str, Any] = {"type": "SUPPRESS"}
    if roles:
        call["suppress"] = {"roles": list(roles)}
    return call


def kill(task_id, agent_id=None):
    body = {"task_id": task_id}
    if agent_id is not None:
        body["agent_id"] = agent_id
    return {"type": "KILL", "kill": body}


def acknowledge(status):
    """The ACKNOWLEDGE of a TaskStatus, or None when it carries no uuid
    (master-generated updates need none)."""
    if "uuid" not in status:
        return None
    return {"type": "ACKNOWLEDGE", "acknowledge": {
        "agent_id": status["agent_id"], "task_id": status["task_id"], "uuid": status["uuid"]}}


def reconcile(tasks):
    return {"type": "RECONCILE", "reconcile": {"tasks": [
        {key: task[key] for key in ("task_id", "agent_id") if key in task} for task in tasks]}}


def message(executor_id, agent_id, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return {"type": "MESSAGE", "message": {
        "agent_id": agent_id, "executor_id": executor_id, "data": encode_data(data)}}


def update_framework(framework_info):
    """UPDATE_FRAMEWORK (Mesos 1.9+): the framework's new FrameworkInfo,
    its id included (scheduler.proto)."""
    return {"type": "UPDATE_FRAMEWORK", "update_framework": {"framework_info": framework_info}}


def teardown():
    return {"type": "TEARDOWN"}
