"""The scheduler API's Call bodies as pure functions (``mesos.v1.scheduler.Call``
in include/mesos/v1/scheduler/scheduler.proto): the driver adds
``framework_id`` and sends them; tests check them against the local
master's schema without a connection."""

import base64
import copy
from collections.abc import Iterable, Mapping
from typing import Any, Optional, Union

Call = dict[str, Any]          # a Call body, as JSON
Json = Mapping[str, Any]       # a message given (an ID, a TaskInfo, a TaskStatus, Filters)
Ids = Union[Json, Iterable[Json]]   # one ID message or several


def encode_data(data: bytes) -> str:
    """bytes -> base64 text, as Mesos JSON carries ``bytes`` fields."""
    return base64.b64encode(data).decode("ascii")


def decode_data(text: Union[str, bytes]) -> bytes:
    return base64.b64decode(text)


def _as_list(ids: Ids) -> list[Json]:
    if isinstance(ids, Mapping):
        return [ids]
    return list(ids)


def subscribe(framework_info: Json, suppressed_roles: Iterable[str] = ()) -> Call:
    framework = copy.deepcopy(framework_info)
    call: Call = {"type": "SUBSCRIBE", "subscribe": {"framework_info": framework}}
    if suppressed_roles:
        call["subscribe"]["suppressed_roles"] = sorted(suppressed_roles)
    if "id" in framework:  # re-subscription: Mesos wants the id in both places
        call["framework_id"] = framework["id"]
    return call


def accept(offer_ids: Ids, operations: Iterable[Json], filters: Optional[Json] = None) -> Call:
    body: dict[str, Any] = {"offer_ids": _as_list(offer_ids), "operations": list(operations)}
    if filters is not None:
        body["filters"] = filters
    return {"type": "ACCEPT", "accept": body}


def launch(offer_ids: Ids, task_infos: Iterable[Json], filters: Optional[Json] = None) -> Call:
    return accept(offer_ids, [{"type": "LAUNCH", "launch": {"task_infos": list(task_infos)}}],
                  filters)


def decline(offer_ids: Ids, filters: Optional[Json] = None) -> Call:
    body: dict[str, Any] = {"offer_ids": _as_list(offer_ids)}
    if filters is not None:
        body["filters"] = filters
    return {"type": "DECLINE", "decline": body}


def revive(roles: Iterable[str] = ()) -> Call:
    call: Call = {"type": "REVIVE"}
    if roles:
        call["revive"] = {"roles": list(roles)}
    return call


def suppress(roles: Iterable[str] = ()) -> Call:
    call: Call = {"type": "SUPPRESS"}
    if roles:
        call["suppress"] = {"roles": list(roles)}
    return call


def kill(task_id: Json, agent_id: Optional[Json] = None) -> Call:
    body: dict[str, Any] = {"task_id": task_id}
    if agent_id is not None:
        body["agent_id"] = agent_id
    return {"type": "KILL", "kill": body}


def acknowledge(status: Json) -> Optional[Call]:
    """The ACKNOWLEDGE of a TaskStatus, or None when it carries no uuid
    (master-generated updates need none)."""
    if "uuid" not in status:
        return None
    return {"type": "ACKNOWLEDGE", "acknowledge": {
        "agent_id": status["agent_id"], "task_id": status["task_id"], "uuid": status["uuid"]}}


def reconcile(tasks: Iterable[Json]) -> Call:
    return {"type": "RECONCILE", "reconcile": {"tasks": [
        {key: task[key] for key in ("task_id", "agent_id") if key in task} for task in tasks]}}


def message(executor_id: Json, agent_id: Json, data: Union[str, bytes]) -> Call:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return {"type": "MESSAGE", "message": {
        "agent_id": agent_id, "executor_id": executor_id, "data": encode_data(data)}}


def update_framework(framework_info: Json, suppressed_roles: Iterable[str] = ()) -> Call:
    """UPDATE_FRAMEWORK (Mesos 1.9+): the framework's new FrameworkInfo,
    its id included, and its roles that stay suppressed: the call's
    ``suppressed_roles`` are the framework's new set, every other role
    revived (scheduler.proto; src/master/master.cpp ``updateFramework``
    hands them to the allocator), so libmesos sends them
    (src/sched/sched.cpp, ``updateFramework``)."""
    call: dict[str, Any] = {"framework_info": framework_info}
    roles = sorted(suppressed_roles)
    if roles:
        call["suppressed_roles"] = roles
    return {"type": "UPDATE_FRAMEWORK", "update_framework": call}


def teardown() -> Call:
    return {"type": "TEARDOWN"}
