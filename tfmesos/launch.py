"""Bringing a tfmesos cluster up, watching it, and tearing it down.

``ClusterRun`` composes the layers: the master (a real one, or the embedded
local master), the driver, the scheduler and the rendezvous. It owns the
failure policy of ARCHITECTURE.md: relaunch tasks that fail before the
cluster is complete, abort after ``max_attempts`` or ``launch_timeout``;
once running, a task that fails fails the run. All decisions happen in the
thread that calls ``wait_ready`` / ``wait_finished`` / ``watch``.
"""

import getpass
import json
import logging
import os
import queue
import random
import re
import secrets
import socket
import threading
import time
import urllib.request

from . import config
from .exceptions import (ClusterError, LaunchTimeout, MesosError, SpecError, TaskFailed,
                         TFMesosError)
from .mesos import MesosSchedulerDriver
from .rendezvous import Rendezvous
from .scheduler import TERMINAL_STATES, TFMesosScheduler, make_slots
from .spec import RunSpec
from .taskinfo import build_task_info, container_info, submitter_pythonpath, task_command
from .tfconfig import cluster_spec, render_command, task_environment

logger = logging.getLogger(__name__)

FAILOVER_TIMEOUT = 60.0
_EXIT_STATUS = re.compile(r"exited with status (\d+)")


def exit_code_of(status_message):
    """The exit code in Mesos' "Command exited with status N", or None."""
    match = _EXIT_STATUS.search(status_message or "")
    return int(match.group(1)) if match else None


def format_address(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


class ClusterRun:
    """One run of ``jobs`` in ``mode`` "fine" (TensorFlow servers) or
    "replica" (``command`` in every task).

    ``on_log(slot, stream, text)`` receives forwarded output of the tasks for
    which ``forward_logs(slot)`` is true (replica mode).
    """

    def __init__(self, jobs, run=None, mode="fine", command=None, master=None,
                 advertise_address=None, environ=None, on_log=None, forward_logs=None,
                 hooks=None, connect_timeout=60.0, local_master_options=None,
                 coordinator=False):
        self.jobs = list(jobs)
        self.run = run or RunSpec()
        self.mode = mode
        self.command = command
        self._environ = dict(os.environ if environ is None else environ)
        self.master = config.resolve_master(master, self._environ)
        self._advertise = advertise_address
        self._on_log = on_log or (lambda slot, stream, text: None)
        self._forward_logs = forward_logs or (lambda slot: False)
        self._hooks = hooks or {}
        self._connect_timeout = connect_timeout
        self._local_options = local_master_options or {}
        self.coordinator = coordinator  # reserve chief:0 for the calling process
        if coordinator and any(job.name == "chief" for job in self.jobs):
            raise SpecError("coordinator=True makes the calling process the chief; "
                            "drop the 'chief' job or the coordinator option")

        self.slots = make_slots(self.jobs)
        self.events = queue.Queue()
        self.secret = secrets.token_bytes(32)
        self.run_id = secrets.token_hex(4)
        self.local_master = None
        self.driver = None
        self.rendezvous = None
        self.scheduler = None
        self.spec = None
        self.phase = "new"   # new -> launching -> running -> stopping
        self.failure = None
        self._containerizer = None
        self._advertised = None
        self._stop_lock = threading.Lock()
        self._watcher = None

    # -- start ----------------------------------------------------------------

    def start(self):
        try:
            master_url = self._start_master()
            self.rendezvous = Rendezvous(self.secret, self.events,
                                         bind_host=self._bind_host(), port=0)
            self.scheduler = TFMesosScheduler(self.slots, self._build_task, self.events,
                                              self.run_id)
            self.driver = MesosSchedulerDriver(self.scheduler, self._framework_info(), master_url,
                                               connect_timeout=self._connect_timeout)
            self.phase = "launching"
            self._deadline = time.monotonic() + self.run.launch_timeout
            self.driver.start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_master(self):
        if self.master != config.LOCAL:
            return self.master
        from .mesos.local import LocalMaster

        options = dict(self._local_options)
        if self.run.image and "container_runner" not in options:
            from .mesos.local.docker_runner import DockerRunner
            options["container_runner"] = DockerRunner()
        if "agents" not in options:
            options["agents"] = [local_agent(self.jobs)]
        self.local_master = LocalMaster(**options)
        return self.local_master.start()

    def _bind_host(self):
        return "127.0.0.1" if self.master == config.LOCAL and not self._advertise else "0.0.0.0"

    def _framework_info(self):
        info = {"user": self.run.user or getpass.getuser(), "name": self.run.name,
                "failover_timeout": FAILOVER_TIMEOUT, "capabilities": []}
        if self.run.role:
            info["roles"] = [self.run.role]
            info["capabilities"].append({"type": "MULTI_ROLE"})
        if any(job.gpus for job in self.jobs):
            info["capabilities"].append({"type": "GPU_RESOURCES"})
        return info

    def _advertised_address(self):
        if self._advertised is None:
            if self.master == config.LOCAL and not self._advertise:
                self._advertised = "127.0.0.1"
            else:
                self._advertised = config.advertise_address(
                    self._advertise, self.driver.master or "", self._environ)
        return self._advertised

    def containerizer(self):
        """MESOS on Mesos >= 1.0 (its own GPU isolation), else DOCKER."""
        if self._containerizer is None:
            self._containerizer = self.run.containerizer or (
                "MESOS" if _master_version(self.driver.master) >= (1, 0) else "DOCKER")
        return self._containerizer

    def _build_task(self, slot, assignment):
        """TaskInfo for ``slot`` placed by ``assignment`` (scheduler callback)."""
        env = dict(self.run.env)
        env.update(slot.job.env)
        env.update({
            "TFMESOS_RENDEZVOUS": format_address(self._advertised_address(), self.rendezvous.port),
            "TFMESOS_SECRET": self.secret.hex(),
            "TFMESOS_TASK_ID": slot.task_id,
            "TFMESOS_OFFER_HOST": assignment.hostname,
            "PYTHONUNBUFFERED": "1",
        })
        if assignment.port:
            env["TFMESOS_PORT"] = str(assignment.port)
        container = None
        if self.run.image:
            container = container_info(self.run, self.containerizer(), assignment.gpu_ids,
                                       slot.job.gpus)
        else:
            env["PYTHONPATH"] = submitter_pythonpath()
        self.rendezvous.expect(slot.task_id)
        return build_task_info(slot.task_id, "%s %s" % (self.run.name, slot.name),
                               assignment.agent_id, assignment.resources,
                               task_command(self.run.image, self.run.python), env, container,
                               labels={"tfmesos.job": slot.job.name,
                                       "tfmesos.index": slot.index})

    # -- waiting --------------------------------------------------------------

    def wait_ready(self):
        """Block until every task registered, then hand out roles. Returns
        the cluster spec ``{job: ["host:port", ...]}``."""
        while any(slot.address is None for slot in self.slots):
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise LaunchTimeout(self._missing_message())
            self._next_event(min(remaining, 1.0))
        addresses = {slot.key: slot.address for slot in self.slots}
        if self.coordinator:
            addresses[("chief", 0)] = format_address(self._advertised_address(),
                                                     free_port(self._advertised_address()))
        self.spec = cluster_spec(addresses)
        self._publish()
        self.phase = "running"
        return self.spec

    def _publish(self):
        for slot in self.slots:
            message = {"type": "start", "mode": self.mode, "job": slot.job.name,
                       "index": slot.index, "cluster": self.spec,
                       "forward_logs": bool(self._forward_logs(slot))}
            if self.mode == "replica":
                template = slot.job.cmd or self.command
                # PYTHONUNBUFFERED comes with the TaskInfo's environment.
                message.update(cmd=render_command(template, self.spec, slot.job.name, slot.index),
                               env=task_environment(self.spec, slot.job.name, slot.index), hooks=self._hooks,
                               # a container has its own filesystem: stay in the sandbox
                               cwd=None if self.run.image else os.getcwd())
            if not self.rendezvous.send(slot.task_id, message):
                raise ClusterError("task %s went away while the cluster was being formed"
                                   % slot.name)

    def wait_finished(self):
        """Replica mode: block until the run's trainers are done; returns 0,
        raises ``TaskFailed`` (with ``exit_code``) when a task fails."""
        while not self._trainers_done():
            self._next_event(1.0)
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
                while self.phase == "running":
                    self._next_event(0.5)
            except TFMesosError as exc:
                self.failure = exc
                logger.error("%s", exc)
        self._watcher = threading.Thread(target=loop, name="tfmesos-watch", daemon=True)
        self._watcher.start()

    def _next_event(self, timeout):
        try:
            event = self.events.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            return
        source = event[0]
        if source == "mesos":
            self._on_mesos(event[1], event[2])
        elif source == "registered":
            _, task_id, host, port = event
            slot = self.scheduler.slot_of(task_id)
            if slot is not None and slot.task_id == task_id and self.phase == "launching":
                slot.address = format_address(host, port)
                logger.info("%s registered at %s", slot.name, slot.address)
        elif source == "log":
            _, task_id, stream, text = event
            slot = self.scheduler.slot_of(task_id)
            if slot is not None:
                self._on_log(slot, stream, text)
        elif source == "exit":
            _, task_id, code = event
            slot = self.scheduler.slot_of(task_id)
            if slot is not None and slot.task_id == task_id:
                self._on_exit(slot, code)

    def _on_mesos(self, kind, payload):
        if kind == "error":
            raise ClusterError("Mesos: %s" % payload)
        if kind == "status":
            self._on_status(payload)
        elif kind == "disconnected":
            logger.warning("lost the connection to the Mesos master; reconnecting")

    def _on_status(self, status):
        task_id = status.task_id.value
        slot = self.scheduler.slot_of(task_id)
        if slot is None or slot.task_id != task_id or slot.done:
            return
        with self.scheduler.lock:
            slot.state = status.state
            slot.message = status.get("message", "")
        if status.state not in TERMINAL_STATES or self.phase not in ("launching", "running"):
            return
        self.rendezvous.forget(task_id)
        code = exit_code_of(slot.message)
        if self.phase == "launching":
            if slot.attempts < self.run.max_attempts:
                logger.warning("%s ended before the cluster was complete: %s; relaunching "
                               "(attempt %d of %d)", slot.name, slot.describe(),
                               slot.attempts + 1, self.run.max_attempts)
                self.scheduler.relaunch(self.driver, slot)
                return
            raise TaskFailed("%s failed %d times before the cluster was complete; last: %s: %s"
                             % (slot.name, slot.attempts, status.state, slot.message or
                                "no message from Mesos"), slot.name, status.state, code)
        if status.state == "TASK_FINISHED":
            self._on_exit(slot, 0 if slot.exit_code is None else slot.exit_code)
        else:
            self._on_exit(slot, slot.exit_code if slot.exit_code is not None else code,
                          status.state)

    def _on_exit(self, slot, code, state=None):
        """A task's command ended (replica) or its server did (fine)."""
        slot.exit_code = code
        if self.phase != "running":
            return
        if self.mode == "replica" and code == 0:
            slot.done = True
            return
        if code is None:
            what = "ended: %s %s" % (state, slot.message) if state else "ended"
        else:
            what = "exited with code %d" % code
            if state:
                what += " (%s: %s)" % (state, slot.message)
        raise TaskFailed("task %s %s" % (slot.name, what), slot.name, state, code)

    def _missing_message(self):
        missing = [slot for slot in self.slots if slot.address is None]
        parts = []
        for slot in missing:
            if slot.state == "PENDING" and slot.attempts == 0:
                parts.append("%s (no offer fits cpus=%g mem=%g gpus=%d)"
                             % (slot.name, slot.job.cpus, slot.job.mem, slot.job.gpus))
            else:
                parts.append(slot.describe())
        text = "the cluster was not complete after %.0f s; missing: %s" % (
            self.run.launch_timeout, ", ".join(parts))
        largest = self.scheduler.largest_offer if self.scheduler else None
        if largest:
            text += "; largest offer seen: cpus=%g mem=%g gpus=%d on %s" % (
                largest["cpus"], largest["mem"], largest["gpus"], largest["agent"])
        elif self.scheduler is not None:
            text += "; no offer received from %s" % (self.driver.master or self.master)
        return text

    # -- stop -----------------------------------------------------------------

    def stop(self):
        """Stop every task and the framework; safe to call more than once."""
        with self._stop_lock:
            if self.phase == "stopped":
                return
            self.phase = "stopping"
            if self.rendezvous is not None:
                for slot in self.slots:
                    if slot.task_id:
                        self.rendezvous.send(slot.task_id, {"type": "stop"})
                self.rendezvous.close()
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
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5)


def local_agent(jobs):
    """The embedded master's one agent, sized so the whole cluster fits.

    CPUs and memory are not enforced on one machine, so a cluster asking for
    more than there is gets it (with a note); what can never work — a task
    larger than the machine's memory, more GPUs than it has — is an error
    now rather than a launch timeout later."""
    from .mesos.local import AgentSpec

    machine_cpus, machine_mem, _, _, gpu_ids = AgentSpec().resolve(os.getcwd())
    for job in jobs:
        if job.mem > machine_mem:
            raise SpecError("%s tasks ask for mem=%.0f MB but this machine has %.0f MB for the "
                            "embedded master: ask for less, or run on a Mesos cluster (-m)"
                            % (job.name, job.mem, machine_mem))
    need_gpus = sum(job.gpus * job.num for job in jobs)
    if need_gpus > len(gpu_ids):
        raise SpecError("the cluster asks for %d GPUs but this machine has %d (nvidia-smi -L): "
                        "ask for fewer, or run on a Mesos cluster (-m)" % (need_gpus, len(gpu_ids)))
    cpus = max(machine_cpus, sum(job.cpus * job.num for job in jobs))
    mem = max(machine_mem, sum(job.mem * job.num for job in jobs))
    if (cpus, mem) != (machine_cpus, machine_mem):
        logger.info("embedded master: offering cpus=%g mem=%g (the machine has cpus=%g "
                    "mem=%g) so the whole cluster fits", cpus, mem, machine_cpus, machine_mem)
    return AgentSpec(cpus=cpus, mem=mem, gpus=list(gpu_ids), ports=(local_port_window(),))


def local_port_window(size=100):
    """A random window of ports below Linux's ephemeral range, so that two
    runs on one machine rarely offer the same ports (each embedded master
    knows only its own tasks)."""
    base = 20000 + size * random.randrange((31000 - 20000) // size)
    return (base, base + size - 1)


def free_port(host):
    """A port that is free on ``host`` now (for the caller's own server)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _master_version(master_url):
    try:
        with urllib.request.urlopen(master_url.rstrip("/") + "/version", timeout=5) as response:
            version = json.load(response).get("version", "0")
        return tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    except (OSError, ValueError, AttributeError):
        return (1, 0)  # no /version endpoint: assume a current Mesos
