"""What the launcher's queue carries: one small frozen dataclass per kind of
event, put there by the rendezvous (a task's registration, output, metrics, exit
or lost connection) and by the scheduler (what the Mesos driver reported).

``ClusterRun`` handles every kind on purpose, in the thread that waits.
Their ``==``, hash and ``repr`` are ``FrozenFieldMethods``' (the same as
the decorator's, not compiled for each class at every start).
"""

import dataclasses
import time
from typing import Any, Optional

from ..field_methods import FrozenFieldMethods
from ..record import times


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TaskRegistered(FrozenFieldMethods):
    """A task connected to the rendezvous and named its TensorFlow address."""

    task_id: str
    host: str
    port: int


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TaskOutput(FrozenFieldMethods):
    """A line (or chunk) a replica task's command wrote."""

    task_id: str
    stream: str   # "stdout" or "stderr"
    text: str


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TaskMetrics(FrozenFieldMethods):
    """Metrics a task's program logged (``tfmesos.log_metrics``): ``points``,
    a tuple of ``(step, at, {name: value})``, ``at`` a ``record.times.now()`` on this
    machine's clock, ``value`` a float or None (not finite); ``dropped``:
    how many points the sender left out (a flood). ``task_id`` None: the
    process that runs ``cluster()`` logged them (fine-grained mode), kept
    under ``source``."""

    task_id: Optional[str]
    points: tuple
    dropped: int = 0
    source: Optional[str] = None


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TaskExited(FrozenFieldMethods):
    """A replica task's command ended with ``code`` (its exit frame came
    ``at``, a ``record.times.now()``); ``usage``: what it used, as the task measured it
    (``tfmesos.task.usage``), or None; ``stopped``: whether the run's stop
    cut it short (None: the frame does not say)."""

    task_id: str
    code: int
    usage: Any = None
    at: float = dataclasses.field(default_factory=times.now, compare=False)
    stopped: Optional[bool] = None


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TaskDisconnected(FrozenFieldMethods):
    """A registered task's rendezvous connection ended: ``reason`` "closed"
    (it closed or broke), or "stalled" (nothing came for the rendezvous'
    stall timeout, so it was closed). ``since``: when the task was last
    heard from (``time.monotonic()``; not compared: events of the same
    kind are equal whatever the clock said)."""

    task_id: str
    since: float = dataclasses.field(default_factory=time.monotonic, compare=False)
    reason: str = "closed"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Subscribed(FrozenFieldMethods):
    """The driver subscribed to a master; ``again`` after a disconnection."""

    master_info: Any
    again: bool = False


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MesosDisconnected(FrozenFieldMethods):
    """The driver lost its subscription and is re-subscribing."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class StatusUpdate(FrozenFieldMethods):
    """A task's Mesos ``TaskStatus``."""

    status: Any


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class AgentLost(FrozenFieldMethods):
    """Mesos removed an agent; its tasks' TASK_LOST updates follow."""

    agent_id: str


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MesosFailed(FrozenFieldMethods):
    """The driver gave up or aborted (``Scheduler.error``): the run cannot go
    on. ``error`` is the exception behind it, when the driver has one."""

    message: str
    error: Any = None


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Interrupted(FrozenFieldMethods):
    """``signum`` (SIGINT, SIGTERM) came while the run waited for its
    events (``signals.interrupts_queued_on``): the loop raises
    ``KeyboardInterrupt`` when it takes this, between two events (or
    ``error``, a ``KeyboardInterrupt`` of its own: tfrun's console found the
    reader of the output gone). What is left of it once the run stops is
    dropped (the stop is under way)."""

    signum: int
    error: Optional[KeyboardInterrupt] = None
