"""What each task asked for against what it used: the table ``tfrun``
prints at the end of a run, and its hints (pure functions of a
``schema.RunFile``: its ``jobs`` and each attempt's ``usage``).

::

    tfrun: resources asked and used (samples in run.json):
      task       cpus    cpu-s   avg cpus used   mem MB      peak MB
      worker:0      1     45.2           0.83      1024          712 (70%)
      ps:0          1    180.0           3.00+     1024          240 (23%)
    tfrun: + above its cpus: Mesos' cpus are a share (cpu.shares), not a cap, unless ...
    tfrun: sizing: ps used at most 240 MB of its 1024 MB (23%): -Ms 320 would do

Past ``MAX_ROWS`` tasks (a run of hundreds), the table shows each job's
task of the largest peak and its busiest, and says how many it left out.

``avg cpus used`` is the cpu seconds of the command's whole process tree
over its wall time (``average_cpus``; ``-`` for one that ran under
``MIN_AVERAGE_WALL``, too short for it); ``+`` marks one above the task's
``cpus`` (``over``: cpus are no cap without a CFS quota). ``peak MB``
is the most memory the task held at once (``memory_peak``), in MB of
2^20 bytes as Mesos counts ``mem``: its own memory cgroup's peak, what
the isolator counts; without one, its processes' resident memory
(``Usage.peak_mb``), marked ``RSS``: it counts the pages of shared
libraries too (TensorFlow's, ~500 MB), which a cgroup counts only where
they were first read.

A hint names the job whose tasks peaked above 90 % of their ``mem`` (raise
it: a Mesos agent with cgroups isolation kills a task over it; judged on
RSS, it says that it may; of a cgroup filled to its limit without an OOM
kill, that the kernel reclaimed its page cache there), or stayed
under 25 % of their ``mem`` or ``cpus`` (lower it: the cluster has that much
more room), with the option that sets it. Only tasks that ran ``MIN_WALL``
seconds say they need less (a 0.1-s command never reached what training
needs); what a task peaked at it needed, however short it ran.
"""

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Optional, TypeVar

from .hints import resource_flag
from .record_codec import Record, field_types
from .schema import CgroupUsage, RunFile, Sample, Task, Usage

OVER = "+"       # marks an average above the task's cpus (``over``)
RSS = "RSS"      # marks a peak of its processes' RSS, no cgroup's (``memory_peak``)
HIGH = 0.90      # of mem: close to being killed
LOW = 0.25       # of mem or cpus: asked for four times what it used
MIN_WALL = 10.0  # seconds: shorter commands say little about what they need
# Seconds a command must run for its average cpus to be shown (and marked):
# wall_s and cpu_s are rounded to 0.01 s (task/usage.py), so a 0.01-s
# command read 0.00, 0.33 or 1.00 run to run; past a second that rounding
# moves the average by about 0.01.
MIN_AVERAGE_WALL = 1.0
# MB a task's own memory cgroup may be limited to above its mem (Mesos'
# command executor adds its 32 MB to the container); a cgroup of a larger
# limit, or none, is not the task's own (an unisolated task's is its agent's,
# a container's say), and its peak is every process's in it.
EXECUTOR_MEM = 64
MAX_SAMPLES = 2000
MAX_ROWS = 24    # tasks in the table; past that, each job's extremes (``shown_rows``)
_USAGE_NUMBERS = [f.name for f in dataclasses.fields(Usage) if f.name not in ("samples", "cgroup")]
_SAMPLE_NUMBERS = [f.name for f in dataclasses.fields(Sample)]
_CGROUP_NUMBERS = [f.name for f in dataclasses.fields(CgroupUsage)]

R = TypeVar("R", bound=Record)
# (task name, job, asked cpus, asked mem, what its last measured attempt used)
Row = tuple[str, str, float, float, Usage]


def _number(value: object) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or value in (float("inf"), float("-inf")):
        return None
    return value


def _numbers(cls: type[R], raw: Mapping[str, object], names: Iterable[str]) -> R:
    """A ``cls`` of its fields ``names`` from the untrusted dict ``raw``:
    each a number of the field's type, else None."""
    # (a class is hashable: mypy reads a dataclass's ``__hash__ = None``,
    # its instances', as the class object's)
    kinds, values = field_types(cls), {}  # type: ignore[arg-type]
    for name in names:
        value = _number(raw.get(name))
        if value is not None and kinds[name] == Optional[int]:
            value = int(value) if value == int(value) else None
        values[name] = value
    return cls(**values)


def clean_usage(raw: object) -> Optional[dict[str, Any]]:
    """A task's usage report (the exit frame's ``usage``) reduced to the
    fields of ``schema.Usage``, numbers or null, samples bounded (those
    without a time dropped): its dict form. None for anything else."""
    if not isinstance(raw, dict):
        return None
    given = raw.get("samples")
    samples = given if isinstance(given, list) else []
    kept = [_numbers(Sample, sample, _SAMPLE_NUMBERS) for sample in samples[:MAX_SAMPLES]
            if isinstance(sample, dict)]
    usage = _numbers(Usage, raw, _USAGE_NUMBERS)
    usage.samples = [sample for sample in kept if sample.t is not None]
    if isinstance(raw.get("cgroup"), dict):
        usage.cgroup = _numbers(CgroupUsage, raw["cgroup"], _CGROUP_NUMBERS)
    return usage.to_dict()


def _last_usage(task: Task) -> Optional[Usage]:
    for attempt in reversed(task.attempts):
        if attempt.usage:
            return attempt.usage
    return None


def memory_peak(usage: Usage, mem: float) -> tuple[float, bool]:
    """The task's peak memory, MB (0.0 when nothing was measured), and
    whether its own memory cgroup measured it (one limited to about its
    ``mem``: what the isolator counts, and kills it past); else its
    processes' resident memory (``Usage.peak_mb``)."""
    cgroup = usage.cgroup
    # Its own: limited to its mem, with the executor's allowance at most
    # (1 MB of slack for rounding); a tighter or looser limit is another
    # cgroup's (a container's, a slice's), which holds more than the task.
    if cgroup and cgroup.peak_mb is not None and cgroup.limit_mb is not None \
            and mem - 1 <= cgroup.limit_mb <= mem + EXECUTOR_MEM:
        return cgroup.peak_mb, True
    return usage.peak_mb() or 0.0, False


def average_cpus(usage: Usage) -> Optional[float]:
    """The cpus a command used on average: the cpu seconds of its whole
    process tree over its wall time (threads and processes on several
    cores add up, so it may exceed the cpus it was given: ``over``); None
    for one that ran under ``MIN_AVERAGE_WALL`` seconds."""
    wall, cpu = usage.wall_s or 0.0, usage.cpu_s or 0.0
    return cpu / wall if wall >= MIN_AVERAGE_WALL else None


def average_text(usage: Usage) -> str:
    """``0.83``, or ``-`` when the command ran too short for an average."""
    average = average_cpus(usage)
    return "-" if average is None else "%.2f" % average


def over(usage: Usage, cpus: float) -> bool:
    """Whether the command used more than its ``cpus`` on average (as the
    table prints it, to 2 decimals). Mesos' cpus are a share, not a cap:
    the cgroups cpu isolator sets ``cpu.shares`` (1024 x cpus), a weight
    that counts only when the agent's cores are busy, and a CFS quota
    (``cpu.cfs_quota_us`` = cpus x period) only on agents that run
    ``--cgroups_enable_cfs``, which is false by default (src/slave/flags.cpp;
    isolators/cgroups/subsystems/cpu.cpp); the embedded master likewise,
    unless ``tfrun --cgroups-enable-cfs``. A task may so use the agent's
    idle cores: a TensorFlow ps serving its workers from many threads
    averages several cpus of its one."""
    average = average_cpus(usage)
    return bool(cpus) and average is not None and round(average, 2) > cpus


def _round_up(value: float, step: float) -> float:
    return step * math.ceil(value / step - 1e-9)


def _fmt(value: float) -> str:
    return ("%.2f" % value).rstrip("0").rstrip(".")


def usage_rows(run: RunFile) -> list[Row]:
    """(task name, job, asked cpus, asked mem, ``schema.Usage``) for each
    task of ``run`` (a ``schema.RunFile``) whose last measured attempt has a
    usage."""
    jobs = {job.name: job for job in run.jobs}
    rows: list[Row] = []
    for task in run.tasks:
        usage = _last_usage(task)
        job = jobs.get(task.job)
        if usage and job:
            rows.append((task.name, job.name, job.cpus, job.mem, usage))
    return rows


def shown_rows(rows: Sequence[Row], limit: int = MAX_ROWS) -> list[Row]:
    """``rows``, or past ``limit`` of them, each job's task of the largest
    peak and its busiest (the ones its hints speak of), in the run's order."""
    if len(rows) <= limit:
        return list(rows)
    keep: set[int] = set()
    by_job: dict[str, list[int]] = {}
    for at, row in enumerate(rows):
        by_job.setdefault(row[1], []).append(at)
    for ats in by_job.values():
        keep.add(max(ats, key=lambda at: memory_peak(rows[at][4], rows[at][3])[0]))
        keep.add(max(ats, key=lambda at: average_cpus(rows[at][4]) or 0.0))
    return [row for at, row in enumerate(rows) if at in keep]


def table_lines(rows: Sequence[Row], limit: int = MAX_ROWS) -> list[str]:
    """The table (header and one line per task; past ``limit`` tasks, the
    ones ``shown_rows`` keeps and how many are left out), empty without rows."""
    if not rows:
        return []
    shown = shown_rows(rows, limit)
    left_out = len(rows) - len(shown)
    rows = shown
    width = max(len("task"), *(len(name) for name, *_ in rows))
    lines = ["  %-*s  %5s  %7s  %14s  %7s  %11s" % (width, "task", "cpus", "cpu-s",
                                                   "avg cpus used", "mem MB", "peak MB")]
    for name, _, cpus, mem, usage in rows:
        peak, own = memory_peak(usage, mem)
        share = " (%d%%)" % round(100.0 * peak / mem) if mem else ""
        gpu = usage.peak_gpu_mb
        lines.append("  %-*s  %5s  %7.1f  %13s%s  %7.0f  %11.0f%s%s%s" % (
            width, name, _fmt(cpus), usage.cpu_s or 0.0, average_text(usage),
            OVER if over(usage, cpus) else " ", mem, peak, share, "" if own else " " + RSS,
            "  GPU %.0f MB" % gpu if gpu is not None else ""))
    if left_out:
        lines.append("  (%d more tasks; above, each job's largest peak and busiest: "
                     "tfmesos report lists them all)" % left_out)
    return lines


def notes(rows: Sequence[Row]) -> list[str]:
    """What the table's marks mean, for the marks it has."""
    found = []
    if any(over(usage, cpus) for _, _, cpus, _, usage in rows):
        found.append("%s above its cpus: Mesos' cpus are a share (cpu.shares), not a cap, unless "
                     "the agent runs --cgroups_enable_cfs (default false; tfrun "
                     "--cgroups-enable-cfs on the embedded master)" % OVER)
    if not all(memory_peak(usage, mem)[1] for _, _, _, mem, usage in rows):
        found.append("%s: no memory cgroup of the task's own measured it: its processes' resident "
                     "memory, shared libraries included (TensorFlow's take ~500 MB a cgroup may "
                     "not count)" % RSS)
    return found


def _option(job: str, mode: str) -> Callable[[str], str]:
    """What sets a resource of ``job``'s tasks: its tfrun option (replica
    mode), else the job's ``resource=``."""
    if mode == "replica":
        return lambda resource: resource_flag(job, resource)
    return lambda resource: "%s=" % resource


def _raise_hint(job: str, peak: float, mem: float, own: bool,
                cgroup: Optional[CgroupUsage], flag: str,
                tree_rss: Optional[float] = None) -> str:
    """The hint of a job whose task peaked at ``peak`` MB, over 90 % of its
    ``mem``: raise ``flag``, in words true of what measured the peak
    (``own``: its memory cgroup, else its processes' RSS; ``tree_rss``:
    the most its processes held at once, sampled)."""
    share, more = round(100 * peak / mem), _round_up(peak * 1.25, 64)
    if not own:
        return ("%s's processes peaked at %.0f MB RSS of its %.0f MB (%d%%; shared libraries "
                "included, which a memory cgroup may not count): a Mesos agent with cgroups "
                "isolation may kill it past its mem; raise %s (e.g. %s %d)"
                % (job, peak, mem, share, flag, flag, more))
    if cgroup and cgroup.oom_kills == 0 and tree_rss is not None and tree_rss < peak / 2:
        # Its processes never held half of it: the cgroup counts the page
        # cache of what the task wrote (its sandbox's stdout) and read, which
        # the kernel reclaims, from below the limit on, before it kills.
        return ("%s's memory cgroup peaked at %.0f MB of its %.0f MB (%d%%) while its processes "
                "held at most %.0f MB: the rest is page cache (output written, files read), "
                "which the kernel reclaims before an OOM kill; raise %s only if it ran slow "
                "(e.g. %s %d)" % (job, peak, mem, share, tree_rss, flag, flag, more))
    if cgroup and cgroup.oom_kills == 0 and cgroup.limit_mb and peak >= cgroup.limit_mb - 1:
        # At its limit the kernel reclaims the cgroup's page cache (file pages
        # count: TensorFlow's libraries, a dataset read) rather than kill: the
        # peak is the limit, whatever the task needs.
        return ("%s filled its %.0f MB memory cgroup (%d%% of its mem) without an OOM kill: "
                "the cgroup counts page cache, which the kernel reclaims at its limit; raise %s "
                "only if it ran slow (e.g. %s %d)"
                % (job, cgroup.limit_mb, share, flag, flag, more))
    return ("%s peaked at %.0f MB of its %.0f MB (%d%%): a Mesos agent with cgroups isolation "
            "kills it past its mem; raise %s (e.g. %s %d)" % (job, peak, mem, share, flag,
                                                               flag, more))


def hints(rows: Iterable[Row], mode: str = "replica") -> list[str]:
    """One line per job whose tasks used over 90 % of their mem, or under
    25 % of their mem or cpus (the extreme task of the job decides)."""
    by_job: dict[str, tuple[float, float, list[Usage]]] = {}
    for _, job, cpus, mem, usage in rows:
        by_job.setdefault(job, (cpus, mem, []))[2].append(usage)
    lines: list[str] = []
    for job, (cpus, mem, usages) in by_job.items():
        if job == "tensorboard":   # tfrun --tensorboard: sized by tfrun, no option sets it
            continue
        peak, own, largest = max(((*memory_peak(u, mem), u) for u in usages),
                                 key=lambda found: found[0])
        option = _option(job, mode)
        long_enough = [u for u in usages if (u.wall_s or 0) >= MIN_WALL]
        if mem and peak > HIGH * mem:
            lines.append(_raise_hint(job, peak, mem, own, largest.cgroup, option("mem"),
                                     largest.peak_tree_rss_mb))
        elif mem and long_enough and 0 < peak < LOW * mem \
                and max(64, _round_up(peak * 1.25, 64)) < mem:
            # (Only a value below what it has: "-Mw 64 would do" of a task
            # given 64 MB, "-Cw 0.1" of one given 0.05, were no advice.)
            lines.append("%s used at most %.0f MB of its %.0f MB (%d%%): %s %d would do"
                         % (job, peak, mem, round(100 * peak / mem), option("mem"),
                            max(64, _round_up(peak * 1.25, 64))))
        if cpus and long_enough:
            busiest = max(average_cpus(u) or 0.0 for u in long_enough)
            fewer = max(0.1, _round_up(busiest * 1.5, 0.1))
            if busiest < LOW * cpus and fewer < cpus:
                lines.append("%s used %s of its %s cpus on average: %s %s would do"
                             % (job, _fmt(busiest), _fmt(cpus), option("cpus"), _fmt(fewer)))
    return lines


def usage_lines(run: RunFile, mode: str = "replica", advice: bool = True) -> list[str]:
    """What tfrun prints at the end of ``run`` (a ``schema.RunFile``): the
    table and (with ``advice``, not ``tfrun -q``) its hints; no lines when
    no task sent its usage."""
    rows = usage_rows(run)
    if not rows:
        return []
    return (["tfrun: resources asked and used (samples in run.json):"] + table_lines(rows)
            + ["tfrun: " + line for line in notes(rows)]
            + ["tfrun: sizing: " + line for line in (hints(rows, mode) if advice else [])])


__all__ = ["clean_usage", "usage_rows", "shown_rows", "table_lines", "notes", "hints", "usage_lines",
           "average_cpus", "average_text", "over", "memory_peak"]
