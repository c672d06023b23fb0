"""The local master's read-only JSON documents: ``/master/state`` (shaped
like real Mesos' ``state.json``: ``Master::ReadOnlyHandler::state`` in
src/master/readonly_handler.cpp, the Task and TaskStatus models of
src/common/http.cpp), ``/version`` and its MasterInfo. The other read
endpoints (``endpoints.py``) are built from the same pieces.

``render_state`` reads the master's records and must be called with the
master's lock held (``LocalMaster.state()`` does).
"""

import socket
import struct

from ..agent import agent_address
from ..durations import stringify_duration
from ..resources import Resources
from .host_names import ipv6_only_address

VERSION = "1.11.0"
BUILD_DATE = "2020-11-24 00:00:00"
BUILD_TIME = 1606176000.0
# What a Mesos 1.11 master announces (MasterInfo.Capability).
MASTER_CAPABILITIES = ["AGENT_UPDATE", "AGENT_DRAINING", "QUOTA_V2"]


def render_version():
    return {"version": VERSION, "build_date": BUILD_DATE, "build_time": BUILD_TIME,
            "build_user": "mesos_local", "git_tag": VERSION, "git_sha": "mesos_local"}


def _is_ipv4(text):
    parts = text.split(".")
    return len(parts) == 4 and all(part.isdigit() and int(part) < 256 for part in parts)


def render_master_info(master_id, url_host, port):
    """The MasterInfo of a master listening on ``url_host:port``. One on an
    IPv6 address (``[::1]``) has it as ``address.ip`` (a string), its
    host name without brackets (mesos.proto ``Address``), and 0 as the
    IPv4-only ``ip``: it said 127.0.0.1, where nothing listened."""
    hostname = url_host.strip("[]")
    ipv6 = hostname if ":" in hostname else ipv6_only_address(hostname)
    if ipv6:
        return {"id": master_id, "ip": 0, "port": port,
                "pid": "master@[%s]:%d" % (ipv6, port), "hostname": hostname,
                "version": VERSION,
                "address": {"hostname": hostname, "ip": ipv6, "port": port}}
    try:
        # An address needs no lookup: resolving a name would also import the
        # idna codec (~10 ms of every tfrun's start-up).
        ip = url_host if _is_ipv4(url_host) else socket.gethostbyname(url_host)
        packed = struct.unpack("=I", socket.inet_aton(ip))[0]
    except OSError:
        ip, packed = "127.0.0.1", struct.unpack("=I", socket.inet_aton("127.0.0.1"))[0]
    return {"id": master_id, "ip": packed, "port": port,
            "pid": "master@%s:%d" % (ip, port), "hostname": hostname,
            "version": VERSION,
            "address": {"hostname": hostname, "ip": ip, "port": port}}


def render_state(master, records, start_time, files_address=None):
    """``master``: the LocalMaster (its settings), ``records``: its Records;
    ``files_address``: where the agents' endpoints are (default: the
    master's own address, ``records.files_address``)."""
    info = master.master_info or {}
    agents = list(records.agents.values())
    started = start_time or 0.0
    return {
        "version": VERSION, "git_tag": VERSION, "build_date": BUILD_DATE,
        "build_time": BUILD_TIME, "build_user": "mesos_local",
        "start_time": started, "elected_time": started,
        "id": master.id, "pid": info.get("pid"), "hostname": info.get("hostname"),
        "capabilities": list(MASTER_CAPABILITIES),
        "leader": info.get("pid"), "leader_info": info,
        "activated_slaves": sum(1 for a in agents if a.active),
        "deactivated_slaves": sum(1 for a in agents if not a.active),
        "unreachable_slaves": 0,
        "flags": master_flags(master),
        "slaves": [agent_json(agent, files_address or records.files_address)
                   for agent in agents],
        "frameworks": [framework_json(f) for f in records.frameworks.values()],
        "completed_frameworks": [framework_json(f) for f in records.completed_frameworks],
        "orphan_tasks": [], "unregistered_frameworks": [],
    }


def master_flags(master):
    """The master's settings under Mesos' flag names (src/master/flags.cpp),
    values as Mesos prints them: strings, durations as ``250ms``/``5secs``."""
    return {
        "port": str(master.port), "work_dir": master.work_dir or "",
        "allocation_interval": stringify_duration(master.allocation_interval),
        "filter_gpu_resources": _bool(master.filter_gpu_resources),
        "root_submissions": _bool(master.root_submissions),
        "authenticate_frameworks": _bool(master.authenticates),
        "authenticate_http_frameworks": _bool(master.authenticates),
        # Credentials guard the read-write realm (/api/v1, /master/teardown) and,
        # unlike Mesos by default, /files (files.py), but not the read-only
        # endpoints (/master/state, ...): the realms of src/master/master.cpp:595-615.
        "authenticate_http_readonly": "false",
        "authenticate_http_readwrite": _bool(master.authenticates),
        "max_completed_frameworks": "50", "max_completed_tasks_per_framework": "1000",
        "max_operator_event_stream_subscribers":
            str(master.max_operator_event_stream_subscribers),
        "hostname": (master.master_info or {}).get("hostname", ""),
    }


def _bool(value):
    return "true" if value else "false"


def principal_and_roles(framework):
    """A framework's ``principal`` (when it has one) and its ``roles`` or
    ``role``: FullFrameworkWriter (readonly_handler.cpp) writes one of the
    two, as an agent's FrameworkWriter does."""
    out = {}
    if "principal" in framework.info:
        out["principal"] = framework.info["principal"]
    if framework.multi_role:
        out["roles"] = list(framework.roles)
    else:
        out["role"] = framework.roles[0] if framework.roles else "*"
    return out


def agent_json(agent, files_address=None):
    """``files_address``: (host, port) where the client reached the master;
    the agent's ``pid`` and ``port`` name its own HTTP server reached from
    there (``agent_address``), as a Mesos agent's libprocess pid names the
    address the web UI and other clients reach its endpoints at."""
    host, port = agent_address(agent, files_address) or (agent.hostname, 5051)
    if ":" in host:
        host = "[%s]" % host
    return {
        "id": agent.id, "pid": "slave(1)@%s:%d" % (host, port),
        "hostname": agent.hostname, "port": port,
        "registered_time": agent.registered_time,
        "resources": agent.total.to_state(), "used_resources": agent.used.to_state(),
        "offered_resources": agent.offered.to_state(), "reserved_resources": {},
        "unreserved_resources": agent.total.to_state(),
        "attributes": dict(agent.spec.attributes), "active": agent.active,
        "deactivated": False,   # no DEACTIVATE_AGENT here (operator API)
        "version": VERSION, "gpu_ids": list(agent.gpu_ids),
        "capabilities": ["MULTI_ROLE", "HIERARCHICAL_ROLE", "RESERVATION_REFINEMENT"],
    }


def framework_json(framework):
    used, offered = Resources(), Resources()
    for task in framework.tasks.values():
        if not task.terminal:
            used.add(task.resources)
    for offer in framework.offers.values():
        offered.add(offer.resources)
    info = framework.info
    out = {
        "id": framework.id, "name": framework.name, "user": info["user"],
        "hostname": info.get("hostname", ""), "webui_url": info.get("webui_url", ""),
        "suppressed_roles": sorted(framework.suppressed),
        "capabilities": list(framework.capabilities), "active": framework.active,
        "connected": framework.connected, "recovered": False,
        "failover_timeout": framework.failover_timeout,
        "checkpoint": info.get("checkpoint", False),
        "registered_time": framework.registered_time,
        "unregistered_time": framework.unregistered_time,
        "resources": used.copy().add(offered).to_state(), "used_resources": used.to_state(),
        "offered_resources": offered.to_state(),
        "tasks": [task_json(t) for t in framework.tasks.values()],
        "unreachable_tasks": [],
        "completed_tasks": [task_json(t) for t in framework.completed_tasks],
        # json(JSON::ObjectWriter*, const Offer&), src/common/http.cpp
        "offers": [{"id": o.id, "framework_id": framework.id,
                    "allocation_info": {"role": o.role}, "slave_id": o.agent_id,
                    "resources": o.resources.to_state()} for o in framework.offers.values()],
        "executors": [_executor_json(executor) for executor in _executors(framework)],
        "completed_executors": [],
    }
    out.update(principal_and_roles(framework))
    if framework.reregistered_time is not None:
        out["reregistered_time"] = framework.reregistered_time
    if "labels" in info:
        out["labels"] = info["labels"].get("labels", [])
    return out


def _executors(framework):
    """The framework's own executors that run (``executors.py``), once each."""
    out = []
    for task in list(framework.tasks.values()) + list(framework.completed_tasks):
        executor = task.executor
        if executor is not None and executor.state != "TERMINATED" and executor not in out:
            out.append(executor)
    return out


def _executor_json(executor):
    """An executor as the master's ``FrameworkWriter`` lists it: its
    ExecutorInfo (``model(ExecutorInfo)``, src/common/http.cpp) and agent."""
    info = executor.info
    out = {"executor_id": executor.id, "name": info.get("name", ""),
           "framework_id": executor.framework_id, "source": info.get("source", ""),
           "resources": executor.resources.to_state(), "slave_id": executor.agent_id}
    if "command" in info:   # its environment left out: it may hold secrets
        out["command"] = {key: value for key, value in info["command"].items()
                          if key != "environment"}
    if "labels" in info:
        out["labels"] = info["labels"].get("labels", [])
    return out


def task_json(task):
    """A task as state.json shows it, plus ``sandbox`` (the local master's own
    addition: where its stdout and stderr are)."""
    out = {"id": task.id, "name": task.name, "framework_id": task.framework_id,
           "executor_id": task.executor.id if task.executor is not None else "",
           "slave_id": task.agent_id, "state": task.state,
           "resources": task.resources.to_state(), "role": task.role,
           "statuses": list(task.statuses), "sandbox": task.sandbox}
    if "labels" in task.info:
        out["labels"] = task.info["labels"].get("labels", [])
    for key in ("discovery", "container"):
        if key in task.info:
            out[key] = task.info[key]
    return out
