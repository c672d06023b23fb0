"""What a task's failure means once the cluster is up (docs/architecture.md,
failure policy): a sticky relaunch, a whole restart, or the end of the run.

* **Sticky relaunch** (``sticky_jobs``: the workers of a
  ParameterServerStrategy cluster): the failed worker is launched again at
  the same index, on the same agent, with the same port, so that it comes
  back at the address the cluster spec names, and gets the same start
  message; the other tasks keep running. The scheduler keeps that port out
  of other tasks meanwhile (``TaskSlot.hold``). A worker not back within
  ``sticky_timeout`` seconds, whose agent is gone, or relaunched more than
  ``max_attempts`` times in one attempt of the cluster (whether or not it
  came back in between), falls back to:
* **Whole restart** (``restarts.RestartPolicy``: ``tfrun --max-restarts``):
  every task of the attempt is stopped; after the back-off the whole cluster
  is launched again (new offers, task ids, possibly agents and addresses),
  and its tasks get ``TFMESOS_RESTART=k``.
* Otherwise the failure ends the run, as it did without recovery.

``Recovery`` decides; it acts through the run's ``control.RunControl``
(relaunch a slot, restart the cluster, fail the run, publish to a task) and
tells the run's record, all in the thread that handles the run's events.
"""

import dataclasses
import json
import logging
from collections.abc import Iterable
from typing import Callable, Optional

from ..exceptions import TaskFailed
from ..field_methods import FieldMethods
from ..record.run_record import RunRecord
from .clusterspec import ClusterSpec
from .control import RunControl
from .restarts import RestartPolicy
from .slots import TaskSlot
from .spec import STICKY_TIMEOUT

logger = logging.getLogger(__name__)

AGENT_GONE = frozenset(("REASON_AGENT_REMOVED", "REASON_AGENT_REMOVED_BY_OPERATOR"))


@dataclasses.dataclass(eq=False, repr=False)
class _Sticky(FieldMethods):
    """A worker being relaunched where it ran."""

    agent_id: str
    port: int
    address: str
    deadline: float
    relaunches: int = 0


class Recovery:
    """The policy for failures after the cluster is up, acting on the run
    behind ``control`` and telling ``record``. ``policy``: when to restart the
    whole cluster; ``sticky_jobs``: the jobs relaunched where they ran, each
    worker at most ``max_attempts`` times in one attempt of the cluster and
    back within ``sticky_timeout`` s. ``rendezvous_host``: the task whose
    process holds the group's rendezvous (``tfrun --torch-elastic``:
    worker 0's torchrun hosts the c10d store). A torchrun that ends with a
    failure shuts that rendezvous down (torch/distributed/launcher/api.py
    ``launch_agent``), and one relaunched alone would meet
    ``RendezvousClosedError``: so another task that exits with a failure is
    relaunched only while the host itself is being relaunched (the store,
    closed or not, went with it); a lost one (a signal, its agent gone)
    leaves the rendezvous open and is relaunched. ``notify(text)`` tells
    the user (tfrun: one line on stderr; default: a log warning)."""

    def __init__(self, control: RunControl, record: RunRecord,
                 policy: Optional[RestartPolicy] = None, sticky_jobs: Iterable[str] = (),
                 sticky_timeout: float = STICKY_TIMEOUT, max_attempts: int = 1,
                 notify: Optional[Callable[[str], None]] = None,
                 rendezvous_host: Optional[str] = None) -> None:
        self._control = control
        self._record = record
        self.policy = policy or RestartPolicy()
        self.sticky_jobs = frozenset(sticky_jobs)
        self.sticky_timeout = sticky_timeout
        self._max_attempts = max_attempts
        self._rendezvous_host = rendezvous_host
        self._notify = notify or (lambda text: logger.warning("%s", text))
        self.restarts = 0          # whole restarts begun
        self._restart_at: Optional[float] = None   # when the pending whole restart launches
        self._sticky: dict[str, _Sticky] = {}      # slot name -> its relaunch
        self._relaunched: dict[str, int] = {}      # slot name -> relaunches this attempt
        self._lost_agents: set[str] = set()

    # -- called by RunEvents and ClusterRun -----------------------------------

    def failed(self, slot: TaskSlot, error: TaskFailed, cause: Optional[str], what: str) -> None:
        """``slot`` failed with ``error`` (``TaskFailed``) while the cluster
        ran; ``cause`` from ``restarts.failure_cause`` ("lost", "failure");
        ``what`` says what happened (``worker:1 exited with code 3``).
        Relaunches it, restarts the cluster, or fails the run."""
        if slot.reason in AGENT_GONE and slot.agent_id:
            self._lost_agents.add(slot.agent_id)
        if slot.job.name in self.sticky_jobs and self._may_rejoin(slot, cause) \
                and self._relaunch(slot, what, cause):
            return
        self._restart_or_fail(error, cause, what)

    def registered(self, slot: TaskSlot, address: str) -> None:
        """A task registered while the cluster runs: a relaunched worker."""
        sticky = self._sticky.get(slot.name)
        if sticky is None:
            return
        if address != sticky.address:
            self._give_up(slot, "it came back at %s, not at %s" % (address, sticky.address))
            return
        del self._sticky[slot.name]
        self._control.state.slots.registered(slot, address)
        if slot.task_id is not None:   # (always: it registered as its current attempt)
            self._record.registered(slot.task_id, address)
        self._record.back(slot.name)
        self._control.publish_to(slot)
        self._notify("%s is back at %s" % (slot.name, address))

    def agent_lost(self, agent_id: str) -> None:
        self._lost_agents.add(agent_id)
        for name, sticky in list(self._sticky.items()):
            if sticky.agent_id == agent_id:
                self._give_up(self._control.state.slots.named(name), "its agent %s is gone" % agent_id)

    def tick(self) -> None:
        """Launch a restart whose back-off has passed once the tasks it stopped
        ended (or were killed: ``control.STOP_THEN_KILL``); give up sticky
        relaunches past their deadline."""
        now = self._control.now()
        if self._restart_at is not None and now >= self._restart_at \
                and not self._control.ending():
            self._restart_at = None
            if self._control.relaunch_cluster():
                logger.info("restart %d: launching the whole cluster again", self.restarts)
        for name, sticky in list(self._sticky.items()):
            if now > sticky.deadline:
                self._give_up(self._control.state.slots.named(name),
                              "it was not back within %.0f s" % self.sticky_timeout)

    def formed(self, spec: ClusterSpec) -> None:
        """The cluster is complete (again)."""
        if self.restarts:
            self._notify("cluster ready (restart %d): %s" % (self.restarts, json.dumps(spec)))

    # -- decisions -----------------------------------------------------------

    def _may_rejoin(self, slot: TaskSlot, cause: Optional[str]) -> bool:
        host = self._rendezvous_host
        return cause == "lost" or host is None or slot.name == host or host in self._sticky

    def _relaunch(self, slot: TaskSlot, what: str, cause: Optional[str]) -> bool:
        """Start (or go on with) the sticky relaunch of ``slot``; False when
        it cannot be relaunched where it ran."""
        sticky = self._sticky.get(slot.name)
        if sticky is None:
            if slot.port is None or slot.address is None or slot.agent_id is None \
                    or slot.agent_id in self._lost_agents:
                return False
            sticky = _Sticky(slot.agent_id, slot.port, slot.address,
                             self._control.now() + self.sticky_timeout)
        relaunches = self._relaunched.get(slot.name, 0)
        if sticky.agent_id in self._lost_agents or relaunches >= self._max_attempts:
            self._sticky.pop(slot.name, None)
            return False
        self._relaunched[slot.name] = sticky.relaunches = relaunches + 1
        self._sticky[slot.name] = sticky
        self._notify("%s; relaunching it at %s on its agent (relaunch %d, within %.0f s)"
                     % (what, sticky.address, sticky.relaunches, self.sticky_timeout))
        self._control.end_task(slot)
        # (cause is never None here: failure_cause's None is a clean end, no failure)
        self._record.relaunching(slot.name, cause or "failure", what, sticky.agent_id,
                                 sticky.address)
        self._control.state.slots.hold(slot, sticky.agent_id, sticky.port)
        self._control.relaunch(slot)
        return True

    def _give_up(self, slot: TaskSlot, why: str) -> None:
        self._sticky.pop(slot.name, None)
        what = "%s could not be relaunched on its agent: %s" % (slot.name, why)
        self._restart_or_fail(TaskFailed("task " + what, slot.name, slot.state, slot.exit_code),
                              "lost", what)

    def _restart_or_fail(self, error: TaskFailed, cause: Optional[str], what: str) -> None:
        if cause is None or not self.policy.allows(self.restarts, cause):   # (None: never allowed)
            if cause == "failure" and self.restarts < self.policy.max_restarts:
                # Restarts were asked for, and none came: say which setting.
                self._notify("%s: not restarted: restarts are for lost tasks (--restart-on "
                             "lost, the default); --restart-on failure restarts the run for a "
                             "command that fails too" % what)
            self._control.fail(error)
            return
        if not self._control.restart_cluster():
            return   # the run is stopping: no restart
        delay = self.policy.delay(self.restarts)
        self.restarts += 1
        self._sticky.clear()
        self._relaunched.clear()
        self._notify("%s; restarting the cluster (restart %d of %d) in %g s"
                     % (what, self.restarts, self.policy.max_restarts, delay))
        self._record.restarting(self.restarts, cause, error.task, what, delay)
        self._restart_at = self._control.now() + delay
