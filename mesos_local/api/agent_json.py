"""One local agent's own documents, as a Mesos agent serves them at its
address: ``/state`` (``Http::state``, src/slave/http.cpp, with its
``FrameworkWriter`` and ``ExecutorWriter``; docs/endpoints/slave/state.md),
``/monitor/statistics`` (``Http::statistics``: one entry per executor with
its ``ResourceStatistics``) and the responses of the agent v1 API's read
calls (``mesos.v1.agent.Response``, include/mesos/v1/agent/agent.proto).

A command task runs under the agent's command executor, whose id is the
task's id (``Slave::getExecutorInfo``, src/slave/slave.cpp; its ``source`` too): each task here is
one executor of its framework with one task, its ``container`` the task's
ContainerID, its ``directory`` the task's sandbox. A framework's own
executor (``executors.py``: custom, or the default executor of a task
group) is one executor with all its tasks here, its container and
directory its own (the default executor's tasks each in a nested
container under it).

The functions read the master's records and must be called with the
master's lock held (``LocalMaster.read``).
"""

import time

from ..records import mesos_id
from . import shown_secrets
from .operator_json import framework_info, render_task
from .state_json import BUILD_DATE, BUILD_TIME, VERSION, principal_and_roles, task_json

AGENT_CAPABILITIES = ["MULTI_ROLE", "HIERARCHICAL_ROLE", "RESERVATION_REFINEMENT"]


def pid(agent, host, port):
    """The agent's libprocess pid: each local agent is a process of its own,
    ``slave(1)``, at the address its HTTP server listens on."""
    if ":" in host:
        host = "[%s]" % host
    return "slave(1)@%s:%d" % (host, port)


def _frameworks_of(agent, records):
    """(framework, [its tasks on ``agent``, in launch order]) of every
    framework, registered or completed, that ran a task there."""
    out = []
    frameworks = list(records.frameworks.values()) + list(records.completed_frameworks)
    for framework in frameworks:
        tasks = [task for task in list(framework.tasks.values()) + list(framework.completed_tasks)
                 if task.agent_id == agent.id]
        if tasks:
            out.append((framework, tasks))
    return out


def _command_executor_name(task):
    """The command executor's name, as ``Slave::getExecutorInfo``
    (src/slave/slave.cpp) writes it: the task id and its command, cut."""
    command = task.info.get("command", {})
    value = command.get("value")
    if command.get("shell", True):
        if value is None:
            shown = "(Command: NO COMMAND)"
        else:
            shown = "(Command: sh -c '%s')" % (value[:12] + "..." if len(value) > 15 else value)
    elif value is None:
        shown = "(Command: NO EXECUTABLE)"
    else:
        args = value + ", " + ", ".join(command.get("arguments", []))
        shown = "(Command: [%s])" % (args[:12] + "..." if len(args) > 15 else args)
    return "Command Executor (Task: %s) %s" % (task.id, shown)


def _executor_json(task):
    """``ExecutorWriter``: the command executor of ``task``."""
    live, done = ([], [task]) if task.terminal else ([task], [])
    return {"id": task.id, "name": _executor_name(task), "source": task.id,
            "container": task.container_id, "directory": task.sandbox or "",
            "resources": task.resources.to_state(), "role": task.role,
            "tasks": [task_json(t) for t in live], "queued_tasks": [],
            "completed_tasks": [task_json(t) for t in done]}


def _own_executor_json(executor, tasks):
    """``ExecutorWriter`` of a framework's own executor (``executors.py``)
    and its ``tasks`` here: its resources its own and its live tasks'
    (``Executor::allocatedResources``)."""
    queued = {task.id for task in executor.tasks() if task.id not in executor.launched}
    live = [t for t in tasks if not t.terminal and t.id not in queued]
    resources = executor.allocated(tasks)
    return {"id": executor.id, "name": executor.info.get("name", ""),
            "source": executor.info.get("source", ""), "container": executor.container_id,
            "directory": executor.sandbox or "", "resources": resources.to_state(),
            "role": executor.role, "type": executor.kind,
            "tasks": [task_json(t) for t in live],
            "queued_tasks": [task_json(t) for t in tasks if t.id in queued and not t.terminal],
            "completed_tasks": [task_json(t) for t in tasks if t.terminal]}


def _executors(tasks):
    """(a framework's own executor or None, [its tasks]) of ``tasks``, each
    command task alone (the agent's command executor), in launch order."""
    out: list = []
    seen: dict = {}
    for task in tasks:
        executor = task.executor
        if executor is None:
            out.append((None, [task]))
        elif id(executor) in seen:
            seen[id(executor)][1].append(task)
        else:
            seen[id(executor)] = (executor, [task])
            out.append(seen[id(executor)])
    return out


def _framework_json(framework, tasks):
    """``FrameworkWriter``; an executor whose task ended (its own executor
    that ended) is a completed one."""
    info = framework.info
    out = {"id": framework.id, "name": framework.name, "user": info.get("user", ""),
           "failover_timeout": framework.failover_timeout,
           "checkpoint": info.get("checkpoint", False), "hostname": info.get("hostname", "")}
    out.update(principal_and_roles(framework))
    live: list[dict] = []
    completed: list[dict] = []
    for executor, its_tasks in _executors(tasks):
        if executor is None:
            task = its_tasks[0]
            (completed if task.terminal else live).append(_executor_json(task))
        else:
            (completed if executor.state == "TERMINATED" else live).append(
                _own_executor_json(executor, its_tasks))
    out["executors"] = live
    out["completed_executors"] = completed
    return out


def render_flags(agent, port):
    """The agent's flags, name -> value as strings (``Http::_flags``,
    src/slave/http.cpp: ``/flags`` and ``/state``'s ``flags``); ``port``
    where it listens."""
    return {"port": str(port), "hostname": agent.hostname, "work_dir": agent.directory}


def get_flags(agent, records):
    """``GET_FLAGS``: ``_flags()`` evolved, one ``Flag`` a flag in name
    order (a JSON::Object's)."""
    port = agent.address[1] if agent.address else 5051
    return {"flags": [{"name": name, "value": value}
                      for name, value in sorted(render_flags(agent, port).items())]}


def render_state(agent, records, address, start_time, master_hostname):
    """``GET /state``: the agent's state JSON; ``address`` (host, port) where
    it listens."""
    live: list[dict] = []
    completed: list[dict] = []
    for framework, tasks in _frameworks_of(agent, records):
        gone = framework not in records.frameworks.values()
        (completed if gone else live).append(_framework_json(framework, tasks))
    used = agent.used.to_state()
    return {
        "version": VERSION, "git_tag": VERSION, "build_date": BUILD_DATE,
        "build_time": BUILD_TIME, "build_user": "mesos_local",
        "start_time": start_time or 0.0, "id": agent.id, "pid": pid(agent, *address),
        "hostname": agent.hostname, "capabilities": list(AGENT_CAPABILITIES),
        "resources": agent.total.to_state(), "reserved_resources": {},
        "unreserved_resources": agent.total.to_state(),
        "reserved_resources_full": {}, "unreserved_resources_full": agent.total.to_json(role="*"),
        "reserved_resources_allocated": {}, "unreserved_resources_allocated": used,
        "resource_providers": [], "attributes": dict(agent.spec.attributes),
        "master_hostname": master_hostname, "gpu_ids": list(agent.gpu_ids),
        "flags": render_flags(agent, address[1]),
        "frameworks": live, "completed_frameworks": completed,
    }


def statistics(task, now=None):
    """``ResourceStatistics`` of a running task: the limits of its
    resources, and what ``TaskProcess.usage`` measures of its processes."""
    cpus = task.resources.get("cpus")
    mem = task.resources.get("mem")
    out = {"timestamp": now if now is not None else time.time()}
    if cpus:
        out["cpus_limit"] = cpus
    if mem:
        out["mem_limit_bytes"] = int(mem * 1024 * 1024)
    proc = task.proc
    measured = proc.usage() if proc is not None and hasattr(proc, "usage") \
        and not task.terminal else None
    if measured is not None:
        out["cpus_user_time_secs"], out["cpus_system_time_secs"] = measured[0], measured[1]
        out["mem_rss_bytes"] = measured[2]
    return out


def running_tasks(agent, records):
    """The agent's command tasks (and the DEFAULT executor's, each in a
    nested container of its own) that have a container now (not yet terminal)."""
    return [task for task in agent.tasks.values() if not task.terminal
            and (task.executor is None or task.executor.kind == "DEFAULT")]


def _executor_name(task):
    """The name of a task's executor: the command executor's, else its own."""
    if task.executor is not None:
        return task.executor.info.get("name", "")
    return _command_executor_name(task)


class _Container:
    """A custom executor's container as ``statistics`` reads a task: its
    resources (its own and its live tasks'), its process."""

    def __init__(self, executor):
        self.resources = executor.allocated()
        self.proc = executor.proc
        self.terminal = executor.state == "TERMINATED"


def _custom_executors(agent, records):
    return [executor for executor in records.executors.values()
            if executor.agent_id == agent.id and executor.kind == "CUSTOM"]


def render_monitor(agent, records):
    """``GET /monitor/statistics``: each running executor with its statistics."""
    out = [{"executor_id": task.executor.id if task.executor is not None else task.id,
            "executor_name": _executor_name(task), "framework_id": task.framework_id,
            "source": task.id, "statistics": statistics(task)}
           for task in running_tasks(agent, records)]
    out += [{"executor_id": executor.id, "executor_name": executor.info.get("name", ""),
             "framework_id": executor.framework_id, "source": executor.info.get("source", ""),
             "statistics": statistics(_Container(executor))}
            for executor in _custom_executors(agent, records)]
    return out


# --- the agent v1 API (mesos.v1.agent.Response) ----------------------------------------

def get_containers(agent, records):
    """``GetContainers`` (``Http::_containers``): each running container with
    its executor and ``resource_statistics``."""
    containers = []
    for task in running_tasks(agent, records):
        container = {"framework_id": mesos_id(task.framework_id),
                     "executor_id": mesos_id(task.executor.id if task.executor is not None
                                             else task.id),
                     "executor_name": _executor_name(task),
                     "container_id": mesos_id(task.container_id),
                     "resource_statistics": statistics(task)}
        if task.executor is not None:   # a nested container of the DEFAULT executor's
            container["container_id"]["parent"] = {"value": task.executor.container_id}
        containers.append(container)
    containers += [{"framework_id": mesos_id(executor.framework_id),
                    "executor_id": mesos_id(executor.id),
                    "executor_name": executor.info.get("name", ""),
                    "container_id": mesos_id(executor.container_id),
                    "resource_statistics": statistics(_Container(executor))}
                   for executor in _custom_executors(agent, records)]
    return {"containers": containers}


def get_frameworks(agent, records):
    """``GetFrameworks``: the frameworks with tasks here, by FrameworkInfo."""
    live: list[dict] = []
    completed: list[dict] = []
    for framework, _ in _frameworks_of(agent, records):
        gone = framework not in records.frameworks.values()
        (completed if gone else live).append({"framework_info": framework_info(framework)})
    return {"frameworks": live, "completed_frameworks": completed}


def _executor_info(task):
    return {"executor_id": mesos_id(task.id), "framework_id": mesos_id(task.framework_id),
            "name": _command_executor_name(task), "source": task.id,
            "command": shown_secrets.command({
                key: value for key, value in task.info.get("command", {}).items()
                if key in ("uris", "environment")})}


def get_executors(agent, records):
    """``GetExecutors``: a running task's command executor, or a completed
    one; a framework's own executor, running or ended."""
    live: list[dict] = []
    completed: list[dict] = []
    for _, tasks in _frameworks_of(agent, records):
        for executor, its_tasks in _executors(tasks):
            if executor is None:
                task = its_tasks[0]
                (completed if task.terminal else live).append(
                    {"executor_info": _executor_info(task)})
            else:
                (completed if executor.state == "TERMINATED" else live).append(
                    {"executor_info": shown_secrets.executor_info(executor.info)})
    return {"executors": live, "completed_executors": completed}


def get_tasks(agent, records):
    """``GetTasks`` (``Http::_tasks``): launched and completed tasks, as ``Task``s."""
    tasks = [task for _, tasks in _frameworks_of(agent, records) for task in tasks]
    return {"pending_tasks": [], "queued_tasks": [],
            "launched_tasks": [render_task(t) for t in tasks if not t.terminal],
            "terminated_tasks": [],
            "completed_tasks": [render_task(t) for t in tasks if t.terminal]}


def get_state(agent, records):
    """``GetState`` (``Http::_getState``): tasks, executors and frameworks."""
    return {"get_tasks": get_tasks(agent, records),
            "get_executors": get_executors(agent, records),
            "get_frameworks": get_frameworks(agent, records)}


__all__ = ["pid", "render_flags", "get_flags", "render_state", "render_monitor", "statistics",
           "get_containers", "get_frameworks", "get_executors", "get_tasks", "get_state",
           "AGENT_CAPABILITIES"]
