"""What the failure policy (``reactions.RunEvents``, ``recovery.Recovery``)
may ask of the run: the whole interface between them and ``ClusterRun``.

``RunControl`` is what the policy sees: the run's ``state``
(``state.RunState``: phase, slots, tasks away, outcome), read, and changed
through its methods, and the calls below, all made in the thread that
handles the run's events. ``Control`` is its one implementation: what each
call does to the state is written once, here; what it does outside the run
(messages to tasks, calls to Mesos, output to the user) goes through
``Effects``, which ``ClusterRun`` implements with its rendezvous, scheduler
and driver, and the policy's unit tests with a recording fake.
"""

import logging
from typing import Optional, Protocol

from ..mesos.task_states import TERMINAL_STATES
from ..protocol import task_env
from .phase import Phase
from .slots import TaskSlot
from .state import RunState

logger = logging.getLogger(__name__)

# A whole restart's tasks are told to stop and KILLed only when Mesos has not
# reported their end this long after: a KILL's SIGTERM to the whole process
# tree, and the SIGKILL 3 s later (the command executor's default KillPolicy,
# src/launcher/executor.cpp), would cut short the grace the stop gives their
# command (a checkpoint saved on SIGTERM: task.replica's KILL_GRACE).
STOP_THEN_KILL = task_env.STOP_GRACE + 1.5


class RunControl(Protocol):
    """The run as the failure policy sees it."""

    state: RunState

    def now(self) -> float:
        """Monotonic seconds: the policy's only clock."""

    def relaunch(self, *slots: TaskSlot) -> None:
        """Put ``slots`` back to PENDING and ask Mesos for offers again."""

    def end_task(self, slot: TaskSlot, kill_after: float = 0.0) -> None:
        """Stop ``slot``'s current attempt: a stop message, and a kill unless
        Mesos reported its end (``kill_after`` s later: unless it reported
        it by then); its absence means nothing from now on."""

    def end_reported(self, task_id: str) -> None:
        """Mesos reported the end of ``task_id``, any attempt: no kill is
        due for it any more."""

    def kill_overdue(self) -> None:
        """Kill the stopped tasks whose time to end has passed."""

    def ending(self) -> bool:
        """Tasks told to stop still have their time to end (a whole restart
        launches again once none has: its tasks may read what they saved)."""

    def forget_task(self, task_id: str) -> None:
        """Mesos reported ``task_id``'s end: the rendezvous stops expecting it."""

    def restart_cluster(self) -> bool:
        """RUNNING -> RESTARTING: every task of this attempt stops. False when
        the run is stopping (the stop wins)."""

    def relaunch_cluster(self) -> bool:
        """RESTARTING -> FORMING: every slot starts over and is launched again
        (a new launch deadline). False when the run is stopping."""

    def fail(self, error: BaseException) -> None:
        """End the run with ``error``, the run's outcome (raised in the
        thread that waits), unless the run is already stopping."""

    def publish_to(self, slot: TaskSlot) -> None:
        """Send ``slot`` its start message (role, cluster spec)."""

    def show(self, slot: TaskSlot, stream: str, text: str) -> None:
        """Output ``slot`` forwarded (the user's ``on_log``)."""

    def kill(self, task_id: str, agent_id: Optional[str]) -> None:
        """Ask Mesos to kill ``task_id`` (an attempt that should not run)."""

    def reconcile(self) -> None:
        """Ask Mesos for the state of every task not known to have ended."""


class Effects(Protocol):
    """What acting on the run does outside its state."""

    def now(self) -> float:
        """Monotonic seconds."""

    def ask_for_offers(self) -> None:
        """Pending slots want offers (REVIVE)."""

    def send_stop(self, task_id: str) -> None:
        """Tell ``task_id`` to stop (a stop message over the rendezvous)."""

    def forget_task(self, task_id: str) -> None:
        """The rendezvous stops expecting ``task_id``."""

    def kill(self, task_id: str, agent_id: Optional[str]) -> None:
        """KILL ``task_id`` through Mesos."""

    def publish_to(self, slot: TaskSlot) -> None:
        """Send ``slot`` its start message."""

    def show(self, slot: TaskSlot, stream: str, text: str) -> None:
        """Hand the user a task's output."""

    def reconcile(self) -> None:
        """RECONCILE the tasks not known to have ended."""

    def new_launch_deadline(self) -> None:
        """The cluster is launched again: its launch timeout starts anew."""


class Control:
    """``RunControl`` over ``state``, acting outside through ``effects``."""

    def __init__(self, state: RunState, effects: Effects) -> None:
        self.state = state
        self.effects = effects
        self._kills_due: dict[str, tuple[float, Optional[str]]] = {}   # task id -> (when, agent)

    def now(self) -> float:
        return self.effects.now()

    def relaunch(self, *slots: TaskSlot) -> None:
        self.state.slots.requeue(slots)
        self.effects.ask_for_offers()

    def end_task(self, slot: TaskSlot, kill_after: float = 0.0) -> None:
        task_id = slot.task_id
        if task_id is None:
            return
        self.effects.send_stop(task_id)
        self.effects.forget_task(task_id)
        self.state.forget_absence(task_id)
        if slot.state in TERMINAL_STATES or slot.state == "PENDING":
            return
        if kill_after > 0:
            self._kills_due[task_id] = (self.now() + kill_after, slot.agent_id)
        else:
            self.effects.kill(task_id, slot.agent_id)

    def end_reported(self, task_id: str) -> None:
        self._kills_due.pop(task_id, None)

    def ending(self) -> bool:
        return bool(self._kills_due)

    def kill_overdue(self) -> None:
        now = self.now()
        for task_id, (due, agent_id) in list(self._kills_due.items()):
            if now >= due:
                del self._kills_due[task_id]
                logger.info("killing %s: not ended %.1f s after its stop", task_id, STOP_THEN_KILL)
                self.effects.kill(task_id, agent_id)

    def forget_task(self, task_id: str) -> None:
        self.effects.forget_task(task_id)

    def restart_cluster(self) -> bool:
        if not self.state.move(Phase.RESTARTING):
            return False
        for slot in self.state.slots:
            self.end_task(slot, kill_after=STOP_THEN_KILL)
        return True

    def relaunch_cluster(self) -> bool:
        if not self.state.move(Phase.FORMING):
            return False
        self.state.slots.reset()
        self.effects.new_launch_deadline()
        self.relaunch(*self.state.slots)
        return True

    def fail(self, error: BaseException) -> None:
        if not self.state.fail(error):
            logger.info("after the stop or a first failure: %s", error)

    def publish_to(self, slot: TaskSlot) -> None:
        self.effects.publish_to(slot)

    def show(self, slot: TaskSlot, stream: str, text: str) -> None:
        self.effects.show(slot, stream, text)

    def kill(self, task_id: str, agent_id: Optional[str]) -> None:
        self.effects.kill(task_id, agent_id)

    def reconcile(self) -> None:
        self.effects.reconcile()


__all__ = ["RunControl", "Effects", "Control", "STOP_THEN_KILL"]
