"""The operator API's documents (``mesos.v1.master.Response``,
include/mesos/v1/master/master.proto) built from the master's records, as
Mesos writes them in JSON (``Master::ReadOnlyHandler::jsonifyGet*``,
src/master/readonly_handler.cpp; the models of src/master/http.cpp and
``createAgentResponse`` of src/common/protobuf_utils.cpp).

Each list a ``jsonifyGet*`` writes is there even when empty (``agents``,
``tasks``, ``completed_tasks``, ...); inside a message, as stout's
``JSON::Protobuf`` writes one, an empty repeated field is left out and an
unset field with a default (``FrameworkInfo.failover_timeout``,
``checkpoint``; ``AgentInfo.port``) is written out. Times are ``TimeInfo``
(nanoseconds), resources ``Resource`` lists in Mesos' ``ENDPOINT`` format
(``role`` ``*``, ``allocation_info`` where allocated).

The ``render_*`` functions read the records and must be called with the
master's lock held (``LocalMaster.read``); so must the ``event_*``
functions, which build the events of the operator's SUBSCRIBE stream
(``mesos.v1.master.Event``) as ``protobuf::master::event::create*``
(src/common/protobuf_utils.cpp) and ``ReadOnlyHandler::subscribe``
(src/master/readonly_handler.cpp) build them.
"""

from ..records import mesos_id
from ..resources import Resources
from . import shown_secrets
from .endpoints import role_usage
from .metrics import snapshot
from .state_json import VERSION, master_flags, render_version

_AGENT_CAPABILITIES = ("MULTI_ROLE", "HIERARCHICAL_ROLE", "RESERVATION_REFINEMENT")
_AGENT_PORT = 5051     # Mesos' default, for an agent not (yet) listening


def time_info(seconds):
    """A ``TimeInfo`` of a ``time.time()``."""
    return {"nanoseconds": int(round(seconds * 1e9))}


def _set(out, key, values):
    """``out[key] = values`` unless empty (an unset repeated field)."""
    if values:
        out[key] = values


def render_version_info():
    """``GetVersion.version_info`` (``version()``, src/common/http.cpp)."""
    return {key: value for key, value in render_version().items()
            if key in ("version", "build_date", "build_time", "build_user", "git_sha",
                       "git_tag")}


def render_flags(master):
    """``GetFlags.flags``: every flag as a ``Flag``."""
    return [{"name": name, "value": value}
            for name, value in sorted(master_flags(master).items())]


def render_master(master):
    """``GetMaster``: the MasterInfo and when this master started and was
    elected (``Master::Http::getMaster``)."""
    out = {"master_info": dict(master.master_info or {})}
    if master.start_time is not None:
        out["start_time"] = out["elected_time"] = master.start_time
    return out


# --- agents ------------------------------------------------------------------------

def _address(agent):
    """(host, port) of the agent's own HTTP server (``agent_http.py``)."""
    return agent.address or (agent.hostname, _AGENT_PORT)


def agent_info(agent):
    """The agent's ``AgentInfo`` (its resources as an agent registers them;
    ``port`` where its HTTP server listens)."""
    out = {"hostname": agent.hostname, "port": _address(agent)[1], "id": mesos_id(agent.id)}
    _set(out, "resources", agent.total.to_json())
    _set(out, "attributes", agent.attributes_json())
    return out


def _pid_host_port(agent):
    host, port = _address(agent)
    return ("[%s]" % host if ":" in host else host), port


def render_agent(agent):
    """``GetAgents.Agent`` (``createAgentResponse``)."""
    out = {"agent_info": agent_info(agent), "active": agent.active, "deactivated": False,
           "version": VERSION,
           "pid": "slave(1)@%s:%d" % _pid_host_port(agent),
           "registered_time": time_info(agent.registered_time),
           "capabilities": [{"type": name} for name in _AGENT_CAPABILITIES]}
    _set(out, "total_resources", agent.total.to_json(role="*"))
    _set(out, "allocated_resources", _by_role(
        (task.role, task.resources) for task in agent.tasks.values()))
    _set(out, "offered_resources", _by_role(
        (offer.role, offer.resources) for offer in agent.offers.values()))
    return out


def render_agents(records):
    """``GetAgents``; no agent is ever recovered here."""
    return {"agents": [render_agent(agent) for agent in records.agents.values()],
            "recovered_agents": []}


# --- frameworks ----------------------------------------------------------------------

def _by_role(pairs):
    """Resource JSON of (role, Resources) pairs, summed per role, each with
    its ``allocation_info``."""
    sums: dict[str, Resources] = {}
    for role, resources in pairs:
        sums.setdefault(role, Resources()).add(resources)
    return [item for role in sorted(sums)
            for item in sums[role].to_json(role="*", allocation_role=role)]


def framework_info(framework):
    """Its ``FrameworkInfo`` as the master holds it: with its id, and the
    fields with defaults written out."""
    info = dict(framework.info, id=mesos_id(framework.id))
    info.setdefault("failover_timeout", 0.0)
    info.setdefault("checkpoint", False)
    return info


def render_framework(framework):
    """``GetFrameworks.Framework`` (``model(const Framework&)``, src/master/http.cpp)."""
    out = {"framework_info": framework_info(framework), "active": framework.active,
           "connected": framework.connected, "recovered": False,
           "registered_time": time_info(framework.registered_time)}
    # Mesos' Framework sets reregisteredTime to its registration time at
    # first (src/master/framework.cpp), and model() writes it when non-zero.
    out["reregistered_time"] = time_info(framework.reregistered_time
                                         if framework.reregistered_time is not None
                                         else framework.registered_time)
    if framework.unregistered_time:
        out["unregistered_time"] = time_info(framework.unregistered_time)
    _set(out, "offers", [offer.json for offer in framework.offers.values()])
    _set(out, "allocated_resources", _by_role(
        (task.role, task.resources) for task in framework.tasks.values()
        if not task.terminal))
    _set(out, "offered_resources", _by_role(
        (offer.role, offer.resources) for offer in framework.offers.values()))
    return out


def render_frameworks(records):
    return {"frameworks": [render_framework(f) for f in records.frameworks.values()],
            "completed_frameworks": [render_framework(f)
                                     for f in records.completed_frameworks]}


# --- tasks and executors ----------------------------------------------------------

def render_task(task):
    """A ``Task`` (``createTask``, src/common/protobuf_utils.cpp, with the
    statuses ``Master::updateTask`` keeps)."""
    info = task.info
    out = {"name": task.name, "task_id": mesos_id(task.id),
           "framework_id": mesos_id(task.framework_id), "agent_id": mesos_id(task.agent_id),
           "state": task.state}
    if task.executor is not None:   # createTask: a task with an ExecutorInfo names it
        out["executor_id"] = mesos_id(task.executor.id)
    _set(out, "resources", task.resources.to_json(allocation_role=task.role))
    _set(out, "statuses", [{k: v for k, v in status.items() if k != "data"}
                           for status in task.status_log])
    for key in ("labels", "discovery", "container", "health_check", "kill_policy", "limits"):
        if key in info:
            out[key] = info[key]
    user = info.get("command", {}).get("user")
    if user is not None:
        out["user"] = user
    if task.status_update_state is not None:
        # The update last forwarded to its framework (Master::forward,
        # src/master/master.cpp): set together, from updates with a uuid.
        out["status_update_state"] = task.status_update_state
        out["status_update_uuid"] = task.status_update_uuid
    return out


def render_tasks(records):
    """``GetTasks``: of registered and completed frameworks; none is ever
    unreachable here."""
    frameworks = list(records.frameworks.values()) + list(records.completed_frameworks)
    return {"tasks": [render_task(t) for f in frameworks for t in f.tasks.values()],
            "unreachable_tasks": [],
            "completed_tasks": [render_task(t) for f in frameworks for t in f.completed_tasks]}


def render_executors(records):
    """``GetExecutors`` (``ReadOnlyHandler``'s executors of each agent): the
    frameworks' own executors (custom and default, ``executors.py``) that
    run; a command task's executor is the agent's own, which Mesos' master
    does not list."""
    return {"executors": [{"agent_id": mesos_id(executor.agent_id),
                           "executor_info": shown_secrets.executor_info(executor.info)}
                          for executor in records.executors.values()]}


def render_state(records):
    """``GetState`` (``jsonifyGetState``)."""
    return {"get_tasks": render_tasks(records), "get_executors": render_executors(records),
            "get_frameworks": render_frameworks(records), "get_agents": render_agents(records)}


# --- the other reads ------------------------------------------------------------------

def render_metrics(master, records):
    """``GetMetrics`` (``jsonifyGetMetrics``, src/common/http.hpp): every
    metric of ``/metrics/snapshot`` as a ``Metric``, by name (a std::map)."""
    return {"metrics": [{"name": name, "value": value}
                        for name, value in sorted(snapshot(master, records).items())]}


def render_roles(records):
    """``GetRoles`` (``ReadOnlyHandler::getRoles``, src/master/readonly_handler.cpp):
    each known role with its weight (no weights are set here: the default
    1.0), its frameworks, and what is allocated and offered to it, as
    scalar ``Resource``s of cpus, mem, disk and gpus only."""
    roles = []
    for name, members, allocated, offered in role_usage(records):
        role = {"name": name, "weight": 1.0}
        _set(role, "frameworks", [mesos_id(framework_id) for framework_id in members])
        amounts = allocated.copy().add(offered).to_state()
        _set(role, "resources", [
            {"name": kind, "type": "SCALAR", "scalar": {"value": amounts[kind]}}
            for kind in sorted(amounts) if kind in ("cpus", "mem", "disk", "gpus")
            and amounts[kind]])
        roles.append(role)
    out: dict = {}
    _set(out, "roles", roles)
    return out


# --- the operator's event stream ------------------------------------------------------

def event_subscribed(records, heartbeat_interval):
    """SUBSCRIBED: the whole state (``jsonifyGetState``) and the interval
    of the HEARTBEATs that follow (``jsonifySubscribe``)."""
    return {"type": "SUBSCRIBED",
            "subscribed": {"get_state": render_state(records),
                           "heartbeat_interval_seconds": heartbeat_interval}}


def event_task_added(task):
    """TASK_ADDED (``createTaskAdded``): a task the master has just taken
    on (``Framework::addTask``, src/master/framework.cpp), TASK_STAGING."""
    return {"type": "TASK_ADDED", "task_added": {"task": render_task(task)}}


def event_task_updated(task, status):
    """TASK_UPDATED (``createTaskUpdated``, sent by ``Master::updateTask``):
    ``status`` the TaskStatus the master has just taken in (the oldest
    update its framework has not acknowledged, or one of the master's
    own), ``state`` the task's latest state, which may be ahead of it."""
    return {"type": "TASK_UPDATED",
            "task_updated": {"framework_id": mesos_id(task.framework_id),
                             "status": {k: v for k, v in status.items() if k != "data"},
                             "state": task.state}}


def _framework_event(kind, framework):
    """FRAMEWORK_ADDED or FRAMEWORK_UPDATED (``createFrameworkAdded``,
    ``createFrameworkUpdated``): the framework with all three times set
    (``reregistered_time`` its registration's until it re-subscribes,
    ``unregistered_time`` 0 until it is removed), no resources."""
    registered = framework.registered_time
    document = {
        "framework_info": framework_info(framework), "active": framework.active,
        "connected": framework.connected, "recovered": False,
        "registered_time": time_info(registered),
        "reregistered_time": time_info(framework.reregistered_time or registered),
        "unregistered_time": time_info(framework.unregistered_time or 0.0)}
    return {"type": kind, kind.lower(): {"framework": document}}


def event_framework_added(framework):
    return _framework_event("FRAMEWORK_ADDED", framework)


def event_framework_updated(framework):
    return _framework_event("FRAMEWORK_UPDATED", framework)


def event_framework_removed(framework):
    """FRAMEWORK_REMOVED (``createFrameworkRemoved``): its FrameworkInfo."""
    return {"type": "FRAMEWORK_REMOVED",
            "framework_removed": {"framework_info": framework_info(framework)}}


def event_agent_added(agent):
    """AGENT_ADDED (``createAgentAdded``): as GET_AGENTS shows the agent."""
    return {"type": "AGENT_ADDED", "agent_added": {"agent": render_agent(agent)}}


def event_agent_removed(agent_id):
    """AGENT_REMOVED (``createAgentRemoved``)."""
    return {"type": "AGENT_REMOVED", "agent_removed": {"agent_id": mesos_id(agent_id)}}


__all__ = ["render_metrics", "render_roles", "event_subscribed", "event_task_added",
           "event_task_updated", "event_framework_added", "event_framework_updated",
           "event_framework_removed", "event_agent_added", "event_agent_removed",
           "render_version_info", "render_flags", "render_master", "render_agents",
           "render_frameworks", "render_tasks", "render_executors", "render_state",
           "render_task", "render_agent", "render_framework", "time_info"]
