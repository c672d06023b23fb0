"""What a Mesos master's operator event stream tells of its frameworks and
tasks, kept up to date event by event and shown in the shape of the
master's ``/master/state`` (``/master/frameworks``), so that what reads
that state reads this the same way (pure: no network).

The stream (docs/operator-http-api.md, "Events"; ``mesos.v1.master.Event``,
include/mesos/v1/master/master.proto) starts with SUBSCRIBED, whose
``get_state`` (``Response.GetState``) is the whole state in v1 shapes
(``FrameworkInfo`` with ``id.value``, ``Task`` with ``task_id.value`` and
``agent_id.value``, times as ``TimeInfo`` nanoseconds); then each change:

* ``TASK_ADDED`` (``task``: a Task, TASK_STAGING) when the master takes a
  task on; ``TASK_UPDATED`` (``framework_id``, ``status``, ``state``: the
  task's latest state) for each status update it takes in
  (``Master::updateTask``, src/master/master.cpp);
* ``FRAMEWORK_ADDED``/``FRAMEWORK_UPDATED`` (``framework``: as
  ``GetFrameworks.Framework``, no tasks) when one subscribes, re-subscribes
  or changes its ``FrameworkInfo`` (``Master::sendFrameworkUpdates``);
  Mesos sends nothing when a scheduler merely disconnects
  (``Master::disconnect``), so ``connected`` changes only when it is back;
* ``FRAMEWORK_REMOVED`` (``framework_info``) once it is removed: it is then
  a completed framework, its labels as the master last held them;
* ``AGENT_ADDED``/``AGENT_REMOVED`` and ``HEARTBEAT``: nothing kept here
  (agents' addresses are read from ``/master/slaves``, where Mesos gives
  their ``pid``).

What is kept is bounded as Mesos bounds it: the last
``MAX_COMPLETED_FRAMEWORKS`` completed frameworks and, per framework, the
last ``MAX_COMPLETED_TASKS`` completed tasks (Mesos' defaults:
``--max_completed_frameworks`` 50, ``--max_completed_tasks_per_framework``
1000; here more, as a stream may run for days).
"""

import collections
import time
from collections.abc import Callable, Mapping
from typing import Any, Optional

from .task_states import TERMINAL_STATES

MAX_COMPLETED_FRAMEWORKS = 1000
MAX_COMPLETED_TASKS = 1000
MAX_STATUSES = 20       # status updates kept per task

Json = dict[str, Any]


def _value(field: Any) -> str:
    """``x.value`` of an id message (``{"value": "..."}``), else ""."""
    if isinstance(field, Mapping):
        value = field.get("value")
        return value if isinstance(value, str) else ""
    return ""


def _seconds(time_info: Any) -> Optional[float]:
    """A ``TimeInfo``'s seconds; None when unset or zero."""
    if not isinstance(time_info, Mapping):
        return None
    nanoseconds = time_info.get("nanoseconds")
    if isinstance(nanoseconds, bool) or not isinstance(nanoseconds, (int, float)) \
            or not nanoseconds:
        return None
    return nanoseconds / 1e9


def _labels(labels: Any) -> list:
    """The ``labels`` list of a ``Labels`` message (``{"labels": [...]}``)."""
    found = labels.get("labels") if isinstance(labels, Mapping) else None
    return [label for label in found if isinstance(label, Mapping)] \
        if isinstance(found, list) else []


def state_task(task: Mapping[str, Any]) -> Json:
    """A v1 ``Task`` as ``/master/state`` shows a task (``model(const
    Task&)``, src/common/http.cpp): ``id``, ``name``, ``framework_id``,
    ``executor_id``, ``slave_id``, ``state``, ``labels``, ``statuses``."""
    out: Json = {"id": _value(task.get("task_id")), "name": str(task.get("name") or ""),
                 "framework_id": _value(task.get("framework_id")),
                 "executor_id": _value(task.get("executor_id")),
                 "slave_id": _value(task.get("agent_id")),
                 "state": str(task.get("state") or "TASK_STAGING")}
    labels = _labels(task.get("labels"))
    if labels:
        out["labels"] = labels
    statuses = task.get("statuses")
    if isinstance(statuses, list):
        out["statuses"] = [_state_status(s) for s in statuses[-MAX_STATUSES:]
                           if isinstance(s, Mapping)]
    return out


def _state_status(status: Mapping[str, Any]) -> Json:
    out: Json = {"state": str(status.get("state") or "")}
    seconds = status.get("timestamp")
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        out["timestamp"] = seconds
    return out


class _Framework:
    """One framework as the stream told it: its ``GetFrameworks.Framework``
    fields, its tasks by id (in the order they were added) and whether it
    was removed."""

    def __init__(self, framework_id: str) -> None:
        self.id = framework_id
        self.info: Mapping[str, Any] = {}
        self.connected = True
        self.active = True
        self.registered: Optional[float] = None
        self.reregistered: Optional[float] = None
        self.unregistered: Optional[float] = None
        self.removed = False
        self.tasks: collections.OrderedDict[str, Json] = collections.OrderedDict()
        self.completed: collections.OrderedDict[str, Json] = collections.OrderedDict()

    def update(self, framework: Mapping[str, Any]) -> None:
        """From a ``GetFrameworks.Framework`` (FRAMEWORK_ADDED/UPDATED)."""
        info = framework.get("framework_info")
        if isinstance(info, Mapping):
            self.info = info
        self.connected = framework.get("connected") is not False
        self.active = framework.get("active") is not False
        self.registered = _seconds(framework.get("registered_time")) or self.registered
        self.reregistered = _seconds(framework.get("reregistered_time"))
        self.unregistered = _seconds(framework.get("unregistered_time"))

    def add_task(self, task: Json) -> None:
        self.tasks.pop(task["id"], None)
        self.completed.pop(task["id"], None)
        if task["state"] in TERMINAL_STATES:
            self._complete(task)
        else:
            self.tasks[task["id"]] = task

    def _complete(self, task: Json) -> None:
        self.completed[task["id"]] = task
        while len(self.completed) > MAX_COMPLETED_TASKS:
            self.completed.popitem(last=False)

    def update_task(self, task_id: str, state: str, status: Mapping[str, Any]) -> None:
        task = self.tasks.get(task_id) or self.completed.get(task_id)
        if task is None:    # not told before: as much as the update says
            task = {"id": task_id, "name": "", "framework_id": self.id, "executor_id": "",
                    "slave_id": _value(status.get("agent_id")), "state": state}
        task = dict(task, state=state,
                    statuses=(list(task.get("statuses") or []) + [_state_status(status)])[
                        -MAX_STATUSES:])
        self.add_task(task)

    def document(self) -> Json:
        """As ``/master/frameworks`` shows it (``model(const Framework&)``,
        src/master/http.cpp): its FrameworkInfo's fields, its state, its
        tasks and completed tasks."""
        info = self.info
        out: Json = {"id": self.id, "name": str(info.get("name") or ""),
                     "user": str(info.get("user") or ""),
                     "principal": str(info.get("principal") or ""),
                     "hostname": str(info.get("hostname") or ""),
                     "webui_url": str(info.get("webui_url") or ""),
                     "roles": [str(role) for role in info.get("roles") or []
                               if isinstance(role, str)],
                     "failover_timeout": info.get("failover_timeout") or 0.0,
                     "checkpoint": info.get("checkpoint") is True,
                     "labels": [dict(label) for label in _labels(info.get("labels"))],
                     "active": self.active and not self.removed,
                     "connected": self.connected and not self.removed,
                     "tasks": [dict(task) for task in self.tasks.values()],
                     "completed_tasks": [dict(task) for task in self.completed.values()]}
        for key, seconds in (("registered_time", self.registered),
                             ("reregistered_time", self.reregistered),
                             ("unregistered_time", self.unregistered)):
            if seconds is not None:
                out[key] = seconds
        return out


class OperatorState:
    """The frameworks and tasks of a master, from a SUBSCRIBED event's
    ``get_state`` and each event after it (``apply``); read as
    ``/master/state`` (``state``) or one framework (``framework``).
    ``clock``: what ``FRAMEWORK_REMOVED`` takes as the time it came."""

    def __init__(self, get_state: Mapping[str, Any],
                 clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._frameworks: collections.OrderedDict[str, _Framework] = collections.OrderedDict()
        self._completed: collections.OrderedDict[str, _Framework] = collections.OrderedDict()
        frameworks = get_state.get("get_frameworks") or {}
        for key, completed in (("frameworks", False), ("completed_frameworks", True)):
            for framework in frameworks.get(key) or []:
                if isinstance(framework, Mapping):
                    self._add_framework(framework, completed)
        tasks = get_state.get("get_tasks") or {}
        for key in ("completed_tasks", "tasks", "pending_tasks", "unreachable_tasks",
                    "orphan_tasks"):
            for task in tasks.get(key) or []:
                if isinstance(task, Mapping):
                    self._add_task(task)

    # --- events --------------------------------------------------------------------

    def apply(self, event: Mapping[str, Any]) -> bool:
        """Take in one event; whether it changed anything shown."""
        kind = event.get("type")
        body = event.get(str(kind).lower()) if isinstance(kind, str) else None
        if not isinstance(body, Mapping):
            return False
        if kind == "TASK_ADDED":
            task = body.get("task")
            return isinstance(task, Mapping) and self._add_task(task)
        if kind == "TASK_UPDATED":
            return self._update_task(body)
        if kind in ("FRAMEWORK_ADDED", "FRAMEWORK_UPDATED"):
            framework = body.get("framework")
            return isinstance(framework, Mapping) and self._add_framework(framework, False)
        if kind == "FRAMEWORK_REMOVED":
            return self._remove_framework(body.get("framework_info"))
        return False

    def _find(self, framework_id: str) -> Optional[_Framework]:
        return self._frameworks.get(framework_id) or self._completed.get(framework_id)

    def _add_framework(self, framework: Mapping[str, Any], completed: bool) -> bool:
        info = framework.get("framework_info")
        framework_id = _value(info.get("id")) if isinstance(info, Mapping) else ""
        if not framework_id:
            return False
        known = self._find(framework_id)
        if known is None:
            known = _Framework(framework_id)
        known.update(framework)
        if completed:
            known.removed = True
            self._keep_completed(known)
        elif not known.removed:
            self._frameworks[framework_id] = known
        return True

    def _keep_completed(self, framework: _Framework) -> None:
        self._frameworks.pop(framework.id, None)
        self._completed.pop(framework.id, None)
        self._completed[framework.id] = framework
        while len(self._completed) > MAX_COMPLETED_FRAMEWORKS:
            self._completed.popitem(last=False)

    def _remove_framework(self, info: Any) -> bool:
        framework_id = _value(info.get("id")) if isinstance(info, Mapping) else ""
        if not framework_id or not isinstance(info, Mapping):
            return False
        framework = self._find(framework_id) or _Framework(framework_id)
        framework.info = info
        framework.removed = True
        framework.unregistered = self._clock()
        for task in list(framework.tasks.values()):   # its tasks are gone with it
            framework.tasks.pop(task["id"])
            framework._complete(task)
        self._keep_completed(framework)
        return True

    def _add_task(self, task: Mapping[str, Any]) -> bool:
        found = state_task(task)
        framework = self._find(found["framework_id"]) if found["id"] else None
        if framework is None:
            return False
        framework.add_task(found)
        return True

    def _update_task(self, body: Mapping[str, Any]) -> bool:
        status = body.get("status")
        if not isinstance(status, Mapping):
            return False
        framework = self._find(_value(body.get("framework_id")))
        task_id = _value(status.get("task_id"))
        if framework is None or not task_id:
            return False
        state = body.get("state") if isinstance(body.get("state"), str) else status.get("state")
        framework.update_task(task_id, str(state or ""), status)
        return True

    # --- reads ---------------------------------------------------------------------

    def framework(self, framework_id: str) -> "tuple[Optional[Json], bool]":
        """(framework ``framework_id`` as ``/master/frameworks`` shows it,
        whether it has finished); (None, True) when the master does not
        know it (as ``cli.cluster_runs.framework_of``)."""
        framework = self._find(framework_id)
        if framework is None:
            return None, True
        return framework.document(), framework.removed

    def state(self, label: Optional[str] = None) -> Json:
        """``{"frameworks": [...], "completed_frameworks": [...]}`` as
        ``/master/state`` has them; ``label``: only the frameworks that
        carry a label of that key."""
        def shown(frameworks: Mapping[str, _Framework]) -> list:
            return [f.document() for f in frameworks.values()
                    if label is None or any(item.get("key") == label
                                            for item in _labels(f.info.get("labels")))]
        return {"frameworks": shown(self._frameworks),
                "completed_frameworks": shown(self._completed)}


__all__ = ["OperatorState", "state_task", "MAX_COMPLETED_FRAMEWORKS", "MAX_COMPLETED_TASKS"]
