"""What a run runs on: where its master lives (a backend), the files it
ships, its rendezvous, its scheduler and its Mesos driver; made by
``start``, ended once by ``stop`` (the tasks are told to stop, the
framework is torn down) or ``leave`` (the tasks are left to a scheduler
that takes the run over: no stop message, no teardown).

``RunRuntime`` knows how to reach the tasks and Mesos; it decides nothing:
``launch.ClusterRun`` (the state, the failure policy and the waiting loop)
tells it what to do, and everything the runtime's parts learn goes on the
run's event queue, handled in the thread that waits.
"""

import logging
import os
import queue
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

from ..backends import Backend
from ..exceptions import MesosError, TFMesosError
from ..mesos import MesosSchedulerDriver
from ..mesos.immutable import adopt_held
from ..protocol import labels as labels_
from ..protocol import task_env
from ..protocol.hostport import format_address
from . import task_secrets
from .fit import Agent, agents_of
from .identity import RunIdentity
from .last_updates import Show, record_leftovers, wait_for_mesos_ends
from .placement import Assignment
from .rendezvous import Rendezvous
from .sandbox_tails import SandboxTails
from .scheduler import Launch, TFMesosScheduler
from .slots import SlotTable, TaskSlot
from .spec import RunSpec
from .taskinfo import build_task, failover_environment, framework_info

if TYPE_CHECKING:   # annotations only: these come when a run needs them, or never
    from mesos_local import LocalMaster

    from ..mesos.master_reads import MasterReader
    from ..mesos.transport import Transport
    from ..record.run_record import RunRecord
    from ..ship.shipping import Shipment

logger = logging.getLogger(__name__)

# How long stopping waits for tasks to close their rendezvous connections
# after a stop message, so that their last output reaches the run directory.
STOP_LINGER = 1.5
# How long a takeover waits to read how the master registered the framework.
HELD_READ_TIMEOUT = 10.0


class Parts(NamedTuple):
    """What ``RunRuntime.start`` made."""

    rendezvous: Rendezvous
    scheduler: TFMesosScheduler
    driver: MesosSchedulerDriver


class RunRuntime:
    """The moving parts of one run of ``spec`` as ``identity``.

    ``events``: the run's queue (the rendezvous, the scheduler and the
    driver put what they learn there); ``environ``: where settings outside
    the spec come from (the remote master's credentials, the advertised
    address, the values of ``spec.secret_env``); ``backend``: where the
    master lives (``run_setup.make_backend``); ``transport`` (the driver's;
    tests: ``mesos.mock_transport``),
    ``shipment`` (files packed before: served as they are), ``detached``
    (this is a detached run's scheduler task); ``workdir``: where the plain
    (not shipped, image-less) tasks run and the project is when nothing is
    shipped (default: the current directory, now)."""

    def __init__(self, spec: RunSpec, identity: RunIdentity, events: "queue.SimpleQueue[object]",
                 environ: Mapping[str, str], *, backend: Backend,
                 transport: Optional["Transport"] = None, shipment: Optional["Shipment"] = None,
                 detached: bool = False, workdir: Optional[str] = None) -> None:
        self.spec: RunSpec = spec
        self.workdir: str = workdir if workdir is not None else os.getcwd()
        self.identity: RunIdentity = identity   # with its framework, its shipment once known
        self.events: queue.SimpleQueue[object] = events
        self._environ: Mapping[str, str] = environ
        # The values of spec.secret_env, from environ (SpecError naming one not
        # set): they go to the tasks as Mesos secrets and nowhere else.
        self.secrets: dict[str, str] = task_secrets.values(spec, environ)
        self.backend: Backend = backend
        self._transport: Optional[Transport] = transport
        self.shipment: Optional[Shipment] = shipment
        self.detached: bool = detached
        self.rendezvous: Optional[Rendezvous] = None
        self.scheduler: Optional[TFMesosScheduler] = None
        self.driver: Optional[MesosSchedulerDriver] = None
        self.lock: threading.Lock = threading.Lock()   # one stop or leave
        # What a task that never reached the rendezvous wrote in its sandbox,
        # read from its agent with the master's credentials.
        self.sandboxes: SandboxTails = SandboxTails(
            lambda: self.identity.framework_id, credentials=lambda: self.backend.credentials,
            master_url=lambda: self.driver.master if self.driver else None,
            tls=(spec.verify, spec.ca_bundle))

    # -- start ----------------------------------------------------------------

    def ship(self, run_dir: Optional[str] = None, say: Callable[[str], None] = logger.info,
             keep_in: Optional[str] = None) -> Optional[dict[str, Any]]:
        """``--ship``: pack and serve what every task fetches (unless files
        packed before were given); run.json's ``shipped``, or None. Run
        directories are never packed: this run's (``run_dir``), and where
        runs go (``$TFMESOS_RUNS_DIR`` of the run's environ). ``keep_in``:
        pack there, for a scheduler that takes the run over (``leave`` keeps
        it, ``stop`` removes it), not in a temporary directory."""
        if self.spec.ship is None or self.shipment is not None:
            return None
        from ..ship.shipping import Shipment

        # The server binds the advertised address: a wrong one is named first.
        self.backend.check()
        leave_out = tuple(path for path in (run_dir, self._environ.get("TFMESOS_RUNS_DIR"))
                          if path)
        self.shipment = Shipment(self.spec.ship, self.backend.bind_host(), say=say,
                                 leave_out=leave_out, keep_in=keep_in)
        self.identity = self.identity.with_shipment(
            self.shipment.bundle.sha256 if self.shipment.bundle is not None else None,
            self.shipment.task_side.sha256, self.shipment.env_sha256)
        return self.shipment.record()

    def start_master(self) -> str:
        """Make the master reachable; its URL as given."""
        return self.backend.start()

    def start(self, master_url: str, slots: SlotTable, on_launch: Callable[[list[Launch]], None],
              extra_ports: Callable[[TaskSlot], int], expected: tuple[str, ...] = ()) -> Parts:
        """Listen, subscribe and start placing ``slots``: the rendezvous
        expects ``expected`` task ids at once (attempts taken over)."""
        spec = self.spec
        def name_of(task_id: str) -> str:   # worker:1 (attempt 2), as the run says it
            slot = slots.slot_of(task_id)
            return task_id if slot is None else slot.name
        self.rendezvous = Rendezvous(self.identity.key, self.events,
                                     bind_host=self.backend.bind_host(), port=0,
                                     name_of=name_of)
        for task_id in expected:
            self.rendezvous.expect(task_id)
        self.scheduler = TFMesosScheduler(slots, self._make_task, self.events,
                                          self.identity.run_id, on_launch=on_launch,
                                          extra_ports=extra_ports,
                                          after_reports=self.rendezvous.put_after_reports)
        info = framework_info(spec, spec.jobs, self.identity,
                              rendezvous=self.rendezvous_address(master_url),
                              detached=self.detached)
        options = spec.driver_options()
        # The backend's credentials (the embedded master's for this run, or
        # $MESOS_* of the run's environ), else none: never the driver's own
        # fallback to this process's environment, which the identity's
        # principal (and so the framework's proof) would not name.
        credentials = self.backend.credentials
        options["principal"], options["secret"] = credentials or ("", "")
        if credentials is not None:
            info["principal"] = credentials[0]
        if self.identity.framework_id and self._transport is None:
            # A takeover (a test's transport has no master to read): the
            # framework keeps what it registered with, maybe by an older tfmesos.
            info = adopt_held(info, self._reader(HELD_READ_TIMEOUT, master_url))
        self.driver = MesosSchedulerDriver(
            self.scheduler, info, master_url, connect_timeout=spec.connect_timeout,
            refused_timeout=spec.refused_timeout, transport=self._transport, **options)
        self.driver.start()
        return self.parts()

    def parts(self) -> Parts:
        """What ``start`` made; RuntimeError before it did."""
        if self.rendezvous is None or self.scheduler is None or self.driver is None:
            raise RuntimeError("the run has not started")
        return Parts(self.rendezvous, self.scheduler, self.driver)

    @property
    def master_url(self) -> str:
        """The leading master's URL once subscribed, else the master as given."""
        driver = self.driver
        return (driver.master if driver is not None else None) or self.spec.master

    def advertised_address(self) -> str:
        return self.backend.advertised_address(self.master_url)

    def unreachable_from(self, hostname: str) -> Optional[TFMesosError]:
        """Why tasks on the agent at ``hostname`` can never reach this run
        (a loopback address towards a master on this host, the agent on
        another: three attempts of 30 s each failed before), or None."""
        return self.backend.unreachable_from(hostname, self.advertised_address())

    def rendezvous_address(self, master_url: Optional[str] = None) -> str:
        """``host:port`` tasks reach the rendezvous at (towards ``master_url``,
        else the leading master's)."""
        assert self.rendezvous is not None, "the rendezvous listens first"
        return format_address(self.backend.advertised_address(master_url or self.master_url),
                              self.rendezvous.port)

    def rendezvous_label(self) -> Optional[str]:
        """The rendezvous the framework's label names now (None: none)."""
        driver = self.driver
        return None if driver is None else \
            labels_.label_map(dict(driver.framework).get("labels")).get(labels_.RENDEZVOUS)

    def framework_known(self, framework_id: str) -> RunIdentity:
        """The framework is subscribed: the identity has it from now on."""
        self.identity = self.identity.with_framework(framework_id)
        return self.identity

    def _make_task(self, slot: TaskSlot, assignment: Assignment[TaskSlot]) -> dict[str, Any]:
        """The scheduler's ``make_task``: the TaskInfo, nothing else."""
        parts = self.parts()
        host = self.advertised_address()
        return build_task(self.spec, slot, assignment,
                          format_address(host, parts.rendezvous.port), self.identity,
                          quiet_tensorflow=self.spec.quiet_tensorflow, shipment=self.shipment,
                          ship_host=host,
                          failover=failover_environment(self.spec, parts.driver.master,
                                                        parts.scheduler.framework_id),
                          secrets=self.secrets)

    # -- what the run asks of its tasks and Mesos --------------------------------

    def send(self, task_id: Optional[str], message: dict[str, Any]) -> bool:
        """Send to one task; False when it is not connected (now), as a slot
        not launched (no task id) is not."""
        rendezvous = self.parts().rendezvous
        return task_id is not None and rendezvous.send(task_id, message)

    def forget(self, task_id: str) -> None:
        self.parts().rendezvous.forget(task_id)

    def expect(self, launches: "list[Launch]") -> None:
        """The rendezvous expects each of ``launches`` before Mesos can start
        it; where its agent serves its sandbox is noted."""
        for launch in launches:
            self.parts().rendezvous.expect(launch.task_id)
            self.sandboxes.launched(launch)

    def kill(self, task_id: str, agent_id: Optional[str]) -> None:
        try:
            self.parts().driver.killTask({"value": task_id}, agent_id and {"value": agent_id})
        except MesosError as exc:
            logger.warning("could not kill %s: %s", task_id, exc)

    def revive(self) -> None:
        parts = self.parts()
        parts.scheduler.revive(parts.driver)

    def reconcile(self) -> None:
        driver, scheduler = self.driver, self.scheduler
        if driver is not None and scheduler is not None and driver.connected:
            scheduler.reconcile(driver)

    def label(self, key: str, value: str) -> bool:
        """Set the framework's label ``key`` (``UPDATE_FRAMEWORK`` of the
        info the driver subscribes with, which it keeps for every SUBSCRIBE
        after); a finished framework keeps its labels (``tfmesos runs
        --master``). False when it could not be set: not subscribed (the
        master is gone, the driver gave up), or the master said no."""
        return self.set_labels({key: value})

    def set_labels(self, found: Mapping[str, str]) -> bool:
        """Set the framework's labels ``found`` ({key: value}) in one
        ``UPDATE_FRAMEWORK``, as ``label`` sets one."""
        driver = self.driver
        keys = ", ".join(found)
        if driver is None or not driver.connected:
            logger.debug("not subscribed: the framework's labels %s are not set", keys)
            return False
        info = dict(driver.framework)
        kept = [label for label in (info.get("labels") or {}).get("labels", [])
                if label["key"] not in found]
        info["labels"] = {"labels": kept + [{"key": key, "value": value[:1000]}
                                            for key, value in found.items()]}
        try:
            driver.updateFramework(info)
        except MesosError as exc:
            logger.warning("could not label the run's framework (%s): %s", keys, exc)
            return False
        return True

    def agent_totals(self) -> "list[Agent]":
        """The master's agents with the most each can ever offer the run's
        role (``/master/slaves``, read with the run's credentials within 5 s);
        MesosError when it cannot be read."""
        return agents_of(self._reader(5.0).agents(), self.spec.role)

    def _reader(self, timeout: float, master: Optional[str] = None) -> "MasterReader":
        """A reader of ``master`` (default: the run's), with the run's
        credentials and TLS settings, and a zk:// master's password from
        the run's $MESOS_MASTER (the master it was given is masked)."""
        from ..backends.remote import credentials_environ
        from ..mesos.master_reads import MasterReader
        environ = credentials_environ(self.backend.credentials)
        if self._environ.get("MESOS_MASTER"):
            environ["MESOS_MASTER"] = self._environ["MESOS_MASTER"]
        return MasterReader(master or self.master_url, timeout=timeout, environ=environ,
                            verify=self.spec.verify, ca_bundle=self.spec.ca_bundle)

    def outcome_on_master(self) -> Optional[str]:
        """The framework's ``tfmesos.outcome`` label as the master has it
        now (``tfmesos kill`` sets it as it takes the framework over), or
        None: none, or the master cannot be read (within 5 s)."""
        found = self._framework_on_master("outcome")
        return _outcome_label(found[1]) if found is not None else None

    def removed_on_master(self) -> Optional[str]:
        """If the master has removed the framework (it is among its
        completed frameworks: torn down by an operator, ``/master/teardown``,
        or by ``tfmesos kill``), its ``tfmesos.outcome`` label ("" without
        one), read with it; None when it has not or cannot say (within 5 s)."""
        found = self._framework_on_master("state")
        if found is None or found[0] != "completed_frameworks":
            return None
        return _outcome_label(found[1]) or ""

    def _framework_on_master(self, what: str) -> Optional[tuple[str, dict[str, Any]]]:
        """(``frameworks`` or ``completed_frameworks``, the framework's
        JSON) as the master shows it now, or None: not found, or the master
        cannot be read (within 5 s; ``what`` is said then)."""
        framework_id = self.identity.framework_id
        if framework_id is None:
            return None
        try:
            document = self._reader(5.0).frameworks(framework_id)
        except MesosError as exc:
            logger.info("cannot read the framework's %s from the master: %s", what, exc)
            return None
        for key in ("frameworks", "completed_frameworks"):
            found = document.get(key)
            for framework in found if isinstance(found, list) else ():
                if isinstance(framework, dict) and framework.get("id") == framework_id:
                    return key, framework
        return None

    # -- the end ----------------------------------------------------------------

    def stop(self, slots: SlotTable, record: "RunRecord", outcome: Callable[[], Optional[str]],
             show: Show = None) -> None:
        """Launch nothing more, tell every task of ``slots`` to stop (their
        last output reaches ``record``), wait a little for Mesos' last
        updates, label the framework with ``outcome()`` (unless None: the
        text of ``protocol.labels.OUTCOME``, which a finished framework
        keeps: before the teardown, which ends the subscription) and its
        evidence (``reason_line``: ``protocol.labels.REASON``), tear it
        down and stop serving. Output that comes meanwhile is recorded and
        ``show``n (``last_updates.Show``)."""
        scheduler, rendezvous, driver = self._launch_nothing_more()
        if rendezvous is not None:
            for slot in slots:
                if slot.task_id:
                    record.stopping(slot.task_id)
                    rendezvous.send(slot.task_id, {"type": "stop"})
            # A stopped command has its grace (a checkpoint saved on SIGTERM): else
            # the teardown's SIGTERM came 1.5 s in, and its SIGKILL. Ends as the tasks end.
            rendezvous.close(linger=STOP_LINGER + task_env.STOP_GRACE)
        if driver is not None:
            wait_for_mesos_ends(record, self.events, show=show)
            if self.detached:
                # The teardown below makes Mesos kill the framework's tasks,
                # this scheduler's own among them: its record is final first
                # (else a loaded agent could end it with run.json "running").
                record.conclude(scheduler and scheduler.framework_id,
                                scheduler and scheduler.first_offer_at)
            text = outcome()
            if text is not None:
                # With its evidence (tfmesos runs --master, attach print it).
                reason = reason_line(record)
                self.set_labels({labels_.OUTCOME: text, **(
                    {labels_.REASON: reason[:labels_.MAX_REASON]} if reason else {})})
            try:
                driver.stop()
            except MesosError as exc:
                # Left registered (a kill's whole effect, by hand): said once.
                from ..mesos.master_address import without_password
                logger.warning("could not tear the framework down: %s; remove it with: "
                               "tfmesos kill %s --master %s", exc, self.identity.run_id,
                               without_password(self.spec.master or self.master_url))
            try:
                driver.join(timeout=15)
            except Exception as exc:  # the run's own error was already raised
                logger.debug("driver ended with %r", exc)
        self._release(record, show=show)

    def leave(self, record: "RunRecord", keep_shipped: bool = True) -> None:
        """Leave the run to its tasks: no stop message, no teardown (they
        keep running for the framework's failover timeout); what was packed
        stays for the scheduler that carries the run on, unless not
        ``keep_shipped`` (a killed run)."""
        _, rendezvous, driver = self._launch_nothing_more()
        if rendezvous is not None:
            rendezvous.close()
        if driver is not None:
            try:
                driver.stop(failover=True)
                driver.join(timeout=15)
            except Exception as exc:  # leaving: what the driver says changes nothing
                logger.debug("driver ended with %r", exc)
        self._release(record, keep_shipped=keep_shipped)

    def _launch_nothing_more(self) -> tuple[Optional[TFMesosScheduler], Optional[Rendezvous],
                                            Optional[MesosSchedulerDriver]]:
        if self.scheduler is not None:
            self.scheduler.close()
        return self.scheduler, self.rendezvous, self.driver

    def _release(self, record: "RunRecord", keep_shipped: bool = False,
                 show: Show = None) -> None:
        """What is still queued goes to the record (output, exit frames,
        Mesos' updates, the teardown's included); the backend stops, nothing
        is served any more; what was packed goes, unless ``keep_shipped``
        (the run is left to its tasks: the next scheduler serves it)."""
        record_leftovers(record, self.events, show)
        self.backend.stop()
        if self.shipment is not None:
            self.shipment.stop(keep=keep_shipped)

    # -- for readers ----------------------------------------------------------------

    @property
    def local_master(self) -> Optional["LocalMaster"]:
        """The embedded master of this run (``mesos_local.LocalMaster``), or None."""
        from ..backends.embedded import EmbeddedMaster
        return self.backend.master if isinstance(self.backend, EmbeddedMaster) else None

    def project_directory(self) -> str:
        """The user's project: the shipped directory, else where the run began."""
        ship = self.spec.ship
        return ship.directory if ship is not None and ship.directory is not None \
            else self.workdir

    def ships_code(self) -> bool:
        if self.shipment is not None:
            return self.shipment.bundle is not None
        return self.spec.ship is not None and self.spec.ship.directory is not None


def reason_line(record: "RunRecord") -> Optional[str]:
    """One line of evidence for the failed or aborted outcome of
    ``record`` (the framework's ``tfmesos.reason`` label, which ``tfmesos
    runs --master`` and ``attach`` print): the last line the failing task
    wrote on stderr (what it relayed, else its sandbox's tail), as
    ``worker:0: /bin/sh: 1: python: not found``; else the outcome's hint;
    None for any other outcome, or with nothing to say. (At every run's
    end: the outcome alone is read, not the whole record.)"""
    outcome = record.recorded_outcome()
    if outcome.status not in ("failed", "aborted"):
        return None
    lines: list[str] = []
    if outcome.task:
        lines = record.tail(outcome.task, "stderr", 20)
        found = record.last_sandbox_tail(outcome.task)
        if not any(line.strip() for line in lines) and found is not None:
            lines = found[1].stderr
    said = [" ".join(line.split()) for line in lines if line.strip()]
    if said:
        return "%s: %s" % (outcome.task, said[-1])
    return " ".join(outcome.hint.split()) if outcome.hint else None



def _outcome_label(framework: dict[str, Any]) -> Optional[str]:
    """A framework's ``tfmesos.outcome`` label in the master's JSON, or None."""
    return labels_.label_map(framework.get("labels")).get(labels_.OUTCOME)


__all__ = ["RunRuntime", "Parts", "STOP_LINGER", "reason_line"]
