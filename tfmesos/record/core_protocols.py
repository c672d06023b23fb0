"""What the record reads of the core's objects, as ``typing.Protocol``s: the
record layer does not import the core (``core.slots.TaskSlot`` is a
``Slot``, ``core.scheduler.Launch`` a ``Launched``)."""

from typing import Protocol


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class Slot(Protocol):
    """A task of the run (``core.slots.TaskSlot``): ``worker:1``, its job, its index."""

    @property
    def name(self) -> str: ...

    @property
    def job(self) -> _Named: ...

    @property
    def index(self) -> int: ...


class _Placed(Protocol):
    @property
    def hostname(self) -> str: ...


class Launched(Protocol):
    """A new attempt of a task (``core.scheduler.Launch``)."""

    @property
    def slot(self) -> _Named: ...

    @property
    def task_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    @property
    def agent_id(self) -> str: ...

    @property
    def assignment(self) -> _Placed: ...


__all__ = ["Slot", "Launched"]
