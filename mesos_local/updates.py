"""Status updates, as Mesos' master and agent send them.

A reliable (agent or executor) update gets a uuid and waits in its task's
queue: the updates of one task go out in order, one at a time, re-sent with
backoff (doubling up to 10 minutes) until acknowledged, and again to a
framework that failed over. Master-generated updates (TASK_ERROR, invalid
offers, lost agents, reconciliation) carry no uuid and need no
acknowledgement. All methods but ``_retry`` run with the master's lock held.

The operator's event stream (``subscribers.py``) sees each update as Mesos'
master takes it in (``Master::updateTask``, src/master/master.cpp): a
reliable one when it becomes the oldest unacknowledged update of its task
(the one an agent sends its master), a master's own at once; a
TASK_UPDATED event for each new state, with the task's latest state.
"""

import base64
import logging
import time

from .api.operator_json import event_task_updated
from .ids import uuid4_bytes
from .records import TERMINAL_STATES, Update, mesos_id

log = logging.getLogger(__name__)

MAX_RETRY = 600.0                  # status update backoff cap (10 minutes)


def container_status(task):
    """A TaskStatus' ``container_status``: the task's container id and its
    agent's address, as ``NetworkInfo.ip_addresses`` (``protocol`` written
    out, as its proto default is)."""
    protocol = "IPv6" if ":" in task.agent_ip else "IPv4"
    return {"container_id": {"value": task.container_id},
            "network_infos": [{"ip_addresses": [{"protocol": protocol,
                                                 "ip_address": task.agent_ip}]}]}


class StatusUpdates:
    """``first_retry``: seconds before the first re-send of an update."""

    def __init__(self, records, loop, allocator, first_retry):
        self.records = records
        self.loop = loop
        self.allocator = allocator
        self.first_retry = first_retry

    def record(self, task, state, source, reason=None, message=None, with_uuid=True,
               raw=None, fields=None):
        """Set the task's state; returns the TaskStatus JSON (``with_uuid``
        false) or an ``Update`` to queue. A terminal state frees its resources.
        ``raw``: the update's uuid (an executor's; default a new one);
        ``fields``: more TaskStatus fields (an executor's ``data``,
        ``labels``, ``healthy``, ``executor_id``, ``timestamp``, ...)."""
        status = {"task_id": mesos_id(task.id), "state": state, "source": source,
                  "agent_id": mesos_id(task.agent_id), "timestamp": time.time()}
        if source == "SOURCE_EXECUTOR" and task.executor is None and task.group is None:
            # The command executor's updates name it, its id the task's
            # (CommandExecutor::createTaskStatus, src/launcher/executor.cpp).
            status["executor_id"] = mesos_id(task.id)
        if fields:
            status.update(fields)
        if reason is not None:
            status["reason"] = reason
        if message is not None:
            status["message"] = message
        entry = {"state": state, "timestamp": status["timestamp"]}
        if not with_uuid:
            raw = None
        else:
            raw = raw if raw is not None else uuid4_bytes()
            status["uuid"] = base64.b64encode(raw).decode("ascii")
            # An agent adds this to every update (Slave::_statusUpdate,
            # src/slave/slave.cpp): Mesos-DNS and Marathon read task IPs here.
            status["container_status"] = entry["container_status"] = container_status(task)
        if state in TERMINAL_STATES and not task.terminal:
            self.records.ended_tasks[state] += 1
        task.state = state
        task.last_status = status
        if task.status_log and task.status_log[-1]["state"] == state:
            task.status_log.pop()
        task.status_log.append(dict(status))
        # state.json's: the same state replaces the last (Master::updateTask),
        # and json(TaskStatus) (src/common/http.cpp) writes no message.
        if task.statuses and task.statuses[-1]["state"] == state:
            task.statuses.pop()
        task.statuses.append(entry)
        if state in TERMINAL_STATES:
            self.allocator.release(task)
        if raw is None:
            self.publish(task, status)
        return status if raw is None else Update(raw, status)

    def publish(self, task, status):
        """TASK_UPDATED to the operator's subscribers, when ``status`` (one
        the master takes in) has a state other than the last one's
        (``Master::updateTask``; or is a check or health check update)."""
        if status["state"] == task.published_state and status.get("reason") not in (
                "REASON_TASK_CHECK_STATUS_UPDATED", "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"):
            return
        task.published_state = status["state"]
        self.records.subscribers.send(lambda: event_task_updated(task, status))

    def update(self, task, state, source, reason=None, message=None, raw=None, fields=None):
        """A reliable (agent or executor) update: queued, delivered in order
        (``raw``, ``fields``: as ``record``)."""
        update = self.record(task, state, source, reason, message, raw=raw, fields=fields)
        task.updates.append(update)
        if len(task.updates) == 1:
            self.publish(task, update.status)
            self.forward(task)

    def forward(self, task):
        """Send the oldest unacknowledged update and arm its retry."""
        framework = self.records.frameworks.get(task.framework_id)
        if not task.updates or framework is None or not framework.connected:
            return
        status = task.updates[0].status
        task.status_update_state, task.status_update_uuid = status["state"], status["uuid"]
        framework.subscription.send({"type": "UPDATE", "update": {"status": status}})
        task.retry_generation += 1
        self.loop.schedule(task.retry_interval, self._retry, task, task.retry_generation)
        task.retry_interval = min(task.retry_interval * 2, MAX_RETRY)

    def _retry(self, task, generation):
        with self.records.lock:
            if task.retry_generation == generation and task.updates and not task.removed:
                log.debug("re-sending %s of task %s", task.updates[0].status["state"], task.id)
                self.forward(task)

    def resend(self, framework):
        """After a (re)subscription: send each task's oldest pending update
        now, its backoff started afresh."""
        for task in framework.tasks.values():
            if task.updates:
                task.retry_interval = self.first_retry
                self.forward(task)

    def acknowledge(self, framework, task_id, agent_id, raw_uuid):
        """ACKNOWLEDGE: the oldest pending update of the task, if it matches."""
        task = framework.tasks.get(task_id)
        if (task is None or task.agent_id != agent_id or not task.updates
                or task.updates[0].uuid != raw_uuid):
            return  # Mesos answers 202 and drops unknown acknowledgements
        task.updates.popleft()
        task.retry_generation += 1
        task.retry_interval = self.first_retry
        if task.updates:
            self.publish(task, task.updates[0].status)
            self.forward(task)
        elif task.terminal:
            framework.complete_task(task)

    @staticmethod
    def send(framework, status):
        """An update without uuid (nothing to acknowledge, never re-sent)."""
        framework.send({"type": "UPDATE", "update": {"status": status}})

    def send_master_update(self, framework, task_id, agent_id, state, reason, message):
        if reason != "REASON_RECONCILIATION":   # a launch that never became a task
            self.records.ended_tasks[state] += 1
        status = {"task_id": mesos_id(task_id), "state": state, "source": "SOURCE_MASTER",
                  "reason": reason, "message": message, "timestamp": time.time()}
        if agent_id is not None:
            status["agent_id"] = mesos_id(agent_id)
        self.send(framework, status)
