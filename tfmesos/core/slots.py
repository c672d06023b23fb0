"""The tasks of a run (``worker:1``) across their launch attempts, and the
one lock that guards them.

``TaskSlot`` fields are written only by ``SlotTable`` methods, each under
the table's lock (docs/architecture.md, "Who changes what"): the driver's
dispatcher thread launches (``launched``, ``unlaunched``), the thread that
handles the run's events does everything else. Reading a single field needs
no lock; whoever needs several fields to agree (placement) holds it.
"""

import dataclasses
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Optional

from ..field_methods import FieldMethods
from .jobs import Job

# What Mesos' reconciliation answers for a task it does not know
# (src/master/master.cpp, Master::_reconcileTasks: TASK_LOST, or for a
# PARTITION_AWARE framework TASK_UNKNOWN, TASK_GONE where the agent is known).
UNKNOWN_STATES = frozenset(("TASK_LOST", "TASK_UNKNOWN", "TASK_GONE", "TASK_DROPPED"))


@dataclasses.dataclass(eq=False, repr=False)
class TaskSlot(FieldMethods):
    """One task of the cluster (``worker:1``) across its launch attempts."""

    job: Job
    index: int
    attempts: int = 0
    task_id: Optional[str] = None
    state: str = "PENDING"        # PENDING until launched, then the latest Mesos state
    message: str = ""
    reason: Optional[str] = None   # Mesos' reason with the latest state
    agent_id: Optional[str] = None  # where the current attempt runs (for reconciliation)
    port: Optional[int] = None     # the port the current attempt got from its offer
    extra_ports: tuple[int, ...] = ()        # its other ports from the offer (worker 0: the coordinator's)
    address: Optional[str] = None  # host:port the task registered
    exit_code: Optional[int] = None
    done: bool = False             # ended as expected
    base: int = 0                  # attempts that do not count: before the current whole
    #                                restart, and launches Mesos never got
    hold: Optional[tuple[str, int]] = None   # (agent_id, port) a sticky relaunch must get

    @property
    def key(self) -> tuple[str, int]:
        return (self.job.name, self.index)

    @property
    def name(self) -> str:
        return "%s:%d" % self.key

    def describe(self) -> str:
        return "%s (%s)" % (self.name, self.condition())

    def condition(self) -> str:
        """Its state, and Mesos' message with it where there is one."""
        return "%s: %s" % (self.state, self.message) if self.message else self.state


class SlotTable:
    """The run's slots, in job order (a read-only sequence), with every change
    made to them. ``lock`` is the run's one lock: ``ClusterRun`` changes its
    phase under it too."""

    def __init__(self, jobs: Iterable[Job]) -> None:
        self._slots = [TaskSlot(job, index) for job in jobs for index in job.task_indices()]
        self._by_task_id: dict[str, TaskSlot] = {}   # every attempt's task id -> its slot
        self._unanswered: set[str] = set()   # attempts whose LAUNCH got no answer, unheard of
        self.lock = threading.RLock()

    def __iter__(self) -> Iterator[TaskSlot]:
        return iter(self._slots)

    def __len__(self) -> int:
        return len(self._slots)

    def __getitem__(self, index: int) -> TaskSlot:
        return self._slots[index]

    def slot_of(self, task_id: str) -> Optional[TaskSlot]:
        """The slot ``task_id`` was an attempt of (any attempt), or None."""
        return self._by_task_id.get(task_id)

    def current(self, task_id: str) -> Optional[TaskSlot]:
        """The slot whose current attempt is ``task_id``, or None."""
        slot = self._by_task_id.get(task_id)
        return slot if slot is not None and slot.task_id == task_id else None

    def named(self, name: str) -> TaskSlot:
        return next(slot for slot in self._slots if slot.name == name)

    def pending(self) -> list[TaskSlot]:
        return [slot for slot in self._slots if slot.state == "PENDING"]

    # -- the dispatcher thread (placement) ------------------------------------

    def launched(self, slot: TaskSlot, task_id: str, agent_id: str, port: Optional[int],
                 extra_ports: Iterable[int] = ()) -> None:
        """A new attempt of ``slot`` goes to Mesos."""
        with self.lock:
            slot.attempts += 1
            slot.task_id, slot.state, slot.message = task_id, "TASK_STAGING", ""
            slot.agent_id, slot.port, slot.address = agent_id, port, None
            slot.extra_ports = tuple(extra_ports)
            self._by_task_id[task_id] = slot

    def unanswered(self, task_ids: Iterable[str]) -> None:
        """The LAUNCH of ``task_ids`` got no answer: Mesos may not have them."""
        with self.lock:
            self._unanswered.update(task_ids)

    def unlaunched(self, slot: TaskSlot) -> None:
        """The launch call failed: the attempt never reached Mesos."""
        with self.lock:
            if slot.task_id is not None:
                self._by_task_id.pop(slot.task_id, None)
            slot.attempts -= 1
            slot.task_id, slot.state = None, "PENDING"

    def adopt(self, slot: TaskSlot, attempts: int, base: int, task_ids: Sequence[str],
              agent_id: Optional[str], address: Optional[str], state: str,
              exit_code: Optional[int] = None, done: bool = False) -> None:
        """A run taken over from a scheduler before this one (``tfmesos
        attach``): ``slot`` had ``attempts`` launches (``base`` of them
        before the current whole restart), ``task_ids`` every attempt's, the
        last its current one, on ``agent_id``, registered at ``address``,
        last known in ``state``."""
        with self.lock:
            slot.attempts, slot.base = attempts, base
            slot.task_id, slot.agent_id, slot.address = task_ids[-1], agent_id, address
            slot.state, slot.exit_code, slot.done = state, exit_code, done
            port = address.rpartition(":")[2] if address else ""
            slot.port = int(port) if port.isdigit() else None
            for task_id in task_ids:
                self._by_task_id[task_id] = slot

    # -- the event thread -----------------------------------------------------

    def requeue(self, slots: Iterable[TaskSlot]) -> None:
        """``slots`` wait for another attempt. The attempt they had is not
        theirs any more: should Mesos report it running after all (a launch
        it carried out after it said the task was lost), it is a replaced
        attempt, and killed."""
        with self.lock:
            for slot in slots:
                slot.state, slot.address, slot.task_id = "PENDING", None, None

    def status(self, slot: TaskSlot, state: str, message: str, reason: Optional[str]) -> None:
        with self.lock:
            slot.state, slot.message, slot.reason = state, message, reason

    def never_launched(self, slot: TaskSlot) -> bool:
        """Whether ``slot``'s current attempt, just ended, is one whose LAUNCH
        got no answer and that Mesos, asked, did not know (its reconciliation
        says lost, nothing else was heard of it): it never reached Mesos, so
        it does not count against ``max_attempts`` (``base`` grows by one)."""
        with self.lock:
            if slot.task_id not in self._unanswered:
                return False
            self._unanswered.discard(slot.task_id)
            if slot.reason != "REASON_RECONCILIATION" or slot.state not in UNKNOWN_STATES:
                return False
            slot.base += 1
            return True

    def heard_of(self, task_id: str) -> None:
        """Mesos reported ``task_id`` running, or on its way: it got its LAUNCH."""
        if task_id in self._unanswered:
            with self.lock:
                self._unanswered.discard(task_id)

    def registered(self, slot: TaskSlot, address: Optional[str]) -> None:
        """``slot`` registered at ``address`` (a sticky relaunch: back at its own)."""
        with self.lock:
            slot.address, slot.hold = address, None

    def away(self, slot: TaskSlot) -> None:
        """``slot`` left the rendezvous before the cluster was complete."""
        with self.lock:
            slot.address = None

    def exited(self, slot: TaskSlot, code: Optional[int], done: bool = False) -> None:
        """``slot``'s command ended with ``code``; ``done``: as expected."""
        with self.lock:
            slot.exit_code, slot.done = code, done

    def hold(self, slot: TaskSlot, agent_id: str, port: int) -> None:
        """A sticky relaunch: the next attempt must get ``agent_id`` and ``port``;
        without a task id the old attempt's updates are not the slot's."""
        with self.lock:
            slot.hold, slot.task_id = (agent_id, port), None
            slot.exit_code, slot.reason = None, None

    def reset(self) -> None:
        """A whole restart: every slot starts over (``base`` keeps the
        attempts so far, so ``max_attempts`` counts per restart)."""
        with self.lock:
            for slot in self._slots:
                slot.base, slot.task_id, slot.hold, slot.done = slot.attempts, None, None, False
                slot.exit_code, slot.message, slot.reason = None, "", None


def make_slots(jobs: Iterable[Job]) -> SlotTable:
    return SlotTable(jobs)
