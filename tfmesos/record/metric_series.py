"""The metrics a run keeps (run.json's ``metrics``): a bounded series per
task and metric, its latest value, and each task's steps per second
(pure: ``RunRecord`` locks and saves).

A series keeps at most ``MAX_POINTS`` values: every ``stride``-th value
received; when full, every other kept value is dropped and the stride
doubles, so a long run keeps a sample spread evenly over its whole length
and the latest value is always at hand (``last``). A run keeps at most
``MAX_SERIES`` series (``MAX_PER_TASK`` a task); values of others are
counted in ``dropped`` (``left_out_note`` says so).
"""

import collections
from collections.abc import Iterable, Mapping
from typing import Optional

from ..protocol.metric_points import counted
from .schema import MetricSeries

MAX_POINTS = 500         # values kept per series
MAX_SERIES = 256         # series per run
MAX_PER_TASK = 32        # series per task
RATE_WINDOW = 30.0       # seconds of steps that steps/s is measured over
RATE_SAMPLES = 64        # (time, step) kept per task for it

# What a task logged at once: (step, when (a times.now()), {name: value or None}).
Point = tuple[int, float, Mapping[str, Optional[float]]]
# A task's latest values: [(metric name, value or None)], in the order they first came.
Values = list[tuple[str, Optional[float]]]


def add_value(series: MetricSeries, step: int, when: float, value: Optional[float],
              max_points: int = MAX_POINTS) -> None:
    """Add one value to ``series`` (a schema.MetricSeries), thinning it when full."""
    series.last, series.last_step, series.last_time = value, step, when
    series.count += 1
    if (series.count - 1) % series.stride:
        return
    series.steps.append(step)
    series.values.append(value)
    series.times.append(when)
    if len(series.steps) >= max_points:
        series.steps = series.steps[::2]
        series.values = series.values[::2]
        series.times = series.times[::2]
        series.stride *= 2


class Metrics:
    """Every series of a run, in the order they first came; ``began``: the
    ``times.now()`` run times count from."""

    def __init__(self, began: float, max_series: int = MAX_SERIES,
                 max_per_task: int = MAX_PER_TASK, max_points: int = MAX_POINTS) -> None:
        self.began = began
        self.max_series, self.max_per_task, self.max_points = \
            max_series, max_per_task, max_points
        self.series: list[MetricSeries] = []    # the list run.json holds
        self._by_key: dict[tuple[str, str], MetricSeries] = {}
        self._per_task: collections.Counter[str] = collections.Counter()
        # task -> (time, step), the latest, for steps/s
        self._steps: dict[str, collections.deque[tuple[float, int]]] = {}
        self.dropped = 0
        self.thinned = 0    # of dropped: left out by the senders (a flood)
        self.capped = 0     # of dropped: of series past max_series / max_per_task

    def adopt(self, series: Iterable[MetricSeries], dropped: int = 0) -> None:
        """Carry on the series a scheduler before this one kept
        (``schema.MetricSeries``, ``tfmesos attach``)."""
        for kept in series:
            key = (kept.task, kept.name)
            if key not in self._by_key and len(self.series) < self.max_series:
                self.series.append(kept)
                self._by_key[key] = kept
                self._per_task[kept.task] += 1
        self.dropped = counted(self.dropped, dropped)

    def add(self, task: str, points: Iterable[Point], dropped: int = 0) -> None:
        """``points`` of ``task``: ``(step, at, {name: value})``, ``at`` a
        ``times.now()``; ``dropped``: points its sender left out."""
        self.dropped = counted(self.dropped, dropped)
        self.thinned = counted(self.thinned, dropped)
        for step, at, values in points:
            when = round(max(0.0, at - self.began), 3)
            for name, value in values.items():
                series = self._series(task, name)
                if series is None:
                    self.dropped += 1
                    self.capped += 1
                else:
                    add_value(series, step, when, value, self.max_points)
            steps = self._steps.setdefault(task, collections.deque(maxlen=RATE_SAMPLES))
            if steps and step < steps[-1][1]:
                steps.clear()       # restarted from an earlier step: measured from here
            if not steps or step > steps[-1][1]:
                steps.append((when, step))

    def _series(self, task: str, name: str) -> Optional[MetricSeries]:
        series = self._by_key.get((task, name))
        if series is None and len(self.series) < self.max_series \
                and self._per_task[task] < self.max_per_task:
            series = self._by_key[(task, name)] = MetricSeries(task=task, name=name)
            self.series.append(series)
            self._per_task[task] += 1
        return series

    def latest(self, task: str) -> Optional[tuple[int, Values]]:
        """``(step, [(name, value)])`` of ``task``'s latest values, in the
        order its metrics first came, or None; the step is that of the
        newest point of ``task``, also one whose values were all left out
        (of series past the bounds), and lower than before once the task
        restarted from an earlier step."""
        found = [s for s in self.series if s.task == task]
        if not found:
            return None
        steps = self._steps.get(task)
        if steps:
            step = steps[-1][1]
        else:                       # series carried on only (adopt)
            step = max(found, key=lambda s: (s.last_time, s.last_step)).last_step
        return step, [(s.name, s.last) for s in found]

    def left_out_note(self) -> Optional[str]:
        """What ``left_out_note`` says of the points left out so far, or None."""
        return left_out_note(self.dropped, self.capped, self.thinned, self.max_per_task,
                             self.max_series)

    def steps_per_second(self, task: str) -> Optional[float]:
        """``task``'s steps per second over the last ``RATE_WINDOW`` seconds
        it logged, or None (fewer than two steps)."""
        steps = self._steps.get(task)
        if not steps or len(steps) < 2:
            return None
        end_time, end_step = steps[-1]
        recent = [(t, s) for t, s in steps if end_time - t <= RATE_WINDOW]
        start_time, start_step = recent[0] if len(recent) > 1 else steps[-2]
        if end_time <= start_time:
            return None
        return (end_step - start_step) / (end_time - start_time)

    def tasks(self) -> list[str]:
        """The tasks that logged metrics, in the order they first did."""
        return list(dict.fromkeys(s.task for s in self.series))


def left_out_note(dropped: int, capped: Optional[int] = None, thinned: Optional[int] = None,
                  per_task: int = MAX_PER_TASK, per_run: int = MAX_SERIES) -> Optional[str]:
    """``9968 points left out: more series than a run keeps (32 a task, 256
    in all)``, or ``...: a flood thinned by the tasks``, or both with their
    counts; both causes as possible ones when how many each left out is not
    known (run.json keeps the total only: ``tfmesos show``). None when
    none was left out."""
    if not dropped:
        return None
    text = "%d points left out: " % dropped
    if capped is None or thinned is None or capped + thinned != dropped:
        return text + "a flood thinned by the tasks, or more series than a run keeps"
    cap = "more series than a run keeps (%d a task, %d in all)" % (per_task, per_run)
    if not thinned:
        return text + cap
    if not capped:
        return text + "a flood thinned by the tasks"
    return text + "%d of a flood thinned by the tasks, %d of %s" % (thinned, capped, cap)


def in_task_order(series: Iterable[MetricSeries], tasks: Iterable[str]) -> list[MetricSeries]:
    """``series`` (schema.MetricSeries) ordered by their task's place in
    ``tasks`` (names), others (``client``) last, else as they came."""
    order = {name: index for index, name in enumerate(tasks)}
    return sorted(series, key=lambda one: order.get(one.task, len(order)))


def summaries(series: Iterable[MetricSeries], tasks: Iterable[str] = ()
              ) -> list[tuple[str, int, Values, Optional[float]]]:
    """``[(task, step, [(name, value)], steps/s or None)]`` of run.json's
    ``metrics`` (a list of schema.MetricSeries): each task's latest values
    and its average steps per second over the whole series (since its
    last restart from an earlier step, where it had one), in the order of
    ``tasks`` (names; others last)."""
    found: dict[str, list[MetricSeries]] = {}
    for one in in_task_order(series, tasks):
        found.setdefault(one.task, []).append(one)
    result: list[tuple[str, int, Values, Optional[float]]] = []
    for task, mine in found.items():
        longest = max(mine, key=lambda s: s.count)
        rate: Optional[float] = None
        start = _since_restart(longest.steps)
        if longest.steps and longest.last_time > longest.times[start] \
                and longest.last_step >= longest.steps[start]:
            rate = (longest.last_step - longest.steps[start]) / (longest.last_time
                                                                 - longest.times[start])
        newest = max(mine, key=lambda s: (s.last_time, s.last_step))
        result.append((task, newest.last_step, [(s.name, s.last) for s in mine], rate))
    return result


def _since_restart(steps: list[int]) -> int:
    """The index in ``steps`` from which they no longer go back."""
    start = 0
    for index in range(1, len(steps)):
        if steps[index] < steps[index - 1]:
            start = index
    return start
