"""Taking a run over from a scheduler before this one (Mesos scheduler
failover, docs/high-availability-framework-guide.md): ``tfmesos attach``
carrying on a ``tfrun --failover`` run, a detached run's new scheduler task.

The new scheduler subscribes with the run's framework id (Mesos keeps the
framework and its tasks for ``FrameworkInfo.failover_timeout`` after the
old one went), listens with the run's secret and names its rendezvous in
the framework's label (``protocol.labels.RENDEZVOUS``), where the tasks,
which kept running, find it and register again. Which task is which comes
from the run's record (``run.json``): each slot's current attempt is
adopted as it was (``adopt_slots``, pure); Mesos' reconciliation then says
which still run, and a task that does not come back within the grace is
a failure the restart policy handles as any other.
"""

import dataclasses
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional

from ..field_methods import FrozenFieldMethods
from ..record.schema import RunFile
from .identity import RunIdentity
from .scheduler import ask_mesos_of

if TYPE_CHECKING:
    from ..record.run_record import RunRecord
    from .recovery import Recovery
    from .scheduler import OfferDriver
    from .slots import SlotTable, TaskSlot
    from .state import RunState

logger = logging.getLogger(__name__)

# The adopted tasks' grace to register again is longer by this: they look
# the new rendezvous up on the master, every 5 s at most.
ADOPTION_EXTRA = 30.0


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Resume(FrozenFieldMethods):
    """What a scheduler needs to take a run over: the run's ``identity``
    (a ``RunIdentity`` with its framework id, as the run left it) and its
    record so far (``previous``, a ``RunFile``; None: no task was launched
    yet, as for a detached run's first scheduler task)."""

    identity: RunIdentity
    previous: Optional[RunFile] = None

    def __post_init__(self) -> None:
        if self.identity.framework_id is None:
            raise ValueError("a run taken over has a framework")


def check_kept(identity: RunIdentity, packed: Mapping[str, str], kept_dir: str
               ) -> dict[str, str]:
    """The files a ``--failover`` run kept for its takeover (``packed``:
    role -> path, as ``Shipment.packed_files``) are the ones it started
    with: its packed files lie in ``kept_dir`` (the run directory's) and the
    bundle's, the task side's and the ``--python-env`` archive's sha256 are
    ``identity``'s (the archive stays where the user keeps it: anyone who
    may write it there could otherwise run code as the run's user in every
    task relaunched after the takeover). TakeoverError,
    one line naming both digests, before anything of the run is touched.
    Returns {path: sha256} of what it hashed (``Shipment.from_packed``'s
    ``hashed``: each file is read once)."""
    from ..record.takeover_files import TakeoverError
    from ..ship.bundle import file_sha256
    kept_dir = os.path.abspath(kept_dir)
    for role, named in sorted(packed.items()):
        if role != "python_env" and os.path.dirname(os.path.abspath(named)) != kept_dir:
            raise TakeoverError("run %s's failover.json names %s (%s) outside %s, where the "
                                "run kept what it packed: nothing was taken over"
                                % (identity.run_id, named, role, kept_dir))
    hashed: dict[str, str] = {}
    for role, what, started in (("bundle", "bundle", identity.bundle_sha256),
                                ("task_side", "task side", identity.task_side_sha256),
                                ("python_env", "Python environment",
                                 identity.python_env_sha256)):
        path = packed.get(role)
        if path is None and started is None:
            continue
        if path is None or started is None:
            raise TakeoverError("run %s started with %s, but kept %s for its takeover: "
                                "nothing was taken over" % (
                                    identity.run_id, "the %s %s" % (what, started)
                                    if started else "no %s" % what, path or "no %s" % what))
        try:
            found = file_sha256(path)
        except OSError as exc:
            raise TakeoverError("cannot read the %s run %s kept (%s: %s): nothing was taken "
                                "over" % (what, identity.run_id, path, exc.strerror or exc)
                                ) from None
        if found != started:
            raise TakeoverError("the %s run %s %s (%s) has sha256 %s, but the run started "
                                "with sha256 %s: it changed since the run started; nothing "
                                "was taken over" % (what, identity.run_id, "serves"
                                                    if role == "python_env" else "kept",
                                                    path, found, started))
        hashed[path] = found
    return hashed


def adopt_slots(slots: "SlotTable", previous: RunFile, mode: str) -> list[str]:
    """Give each slot of ``slots`` (a ``SlotTable``) its attempts as
    ``previous`` records them; returns the task ids of the adopted current
    attempts that have not ended as expected (they must register again)."""
    restart = len(previous.restarts)
    tasks = {task.name: task for task in previous.tasks}
    waiting: list[str] = []
    for slot in slots:
        task = tasks.get(slot.name)
        if task is None or not task.attempts:
            continue    # never launched: it waits for an offer as in any run
        last = task.attempts[-1]
        if last.restart != restart:
            continue    # its attempt of this restart was not launched yet
        before = [a.attempt for a in task.attempts if a.restart < restart]
        state = last.states[-1].state if last.states else "TASK_STAGING"
        done = mode == "replica" and last.exit_code == 0 and (
            state == "TASK_FINISHED" or last.exited is not None)
        # One not done must come back (its exit code then comes again):
        # one that ended meanwhile is a failure once the grace is over.
        slots.adopt(slot, last.attempt, max(before, default=0),
                    [attempt.task_id for attempt in task.attempts], last.agent_id,
                    last.address, state, last.exit_code if done else None, done)
        if not done:
            waiting.append(last.task_id)
    return waiting


class Adoption:
    """The run a ``ClusterRun`` takes over (``resume``): its record carried
    on, its slots given their attempts (``adopt_slots``) and its restarts
    counted; then the adopted attempts are expected at the new rendezvous,
    reconciled once subscribed and, once the cluster is formed, given the
    grace to register again."""

    def __init__(self, resume: Resume, slots: "SlotTable", record: "RunRecord",
                 recovery: "Recovery", mode: str) -> None:
        self._slots = slots
        self._waiting: list[str] = []   # task ids taken over that must register again
        if resume.previous is not None:
            record.resume(resume.previous)
            self._waiting = adopt_slots(slots, resume.previous, mode)
            recovery.restarts = len(resume.previous.restarts)
        # What was adopted, and only that, is reconciled: a task launched
        # since may not have reached the master, which would call it lost.
        self._adopted = {slot.task_id for slot in self._current()}

    def _current(self) -> list["TaskSlot"]:
        return [slot for slot in self._slots if slot.task_id and not slot.done]

    def expected(self) -> list[str]:
        """The task ids the rendezvous expects at once: the adopted attempts."""
        return [slot.task_id for slot in self._current() if slot.task_id]

    def reconcile(self, driver: "OfferDriver") -> None:
        """Explicit reconciliation of the adopted attempts only (a task
        launched a moment ago may not have reached the master yet)."""
        ask_mesos_of(driver, [(slot.task_id, slot.agent_id) for slot in self._current()
                              if slot.agent_id and slot.task_id and slot.task_id in self._adopted])

    def formed(self, state: "RunState", now: float) -> None:
        """Each adopted task registers again within the grace, counted from
        ``now`` plus what finding the new address takes it."""
        waiting, self._waiting = self._waiting, []
        for task_id in waiting:
            state.left(task_id, now + ADOPTION_EXTRA, "the scheduler failed over")
