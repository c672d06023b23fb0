"""The report's metrics (``report``): a chart per metric the tasks logged
(run.json's ``metrics``: ``tfmesos.log_metrics``), a series per task over
the steps, its latest value last whether kept or not; nulls (NaN, inf)
and a restart (the steps going back) break a series' line."""

import sys
from collections.abc import Sequence
from typing import Optional

from .charts import Series, _e, line_chart, nice_ticks
from .history import Run
from .metric_series import in_task_order
from .schema import MetricSeries

# A metric's points: (step, value or None: not finite).
MetricPoints = list[tuple[int, Optional[float]]]


def metric_points(series: MetricSeries) -> MetricPoints:
    """[(step, value or None)] of a series, its latest value last (kept or not)."""
    points = list(zip(series.steps, series.values))
    if series.count and (not points or points[-1] != (series.last_step, series.last)):
        points.append((series.last_step, series.last))
    return points


def _segments(points: MetricPoints) -> list[list[tuple[float, float]]]:
    """The runs of finite values between nulls (NaN, inf) and where the
    steps go back (a restart from an earlier checkpoint)."""
    segments: list[list[tuple[float, float]]] = []
    current: list[tuple[float, float]] = []
    for step, value in points:
        if current and step < current[-1][0]:
            segments.append(current)
            current = []
        if value is None:
            if current:
                segments.append(current)
            current = []
        else:
            current.append((step, value))
    if current:
        segments.append(current)
    return segments


def metric_chart(name: str, lines: Sequence[tuple[str, MetricPoints]]) -> str:
    """The chart of metric ``name``: ``lines`` [(task, [(step, value)])], a
    series per task, steps across (a figure: the legend and the SVG)."""
    finite = [(s, v) for _, points in lines for s, v in points if v is not None]
    if not finite:
        return ""
    low, high = min(v for _, v in finite), max(v for _, v in finite)
    half = high / 2 - low / 2     # (high - low) overflows near the float's bounds
    if half < 5e-13:
        low, high = low - 0.5 * (abs(low) or 1), high + 0.5 * (abs(high) or 1)
    else:
        low, high = low - 0.1 * half, high + 0.1 * half
    low, high = max(low, -sys.float_info.max), min(high, sys.float_info.max)
    first, last = min(s for s, _ in finite), max(s for s, _ in finite)
    if last == first:
        first, last = first - 1, last + 1
    steps = [tick for tick in nice_ticks(first, last, 8) if tick == int(tick)]
    series = [Series(task, _segments(points)) for task, points in lines]
    return line_chart("metric %s per task" % name, "%s (by step)" % name, "metric", series,
                      (first, last), [(step, "%d" % step) for step in steps], (low, high))


def metrics_html(run: Run) -> str:
    """A chart per metric the tasks logged, or "" when none did."""
    by_name: dict[str, list[tuple[str, MetricPoints]]] = {}
    for series in in_task_order(run.file.metrics, [task.name for task in run.tasks]):
        by_name.setdefault(series.name, []).append((series.task, metric_points(series)))
    # A metric with no finite value (NaN from its first step: a diverged
    # run) was left out, its name nowhere in the report.
    charts = [metric_chart(name, lines) or (
        '<p class="muted">%s: no finite value (n/a at every step logged)</p>' % _e(name))
        for name, lines in by_name.items()]
    if not charts and not run.file.metrics_dropped:
        return ""
    note = ""
    if run.file.metrics_dropped:
        note = ('<p class="muted">%d points were left out (a flood thinned by the tasks, '
                'or more series than a run keeps).</p>' % run.file.metrics_dropped)
    return "<h2>Metrics</h2>" + note + "".join(charts)
