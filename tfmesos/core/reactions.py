"""How a run reacts to each event on its queue (``tfmesos.core.events``), in the
thread that handles them: the failure policy of docs/architecture.md. A task
that ends before the cluster is complete is relaunched (unless retrying
cannot help, ``task_ends``); once running, a failure goes to ``recovery``.

``RunEvents`` sees the run only through ``control.RunControl`` (its
``state`` and the calls that act); what happened goes to the run's record
(``record.run_record.RunRecord``)."""

import logging
import signal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..exceptions import ClusterError, RunKilled, SchedulerReplaced, TaskFailed, TFMesosError
from ..mesos.interface import FAILED_OVER, REMOVED
from ..mesos.task_states import TERMINAL_STATES, exit_code_of, says_only_the_exit
from ..protocol.hostport import format_address
from ..record.outcomes import killed_by, killed_text
from ..record.run_record import RunRecord
from ..record.usage_table import clean_usage
from .control import RunControl
from .events import (
    AgentLost,
    MesosDisconnected,
    MesosFailed,
    StatusUpdate,
    Subscribed,
    TaskDisconnected,
    TaskExited,
    TaskMetrics,
    TaskOutput,
    TaskRegistered,
)
from .jobs import HELPER_JOBS
from .phase import Phase
from .ps_left import PsLeft
from .recovery import Recovery
from .restarts import failure_cause, killed_by_signal
from .sandbox_tails import SandboxTails
from .slots import SlotTable, TaskSlot
from .state import RunState
from .task_ends import (
    launch_failure_message,
    memory_kill_message,
    memory_kill_peak,
    permanent_failure,
    protocol_mismatch,
    refused_fetch,
)

if TYPE_CHECKING:
    from addict import Dict

logger = logging.getLogger(__name__)

# How often the state of running tasks is reconciled with Mesos, besides
# after every re-subscription and every agent loss.
RECONCILE_INTERVAL = 20.0
# How long the others of a process group may still run after one of them
# ended before that is said: ranks that finish together take seconds to.
GROUP_LEFT_GRACE = 15.0


def describe_failure(slot: TaskSlot, error: TaskFailed, cause: Optional[str], text: str) -> str:
    """What the user is told of ``slot``'s failure ``error``: ``text``
    (``worker:1 exited with code 3``), or for a loss what was lost
    (``worker:1 was lost (TASK_LOST: ...)``)."""
    if cause != "lost":
        return text
    code = error.exit_code
    killed = killed_by_signal(code)   # the task entry exits 128 + N for signal N
    # Mesos' own words, unless they are the bare "Command exited with status
    # N" of a killed command: then the same words as when the task's own
    # report of the kill comes first.
    if slot.state in TERMINAL_STATES and not (
            killed and slot.state == "TASK_FAILED" and says_only_the_exit(slot.message, code)):
        return "%s was lost (%s: %s)" % (slot.name, slot.state, slot.message or "no message")
    if killed:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = "signal %d" % (code - 128)
        return "%s was lost (its command was killed by %s, exit code %d)" % (
            slot.name, name, code)
    return text


class RunEvents:
    """The reactions of the run behind ``control`` to its events. A task away
    from the rendezvous longer than ``reconnect_grace`` has failed; a task
    gets ``max_attempts`` launches per attempt of the cluster before it is
    complete; in ``mode`` "replica" a command that exits 0 is done.
    ``framework_outcome()``: the run's ``tfmesos.outcome`` label as the
    master has it now (None: none, or it cannot be read), asked when another
    scheduler took the framework over (``tfmesos kill`` sets it first).
    ``framework_removed()``: if the master removed the framework, its
    ``tfmesos.outcome`` label, read with it ("" without one; None: not
    removed, or it cannot say), asked when a task was killed by a signal it
    was not sent by this run: a teardown kills every task (``removed``).
    ``process_group``: the job whose tasks form a torch or jax process
    group (None: no group); the first of them that ends while others of it
    still run is said, once, through ``notify``: those wait for it in
    silence (init_process_group, a collective) until their own timeout."""

    def __init__(self, control: RunControl, record: RunRecord, recovery: Recovery,
                 reconnect_grace: float, max_attempts: int, mode: str,
                 sandboxes: Optional[SandboxTails] = None,
                 framework_outcome: Callable[[], Optional[str]] = lambda: None,
                 framework_removed: Callable[[], Optional[str]] = lambda: None,
                 process_group: Optional[str] = None,
                 notify: Optional[Callable[[str], None]] = None) -> None:
        self.control = control
        self._process_group = process_group
        self._group_left_said = False
        self._group_left: Optional[tuple[float, TaskSlot, Optional[int]]] = None   # due, who
        self._notify = notify or (lambda text: logger.warning("%s", text))
        self._ps_left = PsLeft(self._slots, lambda text: self._notify(text))
        self.record = record
        self.recovery = recovery
        self._sandboxes = sandboxes   # reads a failed launch's last words (None: not read)
        self._framework_outcome = framework_outcome
        self._framework_removed = framework_removed
        self._reconnect_grace = reconnect_grace
        self._max_attempts = max_attempts
        self._mode = mode
        self._reconciled = control.now()
        self.master_lost_at: Optional[float] = None   # since a disconnection, until subscribed
        self._handlers: dict[type, Callable[[Any], None]] = {
            TaskRegistered: self._on_registered, TaskOutput: self._on_output,
            TaskMetrics: self._on_metrics,
            TaskExited: self._on_task_exited, TaskDisconnected: self._on_task_disconnected,
            Subscribed: self._on_subscribed, MesosDisconnected: self._on_mesos_disconnected,
            StatusUpdate: self._on_status, AgentLost: self._on_agent_lost,
            MesosFailed: self._on_mesos_failed,
        }

    def handle(self, event: object) -> None:
        """React to ``event``; a kind without a handler is a bug (KeyError),
        never silently dropped."""
        self._handlers[type(event)](event)

    def tick(self) -> None:
        """What is due whether or not an event came: tasks away too long,
        the periodic reconciliation, the kills of stopped tasks that did not
        end in time."""
        self._check_away()
        self.control.kill_overdue()
        self._say_group_left()
        if self.control.now() - self._reconciled > RECONCILE_INTERVAL:
            self._reconcile()

    @property
    def _state(self) -> RunState:
        return self.control.state

    @property
    def _slots(self) -> SlotTable:
        return self.control.state.slots

    def _on_registered(self, event: TaskRegistered) -> None:
        slot = self._slots.current(event.task_id)
        if slot is None:
            return
        if self._state.back(event.task_id):
            logger.info("%s reconnected to the rendezvous", slot.name)
        address = format_address(event.host, event.port)
        phase = self._state.phase
        if phase == Phase.FORMING:
            self._slots.registered(slot, address)
            self.record.registered(event.task_id, address)
            logger.info("%s registered at %s", slot.name, address)
        elif phase == Phase.RUNNING and slot.address is None:
            self.recovery.registered(slot, address)

    def _on_output(self, event: TaskOutput) -> None:
        self.record.output(event.task_id, event.stream, event.text)
        slot = self._slots.slot_of(event.task_id)
        if slot is not None:
            self.control.show(slot, event.stream, event.text)

    def _on_metrics(self, event: TaskMetrics) -> None:
        self.record.metrics(event.task_id, event.points, event.dropped, event.source)

    def _on_task_exited(self, event: TaskExited) -> None:
        usage = clean_usage(event.usage)
        self.record.exited(event.task_id, event.code, event.at, usage, event.stopped)
        slot = self._slots.current(event.task_id)
        if slot is not None:
            self._on_exit(slot, event.code, usage=usage, stopped=bool(event.stopped))

    def _group_member_left(self, slot: TaskSlot, code: Optional[int]) -> None:
        """Note the first member of the process group that ended while
        others of it still run: said (``_say_group_left``) when they still
        run ``GROUP_LEFT_GRACE`` s later, waiting for it without a word; not
        when they end too (ranks finishing together: said at every clean
        end, it was a false alarm)."""
        if self._group_left_said or self._group_left is not None \
                or self._process_group is None or slot.job.name != self._process_group:
            return
        if self._group_running(slot):
            self._group_left = (self.control.now() + GROUP_LEFT_GRACE, slot, code)

    def _group_running(self, slot: TaskSlot) -> int:
        return self._still_running((self._process_group,), but=slot)

    def _still_running(self, jobs: tuple[Optional[str], ...], but: Optional[TaskSlot] = None) -> int:
        return sum(1 for other in self._slots if other is not but and other.job.name in jobs
                   and not other.done and other.exit_code is None)

    def _say_group_left(self) -> None:
        if self._group_left is None or self.control.now() < self._group_left[0]:
            return
        _, slot, code = self._group_left
        self._group_left = None
        running = self._group_running(slot)
        if not running or self._state.phase != Phase.RUNNING:
            return
        self._group_left_said = True
        self._notify("%s ended (exit %s) while %d other %s of its process group still run%s: "
                     "a rank that leaves early makes the others wait in init_process_group "
                     "or a collective" % (slot.name, code, running,
                                          "worker" if running == 1 else "workers",
                                          "s" if running == 1 else ""))

    def _on_task_disconnected(self, event: TaskDisconnected) -> None:
        slot = self._slots.current(event.task_id)
        if slot is None or slot.done or slot.exit_code is not None:
            return  # it said goodbye (exit) first: nothing is lost
        logger.info("%s lost its rendezvous connection (%s); waiting until %.0f s after it was "
                    "last heard for it to come back", slot.name, event.reason,
                    self._reconnect_grace)
        # event.since is on the run's clock (monotonic); a closed connection
        # was heard from until it closed.
        since = event.since if event.reason == "stalled" else self.control.now()
        self._state.left(event.task_id, since, event.reason)
        if self._state.phase == Phase.FORMING:
            self._slots.away(slot)   # the cluster is complete only with it back

    def _check_away(self) -> None:
        """A task that stays away longer than the grace period has failed
        (before the cluster is complete, Mesos' report of its end decides)."""
        now = self.control.now()
        for task_id, since, reason in self._state.away():
            slot = self._slots.current(task_id)
            if slot is None or slot.done or slot.exit_code is not None:
                self._state.forget_absence(task_id)
            elif now - since > self._reconnect_grace and self._state.phase == Phase.RUNNING:
                self._state.forget_absence(task_id)
                if reason == "stalled":   # a partition, not the task's doing
                    what = "unreachable for %.0f s (its rendezvous connection stalled)"
                else:
                    what = "lost its connection to the scheduler and did not come back " \
                        "within %.0f s"
                what %= self._reconnect_grace
                if slot.job.name in HELPER_JOBS:
                    # Gone as far as the run can tell: stopped, and nothing more.
                    self._helper_ended(slot, None, what)
                    self.control.kill(task_id, slot.agent_id)
                    continue
                self.recovery.failed(slot, TaskFailed("task %s %s" % (slot.name, what),
                                                      slot.name, slot.state),
                                     "lost", "%s %s" % (slot.name, what))

    def _helper_ended(self, slot: TaskSlot, code: Optional[int], what: str) -> None:
        """A helper (TensorBoard) that ended, or is gone, while the training
        goes on: said, and nothing more (``HELPER_JOBS``)."""
        self._slots.exited(slot, code, done=True)
        self._notify("%s %s: TensorBoard stopped; the training goes on without it (its "
                     "output is in the run directory)" % (slot.name, what))

    def _on_subscribed(self, event: Subscribed) -> None:
        self.master_lost_at = None
        if event.again:
            logger.info("re-subscribed to the Mesos master; the tasks were kept")
        else:
            logger.info("subscribed to the Mesos master")

    def _on_mesos_disconnected(self, event: MesosDisconnected) -> None:
        if self.master_lost_at is None:
            self.master_lost_at = self.control.now()
        logger.warning("lost the connection to the Mesos master; reconnecting")

    def master_lost_note(self, master: str, failure: BaseException) -> Optional[str]:
        """What ``failure`` should say of the master (``master``) the run
        lost and has not found again, or None: a task's kill may be the
        master's end (a stopped ``tfmesos local-master`` stops its tasks, and
        the run hears of it only from the tasks, a SIGTERM's 143); a
        command's own failure is not."""
        if self.master_lost_at is None or not isinstance(failure, TaskFailed):
            return None
        if not (killed_by_signal(failure.exit_code)
                or failure.state in ("TASK_KILLED", "TASK_LOST")):
            return None
        lost = self.control.now() - self.master_lost_at
        return ("tfrun had lost its Mesos master (%s) %s and had not found it again: a "
                "tfmesos local-master that stops (Ctrl-C, SIGTERM) stops its tasks"
                % (master, "%.0f s before" % lost if lost >= 1 else "just before"))

    def _on_agent_lost(self, event: AgentLost) -> None:
        # Mesos reports each of the agent's tasks as lost in a status update;
        # reconciling at once makes sure, should one of them be missed.
        logger.warning("Mesos lost agent %s", event.agent_id)
        self._reconcile()
        self.recovery.agent_lost(event.agent_id)

    def _reconcile(self) -> None:
        self._reconciled = self.control.now()
        self.control.reconcile()

    def _on_mesos_failed(self, event: MesosFailed) -> None:
        if FAILED_OVER in event.message:
            self.control.fail(self._taken_over())
            return
        if REMOVED in event.message:   # the answer to re-subscribing after a teardown
            self.control.fail(self._removed(self._framework_outcome()))
            return
        stopped = "the Mesos driver stopped: "
        if isinstance(event.error, TFMesosError) and event.message == str(event.error):
            error = ClusterError.like(event.error, stopped)   # its fields still to be worded
        else:
            error = ClusterError(stopped + event.message)
        error.__cause__ = event.error
        self.control.fail(error)

    def _removed(self, outcome: Optional[str]) -> RunKilled:
        """The master removed the framework while this scheduler had it (an
        operator's ``/master/teardown``, ``tfmesos kill`` where the master
        did not let it subscribe as the framework): Mesos closes the
        subscription and kills every task, and says "Framework has been
        removed" to a scheduler that subscribes again (``Master::teardown``,
        ``removeFramework``, ``validateFramework`` in
        src/master/master.cpp). The run was killed, as by ``tfmesos kill``
        (``outcome``: the framework's ``tfmesos.outcome`` label, None: none)."""
        by = killed_by(outcome)
        return RunKilled("the run was %s: the Mesos master tore its framework down (an "
                         "operator, or tfmesos kill), which kills every task"
                         % killed_text(by), by or None)

    def _taken_over(self) -> ClusterError:
        """Another scheduler subscribed as the run's framework: ``tfmesos
        kill`` when the framework's outcome label says killed (set by that
        very subscription), else a scheduler that took the run over."""
        by = killed_by(self._framework_outcome())
        if by is not None:
            return RunKilled("the run was %s: tfmesos kill took its framework over and removed "
                             "it, which kills every task" % killed_text(by), by or None)
        return SchedulerReplaced("another scheduler took the run's framework over (Mesos: %s): "
                                 "this one leaves the tasks to it" % FAILED_OVER)

    def _on_status(self, event: StatusUpdate) -> None:
        status = event.status
        task_id = status.task_id.value
        self.record.status(status)
        if status.state in TERMINAL_STATES:
            self.control.end_reported(task_id)
        slot = self._slots.current(task_id)
        if status.state not in TERMINAL_STATES and self._slots.slot_of(task_id) is not None \
                and (slot is None or slot.state in TERMINAL_STATES):
            # An earlier attempt still runs (reconciliation found it), or one
            # Mesos reported lost runs again: Mesos (>= 1.5) kills no task of
            # an agent back from a partition, it reports the task's state
            # (REASON_AGENT_REREGISTERED, Master::__reregisterSlave). The run
            # gave it up (its slot is relaunched or restarted): no orphans.
            logger.warning("killing %s, %s", task_id,
                           "a replaced attempt that still runs" if slot is None else
                           "an attempt Mesos reported %s that runs again" % slot.state)
            self.control.kill(task_id, status.get("agent_id", {}).get("value"))
            return
        if slot is None or slot.done:
            return
        self._slots.status(slot, status.state, status.get("message", ""),
                           status.get("reason") or None)
        phase = self._state.phase
        if status.state not in TERMINAL_STATES:
            self._slots.heard_of(task_id)
        if status.state not in TERMINAL_STATES or phase not in (Phase.FORMING, Phase.RUNNING):
            return
        self.control.forget_task(task_id)
        code = exit_code_of(slot.message)
        if phase == Phase.FORMING:
            self._on_launch_failure(slot, status, code)
        elif status.state == "TASK_FINISHED":
            self._on_exit(slot, 0 if slot.exit_code is None else slot.exit_code)
        else:
            self._on_exit(slot, slot.exit_code if slot.exit_code is not None else code,
                          status.state)

    def _on_launch_failure(self, slot: TaskSlot, status: "Dict", code: Optional[int]) -> None:
        """Relaunch a task that ended before the cluster was complete, unless
        its attempts are spent or retrying cannot help (``task_ends``)."""
        if self._slots.never_launched(slot):
            logger.warning("%s was never launched: Mesos does not know it (its launch got no "
                           "answer); launching it again", slot.name)
            self.control.relaunch(slot)
            return
        lines = self._read_sandbox(slot, status)
        why = permanent_failure(status.state, status.get("reason"), slot.message) \
            or refused_fetch(code, lines) or protocol_mismatch(code, lines)
        attempts = slot.attempts - slot.base   # in this attempt of the cluster
        last = next((line.strip() for line in reversed(lines) if line.strip()), None)
        said = "; it said: %s" % last if last and last not in (slot.message or "") else ""
        if why is None and attempts < self._max_attempts:
            logger.warning("%s ended before the cluster was complete: %s%s; relaunching "
                           "(attempt %d of %d)", slot.name, slot.describe(), said,
                           attempts + 1, self._max_attempts)
            self.control.relaunch(slot)
            return
        self.control.fail(TaskFailed(launch_failure_message(slot.name, attempts, status.state,
                                                            slot.message, why),
                                     slot.name, status.state, code))

    def _read_sandbox(self, slot: TaskSlot, status: "Dict") -> list[str]:
        """Keep the last lines the ended task wrote in its sandbox (run.json,
        and the hint reads them); returns its last stderr lines ([] when
        unknown). Not for an end the master reported: such a task never
        reached an agent, or its agent is gone."""
        if self._sandboxes is None or status.get("source") == "SOURCE_MASTER":
            return []
        task_id = status.task_id.value
        tail = self._sandboxes.read(task_id, slot.name)
        if tail is None:
            return []
        self.record.sandbox_tail(task_id, tail)
        return list(tail.get("stderr", []))

    def _on_exit(self, slot: TaskSlot, code: Optional[int], state: Optional[str] = None,
                 usage: Optional[Mapping[str, Any]] = None, stopped: bool = False) -> None:
        """A task's command ended (replica) or its server did (fine);
        ``usage``: what it used, from its exit message; ``stopped``: the
        run stopped it (a restart, the run's end)."""
        if slot.job.name in HELPER_JOBS and self._state.phase == Phase.RUNNING:
            # TensorBoard killed, its port taken: said, and nothing more.
            self._helper_ended(slot, code, "exited with code %d" % code if code is not None
                               else "ended (%s)" % slot.condition())
            return
        done = self._mode == "replica" and code == 0
        self._slots.exited(slot, code, done=done and self._state.phase == Phase.RUNNING)
        if self._state.phase != Phase.RUNNING or done:
            if done:
                self._group_member_left(slot, code)
                if self._state.phase == Phase.RUNNING and not stopped:
                    self._ps_left.left(slot, self._still_running(("chief", "worker")))
            return
        removed = self._framework_removed() \
            if killed_by_signal(code) or state == "TASK_KILLED" else None
        if removed is not None:
            # Killed, not by this run: by the teardown of its framework,
            # whose TASK_KILLED updates Mesos sends to no one.
            self.control.fail(self._removed(removed))
            return
        self._ps_left.failing(slot)
        cause = failure_cause(state, slot.reason, slot.message, code)
        peak = memory_kill_peak(slot.reason, slot.message, usage)
        if peak is not None:
            # Killed for its memory (Mesos' reason, or the OOM killer in its cgroup).
            text = memory_kill_message(slot.name, slot.job.name, slot.job.mem, peak,
                                       self._mode)
            self.recovery.failed(slot, TaskFailed(text, slot.name, state, code), "lost", text)
            return
        if self._mode == "fine" and code == 0:
            # A server stops of itself (0) only once its rendezvous connection
            # is gone for good (task/tensorflow_server.py): the run, running,
            # did not tell it to, so it could not register again within its
            # grace (task/connection.py). Lost, as one away too long is
            # (_check_away): no exit of its own, no exit code.
            text = "%s lost its connection to the scheduler and could not register again: " \
                "its TensorFlow server stopped" % slot.name
            self.recovery.failed(slot, TaskFailed("task " + text, slot.name, slot.state),
                                 "lost", text)
            return
        if code is None:
            what = "ended: %s %s" % (state, slot.message) if state else "ended"
        else:
            what = "exited with code %d" % code
            # The same words whether the task's own report of its exit or
            # Mesos' TASK_FAILED came first: Mesos' bare "Command exited with
            # status N" adds nothing.
            if state and not (state == "TASK_FAILED" and says_only_the_exit(slot.message, code)):
                what += " (%s: %s)" % (state, slot.message)
        error = TaskFailed("task %s %s" % (slot.name, what), slot.name, state, code)
        self.recovery.failed(slot, error, cause,
                             describe_failure(slot, error, cause, "%s %s" % (slot.name, what)))
