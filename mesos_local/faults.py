"""Fault injection and test helpers of ``LocalMaster`` (a mixin): an agent
removed, a SUBSCRIBE stream dropped or stalled, another master leading;
``wait_until`` a state and a task's ``sandbox``.

The mixin uses the master's parts: ``_records`` (and its lock),
``_allocator``, ``_updates``, ``_frameworks``, ``_executors`` and ``state()``.
"""

import time
from typing import Any, Optional

from .allocator import Allocator
from .api.operator_json import event_agent_removed
from .executors import Executors
from .frameworks import Frameworks
from .records import Records, mesos_id
from .updates import StatusUpdates


class FaultInjection:
    """``LocalMaster``'s fault injection and test helpers."""

    # The master's parts this mixin uses (``LocalMaster`` sets them).
    _records: Records
    _allocator: Allocator
    _updates: StatusUpdates
    _frameworks: Frameworks
    _executors: Executors
    _leader: Optional[str]

    def state(self, files_address: Optional[tuple[str, int]] = None) -> dict[str, Any]:
        """The master's ``/master/state`` (``LocalMaster.state``)."""
        raise NotImplementedError

    def remove_agent(self, agent_id):
        """Fault injection: the agent is gone, as an operator's MARK_AGENT_GONE
        makes it. Its tasks are killed; each framework gets
        TASK_GONE_BY_OPERATOR with REASON_AGENT_REMOVED_BY_OPERATOR
        (PARTITION_AWARE) or TASK_LOST with REASON_AGENT_REMOVED, a FAILURE
        event, and RESCIND for its offers."""
        records = self._records
        with records.lock:
            agent = records.agents.pop(agent_id, None)
            if agent is None:
                raise KeyError("no agent %r (agents: %s)"
                               % (agent_id, ", ".join(records.agents)))
            agent.active = False
            records.removed_agents.add(agent_id)
            for offer in list(agent.offers.values()):
                self._allocator.rescind(offer)
            for task in list(agent.tasks.values()):
                self._lose_task(task, agent_id)
            self._executors.remove_agent(agent_id)
            for framework in records.frameworks.values():
                framework.send({"type": "FAILURE", "failure": {"agent_id": mesos_id(agent_id)}})
            # Master::__removeSlave (src/master/master.cpp): after its tasks' updates.
            records.subscribers.send(event_agent_removed(agent_id))
            self._allocator.request()

    def _lose_task(self, task, agent_id):
        """A task of a removed agent: killed, and lost to its framework."""
        framework = self._records.frameworks.get(task.framework_id)
        task.removed = True
        task.updates.clear()
        if task.proc is not None and not task.process_done:
            task.proc.kill_at_once()   # a lost host: no SIGTERM to report back on
        if framework is None:
            return
        if not task.terminal:
            # As Mesos marks an agent gone (no unreachable time): Master::
            # __removeSlave, its message from Master::_markGone (src/master/master.cpp).
            aware = framework.partition_aware
            status = self._updates.record(
                task, "TASK_GONE_BY_OPERATOR" if aware else "TASK_LOST", "SOURCE_MASTER",
                reason="REASON_AGENT_REMOVED_BY_OPERATOR" if aware else "REASON_AGENT_REMOVED",
                message="Agent has been marked gone", with_uuid=False)
            self._updates.send(framework, status)
        framework.complete_task(task)

    def drop_subscription(self, framework_id):
        """Fault injection: close the framework's SUBSCRIBE stream abruptly;
        the framework is disconnected and its failover timer starts."""
        with self._records.lock:
            framework = self._frameworks.connected(framework_id)
            subscription = framework.subscription
            self._frameworks.disconnect(framework)
        subscription.abort()

    def stall_subscription(self, framework_id):
        """Fault injection: keep the stream open but write nothing more
        (no heartbeats either); the framework stays 'connected'."""
        with self._records.lock:
            self._frameworks.connected(framework_id).subscription.stall()

    def set_leader(self, url=None):
        """None: this master leads. A URL: scheduler calls get 307 to it.
        "": no leader (503)."""
        with self._records.lock:
            self._leader = url

    # -- for tests --------------------------------------------------------------

    def wait_until(self, predicate, timeout):
        """Poll ``predicate(state())`` until true (returns the state) or raise
        TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state()
            if predicate(state):
                return state
            if time.monotonic() >= deadline:
                raise TimeoutError("local master: condition %s not met within %s s"
                                   % (getattr(predicate, "__name__", "predicate"), timeout))
            time.sleep(0.02)

    def sandbox(self, task_id, framework_id=None):
        """The sandbox directory of a task (the latest run of that id)."""
        records = self._records
        with records.lock:
            for framework in (list(records.frameworks.values())
                              + list(records.completed_frameworks)):
                if framework_id is not None and framework.id != framework_id:
                    continue
                task = framework.tasks.get(task_id)
                if task is None:
                    task = next((t for t in reversed(framework.completed_tasks)
                                 if t.id == task_id), None)
                if task is not None and task.sandbox:
                    return task.sandbox
        raise KeyError("no task %r with a sandbox" % task_id)



__all__ = ["FaultInjection"]
