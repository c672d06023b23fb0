"""A ps that exited 0 while workers still ran (replica mode): it serves
until the run ends (TensorFlow's ``server.join()``), so a worker that
needs it is about to fail. Said just before such a failure, if one comes:
every task of a command that ends exits 0, the ps among the first."""

from collections.abc import Callable
from typing import Optional

from .slots import SlotTable, TaskSlot


class PsLeft:
    """``left(slot, running)`` when a ps exits 0 with ``running`` chief and
    worker tasks; ``failing(slot)`` before a task's failure: the note,
    through ``notify``, once, if that ps is still the cluster's."""

    def __init__(self, slots: SlotTable, notify: Callable[[str], None]) -> None:
        self._slots, self._notify = slots, notify
        self._kept: Optional[tuple[Optional[str], str]] = None   # (its task id, the note)

    def left(self, slot: TaskSlot, running: int) -> None:
        if slot.job.name != "ps" or not running:
            return
        self._kept = (slot.task_id, "%s had exited with code 0 while %s: a ps task serves "
                      "until the run ends (TensorFlow's server.join()), so a worker that needs "
                      "it finds it gone" % (slot.name, "1 worker ran" if running == 1
                                            else "%d workers ran" % running))

    def failing(self, slot: TaskSlot) -> None:
        if self._kept is None or slot.job.name not in ("chief", "worker"):
            return
        task_id, note = self._kept
        self._kept = None
        if task_id is not None and self._slots.current(task_id) is not None:   # not replaced
            self._notify(note)


__all__ = ["PsLeft"]
