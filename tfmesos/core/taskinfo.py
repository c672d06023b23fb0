"""FrameworkInfo and TaskInfo builders: pure functions from the run's spec
and a placed task to Mesos JSON (tested without a master or a driver)."""

import getpass
import os
import pwd
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

from ..protocol import labels as labels_
from ..protocol import task_env
from . import config

if TYPE_CHECKING:   # not imported at run time: tfrun's start-up reads this module
    from ..ship.shipping import Shipment
    from .identity import RunIdentity
    from .jobs import Job
    from .placement import Assignment
    from .slots import TaskSlot
    from .spec import RunSpec

FAILOVER_TIMEOUT = 60.0
MAX_LABEL_VALUE = 1000
# The directory that holds the tfmesos package.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PASSWD_VOLUMES = (("/etc/passwd", "/etc/passwd", "RO"), ("/etc/group", "/etc/group", "RO"))


def run_user(run: "RunSpec") -> str:
    """The user tasks run as: the run's, else the submitter's."""
    return run.user or getpass.getuser()


def another_user(user: Optional[str]) -> bool:
    """Whether ``user`` (``-u``; None: the submitter) is not this process's user."""
    if not user:
        return False
    try:
        return pwd.getpwnam(user).pw_uid != os.geteuid()
    except KeyError:
        return True


def framework_info(run: "RunSpec", jobs: "Sequence[Job]", identity: "Optional[RunIdentity]" = None,
                   rendezvous: Optional[str] = None, detached: bool = False) -> dict[str, Any]:
    """The FrameworkInfo a run of spec ``run`` subscribes with as
    ``identity`` (a ``RunIdentity``; None: no run's, e.g. a test's): its
    labels (``run_labels``) let ``tfmesos runs --master`` and ``tfmesos
    kill`` find the run, and tasks that lost their scheduler find its
    ``rendezvous`` (host:port); an identity with a framework id takes that
    framework over (Mesos' failover) and carries its proof
    (``labels.PROOF``). Its failover timeout: the run's (``--failover``,
    ``--detach``, which checkpoint), else 60 s."""
    # GPU_RESOURCES always: Mesos masters filter GPU agents out of the offers
    # of frameworks without it (--filter_gpu_resources=true, the default in
    # src/master/flags.cpp), and a CPU-only run may have to use them.
    info: dict[str, Any] = {"user": identity.user if identity is not None else run_user(run),
            "name": run.name,
            "failover_timeout": run.failover_timeout or FAILOVER_TIMEOUT,
            "capabilities": [{"type": "GPU_RESOURCES"}]}
    if run.failover_timeout is not None:
        # A run that outlives its scheduler outlives an agent's restart too: a
        # framework that does not checkpoint has its tasks lost, and killed, as
        # soon as an agent's connection to the master breaks (an upgrade, a
        # crash of mesos-agent: docs/high-availability-framework-guide.md,
        # docs/agent-recovery.md). Fixed for the framework's life, as Mesos
        # refuses to change it (src/master/master.cpp, updateFramework).
        info["checkpoint"] = True
    if run.role:
        info["roles"] = [run.role]
        # RESERVATION_REFINEMENT: without it Mesos offers none of the
        # resources whose reservation was refined (a parent role's handed on
        # to ml/team: stripIncapableResources, src/master/allocator/mesos/
        # hierarchical.cpp; docs/reservation.md). Its offers then carry the
        # ``reservations`` stack, which placement copies into each task as is.
        info["capabilities"] += [{"type": "MULTI_ROLE"}, {"type": "RESERVATION_REFINEMENT"}]
    if identity is not None:
        labels = run_labels(run, jobs, identity.run_id)
        if identity.framework_id:
            info["id"] = {"value": identity.framework_id}
            labels.append({"key": labels_.PROOF, "value": identity.framework_proof()})
        if rendezvous:
            labels.append({"key": labels_.RENDEZVOUS, "value": rendezvous})
        if detached:
            labels.append({"key": labels_.DETACHED, "value": "1"})
        info["labels"] = {"labels": labels}
    return info


def run_labels(run: "RunSpec", jobs: "Sequence[Job]", run_id: str) -> list[dict[str, str]]:
    """What a master shows of a run: its id, jobs, mode and command
    (cut to ``MAX_LABEL_VALUE`` characters, well inside what masters keep)."""
    values = {labels_.RUN_ID: run_id, labels_.JOBS: jobs_text(jobs),
              labels_.MODE: run.mode or "", labels_.COMMAND: run.recorded_command or ""}
    return [{"key": key, "value": value[:MAX_LABEL_VALUE]} for key, value in values.items()]


def jobs_text(jobs: "Iterable[Job]") -> str:
    """``worker:2,ps:1``: each job's name and its number of tasks."""
    return ",".join("%s:%d" % (job.name, job.num) for job in jobs)


def build_task(run: "RunSpec", slot: "TaskSlot", assignment: "Assignment[TaskSlot]",
               rendezvous: str, identity: "RunIdentity", quiet_tensorflow: bool = True,
               shipment: "Optional[Shipment]" = None, ship_host: Optional[str] = None,
               failover: Optional[Mapping[str, str]] = None,
               secrets: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """TaskInfo for ``slot`` (a ``TaskSlot`` whose ``task_id`` is set) placed by
    ``assignment``; tasks register at ``rendezvous`` ("host:port") with
    the key of ``identity`` (the run's ``RunIdentity``, whose id becomes
    ``TFMESOS_RUN_ID``). ``quiet_tensorflow=False`` (``tfrun -v``) leaves
    TensorFlow's logging as it is (see ``tensorflow_env``).
    ``shipment`` (``tfrun --ship``, a ``shipping.Shipment`` served at
    ``ship_host``): the task fetches what it ships and runs from it.
    ``secrets`` ({name: value}, ``task_secrets.values``) and the run's key
    go as Mesos value secrets (the key as a plain variable where Mesos
    passes no secrets, ``task_secrets.supported``)."""
    # Imported here: tfrun's start-up reads this module and needs no secrets.
    from . import task_secrets

    task_id = slot.task_id
    assert task_id is not None, "a slot is given its task id before its task is built"
    env = tensorflow_env(slot.job.gpus, quiet_tensorflow)
    env.update(thread_env(slot.job.cpus))
    env[task_env.GPUS] = str(slot.job.gpus)
    env.update(run.env)        # the user's own settings (-E, the job's env) win
    env.update(slot.job.env)
    env.update({
        task_env.RENDEZVOUS: rendezvous,
        task_env.TASK_ID: task_id,
        task_env.OFFER_HOST: assignment.hostname,
        "PYTHONUNBUFFERED": "1",
    })
    env.update(failover or {})   # failover_environment's
    env[task_env.RUN_ID] = identity.run_id
    hidden = dict(secrets or {})
    (hidden if task_secrets.supported(run) else env)[task_env.SECRET] = identity.key.hex()
    if assignment.port:
        env[task_env.PORT] = str(assignment.port)
    if assignment.extra_ports:
        # Reserved by Mesos for the coordinator of the whole job (Keras/JAX's,
        # KERAS_DISTRIBUTION_JOB_ADDRESSES); see clusterspec.keras_environment.
        env[task_env.COORDINATOR_PORT] = str(assignment.extra_ports[0])
    container = container_info(run) if run.image else None
    if shipment is not None:
        env.update(shipment.environment())
        command, uris = shipment.command(run.image, run.python), shipment.uris(ship_host)
    else:
        no_site = False
        if not run.image:
            env["PYTHONPATH"] = plain_pythonpath(env.get("PYTHONPATH"))
            no_site = run.mode == "replica" and package_on_path(env["PYTHONPATH"])
        command, uris = task_command(run.image, run.python, no_site), None
    return build_task_info(task_id, "%s %s" % (run.name, slot.name), assignment.agent_id,
                           assignment.resources, command, env,
                           container, labels={"tfmesos.job": slot.job.name,
                                              "tfmesos.index": slot.index}, uris=uris,
                           secrets=hidden)


def failover_environment(run: "RunSpec", master: Optional[str], framework_id: Optional[str]
                         ) -> dict[str, str]:
    """The task environment of a run whose tasks outlive its scheduler
    (``--failover``, ``--detach``): how long, and where to find the next
    one (``master``: the leading master's URL); {} for any other run."""
    if run.failover_timeout is None:
        return {}
    return {task_env.FAILOVER_TIMEOUT: "%g" % run.failover_timeout,
            task_env.MASTER: master or "", task_env.FRAMEWORK_ID: framework_id or "",
            task_env.FAILOVER_TASKS: str(sum(job.num for job in run.jobs))}


def tensorflow_env(gpus: int, quiet: bool = True) -> dict[str, str]:
    """TensorFlow's variables for a task; the run's and the job's own win.

    ``TF_CPP_MIN_LOG_LEVEL=2`` (with ``quiet``) keeps errors of TensorFlow's
    C++ logging and drops INFO and WARNING; a task without GPUs gets
    ``TF_ENABLED_DEVICE_TYPES=CPU`` (``tensorflow/core/framework/
    device_factory.cc``): TensorFlow registers no GPU device, so it neither
    calls cuInit (an error line where there is no CUDA driver) nor takes a
    GPU Mesos did not give the task.
    """
    env: dict[str, str] = {}
    if quiet:
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    if not gpus:
        env["TF_ENABLED_DEVICE_TYPES"] = "CPU"
    return env


INTEROP_THREADS = 2


def thread_env(cpus: float) -> dict[str, str]:
    """Thread pools sized to the task's ``cpus``, not to the agent's cores:
    TensorFlow sizes its pools from ``TF_NUM_INTRAOP_THREADS`` and
    ``TF_NUM_INTEROP_THREADS`` when set, else from every core of the machine
    (tensorflow/core/common_runtime/process_util.cc), which oversubscribes a
    task held to 1 cpu on a 64-core agent; OpenMP (oneDNN) reads
    ``OMP_NUM_THREADS``. Intra-op = max(1, round(cpus)); inter-op stays small
    (2: a collective op waiting for its peers must not starve the rest)."""
    intra = max(1, int(round(cpus)))
    return {"TF_NUM_INTRAOP_THREADS": str(intra),
            "TF_NUM_INTEROP_THREADS": str(INTEROP_THREADS),
            "OMP_NUM_THREADS": str(intra)}


def task_command(image: Optional[str], python: Optional[str] = None, no_site: bool = False
                 ) -> str:
    """The entry point's command line. Inside an image the image's own
    ``python3`` runs it; plain tasks use ``python`` (``--python``), else
    this interpreter (same install), whose directory comes first on the
    task's PATH (``python_first``): ``python`` in the user's command is the
    one running the entry, as the README says. ``no_site``: with ``-S`` (no ``site``: ~35
    ms less per task), for a replica task entry, which needs only the
    standard library and tfmesos, found on its PYTHONPATH
    (``package_on_path``)."""
    # exec: Mesos' SIGTERM must reach the entry point itself, not a shell.
    if image:
        return "exec python3 -m tfmesos.task"
    python = python or sys.executable
    return "%sexec %s%s -m tfmesos.task" % (python_first(python), shlex.quote(python),
                                            " -S" if no_site else "")


def task_entry_needs(run: "RunSpec") -> tuple[Optional[str], Optional[str]]:
    """What a plain task's entry needs of the agent, ``(python, pythonpath)``:
    the interpreter (a path, or a name on the task's PATH; None: it comes
    with the run, ``--python-env``) and the PYTHONPATH that must lead to
    tfmesos (None: its task side is shipped), as ``build_task`` decides."""
    if run.ship is None:
        return run.python or sys.executable, submitter_pythonpath()
    python = run.python
    if run.ship.python_env is not None and not (python and os.path.isabs(python)):
        return None, None
    return python or "python3", None


def python_first(python: Optional[str]) -> str:
    """The shell assignment that puts the directory of ``python`` (a path)
    first on the task's PATH, the rest of its PATH kept: ``python`` and
    ``python3`` in the command are then ``--python``'s (a virtual
    environment's bin/ holds both). Nothing for a name looked up on PATH."""
    directory = os.path.dirname(python or "")
    if not directory:
        return ""
    # A relative one is where the command starts: the sandbox, which the
    # task entry leaves for the command's working directory.
    where = shlex.quote(directory) if os.path.isabs(directory) \
        else '"${MESOS_SANDBOX:-$PWD}"/' + shlex.quote(directory)
    return 'PATH=%s"%s" ' % (where, task_env.PATH_REST)


def package_on_path(pythonpath: str) -> bool:
    """Whether ``pythonpath`` itself leads to this tfmesos package (not only
    an editable install's finder, which ``site`` sets up)."""
    return _PACKAGE_PARENT in pythonpath.split(os.pathsep)


def plain_pythonpath(given: Optional[str]) -> str:
    """A plain task's PYTHONPATH: this process's (``submitter_pythonpath``),
    then the one the user gave (-E, a job's env), as a shipped task's
    command puts its bundle before it; the user's was replaced."""
    return submitter_pythonpath() + (os.pathsep + given if given else "")


def submitter_pythonpath(path: Optional[Iterable[str]] = None) -> str:
    """PYTHONPATH that lets a plain task import what this process imports."""
    entries: list[str] = []
    for entry in sys.path if path is None else path:
        entry = os.path.abspath(entry or os.getcwd())
        if os.path.isdir(entry) and entry not in entries:
            entries.append(entry)
    return os.pathsep.join(entries)


def container_info(run: "RunSpec") -> Optional[dict[str, Any]]:
    """The TaskInfo ``container`` for ``run.image`` (None for a plain task), for
    ``run.containerizer``. GPUs need nothing here: the Mesos containerizer's
    nvidia isolator gives a task the GPUs of its ``gpus`` resource (and DOCKER
    with GPUs is refused up front, see ``spec.check_run``)."""
    if not run.image:
        return None
    # The user's own /etc/passwd or /etc/group volume takes the place of
    # tfmesos' (two at one path: "Duplicate mount point", from Docker).
    given = {container for _, container, _ in run.volumes}
    volumes = [{"container_path": container, "host_path": host, "mode": mode}
               for host, container, mode in tuple(v for v in PASSWD_VOLUMES if v[1] not in given)
               + tuple(run.volumes)]
    if run.containerizer == "DOCKER":
        parameters = [{"key": key, "value": value} for key, value in run.docker_parameters]
        if not any(key in ("user", "u") for key, _ in run.docker_parameters):
            # The Docker containerizer ignores the framework's user: say it to Docker.
            parameters.append({"key": "user", "value": run_user(run)})
        return {"type": "DOCKER", "volumes": volumes,
                "docker": {"image": run.image, "network": "HOST",
                           "force_pull_image": bool(run.force_pull),
                           "parameters": parameters}}
    return {"type": "MESOS", "volumes": volumes,
            "mesos": {"image": {"type": "DOCKER", "docker": {"name": run.image},
                                "cached": not run.force_pull}}}


def build_task_info(task_id: str, name: str, agent_id: str, resources: Iterable[Mapping[str, Any]],
                    command: str, env: Mapping[str, object],
                    container: Optional[Mapping[str, Any]] = None,
                    labels: Optional[Mapping[str, object]] = None,
                    uris: Optional[Iterable[Mapping[str, Any]]] = None,
                    secrets: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """A command task's TaskInfo: ``env`` as plain variables, ``secrets``
    ({name: value}) as Mesos value secrets (``task_secrets``; one wins over
    a plain variable of its name), sorted by name."""
    from . import task_secrets
    secrets = secrets or {}
    variables = [task_secrets.variable(key, secrets[key]) if key in secrets
                 else {"name": key, "value": str(env[key])}
                 for key in sorted(set(env) | set(secrets))]
    info: dict[str, Any] = {
        "name": name,
        "task_id": {"value": task_id},
        "agent_id": {"value": agent_id},
        "resources": list(resources),
        "command": {"value": command, "shell": True,
                    "environment": {"variables": variables}},
    }
    if uris:
        info["command"]["uris"] = list(uris)
    if container is not None:
        info["container"] = container
    if labels:
        info["labels"] = {"labels": [{"key": k, "value": str(v)} for k, v in sorted(labels.items())]}
    return info


def warm_task_command(run: "RunSpec") -> Optional[tuple[str, dict[str, str], int]]:
    """(command, environment, tasks) of the plain replica tasks of ``run``
    (``exec PYTHON [-S] -m tfmesos.task``, how many) when the embedded
    master may start them warm (``backends.warm_runner``), else None. The
    environment is a guess — the embedded master's executor environment
    (this process's unless the run's master options set one) and the run's
    variables, before a job's own —: the agent compares the interpreter
    variables of each launch's own (``backends.warm_runner.matches``)."""
    # Another interpreter (--python) is the user's to run at each task start:
    # it may be a wrapper that does more than start Python. The PATH the
    # command sets (python_first) the warm runner gives the task itself.
    # Tasks of another user (-u) are exec'd as that user.
    if run.master != config.LOCAL or run.mode != "replica" or run.image \
            or run.ship is not None or run.python is not None or another_user(run.user) \
            or os.environ.get("TFMESOS_WARM_TASKS", "1") == "0":
        return None
    pythonpath = submitter_pythonpath()
    options = getattr(run, "local_master_options", None) or {}
    if "executor_environment" in options:
        env = dict(options["executor_environment"] or {})
    else:
        from ..backends.sizing import executor_environment
        env = executor_environment()   # start_local_master's default
    env.update(run.env)
    # (The TaskInfo's PYTHONPATH replaces the executor's: the run's own -E only.)
    env.update({"PYTHONUNBUFFERED": "1",
                "PYTHONPATH": plain_pythonpath(dict(run.env).get("PYTHONPATH"))})
    # As taskinfo.build_task decides: without ``site`` when the path itself
    # finds tfmesos (not only an editable install's finder).
    no_site = package_on_path(pythonpath)
    tasks = sum(job.num for job in run.jobs)
    return task_command(None, None, no_site), env, tasks
