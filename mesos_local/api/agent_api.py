"""The agent v1 API, ``POST /api/v1`` at an agent's address, as a Mesos
agent answers it (``Http::api``, src/slave/http.cpp; docs/agent-http-api.md;
``mesos.v1.agent.Call``/``Response``, include/mesos/v1/agent/agent.proto).

Checked in Mesos' order: ``Content-Type`` (400 absent, 415 neither JSON
nor protobuf; the local agents take no RecordIO request streams: 415 for
those too), the body as JSON or protobuf and as a Call (400; ``proto.py``
reads protobuf into the dict the JSON would be),
``validation::agent::call::validate`` (src/slave/validation.cpp: ``type``
and the call's sub-message present, 400), ``Accept`` (406; JSON where it
allows it, else protobuf; RecordIO only for the calls that stream). Then
the read calls are answered 200 with a ``Response`` in that type
(``agent_json.py``): ``GET_HEALTH``, ``GET_VERSION``, ``GET_FLAGS``,
``GET_STATE``, ``GET_CONTAINERS``, ``GET_FRAMEWORKS``, ``GET_EXECUTORS``,
``GET_TASKS``, ``READ_FILE`` and ``LIST_FILES`` (this agent's sandboxes,
resolved and bounded as ``/files``: ``files.py``); ``UNKNOWN`` is 501 with no body, as Mesos
answers it, and the other calls 501 naming the call (but
``ATTACH_CONTAINER_OUTPUT``: ``attach_output.py``, which the agent's
server gives that call to).
"""

import json

from . import agent_json, proto
from .endpoints import JSON_TYPE, Reply, negotiate
from .operator import in_type, list_files_reply, read_call, read_file_reply
from .operator_json import render_version_info

PROTOBUF_TYPE = proto.PROTOBUF_TYPE
RECORDIO_TYPE = "application/recordio"
# The types Http::api (src/slave/http.cpp) answers in, in its order, and
# its words when the request accepts none.
ANSWERS = (JSON_TYPE, PROTOBUF_TYPE, RECORDIO_TYPE)
NOT_ACCEPTABLE = "Expecting 'Accept' to allow %s or %s or %s" % ANSWERS

# mesos.v1.agent.Call.Type (include/mesos/v1/agent/agent.proto).
CALL_TYPES = frozenset((
    "UNKNOWN", "GET_HEALTH", "GET_FLAGS", "GET_VERSION", "GET_METRICS", "GET_LOGGING_LEVEL",
    "SET_LOGGING_LEVEL", "LIST_FILES", "READ_FILE", "GET_STATE", "GET_CONTAINERS",
    "GET_FRAMEWORKS", "GET_EXECUTORS", "GET_OPERATIONS", "GET_TASKS", "GET_AGENT",
    "GET_RESOURCE_PROVIDERS", "LAUNCH_NESTED_CONTAINER", "WAIT_NESTED_CONTAINER",
    "KILL_NESTED_CONTAINER", "REMOVE_NESTED_CONTAINER", "LAUNCH_NESTED_CONTAINER_SESSION",
    "ATTACH_CONTAINER_INPUT", "ATTACH_CONTAINER_OUTPUT", "LAUNCH_CONTAINER",
    "WAIT_CONTAINER", "KILL_CONTAINER", "REMOVE_CONTAINER", "ADD_RESOURCE_PROVIDER_CONFIG",
    "UPDATE_RESOURCE_PROVIDER_CONFIG", "REMOVE_RESOURCE_PROVIDER_CONFIG",
    "MARK_RESOURCE_PROVIDER_GONE", "PRUNE_IMAGES"))

# validation::agent::call::validate: the sub-message a served call needs.
_SUBMESSAGE = {"LIST_FILES": "list_files", "READ_FILE": "read_file"}

# Call type -> render(agent, records): the Response's ``get_x`` field.
_READS = {
    "GET_HEALTH": lambda agent, records: {"healthy": True},
    # Http::getVersion and Http::getFlags (src/slave/http.cpp): version()
    # as the master's (src/common/http.cpp), the agent's own flags.
    "GET_VERSION": lambda agent, records: {"version_info": render_version_info()},
    "GET_FLAGS": agent_json.get_flags,
    "GET_STATE": agent_json.get_state,
    "GET_CONTAINERS": agent_json.get_containers,
    "GET_FRAMEWORKS": agent_json.get_frameworks,
    "GET_EXECUTORS": agent_json.get_executors,
    "GET_TASKS": agent_json.get_tasks,
}
SERVED = tuple(_READS) + ("READ_FILE", "LIST_FILES", "ATTACH_CONTAINER_OUTPUT")
# The calls whose answer is a stream (Http::_api).
STREAMING = frozenset(("ATTACH_CONTAINER_OUTPUT", "LAUNCH_NESTED_CONTAINER_SESSION"))


def _check(call):
    """The Call's error (``Failed to convert ...``/``Failed to validate ...``), or None."""
    if not isinstance(call, dict):
        return "Failed to convert JSON into Call protobuf: Expecting a JSON object"
    kind = call.get("type")
    if kind is None:
        return "Failed to validate agent::Call: Expecting 'type' to be present"
    if not isinstance(kind, str) or kind not in CALL_TYPES:
        return ("Failed to convert JSON into Call protobuf: Failed to find enum for '%s'"
                % (kind,))
    sub = _SUBMESSAGE.get(kind)
    if sub is None:
        return None
    request = call.get(sub)
    if request is None:
        return "Failed to validate agent::Call: Expecting '%s' to be present" % sub
    if not isinstance(request, dict) or not isinstance(request.get("path"), str):
        return "Failed to convert JSON into Call protobuf: Missing required fields: %s.path" % sub
    for name in ("offset", "length"):
        value = request.get(name)
        if name == "offset" and kind == "READ_FILE" and value is None:
            return ("Failed to convert JSON into Call protobuf: Missing required fields: "
                    "read_file.offset")
        if value is not None and _integer(value) is None:
            return ("Failed to convert JSON into Call protobuf: Not a uint64: %s.%s"
                    % (sub, name))
    return None


def _integer(value):
    """A uint64 as JSON holds it (a number or a numeric string), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value.isdigit():
            return None
        return int(value)
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value >= 0 and value.is_integer():
        return int(value)
    return None


def read(content_type, body):
    """The Call in the body of ``POST /api/v1`` on an agent's server (the
    dict its JSON gives), or the Reply that refuses it; read once, for
    ``call_reply`` or ``attach_output.attach``."""
    # deserialize(), src/common/http.hpp: its wording for a bad protobuf body
    return read_call(content_type, body, proto.AGENT_CALL,
                     "Failed to parse body into a protobuf object",
                     "Expecting 'Content-Type' of %s or %s (the local agent does not take %s), "
                     "got %r" % (JSON_TYPE, PROTOBUF_TYPE, RECORDIO_TYPE,
                                 (content_type or "").strip()))


def call_reply(master, agent, call, accept):
    """The Reply to ``POST /api/v1`` on ``agent``'s server (already
    authenticated) with this ``call`` (``read``'s); ``accept``: the Accept
    header."""
    error = _check(call)
    if error is not None:
        return Reply(400, error)
    answer = negotiate(accept, ANSWERS, NOT_ACCEPTABLE)
    if isinstance(answer, Reply):
        return answer
    if answer == RECORDIO_TYPE:
        # Http::api takes RecordIO for any call, then Http::_api refuses it
        # but for the calls that stream (ATTACH_CONTAINER_OUTPUT is
        # attach_output.py's; LAUNCH_NESTED_CONTAINER_SESSION goes on to 501).
        if call["type"] not in STREAMING:
            return Reply(406, "Streaming response is not supported for %s call" % call["type"])
        answer = JSON_TYPE
    return in_type(_call_reply(master, agent, call), answer, proto.AGENT_RESPONSE)


def _call_reply(master, agent, call):
    kind = call["type"]
    if kind == "UNKNOWN":
        return Reply(501)           # Http::api: NotImplemented()
    if kind in _READS:
        return _response(kind, kind.lower(), master.read(
            lambda _master, records: _READS[kind](agent, records)))
    attached = master.agent_sandboxes(agent.id)
    if kind == "READ_FILE":
        return read_file_reply(call["read_file"], attached)
    if kind == "LIST_FILES":
        return list_files_reply(call["list_files"], attached)
    return Reply(501, "Call type %s is not supported by the local agent (it serves %s)"
                 % (kind, ", ".join(SERVED)))


def _response(kind, field, document):
    return Reply(200, json.dumps({"type": kind, field: document}).encode("utf-8"), JSON_TYPE)


__all__ = ["SERVED", "CALL_TYPES", "call_reply"]
