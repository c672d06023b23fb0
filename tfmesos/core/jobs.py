"""Jobs: what kinds of task a run has (``ps``, ``worker``, ``chief``,
...), each a ``Job`` with its count and resources that validates itself
(a ``SpecError`` naming the field to change, ``error_fields``); the jobs
callers give, parsed (``parse_jobs``); and the placeholders a replica
command may name of them (``check_command_template``). ``spec.RunSpec``
holds a run's jobs."""

import collections
import dataclasses
import math
import re
import string
from collections.abc import Iterable, Sequence
from typing import Any, Optional, Union

from ..exceptions import SpecError
from ..field_methods import FrozenFieldMethods
from .inputs import MAX_CPUS, MAX_GPUS, MAX_MEM_MB, MAX_TASK_INDEX, MAX_TASKS, milli, number_error
from .spec_fields import env_tuple
from .training_frameworks import TENSORFLOW, TORCH, framework_placeholders

TRAINER_JOBS = ("chief", "worker", "ps")
# A run's helpers (tfrun --tensorboard): their end ends no training.
HELPER_JOBS = ("tensorboard",)
REPLICA_JOBS = TRAINER_JOBS + ("evaluator",)
SINGLETON_JOBS = ("chief", "evaluator")
# At most 64 characters: a task id (``tfmesos.RUN.JOB.INDEX.ATTEMPT``) stays
# within Mesos' 255 (``validateID``, src/common/validation.cpp).
MAX_JOB_NAME = 64
_JOB_NAME = re.compile(r"^[a-z][a-z0-9_]{0,%d}\Z" % (MAX_JOB_NAME - 1))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Job(FrozenFieldMethods):
    """``num`` tasks of job ``name``, each with ``cpus``, ``mem`` (MB) and
    whole ``gpus``; ``cmd`` overrides the run's command for this job (replica mode);
    ``start`` is the index of its first task; ``env`` extra variables."""

    name: str
    num: int = 1
    cpus: float = 1.0
    mem: float = 1024.0
    gpus: int = 0
    cmd: Optional[str] = None
    start: int = 0
    env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _JOB_NAME.match(self.name):
            raise SpecError("invalid job name %r: use lower-case letters, digits and '_', "
                            "starting with a letter, at most %d characters (e.g. 'worker')"
                            % (self.name, MAX_JOB_NAME))
        _check_job_int(self, "num", 1, MAX_TASKS, " (tasks per run)")
        _check_job_int(self, "start", 0, MAX_TASK_INDEX)
        for field, most in (("cpus", MAX_CPUS), ("mem", MAX_MEM_MB)):
            value = getattr(self, field)
            why = number_error(value, 0, most, low_open=True)
            if not why and value < 0.0005:
                # Mesos keeps scalars in fixed point with three decimals
                # (src/common/values.cpp, convertToFixed) and refuses a
                # non-zero one that rounds to 0 (Resources::validate,
                # src/common/resources.cpp: "value <= 0"): TASK_ERROR.
                why = "must be at least 0.0005 (Mesos keeps three decimals)"
            if why:
                raise SpecError.about("job %%r: {job.%s} %%s%s, got %%r" % (
                    field, " (MB)" if field == "mem" else ""), self.name, why, value,
                    job=self.name)
            # As Mesos keeps it (inputs.milli): what TaskInfos, totals,
            # messages and run.json say is what the agents count.
            object.__setattr__(self, field, milli(value) / 1000)
        gpus = self.gpus
        if isinstance(gpus, float) and math.isfinite(gpus) and float(gpus).is_integer():
            gpus = int(gpus)
        if number_error(gpus, 0, MAX_GPUS, integer=True):
            raise SpecError.about("job %r: {job.gpus} %s (Mesos allocates whole GPUs), got %r",
                                  self.name, number_error(gpus, 0, MAX_GPUS, integer=True),
                                  self.gpus, job=self.name)
        object.__setattr__(self, "gpus", gpus)
        if self.cmd is not None and not (isinstance(self.cmd, str) and self.cmd.strip()):
            raise SpecError.about("job %r: {job.cmd} must be a non-empty string or None",
                                  self.name, job=self.name)
        object.__setattr__(self, "env", env_tuple(self.env, self.name))
        if self.name in SINGLETON_JOBS and self.num != 1:
            raise SpecError.about("job %r: at most one %s task is allowed, got {job.num=%d}",
                                  self.name, self.name, self.num, job=self.name)

    @classmethod
    def from_dict(cls, data: object) -> "Job":
        if isinstance(data, Job):
            return data
        if not isinstance(data, dict):
            raise SpecError("a job must be a tfmesos.Job or a dict, got %r" % (data,))
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise SpecError("unknown job field(s) %s; known: %s"
                            % (", ".join(map(repr, unknown)), ", ".join(sorted(fields))))
        if "name" not in data:
            raise SpecError("a job needs a 'name' (e.g. {'name': 'worker', 'num': 2})")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["env"] = dict(self.env)
        return data

    def task_indices(self) -> range:
        return range(self.start, self.start + self.num)


_JOB_FIELDS = {field.name for field in dataclasses.fields(Job)}
# Jobs as callers give them: one, or several, each a Job or its fields.
JobsGiven = Union[Job, dict[str, Any], Iterable[Union[Job, dict[str, Any]]], None]


def parse_jobs(jobs: JobsGiven, allowed: Optional[Sequence[str]] = None) -> list[Job]:
    """Validate a list of ``Job``/dicts (or one, as the original TFMesos
    took it): unique names, names allowed for the mode."""
    if isinstance(jobs, Job) or (isinstance(jobs, dict) and set(jobs) & _JOB_FIELDS):
        jobs = [jobs]
    elif isinstance(jobs, (str, bytes, dict)) or not isinstance(jobs, (Iterable, type(None))):
        raise SpecError.about("{jobs}: give a list of jobs, e.g. %s or %s, got %r",
                              "[{'name': 'worker', 'num': 2}]", "[tfmesos.Job('worker', 2)]",
                              jobs)
    parsed = [Job.from_dict(job) for job in jobs or ()]
    if not parsed:
        raise SpecError("no jobs given: pass e.g. [Job(name='ps', num=1), Job(name='worker', num=2)]")
    names = [job.name for job in parsed]
    duplicates = sorted(name for name, count in collections.Counter(names).items() if count > 1)
    if duplicates:
        raise SpecError("job name(s) given twice: %s" % ", ".join(duplicates))
    if allowed is not None:
        for job in parsed:
            if job.name not in allowed:
                raise SpecError("unknown job %r for this mode; use one of: %s"
                                % (job.name, ", ".join(allowed)))
    return parsed


def check_command_template(cmd: str, jobs: Iterable[Job], framework: str = TENSORFLOW) -> None:
    """Reject unknown ``{placeholders}`` in a replica command before launching
    (``framework``'s own too: ``training_frameworks.framework_placeholders``)."""
    known = {"ps_hosts", "worker_hosts", "chief_hosts", "job_name", "task_index"}
    known.update("%s_hosts" % job.name for job in jobs)
    known.update(framework_placeholders(framework))
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(cmd) if field is not None]
    except ValueError as exc:
        raise SpecError("bad braces in the command %r (%s); write {{ and }} for literal "
                        "braces" % (cmd, exc)) from None
    for field in fields:
        base = re.split(r"[.\[!:]", field, maxsplit=1)[0]
        if base not in known and base in framework_placeholders(TORCH):
            raise SpecError.about("the placeholder %s in the command is for {framework=torch} "
                                  "runs: add it (or write %s for literal braces)",
                                  "{%s}" % field, "{{ and }}")
        if base not in known:
            raise SpecError("unknown placeholder {%s} in the command; known: %s (write {{ and }} "
                            "for literal braces)" % (field, ", ".join("{%s}" % k for k in sorted(known))))
        if base != field:   # {job_name.upper} filled in a bound method's repr; {x[9]} failed
            raise SpecError("the placeholder {%s} in the command takes no attribute or index: "
                            "write {%s} (a format such as {task_index:03d} goes after a colon)"
                            % (field, base))
    # A format or conversion fills a task's command only once the cluster
    # is formed: {task_index:zz} was a traceback then. The same with values
    # of the types the tasks get (clusterspec.placeholders, torch_placeholders).
    sample: dict[str, object] = {name: "host:1" for name in known}
    sample.update(job_name="worker", task_index=0, master_addr="host", master_port=1,
                  node_rank=0, nnodes=1, nproc_per_task=1)
    try:
        filled = cmd.format(**sample)
    except (ValueError, KeyError, IndexError, AttributeError, TypeError) as exc:
        raise SpecError("the command's placeholders cannot be filled in (%s: %s); a format "
                        "goes after a colon, as in {task_index:03d}, and {{ and }} are literal "
                        "braces" % (type(exc).__name__, exc)) from None
    check_command_length(filled, "with one host in each {*_hosts}")


# A task runs its command as ``sh -c COMMAND``: one argument, which Linux
# caps at MAX_ARG_STRLEN (32 pages: 131072 bytes, its NUL included).
MAX_COMMAND_BYTES = 131071


def check_command_length(filled: str, how: str) -> None:
    """SpecError when the command, its placeholders filled in (``how``),
    is longer than a task can run."""
    size = len(filled.encode("utf-8", "surrogateescape"))
    if size > MAX_COMMAND_BYTES:
        raise SpecError("the command is %d bytes once its placeholders are filled in (%s), "
                        "more than the %d bytes Linux lets a command line's argument hold "
                        "(the tasks run it as sh -c COMMAND): put its arguments in a file, or "
                        "the command in a script" % (size, how, MAX_COMMAND_BYTES))


def _check_job_int(job: Job, field: str, minimum: int, maximum: int, what: str = "") -> None:
    value = getattr(job, field)
    why = number_error(value, minimum, maximum, integer=True)
    if why:
        raise SpecError.about("job %%r: {job.%s} %%s%s, got %%r" % (field, what), job.name,
                              why, value, job=job.name)


__all__ = ["Job", "JobsGiven", "parse_jobs", "check_command_template", "check_command_length",
           "MAX_COMMAND_BYTES", "TRAINER_JOBS",
           "REPLICA_JOBS", "SINGLETON_JOBS"]
