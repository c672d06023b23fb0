"""How a run reacts to each event on its queue (``tfmesos.events``), in the
thread that waits: the failure policy of docs/architecture.md. A task that
ends before the cluster is complete is relaunched (unless retrying cannot
help, ``task_ends``); once running, a failure goes to the run's
``recovery``. ``ClusterRun`` owns the lifecycle; ``RunEvents`` the
reactions."""

import logging
import time

from .events import (AgentLost, MesosDisconnected, MesosFailed, StatusUpdate, Subscribed,
                     TaskDisconnected, TaskExited, TaskOutput, TaskRegistered)
from .exceptions import ClusterError, MesosError, TaskFailed
from .hostport import format_address
from .mesos.task_states import TERMINAL_STATES
from .restarts import failure_cause
from .task_ends import exit_code_of, launch_failure_message, permanent_failure

logger = logging.getLogger(__name__)

# How often the state of running tasks is reconciled with Mesos, besides
# after every re-subscription and every agent loss.
RECONCILE_INTERVAL = 20.0


class RunEvents:
    """The reactions of ``cluster`` (a ``ClusterRun``) to its events. A task
    away from the rendezvous longer than ``reconnect_grace`` has failed."""

    def __init__(self, cluster, reconnect_grace):
        self.cluster = cluster
        self._reconnect_grace = reconnect_grace
        self._away = {}   # task id -> when its rendezvous connection dropped
        self._reconciled = time.monotonic()
        self._handlers = {
            TaskRegistered: self._on_registered, TaskOutput: self._on_output,
            TaskExited: self._on_task_exited, TaskDisconnected: self._on_task_disconnected,
            Subscribed: self._on_subscribed, MesosDisconnected: self._on_mesos_disconnected,
            StatusUpdate: self._on_status, AgentLost: self._on_agent_lost,
            MesosFailed: self._on_mesos_failed,
        }

    def handle(self, event):
        """React to ``event``; a kind without a handler is a bug (KeyError),
        never silently dropped."""
        self._handlers[type(event)](event)

    def tick(self):
        """What is due whether or not an event came: tasks away too long,
        the periodic reconciliation."""
        self._check_away()
        if time.monotonic() - self._reconciled > RECONCILE_INTERVAL:
            self._reconcile()

    def forget(self, task_id):
        """``task_id`` was stopped on purpose: its absence means nothing."""
        self._away.pop(task_id, None)

    def _current_slot(self, task_id):
        """The slot whose current attempt is ``task_id`` (None for older attempts)."""
        slot = self.cluster.scheduler.slot_of(task_id)
        return slot if slot is not None and slot.task_id == task_id else None

    def _on_registered(self, event):
        slot = self._current_slot(event.task_id)
        if slot is None:
            return
        if self._away.pop(event.task_id, None) is not None:
            logger.info("%s reconnected to the rendezvous", slot.name)
        address = format_address(event.host, event.port)
        if self.cluster.phase == "launching":
            slot.address = address
            self.cluster.record.registered(event.task_id, slot.address)
            logger.info("%s registered at %s", slot.name, slot.address)
        elif self.cluster.phase == "running" and slot.address is None:
            self.cluster.recovery.registered(slot, address)

    def _on_output(self, event):
        self.cluster.record.output(event.task_id, event.stream, event.text)
        slot = self.cluster.scheduler.slot_of(event.task_id)
        if slot is not None:
            self.cluster.on_log(slot, event.stream, event.text)

    def _on_task_exited(self, event):
        self.cluster.record.exited(event.task_id, event.code)
        slot = self._current_slot(event.task_id)
        if slot is not None:
            self._on_exit(slot, event.code)

    def _on_task_disconnected(self, event):
        slot = self._current_slot(event.task_id)
        if slot is None or slot.done or slot.exit_code is not None:
            return  # it said goodbye (exit) first: nothing is lost
        logger.info("%s lost its rendezvous connection; waiting %.0f s for it to come back",
                    slot.name, self._reconnect_grace)
        self._away[event.task_id] = time.monotonic()
        if self.cluster.phase == "launching":
            slot.address = None   # the cluster is complete only with it back

    def _check_away(self):
        """A task that stays away longer than the grace period has failed
        (before the cluster is complete, Mesos' report of its end decides)."""
        now = time.monotonic()
        for task_id, since in list(self._away.items()):
            slot = self._current_slot(task_id)
            if slot is None or slot.done or slot.exit_code is not None:
                del self._away[task_id]
            elif now - since > self._reconnect_grace and self.cluster.phase == "running":
                del self._away[task_id]
                self.cluster.recovery.failed(slot, TaskFailed(
                    "task %s lost its connection to the scheduler and did not come back "
                    "within %.0f s" % (slot.name, self._reconnect_grace), slot.name,
                    slot.state), "lost")

    def _on_subscribed(self, event):
        if event.again:
            logger.info("re-subscribed to the Mesos master; the tasks were kept")
        else:
            logger.info("subscribed to the Mesos master at %s", self.cluster.driver.master)

    def _on_mesos_disconnected(self, event):
        logger.warning("lost the connection to the Mesos master; reconnecting")

    def _on_agent_lost(self, event):
        # Mesos reports each of the agent's tasks as lost in a status update;
        # reconciling at once makes sure, should one of them be missed.
        logger.warning("Mesos lost agent %s", event.agent_id)
        self._reconcile()
        self.cluster.recovery.agent_lost(event.agent_id)

    def kill(self, task_id, agent_id):
        try:
            self.cluster.driver.killTask({"value": task_id}, agent_id and {"value": agent_id})
        except MesosError as exc:
            logger.warning("could not kill %s: %s", task_id, exc)

    def _reconcile(self):
        self._reconciled = time.monotonic()
        if self.cluster.driver is not None and self.cluster.driver.connected:
            self.cluster.scheduler.reconcile(self.cluster.driver)

    def _on_mesos_failed(self, event):
        raise ClusterError("the Mesos driver stopped: %s" % event.message) from event.error

    def _on_status(self, event):
        status = event.status
        task_id = status.task_id.value
        self.cluster.record.status(status)
        slot = self._current_slot(task_id)
        if slot is None and status.state not in TERMINAL_STATES \
                and self.cluster.scheduler.slot_of(task_id) is not None:
            # An earlier attempt still runs (reconciliation found it): no orphans.
            logger.warning("killing %s, a replaced attempt that still runs", task_id)
            self.kill(task_id, status.get("agent_id", {}).get("value"))
        if slot is None or slot.done:
            return
        with self.cluster.scheduler.lock:
            slot.state = status.state
            slot.message = status.get("message", "")
            slot.reason = status.get("reason") or None
        if status.state not in TERMINAL_STATES or self.cluster.phase not in ("launching", "running"):
            return
        self.cluster.rendezvous.forget(task_id)
        code = exit_code_of(slot.message)
        if self.cluster.phase == "launching":
            self._on_launch_failure(slot, status, code)
            return
        if status.state == "TASK_FINISHED":
            self._on_exit(slot, 0 if slot.exit_code is None else slot.exit_code)
        else:
            self._on_exit(slot, slot.exit_code if slot.exit_code is not None else code,
                          status.state)

    def _on_launch_failure(self, slot, status, code):
        """Relaunch a task that ended before the cluster was complete, unless
        its attempts are spent or retrying cannot help (``task_ends``)."""
        why = permanent_failure(status.state, status.get("reason"), slot.message)
        attempts = slot.attempts - slot.base   # in this attempt of the cluster
        if why is None and attempts < self.cluster.run.max_attempts:
            logger.warning("%s ended before the cluster was complete: %s; relaunching "
                           "(attempt %d of %d)", slot.name, slot.describe(),
                           attempts + 1, self.cluster.run.max_attempts)
            self.cluster.scheduler.relaunch(self.cluster.driver, slot)
            return
        raise TaskFailed(launch_failure_message(slot.name, attempts, status.state,
                                                slot.message, why),
                         slot.name, status.state, code)

    def _on_exit(self, slot, code, state=None):
        """A task's command ended (replica) or its server did (fine)."""
        slot.exit_code = code
        if self.cluster.phase != "running":
            return
        if self.cluster.mode == "replica" and code == 0:
            slot.done = True
            return
        if code is None:
            what = "ended: %s %s" % (state, slot.message) if state else "ended"
        else:
            what = "exited with code %d" % code
            if state:
                what += " (%s: %s)" % (state, slot.message)
        self.cluster.recovery.failed(slot, TaskFailed("task %s %s" % (slot.name, what), slot.name,
                                              state, code),
                             failure_cause(state, slot.reason, slot.message, code))
