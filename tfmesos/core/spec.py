"""Run specs: small value objects that validate themselves.

A ``RunSpec`` is everything one run needs: its jobs (``jobs.Job``: one kind
of task, ``ps``, ``worker``, ``chief``, ..., with its count and resources),
mode and command, master and TLS settings, containers, volumes, role,
timeouts, recovery and run directory. ``tfrun`` and ``cluster()`` each build
one, and it checks itself once, on construction: bad values raise a
``SpecError`` whose message says what to change, before anything launches,
naming the fields to change (``error_fields``), which each caller words as
it is called (tfrun: its flags; ``cluster()``, ``tfmesos.run()``: their
keyword arguments).
"""

import collections
import dataclasses
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Optional

from ..exceptions import SpecError
from ..field_methods import FrozenFieldMethods
from ..mesos.master_address import parse_master
from ..mesos.roles import role_error
from ..protocol import task_env
from .config import LOCAL
from .inputs import (
    MAX_ATTEMPTS,
    MAX_NAME,
    MAX_SECONDS,
    MAX_TASKS,
    as_switch,
    has_control_characters,
    number_error,
)

# Jobs are a module of their own (``jobs``); a run's spec names them too.
from .jobs import (
    Job,
    check_command_template,
    parse_jobs,
)
from .restarts import RestartPolicy
from .spec_fields import check_exec_size, env_tuple, secret_names, volume_tuple
from .training_frameworks import (
    FRAMEWORKS,
    GROUP_JOB,
    MAX_NPROC_PER_TASK,
    OUTSIDE_GROUP,
    TENSORFLOW,
    TORCH,
)
from .volumes import SANDBOX_MOUNT, parse_volume

if TYPE_CHECKING:   # not imported at run time: most runs ship nothing, log to no MLflow
    from ..record.mlflow_mapping import MlflowSpec
    from ..ship.bundle import ShipSpec

CONTAINERIZERS = ("MESOS", "DOCKER")
MODES = ("fine", "replica")
AUTO = "auto"               # run_dir: the default directory for the run
STICKY_TIMEOUT = 120.0
RECONNECT_GRACE = 40.0      # the task side retries for 30 s (task/connection.py)
# A master never reached that refuses every connection (nothing listens at
# its port) ends the wait after this long unless the user chose a connect
# timeout: a master that is starting listens sooner ("or --connect-timeout
# to wait longer").
REFUSED_TIMEOUT = 5.0




def _ca_bundle_error(path: str, load: bool) -> Optional[str]:
    """Why ``path`` is no bundle of certificates the driver can load (with
    ``load``: it is loaded), or None."""
    if not os.path.exists(path):
        return "no such file"
    if os.path.isdir(path):
        return "a directory, not a file of certificates"
    if not os.path.isfile(path):
        return "not a regular file (a file of PEM certificates)"
    if not load:
        return None
    import ssl  # only with a bundle: the driver loads it as this does
    try:
        ssl.create_default_context(cafile=path)
    except ssl.SSLError as exc:
        return "holds no certificate Python's ssl can load (%s): give a file of PEM " \
            "certificates" % (exc.reason or exc)
    except OSError as exc:
        return "cannot read it (%s)" % (exc.strerror or exc)
    return None

@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class RunSpec(FrozenFieldMethods):
    """Everything about one run.

    * What runs: ``jobs`` (``Job`` objects or dicts), ``mode`` "fine"
      (TensorFlow servers, ``cluster()``) or "replica" (``command``, a
      template with ``{placeholders}``, in every task; ``hooks``: shell
      ``initializer`` / ``finalizer``), ``coordinator`` (fine mode: the
      calling process is the chief); ``shown_command``: what the record
      says runs instead of ``command`` (``cluster()``, ``tfmesos.run()``);
      ``framework`` (replica mode), whose variables the tasks get
      (``training_frameworks``): "tensorflow" (``TF_CONFIG``, the default), "torch"
      (``tfrun --torch``: ``MASTER_ADDR``, ``RANK``, ...; ``nproc_per_task``:
      the processes the command starts in each task) or "jax" (``tfrun
      --jax``), the last two with workers only.
    * Where: ``master`` (host:port, zk://..., or "local"), ``role``, ``user``;
      https masters: ``verify``, ``ca_bundle``, ``master_scheme`` (zk://);
      ``advertise_address`` (what tasks reach us at), ``connect_timeout``
      (default 60 s) and ``refused_timeout`` (a master never reached that
      refuses every connection: the connect timeout when one was given,
      else ``REFUSED_TIMEOUT``);
      ``local_master`` (options of the embedded master).
    * How: ``image`` (None: plain command tasks run by ``python``, whose
      directory then comes first on their PATH: ``taskinfo.python_first``),
      ``containerizer`` MESOS (the default, as in the original TFMesos: a
      Docker image under the Mesos containerizer) or DOCKER,
      ``force_pull``, ``volumes`` (``host:container[:ro|rw]``), ``env``,
      ``docker_parameters``; ``quiet_tensorflow`` (False: ``tfrun -v``).
    * When things fail: ``launch_timeout``, ``max_attempts``,
      ``reconnect_grace``; ``restart_policy`` (``restarts.RestartPolicy``),
      ``sticky_jobs`` / ``sticky_timeout`` (relaunch in place).
    * What it leaves: ``run_dir`` (``AUTO``: the default directory; None:
      none) and ``logs`` (``tfrun --logs`` choices of what is shown).
    * What it sends: ``ship`` (a ``bundle.ShipSpec``, or a directory for
      one with the defaults): the user's directory, the task side of
      tfmesos and a packed Python environment, fetched by every task.
    * Where else it is logged: ``mlflow`` (``tfrun --mlflow``,
      ``cluster(mlflow=...)``): True (``$MLFLOW_TRACKING_URI``, else
      MLflow's default here, ``sqlite:///mlflow.db``), a tracking URI or
      path, or a ``record.mlflow_mapping.MlflowSpec``; kept as an
      ``MlflowSpec``."""

    name: str = "tfmesos"
    role: Optional[str] = None
    image: Optional[str] = None
    containerizer: str = "MESOS"
    force_pull: bool = False
    volumes: tuple[tuple[str, str, str], ...] = ()       # (host, container, RO|RW)
    env: tuple[tuple[str, str], ...] = ()
    # Names of variables of the submitter's environment whose values reach the
    # scheduler and the tasks as Mesos secrets (``tfrun --secret-env``): the
    # values are never part of the spec, nor of anything it is saved in.
    secret_env: tuple[str, ...] = ()
    docker_parameters: tuple[tuple[str, str], ...] = ()
    launch_timeout: float = 600.0
    max_attempts: int = 3
    user: Optional[str] = None
    python: Optional[str] = None   # interpreter of plain command tasks (default: this one)
    jobs: tuple[Job, ...] = ()
    mode: str = "fine"
    command: Optional[str] = None
    # What run.json's ``command``, ``tfmesos runs`` and the master's labels
    # say the run runs, where that is not ``command``: ``tfmesos.run(train)``
    # (whose tasks run its runner), ``tfmesos.cluster(worker:2)`` (``core.caller``).
    shown_command: Optional[str] = None
    # These two take a dict too, kept as its items.
    hooks: tuple[tuple[str, str], ...] = ()  # (("initializer", "cmd"), ("finalizer", "cmd"))
    coordinator: bool = False
    master: str = LOCAL
    verify: bool = True
    ca_bundle: Optional[str] = None
    master_scheme: str = "http"
    advertise_address: Optional[str] = None
    connect_timeout: Optional[float] = None   # None: 60 s
    refused_timeout: Optional[float] = None   # None: connect_timeout if given, else 5 s
    local_master: tuple[tuple[str, Any], ...] = ()   # (("option", value), ...): the embedded master's
    quiet_tensorflow: bool = True
    reconnect_grace: float = RECONNECT_GRACE
    restart_policy: RestartPolicy = RestartPolicy()
    sticky_jobs: tuple[str, ...] = ()
    sticky_timeout: float = STICKY_TIMEOUT
    run_dir: Optional[str] = AUTO
    logs: tuple[str, ...] = ()
    ship: Optional["ShipSpec"] = None   # tfrun --ship, cluster(ship=...): a directory too
    mlflow: Optional["MlflowSpec"] = None  # tfrun --mlflow, mlflow=...: True or a URI too
    # tfrun --failover, --detach: the tasks outlive the scheduler this long
    # (FrameworkInfo.failover_timeout); None: they stop with it (60 s for Mesos).
    failover_timeout: Optional[float] = None
    framework: str = TENSORFLOW     # tfrun --torch, --jax (training_frameworks.FRAMEWORKS)
    nproc_per_task: int = 1         # tfrun --torch --nproc-per-task N
    # tfrun --torch-elastic MIN:MAX: torchrun's elastic --nnodes; the workers sticky
    elastic: Optional[tuple[int, int]] = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise SpecError("the framework name must be a non-empty string")
        for flag in ("force_pull", "coordinator", "verify", "quiet_tensorflow"):
            switch = as_switch(getattr(self, flag))   # "no" would be True
            if switch is None:
                raise SpecError("%s must be True or False, got %r" % (flag, getattr(self, flag)))
            object.__setattr__(self, flag, switch)
        if self.python is not None and not isinstance(self.python, str):
            raise SpecError("python must be a path (a string), got %r" % (self.python,))
        if len(self.name) > MAX_NAME or has_control_characters(self.name):
            raise SpecError.about("the run's name ({name}) must be at most %d characters, none "
                                  "of them a control character: give a shorter one", MAX_NAME)
        if isinstance(self.run_dir, os.PathLike):
            object.__setattr__(self, "run_dir", os.fspath(self.run_dir))
        if self.run_dir is not None and not isinstance(self.run_dir, str):
            raise SpecError.about("{run_dir} takes a directory (a path); got %r", self.run_dir)
        upper = str(self.containerizer or "MESOS").upper()
        if upper not in CONTAINERIZERS:
            raise SpecError("unknown containerizer %r: use MESOS or DOCKER"
                            % (self.containerizer,))
        object.__setattr__(self, "containerizer", upper)
        if self.user is not None and not (isinstance(self.user, str) and self.user.strip()
                                          and not any(c.isspace() for c in self.user)):
            raise SpecError("invalid user %r: give a user name that exists on the agents"
                            % (self.user,))
        if self.image is not None and not (isinstance(self.image, str) and self.image.strip()):
            raise SpecError("the image name must be a non-empty string")
        if self.image is not None:
            from .image_names import image_name_error
            why = image_name_error(self.image)
            if why:
                raise SpecError.about("{image}: %s", why)
        if self.role is not None:
            why = role_error(self.role) if isinstance(self.role, str) else "not a string"
            if why:
                raise SpecError("invalid Mesos role %r (%s): use a name like 'ml' or 'ml/team'"
                                % (self.role, why))
        object.__setattr__(self, "volumes", tuple(parse_volume(v) if isinstance(v, str) else
                                                  volume_tuple(v) for v in self.volumes))
        targets = collections.Counter(container for _, container, _ in self.volumes)
        for target in targets:
            if target == SANDBOX_MOUNT:
                # Mesos mounts the sandbox there: Docker refuses a second mount
                # ("Duplicate mount point"), three attempts later.
                raise SpecError.about("{volumes}: %s is where Mesos mounts the task's sandbox: "
                                      "mount elsewhere", target)
            if targets[target] > 1:
                raise SpecError.about("{volumes}: two volumes at %s: Docker refuses a duplicate "
                                      "mount point; give one", target)
        # tfmesos.run's own names come in its env (core.function_run); a
        # user's are refused where given (spec_fields.refuse_function_run_names).
        object.__setattr__(self, "env", env_tuple(self.env, own=task_env.FUNCTION_RUN))
        object.__setattr__(self, "secret_env", secret_names(self.secret_env,
                                                             {name for name, _ in self.env}))
        if self.secret_env and self.image and upper == "DOCKER":
            # src/docker/docker.cpp copies a variable's value(), empty for a secret.
            raise SpecError.about("{secret_env} needs the Mesos containerizer: the Docker "
                                  "containerizer passes no secrets to a task (Mesos "
                                  "docs/secrets.md): use {containerizer=MESOS} (the default)")
        params = []
        for item in self.docker_parameters:
            key, value = item.split("=", 1) if isinstance(item, str) and "=" in item else item
            if str(key) == "name":
                # src/common/validation.cpp refuses it (MESOS-8497): TASK_ERROR
                raise SpecError("docker_parameters: Mesos refuses the Docker parameter "
                                "'name' (its Docker containerizer names the container): "
                                "drop it")
            params.append((str(key), str(value)))
        object.__setattr__(self, "docker_parameters", tuple(params))
        if self.refused_timeout is None:
            object.__setattr__(self, "refused_timeout", REFUSED_TIMEOUT
                               if self.connect_timeout is None else self.connect_timeout)
        if self.connect_timeout is None:
            object.__setattr__(self, "connect_timeout", 60.0)
        for field in ("launch_timeout", "connect_timeout", "refused_timeout", "reconnect_grace",
                      "sticky_timeout"):
            why = number_error(getattr(self, field), 0, MAX_SECONDS, low_open=True)
            if why:
                raise SpecError.about("{%s} %%s seconds, got %%r" % field, why,
                                      getattr(self, field))
        _check_int(self, "max_attempts", 1, MAX_ATTEMPTS)
        if self.failover_timeout is not None:
            why = number_error(self.failover_timeout, 0, MAX_SECONDS, low_open=True)
            if why:
                raise SpecError.about("{failover_timeout} %s seconds, got %r", why,
                                      self.failover_timeout)
        for field in ("hooks", "local_master"):
            value = getattr(self, field)
            object.__setattr__(self, field, tuple((value or {}).items())
                               if isinstance(value, dict) else tuple(value or ()))
        object.__setattr__(self, "sticky_jobs", tuple(self.sticky_jobs))
        if self.elastic is not None:   # a lost worker is relaunched alone, and rejoins
            object.__setattr__(self, "elastic", tuple(self.elastic))
            if GROUP_JOB not in self.sticky_jobs:
                object.__setattr__(self, "sticky_jobs", self.sticky_jobs + (GROUP_JOB,))
        object.__setattr__(self, "logs", tuple(self.logs))
        self._check_connection()
        self._check_ship()
        self._check_mlflow()
        if self.jobs:
            object.__setattr__(self, "jobs", tuple(parse_jobs(list(self.jobs))))
            self._check_jobs()

    def _check_connection(self) -> None:
        if not isinstance(self.master, str) or not self.master.strip():
            raise SpecError("the master must be host:port, zk://host:port/path or 'local'")
        if self.advertise_address:
            from ..backends.advertise import malformed  # only when one is given
            why = malformed(self.advertise_address)
            if why:
                raise SpecError.like(why)
        if self.master != LOCAL:
            parse_master(self.master)   # MasterAddressError, naming the problem
        if self.master_scheme not in ("http", "https"):
            raise SpecError("master scheme must be http or https, got %r" % (self.master_scheme,))
        if self.ca_bundle:
            # Loaded only for a master over https (else unused_settings says it is unused).
            unusable = _ca_bundle_error(self.ca_bundle, load=self.master_scheme == "https"
                                        or self.master.startswith("https://"))
            if unusable:
                raise SpecError.about("{ca_bundle=%s}: %s", self.ca_bundle, unusable)

    def _check_ship(self) -> None:
        if self.ship is None:
            return
        from ..ship.bundle import ShipSpec
        if isinstance(self.ship, (str, os.PathLike)):
            object.__setattr__(self, "ship", ShipSpec(os.fspath(self.ship)))
        if not isinstance(self.ship, ShipSpec):
            raise SpecError("ship must be a directory or a tfmesos.ship.bundle.ShipSpec, got %r"
                            % (self.ship,))
        if self.ship.python_env and self.image:
            raise SpecError.about("{ship.python_env} runs plain tasks with the archive's "
                                  "interpreter, and an image has its own Python: drop {image} "
                                  "or {ship.python_env}")

    def _check_mlflow(self) -> None:
        if self.mlflow is None or self.mlflow is False:
            object.__setattr__(self, "mlflow", None)
            return
        import importlib.util

        from ..record.mlflow_mapping import NOT_INSTALLED, mlflow_spec
        object.__setattr__(self, "mlflow", mlflow_spec(self.mlflow))
        if importlib.util.find_spec("mlflow") is None:   # not imported: the logger does
            raise SpecError.about("{mlflow} %s", NOT_INSTALLED)

    def _check_jobs(self) -> None:
        if self.mode not in MODES:
            raise SpecError("mode must be 'fine' or 'replica', got %r" % (self.mode,))
        self._check_framework()
        if self.mode == "replica":
            if not self.command or not self.command.strip():   # '   ': sh -c ran nothing, 0
                raise SpecError("replica mode needs a command to run in every task")
            check_command_template(self.command, self.jobs, self.framework)
        else:
            for job in self.jobs:
                if job.cmd is not None:
                    raise SpecError.about(
                        "job %r: {job.cmd} is a command for tfrun's replica mode; a cluster() "
                        "task runs a TensorFlow server: drop {job.cmd} and drive the servers "
                        "from the with block, or run the command with tfrun", job.name,
                        job=job.name)
        names = {job.name for job in self.jobs}
        if self.coordinator and "chief" in names:
            raise SpecError("coordinator=True makes the calling process the chief; "
                            "drop the 'chief' job or the coordinator option")
        chief = "chief" in names or self.coordinator
        if self.sticky_jobs and self.elastic is None and not (chief and "worker" in names):
            # (Each says what is missing: with a chief and no workers, "add a
            # chief" was no fix.)
            raise SpecError.about("{sticky_jobs} needs a chief and workers "
                                  "(ParameterServerStrategy): %s, or drop {sticky_jobs}"
                                  % ("add workers" if chief else "add {jobs.chief}"))
        total = sum(job.num for job in self.jobs)
        if total > MAX_TASKS:
            raise SpecError("the run asks for %d tasks; at most %d per run: ask for fewer"
                            % (total, MAX_TASKS))
        check_run(self, self.jobs)
        for job in self.jobs:   # what its tasks start with: the run's env, then the job's
            env = dict(self.env)
            env.update(job.env)
            check_exec_size(env.items(), job.cmd or self.command or "",
                            "job %r (the run's env and its own)" % job.name if job.env
                            else "the run")

    def _check_framework(self) -> None:
        """A torch or jax run is one process group of workers, in replica
        mode (``training_frameworks``)."""
        if self.framework not in FRAMEWORKS:
            raise SpecError.about("unknown {framework} %r: use one of %s", self.framework,
                                  ", ".join(FRAMEWORKS))
        _check_int(self, "nproc_per_task", 1, MAX_NPROC_PER_TASK, " (processes per task)")
        if self.nproc_per_task != 1 and self.framework != TORCH:
            raise SpecError.about("{nproc_per_task} is for {framework=torch}: the processes "
                                  "torchrun (or the command) starts in each task")
        self._check_elastic()
        if self.framework == TENSORFLOW:
            return
        if self.mode != "replica":
            raise SpecError.about("{framework=%s} runs a command in every task (replica "
                                  "mode, tfrun); fine mode runs TensorFlow servers",
                                  self.framework)
        others = [job.name for job in self.jobs
                  if job.name != GROUP_JOB and job.name not in OUTSIDE_GROUP]
        if others:
            raise SpecError.about("{framework=%s} runs workers only, one process group: "
                                  "drop the %s task(s)", self.framework, ", ".join(others))
        if not any(job.name == GROUP_JOB for job in self.jobs):
            raise SpecError.about("{framework=%s} needs workers: the process group is theirs",
                                  self.framework)

    def _check_elastic(self) -> None:
        """``elastic``: (MIN, MAX) nodes of torchrun's ``--nnodes MIN:MAX``,
        a torch run whose workers number between them."""
        if self.elastic is None:
            return
        nodes = self.elastic
        if self.framework != TORCH:
            raise SpecError.about("{elastic} is for {framework=torch}: torchrun's elastic "
                                  "rendezvous")
        if len(nodes) != 2 or any(number_error(n, 1, MAX_TASKS, integer=True) for n in nodes) \
                or nodes[0] > nodes[1]:
            raise SpecError.about("{elastic} is MIN:MAX nodes, 1 <= MIN <= MAX <= %d, got %s",
                                  MAX_TASKS, ":".join(str(n) for n in nodes))
        workers = sum(job.num for job in self.jobs if job.name == GROUP_JOB)
        if not nodes[0] <= workers <= nodes[1]:
            raise SpecError.about("{elastic} %d:%d needs between %d and %d workers, got %d: "
                                  "ask for %d", nodes[0], nodes[1], nodes[0], nodes[1], workers,
                                  nodes[1])

    @property
    def recorded_command(self) -> Optional[str]:
        """What the run is said to run (run.json's ``command``, ``tfmesos
        runs``, the master's labels): ``shown_command``, else a replica
        run's ``command``."""
        return self.shown_command or (self.command if self.mode == "replica" else None)

    @property
    def hook_commands(self) -> dict[str, str]:
        return dict(self.hooks)

    @property
    def local_master_options(self) -> dict[str, Any]:
        return dict(self.local_master)

    def driver_options(self) -> dict[str, Any]:
        """The driver's TLS and zk:// settings."""
        return {"verify": self.verify, "ca_bundle": self.ca_bundle,
                "scheme": self.master_scheme}


def check_run(run: RunSpec, jobs: Iterable[Job]) -> None:
    """What the run and its jobs cannot do together: GPUs under the Docker
    containerizer (Mesos isolates GPUs in the Mesos containerizer only,
    docs/gpu-support.md; the Docker containerizer passes a ``gpus`` parameter
    through verbatim, which always means GPUs 0..N-1 to Docker, not the ones
    Mesos gave the task)."""
    if run.image and run.containerizer == "DOCKER" and any(job.gpus for job in jobs):
        raise SpecError.about("GPUs need the Mesos containerizer: use {containerizer=MESOS} "
                              "(the default) instead of {containerizer=DOCKER}")




def _check_int(run: RunSpec, field: str, minimum: int, maximum: int, what: str = "") -> None:
    value = getattr(run, field)
    why = number_error(value, minimum, maximum, integer=True)
    if why:
        raise SpecError.about("the run: {%s} %%s%s, got %%r" % (field, what), why, value)
