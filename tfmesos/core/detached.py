"""Detached runs (``tfrun --detach``): the run's scheduler is a Mesos task of
the run's own framework, so the run lives on the cluster, not in the
submitter's shell.

The submitter (``submit``) packs what the run ships (``--ship``) and the
scheduler side of tfmesos (``ship.scheduler_side``), serves them,
subscribes as a new framework (its failover timeout hours long) and
launches the scheduler task (``scheduler_task``) with ``detached.json``,
the scheduler document (the run's spec, what was packed, the run's
identity bound to its framework), written once the framework id is known
and sealed with the run's key (``scheduler_document``). The agent's fetcher
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
import shutil
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..exceptions import SpecError
from ..mesos.master_address import with_password
from ..protocol import labels
from .identity import RunIdentity
from .scheduler_document import (
    DETACHED_FILE,
    MAX_DOCUMENT,
    MAX_RECORD,
    PREVIOUS_RECORD,
    DetachError,
    bound_to,
    document_body,
    open_document,
    read_previous,
    read_sealed,
)
from .scheduler_task import (
    TAKEOVER_TIMEOUT,
    command_of,
    document_uris,
    launch_scheduler,
    scheduler_secrets,
)
from .spec import RunSpec
from .spec_codec import spec_from_dict
from .taskinfo import run_user

if TYPE_CHECKING:   # annotations only: each comes when its step needs it
    from ..mesos.master_reads import MasterReader
    from .scheduler_task import Files

logger = logging.getLogger(__name__)


# -- what the scheduler task runs -----------------------------------------------

def fetch_checks(files: "Files", known: Mapping[str, str]) -> str:
    """What goes before the scheduler task's command (``command_of``): the
    check of its ``files`` (``scheduler_task.serve``'s; ``ship.fetch_check``),
    each file's sha256 as ``known`` ({path: sha256}: what was packed here,
    what the run's identity says) has it, else as read here.

    The fetcher extracts what it extracts of these (a ``--python-env``
    archive) itself: they are not cached (``serve``), so each archive stays
    in the sandbox beside what it held (apache/mesos
    src/launcher/fetcher.cpp, ``fetchBypassingCache``) and is checked
    before anything of it runs. The scheduler side is not extracted: Python
    imports it from the very zip checked here. The scheduler document (``DETACHED_FILE``,
    written once the framework is known) is not: it is sealed with the
    run's key, which the scheduler checks before it reads a field of it."""
    from ..ship.bundle import file_sha256
    from ..ship.fetch_check import Fetched, check_command
    return check_command(Fetched(name, known.get(path) or file_sha256(path),
                                 size=os.path.getsize(path))
                         for name, (path, _) in files.items())


# -- tfrun --detach ------------------------------------------------------------

def check_detachable(spec: RunSpec, environ: Optional[Mapping[str, str]] = None) -> None:
    """SpecError unless an agent can run ``spec``'s scheduler with what it
    needs of ``environ`` (default ``os.environ``) as secrets."""
    from ..backends.remote import credentials_of
    if spec.ship is None and not spec.image:
        raise SpecError.about("--detach runs the run's scheduler on an agent, which needs the "
                              "run's code: add {ship.directory} (the current directory) or "
                              "{image=IMAGE}")
    if spec.mlflow is not None:
        raise SpecError.about("{mlflow} logs from tfrun's own process, which --detach runs on "
                              "an agent that has no MLflow: run in the foreground (or with "
                              "--failover) to log to MLflow")
    from ..record.takeover_files import TakeoverError, check_keys_writable
    environ = os.environ if environ is None else environ
    scheduler_secrets(spec, credentials_of(environ), environ)
    try:   # the run's key is kept before its launch: a run nobody can attach is none
        check_keys_writable(environ)
    except TakeoverError as exc:
        raise SpecError(str(exc)) from None


def submit(spec: RunSpec, say: Callable[[str], None], cpus: float, mem: float,
           environ: Optional[Mapping[str, str]] = None,
           timeout: float = TAKEOVER_TIMEOUT) -> RunIdentity:
    """``tfrun --detach``: launch the run's scheduler task (``cpus``,
    ``mem`` MB), keep the run's key; returns the run's identity (with its
    framework)."""
    from ..backends.remote import RemoteMaster
    from ..record.takeover_files import TakeoverError, forget_key, save_key
    from ..ship import work_dirs
    from ..ship.bundle_server import BundleServer
    from ..ship.scheduler_side import pack_scheduler_side
    from ..ship.shipping import Shipment

    environ = os.environ if environ is None else environ
    backend = RemoteMaster(spec.master, spec.advertise_address, environ)
    identity = RunIdentity.new(run_user(spec), backend.principal)
    backend.start()
    work = work_dirs.make("detach")
    shipment: Optional[Shipment] = None
    server: Optional[BundleServer] = None
    try:
        shipment = Shipment(spec.ship, backend.bind_host(), say=say) if spec.ship else None
        server = shipment.server if shipment else BundleServer(bind_host=backend.bind_host())
        assert server is not None, "a Shipment serves from its construction on"
        scheduler_side = pack_scheduler_side(work)
        packed = {}
        files = {scheduler_side.name: (scheduler_side.path, False)}   # imported as a zip
        if shipment is not None:
            identity = identity.with_shipment(
                shipment.bundle.sha256 if shipment.bundle is not None else None,
                shipment.task_side.sha256, shipment.env_sha256)
            for role, path in shipment.packed_files().items():
                if path is not None:   # a python_env archive is extracted, and kept
                    packed[role] = os.path.basename(path)
                    files[os.path.basename(path)] = (path, role == "python_env")
        body = document_body(spec, packed, shipment.record() if shipment else None, cpus, mem)
        python_env = spec.ship.python_env if spec.ship is not None else None
        known = {path: sha for path, (sha, _) in (shipment.digests.items()
                                                  if shipment is not None else ())}
        known[scheduler_side.path] = scheduler_side.sha256
        command = fetch_checks(files, known) + command_of(spec, python_env, scheduler_side.name)
        uris_for = document_uris(server, backend.advertised_address(spec.master), python_env,
                                 files, work, body)
        # The key is kept before anything is launched (``check_detachable``
        # checked that it can be): a key that could not be saved after the
        # launch left a run going on the cluster that nobody could attach,
        # its id and `tfmesos kill` line never said.
        try:
            save_key(identity, environ)
        except (OSError, TakeoverError) as exc:
            raise DetachError("cannot keep the run's key (%s): nothing was launched; set "
                              "$TFMESOS_KEYS_DIR to a directory you can write"
                              % (getattr(exc, "strerror", None) or exc)) from None
        try:
            identity = launch_scheduler(spec, identity, uris_for, command, cpus, mem, say,
                                        environ=environ, timeout=timeout)
        except BaseException:
            forget_key(identity.run_id, environ)   # nothing of the run is left: nor its key
            raise
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
    from ..record.takeover_files import run_key
    from ..ship import work_dirs
    from ..ship.bundle_server import BundleServer
    from ..ship.scheduler_side import pack_scheduler_side

    key = run_key(run_id, environ, key_file)
    tasks = labels.scheduler_tasks(framework, run_id)   # the newest first
    if not tasks:
        raise DetachError("run %s has no scheduler task to take over from" % run_id)
    newest, last = tasks[0]
    work = work_dirs.make("attach")
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
        why = bound_to(found, run_id=run_id, framework_id=framework["id"],
                       principal=framework.get("principal"), user=framework.get("user"))
        if why:
            raise DetachError("%s is not this run's: %s; nothing of it is used" % (what, why))
        credentials = credentials_of(environ)
        mine = credentials[0] if credentials else None
        if mine != found.principal:
            raise DetachError("run %s runs as Mesos principal %s, not %s (MESOS_PRINCIPAL): "
                              "take it over with its credentials"
                              % (run_id, found.principal or "none", mine or "none"))
        # The document's master has its ZooKeeper password masked: the one
        # the caller gave, to hand to the new task as a secret.
        spec = spec_from_dict(document["spec"])
        spec = dataclasses.replace(spec, master=with_password(
            spec.master, getattr(reader, "master", None), environ.get("MESOS_MASTER")))
        scheduler_secrets(spec, credentials, environ)   # what it needs of environ, first
        identity = dataclasses.replace(
            found, scheduler_attempt=max(newest, found.scheduler_attempt) + 1)
        # The record it kept, else the one it was given (it died before it wrote one).
        previous = fetch(labels.SCHEDULER_RECORD, optional=True, max_bytes=MAX_RECORD) \
            or fetch(PREVIOUS_RECORD, optional=True, max_bytes=MAX_RECORD)
        if previous:
            read_previous(previous, run_id, "the record in the sandbox of %s" % last["id"])
        names = dict(document.get("packed") or {})
        packed = {role: fetched(name) for role, name in names.items()}
        body = {name: value for name, value in document.items() if name != "identity"}
        body["previous"] = PREVIOUS_RECORD if previous else None
        scheduler_side = pack_scheduler_side(work)
        files = {scheduler_side.name: (scheduler_side.path, False)}   # imported as a zip
        files.update({name: (packed[role], role == "python_env")
                      for role, name in names.items()})
        if previous:
            files[PREVIOUS_RECORD] = (previous, False)
        backend = RemoteMaster(spec.master, None, environ)
        server = BundleServer(bind_host=backend.bind_host())
        new = os.path.join(work, "new")   # the new document, apart from what was read
        os.mkdir(new, 0o700)
        # The document's spec ships nothing: what it shipped says the environment.
        python_env = (document.get("shipped") or {}).get("python_env")
        # What was read from the old sandbox (over the agent's HTTP) must be
        # what the run started with: its sealed identity's digests, which the
        # new task's command checks.
        known = {scheduler_side.path: scheduler_side.sha256}
        for role, started in (("bundle", found.bundle_sha256),
                              ("task_side", found.task_side_sha256),
                              ("python_env", found.python_env_sha256)):
            if role in packed and started:
                known[packed[role]] = started
        command = fetch_checks(files, known) + command_of(spec, python_env, scheduler_side.name)
        uris_for = document_uris(server, backend.advertised_address(spec.master), python_env,
                                 files, new, body)
        say("run %s has no scheduler: launching scheduler task %d"
            % (run_id, identity.scheduler_attempt))
        launch_scheduler(spec, identity, uris_for, command,
                         float(document.get("scheduler_cpus") or 0.5),
                         float(document.get("scheduler_mem") or 512), say, environ=environ)
        say("the new scheduler took run %s over" % run_id)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


__all__ = ["submit", "relaunch_scheduler", "launch_scheduler", "DetachError"]
