"""What the failure policy (``run_events.RunEvents``, ``recovery.Recovery``)
may ask of the run: the whole interface between them and ``ClusterRun``.

The policy objects read the run's ``phase`` and ``slots`` and change them
only through these calls, all made in the thread that handles the run's
events. ``ClusterRun`` implements it; the policy's unit tests use a fake.
"""

from typing import Protocol

from .phase import Phase
from .slots import SlotTable, TaskSlot


class RunControl(Protocol):
    slots: SlotTable

    @property
    def phase(self) -> Phase:
        """The run's phase now."""

    def now(self) -> float:
        """Monotonic seconds: the policy's only clock."""

    def relaunch(self, *slots: TaskSlot) -> None:
        """Put ``slots`` back to PENDING and ask Mesos for offers again."""

    def end_task(self, slot: TaskSlot) -> None:
        """Stop ``slot``'s current attempt: a stop message, and a kill unless
        Mesos reported its end; its absence means nothing from now on."""

    def restart_cluster(self) -> bool:
        """RUNNING -> RESTARTING: every task of this attempt stops. False when
        the run is stopping (the stop wins)."""

    def relaunch_cluster(self) -> bool:
        """RESTARTING -> FORMING: every slot starts over and is launched again
        (a new launch deadline). False when the run is stopping."""

    def fail(self, error: Exception) -> None:
        """End the run with ``error`` (raised in the waiting thread), unless
        the run is already stopping."""

    def publish_to(self, slot: TaskSlot) -> None:
        """Send ``slot`` its start message (role, cluster spec)."""

    def show(self, slot: TaskSlot, stream: str, text: str) -> None:
        """Output ``slot`` forwarded (the user's ``on_log``)."""

    def kill(self, task_id: str, agent_id) -> None:
        """Ask Mesos to kill ``task_id`` (an attempt that should not run)."""

    def reconcile(self) -> None:
        """Ask Mesos for the state of every task not known to have ended."""
