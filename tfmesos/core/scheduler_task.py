"""A detached run's scheduler task (``tfrun --detach``, ``tfmesos attach``;
``core.detached``): its TaskInfo (``scheduler_task``: the run's key, the
credentials it subscribes with and the values of ``secret_env`` as Mesos
value secrets, ``scheduler_secrets``), the files it fetches (``serve``,
``document_uris``: the scheduler document written once the framework id
is known), and launching it (``launch_scheduler``: subscribe as the run's
framework, launch the task on the first offer that fits, return once it
took the framework over; ``SchedulerLauncher``)."""

import logging
import os
import queue
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..backends.remote import credentials_environ
from ..exceptions import MesosCallError, MesosError, SpecError
from ..mesos import MesosSchedulerDriver, Scheduler
from ..mesos.immutable import adopt_held
from ..mesos.interface import FAILED_OVER, SchedulerDriver
from ..mesos.master_address import without_password
from ..mesos.task_states import TERMINAL_STATES
from ..protocol import labels, task_env
from . import task_secrets
from .identity import RunIdentity
from .placement import Assignment, TaskRequest, place
from .scheduler import ask_mesos_of, unless_disconnected
from .scheduler_document import DETACHED_FILE, RUN_KEY, DetachError, seal_document
from .spec import RunSpec
from .taskinfo import build_task_info, container_info, framework_info

if TYPE_CHECKING:
    from addict import Dict

    from ..mesos.master_reads import MasterReader
    from ..ship.bundle_server import BundleServer

logger = logging.getLogger(__name__)

TAKEOVER_TIMEOUT = 300.0   # the scheduler task has this long to take the framework over
FIT_READ_AFTER = 10.0      # seconds without a launch before the agents' totals are read
# The scheduler task's KillPolicy: time to write its record when the task is
# KILLed. A teardown of its framework gives it about 3 s whatever this says
# (CommandExecutor::shutdown, src/launcher/executor.cpp): it saves the record
# first then (ClusterRun._scheduler_task_killed).
KILL_GRACE = 30.0

# What the scheduler task fetches: {file name: (its path here, whether the
# fetcher extracts it)}; its URIs (CommandInfo.URI) as JSON.
Files = Mapping[str, tuple[str, bool]]
Uris = list[dict[str, Any]]


# -- what the scheduler task is given -----------------------------------------

def scheduler_secrets(spec: RunSpec, credentials: Optional[tuple[str, str]],
                      environ: Mapping[str, str]) -> dict[str, str]:
    """The scheduler task's secrets but the key: the values of
    ``spec.secret_env`` (from ``environ``) and the ``credentials``
    (principal, secret) it subscribes with. SpecError where they cannot be
    secrets (an image under the Docker containerizer)."""
    found = task_secrets.values(spec, environ)
    if credentials is not None:
        _as_secrets(spec, "on a master that asks for credentials gives them",
                    credentials_environ(credentials), found)
    if without_password(spec.master) != spec.master:
        # Its scheduler document names the master with the ZooKeeper password
        # masked; the task's driver takes it from here (``with_password``).
        _as_secrets(spec, "on a zk:// master with a password gives it",
                    {"MESOS_MASTER": spec.master}, found)
    return found


def _as_secrets(spec: RunSpec, what: str, values: Mapping[str, str],
                found: dict[str, str]) -> None:
    """``values`` into ``found``, the scheduler task's secrets; SpecError
    (``what`` the run gives) where they cannot be (the Docker containerizer)."""
    if not task_secrets.supported(spec):
        raise SpecError.about("a detached run %s to its scheduler task as %s, which the Docker "
                              "containerizer does not pass: use {containerizer=MESOS} (the "
                              "default)", what,
                              "Mesos secrets" if len(values) > 1 else "a Mesos secret")
    found.update(values)


# -- launching the scheduler task --------------------------------------------

class SchedulerLauncher(Scheduler):
    """Launches one scheduler task (``make_task(assignment, framework id)``,
    its TaskInfo) on the first offer that fits it and reports what becomes
    of it on ``events``: ("running",), ("ended", state,
    message), ("taken over",), ("error", message)."""

    def __init__(self, make_task: Callable[[Assignment[str], str], dict[str, Any]],
                 cpus: float, mem: float,
                 prove: Callable[[SchedulerDriver, str], None] = lambda driver, framework: None
                 ) -> None:
        self._make_task = make_task
        self._prove = prove
        self._proved = False
        self._request = TaskRequest("scheduler", cpus, mem, 0, port=False)
        # SimpleQueue: a signal's KeyboardInterrupt inside its get is safe
        # (core.signals: queue.Queue's may free a lock it does not hold).
        self.events: queue.SimpleQueue[tuple[str, ...]] = queue.SimpleQueue()
        self.launched: Optional[tuple[str, str]] = None   # (task id, agent id)
        # its agent's address (Offer.url): its sandbox's last words
        self.agent_url: Optional[dict[str, Any]] = None

    def resourceOffers(self, driver: SchedulerDriver, offers: "list[Dict]") -> None:
        if not self._proved and driver.framework_id is not None:
            # The framework's proof label, at its first offers: a submit killed
            # before its scheduler task took over leaves a run its owner's
            # tfmesos kill and attach find (they act only on proven runs).
            self._prove(driver, driver.framework_id)
            self._proved = True
        unused = [offer["id"] for offer in offers]
        if self.launched is None:
            placement = place([self._request], offers)
            for offer_id, assignments in placement.launches.items():
                framework_id = driver.framework_id
                assert framework_id is not None, "offers come to a subscribed framework"
                info = self._make_task(assignments[0], framework_id)
                self.launched = (info["task_id"]["value"], assignments[0].agent_id)
                self.agent_url = assignments[0].agent_url
                # What the scheduler task leaves of the offer, and the offers
                # declined meanwhile, go to the scheduler that takes over at once
                # (a refusal filters the framework, not this driver); no more
                # offers come here (its SUBSCRIBE clears the suppression).
                self._launch(driver, offer_id, info)
                # Disconnected meanwhile: Mesos rescinds a disconnected
                # framework's offers, and the scheduler task's SUBSCRIBE
                # clears the suppression.
                unless_disconnected(driver.suppressOffers)
                unused = [oid for oid in unused if oid["value"] != offer_id]
                break
        if unused:
            unless_disconnected(driver.declineOffer, unused,
                                {"refuse_seconds": 0.0 if self.launched else 1.0})

    def _launch(self, driver: SchedulerDriver, offer_id: str, info: dict[str, Any]) -> None:
        """LAUNCH the scheduler task. A call whose answer never came (a
        timeout) may have been carried out: Mesos is asked (its update
        says running, or TASK_LOST when it never got it) rather than the
        run given up while the task may take it over."""
        try:
            driver.launchTasks([{"value": offer_id}], [info], {"refuse_seconds": 0.0})
        except MesosError as exc:
            if not exc.maybe_delivered or self.launched is None:
                raise
            logger.warning("no answer from the Mesos master to the launch of the scheduler task "
                           "(%s); asking it whether it was launched", exc)
            ask_mesos_of(driver, [self.launched])

    def statusUpdate(self, driver: SchedulerDriver, update: "Dict") -> None:
        if self.launched is None or update.task_id.value != self.launched[0]:
            return
        if update.state == "TASK_RUNNING":
            self.events.put(("running",))
        elif update.state in TERMINAL_STATES:
            self.events.put(("ended", update.state, update.get("message") or ""))

    def error(self, driver: SchedulerDriver, message: str) -> None:
        self.events.put(("taken over",) if FAILED_OVER in message else ("error", message))


def scheduler_task(spec: RunSpec, identity: RunIdentity, assignment: Assignment[str],
                   uris: Uris, command: str, secrets: Optional[Mapping[str, str]] = None
                   ) -> dict[str, Any]:
    """The TaskInfo of the scheduler task of the run ``identity`` (with
    its framework id): the run's key and ``secrets`` ({name: value},
    ``scheduler_secrets``) as Mesos value secrets (the key a plain variable
    where Mesos passes no secrets: ``task_secrets.supported``)."""
    env: dict[str, object] = {
        task_env.FRAMEWORK_ID: identity.framework_id, task_env.RUN_ID: identity.run_id,
           "PYTHONUNBUFFERED": "1"}
    env.update(spec.env)
    hidden = dict(secrets or {})
    (hidden if task_secrets.supported(spec) else env)[RUN_KEY] = identity.key.hex()
    info = build_task_info(labels.scheduler_task_id(identity.run_id, identity.scheduler_attempt),
                           "%s scheduler" % spec.name, assignment.agent_id, assignment.resources,
                           command, env, container_info(spec) if spec.image else None,
                           labels={"tfmesos.job": labels.SCHEDULER_JOB}, uris=uris,
                           secrets=hidden)
    info["kill_policy"] = {"grace_period": {"nanoseconds": int(KILL_GRACE * 1e9)}}
    return info


def check_fit(spec: RunSpec, master: str, credentials: Optional[tuple[str, str]],
              cpus: float, mem: float, say: Callable[[str], None]) -> None:
    """The scheduler task waited for an offer: DetachError when no agent of
    the master could ever hold it (as a job's task's fit is checked:
    ``fit``), else said once what it waits for. Nothing when the agents
    cannot be read."""
    from .fit import Size, agents_of
    try:
        agents = agents_of(master_reader(spec, master, credentials, 5.0).agents(), spec.role)
    except MesosError as exc:
        logger.info("cannot read the master's agents: %s", exc)
        return
    ask = Size(cpus, mem)
    if not agents:
        say("the scheduler task (cpus=%g mem=%g) waits for an offer: the master lists no "
            "agent" % (cpus, mem))
        return
    largest = max(agents, key=lambda agent: (agent.total.cpus, agent.total.mem))
    if not any(agent.total.holds(ask) for agent in agents):
        raise DetachError("the scheduler task asks %s but no agent can hold it: the largest "
                          "agent has %s (total, %s): lower %s or add a bigger agent" % (
                              ask.describe(), largest.total.describe(), "1 agent"
                              if len(agents) == 1 else "of %d agents" % len(agents),
                              " and ".join("--scheduler-" + name
                                           for name in largest.total.lacking(ask))))
    say("the scheduler task (%s) waits for an offer: no agent has that much free now"
        % ask.describe())


def master_reader(spec: RunSpec, master: str, credentials: Optional[tuple[str, str]],
                  timeout: float) -> "MasterReader":
    """A reader of ``master`` with ``credentials`` and the run's TLS settings."""
    from ..mesos.master_reads import MasterReader
    return MasterReader(master, timeout=timeout, environ=credentials_environ(credentials),
                        verify=spec.verify, ca_bundle=spec.ca_bundle)


def launch_scheduler(spec: RunSpec, identity: RunIdentity,
                     uris_for: Callable[[RunIdentity], Uris], command: str, cpus: float,
                     mem: float, say: Callable[[str], None],
                     environ: Optional[Mapping[str, str]] = None,
                     timeout: float = TAKEOVER_TIMEOUT) -> RunIdentity:
    """Subscribe as the run ``identity`` (taking its framework over, else as
    a new framework), launch its scheduler task, and return the identity
    with its framework once the task took the framework over. DetachError
    when it did not: a new framework is torn down then; one taken over is
    left as it was (its tasks run on).

    ``uris_for(identity)``: the task's URIs, its document written for that
    identity (the framework is known when the task is made). ``environ``
    (default ``os.environ``): the credentials it subscribes with and hands
    the task, and the values of ``spec.secret_env``, all as secrets."""
    from ..backends.remote import credentials_of
    environ = os.environ if environ is None else environ
    credentials = credentials_of(environ)
    secrets = scheduler_secrets(spec, credentials, environ)
    framework_id = identity.framework_id

    def make_task(assignment: Assignment[str], framework: str) -> dict[str, Any]:
        bound = identity.with_framework(framework)
        return scheduler_task(spec, bound, assignment, uris_for(bound), command, secrets)
    def prove(driver: SchedulerDriver, framework: str) -> None:
        proven = framework_info(spec, spec.jobs, identity.with_framework(framework),
                                detached=True)
        proven.update({key: info[key] for key in ("principal",) if key in info})
        try:
            driver.updateFramework(proven)
        except MesosError as exc:
            logger.warning("could not label the run's framework with its proof: %s (until its "
                           "scheduler task takes over, tfmesos kill does not find it)", exc)
    launcher = SchedulerLauncher(make_task, cpus, mem, prove)
    info = framework_info(spec, spec.jobs, identity, detached=True)
    # The credentials of environ, not the driver's default (this process's).
    principal, secret = credentials or ("", "")
    if credentials is not None:
        info["principal"] = principal
    if framework_id:   # taken over: it keeps what it registered with (maybe by an older tfmesos)
        info = adopt_held(info, master_reader(spec, spec.master, credentials, 10.0))
    driver = MesosSchedulerDriver(launcher, info, spec.master,
                                  connect_timeout=spec.connect_timeout,
                                  refused_timeout=spec.refused_timeout, principal=principal,
                                  secret=secret, **spec.driver_options())
    deadline = time.monotonic() + timeout
    fit_check = time.monotonic() + FIT_READ_AFTER
    running = taken = False
    try:
        # Inside: a signal while start() starts the driver's threads may
        # come after the master took the SUBSCRIBE; stop() below tears
        # that framework down.
        driver.start()
        while not taken:
            try:
                event = launcher.events.get(timeout=max(0.05, min(1.0, deadline
                                                                  - time.monotonic())))
            except queue.Empty:
                if launcher.launched is None and time.monotonic() > fit_check:
                    fit_check = deadline   # once
                    check_fit(spec, driver.master or spec.master, credentials, cpus, mem, say)
                if time.monotonic() > deadline:
                    raise DetachError(
                        "the scheduler task did not take the run over within %.0f s (%s)"
                        % (timeout, "it runs, but never subscribed" if running else
                           "no offer fits cpus=%g mem=%g" % (cpus, mem)
                           if launcher.launched is None else "it never started")) from None
                continue
            if event[0] == "running":
                running = True
                say("the scheduler task %s runs on agent %s; waiting for it to take over"
                    % tuple(launcher.launched or ("?", "?")))
            elif event[0] == "taken over":
                taken = True
            elif event[0] == "ended":
                said = last_line(launcher, driver, credentials)
                error = DetachError("the scheduler task ended before it took the run over: %s%s%s"
                                    % (event[1], ": %s" % event[2] if event[2] else "",
                                       "; it said: %s" % said if said else ""))
                error.reason = "%s: %s" % (labels.SCHEDULER_JOB, said) if said else None
                raise error
            else:
                raise DetachError(refusal(without_password(spec.master), event[1], driver,
                                          credentials))
        framework_id = driver.framework_id
        assert framework_id is not None, "the scheduler task took a subscribed framework over"
        return identity.with_framework(framework_id)
    except BaseException as exc:
        if framework_id is None and not taken:
            if isinstance(exc, DetachError):   # said where tfmesos runs --master looks
                label_ended(driver, "aborted: %s" % exc, exc.reason)
            try:
                driver.stop()   # a run that never started: nothing of it stays
            except MesosError as exc:
                logger.warning("could not tear the framework down: %s", exc)
        raise
    finally:
        driver.abort()


def refusal(master: str, message: str, driver: MesosSchedulerDriver,
            credentials: Optional[tuple[str, str]]) -> str:
    """The one line for a master that refused the launcher's subscription:
    its 401 says which credentials to set."""
    try:
        driver.join(timeout=5)
    except MesosCallError as exc:
        if exc.status == 401:
            if credentials is None:
                return ("the master at %s asks for credentials: set MESOS_PRINCIPAL and "
                        "MESOS_SECRET" % master)
            return ("the master at %s refused the credentials of principal %s: check "
                    "MESOS_PRINCIPAL and MESOS_SECRET" % (master, credentials[0]))
    except Exception:  # noqa: B902 - whatever else ended it, the message says
        pass
    return "the Mesos master refused the run: %s" % message


def label_ended(driver: MesosSchedulerDriver, outcome: str, reason: Optional[str]) -> None:
    """Label the framework of a run that ends before its scheduler task
    took it over with how (``labels.OUTCOME``, ``aborted: ...``) and why
    (``labels.REASON``), before its teardown: ``tfmesos runs --master``
    and ``tfmesos attach`` say it, not a bare ``finished``. Best effort."""
    if not driver.connected:
        return
    found = {labels.OUTCOME: " ".join(outcome.split())[:1000]}
    if reason:
        found[labels.REASON] = " ".join(reason.split())[:labels.MAX_REASON]
    info = dict(driver.framework)
    kept = [label for label in (info.get("labels") or {}).get("labels", [])
            if label["key"] not in found]
    info["labels"] = {"labels": kept + [{"key": key, "value": value}
                                        for key, value in found.items()]}
    try:
        driver.updateFramework(info)
    except MesosError as exc:
        logger.warning("could not label the run's framework: %s", exc)


def last_line(launcher: SchedulerLauncher, driver: MesosSchedulerDriver,
              credentials: Optional[tuple[str, str]] = None) -> Optional[str]:
    """The last stderr line of the scheduler task's sandbox, or None when
    there is none or it cannot be read."""
    from ..mesos.agent_files import AgentFilesError, agent_base_url, read_tails, sandbox_path
    from ..mesos.http_transport import basic_auth
    base = agent_base_url(launcher.agent_url)
    if base is None or launcher.launched is None:
        return None
    try:
        tails = read_tails(base, sandbox_path(driver.framework_id, launcher.launched[0]),
                           auth=basic_auth(*credentials) if credentials else None)
    except AgentFilesError:
        return None
    return telling_line(tails.get("stderr", []))


def telling_line(lines: list[str]) -> Optional[str]:
    """Of the scheduler task's last stderr ``lines``, the one that says why
    it ended: its error (``tfrun: error: ...``; tfrun names its record's
    directory after it), else the last one; None when none has words."""
    lines = [line.strip() for line in lines if line.strip()]
    errors = [line for line in lines if line.startswith("tfrun: error: ")]
    chosen = errors or lines
    return chosen[-1] if chosen else None


# -- what it fetches --------------------------------------------------------------

def serve(server: "BundleServer", files: Files, host: str, python_env: Optional[str]) -> Uris:
    """``files`` ({name: (path, extract)}) on ``server``: the scheduler
    task's URIs (and a ``--python-env`` URL's, ``python_env``, fetched and
    cached as the job's tasks fetch it)."""
    uris = []
    for name, (path, extract) in files.items():
        server.add(name, path)
        uris.append({"value": server.url(host, name), "extract": extract, "cache": False})
    if python_env and "://" in python_env:
        uris.append({"value": python_env, "extract": True, "cache": True})
    return uris


def document_uris(server: "BundleServer", host: str, python_env: Optional[str], files: Files,
                  work: str, body: Mapping[str, Any]) -> Callable[[RunIdentity], Uris]:
    """``uris_for(identity)`` (``launch_scheduler``'s): the scheduler task's
    URIs (``serve``), ``files`` and its document (``body`` sealed for
    ``identity``, ``seal_document``), written in ``work`` (0600) when it is
    asked for."""
    def uris_for(identity: RunIdentity) -> Uris:
        path = os.path.join(work, DETACHED_FILE)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(seal_document(identity, body))
        return serve(server, dict(files, **{DETACHED_FILE: (path, False)}), host, python_env)
    return uris_for


def command_of(spec: RunSpec, python_env: Optional[str], side: str) -> str:
    """The scheduler task's command: its ``--python-env`` archive's
    interpreter when the run has one (``python_env``), else ``spec.python``
    or the image's, importing the scheduler side from its zip (``side``,
    its file name; fetched, not extracted)."""
    from ..ship.scheduler_side import scheduler_command
    return scheduler_command(side, spec.python, spec.image, python_env=python_env is not None,
                             site=spec.master.startswith("zk://"))


__all__ = ["TAKEOVER_TIMEOUT", "KILL_GRACE", "SchedulerLauncher", "scheduler_task",
           "launch_scheduler", "scheduler_secrets", "serve", "document_uris", "command_of"]
