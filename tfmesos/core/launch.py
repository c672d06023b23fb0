"""Bringing a tfmesos cluster up, watching it, and tearing it down.

``ClusterRun`` owns the run's lifecycle (docs/architecture.md): it composes
the master (a real one, or the embedded local master), the driver, the
scheduler and the rendezvous, waits for the cluster (aborting after
``launch_timeout``), hands out roles and stops everything. Every event they
report is handled by ``run_events`` (the failure policy) in the thread that
calls ``wait_ready`` / ``wait_finished`` / ``watch``; a failure once the
cluster is up goes to ``recovery``. What Mesos is sent is built by
``taskinfo``.
"""

import logging
import os
import queue
import secrets
import threading
import time

from . import config
from .clusterspec import (KERAS_JOB, cluster_spec, keras_coordinator, render_command,
                          task_environment)
from ..exceptions import LaunchTimeout, MesosError, TFMesosError
from ..protocol import task_env
from ..protocol.hostport import format_address, free_port
from ..mesos import MesosSchedulerDriver
from ..mesos.task_states import TERMINAL_STATES
from .recovery import Recovery
from .rendezvous import Rendezvous
from .reactions import RunEvents
from .phase import ENDING, Phase, next_phase
from ..record import schema
from ..record.run_record import RunRecord, default_run_dir
from ..record.usage_table import clean_usage
from .events import StatusUpdate, TaskExited, TaskOutput
from .scheduler import TFMesosScheduler
from .slots import SlotTable
from .spec import AUTO
from .taskinfo import build_task, framework_info, warm_task_command

logger = logging.getLogger(__name__)

# How long stopping waits for tasks to close their rendezvous connections
# after a stop message, so that their last output reaches the run directory.
STOP_LINGER = 1.5


class ClusterRun:
    """One run of ``spec`` (a ``RunSpec``, checked when it was built).

    ``on_log(slot, stream, text)`` receives the output the tasks forward
    (replica mode: every task, unless ``forward_logs(slot)`` says otherwise).
    ``on_progress(run)`` is called about once a second while the cluster
    forms, in the waiting thread. ``notify(text)`` tells the user what
    recovery does (default: a log warning). ``environ`` (default
    ``os.environ``) is where settings not in ``spec`` come from.

    The run's phase (``run_phase.Phase``) changes only here, under the slots'
    lock; the failure policy (``run_events``, ``recovery``) acts through the
    ``run_control.RunControl`` methods below, in the thread that handles
    events.
    """

    def __init__(self, spec, *, environ=None, on_log=None, forward_logs=None, on_progress=None,
                 notify=None, warm_runner=None, backend=None):
        self.run = spec
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

        self.slots = SlotTable(self.jobs)
        self.events = queue.Queue()
        self.secret = secrets.token_bytes(32)
        self.run_id = secrets.token_hex(4)
        self.driver = None
        self.rendezvous = None
        self.scheduler = None
        self.spec = None     # the cluster spec once formed: {job: ["host:port", ...]}
        self._phase = Phase.NEW
        self.launch_deadline = None
        self.failure = None
        self._stop_lock = threading.Lock()
        self._watcher = None
        self.record = make_record(spec.run_dir, self, self._environ)  # the run directory
        self.recovery = Recovery(spec.restart_policy, spec.sticky_jobs, spec.sticky_timeout,
                                 notify=notify).bind(self, self.record, spec.max_attempts)
        self.reactions = RunEvents(self, self.record, self.recovery, spec.reconnect_grace,
                                   spec.max_attempts, spec.mode)
        self._chief = None   # the coordinator's address, kept across restarts
        self._say = notify or logger.info
        self.shipment = None  # tfrun --ship: shipping.Shipment, served while the run lasts
        self._keras_coordinator = None   # worker 0's second port (replica mode), per formation

    # -- the phase --------------------------------------------------------------

    @property
    def phase(self):
        return self._phase

    def _move(self, target):
        """Go to phase ``target``; False when the run is stopping (the stop
        wins). ``run_phase.IllegalTransition`` for a move that is a bug."""
        with self.slots.lock:
            moved = next_phase(self._phase, target)
            if moved is None:
                return False
            self._phase = moved
            return True

    # -- start ----------------------------------------------------------------

    def start(self):
        self.record.submitted()
        try:
            self._ship()
            master_url = self.backend.start()
            self.rendezvous = Rendezvous(self.secret, self.events,
                                         bind_host=self.backend.bind_host(), port=0)
            self.scheduler = TFMesosScheduler(self.slots, self._make_task, self.events,
                                              self.run_id, on_launch=self._launching,
                                              extra_ports=self._extra_ports)
            info, options = framework_info(self.run, self.jobs), self.run.driver_options()
            if self.backend.credentials is not None:   # e.g. the embedded master's, for this run
                info["principal"], options["secret"] = self.backend.credentials
                options["principal"] = info["principal"]
            self.driver = MesosSchedulerDriver(self.scheduler, info, master_url,
                                               connect_timeout=self.run.connect_timeout,
                                               refused_timeout=self.run.refused_timeout,
                                               **options)
            self.launch_deadline = time.monotonic() + self.run.launch_timeout
            self._move(Phase.FORMING)
            self.driver.start()
        except BaseException as exc:
            self.record.ended(exc, self.phase)
            self.stop()
            raise
        return self

    def _ship(self):
        """``tfrun --ship``: pack and serve what every task fetches."""
        if self.run.ship is None:
            return
        from ..ship.shipping import Shipment

        self.shipment = Shipment(self.run.ship, self.backend.bind_host(), say=self._say)
        self.record.shipped(self.shipment.record())

    @property
    def local_master(self):
        """The embedded master of this run (``mesos_local.LocalMaster``), or None."""
        return getattr(self.backend, "master", None)

    def _advertised_address(self):
        return self.backend.advertised_address(self.driver.master or self.master)

    def _launching(self, launches):
        """The scheduler is about to launch ``launches``: the rendezvous must
        expect each task before Mesos can start it (the driver's thread,
        outside the scheduler's lock)."""
        for launch in launches:
            self.rendezvous.expect(launch.task_id)
            self.record.launched(launch)

    def _extra_ports(self, slot):
        """Replica mode: worker 0 takes a second port from its offer, for the
        coordinator of Keras' ``keras.distribution`` (``clusterspec``)."""
        return 1 if self.mode == "replica" and slot.job.name == KERAS_JOB \
            and slot.index == slot.job.start else 0

    def _make_task(self, slot, assignment):
        """The scheduler's ``make_task``: the TaskInfo, nothing else."""
        host = self._advertised_address()
        rendezvous = format_address(host, self.rendezvous.port)
        return build_task(self.run, slot, assignment, rendezvous, self.secret,
                          quiet_tensorflow=self.run.quiet_tensorflow, run_id=self.run_id,
                          shipment=self.shipment, ship_host=host)

    # -- waiting --------------------------------------------------------------

    def wait_ready(self):
        """Block until every task registered, then hand out roles. Returns
        the cluster spec ``{job: ["host:port", ...]}``."""
        with self.record.recording(lambda: self.phase):
            self._form()
        return self.spec

    def _form(self):
        """Wait until every task registered (or the run stops), then publish."""
        while any(slot.address is None for slot in self.slots):
            if self.phase != Phase.FORMING:
                return
            remaining = self.launch_deadline - time.monotonic()
            if remaining <= 0:
                raise LaunchTimeout(self.scheduler.missing_message(
                    self.run.launch_timeout, self.driver.master or self.master))
            self._next_event(min(remaining, 1.0))
            self._on_progress(self)
        addresses = {slot.key: slot.address for slot in self.slots}
        if self.coordinator:
            if self._chief is None:
                host = self._advertised_address()
                self._chief = format_address(host, free_port(host))
            addresses[("chief", 0)] = self._chief
        self.spec = cluster_spec(addresses)
        ports = [s.extra_ports[0] for s in self.slots if self._extra_ports(s) and s.extra_ports]
        self._keras_coordinator = keras_coordinator(self.spec, ports[0] if ports else None)
        for slot in self.slots:
            self.publish_to(slot)
        if not self._move(Phase.RUNNING):
            return
        self.record.all_registered(self.scheduler.framework_id)
        self.recovery.formed(self.spec)

    def publish_to(self, slot):
        """Send ``slot`` its start message: its role and the cluster spec."""
        message = {"type": "start", "mode": self.mode, "job": slot.job.name,
                   "index": slot.index, "cluster": self.spec,
                   "forward_logs": bool(self._forward_logs(slot))}
        if self.mode == "replica":
            template = slot.job.cmd or self.command
            env = task_environment(self.spec, slot.job.name, slot.index,
                                   self._keras_coordinator)
            env[task_env.RESTART] = str(self.recovery.restarts)
            # PYTHONUNBUFFERED comes with the TaskInfo's environment.
            message.update(cmd=render_command(template, self.spec, slot.job.name, slot.index),
                           env=env, hooks=self.run.hook_commands,
                           # a container has its own filesystem, a shipped directory
                           # is the task's working directory: stay there
                           cwd=None if self.run.image or self._ships_code() else os.getcwd())
        if not self.rendezvous.send(slot.task_id, message):
            # Kept by the rendezvous: a task that re-registers gets it;
            # one that does not come back fails after the grace period.
            logger.info("%s is reconnecting; it gets its role when it is back", slot.name)

    def _ships_code(self):
        return self.run.ship is not None and self.run.ship.directory is not None

    def wait_finished(self):
        """Replica mode: block until the run's trainers are done; returns 0,
        raises ``TaskFailed`` (with ``exit_code``) when a task fails."""
        with self.record.recording(lambda: self.phase):
            while not self._trainers_done():
                if self.phase == Phase.FORMING:   # a whole restart
                    self._form()
                self._next_event(1.0)
        self.record.outcome("succeeded")
        return 0

    def _trainers(self):
        names = {job.name for job in self.jobs}
        return [s for s in self.slots if s.job.name == ("chief" if "chief" in names else "worker")]

    def _trainers_done(self):
        trainers = self._trainers()
        return bool(trainers) and all(slot.done for slot in trainers)

    def watch(self):
        """Fine-grained mode: watch for failures in a background thread;
        ``failure`` holds the first one (none once the run stops)."""
        def loop():
            try:
                while self.phase in (Phase.RUNNING, Phase.RESTARTING, Phase.FORMING):
                    if self.phase == Phase.FORMING:   # a whole restart
                        self._form()
                    self._next_event(0.5)
            except TFMesosError as exc:
                self._watch_failed(exc)
        self._watcher = threading.Thread(target=loop, name="tfmesos-watch", daemon=True)
        self._watcher.start()

    def _watch_failed(self, error):
        with self.slots.lock:
            if self._phase in ENDING:
                return   # the stop came first: nothing failed
            self.failure = error
        self.record.ended(error, Phase.RUNNING)
        logger.error("%s", error)

    # -- events ---------------------------------------------------------------

    def _next_event(self, timeout):
        try:
            event = self.events.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            event = None
        if event is not None:
            self.reactions.handle(event)
        self.record.flush()
        self.reactions.tick()
        self.recovery.tick()

    # -- what the failure policy may do (run_control.RunControl) ---------------

    def now(self):
        return time.monotonic()

    def relaunch(self, *slots):
        self.scheduler.relaunch(self.driver, *slots)

    def end_task(self, slot):
        if slot.task_id is None:
            return
        self.rendezvous.send(slot.task_id, {"type": "stop"})
        self.forget_task(slot.task_id)
        self.reactions.forget(slot.task_id)
        if slot.state not in TERMINAL_STATES and slot.state != "PENDING":
            self.kill(slot.task_id, slot.agent_id)

    def forget_task(self, task_id):
        """The rendezvous stops expecting ``task_id``."""
        self.rendezvous.forget(task_id)

    def restart_cluster(self):
        if not self._move(Phase.RESTARTING):
            return False
        for slot in self.slots:
            self.end_task(slot)
        return True

    def relaunch_cluster(self):
        if not self._move(Phase.FORMING):
            return False
        self.slots.reset()
        self.launch_deadline = time.monotonic() + self.run.launch_timeout
        self.scheduler.relaunch(self.driver, *self.slots)
        return True

    def fail(self, error):
        if self.phase in ENDING:
            logger.info("after the stop: %s", error)
            return
        raise error

    def show(self, slot, stream, text):
        self.on_log(slot, stream, text)

    def kill(self, task_id, agent_id):
        try:
            self.driver.killTask({"value": task_id}, agent_id and {"value": agent_id})
        except MesosError as exc:
            logger.warning("could not kill %s: %s", task_id, exc)

    def reconcile(self):
        if self.driver is not None and self.driver.connected:
            self.scheduler.reconcile(self.driver)

    # -- stop -----------------------------------------------------------------

    def stop(self):
        """Stop every task and the framework; safe to call more than once,
        from any thread. Once it began, no failure or restart undoes it."""
        with self._stop_lock:
            with self.slots.lock:
                was_running = self._phase == Phase.RUNNING
                if not self._move(Phase.STOPPING):
                    return
            if self.scheduler is not None:
                self.scheduler.close()
            if self.rendezvous is not None:
                for slot in self.slots:
                    if slot.task_id:
                        self.rendezvous.send(slot.task_id, {"type": "stop"})
                self.rendezvous.close(linger=STOP_LINGER)
            if self.driver is not None:
                try:
                    self.driver.stop()
                except MesosError as exc:
                    logger.warning("could not tear the framework down: %s", exc)
                try:
                    self.driver.join(timeout=15)
                except Exception as exc:  # the run's own error was already raised
                    logger.debug("driver ended with %r", exc)
            # Output, exit frames and updates still queued (the teardown's included).
            record_leftovers(self.record, self.events)
            self.backend.stop()
            if self.shipment is not None:
                self.shipment.stop()     # nothing is served after the run
            self._move(Phase.STOPPED)
            self.record.finish(self.scheduler and self.scheduler.framework_id,
                               self.scheduler and self.scheduler.first_offer_at,
                               "succeeded" if was_running else "aborted")
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5)


def make_backend(spec, environ, warm_runner=None):
    """Where the run of ``spec`` goes: the embedded master (``--master
    local``; ``warm_runner``, started by tfrun, else one started here), or
    the remote master ``spec.master``."""
    from ..backends.embedded import EmbeddedMaster
    from ..backends.remote import RemoteMaster
    from ..backends.warm_runner import start_warm_runner

    if spec.master != config.LOCAL:
        if warm_runner is not None:
            warm_runner.close()
        return RemoteMaster(spec.master, spec.advertise_address, environ)
    if warm_runner is None:
        warm_runner = start_warm_runner(warm_task_command(spec))
    return EmbeddedMaster(spec.jobs, containers=bool(spec.image),
                          options=spec.local_master_options, advertise=spec.advertise_address,
                          environ=environ, runner=warm_runner)


def make_record(run_dir, run, environ):
    """The record of ClusterRun ``run``: in ``run_dir`` (``AUTO``: the
    default directory), or in memory only (None)."""
    if run_dir == AUTO:
        run_dir = default_run_dir(run.run.name, run.run_id, environ)
    header = schema.RunFile(
        run_id=run.run_id, name=run.run.name, mode=run.mode, master=run.master,
        command=run.command if run.mode == "replica" else None,
        jobs=[schema.Job(name=j.name, num=j.num, start=j.start, cpus=j.cpus, mem=j.mem,
                         gpus=j.gpus) for j in run.jobs])
    return RunRecord(run_dir, header, run.slots, forwarding=run.mode == "replica")


def record_leftovers(record, events):
    """What is still queued when the run stops is recorded too: output,
    exit frames (with what the stopped tasks used), Mesos' updates."""
    while True:
        try:
            event = events.get_nowait()
        except queue.Empty:
            return
        if isinstance(event, TaskOutput):
            record.output(event.task_id, event.stream, event.text)
        elif isinstance(event, TaskExited):
            record.exited(event.task_id, event.code, event.at, clean_usage(event.usage))
        elif isinstance(event, StatusUpdate):
            record.status(event.status)
