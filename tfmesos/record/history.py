"""Reading run directories (``run_record``'s ``run.json`` and log files)
after the fact or while the run goes: which runs there are, which one a
user means, what its tasks did, where their logs are (pruning old ones:
``pruning``).

A run directory is any directory holding a ``run.json``; the runs
directory is ``$TFMESOS_RUNS_DIR``, else ``./tfmesos-runs``. What a
run.json says is not trusted to stay inside its directory: a log name that
is not a plain file name there is refused (``schema.safe_file_name``), and
pruning never follows a symbolic link.
"""

import datetime
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple, Optional

from ..exceptions import TFMesosError
from ..protocol import json_documents
from ..terminal_text import printable
from .liveness import gone
from .outcomes import outcome_text
from .run_dirs import RUN_FILE
from .schema import (
    Attempt,
    Outcome,
    RunFile,
    SchemaError,
    Task,
    Timings,
    newer_schema,
    read_run_file,
    safe_file_name,
)
from .takeover_files import NotRegularFile, open_regular
from .times import parse_time

RUN_JSON = RUN_FILE
# A run.json read at most (10,000 tasks with their usage samples, the metric
# series at their bounds: well under); past it, not a run record.
MAX_RECORD = 256 << 20
# A run.json another user wrote (a runs directory shared with them), read at
# most: parsed, the bytes of a planted '[[],[],...' take ~26 times their size
# in memory, in every lookup of one's own runs there (256 MB: 7 GB).
MAX_OTHERS_RECORD = 16 << 20


class HistoryError(TFMesosError):
    """A run that cannot be found or read; the message is one line."""


def parse(directory: str) -> object:
    """The JSON of ``directory``'s run.json, not yet checked against the
    schema. Read as what anyone who may write the runs directory could put
    there: a regular file (a FIFO is not waited on) of at most
    ``MAX_RECORD`` bytes (a sparse file of gigabytes is not read into
    memory)."""
    path = os.path.join(directory, RUN_JSON)
    try:
        with open_regular(path) as handle:
            found = os.fstat(handle.fileno())
            if found.st_uid != os.geteuid() and found.st_size > MAX_OTHERS_RECORD:
                raise HistoryError("%s is not a run record: %d MB, over the %d MB read of "
                                   "another user's" % (path, found.st_size >> 20,
                                                       MAX_OTHERS_RECORD >> 20))
            if found.st_size > MAX_RECORD:
                raise HistoryError("%s is not a run record: %d MB, over the %d MB a run record "
                                   "holds at most" % (path, found.st_size >> 20, MAX_RECORD >> 20))
            if found.st_size == 0:
                # Never read: a file of /proc says 0 and makes its text as
                # it is read (a run.json linked to /proc/kmsg took the
                # kernel's log from its reader).
                raise HistoryError("%s is not a run record: it is empty" % path)
            # read(n) allocates n bytes first: MAX_RECORD for every record
            # read, and tracemalloc showed it. What the file holds (more, if
            # it grows meanwhile), bounded alike.
            data = _read_now(handle, found.st_size + 1, path)
            if len(data) > found.st_size:
                data += _read_now(handle, MAX_RECORD + 1 - len(data), path)
        if len(data) > MAX_RECORD:
            raise HistoryError("%s is not a run record: over the %d MB a run record holds at "
                               "most" % (path, MAX_RECORD >> 20))
        return json_documents.loads(data.decode("utf-8"))
    except NotRegularFile:
        raise HistoryError("%s is not a run record: not a regular file" % path) from None
    except OSError as exc:
        raise HistoryError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    except ValueError as exc:   # UnicodeDecodeError too
        raise HistoryError("%s is not a run record: %s" % (path, exc)) from None


def _read_now(handle: BinaryIO, size: int, path: str) -> bytes:
    """At most ``size`` bytes of ``handle`` (opened non-blocking by
    ``open_regular``); HistoryError when it has none yet, as only a file
    that is no record has (None: a device's, /proc's)."""
    data = handle.read(size)
    if data is None:
        raise HistoryError("%s is not a run record: it has nothing to read yet" % path)
    return data


class Run:
    """One run directory and what its run.json holds (``file``, a
    ``schema.RunFile``)."""

    def __init__(self, directory: str, file: RunFile) -> None:
        self.directory = directory
        self.file = file
        self._read_as: Optional[tuple[int, int, int]] = None   # run.json's, when reload read it

    @classmethod
    def load(cls, directory: str) -> "Run":
        return cls.decode(directory, parse(directory))

    @classmethod
    def decode(cls, directory: str, data: object) -> "Run":
        """The run of ``directory`` whose run.json ``parse`` read as ``data``."""
        try:
            return cls(directory, read_run_file(data))
        except SchemaError as exc:
            raise HistoryError("%s is not a run record: %s"
                               % (os.path.join(directory, RUN_JSON), exc)) from None

    def reload(self) -> "Run":
        """The run as its run.json says now: the same run when it cannot be
        read, or when it is the file this one was read from (the same
        inode, size and mtime: run.json is replaced whole): ``tfmesos logs
        --follow`` asks five times a second, and a record of 800 attempts
        took 0.1 s to parse, a quarter of a core."""
        try:
            found = os.stat(os.path.join(self.directory, RUN_JSON))
            read_as: Optional[tuple[int, int, int]] = (found.st_ino, found.st_size,
                                                       found.st_mtime_ns)
        except OSError:
            read_as = None
        if read_as is not None and read_as == self._read_as:
            return self
        try:
            run = Run.load(self.directory)
        except HistoryError:
            return self
        run._read_as = read_as
        return run

    @property
    def run_id(self) -> str:
        return self.file.run_id or os.path.basename(self.directory)

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def mode(self) -> str:
        return self.file.mode

    @property
    def outcome(self) -> Outcome:
        return self.file.outcome

    @property
    def status(self) -> str:
        return self.outcome.status

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def gone(self) -> bool:
        """Whether run.json says running while the process that ran it is
        known to be gone (killed before it could say how the run ended:
        ``liveness.gone``); False where that cannot be told."""
        return self.running and gone(self.file.scheduler)

    @property
    def left_to_tasks(self) -> bool:
        """Whether its tfrun is ``gone`` from a ``--failover`` run (its
        failover.json, the caller's, is there) within the run's failover
        timeout of its record's last write: its tasks go on without it
        until ``tfmesos attach`` takes it over, ``kill`` ends it, or that
        timeout passes (then Mesos removed its framework: it is ``gone``)."""
        if not self.gone:
            return False
        from .takeover_files import TakeoverError, read_failover
        try:
            timeout = read_failover(self.directory).spec.get("failover_timeout")
        except TakeoverError:
            return False
        last = self._last_written()
        if not isinstance(timeout, (int, float)) or last is None:
            return False
        return (datetime.datetime.now(datetime.timezone.utc) - last).total_seconds() < timeout

    @property
    def shown_outcome(self) -> str:
        """How the run ended in the words every reader uses
        (``outcomes.outcome_text``, without the message: ``failed (exit 5,
        worker:0)``, ``killed (by alice)``), ``gone`` for a run whose tfrun
        is (``gone``), ``left to its tasks`` for such a ``--failover`` run."""
        if self.gone:
            return "left to its tasks" if self.left_to_tasks else "gone"
        return outcome_text(self.outcome, self.tasks, message=False)

    @property
    def exit_code(self) -> Optional[int]:
        return self.outcome.exit_code

    @property
    def timings(self) -> Timings:
        return self.file.timings

    @property
    def started(self) -> Optional[datetime.datetime]:
        return parse_time(self.timings.submitted)

    @property
    def finished(self) -> Optional[datetime.datetime]:
        return parse_time(self.timings.finished)

    def duration(self, now: Optional[datetime.datetime] = None) -> Optional[float]:
        """Seconds from submission to the end (to ``now`` while it runs; for a
        run whose tfrun is ``gone``, to its record's last write, the last
        moment anything is known of it), or None."""
        start = self.started
        if start is None:
            return None
        end = self.finished
        if end is None and self.gone:
            end = self._last_written()
        if end is None:
            end = now or datetime.datetime.now(datetime.timezone.utc)
        return max(0.0, (end - start).total_seconds())

    def _last_written(self) -> Optional[datetime.datetime]:
        """When its tfrun last wrote its record or the output it kept
        (``*.stdout``, ``*.stderr``: regular files, links not followed)."""
        times = []
        try:
            names = [RUN_JSON] + [name for name in os.listdir(self.directory)
                                  if name.endswith((".stdout", ".stderr"))]
        except OSError:
            names = [RUN_JSON]
        for name in names:
            try:
                found = os.lstat(os.path.join(self.directory, name))
            except OSError:
                continue
            if stat.S_ISREG(found.st_mode):
                times.append(found.st_mtime)
        if not times:
            return None
        return datetime.datetime.fromtimestamp(max(times), datetime.timezone.utc)

    @property
    def tasks(self) -> list[Task]:
        return self.file.tasks

    def task(self, name: str) -> Task:
        """The task named ``name`` (``worker:1``; ``worker.1`` too)."""
        wanted = name.replace(".", ":")
        for task in self.tasks:
            if task.name == wanted:
                return task
        raise HistoryError("run %s has no task %s; its tasks: %s" % (
            printable(self.run_id), printable(name),
            ", ".join(printable(t.name) for t in self.tasks)))

    def log_path(self, task_name: str, stream: str = "stdout",
                 attempt: Optional[int] = None) -> Optional[str]:
        """The log file of ``task_name``'s attempt ``attempt`` (default: its
        last); None when that attempt forwarded no output (fine-grained mode)."""
        task = self.task(task_name)
        if not task.attempts:
            return None
        chosen: Optional[Attempt]
        if attempt is None:
            chosen = task.last
        else:
            chosen = next((a for a in task.attempts if a.attempt == attempt), None)
            if chosen is None:
                raise HistoryError("%s has no attempt %d in run %s; its attempts: %s" % (
                    task.name, attempt, self.run_id,
                    ", ".join(str(a.attempt) for a in task.attempts)))
        if chosen is None or not chosen.logs:   # (None: never, it has attempts)
            return None
        name = chosen.logs.named(stream)
        if not safe_file_name(name):
            raise HistoryError("run %s: its run.json names %r as the %s log of %s, which is not "
                               "a file name in the run directory: the file was damaged or "
                               "crafted" % (self.run_id, name, stream, task.name))
        return os.path.join(self.directory, name)

    def hints(self) -> list[tuple[str, str]]:
        """(where, hint) pairs: "outcome" and the outcome's hint, then
        "<task> attempt <n>" and each attempt's that says something else."""
        found = [("outcome", self.outcome.hint)] if self.outcome.hint else []
        for task in self.tasks:
            for attempt in task.attempts:
                if attempt.hint and attempt.hint != self.outcome.hint:
                    found.append(("%s attempt %d" % (task.name, attempt.attempt),
                                  attempt.hint))
        return found


def list_runs(root: str) -> list[Run]:
    """The runs under ``root``, most recent first (unreadable ones skipped),
    symbolic links to run directories too (``prune`` names them)."""
    return recent_runs(root, None, links=True)[0]


class Recent(NamedTuple):
    """What ``recent_runs`` found: the runs, how many more run records
    there are, and how many a newer tfmesos wrote (left out) by why."""
    runs: list[Run]
    older: int
    newer: dict[str, int]


def recent_runs(root: str, limit: Optional[int], links: bool = False) -> Recent:
    """The ``limit`` most recent runs under ``root`` (every one: None), as
    ``list_runs`` orders them, and how many more run records there are.
    Only the runs returned are decoded against the schema: the order comes
    from each run.json's JSON (its submission time, as ``Run.started``
    reads it), and decoding all 500 records of a runs directory to show 20
    was half of ``tfmesos runs``' time. With a ``limit``, only each
    record's place in that order is kept while all are read, and the runs
    shown are read again: holding every record parsed took memory as the
    sum of the files (three run.json files of 100 MB that anyone may plant
    in a shared runs directory, 1.45 GB). An older record counted but not
    decoded may be one ``--all`` skips as unreadable. A symbolic link is
    listed only with ``links``: else one that another user planted in a
    shared runs directory showed the run it names twice. Records of a
    newer schema are counted apart, wherever they fall in the order: no
    run of theirs is shown, and ``tfmesos runs`` says why."""
    newer: dict[str, int] = {}

    def readable(found: Iterator[tuple[str, object]]) -> Iterator[tuple[str, object]]:
        for directory, data in found:
            why = newer_schema(data)
            if why is None:
                yield directory, data
            else:
                newer[why] = newer.get(why, 0) + 1

    if limit is None:
        parsed = sorted(readable(parsed_records(root, links)), key=lambda found: _recency(
            parse_time(_submitted(found[1])), found[0]), reverse=True)
        return Recent([run for run in (_decoded(directory, data) for directory, data in parsed)
                       if run is not None], 0, newer)
    order = sorted(((_recency(parse_time(_submitted(data)), directory))
                    for directory, data in readable(parsed_records(root, links))), reverse=True)
    runs: list[Run] = []
    for at, (_, directory) in enumerate(order):
        if len(runs) >= limit:
            return Recent(runs, len(order) - at, newer)
        try:
            run = _decoded(directory, parse(directory))
        except HistoryError:    # gone or changed since it was read
            run = None
        if run is not None:
            runs.append(run)
    return Recent(runs, 0, newer)


def _submitted(data: object) -> Optional[str]:
    """run.json's ``timings.submitted`` from its JSON, if it is a string."""
    timings = data.get("timings") if isinstance(data, dict) else None
    submitted = timings.get("submitted") if isinstance(timings, dict) else None
    return submitted if isinstance(submitted, str) else None


def parsed_records(root: str, links: bool = False) -> Iterator[tuple[str, object]]:
    """(directory, its run.json's JSON) of every run directory under
    ``root`` whose run.json can be read, and of every symbolic link to one;
    without ``links``, not a link to a directory listed itself (a run
    shown twice), only one to a directory elsewhere (a run moved to another
    disk and linked back)."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise HistoryError("cannot list %s: %s" % (root, exc.strerror or exc)) from None
    paths = [os.path.join(root, name) for name in names]
    linked = {path for path in paths if os.path.islink(path)}
    listed = set() if links or not linked else {_identity(path) for path in paths
                                                if path not in linked}
    for directory in paths:
        if (links or directory not in linked or _identity(directory) not in listed) \
                and os.path.isfile(os.path.join(directory, RUN_JSON)):
            try:
                yield directory, parse(directory)
            except HistoryError:
                continue


def _identity(path: str) -> Optional[tuple[int, int]]:
    """(device, inode) of what ``path`` leads to, or None."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _decoded(directory: str, data: object) -> Optional[Run]:
    try:
        return Run.decode(directory, data)
    except HistoryError:
        return None


def most_recent_first(runs: list[Run]) -> list[Run]:
    return sorted(runs, key=lambda run: _recency(run.started, run.directory), reverse=True)


_EPOCH = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)


def _recency(started: Optional[datetime.datetime], directory: str) -> tuple[datetime.datetime, str]:
    """How runs sort, oldest first: by submission (none: first), then directory."""
    return started or _EPOCH, directory
