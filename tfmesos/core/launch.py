"""Bringing a tfmesos cluster up, waiting on it, and tearing it down.

``ClusterRun`` holds a run's state (``state.RunState``: phase, slots,
outcome), its failure policy (``reactions``, ``recovery``, a takeover's
``takeover.Adoption``) and the loop that waits (``wait_ready`` /
``wait_finished`` / ``step``): every event is handled in the thread that
waits, and the policy acts through ``control.Control`` on the run's
``control.Effects`` (``run_effects.RunEffects``); what a signal that
reaches it records is ``run_interrupts.RunInterrupts``. Who the run is
(``identity.RunIdentity``) and what it is (``spec.RunSpec``) are values it
is given or makes once; what it runs on (backend, shipment, rendezvous,
scheduler, driver) is its ``runtime.RunRuntime``, which ``stop`` and
``detach`` end; what is recorded goes to its ``record`` (``run_setup``).
"""

import logging
import os
import queue
import signal
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable, Optional

from ..exceptions import LaunchTimeout, RunKilled, SchedulerReplaced, TFMesosError
from ..protocol.hostport import format_address, free_port
from ..record import run_dir_lock
from ..record.run_record import RunRecord
from . import open_files
from .clusterspec import KERAS_JOB, cluster_spec, keras_coordinator
from .control import Control, RunControl
from .events import Interrupted
from .fit import FitWatch
from .framework_notice import FrameworkNotice, OnFramework
from .identity import RunIdentity
from .pauses import PauseWatch
from .phase import Phase
from .reactions import RunEvents
from .recovery import Recovery
from .run_effects import RunEffects
from .run_interrupts import RunInterrupts
from .run_setup import make_backend, make_record
from .runtime import RunRuntime
from .scheduler import Launch
from .signals import interrupts_queued_on
from .slots import SlotTable, TaskSlot
from .spec import RunSpec
from .start_message import start_message
from .state import RunState
from .takeover import Adoption, Resume
from .taskinfo import run_user
from .training_frameworks import GROUP_JOB, JAX, TORCH, Coordinator, coordinator

if TYPE_CHECKING:   # annotations only: these come when a run needs them, or never
    from mesos_local import LocalMaster

    from ..backends import Backend
    from ..backends.warm_runner import WarmProcessRunner
    from ..mesos import MesosSchedulerDriver
    from ..mesos.transport import Transport
    from ..record.mlflow_logger import MlflowLogger
    from ..ship.shipping import Shipment
    from .rendezvous import Rendezvous
    from .scheduler import TFMesosScheduler

logger = logging.getLogger(__name__)


class ClusterRun(RunEffects, RunInterrupts):
    """One run of ``spec`` (a ``RunSpec``, checked when it was built).

    ``on_log(slot, stream, text)`` receives the output the tasks forward
    (replica mode: every task, unless ``forward_logs(slot)`` says otherwise).
    ``on_progress(run)`` is called about once a second while the cluster
    forms, and after each event while ``wait_finished`` waits (the tasks'
    metrics), in the waiting thread. ``notify(text)`` tells the user what
    recovery does (default: a log warning). ``environ`` (default
    ``os.environ``) is where settings not in ``spec`` come from.

    ``resume`` (``takeover.Resume``): take that run over, as its identity;
    else the run is new and its identity made here (``RunIdentity.new``).
    ``on_framework(identity, run directory)``: told once the framework is known.
    ``mlflow_at_stop``: ``stop`` ends the MLflow run (else the caller calls
    ``end_mlflow``: tfrun, interruptibly). The rest is the runtime's
    (``runtime.RunRuntime``): ``backend`` (default by ``spec.master``),
    ``warm_runner``, ``transport``, ``shipment`` (files packed before),
    ``detached`` (this is a detached run's scheduler task), ``workdir``
    (where plain tasks run; default: the current directory, now);
    ``clock``: monotonic seconds.

    A run that outlives its scheduler (``spec.failover_timeout``) and ships
    keeps what it packed in its run directory (``KEPT_DIR``) until it is
    stopped, for the scheduler that takes it over (``tfmesos attach``).
    """

    def __init__(self, spec: RunSpec, *, environ: Optional[Mapping[str, str]] = None,
                 on_log: Optional[Callable[[TaskSlot, str, str], None]] = None,
                 forward_logs: Optional[Callable[[TaskSlot], bool]] = None,
                 on_progress: Optional[Callable[["ClusterRun"], None]] = None,
                 notify: Optional[Callable[[str], None]] = None,
                 warm_runner: Optional["WarmProcessRunner"] = None,
                 backend: Optional["Backend"] = None, transport: Optional["Transport"] = None,
                 clock: Callable[[], float] = time.monotonic, resume: Optional[Resume] = None,
                 on_framework: Optional[OnFramework] = None,
                 shipment: Optional["Shipment"] = None, detached: bool = False,
                 mlflow_at_stop: bool = True, workdir: Optional[str] = None) -> None:
        environ = dict(os.environ if environ is None else environ)
        self.spec: RunSpec = spec
        # The loop's input: what the runtime's parts learn, handled by ``step``.
        # A SimpleQueue: its get is C code, safe for a KeyboardInterrupt to cut
        # short, and its put is safe from a signal handler.
        self.events: queue.SimpleQueue[object] = queue.SimpleQueue()
        backend = backend or make_backend(spec, environ, warm_runner)
        # Who the run is: the run taken over, else a new one.
        identity = resume.identity if resume is not None else RunIdentity.new(
            run_user(spec), backend.principal)
        self.runtime: RunRuntime = RunRuntime(spec, identity, self.events, environ,
                                              backend=backend, transport=transport,
                                              shipment=shipment, detached=detached,
                                              workdir=workdir)
        self.state: RunState = RunState(spec.jobs)
        self.record: RunRecord = make_record(spec, self.identity, self.state.slots, environ)
        try:   # from here on the run directory is held: given back if the run is not made
            # The caller's: the tasks' output, which of it is forwarded, progress, notes.
            self._on_log: Callable[[TaskSlot, str, str], None] = \
                on_log or (lambda slot, stream, text: None)
            self._forward_logs: Callable[[TaskSlot], bool] = forward_logs or (lambda slot: True)
            self._on_progress: Callable[[ClusterRun], None] = on_progress or (lambda run: None)
            self._say: Callable[[str], None] = notify or logger.info
            self._clock: Callable[[], float] = clock
            self.mlflow_at_stop: bool = mlflow_at_stop
            self._left: bool = False   # detached: the run was left to its tasks
            self._pauses = PauseWatch(clock)
            # once formed: {job: ["host:port", ...]}
            self.cluster_spec: Optional[dict[str, list[str]]] = None
            self.launch_deadline: float = 0.0
            # Whether the tasks waiting for offers can ever fit (made at start).
            self.fit: Optional[FitWatch] = None
            self._chief: Optional[str] = None   # the coordinator's address, kept across restarts
            # Why a launched task can never reach the run (``_launching``), raised by ``form``.
            self._unreachable: Optional[TFMesosError] = None
            self._keras_coordinator: Optional[str] = None   # worker 0's second port, per formation
            self._group: Optional[Coordinator] = None   # --torch, --jax: likewise (training_frameworks)
            # tfrun --mlflow, cluster(mlflow=...): the run logged to MLflow from this process.
            self.mlflow: Optional[MlflowLogger] = None
            if spec.mlflow is not None:
                from ..record import mlflow_logger
                self.mlflow = mlflow_logger.MlflowLogger(spec.mlflow, say=self._say,
                                                         warn=notify or logger.warning)
                self.record.on_metrics = self.mlflow.metrics   # streamed as they come
            # The failure policy, last: it acts on the run through ``control``,
            # whose effects are this run's methods, all in place by now.
            self.control: RunControl = Control(self.state, effects=self)
            self.recovery: Recovery = Recovery(self.control, self.record, spec.restart_policy,
                                               spec.sticky_jobs, spec.sticky_timeout,
                                               spec.max_attempts, notify=notify,
                                               rendezvous_host=None if spec.elastic is None
                                               else "%s:0" % GROUP_JOB)
            self.adoption: Optional[Adoption] = Adoption(
                resume, self.slots, self.record, self.recovery, spec.mode) \
                if resume is not None else None
            self.framework_notice: FrameworkNotice = FrameworkNotice(
                self.runtime, self.record, self.adoption, on_framework)
            self.reactions: RunEvents = RunEvents(self.control, self.record, self.recovery,
                                                  spec.reconnect_grace, spec.max_attempts, spec.mode,
                                                  sandboxes=self.runtime.sandboxes,
                                                  framework_outcome=self.runtime.outcome_on_master,
                                                  framework_removed=self.runtime.removed_on_master,
                                                  process_group=GROUP_JOB
                                                  if spec.framework in (TORCH, JAX) else None,
                                                  notify=notify)
        except BaseException:
            # Its lock only: the directory may hold the record of the run it
            # takes over (tfmesos attach), which must stay as it was.
            if self.record.directory is not None:
                run_dir_lock.let_go(self.record.directory)
            raise

    # -- what the run is, and where it stands -----------------------------------

    @property
    def identity(self) -> RunIdentity:
        return self.runtime.identity

    @property
    def run_id(self) -> str:
        return self.identity.run_id

    @property
    def run_spec(self) -> RunSpec:
        return self.spec

    @property
    def phase(self) -> Phase:
        return self.state.phase

    @property
    def slots(self) -> SlotTable:
        return self.state.slots

    @property
    def failure(self) -> Optional[BaseException]:
        """The error that ended the run early, or None."""
        return self.state.failure

    # What the runtime holds, for readers (tfrun, cluster(), the tests).
    @property
    def master(self) -> str:
        """The master as given, its ZooKeeper password masked: what is shown."""
        from ..mesos.master_address import without_password
        return without_password(self.spec.master)

    @property
    def workdir(self) -> str:
        """Where the run's plain tasks run (``publish_to``)."""
        return self.runtime.workdir

    @property
    def backend(self) -> "Backend":
        return self.runtime.backend

    @property
    def shipment(self) -> Optional["Shipment"]:
        return self.runtime.shipment

    @property
    def rendezvous(self) -> Optional["Rendezvous"]:
        return self.runtime.rendezvous

    @property
    def scheduler(self) -> Optional["TFMesosScheduler"]:
        return self.runtime.scheduler

    @property
    def driver(self) -> Optional["MesosSchedulerDriver"]:
        return self.runtime.driver

    @property
    def detached(self) -> bool:
        """Whether this run's scheduler is a task of the run (``tfrun
        --detach``'s scheduler task), which Mesos SIGTERMs as it tears the
        run's framework down."""
        return self.runtime.detached

    @property
    def local_master(self) -> Optional["LocalMaster"]:
        """The embedded master of this run (``mesos_local.LocalMaster``), or None."""
        return self.runtime.local_master

    # -- start ----------------------------------------------------------------

    def start(self) -> "ClusterRun":
        self.record.submitted()
        short = open_files.raise_for(len(self.slots))   # before the master and its agent start
        if short is not None:
            logger.warning(short)
        runtime = self.runtime
        try:
            with self._recording():   # the outcome first, then the stop
                try:
                    shipped = runtime.ship(self.record.directory, say=self._say,
                                           keep_in=self._kept_dir())
                except TFMesosError as exc:
                    from ..ship.ship_errors import ShipError  # not on a run's start-up
                    if isinstance(exc, ShipError):   # refused before anything ran: it says all
                        self.record.discard()
                    raise
                if shipped is not None:
                    self.record.shipped(shipped)
                master_url = runtime.start_master()
                if self.mlflow is not None:   # the shipped bundle's sha256 is a parameter; MLflow's
                    # settings go to this process's environment after the tasks' was taken
                    self.mlflow.begin(self.record.run_file(), self.record.directory,
                                      source=runtime.project_directory(), image=self.spec.image,
                                      resumed=self.adoption is not None)
                expected = tuple(self.adoption.expected()) if self.adoption is not None else ()
                self.new_launch_deadline()
                self.state.move(Phase.FORMING)
                parts = runtime.start(master_url, self.slots, self._launching, self._extra_ports,
                                      expected)
                self.fit = FitWatch(runtime.agent_totals, parts.scheduler.offer_log,
                                    clock=self._clock)
        except BaseException:
            self.stop()
            raise
        return self

    def _kept_dir(self) -> Optional[str]:
        """Where a run that a later scheduler may take over packs (its run
        directory's ``KEPT_DIR``), or None: a temporary directory."""
        if self.spec.failover_timeout is None or self.runtime.detached \
                or not self.record.directory:
            return None
        # Imported here: not on an ordinary run's start-up.
        from ..record.takeover_files import KEPT_DIR
        return os.path.join(os.path.abspath(self.record.directory), KEPT_DIR)

    def _launching(self, launches: list[Launch]) -> None:
        """The scheduler is about to launch ``launches``: the rendezvous must
        expect each task before Mesos can start it (the driver's thread,
        outside the scheduler's lock)."""
        self.runtime.expect(launches)
        for launch in launches:
            self.record.launched(launch)
        if self._unreachable is None:
            self._unreachable = next(filter(None, (
                self.runtime.unreachable_from(launch.assignment.hostname)
                for launch in launches)), None)

    def _extra_ports(self, slot: TaskSlot) -> int:
        """Replica mode: worker 0 takes a second port from its offer, for the
        coordinator of Keras' ``keras.distribution`` (``clusterspec``), of a
        torch or jax process group (``training_frameworks``)."""
        return 1 if self.spec.mode == "replica" and slot.job.name == KERAS_JOB \
            and slot.index == slot.job.start else 0

    # -- waiting --------------------------------------------------------------

    def wait_ready(self) -> Optional[dict[str, list[str]]]:
        """Block until every task registered, then hand out roles. Returns
        the cluster spec ``{job: ["host:port", ...]}``."""
        with self._recording(), interrupts_queued_on(self.events):
            self.form()
        return self.cluster_spec

    def form(self) -> None:
        """Wait until every task registered (or the run stops), then publish."""
        parts = self.runtime.parts()
        while any(slot.address is None for slot in self.slots):
            if self.phase != Phase.FORMING:
                return
            remaining = self.launch_deadline - self._clock()
            if remaining <= 0:
                text = parts.scheduler.missing_message(self.spec.launch_timeout,
                                                       self.runtime.master_url)
                if self.fit is not None and self.fit.said:
                    text += "; " + self.fit.said
                raise LaunchTimeout(text)
            self.step(min(remaining, 1.0))
            if self._unreachable is not None:
                raise self._unreachable
            self._check_fit(parts.driver.connected)
            self._on_progress(self)
        # (every slot's, now: the loop above ends once each has one)
        addresses = {slot.key: slot.address for slot in self.slots if slot.address is not None}
        if self.spec.coordinator:
            if self._chief is None:
                host = self.runtime.advertised_address()
                self._chief = format_address(host, free_port(host))
            addresses[("chief", 0)] = self._chief
        self.cluster_spec = cluster_spec(addresses)
        ports = [s.extra_ports[0] for s in self.slots if self._extra_ports(s) and s.extra_ports]
        self._keras_coordinator = keras_coordinator(self.cluster_spec, ports[0] if ports else None)
        self._group = coordinator(self.cluster_spec, ports[0] if ports else None)
        for slot in self.slots:
            self.publish_to(slot)
        if not self.state.move(Phase.RUNNING):
            return
        self.record.all_registered(parts.scheduler.framework_id, parts.scheduler.first_offer_at)
        self.recovery.formed(self.cluster_spec)
        if self.adoption is not None:
            self.adoption.formed(self.state, self._clock())

    def _check_fit(self, subscribed: bool) -> None:
        """Whether the tasks waiting for offers can ever fit (``fit``): the
        run fails once the agents' totals say one never can; what waits in
        vain is said once (and in the waiting line, ``fit_note``)."""
        text = self.fit.check_slots(self.slots, subscribed) if self.fit is not None else None
        if text is not None:
            self._say(text)

    @property
    def fit_note(self) -> Optional[str]:
        """What the waiting line says of a task that waits in vain, or None."""
        return self.fit.short if self.fit is not None else None

    def publish_to(self, slot: TaskSlot) -> None:
        """Send ``slot`` its start message: its role and the cluster spec."""
        spec = self.spec
        message = start_message(
            spec, slot, self.cluster_spec, forward_logs=bool(self._forward_logs(slot)),
            keras=self._keras_coordinator, group=self._group, run_id=self.run_id,
            restarts=self.recovery.restarts,
            # a container has its own filesystem, a shipped directory is the
            # task's working directory: stay there
            cwd=None if spec.image or self.runtime.ships_code() else self.workdir)
        if not self.runtime.send(slot.task_id, message):
            # Kept by the rendezvous: a task that re-registers gets it;
            # one that does not come back fails after the grace period.
            logger.info("%s is reconnecting; it gets its role when it is back", slot.name)

    def wait_finished(self) -> int:
        """Replica mode: block until the run's trainers are done; returns 0,
        raises ``TaskFailed`` (with ``exit_code``) when a task fails."""
        with self._recording(), interrupts_queued_on(self.events):
            while not self.trainers_done():
                if self.phase == Phase.FORMING:   # a whole restart
                    self.form()
                self.step(1.0)
                self._on_progress(self)   # the tasks' latest metrics
        self.record.outcome("succeeded")
        return 0

    def trainers_done(self) -> bool:
        """Whether every trainer (the chief, else every worker) is done;
        asked after every event: it stops at the first that is not."""
        trainer = "chief" if any(job.name == "chief" for job in self.spec.jobs) else "worker"
        found = False
        for slot in self.slots:
            if slot.job.name == trainer:
                if not slot.done:
                    return False
                found = True
        return found

    # -- events ---------------------------------------------------------------

    def step(self, timeout: float) -> None:
        """Handle the next event (waiting up to ``timeout`` s for one) and
        what is due meanwhile; raise the run's failure once it has one."""
        began = self._pauses.step_began()
        try:
            event = self.events.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            event = None
        self._pauses.step_ended(began, max(timeout, 0.01))
        if isinstance(event, Interrupted):   # a signal, taken here: between two events
            if event.error is None and event.signum == signal.SIGTERM and self.detached:
                raise self._scheduler_task_killed()
            raise event.error or KeyboardInterrupt
        if event is not None:
            self.reactions.handle(event)
        self.framework_notice.check()
        self.record.flush()
        self.reactions.tick()
        self.recovery.tick()
        if self.state.failure is not None:
            self.record.hint_next_outcome(self._pauses.note() or self.reactions.master_lost_note(
                self.master or self.runtime.master_url, self.state.failure))
            raise self.state.failure

    # -- the end ---------------------------------------------------------------

    def stop(self) -> None:
        """Stop every task and the framework, which is labelled first with
        the run's outcome (``tfmesos runs --master`` reads it); safe to call
        more than once, from any thread. Once it began, no failure or
        restart undoes it. A run whose framework another scheduler took
        over (``tfmesos kill``, a takeover) leaves it as it is."""
        runtime = self.runtime
        with runtime.lock:
            with self.state.lock:
                phase, failure = self.phase, self.state.failure
                if not self.state.move(Phase.STOPPING):
                    return
            self.record.stopped_in(phase, failure)   # the outcome the label says
            if isinstance(self.state.failure, (RunKilled, SchedulerReplaced)):
                # The framework is no longer this scheduler's; a killed run is
                # over: what it shipped goes (a replaced scheduler's successor serves it).
                runtime.leave(self.record,
                              keep_shipped=not isinstance(self.state.failure, RunKilled))
            else:
                runtime.stop(self.slots, self.record, self.record.outcome_text,
                             show=self._show_late)
            self.state.move(Phase.STOPPED)
            scheduler = runtime.scheduler
            self.record.finish(scheduler and scheduler.framework_id,
                               scheduler and scheduler.first_offer_at)
        if self.mlflow_at_stop:
            self.end_mlflow()

    def _show_late(self, task_id: str, stream: str, text: str) -> None:
        """Output that came while the run stopped (a task's last lines can
        come after Mesos said it finished): shown as the rest was."""
        slot = self.slots.slot_of(task_id)
        if slot is not None:
            self._on_log(slot, stream, text)

    def detach(self) -> None:
        """Leave the run to its tasks (``--failover``, ``--detach``): they
        keep running for the framework's failover timeout, until a scheduler
        takes the run over (``tfmesos attach``); the record stays open."""
        with self.runtime.lock:
            if not self.state.move(Phase.STOPPING):
                return
            self.runtime.leave(self.record)
            self.state.move(Phase.STOPPED)
            self.record.left_to_tasks()
            self.record.save()
            self._left = True   # end_mlflow leaves the MLflow run RUNNING

    def end_mlflow(self) -> None:
        """``--mlflow``: log what the run left (run.json final) and end the
        MLflow run, waiting 60 s at most (Ctrl-C ends the wait); once. A
        run left to its tasks (``detach``) logs the metrics that wait and
        leaves its MLflow run RUNNING, for the scheduler that takes it over."""
        logger_, self.mlflow = self.mlflow, None
        if logger_ is not None and self._left:
            logger_.leave()
        elif logger_ is not None:
            logger_.end(self.record.run_file(), self.record.directory)
