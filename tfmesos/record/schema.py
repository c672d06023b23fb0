"""run.json: the classes of what it holds and their dict forms; the JSON
Schema (draft 2020-12) they make is ``json_schema``'s, committed as
``docs/run.schema.json``::

    python -m tfmesos.record.json_schema > docs/run.schema.json

``run_record.RunRecord`` writes a ``RunFile``; ``history``, ``report``,
``usage_table`` and ``tfmesos runs/show/logs/report`` read one back with
``read_run_file``. Each field's description below is its documentation
(the README's table says the same for users). Times are ISO 8601 UTC with
milliseconds (``Time``).

Versions: ``schema_version`` 8. Version 1 is what tfmesos wrote before
(``"format": 1`` instead of ``schema_version``); it and versions 2 to 7
read as version 8, since each version only added fields (and version 6 a
status): version 2 the attempts' ``exited`` and ``hint``, ``shipped``
written as null when nothing was shipped, and every sample's ``gpu_mb``;
version 3 the attempts' ``sandbox_tail``; version 4 ``scheduler`` (null
in earlier files: whether their tfrun is gone cannot be told); version 5
the run's ``metrics`` and ``metrics_dropped``; version 6 the outcome
``killed`` with its ``by``, and the run's ``takeovers``; version 7 the
run's ``framework`` (earlier runs were all ``tensorflow``'s); version 8
``elastic`` (null: no earlier run was elastic). A key a file lacks
(so also those that early version 1 files lack: ``registered``, ``usage``,
``restarts``, ...) reads as its default.

Log file names (``Logs``) are plain names in the run directory
(``LOG_NAME``: no ``/``, never ``.`` or ``..``): readers refuse any other
(``safe_file_name``), whatever a crafted run.json says.
Keys a class does not know are ignored; a value of the wrong type is a
``SchemaError``.
"""

import dataclasses
import functools
import math
import re
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Optional, TypeVar

from ..field_methods import FieldMethods

SCHEMA_VERSION = 8
LEGACY_FORMAT = 1   # version 1 files say "format": 1
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

Time = typing.NewType("Time", str)
TIME_PATTERN = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"

MODES = ("replica", "fine")
FRAMEWORKS = ("tensorflow", "torch", "jax")   # core.training_frameworks.FRAMEWORKS
STATUSES = ("running", "succeeded", "failed", "aborted", "interrupted", "killed")
CAUSES = ("lost", "failure")
LOG_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$"   # worker.1.attempt2.stderr
_LOG_NAME = re.compile(LOG_NAME)


def safe_file_name(name: object) -> bool:
    """Whether ``name`` is a plain file name of the run directory, as the
    writer names logs: not empty, no ``/`` (nor anything but letters,
    digits, ``_``, ``.`` and ``-``), not starting with ``.`` (so never
    ``..``): a path or a URL made of it stays in the directory."""
    return isinstance(name, str) and bool(_LOG_NAME.match(name))


class SchemaError(ValueError):
    """A run.json value that does not fit its class; says where."""


def _field(doc: str, default: Any = None, factory: Optional[Callable[[], Any]] = None,
           **schema: Any) -> Any:
    """A dataclass field with its description (and extra JSON Schema
    keywords such as ``enum`` or ``const``) kept in its metadata (Any, as
    ``dataclasses.field``: the field's default stands for its type)."""
    metadata = dict(schema, description=doc)
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


# A type as a field's annotation holds it: str, Optional[Time], list[Task], a
# Record class, ... (a value of typing's, which no static type describes).
TypeForm = Any
R = TypeVar("R", bound="Record")


class Record(FieldMethods):
    """A class of run.json: ``from_dict`` and ``to_dict`` by its fields' types.
    Each is ``@dataclasses.dataclass(eq=False, repr=False)``: ``==`` and
    ``repr`` are ``FieldMethods``', the same as the decorator's, not
    compiled for each class at every start."""

    if TYPE_CHECKING:   # every Record class is a dataclass
        __dataclass_fields__: ClassVar[dict[str, "dataclasses.Field[Any]"]]

    @classmethod
    def from_dict(cls: type[R], data: object, where: Optional[str] = None) -> R:
        try:
            return _record_decoder(cls)(data)  # type: ignore[arg-type]  # (python/mypy#11470)
        except _Mismatch:   # decoded again, for the message that says where
            return cls._checked(data, where or cls.__name__)

    @classmethod
    def _checked(cls: type[R], data: object, where: str) -> R:
        """``from_dict`` value by value, each checked with where it is in
        the file; a value that does not fit is a ``SchemaError`` saying so."""
        if not isinstance(data, dict):
            raise SchemaError("%s: expected an object, got %s" % (where, _kind(data)))
        hints = field_types(cls)  # type: ignore[arg-type]  # (a class is hashable: python/mypy#11470)
        values = {field.name: _load(hints[field.name], data[field.name],
                                    "%s.%s" % (where, field.name))
                  for field in dataclasses.fields(cls) if field.name in data}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        names = field_names(type(self))  # type: ignore[arg-type]  # (python/mypy#11470)
        return {name: _dump(getattr(self, name)) for name in names}


@functools.cache
def field_names(cls: type[Record]) -> tuple[str, ...]:
    """The field names of a Record class, in order (asked at every save)."""
    return tuple(field.name for field in dataclasses.fields(cls))


@functools.cache
def field_types(cls: type[Record]) -> dict[str, TypeForm]:
    """{field name: its type} of a Record class."""
    return typing.get_type_hints(cls)


JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def optional_of(kind: TypeForm) -> Optional[TypeForm]:
    """X for Optional[X], else None."""
    if typing.get_origin(kind) is typing.Union:
        others = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        if len(others) == 1:
            return others[0]
    return None


def _load(kind: TypeForm, value: object, where: str) -> Any:
    inner = optional_of(kind)
    if inner is not None:
        return None if value is None else _load(inner, value, where)
    if typing.get_origin(kind) is list:
        if not isinstance(value, list):
            raise SchemaError("%s: expected a list, got %s" % (where, _kind(value)))
        [item] = typing.get_args(kind)
        return [_load(item, v, "%s[%d]" % (where, i)) for i, v in enumerate(value)]
    if isinstance(kind, type) and issubclass(kind, Record):
        return kind._checked(value, where)
    kind = getattr(kind, "__supertype__", kind)   # Time is a str
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if kind is float:
            return float(value)
        if kind is int and math.isfinite(value) and value == int(value):
            return int(value)
    if kind in (str, bool) and isinstance(value, kind):
        return value
    raise SchemaError("%s: expected %s, got %s" % (where, JSON_TYPES[kind], _kind(value)))


class _Mismatch(Exception):
    """A value the fast decoders do not take: ``from_dict`` decodes it again
    with ``_load``, whose ``SchemaError`` says where it is."""


# The fast decoders: what ``_load`` does, without building a where-string
# for every value or asking ``typing`` a value's type at every value, made
# once per type. ``tfmesos runs``, ``show`` and ``attach`` read every run
# record of the runs directory: 500 records took 1.5 s to decode, ~90% of
# it in ``_load``. ``test_schema`` holds them to ``_load``'s answers.

@functools.cache
def _decoder(kind: TypeForm) -> Callable[[object], Any]:
    """``_load(kind, value, ...)`` as a function of the value alone; raises
    ``_Mismatch`` where ``_load`` raises a ``SchemaError``."""
    inner = optional_of(kind)
    if inner is not None:
        decode_inner = _decoder(inner)
        return lambda value: None if value is None else decode_inner(value)
    if typing.get_origin(kind) is list:
        [item] = typing.get_args(kind)
        decode_item = _decoder(item)
        # A list of scalars that are all of their field's type as JSON gives
        # it (a metric's 500 steps and values) is taken whole.
        scalar = optional_of(item) or item
        taken = {getattr(scalar, "__supertype__", scalar)} & set(_SCALARS)
        if taken and scalar is not item:
            taken.add(type(None))

        def decode_list(value: object) -> list[Any]:
            if not isinstance(value, list):
                raise _Mismatch
            if taken and set(map(type, value)) <= taken:
                return list(value)
            return [decode_item(v) for v in value]
        return decode_list
    if isinstance(kind, type) and issubclass(kind, Record):
        return _record_decoder(kind)  # type: ignore[arg-type]  # (python/mypy#11470)
    return _SCALARS.get(getattr(kind, "__supertype__", kind), _refuse)   # Time is a str


def _refuse(value: object) -> Any:
    raise _Mismatch


def _decode_float(value: object) -> float:
    if type(value) is float:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _Mismatch


def _decode_int(value: object) -> int:
    if type(value) is int:
        return value
    if (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value == int(value)):
        return int(value)
    raise _Mismatch


def _decode_str(value: object) -> str:
    if isinstance(value, str):
        return value
    raise _Mismatch


def _decode_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise _Mismatch


_SCALARS: dict[TypeForm, Callable[[object], Any]] = {
    float: _decode_float, int: _decode_int, str: _decode_str, bool: _decode_bool}


@functools.cache
def _record_decoder(cls: type[R]) -> Callable[[object], R]:
    """``cls.from_dict`` without the checks' where-strings: a dict's known
    keys decoded by their fields' decoders, the others ignored, a missing
    one left to its default."""
    hints = field_types(cls)  # type: ignore[arg-type]  # (python/mypy#11470)
    fields = tuple((field.name, _decoder(hints[field.name])) for field in dataclasses.fields(cls))

    def decode_record(value: object) -> R:
        if not isinstance(value, dict):
            raise _Mismatch
        return cls(**{name: decode(value[name]) for name, decode in fields if name in value})
    return decode_record


def _dump(value: object) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_dump(item) for item in value]
    return value


# -- the classes, from the leaves up ----------------------------------------------

@dataclasses.dataclass(eq=False, repr=False)
class Job(Record):
    """A job of the run as it was asked for."""
    name: str = _field("the job's name: worker, ps, chief, ...", "")
    num: int = _field("how many tasks", 1)
    start: int = _field("the index of its first task", 0)
    cpus: float = _field("cpus of each task", 1.0)
    mem: float = _field("memory of each task, MB", 1024.0)
    gpus: int = _field("GPUs of each task", 0)


@dataclasses.dataclass(eq=False, repr=False)
class State(Record):
    """A change of an attempt's Mesos state."""
    state: str = _field("TASK_RUNNING, TASK_FINISHED, ...", "")
    time: Time = _field("when it came (Mesos' timestamp, else when it arrived)", "")
    source: Optional[str] = _field(
        "Mesos' source (SOURCE_EXECUTOR, ...); for an end Mesos did not report before the "
        "framework was torn down: \"exit frame\" (the task's own exit message), else "
        "\"stopped by tfrun\" (\"stopped by cluster()\"); \"stopped by tfrun\" also ends, "
        "as TASK_KILLED, a task the run stopped before it ended by itself (Mesos' "
        "TASK_FINISHED of it is in the message); \"tfmesos kill\" ends, as TASK_KILLED, a "
        "task still running when tfmesos kill removed the framework")
    reason: Optional[str] = _field("Mesos' reason, e.g. REASON_CONTAINER_LIMITATION_MEMORY")
    message: str = _field("Mesos' message", "")


@dataclasses.dataclass(eq=False, repr=False)
class Logs(Record):
    """The attempt's log files in the run directory."""
    stdout: str = _field("e.g. worker.1.stdout; worker.1.attempt2.stdout for attempt 2: a "
                         "file name in the run directory, no path", "", pattern=LOG_NAME)
    stderr: str = _field("e.g. worker.1.stderr", "", pattern=LOG_NAME)

    def named(self, stream: str) -> str:
        return self.stderr if stream == "stderr" else self.stdout


@dataclasses.dataclass(eq=False, repr=False)
class Sample(Record):
    """One look at the command's process tree."""
    t: float = _field("seconds since the command started", 0.0)
    cpu_s: Optional[float] = _field("cpu seconds of the tree so far (user + system)")
    rss_mb: Optional[float] = _field("resident memory of the tree, MB")
    gpu_mb: Optional[float] = _field("GPU memory of the tree, MB (null without GPUs)")


@dataclasses.dataclass(eq=False, repr=False)
class CgroupUsage(Record):
    """The task's memory cgroup, when it has a limit."""
    limit_mb: Optional[float] = _field("its memory limit, MB")
    peak_mb: Optional[float] = _field("its peak memory, MB")
    oom_kills: Optional[int] = _field("the OOM killer's kills in it while the command ran")


@dataclasses.dataclass(eq=False, repr=False)
class Usage(Record):
    """What the attempt's command used, as the task measured it
    (``tfmesos.task.usage``; replica mode)."""
    wall_s: Optional[float] = _field("seconds from the command's start to its end")
    cpu_s: Optional[float] = _field("cpu seconds of its process tree (user_s + system_s)")
    user_s: Optional[float] = _field("user cpu seconds")
    system_s: Optional[float] = _field("system cpu seconds")
    peak_rss_mb: Optional[float] = _field(
        "peak resident memory of its largest process alone, MB (at most peak_tree_rss_mb)")
    peak_tree_rss_mb: Optional[float] = _field(
        "peak resident memory of its whole process tree at once, looked at every second, MB "
        "(of 2^20 bytes, as Mesos' mem): the task's peak memory, the one figure tfrun's "
        "table and the report give")
    peak_gpu_mb: Optional[float] = _field("peak GPU memory, MB (null without GPUs)")
    sample_interval_s: Optional[float] = _field(
        "seconds between samples (10, $TFMESOS_USAGE_INTERVAL in the task's environment; "
        "doubled whenever the bounded samples were thinned)")
    samples: list[Sample] = _field("every sample_interval_s, bounded", factory=list)
    cgroup: Optional[CgroupUsage] = _field("its memory cgroup (null without a limit)")

    def peak_mb(self) -> Optional[float]:
        """The attempt's peak memory, MB: the one figure every reader gives
        (tfrun's table and hints, the report): ``peak_tree_rss_mb``, the
        most its processes held at once (at least each sample's ``rss_mb``,
        which is looked at only every ``sample_interval_s``, and the largest
        process's ``peak_rss_mb``); else, in a file without it, the larger
        of those; None when nothing was measured."""
        if self.peak_tree_rss_mb is not None:
            return self.peak_tree_rss_mb
        known = [value for value in [self.peak_rss_mb] + [s.rss_mb for s in self.samples]
                 if value is not None]
        return max(known) if known else None


@dataclasses.dataclass(eq=False, repr=False)
class SandboxTail(Record):
    """The last lines an attempt wrote in its Mesos sandbox, read from its
    agent's /files when it ended before it reached tfrun."""
    stdout: list[str] = _field("the last lines (at most 20) of its sandbox's stdout",
                               factory=list)
    stderr: list[str] = _field("the last lines (at most 20) of its sandbox's stderr",
                               factory=list)


@dataclasses.dataclass(eq=False, repr=False)
class Attempt(Record):
    """One launch of a task."""
    attempt: int = _field("1, 2, ...: counted across restarts", 1)
    restart: int = _field("the whole restart it belongs to (0 before the first)", 0)
    task_id: str = _field("Mesos' task id: tfmesos.<run id>.<job>.<index>.<attempt>", "")
    agent_id: Optional[str] = _field("the Mesos agent it was launched on")
    hostname: Optional[str] = _field("the agent's host")
    address: Optional[str] = _field("the host:port it registered")
    launched: Optional[Time] = _field("when it went to Mesos")
    registered: Optional[Time] = _field("when it first registered")
    states: list[State] = _field("each change of Mesos state; once the run is over the last "
                                 "is terminal", factory=list)
    exit_code: Optional[int] = _field("its command's exit code (from its exit message, else "
                                      "from Mesos' message)")
    exited: Optional[Time] = _field("when its exit message came (replica mode)")
    logs: Optional[Logs] = _field("null without forwarded output (fine-grained mode)")
    usage: Optional[Usage] = _field("null until its exit message came")
    hint: Optional[str] = _field("one line of advice when the attempt failed in a known way "
                                 "(tfmesos.record.hints), else null")
    sandbox_tail: Optional[SandboxTail] = _field(
        "what it wrote in its Mesos sandbox when it ended before it registered (the "
        "interpreter's or the fetcher's errors), as its agent's /files served it; null "
        "otherwise, or when the agent did not answer")


@dataclasses.dataclass(eq=False, repr=False)
class Task(Record):
    """A task of the run and every attempt of it."""
    name: str = _field("worker:1", "")
    job: str = _field("its job's name", "")
    index: int = _field("its index in the job", 0)
    state: str = _field("its last attempt's last state (PENDING before its first launch, "
                        "TASK_STAGING before Mesos' first update)", "PENDING")
    exit_code: Optional[int] = _field("its last attempt's exit code")
    attempts: list[Attempt] = _field("its launches, in order", factory=list)

    @property
    def last(self) -> Optional["Attempt"]:
        """Its last attempt, or None before its first launch."""
        return self.attempts[-1] if self.attempts else None


@dataclasses.dataclass(eq=False, repr=False)
class Outcome(Record):
    """How the run ended."""
    status: str = _field("running; succeeded; failed (after the cluster was complete); "
                         "aborted (before); interrupted (Ctrl-C, SIGTERM); killed (tfmesos "
                         "kill)", "running", enum=list(STATUSES))
    message: Optional[str] = _field("what ended it")
    task: Optional[str] = _field("the task whose failure ended it")
    exit_code: Optional[int] = _field("what tfrun exits with (0, the failed task's code, 1, "
                                      "130, 143 when killed); cluster(): the failed task's code")
    hint: Optional[str] = _field("the advice tfrun printed for the failure (null without one)")
    by: Optional[str] = _field("killed: who ran tfmesos kill (the Mesos principal, else the "
                               "user; null when unknown or not killed)")


@dataclasses.dataclass(eq=False, repr=False)
class Timings(Record):
    """Milestones of the run."""
    submitted: Optional[Time] = _field("when the run began")
    first_offer: Optional[Time] = _field("when the first offer came")
    all_registered: Optional[Time] = _field("when the cluster was first complete")
    finished: Optional[Time] = _field("when the run stopped")


@dataclasses.dataclass(eq=False, repr=False)
class Restart(Record):
    """A whole restart of the cluster (tfrun --max-restarts)."""
    restart: int = _field("1, 2, ...", 1)
    time: Time = _field("when it began", "")
    cause: str = _field("lost or failure", "failure", enum=list(CAUSES))
    task: Optional[str] = _field("the task whose failure caused it")
    message: str = _field("the failure", "")
    delay: float = _field("the back-off before it, seconds", 0.0)


@dataclasses.dataclass(eq=False, repr=False)
class Relaunch(Record):
    """A sticky relaunch of a worker on its agent and port."""
    task: str = _field("the task relaunched", "")
    time: Time = _field("when it began", "")
    cause: str = _field("lost or failure", "failure", enum=list(CAUSES))
    message: str = _field("the failure", "")
    agent_id: Optional[str] = _field("the agent it is relaunched on")
    address: Optional[str] = _field("the host:port it is relaunched at")
    back: Optional[Time] = _field("when it registered again (null if it did not)")


@dataclasses.dataclass(eq=False, repr=False)
class Takeover(Record):
    """A scheduler that took the run over from the one before it (Mesos
    scheduler failover): tfmesos attach carrying on a tfrun --failover run,
    or a detached run's new scheduler task."""
    time: Time = _field("when it subscribed as the run's framework", "")
    scheduler_attempt: int = _field("which scheduler of the run it is (1 started the run; each "
                                    "takeover adds one)", 2)
    how: str = _field("tfmesos attach, or detached scheduler task N", "")

    def text(self, when: str) -> str:
        """``takeover at WHEN: scheduler attempt 2 (tfmesos attach)``: how
        ``show`` and the report say it."""
        return "takeover at %s: scheduler attempt %d (%s)" % (when, self.scheduler_attempt,
                                                              self.how or "-")


@dataclasses.dataclass(eq=False, repr=False)
class ShippedBundle(Record):
    """The user's directory as tfrun --ship packed it."""
    source: str = _field("the directory packed", "")
    files: int = _field("how many files", 0)
    bytes: int = _field("their size", 0)
    archive_bytes: int = _field("the archive's size", 0)
    sha256: str = _field("the archive's sha256", "")
    name: str = _field("the archive's name in the sandbox", "")


@dataclasses.dataclass(eq=False, repr=False)
class Shipped(Record):
    """What tfrun --ship sent to every task."""
    bundle: Optional[ShippedBundle] = _field("the user's code (null: none)")
    task_side: str = _field("the zip of tfmesos' task side", "")
    python_env: Optional[str] = _field("the --python-env archive (a path or URL)")


@dataclasses.dataclass(eq=False, repr=False)
class Scheduler(Record):
    """The process that ran the run (tfrun, or the Python that called
    cluster()): a reader on its host tells whether it is gone
    (tfmesos.record.liveness)."""
    host: str = _field("its host's name", "")
    pid: int = _field("its process id", 0)
    boot_id: Optional[str] = _field("its host's boot id (Linux; null elsewhere)")
    pid_namespace: Optional[str] = _field("its pid namespace, e.g. pid:[4026531836] (Linux; "
                                          "null elsewhere)")
    start_ticks: Optional[int] = _field("its start time in clock ticks after boot (Linux; "
                                        "null elsewhere): a reused pid is another process")


@dataclasses.dataclass(eq=False, repr=False)
class MetricSeries(Record):
    """One metric of one task, as its program logged it (tfmesos.log_metrics):
    the latest value, and a bounded series (at most 500 points: when full,
    every other point is dropped and the stride doubles)."""
    task: str = _field("the task that logged it (worker:0); in fine-grained mode \"client\" "
                       "(\"chief:0\" with coordinator=True): the process that ran cluster()",
                       "")
    name: str = _field("the metric's name (loss, accuracy, ...)", "")
    last: Optional[float] = _field("its latest value (null: not finite, NaN or inf)")
    last_step: int = _field("the step of its latest value", 0)
    last_time: float = _field("when its latest value was logged, seconds since the run began",
                              0.0)
    count: int = _field("values received", 0)
    stride: int = _field("the series keeps every stride-th value received", 1)
    steps: list[int] = _field("the kept values' steps", factory=list)
    values: list[Optional[float]] = _field("the kept values (null: not finite)", factory=list)
    times: list[float] = _field("when each kept value was logged, seconds since the run began",
                                factory=list)


@dataclasses.dataclass(eq=False, repr=False)
class RunFile(Record):
    """run.json: the record of one run."""
    schema_version: int = _field("the version of this format", SCHEMA_VERSION,
                                 const=SCHEMA_VERSION)
    run_id: str = _field("the run's id (in its Mesos task ids)", "")
    name: str = _field("the framework's name", "")
    mode: str = _field("replica (tfrun) or fine (cluster())", "replica", enum=list(MODES))
    framework: str = _field("whose variables the tasks got: tensorflow (TF_CONFIG; files "
                            "before version 7), torch (tfrun --torch) or jax (tfrun --jax)",
                            "tensorflow", enum=list(FRAMEWORKS))
    elastic: Optional[str] = _field("tfrun --torch-elastic: MIN:MAX, torchrun's --nnodes (null "
                                    "without, and in files before version 8)")
    master: Optional[str] = _field("the master as given (local: the embedded one)")
    command: Optional[str] = _field("the command template (replica mode)")
    jobs: list[Job] = _field("the jobs as asked for", factory=list)
    framework_id: Optional[str] = _field("Mesos' framework id (null before it registered)")
    tasks: list[Task] = _field("every task, in launch order", factory=list)
    outcome: Outcome = _field("how it ended", factory=Outcome)
    timings: Timings = _field("its milestones", factory=Timings)
    restarts: list[Restart] = _field("each whole restart", factory=list)
    relaunches: list[Relaunch] = _field("each sticky relaunch", factory=list)
    takeovers: list[Takeover] = _field("each scheduler that took the run over (empty in files "
                                       "before version 6)", factory=list)
    shipped: Optional[Shipped] = _field("tfrun --ship: what went to every task (null without)")
    scheduler: Optional[Scheduler] = _field(
        "the process that ran it: while the outcome says running, a reader on its host "
        "tells whether it is gone (null in files before version 4)")
    metrics: list[MetricSeries] = _field("what the tasks logged with tfmesos.log_metrics, a "
                                         "series per task and metric (at most 256 series)",
                                         factory=list)
    metrics_dropped: int = _field("points left out: a flood thinned by the task, series "
                                  "beyond the limits", 0)


def read_run_file(data: object) -> "RunFile":
    """The RunFile of run.json's parsed ``data``, of version 1 to 7."""
    if not isinstance(data, dict):
        raise SchemaError("expected an object, got %s" % _kind(data))
    if "schema_version" in data:
        version = data["schema_version"]
        if not isinstance(version, int) or isinstance(version, bool) or version < 2:
            raise SchemaError("schema_version %r is not a version" % (version,))
        if version > SCHEMA_VERSION:
            raise SchemaError("schema_version %d is newer than this tfmesos reads (%d)"
                              % (version, SCHEMA_VERSION))
        data = dict(data, schema_version=SCHEMA_VERSION)   # earlier versions lack fields only
    elif data.get("format") == LEGACY_FORMAT:
        data = dict(data, schema_version=SCHEMA_VERSION)
    else:
        raise SchemaError("no schema_version (nor format 1)")
    return RunFile.from_dict(data, "run.json")
