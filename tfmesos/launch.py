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
from .clusterspec import cluster_spec, render_command, task_environment
from .exceptions import LaunchTimeout, MesosError, SpecError, TFMesosError
from .hostport import format_address, free_port
from .mesos import MesosSchedulerDriver
from .mesos.master_address import parse_master
from .mesos.task_states import TERMINAL_STATES
from .recovery import Recovery
from .run_events import RunEvents
from .rendezvous import Rendezvous
from .run_record import make_record
from .scheduler import TFMesosScheduler, make_slots
from .spec import RunSpec, check_run
from .taskinfo import build_task, framework_info

logger = logging.getLogger(__name__)

# How long a running task may stay away from the rendezvous (its side
# reconnects for as long) before it counts as failed.
# How long stopping waits for tasks to close their rendezvous connections
# after a stop message, so that their last output reaches the run directory.
STOP_LINGER = 1.5
RECONNECT_GRACE = 40.0   # the task side retries for 30 s (task_connection)


class ClusterRun:
    """One run of ``jobs`` in ``mode`` "fine" (TensorFlow servers) or
    "replica" (``command`` in every task).

    ``on_log(slot, stream, text)`` receives the output the tasks forward
    (replica mode: every task, unless ``forward_logs(slot)`` says otherwise).
    ``run_dir``: the run directory (``run_record.AUTO``: the default one;
    None: none). ``on_progress(run)`` is called about once a second while
    the cluster forms, in the waiting thread. ``recovery``: a
    ``tfmesos.recovery.Recovery`` (default: no restarts, no sticky relaunch).
    """

    def __init__(self, jobs, run=None, mode="fine", command=None, master=None,
                 advertise_address=None, environ=None, on_log=None, forward_logs=None,
                 hooks=None, connect_timeout=60.0, local_master_options=None,
                 coordinator=False, reconnect_grace=RECONNECT_GRACE, driver_options=None,
                 run_dir=None, on_progress=None, recovery=None, quiet_tensorflow=True):
        self.jobs = list(jobs)
        self.run = run or RunSpec()
        self._quiet_tensorflow = quiet_tensorflow   # False: TensorFlow logs as it likes (-v)
        self.mode = mode
        self.command = command
        self._environ = dict(os.environ if environ is None else environ)
        self.master = config.resolve_master(master, self._environ)
        self._advertise = advertise_address
        self.on_log = on_log or (lambda slot, stream, text: None)
        self._forward_logs = forward_logs or (lambda slot: True)
        self._on_progress = on_progress or (lambda run: None)
        self._hooks = hooks or {}
        self._connect_timeout = connect_timeout
        self._local_options = local_master_options or {}
        # MesosSchedulerDriver's TLS and zk:// settings: verify, ca_bundle, scheme
        self._driver_options = driver_options or {}
        self.coordinator = coordinator  # reserve chief:0 for the calling process
        if coordinator and any(job.name == "chief" for job in self.jobs):
            raise SpecError("coordinator=True makes the calling process the chief; "
                            "drop the 'chief' job or the coordinator option")
        check_run(self.run, self.jobs)

        self.slots = make_slots(self.jobs)
        self.events = queue.Queue()
        self.secret = secrets.token_bytes(32)
        self.run_id = secrets.token_hex(4)
        self.local_master = None
        self.driver = None
        self.rendezvous = None
        self.scheduler = None
        self.spec = None
        self.phase = "new"   # new -> launching -> running -> stopping -> stopped
        self.failure = None
        self._advertised = None
        self._credentials = None
        self._stop_lock = threading.Lock()
        self._watcher = None
        self.reactions = RunEvents(self, reconnect_grace)
        self.record = make_record(run_dir, self, self._environ)  # the run directory
        self.recovery = (recovery or Recovery()).bind(self)
        self._chief = None   # the coordinator's address, kept across restarts

    # -- start ----------------------------------------------------------------

    def start(self):
        self.record.submitted()
        try:
            master_url = self._start_master()
            if self.local_master is None and not master_url.lower().startswith("zk://"):
                # Refuse a loopback address for a remote master before any
                # task launches (zk://: once the leader is known).
                self._advertised_address(parse_master(master_url).urls[0])
            self.rendezvous = Rendezvous(self.secret, self.events,
                                         bind_host=self._bind_host(), port=0)
            self.scheduler = TFMesosScheduler(self.slots, self._task_info, self.events,
                                              self.run_id)
            info, options = framework_info(self.run, self.jobs), dict(self._driver_options)
            if self._credentials is not None:   # the embedded master's, for this run only
                info["principal"], options["secret"] = self._credentials
                options["principal"] = info["principal"]
            self.driver = MesosSchedulerDriver(self.scheduler, info, master_url,
                                               connect_timeout=self._connect_timeout, **options)
            self.phase = "launching"
            self.launch_deadline = time.monotonic() + self.run.launch_timeout
            self.driver.start()
        except BaseException as exc:
            self.record.ended(exc, self.phase)
            self.stop()
            raise
        return self

    def _start_master(self):
        if self.master != config.LOCAL:
            return self.master
        from .mesos.local.sizing import start_local_master

        self.local_master, url, self._credentials = start_local_master(
            self.jobs, containers=bool(self.run.image), **self._local_options)
        return url

    def _bind_host(self):
        """Loopback for the embedded master's own tasks, else every address."""
        return "127.0.0.1" if self.master == config.LOCAL and not self._advertise else None

    def _advertised_address(self, master_url=None):
        if self._advertised is None:
            if self.master == config.LOCAL and not self._advertise:
                self._advertised = "127.0.0.1"
            else:
                self._advertised = config.advertise_address(
                    self._advertise, master_url or self.driver.master or "", self._environ)
        return self._advertised

    def _task_info(self, slot, assignment):
        """The scheduler's ``build_task``. The rendezvous must expect the task
        before Mesos can start it."""
        self.rendezvous.expect(slot.task_id)
        self.record.launched(slot, assignment)
        rendezvous = format_address(self._advertised_address(), self.rendezvous.port)
        return build_task(self.run, slot, assignment, rendezvous, self.secret,
                          quiet_tensorflow=self._quiet_tensorflow, run_id=self.run_id)

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
            if self.phase != "launching":
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
        for slot in self.slots:
            self.publish_to(slot)
        self.phase = "running"
        self.record.all_registered(self.scheduler.framework_id)
        self.recovery.formed(self.spec)

    def publish_to(self, slot):
        """Send ``slot`` its start message: its role and the cluster spec."""
        message = {"type": "start", "mode": self.mode, "job": slot.job.name,
                   "index": slot.index, "cluster": self.spec,
                   "forward_logs": bool(self._forward_logs(slot))}
        if self.mode == "replica":
            template = slot.job.cmd or self.command
            env = task_environment(self.spec, slot.job.name, slot.index)
            env["TFMESOS_RESTART"] = str(self.recovery.restarts)
            # PYTHONUNBUFFERED comes with the TaskInfo's environment.
            message.update(cmd=render_command(template, self.spec, slot.job.name, slot.index),
                           env=env, hooks=self._hooks,
                           # a container has its own filesystem: stay in the sandbox
                           cwd=None if self.run.image else os.getcwd())
        if not self.rendezvous.send(slot.task_id, message):
            # Kept by the rendezvous: a task that re-registers gets it;
            # one that does not come back fails after the grace period.
            logger.info("%s is reconnecting; it gets its role when it is back", slot.name)

    def wait_finished(self):
        """Replica mode: block until the run's trainers are done; returns 0,
        raises ``TaskFailed`` (with ``exit_code``) when a task fails."""
        with self.record.recording(lambda: self.phase):
            while not self._trainers_done():
                if self.phase == "launching":   # a whole restart
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
        ``failure`` holds the first one."""
        def loop():
            try:
                while self.phase in ("running", "restarting", "launching"):
                    if self.phase == "launching":   # a whole restart
                        self._form()
                    self._next_event(0.5)
            except TFMesosError as exc:
                self.failure = exc
                self.record.ended(exc, "running")
                logger.error("%s", exc)
        self._watcher = threading.Thread(target=loop, name="tfmesos-watch", daemon=True)
        self._watcher.start()

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

    # -- recovery (``tfmesos.recovery`` decides and relaunches) ----------------

    def end_task(self, slot):
        """Stop ``slot``'s current attempt: a stop message, and a kill
        unless Mesos reported its end."""
        if slot.task_id is None:
            return
        self.rendezvous.send(slot.task_id, {"type": "stop"})
        self.rendezvous.forget(slot.task_id)
        self.reactions.forget(slot.task_id)
        if slot.state not in TERMINAL_STATES and slot.state != "PENDING":
            self.reactions.kill(slot.task_id, slot.agent_id)

    def stop_tasks(self):
        """A whole restart begins: every task of this attempt stops."""
        self.phase = "restarting"
        for slot in self.slots:
            self.end_task(slot)

    # -- stop -----------------------------------------------------------------

    def stop(self):
        """Stop every task and the framework; safe to call more than once."""
        with self._stop_lock:
            if self.phase == "stopped":
                return
            was_running, self.phase = self.phase == "running", "stopping"
            if self.scheduler is not None:
                self.scheduler.close()
            if self.rendezvous is not None:
                for slot in self.slots:
                    if slot.task_id:
                        self.rendezvous.send(slot.task_id, {"type": "stop"})
                self.rendezvous.close(linger=STOP_LINGER)
                self.record.drain(self.events)
            if self.driver is not None:
                try:
                    self.driver.stop()
                except MesosError as exc:
                    logger.warning("could not tear the framework down: %s", exc)
                try:
                    self.driver.join(timeout=15)
                except Exception as exc:  # the run's own error was already raised
                    logger.debug("driver ended with %r", exc)
            if self.local_master is not None:
                self.local_master.stop()
            self.phase = "stopped"
            self.record.finish(self.scheduler and self.scheduler.framework_id,
                               self.scheduler and self.scheduler.first_offer_at,
                               "succeeded" if was_running else "aborted")
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5)
