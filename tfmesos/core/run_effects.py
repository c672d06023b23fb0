"""What acting on a run does outside its state (``control.Effects``): asking
for offers, telling a task to stop, killing it through Mesos, showing its
output, reconciling, the clock. A part of ``launch.ClusterRun``: the
attributes below are the run's, declared for what these use of it."""

from typing import TYPE_CHECKING, Any, Callable, Optional

from .slots import TaskSlot

if TYPE_CHECKING:
    from ..record.run_record import RunRecord
    from .runtime import RunRuntime
    from .spec import RunSpec


class RunEffects:
    """``control.Effects`` of a ``ClusterRun`` (module docstring)."""

    record: "RunRecord"
    runtime: "RunRuntime"
    spec: "RunSpec"
    launch_deadline: float
    _clock: Callable[[], float]
    _on_log: Callable[..., Any]

    def now(self) -> float:
        return self._clock()

    def ask_for_offers(self) -> None:
        self.runtime.revive()

    def send_stop(self, task_id: str) -> None:
        self.record.stopping(task_id)
        self.runtime.send(task_id, {"type": "stop"})

    def forget_task(self, task_id: str) -> None:
        self.runtime.forget(task_id)

    def kill(self, task_id: str, agent_id: Optional[str]) -> None:
        self.record.stopping(task_id)
        self.runtime.kill(task_id, agent_id)

    def show(self, slot: TaskSlot, stream: str, text: str) -> None:
        self._on_log(slot, stream, text)

    def reconcile(self) -> None:
        self.runtime.reconcile()

    def new_launch_deadline(self) -> None:
        self.launch_deadline = self._clock() + self.spec.launch_timeout


__all__ = ["RunEffects"]
