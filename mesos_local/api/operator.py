"""The v1 operator API, ``POST /api/v1`` (also ``/master/api/v1``, and any
path under them: ``/api/v1/operator``, as libprocess routes it,
``routes.py``), and the legacy ``POST /master/teardown`` (also
``/teardown``), as Mesos' master answers them (``Master::Http::api`` and
``Master::Http::teardown``, src/master/http.cpp; docs/operator-http-api.md).

``/api/v1`` takes a ``mesos.v1.master.Call`` in JSON or protobuf and
checks it as Mesos does: ``Content-Type`` (400 absent, 415 neither), the
body as JSON or protobuf (400; ``proto.py`` reads protobuf into the dict
the JSON would be), the Call (``LocalMaster.parse_message``: strict or as
Mesos' parser; 400), ``validation::master::call::validate`` (400: ``type``
and the call's sub-message present), ``Accept`` (406; JSON where it
allows it, else protobuf: the Responses and the SUBSCRIBE stream below
are then serialized ``Response``s and ``Event``s). Then:

* ``SUBSCRIBE``: 200, a chunked RecordIO stream of ``mesos.v1.master.Event``
  in JSON: SUBSCRIBED (``get_state``, ``heartbeat_interval_seconds``), a
  HEARTBEAT, then TASK_ADDED, TASK_UPDATED, FRAMEWORK_ADDED/UPDATED/REMOVED,
  AGENT_ADDED/REMOVED as they happen and a HEARTBEAT every interval
  (``subscribers.py``; ``Stream``, served by the HTTP server as it serves a
  scheduler's stream);
* ``GET_HEALTH``, ``GET_VERSION``, ``GET_FLAGS``, ``GET_MASTER``,
  ``GET_STATE``, ``GET_AGENTS``, ``GET_FRAMEWORKS``, ``GET_EXECUTORS``,
  ``GET_TASKS``, ``GET_METRICS``, ``GET_LOGGING_LEVEL``, ``GET_ROLES``,
  ``GET_WEIGHTS``, ``GET_OPERATIONS``, ``GET_QUOTA``,
  ``GET_MAINTENANCE_STATUS``, ``GET_MAINTENANCE_SCHEDULE``: 200, a
  ``Response`` in JSON (``operator_json.py``; what Mesos answers where
  nothing is set: no weights, quotas, operations or maintenance here);
* ``SET_LOGGING_LEVEL``: 200 with no body, the verbosity set for the
  duration (``LocalMaster.set_logging_level``);
* ``READ_FILE``, ``LIST_FILES``: 404 for every path, 400 for one no file
  can have: a Mesos master's ``Files`` has no sandbox attached
  (``files.nothing_attached``); an agent answers them for its own
  sandboxes (``agent_api.py``, with ``read_file_reply`` and
  ``list_files_reply`` below);
* ``TEARDOWN``: 200 with no body, the framework removed and its tasks
  killed, as the scheduler's TEARDOWN; 400 for a framework not registered;
* ``UNKNOWN``: 501 with no body; the calls the local master does not
  serve (reservations, volumes, maintenance and quota updates, ...): 501
  naming the call.

Authentication (the ``mesos-master-readwrite`` realm when the master has
credentials) and the leader redirect come first, in ``http_server.py``.
With no ACLs, as a Mesos master without ``--acls``, any authenticated
principal may tear down any framework.
"""

import base64
import json
import urllib.parse

from . import files, json_body, proto, validation
from . import operator_json as models
from .endpoints import JSON_TYPE, Reply, negotiate

PROTOBUF_TYPE = proto.PROTOBUF_TYPE

# validation::master::call::validate (src/master/validation.cpp): the
# sub-message a call type needs.
_SUBMESSAGE = {
    "GET_METRICS": "get_metrics", "SET_LOGGING_LEVEL": "set_logging_level",
    "LIST_FILES": "list_files", "READ_FILE": "read_file", "UPDATE_WEIGHTS": "update_weights",
    "RESERVE_RESOURCES": "reserve_resources", "UNRESERVE_RESOURCES": "unreserve_resources",
    "CREATE_VOLUMES": "create_volumes", "DESTROY_VOLUMES": "destroy_volumes",
    "GROW_VOLUME": "grow_volume", "SHRINK_VOLUME": "shrink_volume",
    "UPDATE_MAINTENANCE_SCHEDULE": "update_maintenance_schedule",
    "START_MAINTENANCE": "start_maintenance", "STOP_MAINTENANCE": "stop_maintenance",
    "DRAIN_AGENT": "drain_agent", "DEACTIVATE_AGENT": "deactivate_agent",
    "REACTIVATE_AGENT": "reactivate_agent", "UPDATE_QUOTA": "update_quota",
    "SET_QUOTA": "set_quota", "REMOVE_QUOTA": "remove_quota", "TEARDOWN": "teardown",
    "MARK_AGENT_GONE": "mark_agent_gone",
}

# Call type -> render(master, records): the Response's ``get_x`` field of
# the reads (None: left unset).
_READS = {
    "GET_HEALTH": lambda master, records: {"healthy": True},
    "GET_VERSION": lambda master, records: {"version_info": models.render_version_info()},
    "GET_FLAGS": lambda master, records: {"flags": models.render_flags(master)},
    "GET_MASTER": lambda master, records: models.render_master(master),
    "GET_STATE": lambda master, records: models.render_state(records),
    "GET_AGENTS": lambda master, records: models.render_agents(records),
    "GET_FRAMEWORKS": lambda master, records: models.render_frameworks(records),
    "GET_EXECUTORS": lambda master, records: models.render_executors(records),
    "GET_TASKS": lambda master, records: models.render_tasks(records),
    "GET_METRICS": models.render_metrics,
    # Master::Http::getLoggingLevel: glog's FLAGS_v.
    "GET_LOGGING_LEVEL": lambda master, records: {"level": master.logging_level},
    "GET_ROLES": lambda master, records: models.render_roles(records),
    # WeightsHandler::get (src/master/weights_handler.cpp) sets get_weights
    # only to add a WeightInfo: with no weights, the Response has none.
    "GET_WEIGHTS": lambda master, records: None,
    # ReadOnlyHandler::getOperations: the agents' operations (never any here).
    "GET_OPERATIONS": lambda master, records: {},
    # QuotaHandler::status (src/master/quota_handler.cpp): no quota is set.
    "GET_QUOTA": lambda master, records: {"status": {}},
    # Master::Http::getMaintenanceStatus and getMaintenanceSchedule: no
    # machine is draining or down, no schedule.
    "GET_MAINTENANCE_STATUS": lambda master, records: {"status": {}},
    "GET_MAINTENANCE_SCHEDULE": lambda master, records: {"schedule": {}},
}
SERVED = ("SUBSCRIBE",) + tuple(_READS) + ("SET_LOGGING_LEVEL", "LIST_FILES", "READ_FILE",
                                           "TEARDOWN")

# The types Master::Http::api (src/master/http.cpp) answers in, in its
# order, and its words when the request accepts neither.
ANSWERS = (JSON_TYPE, PROTOBUF_TYPE)
NOT_ACCEPTABLE = "Expecting 'Accept' to allow '%s' or '%s'" % (PROTOBUF_TYPE, JSON_TYPE)


class Stream:
    """``call_reply``'s answer to SUBSCRIBE: 200, then ``subscription``
    streamed (the HTTP server tells ``ended(subscription, reason)``) in
    ``content_type`` (JSON or protobuf)."""

    def __init__(self, subscription, ended, content_type=JSON_TYPE):
        self.subscription = subscription
        self.ended = ended
        self.content_type = content_type


NO_FRAMEWORK = "No framework found with specified ID"


def check_call(call):
    """Mesos' validation of a parsed Call; an error message or None."""
    kind = call.get("type")
    if kind is None:
        return "Expecting 'type' to be present"
    sub = _SUBMESSAGE.get(kind)
    if sub is not None and sub not in call:
        return "Expecting '%s' to be present" % sub
    return None


def call_reply(master, content_type, accept, body):
    """The Reply (or ``Stream``) to ``POST /api/v1`` with this body (already
    authenticated, this master leading); ``accept``: the Accept header."""
    call = read_call(content_type, body, proto.MASTER_CALL,
                     "Failed to parse body into Call protobuf")
    if isinstance(call, Reply):
        return call
    try:
        call = master.parse_message("master.Call", call)
    except validation.SchemaError as exc:
        return Reply(400, "Failed to convert JSON into Call protobuf: %s" % exc)
    error = check_call(call)
    if error is not None:
        return Reply(400, "Failed to validate master::Call: %s" % error)
    answer = negotiate(accept, ANSWERS, NOT_ACCEPTABLE)
    if isinstance(answer, Reply):
        return answer
    kind = call["type"]
    if kind == "SUBSCRIBE":
        subscription = master.operator_subscribe()
        if subscription is None:
            return Reply(503, "The local master is stopping")
        return Stream(subscription, master.operator_stream_ended, answer)
    return in_type(_call_reply(master, call, kind), answer, proto.MASTER_RESPONSE)


def read_call(content_type, body, message, bad_protobuf,
              unsupported="Expecting 'Content-Type' of %s or %s" % (JSON_TYPE, PROTOBUF_TYPE)):
    """The Call in ``body`` as the dict its JSON gives (``message``: its
    protobuf type, when it comes in protobuf), or the Reply that refuses it
    (Mesos' wording: ``bad_protobuf`` for a body that does not parse,
    ``unsupported`` for another Content-Type)."""
    if content_type is None:
        return Reply(400, "Expecting 'Content-Type' to be present")
    content_type = content_type.strip()
    if content_type == PROTOBUF_TYPE:
        try:
            return proto.decode(message, body)
        except proto.ProtobufDecodeError:
            return Reply(400, bad_protobuf)
    if content_type == JSON_TYPE:
        try:
            return json_body.parse(body)
        except json_body.BodyJSONError as exc:
            return Reply(400, "Failed to parse body into JSON: %s" % exc)
    return Reply(415, unsupported)


def in_type(reply, content_type, message):
    """``reply`` with its JSON body (a ``message``) serialized in protobuf
    when that is what the request accepts."""
    if content_type == PROTOBUF_TYPE and reply.content_type == JSON_TYPE and reply.body:
        return Reply(reply.status, proto.encode_json(message, reply.body), PROTOBUF_TYPE,
                     reply.headers)
    return reply


def _call_reply(master, call, kind):
    if kind == "UNKNOWN":
        return Reply(501)
    if kind in _READS:
        return _response(kind, kind.lower(), master.read(_READS[kind]))
    if kind == "READ_FILE":
        return read_file_reply(call["read_file"], files.nothing_attached)
    if kind == "LIST_FILES":
        return list_files_reply(call["list_files"], files.nothing_attached)
    if kind == "SET_LOGGING_LEVEL":
        request = call["set_logging_level"]
        master.set_logging_level(_integer(request["level"]),
                                 _integer(request["duration"]["nanoseconds"]) / 1e9)
        return Reply(200)     # Master::Http::setLoggingLevel: OK()
    if kind == "TEARDOWN":
        return teardown(master, call["teardown"]["framework_id"]["value"])
    return Reply(501, "Call type %s is not supported by the local master (it serves %s)"
                 % (kind, ", ".join(SERVED)))


def _response(kind, field, document):
    response = {"type": kind}
    if document is not None:
        response[field] = document
    return Reply(200, json.dumps(response).encode("utf-8"), JSON_TYPE)


def _integer(value):
    """A uint64 as parsed JSON holds it (a number, or a numeric string)."""
    if isinstance(value, str):
        return int(float(value)) if any(c in value for c in ".eE") else int(value)
    return int(value)


def read_file_reply(request, attached):
    """``READ_FILE`` (the master's ``Master::Http::readFile`` and an agent's
    alike): ``FilesProcess::_read`` of the path, within ``attached``."""
    length = request.get("length")
    try:
        size, data = files.read_bytes(request["path"], _integer(request["offset"]),
                                      None if length is None else _integer(length),
                                      attached)
    except files.FilesError as exc:
        return Reply(exc.status, str(exc))
    return _response("READ_FILE", "read_file",
                     {"size": size, "data": base64.b64encode(data).decode("ascii")})


def list_files_reply(request, attached):
    """``LIST_FILES`` (``Master::Http::listFiles``, an agent's alike):
    ``FilesProcess::browse`` of the path, each entry a ``FileInfo``; 400 and
    404 as it refuses."""
    try:
        entries = files.listing(request["path"], attached)
    except files.FilesError as exc:
        return Reply(exc.status, str(exc))
    listing: dict = {}
    if entries:
        listing["file_infos"] = [files.file_info_message(path, info)
                                 for path, info in entries]
    return _response("LIST_FILES", "list_files", listing)


def teardown(master, framework_id):
    """``Master::Http::_teardown``: 200 once removed, 400 when no framework
    of that id is registered (a completed one included)."""
    if not master.teardown(framework_id):
        return Reply(400, NO_FRAMEWORK)
    return Reply(200)


def teardown_reply(master, body):
    """``POST /master/teardown`` with the form ``frameworkId=ID``."""
    try:
        values = urllib.parse.parse_qs(body.decode("utf-8"), keep_blank_values=True,
                                       strict_parsing=bool(body))
    except (UnicodeDecodeError, ValueError) as exc:
        return Reply(400, "Unable to decode query string: %s" % exc)
    ids = values.get("frameworkId")
    if not ids:
        return Reply(400, "Missing 'frameworkId' query parameter in the request body")
    return teardown(master, ids[-1])


__all__ = ["SERVED", "Stream", "call_reply", "teardown_reply", "check_call", "read_file_reply",
           "list_files_reply"]
