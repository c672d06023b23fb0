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
``SchemaError``, and so is an integer out of its range: int64's, an exit
code's -255 to 255 (``EXIT_MIN``, ``EXIT_MAX``).
"""

import dataclasses
import re
import typing
from typing import Optional

from .record_codec import Record, SchemaError, described, json_kind

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
# An exit code is what a wait status holds: 0 to 255 (128 + N for signal N,
# as tfmesos writes it; down to -255 for a signal as Python's returncode says).
EXIT_MIN, EXIT_MAX = -255, 255
_LOG_NAME = re.compile(LOG_NAME)


def safe_file_name(name: object) -> bool:
    """Whether ``name`` is a plain file name of the run directory, as the
    writer names logs: not empty, no ``/`` (nor anything but letters,
    digits, ``_``, ``.`` and ``-``), not starting with ``.`` (so never
    ``..``): a path or a URL made of it stays in the directory."""
    return isinstance(name, str) and bool(_LOG_NAME.match(name))


# -- the classes, from the leaves up ----------------------------------------------

@dataclasses.dataclass(eq=False, repr=False)
class Job(Record):
    """A job of the run as it was asked for."""
    name: str = described("the job's name: worker, ps, chief, ...", "")
    num: int = described("how many tasks", 1)
    start: int = described("the index of its first task", 0)
    cpus: float = described("cpus of each task", 1.0)
    mem: float = described("memory of each task, MB", 1024.0)
    gpus: int = described("GPUs of each task", 0)


@dataclasses.dataclass(eq=False, repr=False)
class State(Record):
    """A change of an attempt's Mesos state."""
    state: str = described("TASK_RUNNING, TASK_FINISHED, ...", "")
    time: Time = described("when it came (Mesos' timestamp where it lies between the "
                                 "attempt's previous time and its arrival, else when it arrived: "
                                 "the agent's clock may be off)", "")
    source: Optional[str] = described(
        "Mesos' source (SOURCE_EXECUTOR, ...); for an end Mesos did not report before the "
        "framework was torn down: \"exit frame\" (the task's own exit message), else "
        "\"stopped by tfrun\" (\"stopped by cluster()\"); \"stopped by tfrun\" also ends, "
        "as TASK_KILLED, a task the run stopped before it ended by itself (Mesos' "
        "TASK_FINISHED of it is in the message); \"tfmesos kill\" ends, as TASK_KILLED, a "
        "task still running when tfmesos kill removed the framework")
    reason: Optional[str] = described("Mesos' reason, e.g. REASON_CONTAINER_LIMITATION_MEMORY")
    message: str = described("Mesos' message", "")


@dataclasses.dataclass(eq=False, repr=False)
class Logs(Record):
    """The attempt's log files in the run directory."""
    stdout: str = described("e.g. worker.1.stdout; worker.1.attempt2.stdout for attempt 2: a "
                            "file name in the run directory, no path", "", pattern=LOG_NAME)
    stderr: str = described("e.g. worker.1.stderr", "", pattern=LOG_NAME)

    def named(self, stream: str) -> str:
        return self.stderr if stream == "stderr" else self.stdout


@dataclasses.dataclass(eq=False, repr=False)
class Sample(Record):
    """One look at the command's process tree."""
    t: float = described("seconds since the command started", 0.0)
    cpu_s: Optional[float] = described("cpu seconds of the tree so far (user + system)")
    rss_mb: Optional[float] = described("resident memory of the tree, MB")
    gpu_mb: Optional[float] = described("GPU memory of the tree, MB (null without GPUs)")


@dataclasses.dataclass(eq=False, repr=False)
class CgroupUsage(Record):
    """The task's memory cgroup, when it has a limit."""
    limit_mb: Optional[float] = described("its memory limit, MB")
    peak_mb: Optional[float] = described(
        "its peak memory, MB: the task's in tfrun's table and the report where limit_mb is "
        "about its mem (a cgroup of its own)")
    oom_kills: Optional[int] = described("the OOM killer's kills in it while the command ran")


@dataclasses.dataclass(eq=False, repr=False)
class Usage(Record):
    """What the attempt's command used, as the task measured it
    (``tfmesos.task.usage``; replica mode)."""
    wall_s: Optional[float] = described("seconds from the command's start to its end")
    cpu_s: Optional[float] = described("cpu seconds of its process tree (user_s + system_s)")
    user_s: Optional[float] = described("user cpu seconds")
    system_s: Optional[float] = described("system cpu seconds")
    peak_rss_mb: Optional[float] = described(
        "peak resident memory of its largest process alone, MB (at most peak_tree_rss_mb)")
    peak_tree_rss_mb: Optional[float] = described(
        "peak resident memory of its whole process tree at once, looked at every second, MB "
        "(of 2^20 bytes, as Mesos' mem): the task's peak memory in tfrun's table and the "
        "report where it has no memory cgroup of its own (counts shared libraries' pages)")
    peak_gpu_mb: Optional[float] = described("peak GPU memory, MB (null without GPUs)")
    sample_interval_s: Optional[float] = described(
        "seconds between samples (10, $TFMESOS_USAGE_INTERVAL in the task's environment; "
        "doubled whenever the bounded samples were thinned)")
    samples: list[Sample] = described("every sample_interval_s, bounded", factory=list)
    cgroup: Optional[CgroupUsage] = described("its memory cgroup (null without a limit)")

    def peak_mb(self) -> Optional[float]:
        """Its processes' peak memory, MB (tfrun's table and hints, the
        report give it where no cgroup of the task's own measured one:
        ``usage_table.memory_peak``): ``peak_tree_rss_mb``, the
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
    stdout: list[str] = described("the last lines (at most 20) of its sandbox's stdout",
                                  factory=list)
    stderr: list[str] = described("the last lines (at most 20) of its sandbox's stderr",
                                  factory=list)


@dataclasses.dataclass(eq=False, repr=False)
class Attempt(Record):
    """One launch of a task."""
    attempt: int = described("1, 2, ...: counted across restarts", 1)
    restart: int = described("the whole restart it belongs to (0 before the first)", 0)
    task_id: str = described("Mesos' task id: tfmesos.<run id>.<job>.<index>.<attempt>", "")
    agent_id: Optional[str] = described("the Mesos agent it was launched on")
    hostname: Optional[str] = described("the agent's host")
    address: Optional[str] = described("the host:port it registered")
    launched: Optional[Time] = described("when it went to Mesos")
    registered: Optional[Time] = described("when it first registered")
    states: list[State] = described("each change of Mesos state; once the run is over the last "
                                    "is terminal", factory=list)
    exit_code: Optional[int] = described("its command's exit code (from its exit message, else "
                                         "from Mesos' message)", minimum=EXIT_MIN,
                                         maximum=EXIT_MAX)
    exited: Optional[Time] = described("when its exit message came (replica mode)")
    logs: Optional[Logs] = described("null without forwarded output (fine-grained mode)")
    usage: Optional[Usage] = described("null until its exit message came")
    hint: Optional[str] = described("one line of advice when the attempt failed in a known way "
                                    "(tfmesos.record.hints), else null")
    sandbox_tail: Optional[SandboxTail] = described(
        "what it wrote in its Mesos sandbox when it ended before it registered (the "
        "interpreter's or the fetcher's errors), as its agent's /files served it; null "
        "otherwise, or when the agent did not answer")


@dataclasses.dataclass(eq=False, repr=False)
class Task(Record):
    """A task of the run and every attempt of it."""
    name: str = described("worker:1", "")
    job: str = described("its job's name", "")
    index: int = described("its index in the job", 0)
    state: str = described("its last attempt's last state (PENDING before its first launch, "
                           "TASK_STAGING before Mesos' first update)", "PENDING")
    exit_code: Optional[int] = described("its last attempt's exit code", minimum=EXIT_MIN,
                                         maximum=EXIT_MAX)
    attempts: list[Attempt] = described("its launches, in order", factory=list)

    @property
    def last(self) -> Optional["Attempt"]:
        """Its last attempt, or None before its first launch."""
        return self.attempts[-1] if self.attempts else None


@dataclasses.dataclass(eq=False, repr=False)
class Outcome(Record):
    """How the run ended."""
    status: str = described("running; succeeded; failed (after the cluster was complete); "
                            "aborted (before); interrupted (Ctrl-C, SIGTERM; cluster(): the "
                            "program ended with its block still open); killed (tfmesos kill)",
                            "running", enum=list(STATUSES))
    message: Optional[str] = described("what ended it")
    task: Optional[str] = described("the task whose failure ended it")
    exit_code: Optional[int] = described("what tfrun exits with (0, the failed task's code, 1, "
                                         "130, 143 when killed); cluster(): the failed task's code",
                                         minimum=EXIT_MIN, maximum=EXIT_MAX)
    hint: Optional[str] = described("the advice tfrun printed for the failure (null without one)")
    by: Optional[str] = described("killed: who ran tfmesos kill (the Mesos principal, else the "
                                  "user; null when unknown or not killed)")


@dataclasses.dataclass(eq=False, repr=False)
class Timings(Record):
    """Milestones of the run."""
    submitted: Optional[Time] = described("when the run began")
    first_offer: Optional[Time] = described("when the first offer came")
    all_registered: Optional[Time] = described("when the cluster was first complete")
    finished: Optional[Time] = described("when the run stopped")


@dataclasses.dataclass(eq=False, repr=False)
class Restart(Record):
    """A whole restart of the cluster (tfrun --max-restarts)."""
    restart: int = described("1, 2, ...", 1)
    time: Time = described("when it began", "")
    cause: str = described("lost or failure", "failure", enum=list(CAUSES))
    task: Optional[str] = described("the task whose failure caused it")
    message: str = described("the failure", "")
    delay: float = described("the back-off before it, seconds", 0.0)


@dataclasses.dataclass(eq=False, repr=False)
class Relaunch(Record):
    """A sticky relaunch of a worker on its agent and port."""
    task: str = described("the task relaunched", "")
    time: Time = described("when it began", "")
    cause: str = described("lost or failure", "failure", enum=list(CAUSES))
    message: str = described("the failure", "")
    agent_id: Optional[str] = described("the agent it is relaunched on")
    address: Optional[str] = described("the host:port it is relaunched at")
    back: Optional[Time] = described("when it registered again (null if it did not)")


@dataclasses.dataclass(eq=False, repr=False)
class Takeover(Record):
    """A scheduler that took the run over from the one before it (Mesos
    scheduler failover): tfmesos attach carrying on a tfrun --failover run,
    or a detached run's new scheduler task."""
    time: Time = described("when it subscribed as the run's framework", "")
    scheduler_attempt: int = described("which scheduler of the run it is (1 started the run; each "
                                       "takeover adds one)", 2)
    how: str = described("tfmesos attach, or detached scheduler task N", "")

    def text(self, when: str) -> str:
        """``takeover at WHEN: scheduler attempt 2 (tfmesos attach)``: how
        ``show`` and the report say it."""
        return "takeover at %s: scheduler attempt %d (%s)" % (when, self.scheduler_attempt,
                                                              self.how or "-")


@dataclasses.dataclass(eq=False, repr=False)
class ShippedBundle(Record):
    """The user's directory as tfrun --ship packed it."""
    source: str = described("the directory packed", "")
    files: int = described("how many files", 0)
    bytes: int = described("their size", 0)
    archive_bytes: int = described("the archive's size", 0)
    sha256: str = described("the archive's sha256", "")
    name: str = described("the archive's name in the sandbox", "")


@dataclasses.dataclass(eq=False, repr=False)
class Shipped(Record):
    """What tfrun --ship sent to every task."""
    bundle: Optional[ShippedBundle] = described("the user's code (null: none)")
    task_side: str = described("the zip of tfmesos' task side", "")
    python_env: Optional[str] = described("the --python-env archive (a path or URL)")


@dataclasses.dataclass(eq=False, repr=False)
class Scheduler(Record):
    """The process that ran the run (tfrun, or the Python that called
    cluster()): a reader on its host tells whether it is gone
    (tfmesos.record.liveness)."""
    host: str = described("its host's name", "")
    pid: int = described("its process id", 0)
    boot_id: Optional[str] = described("its host's boot id (Linux; null elsewhere)")
    pid_namespace: Optional[str] = described("its pid namespace, e.g. pid:[4026531836] (Linux; "
                                             "null elsewhere)")
    start_ticks: Optional[int] = described("its start time in clock ticks after boot (Linux; "
                                           "null elsewhere): a reused pid is another process")


@dataclasses.dataclass(eq=False, repr=False)
class MetricSeries(Record):
    """One metric of one task, as its program logged it (tfmesos.log_metrics):
    the latest value, and a bounded series (at most 500 points: when full,
    every other point is dropped and the stride doubles)."""
    task: str = described("the task that logged it (worker:0); in fine-grained mode \"client\" "
                          "(\"chief:0\" with coordinator=True): the process that ran cluster()",
                          "")
    name: str = described("the metric's name (loss, accuracy, ...)", "")
    last: Optional[float] = described("its latest value (null: not finite, NaN or inf)")
    last_step: int = described("the step of its latest value", 0)
    last_time: float = described("when its latest value was logged, seconds since the run began",
                                 0.0)
    count: int = described("values received", 0)
    stride: int = described("the series keeps every stride-th value received", 1)
    steps: list[int] = described("the kept values' steps", factory=list)
    values: list[Optional[float]] = described("the kept values (null: not finite)", factory=list)
    times: list[float] = described("when each kept value was logged, seconds since the run began",
                                   factory=list)

    def inconsistency(self) -> Optional[str]:
        if not len(self.steps) == len(self.values) == len(self.times):
            return "its steps, values and times differ in length (%d, %d, %d)" % (
                len(self.steps), len(self.values), len(self.times))
        return None


@dataclasses.dataclass(eq=False, repr=False)
class RunFile(Record):
    """run.json: the record of one run."""
    schema_version: int = described("the version of this format", SCHEMA_VERSION,
                                    const=SCHEMA_VERSION)
    run_id: str = described("the run's id (in its Mesos task ids)", "")
    name: str = described("the framework's name", "")
    mode: str = described("replica (tfrun) or fine (cluster())", "replica", enum=list(MODES))
    framework: str = described("whose variables the tasks got: tensorflow (TF_CONFIG; files "
                               "before version 7), torch (tfrun --torch) or jax (tfrun --jax)",
                               "tensorflow", enum=list(FRAMEWORKS))
    elastic: Optional[str] = described("tfrun --torch-elastic: MIN:MAX, torchrun's --nnodes (null "
                                       "without, and in files before version 8)")
    master: Optional[str] = described("the master as given (local: the embedded one)")
    command: Optional[str] = described("the command template (replica mode)")
    jobs: list[Job] = described("the jobs as asked for", factory=list)
    framework_id: Optional[str] = described("Mesos' framework id (null before it registered)")
    tasks: list[Task] = described("every task, in launch order", factory=list)
    outcome: Outcome = described("how it ended", factory=Outcome)
    timings: Timings = described("its milestones", factory=Timings)
    restarts: list[Restart] = described("each whole restart", factory=list)
    relaunches: list[Relaunch] = described("each sticky relaunch", factory=list)
    takeovers: list[Takeover] = described("each scheduler that took the run over (empty in files "
                                          "before version 6)", factory=list)
    shipped: Optional[Shipped] = described("tfrun --ship: what went to every task (null without)")
    scheduler: Optional[Scheduler] = described(
        "the process that ran it: while the outcome says running, a reader on its host "
        "tells whether it is gone (null in files before version 4)")
    metrics: list[MetricSeries] = described("what the tasks logged with tfmesos.log_metrics, a "
                                            "series per task and metric (at most 256 series)",
                                            factory=list)
    metrics_dropped: int = described("points left out: a flood thinned by the task, series "
                                     "beyond the limits", 0)


def newer_schema(data: object) -> Optional[str]:
    """Why run.json's parsed ``data`` is no record this tfmesos reads when
    its schema_version is newer than this one's (a newer tfmesos wrote
    it), else None."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        return "schema_version %d is newer than this tfmesos reads (%d)" % (version,
                                                                           SCHEMA_VERSION)
    return None


def read_run_file(data: object) -> "RunFile":
    """The RunFile of run.json's parsed ``data``, of version 1 to 7."""
    if not isinstance(data, dict):
        raise SchemaError("expected an object, got %s" % json_kind(data))
    if "schema_version" in data:
        version = data["schema_version"]
        if not isinstance(version, int) or isinstance(version, bool) or version < 2:
            raise SchemaError("schema_version %r is not a version" % (version,))
        newer = newer_schema(data)
        if newer is not None:
            raise SchemaError(newer)
        data = dict(data, schema_version=SCHEMA_VERSION)   # earlier versions lack fields only
    elif data.get("format") == LEGACY_FORMAT:
        data = dict(data, schema_version=SCHEMA_VERSION)
    else:
        raise SchemaError("no schema_version (nor format 1)")
    return RunFile.from_dict(data, "run.json")
