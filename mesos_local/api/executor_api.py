"""The v1 executor API, ``POST /api/v1/executor`` at an agent's address, as
a Mesos agent answers it (``Http::executor``, src/slave/http.cpp;
docs/executor-http-api.md; ``mesos.v1.executor.Call``,
include/mesos/v1/executor/executor.proto).

Checked in Mesos' order and wording: ``Content-Type`` (400 absent, 415
neither JSON nor protobuf; the local agents speak JSON only: 415 for
protobuf too), the body as JSON (400) and as a Call
(``LocalMaster.parse_message``, 400), ``validateExecutorCall``
(src/common/validation.cpp, 400: ``type`` and the call's sub-message
present, an update's uuid a valid UUID from ``SOURCE_EXECUTOR``, not
TASK_STAGING), ``Accept`` for SUBSCRIBE (406); HEARTBEAT is 202 at once.
Then the framework and the executor must be known on this agent (400) and
subscribed for anything but SUBSCRIBE (403), and the call goes to the
master (``LocalMaster.executor_call``, ``executors.py``): SUBSCRIBE
streams (``Stream``, served by the agent's server as the scheduler's
stream is), UPDATE and MESSAGE answer 202, UNKNOWN 501.

Executors are authenticated where the master has credentials, as Mesos
agents with ``--authenticate_http_executors`` authenticate them (off by
default there): a call must carry its executor's token as ``Authorization:
Bearer <token>`` (401 before its body is read, realm
``mesos-agent-executor``) and name that executor (403, as
``verifyExecutorClaims``); Mesos' token is a JWT of those claims, this
master's an opaque secret.
"""

from ..errors import CallError
from . import json_body, validation
from .endpoints import JSON_TYPE, Reply, accepts
from .operator import Stream

PROTOBUF_TYPE = "application/x-protobuf"
_SUBMESSAGE = {"SUBSCRIBE": "subscribe", "UPDATE": "update", "MESSAGE": "message"}


def validate(call):
    """``validateExecutorCall`` (src/common/validation.cpp) of a parsed
    Call: the error message, or None."""
    kind = call.get("type")
    if kind is None:
        return "Expecting 'type' to be present"
    field = _SUBMESSAGE.get(kind)
    if field is not None and field not in call:
        return "Expecting '%s' to be present" % field
    if kind != "UPDATE":
        return None
    status = call["update"]["status"]
    if "uuid" not in status:
        return "Expecting 'uuid' to be present"
    try:
        validation.decode_uuid(status["uuid"])
    except validation.CallValidationError:
        return "Not a valid UUID"
    executor_id = call["executor_id"]["value"]
    if "executor_id" in status and status["executor_id"]["value"] != executor_id:
        return ("ExecutorID in Call: %s does not match ExecutorID in TaskStatus: %s"
                % (executor_id, status["executor_id"]["value"]))
    # TaskStatus.source has no default: unset is SOURCE_MASTER, its first value.
    if status.get("source", "SOURCE_MASTER") != "SOURCE_EXECUTOR":
        return ("Received Call from executor %s of framework %s with invalid source, "
                "expecting 'SOURCE_EXECUTOR'" % (executor_id, call["framework_id"]["value"]))
    if status["state"] == "TASK_STAGING":
        return ("Received TASK_STAGING from executor %s of framework %s which is not allowed"
                % (executor_id, call["framework_id"]["value"]))
    return None


REALM = "mesos-agent-executor"    # EXECUTOR_HTTP_AUTHENTICATION_REALM, src/slave/constants.hpp
CHALLENGE = 'Bearer realm="%s"' % REALM


def authenticate(master, header):
    """(whether the request may go on, the executor it authenticates or
    None): with credentials, the master's agents take only calls that carry
    an executor's token (``Authorization: Bearer <token>``)."""
    if not master.authenticates:
        return True, None
    scheme, _, token = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return False, None
    principal = master.executor_principal(token.strip())
    return principal is not None, principal


def call_reply(master, agent, content_type, accept, body, principal=None):
    """The Reply (or ``Stream`` for SUBSCRIBE) to ``POST /api/v1/executor``
    on ``agent``'s server; ``accept``: the Accept header; ``principal``:
    the executor the request authenticated as (``authenticate``)."""
    if content_type is None:
        return Reply(400, "Expecting 'Content-Type' to be present")
    content_type = content_type.strip()
    if content_type == PROTOBUF_TYPE:
        return Reply(415, "Expecting 'Content-Type' of %s (the local agent does not speak %s)"
                     % (JSON_TYPE, PROTOBUF_TYPE))
    if content_type != JSON_TYPE:
        return Reply(415, "Expecting 'Content-Type' of %s or %s" % (JSON_TYPE, PROTOBUF_TYPE))
    try:
        call = json_body.parse(body)
    except json_body.BodyJSONError as exc:
        return Reply(400, "Failed to parse body into JSON: %s" % exc)
    try:
        call = master.parse_message("executor.Call", call)
    except validation.SchemaError as exc:
        return Reply(400, "Failed to convert JSON into Call protobuf: %s" % exc)
    error = validate(call)
    if error is not None:
        return Reply(400, "Failed to validate Executor::Call: %s" % error)
    kind = call["type"]
    if kind == "SUBSCRIBE" and not accepts(accept if accept and accept.strip() else None,
                                           JSON_TYPE):
        return Reply(406, "Expecting 'Accept' to allow '%s' (the local agent does not speak "
                          "'%s')" % (JSON_TYPE, PROTOBUF_TYPE))
    if kind == "HEARTBEAT":
        return Reply(202)
    try:
        subscription = master.executor_call(agent, call, principal)
    except CallError as exc:
        return Reply(exc.status, exc.message)
    if kind == "UNKNOWN":
        return Reply(501)
    if subscription is not None:
        return Stream(subscription, master.executor_stream_ended)
    return Reply(202)


__all__ = ["call_reply", "validate", "authenticate", "REALM", "CHALLENGE"]
