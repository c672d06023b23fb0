"""Bringing a tfmesos cluster up, waiting on it, and tearing it down.

``ClusterRun`` is the run's composition root and lifecycle
(docs/architecture.md): it composes where the master lives (a backend:
``backends/``), the driver, the scheduler and the rendezvous, waits for
the cluster (aborting after ``launch_timeout``), hands out roles and stops
everything. Every event they report is handled by ``reactions`` (the
failure policy) in the thread that calls ``wait_ready`` / ``wait_finished``
/ ``step``; a failure once the cluster is up goes to ``recovery``; both act
through ``control.Control`` on the run's ``state.RunState``. What Mesos is
sent is built by ``taskinfo``; where the master lives and the record are
made by ``run_setup``; how the run ends, stopped or left to its tasks, is
``run_end``; a run taken over from another scheduler is ``takeover``'s.
"""

import logging
import os
import queue
import secrets
import threading
import time
from typing import NamedTuple, Optional

from ..backends.embedded import EmbeddedMaster
from ..exceptions import LaunchTimeout, MesosError
from ..mesos import MesosSchedulerDriver
from ..protocol import task_env
from ..protocol.hostport import format_address, free_port
from .clusterspec import (
    KERAS_JOB,
    cluster_spec,
    keras_coordinator,
    render_command,
    task_environment,
)
from .control import Control, RunControl
from .phase import Phase
from .reactions import RunEvents
from .recovery import Recovery
from .rendezvous import Rendezvous
from .run_end import leave_run, stop_run
from .run_setup import make_backend, make_record
from .sandbox_tails import SandboxTails
from .scheduler import TFMesosScheduler
from .state import RunState
from .takeover import Adoption
from .taskinfo import build_task, failover_environment, framework_info

logger = logging.getLogger(__name__)


class _Parts(NamedTuple):
    """What ``ClusterRun.start`` makes."""

    rendezvous: Rendezvous
    scheduler: TFMesosScheduler
    driver: MesosSchedulerDriver


class ClusterRun:
    """One run of ``spec`` (a ``RunSpec``, checked when it was built).

    ``on_log(slot, stream, text)`` receives the output the tasks forward
    (replica mode: every task, unless ``forward_logs(slot)`` says otherwise).
    ``on_progress(run)`` is called about once a second while the cluster
    forms, and after each event while ``wait_finished`` waits (the tasks'
    metrics), in the waiting thread. ``notify(text)`` tells the user what
    recovery does (default: a log warning). ``environ`` (default
    ``os.environ``) is where settings not in ``spec`` come from.

    ``state`` (``state.RunState``: phase, slots, outcome) is the run's one
    state; the failure policy (``reactions``, ``recovery``) reads it and acts
    through ``control`` (``control.Control``), whose effects outside the
    run are this class's ``Effects`` methods below, all in the thread that
    handles events. ``backend`` (default: by ``spec.master``,
    ``make_backend``) is where the master lives; ``transport`` replaces the
    driver's HTTP transport (tests: ``mesos.mock_transport``); ``clock``:
    monotonic seconds. ``resume`` (``takeover.Resume``): take that run over;
    ``on_framework(id)``: told once the framework is known; ``shipment``:
    files packed before, served as they are; ``detached``: this is a
    detached run's scheduler task (``core.detached``).
    """

    def __init__(self, spec, *, environ=None, on_log=None, forward_logs=None, on_progress=None,
                 notify=None, warm_runner=None, backend=None, transport=None,
                 clock=time.monotonic, resume=None, on_framework=None, shipment=None,
                 detached=False):
        self.run_spec = spec
        self.jobs = list(spec.jobs)
        self.mode = spec.mode
        self.command = spec.command
        self._environ = dict(os.environ if environ is None else environ)
        # Where the master lives (backends/); ``warm_runner``: tfrun's early
        # start of the embedded master's warm tasks (backends/warm_runner.py).
        self.backend = backend or make_backend(spec, self._environ, warm_runner)
        self.master = spec.master
        self.on_log = on_log or (lambda slot, stream, text: None)
        self._forward_logs = forward_logs or (lambda slot: True)
        self._on_progress = on_progress or (lambda run: None)
        self.coordinator = spec.coordinator  # reserve chief:0 for the calling process

        self.state = RunState(self.jobs)
        self.control: RunControl = Control(self.state, effects=self)
        self._transport = transport
        self._clock = clock
        self.events: queue.Queue[object] = queue.Queue()
        # ``resume`` (``takeover.Resume``): this scheduler takes the run over.
        self.resume = resume
        self.secret = resume.secret if resume else secrets.token_bytes(32)
        self.run_id = resume.run_id if resume else secrets.token_hex(4)
        # ``on_framework(framework_id)``: once, when the framework is known.
        self.on_framework = on_framework
        self._framework_told = False
        # What start() makes (None before): ``_started`` hands them out typed.
        self.driver: Optional[MesosSchedulerDriver] = None
        self.rendezvous: Optional[Rendezvous] = None
        self.scheduler: Optional[TFMesosScheduler] = None
        self.cluster_spec = None     # once formed: {job: ["host:port", ...]}
        self.launch_deadline = None
        self.stop_lock = threading.Lock()   # run_end: one stop or leave
        self.record = make_record(spec.run_dir, self, self._environ)  # the run directory
        self.recovery = Recovery(self.control, self.record, spec.restart_policy,
                                 spec.sticky_jobs, spec.sticky_timeout, spec.max_attempts,
                                 notify=notify)
        self.adoption = Adoption(resume, self.slots, self.record, self.recovery, self.mode) \
            if resume is not None else None
        # What a task that never reached the rendezvous wrote in its sandbox.
        self.sandboxes = SandboxTails(
            lambda: self.scheduler.framework_id if self.scheduler else None,
            credentials=lambda: self.backend.credentials,
            master_url=lambda: self.driver.master if self.driver else None,
            tls=(spec.verify, spec.ca_bundle))
        self.reactions = RunEvents(self.control, self.record, self.recovery,
                                   spec.reconnect_grace, spec.max_attempts, spec.mode,
                                   sandboxes=self.sandboxes)
        self._chief = None   # the coordinator's address, kept across restarts
        self._say = notify or logger.info
        # tfrun --ship: shipping.Shipment, served while the run lasts (given:
        # files packed before, a detached run's scheduler task serves them).
        self.shipment = shipment
        self.detached = detached     # this is a detached run's scheduler task
        self.framework_info = None   # what start() subscribed with
        self._keras_coordinator = None   # worker 0's second port (replica mode), per formation
        # tfrun --mlflow, cluster(mlflow=...): the run logged to MLflow from this process.
        self.mlflow = None
        self.mlflow_at_stop = True   # False: the caller calls end_mlflow (tfrun: interruptible)
        if spec.mlflow is not None:
            from ..record.mlflow_logger import MlflowLogger
            self.mlflow = MlflowLogger(spec.mlflow, say=self._say, warn=notify or logger.warning)

    # -- the state --------------------------------------------------------------

    @property
    def phase(self):
        return self.state.phase

    @property
    def slots(self):
        return self.state.slots

    @property
    def failure(self):
        """The error that ended the run early, or None."""
        return self.state.failure

    # -- start ----------------------------------------------------------------

    def start(self):
        self.record.submitted()
        try:
            self._ship()
            master_url = self.backend.start()
            if self.mlflow is not None:   # the shipped bundle's sha256 is a parameter; MLflow's
                # settings go to this process's environment after the tasks' was taken
                self.mlflow.begin(self.record.run_file(), self.record.directory,
                                  source=self._project_directory(), image=self.run_spec.image)
            self.rendezvous = Rendezvous(self.secret, self.events,
                                         bind_host=self.backend.bind_host(), port=0)
            if self.adoption is not None:
                self.adoption.expect(self.rendezvous)
            self.scheduler = scheduler = TFMesosScheduler(
                self.slots, self._make_task, self.events, self.run_id,
                on_launch=self._launching, extra_ports=self._extra_ports)
            info = framework_info(
                self.run_spec, self.jobs, self.run_id,
                framework_id=self.resume.framework_id if self.resume else None,
                rendezvous=format_address(self.backend.advertised_address(master_url),
                                          self.rendezvous.port), detached=self.detached)
            options = self.run_spec.driver_options()
            if self.backend.credentials is not None:   # e.g. the embedded master's, for this run
                info["principal"], options["secret"] = self.backend.credentials
                options["principal"] = info["principal"]
            self.framework_info = info
            self.driver = driver = MesosSchedulerDriver(
                scheduler, info, master_url, connect_timeout=self.run_spec.connect_timeout,
                refused_timeout=self.run_spec.refused_timeout, transport=self._transport,
                **options)
            self.new_launch_deadline()
            self.state.move(Phase.FORMING)
            driver.start()
        except BaseException as exc:
            self.record.ended(exc, self.phase)
            self.stop()
            raise
        return self

    def _ship(self):
        """``tfrun --ship``: pack and serve what every task fetches."""
        if self.run_spec.ship is None or self.shipment is not None:
            return
        from ..ship.shipping import Shipment

        # The server binds the advertised address: a wrong one is named first.
        self.backend.check()
        # Run directories are never shipped: this run's, and where runs go.
        runs = (self.record.directory, self._environ.get("TFMESOS_RUNS_DIR"))
        self.shipment = Shipment(self.run_spec.ship, self.backend.bind_host(), say=self._say,
                                 leave_out=tuple(path for path in runs if path))
        self.record.shipped(self.shipment.record())

    def _project_directory(self):
        """The user's project: the shipped directory, else where the run began."""
        ship = self.run_spec.ship
        return ship.directory if ship is not None and ship.directory is not None \
            else os.getcwd()

    @property
    def local_master(self):
        """The embedded master of this run (``mesos_local.LocalMaster``), or None."""
        return self.backend.master if isinstance(self.backend, EmbeddedMaster) else None

    def _started(self) -> "_Parts":
        """What ``start`` made; RuntimeError before it did."""
        if self.rendezvous is None or self.scheduler is None or self.driver is None:
            raise RuntimeError("the run has not started")
        return _Parts(self.rendezvous, self.scheduler, self.driver)

    def _master_url(self):
        """The leading master's URL once subscribed, else the master as given."""
        return self._started().driver.master or self.master

    def _advertised_address(self):
        return self.backend.advertised_address(self._master_url())

    def _launching(self, launches):
        """The scheduler is about to launch ``launches``: the rendezvous must
        expect each task before Mesos can start it (the driver's thread,
        outside the scheduler's lock)."""
        for launch in launches:
            self._started().rendezvous.expect(launch.task_id)
            self.record.launched(launch)
            self.sandboxes.launched(launch)

    def _extra_ports(self, slot):
        """Replica mode: worker 0 takes a second port from its offer, for the
        coordinator of Keras' ``keras.distribution`` (``clusterspec``)."""
        return 1 if self.mode == "replica" and slot.job.name == KERAS_JOB \
            and slot.index == slot.job.start else 0

    def _make_task(self, slot, assignment):
        """The scheduler's ``make_task``: the TaskInfo, nothing else."""
        host = self._advertised_address()
        rendezvous = format_address(host, self._started().rendezvous.port)
        parts = self._started()
        return build_task(self.run_spec, slot, assignment, rendezvous, self.secret,
                          quiet_tensorflow=self.run_spec.quiet_tensorflow, run_id=self.run_id,
                          shipment=self.shipment, ship_host=host,
                          failover=failover_environment(self.run_spec, parts.driver.master,
                                                        parts.scheduler.framework_id))

    # -- waiting --------------------------------------------------------------

    def wait_ready(self):
        """Block until every task registered, then hand out roles. Returns
        the cluster spec ``{job: ["host:port", ...]}``."""
        with self.record.recording(lambda: self.phase):
            self.form()
        return self.cluster_spec

    def form(self):
        """Wait until every task registered (or the run stops), then publish."""
        while any(slot.address is None for slot in self.slots):
            if self.phase != Phase.FORMING:
                return
            remaining = self.launch_deadline - self._clock()
            if remaining <= 0:
                raise LaunchTimeout(self._started().scheduler.missing_message(
                    self.run_spec.launch_timeout, self._master_url()))
            self.step(min(remaining, 1.0))
            self._on_progress(self)
        addresses = {slot.key: slot.address for slot in self.slots}
        if self.coordinator:
            if self._chief is None:
                host = self._advertised_address()
                self._chief = format_address(host, free_port(host))
            addresses[("chief", 0)] = self._chief
        self.cluster_spec = cluster_spec(addresses)
        ports = [s.extra_ports[0] for s in self.slots if self._extra_ports(s) and s.extra_ports]
        self._keras_coordinator = keras_coordinator(self.cluster_spec, ports[0] if ports else None)
        for slot in self.slots:
            self.publish_to(slot)
        if not self.state.move(Phase.RUNNING):
            return
        scheduler = self._started().scheduler
        self.record.all_registered(scheduler.framework_id, scheduler.first_offer_at)
        self.recovery.formed(self.cluster_spec)
        if self.adoption is not None:
            self.adoption.formed(self.state, self._clock())

    def publish_to(self, slot):
        """Send ``slot`` its start message: its role and the cluster spec."""
        message = {"type": "start", "mode": self.mode, "job": slot.job.name,
                   "index": slot.index, "cluster": self.cluster_spec,
                   "forward_logs": bool(self._forward_logs(slot))}
        if self.mode == "replica":
            template = slot.job.cmd or self.command
            env = task_environment(self.cluster_spec, slot.job.name, slot.index,
                                   self._keras_coordinator)
            env[task_env.RESTART] = str(self.recovery.restarts)
            # PYTHONUNBUFFERED comes with the TaskInfo's environment.
            message.update(cmd=render_command(template, self.cluster_spec, slot.job.name, slot.index),
                           env=env, hooks=self.run_spec.hook_commands,
                           # a container has its own filesystem, a shipped directory
                           # is the task's working directory: stay there
                           cwd=None if self.run_spec.image or self._ships_code() else os.getcwd())
        if not self._started().rendezvous.send(slot.task_id, message):
            # Kept by the rendezvous: a task that re-registers gets it;
            # one that does not come back fails after the grace period.
            logger.info("%s is reconnecting; it gets its role when it is back", slot.name)

    def _ships_code(self):
        if self.shipment is not None:
            return self.shipment.bundle is not None
        return self.run_spec.ship is not None and self.run_spec.ship.directory is not None

    def wait_finished(self):
        """Replica mode: block until the run's trainers are done; returns 0,
        raises ``TaskFailed`` (with ``exit_code``) when a task fails."""
        with self.record.recording(lambda: self.phase):
            while not self.trainers_done():
                if self.phase == Phase.FORMING:   # a whole restart
                    self.form()
                self.step(1.0)
                self._on_progress(self)   # the tasks' latest metrics
        self.record.outcome("succeeded")
        return 0

    def _trainers(self):
        names = {job.name for job in self.jobs}
        return [s for s in self.slots if s.job.name == ("chief" if "chief" in names else "worker")]

    def trainers_done(self):
        trainers = self._trainers()
        return bool(trainers) and all(slot.done for slot in trainers)

    # -- events ---------------------------------------------------------------

    def step(self, timeout):
        """Handle the next event (waiting up to ``timeout`` s for one) and
        what is due meanwhile; raise the run's failure once it has one."""
        try:
            event = self.events.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            event = None
        if event is not None:
            self.reactions.handle(event)
        self._tell_framework()
        self.record.flush()
        self.reactions.tick()
        self.recovery.tick()
        if self.state.failure is not None:
            raise self.state.failure

    def _tell_framework(self):
        scheduler = self.scheduler
        if self._framework_told or scheduler is None or not scheduler.framework_id:
            return
        self._framework_told = True
        if self.adoption is not None:   # what ran meanwhile: Mesos says at once
            self.adoption.reconcile(self._started().driver)
        if self.on_framework is not None:
            self.on_framework(scheduler.framework_id)

    # -- what acting on the run does outside it (control.Effects) --------------

    def now(self):
        return self._clock()

    def ask_for_offers(self):
        parts = self._started()
        parts.scheduler.revive(parts.driver)

    def send_stop(self, task_id):
        self.record.stopping(task_id)
        self._started().rendezvous.send(task_id, {"type": "stop"})

    def forget_task(self, task_id):
        self._started().rendezvous.forget(task_id)

    def kill(self, task_id, agent_id):
        self.record.stopping(task_id)
        try:
            self._started().driver.killTask({"value": task_id},
                                            agent_id and {"value": agent_id})
        except MesosError as exc:
            logger.warning("could not kill %s: %s", task_id, exc)

    def show(self, slot, stream, text):
        self.on_log(slot, stream, text)

    def reconcile(self):
        driver, scheduler = self.driver, self.scheduler
        if driver is not None and scheduler is not None and driver.connected:
            scheduler.reconcile(driver)

    def new_launch_deadline(self):
        self.launch_deadline = self._clock() + self.run_spec.launch_timeout

    # -- stop -----------------------------------------------------------------

    def stop(self):
        """Stop every task and the framework; safe to call more than once,
        from any thread. Once it began, no failure or restart undoes it."""
        stop_run(self)

    def detach(self):
        """Leave the run to its tasks (``--failover``, ``--detach``): they
        keep running for the framework's failover timeout, until a scheduler
        takes the run over (``tfmesos attach``)."""
        leave_run(self)

    def end_mlflow(self):
        """``--mlflow``: log what the run left (run.json final) and end the
        MLflow run, waiting 60 s at most (Ctrl-C ends the wait); once."""
        logger_, self.mlflow = self.mlflow, None
        if logger_ is not None:
            logger_.end(self.record.run_file(), self.record.directory)
