"""Detached runs (``tfrun --detach``): the run's scheduler is a Mesos task of
the run's own framework, so the run lives on the cluster, not in the
submitter's shell.

The submitter (``submit``) packs what the run ships (``--ship``) and the
scheduler side of tfmesos (``ship.scheduler_side``), serves them,
subscribes as a new framework (its failover timeout hours long) and
launches the scheduler task (``SchedulerLauncher``) with ``detached.json``,
the scheduler document (the run's spec, what was packed, the run's
identity bound to its framework), written once the framework id is known
and sealed with the run's key (``RunIdentity.seal``). The agent's fetcher
puts the files in its sandbox, it runs ``python -m
tfmesos.cli.detached_scheduler detached.json``, which opens the document
with the key of its environment before it reads any field of it
(``open_document``), subscribes with the framework's id (Mesos' failover:
the submitter's subscription ends with "Framework failed over") and runs
the job as a foreground tfrun would, its output in its sandbox's stdout
and stderr, its run directory ``run/`` there (``protocol.labels``). The
submitter leaves once it took over, keeping the run's key for ``tfmesos
attach`` (``record.takeover_files``).

Nothing secret is in a file: the run's key, the credentials of
``MESOS_PRINCIPAL``/``MESOS_SECRET`` and the values of ``secret_env`` reach
the scheduler task as Mesos value secrets (``task_secrets``), read from the
environment of whoever launches it (the submitter; ``tfmesos attach``).

A scheduler task that dies leaves the framework disconnected: the job's
tasks go on for the failover timeout. ``attach_detached`` (``tfmesos
attach``) follows a live scheduler's output, or launches a new scheduler
task with the files of the old one's sandbox and the run's record so far,
which takes the run over (``core.takeover``) without restarting a task;
it uses nothing of that sandbox unless its document opens with the
caller's key and names the run, the framework, the principal and the user
the master shows (``relaunch_scheduler``).
"""

import dataclasses
import logging
import os
import queue
import shutil
import tempfile
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..exceptions import MesosCallError, MesosError, SpecError
from ..mesos import MesosSchedulerDriver, Scheduler
from ..mesos.interface import FAILED_OVER, SchedulerDriver
from ..mesos.task_states import TERMINAL_STATES
from ..protocol import labels, task_env
from . import task_secrets
from .identity import RunIdentity
from .placement import Assignment, TaskRequest, place
from .scheduler_document import (
    DETACHED_FILE,
    MAX_DOCUMENT,
    MAX_RECORD,
    PREVIOUS_RECORD,
    RUN_KEY,
    DetachError,
    bound_to,
    document_body,
    open_document,
    read_previous,
    read_sealed,
    seal_document,
)
from .spec import RunSpec
from .spec_codec import spec_from_dict
from .taskinfo import build_task_info, container_info, framework_info, run_user

if TYPE_CHECKING:   # annotations only: each comes when its step needs it
    from addict import Dict

    from ..mesos.master_reads import MasterReader
    from ..ship.bundle_server import BundleServer

logger = logging.getLogger(__name__)

TAKEOVER_TIMEOUT = 300.0   # the scheduler task has this long to take the framework over
KILL_GRACE = 30.0          # the scheduler task's KillPolicy: time to write its record

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
        if not task_secrets.supported(spec):
            raise SpecError.about("a detached run on a master that asks for credentials gives "
                                  "them to its scheduler task as Mesos secrets, which the "
                                  "Docker containerizer does not pass: use "
                                  "{containerizer=MESOS} (the default)")
        found.update({"MESOS_PRINCIPAL": credentials[0], "MESOS_SECRET": credentials[1]})
    return found


# -- launching the scheduler task --------------------------------------------

class SchedulerLauncher(Scheduler):
    """Launches one scheduler task (``make_task(assignment, framework id)``,
    its TaskInfo) on the first offer that fits it and reports what becomes
    of it on ``events``: ("running",), ("ended", state,
    message), ("taken over",), ("error", message)."""

    def __init__(self, make_task: Callable[[Assignment[str], str], dict[str, Any]],
                 cpus: float, mem: float) -> None:
        self._make_task = make_task
        self._request = TaskRequest("scheduler", cpus, mem, 0, port=False)
        self.events: queue.Queue[tuple[str, ...]] = queue.Queue()
        self.launched: Optional[tuple[str, str]] = None   # (task id, agent id)
        # its agent's address (Offer.url): its sandbox's last words
        self.agent_url: Optional[dict[str, Any]] = None

    def resourceOffers(self, driver: SchedulerDriver, offers: "list[Dict]") -> None:
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
                driver.launchTasks([{"value": offer_id}], [info], {"refuse_seconds": 0.0})
                driver.suppressOffers()
                unused = [oid for oid in unused if oid["value"] != offer_id]
                break
        if unused:
            driver.declineOffer(unused, {"refuse_seconds": 0.0 if self.launched else 1.0})

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
    launcher = SchedulerLauncher(make_task, cpus, mem)
    info = framework_info(spec, spec.jobs, identity, detached=True)
    # The credentials of environ, not the driver's default (this process's).
    principal, secret = credentials or ("", "")
    if credentials is not None:
        info["principal"] = principal
    driver = MesosSchedulerDriver(launcher, info, spec.master,
                                  connect_timeout=spec.connect_timeout,
                                  refused_timeout=spec.refused_timeout, principal=principal,
                                  secret=secret, **spec.driver_options())
    driver.start()
    deadline = time.monotonic() + timeout
    running = taken = False
    try:
        while not taken:
            try:
                event = launcher.events.get(timeout=max(0.05, min(1.0, deadline
                                                                  - time.monotonic())))
            except queue.Empty:
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
                raise DetachError("the scheduler task ended before it took the run over: %s%s%s"
                                  % (event[1], ": %s" % event[2] if event[2] else "",
                                     last_words(launcher, driver, credentials)))
            else:
                raise DetachError(refusal(spec.master, event[1], driver, credentials))
        framework_id = driver.framework_id
        assert framework_id is not None, "the scheduler task took a subscribed framework over"
        return identity.with_framework(framework_id)
    except BaseException:
        if framework_id is None and not taken:
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


def last_words(launcher: SchedulerLauncher, driver: MesosSchedulerDriver,
               credentials: Optional[tuple[str, str]] = None) -> str:
    """``; it said: LINE`` (the last stderr line of the scheduler task's
    sandbox), or "" when there is none or it cannot be read."""
    from ..mesos.agent_files import AgentFilesError, agent_base_url, read_tails, sandbox_path
    from ..mesos.http_transport import basic_auth
    base = agent_base_url(launcher.agent_url)
    if base is None or launcher.launched is None:
        return ""
    try:
        tails = read_tails(base, sandbox_path(driver.framework_id, launcher.launched[0]),
                           auth=basic_auth(*credentials) if credentials else None)
    except AgentFilesError:
        return ""
    lines = [line for line in tails.get("stderr", []) if line.strip()]
    return "; it said: %s" % lines[-1].strip() if lines else ""


# -- tfrun --detach ------------------------------------------------------------

def serve(server: "BundleServer", files: Files, host: str, spec: RunSpec) -> Uris:
    """``files`` ({name: (path, extract)}) on ``server``: the scheduler
    task's URIs (and a ``--python-env`` URL's, fetched and cached as the
    job's tasks fetch it)."""
    uris = []
    for name, (path, extract) in files.items():
        server.add(name, path)
        uris.append({"value": server.url(host, name), "extract": extract, "cache": False})
    python_env = spec.ship.python_env if spec.ship is not None else None
    if python_env and "://" in python_env:
        uris.append({"value": python_env, "extract": True, "cache": True})
    return uris


def document_uris(server: "BundleServer", host: str, spec: RunSpec, files: Files, work: str,
                  body: Mapping[str, Any]) -> Callable[[RunIdentity], Uris]:
    """``uris_for(identity)`` (``launch_scheduler``'s): the scheduler task's
    URIs, ``files`` and its document (``body`` sealed for ``identity``,
    ``seal_document``), written in ``work`` (0600) when it is asked for."""
    def uris_for(identity: RunIdentity) -> Uris:
        path = os.path.join(work, DETACHED_FILE)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(seal_document(identity, body))
        return serve(server, dict(files, **{DETACHED_FILE: (path, False)}), host, spec)
    return uris_for


def command_of(spec: RunSpec, packed: Mapping[str, object]) -> str:
    from ..ship.scheduler_side import scheduler_command
    python_env = spec.ship is not None and spec.ship.python_env is not None
    return scheduler_command(spec.python, spec.image, python_env=python_env or bool(
        packed.get("python_env")))


def check_detachable(spec: RunSpec, environ: Optional[Mapping[str, str]] = None) -> None:
    """SpecError unless an agent can run ``spec``'s scheduler with what it
    needs of ``environ`` (default ``os.environ``) as secrets."""
    from ..backends.remote import credentials_of
    if spec.ship is None and not spec.image:
        raise SpecError("--detach runs the run's scheduler on an agent, which needs the run's "
                        "code: add --ship (the current directory) or -I IMAGE")
    if spec.mlflow is not None:
        raise SpecError("--mlflow logs from tfrun's own process, which --detach runs on an "
                        "agent that has no MLflow: run in the foreground (or with --failover) "
                        "to log to MLflow")
    environ = os.environ if environ is None else environ
    scheduler_secrets(spec, credentials_of(environ), environ)


def submit(spec: RunSpec, say: Callable[[str], None], cpus: float, mem: float,
           environ: Optional[Mapping[str, str]] = None,
           timeout: float = TAKEOVER_TIMEOUT) -> RunIdentity:
    """``tfrun --detach``: launch the run's scheduler task (``cpus``,
    ``mem`` MB), keep the run's key; returns the run's identity (with its
    framework)."""
    from ..backends.remote import RemoteMaster
    from ..record.takeover_files import save_key
    from ..ship.bundle_server import BundleServer
    from ..ship.scheduler_side import pack_scheduler_side
    from ..ship.shipping import Shipment

    environ = os.environ if environ is None else environ
    backend = RemoteMaster(spec.master, spec.advertise_address, environ)
    identity = RunIdentity.new(run_user(spec), backend.principal)
    backend.start()
    work = tempfile.mkdtemp(prefix="tfmesos-detach-")
    shipment: Optional[Shipment] = None
    server: Optional[BundleServer] = None
    try:
        shipment = Shipment(spec.ship, backend.bind_host(), say=say) if spec.ship else None
        server = shipment.server if shipment else BundleServer(bind_host=backend.bind_host())
        assert server is not None, "a Shipment serves from its construction on"
        scheduler_side = pack_scheduler_side(work)
        packed = {}
        files = {scheduler_side.name: (scheduler_side.path, True)}
        if shipment is not None:
            identity = identity.with_shipment(
                shipment.bundle.sha256 if shipment.bundle is not None else None,
                shipment.task_side.sha256)
            for role, path in shipment.packed_files().items():
                if path is not None:   # a python_env archive is extracted, and kept
                    packed[role] = os.path.basename(path)
                    files[os.path.basename(path)] = (path, role == "python_env")
        body = document_body(spec, packed, shipment.record() if shipment else None, cpus, mem)
        uris_for = document_uris(server, backend.advertised_address(spec.master), spec, files,
                                 work, body)
        identity = launch_scheduler(spec, identity, uris_for, command_of(spec, packed), cpus,
                                    mem, say, environ=environ, timeout=timeout)
        save_key(identity, environ)
        return identity
    finally:
        if server is not None:
            server.stop()
        if shipment is not None:
            shipment.stop()
        shutil.rmtree(work, ignore_errors=True)


# -- tfmesos attach ---------------------------------------------------------------

MAX_DOWNLOAD = 4 << 30          # bytes of one file of a scheduler's sandbox
DOWNLOAD_TIME = 600.0           # seconds for all of them


def sandbox_reader(reader: "MasterReader", state: Mapping[str, Any],
                   framework: Mapping[str, Any], task: Mapping[str, Any]
                   ) -> Callable[[str, str, bool, int], Optional[str]]:
    """``fetch(name, dest, optional=False, max_bytes=MAX_DOWNLOAD)``: a file
    of ``task``'s sandbox (state JSON), read through its agent's /files into
    ``dest``; returns ``dest``, or None for an optional file that is not
    there."""
    import urllib.parse

    from ..mesos.agent_files import (
        AgentFiles,
        AgentFilesError,
        agent_base_urls,
        download,
        task_sandbox,
    )
    scheme = urllib.parse.urlsplit(reader.leader()).scheme or "http"
    base = agent_base_urls(state, scheme).get(task.get("slave_id", ""))
    if not base:
        raise DetachError("the agent of %s is gone, and with it what the run's scheduler "
                          "was given: the run cannot be taken over (tfmesos kill %s stops it)"
                          % (task["id"], task["id"].split(".")[1]))
    root = task_sandbox(framework["id"], task)
    deadline = time.monotonic() + DOWNLOAD_TIME

    def fetch(name: str, dest: str, optional: bool = False,
              max_bytes: int = MAX_DOWNLOAD) -> Optional[str]:
        files = AgentFiles(base, 30.0, reader.auth, None)
        try:
            download(files, "%s/%s" % (root, name), dest, max_bytes, deadline)
        except AgentFilesError as exc:
            if optional and "404" in str(exc):
                return None
            raise DetachError("cannot read %s from the sandbox of %s: %s"
                              % (name, task["id"], exc)) from None
        finally:
            files.close()
        return dest
    return fetch


def relaunch_scheduler(reader: "MasterReader", state: Mapping[str, Any],
                       framework: dict[str, Any], run_id: str, key_file: Optional[str],
                       environ: Mapping[str, str], say: Callable[[str], None]) -> None:
    """A new scheduler task for a detached run whose scheduler is gone: the
    files of the last one's sandbox (read through its agent's /files), the
    run's record so far, served from here until it took over.

    Nothing of that sandbox is used (no master, python, user, environment,
    nothing launched, nothing sent) unless its document opens with the
    caller's key and is bound to this run, this ``framework`` (the master's
    state) and its principal and user; the record it carries on must be
    this run's (``check_previous``); the new document is sealed again."""
    from ..backends.remote import RemoteMaster, credentials_of
    from ..record.takeover_files import key_path, read_key
    from ..ship.bundle_server import BundleServer
    from ..ship.scheduler_side import pack_scheduler_side

    key = read_key(key_file or key_path(run_id, environ))
    tasks = labels.scheduler_tasks(framework, run_id)   # the newest first
    if not tasks:
        raise DetachError("run %s has no scheduler task to take over from" % run_id)
    newest, last = tasks[0]
    work = tempfile.mkdtemp(prefix="tfmesos-attach-")
    server: Optional[BundleServer] = None
    try:
        read = sandbox_reader(reader, state, framework, last)

        def fetch(name: str, optional: bool = False,
                  max_bytes: int = MAX_DOWNLOAD) -> Optional[str]:
            return read(name, os.path.join(work, os.path.basename(name)), optional, max_bytes)

        def fetched(name: str, max_bytes: int = MAX_DOWNLOAD) -> str:
            path = fetch(name, False, max_bytes)
            assert path is not None, "only an optional file may be missing"
            return path
        what = "the scheduler document of %s (framework %s)" % (last["id"], framework["id"])
        sealed = read_sealed(fetched(DETACHED_FILE, max_bytes=MAX_DOCUMENT), what)
        document, found = open_document(sealed, key, what)
        why = bound_to(found, run_id, framework["id"], framework.get("principal"),
                       framework.get("user"))
        if why:
            raise DetachError("%s is not this run's: %s; nothing of it is used" % (what, why))
        credentials = credentials_of(environ)
        mine = credentials[0] if credentials else None
        if mine != found.principal:
            raise DetachError("run %s runs as Mesos principal %s, not %s (MESOS_PRINCIPAL): "
                              "take it over with its credentials"
                              % (run_id, found.principal or "none", mine or "none"))
        spec = spec_from_dict(document["spec"])
        scheduler_secrets(spec, credentials, environ)   # what it needs of environ, first
        identity = dataclasses.replace(
            found, scheduler_attempt=max(newest, found.scheduler_attempt) + 1)
        previous = fetch(labels.SCHEDULER_RECORD, optional=True, max_bytes=MAX_RECORD)
        if previous:
            read_previous(previous, run_id, "the record in the sandbox of %s" % last["id"])
        names = dict(document.get("packed") or {})
        packed = {role: fetched(name) for role, name in names.items()}
        body = {name: value for name, value in document.items() if name != "identity"}
        body["previous"] = PREVIOUS_RECORD if previous else None
        scheduler_side = pack_scheduler_side(work)
        files = {scheduler_side.name: (scheduler_side.path, True)}
        files.update({name: (packed[role], role == "python_env")
                      for role, name in names.items()})
        if previous:
            files[PREVIOUS_RECORD] = (previous, False)
        backend = RemoteMaster(spec.master, None, environ)
        server = BundleServer(bind_host=backend.bind_host())
        new = os.path.join(work, "new")   # the new document, apart from what was read
        os.mkdir(new, 0o700)
        uris_for = document_uris(server, backend.advertised_address(spec.master), spec, files,
                                 new, body)
        say("run %s has no scheduler: launching scheduler task %d"
            % (run_id, identity.scheduler_attempt))
        launch_scheduler(spec, identity, uris_for, command_of(spec, names),
                         float(document.get("scheduler_cpus") or 0.5),
                         float(document.get("scheduler_mem") or 512), say, environ=environ)
        say("the new scheduler took run %s over" % run_id)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


__all__ = ["submit", "relaunch_scheduler", "launch_scheduler", "DetachError"]
