"""What a task's failure means once the cluster is up (docs/architecture.md,
failure policy): a sticky relaunch, a whole restart, or the end of the run.

* **Sticky relaunch** (``sticky_jobs``: the workers of a
  ParameterServerStrategy cluster): the failed worker is launched again at
  the same index, on the same agent, with the same port, so that it comes
  back at the address the cluster spec names, and gets the same start
  message; the other tasks keep running. The scheduler keeps that port out
  of other tasks meanwhile (``TaskSlot.hold``). A worker not back within
  ``sticky_timeout`` seconds, whose agent is gone, or relaunched more than
  ``max_attempts`` times in one attempt of the cluster, falls back to:
* **Whole restart** (``restarts.RestartPolicy``: ``tfrun --max-restarts``):
  every task of the attempt is stopped; after the back-off the whole cluster
  is launched again (new offers, task ids, possibly agents and addresses),
  and its tasks get ``TFMESOS_RESTART=k``.
* Otherwise the failure ends the run, as it did without recovery.

``Recovery`` decides and relaunches, with ``ClusterRun``'s ``end_task``,
``stop_tasks`` and ``publish_to``, all in the thread that handles the run's
events.
"""

import dataclasses
import json
import logging
import signal
import time

from .exceptions import TaskFailed
from .mesos.task_states import TERMINAL_STATES
from .restarts import RestartPolicy

logger = logging.getLogger(__name__)

STICKY_TIMEOUT = 120.0
AGENT_GONE = frozenset(("REASON_AGENT_REMOVED", "REASON_AGENT_REMOVED_BY_OPERATOR"))


@dataclasses.dataclass
class _Sticky:
    """A worker being relaunched where it ran."""

    agent_id: str
    port: int
    address: str
    deadline: float
    relaunches: int = 1


def describe_failure(slot, error, cause):
    """``worker:1 was lost (TASK_LOST: ...)`` / ``worker:1 exited with code 3``."""
    text = str(error)
    text = text[len("task "):] if text.startswith("task ") else text
    if cause != "lost":
        return text
    if slot.state in TERMINAL_STATES:
        return "%s was lost (%s: %s)" % (slot.name, slot.state, slot.message or "no message")
    code = error.exit_code
    if code is not None and code > 128:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = "signal %d" % (code - 128)
        return "%s was lost (its command was killed by %s, exit code %d)" % (
            slot.name, name, code)
    return text


class Recovery:
    """The policy for failures after the cluster is up. ``notify(text)``
    tells the user (tfrun: one line on stderr; default: a log warning)."""

    def __init__(self, policy=None, sticky_jobs=(), sticky_timeout=STICKY_TIMEOUT,
                 notify=None, clock=time.monotonic):
        self.policy = policy or RestartPolicy()
        self.sticky_jobs = frozenset(sticky_jobs)
        self.sticky_timeout = sticky_timeout
        self._notify = notify or (lambda text: logger.warning("%s", text))
        self._clock = clock
        self.restarts = 0          # whole restarts begun
        self._restart_at = None    # when the pending whole restart launches
        self._sticky = {}          # slot name -> _Sticky
        self._lost_agents = set()
        self.run = None

    def bind(self, run):
        self.run = run
        return self

    # -- called by ClusterRun ------------------------------------------------

    def failed(self, slot, error, cause):
        """``slot`` failed with ``error`` (``TaskFailed``) while the cluster
        ran; ``cause`` from ``restarts.failure_cause`` ("lost", "failure").
        Relaunches it, restarts the cluster, or raises ``error``."""
        if slot.reason in AGENT_GONE and slot.agent_id:
            self._lost_agents.add(slot.agent_id)
        what = describe_failure(slot, error, cause)
        if slot.job.name in self.sticky_jobs and self._relaunch(slot, what, cause):
            return
        self._restart_or_raise(error, cause, what)

    def registered(self, slot, address):
        """A task registered while the cluster runs: a relaunched worker."""
        sticky = self._sticky.get(slot.name)
        if sticky is None:
            return
        if address != sticky.address:
            self._give_up(slot, "it came back at %s, not at %s" % (address, sticky.address))
            return
        del self._sticky[slot.name]
        run = self.run
        with run.scheduler.lock:
            slot.hold, slot.address = None, address
        run.record.registered(slot.task_id, address)
        run.record.back(slot.name)
        run.publish_to(slot)
        self._notify("%s is back at %s" % (slot.name, address))

    def agent_lost(self, agent_id):
        self._lost_agents.add(agent_id)
        for name, sticky in list(self._sticky.items()):
            if sticky.agent_id == agent_id:
                self._give_up(self._slot(name), "its agent %s is gone" % agent_id)

    def tick(self):
        """Launch a restart whose back-off has passed; give up sticky
        relaunches past their deadline."""
        now = self._clock()
        if self._restart_at is not None and now >= self._restart_at:
            self._restart_at = None
            self._relaunch_all()
        for name, sticky in list(self._sticky.items()):
            if now > sticky.deadline:
                self._give_up(self._slot(name), "it was not back within %.0f s"
                              % self.sticky_timeout)

    def formed(self, spec):
        """The cluster is complete (again)."""
        if self.restarts:
            self._notify("cluster ready (restart %d): %s" % (self.restarts, json.dumps(spec)))

    # -- decisions -----------------------------------------------------------

    def _relaunch(self, slot, what, cause):
        """Start (or go on with) the sticky relaunch of ``slot``; False when
        it cannot be relaunched where it ran."""
        sticky = self._sticky.get(slot.name)
        if sticky is None:
            if slot.port is None or slot.address is None or slot.agent_id in self._lost_agents:
                return False
            sticky = _Sticky(slot.agent_id, slot.port, slot.address,
                             self._clock() + self.sticky_timeout, 0)
        if sticky.agent_id in self._lost_agents \
                or sticky.relaunches >= self.run.run.max_attempts:
            self._sticky.pop(slot.name, None)
            return False
        sticky.relaunches += 1
        self._sticky[slot.name] = sticky
        self._notify("%s; relaunching it at %s on its agent (relaunch %d, within %.0f s)"
                     % (what, sticky.address, sticky.relaunches, self.sticky_timeout))
        run = self.run
        run.end_task(slot)
        run.record.relaunching(slot.name, cause, what, sticky.agent_id, sticky.address)
        with run.scheduler.lock:   # no task id: the old attempt's updates are not its
            slot.hold, slot.task_id = (sticky.agent_id, sticky.port), None
            slot.exit_code, slot.reason = None, None
        run.scheduler.relaunch(run.driver, slot)
        return True

    def _give_up(self, slot, why):
        self._sticky.pop(slot.name, None)
        error = TaskFailed("task %s could not be relaunched on its agent: %s"
                           % (slot.name, why), slot.name, slot.state, slot.exit_code)
        self._restart_or_raise(error, "lost", str(error)[len("task "):])

    def _restart_or_raise(self, error, cause, what):
        if not self.policy.allows(self.restarts, cause):
            raise error
        delay = self.policy.delay(self.restarts)
        self.restarts += 1
        self._sticky.clear()
        self._notify("%s; restarting the cluster (restart %d of %d) in %g s"
                     % (what, self.restarts, self.policy.max_restarts, delay))
        self.run.record.restarting(self.restarts, cause, error.task, what, delay)
        self.run.stop_tasks()
        self._restart_at = self._clock() + delay

    def _relaunch_all(self):
        """Launch the whole cluster again (new offers and task ids)."""
        run = self.run
        with run.scheduler.lock:
            for slot in run.slots:
                slot.base, slot.task_id, slot.hold, slot.done = slot.attempts, None, None, False
                slot.exit_code, slot.message, slot.reason = None, "", None
        logger.info("restart %d: launching the whole cluster again", self.restarts)
        run.phase = "launching"
        run.launch_deadline = time.monotonic() + run.run.launch_timeout
        run.scheduler.relaunch(run.driver, *run.slots)

    def _slot(self, name):
        return next(slot for slot in self.run.slots if slot.name == name)
