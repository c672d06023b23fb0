"""Metrics a run's program logs (``tfmesos.log_metrics``), as they travel:
their checks and bounds, shared by the task side and tfrun (stdlib only).

A *point* is what one ``log_metrics(step, **values)`` call logged:
``[step, t, {name: value}]`` — ``step`` an int >= 0, ``t`` the wall-clock
time (``time.time()`` of the process that logged it), ``values`` at most
``MAX_VALUES`` names (``NAME``: 1 to ``MAX_NAME`` characters of letters,
digits and ``_ . : / @ + -``) each with a finite float, or None for a
value that was not finite (NaN, inf: recorded as null, shown as ``n/a``).

The user's process sends each point as one datagram (``MAX_DATAGRAM``
bytes at most) to the task entry, which sends them on in ``metrics``
frames of at most ``MAX_POINTS`` points: ``{"type": "metrics", "now": T,
"points": [...], "dropped": N}``, ``now`` the sender's clock when it sent
the frame (so tfrun places points on its own clock without trusting the
agent's), ``dropped`` how many points it thinned out since the last frame.
``Batcher`` is what keeps a sender bounded: however fast points come, it
holds at most ``MAX_POINTS`` of them and lets a batch go at most every
``FLUSH_INTERVAL`` seconds.
"""

import json
import math
import re

# typing for the checkers only, as in protocol/wire.py (the task entry imports this).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    Values = dict[str, Optional[float]]   # name -> value (None: not finite)
    Point = tuple[int, float, Values]     # (step, t, values), as parsed
else:
    Values, Point = dict, tuple

MAX_NAME = 64            # characters of a metric's name
MAX_VALUES = 32          # values in one point (one log_metrics call)
MAX_POINTS = 128         # points in one metrics frame (<= ~400 KB, under wire.MAX_FRAME)
MAX_DATAGRAM = 8192      # bytes of one point on its way from the user's process
MAX_STEP = 2 ** 53       # steps stay exact as JSON numbers
FLUSH_INTERVAL = 0.5     # seconds between two batches of one sender
NAME = re.compile(r"[A-Za-z0-9_.:/@+-]{1,%d}\Z" % MAX_NAME)


# str() of the boolean dtypes of numpy and JAX, TensorFlow, PyTorch.
_BOOLEAN_DTYPES = ("bool", "<dtype: 'bool'>", "torch.bool")


class MetricError(ValueError):
    """A step, name or value that cannot be logged."""


def check_name(name: object) -> str:
    """``name`` if it is a metric name, else MetricError."""
    if not isinstance(name, str) or not NAME.match(name):
        raise MetricError("metric name %r: use 1 to %d letters, digits or _ . : / @ + -"
                          % (str(name)[:80], MAX_NAME))
    return name


def check_value(value: "Any") -> "Optional[float]":
    """``value`` as a float; None when it is not finite (NaN, inf);
    MetricError when it is not a number (strings, booleans of Python, numpy,
    TensorFlow or JAX, None, arrays of more than one element). Numbers of numpy, TensorFlow or JAX convert
    through their ``__float__``."""
    if isinstance(value, (str, bytes, bool)) or value is None:
        raise MetricError("a metric value must be a number, not %s" % type(value).__name__)
    try:    # a value's own methods may raise anything: log_metrics never raises
        boolean = str(getattr(value, "dtype", "")) in _BOOLEAN_DTYPES   # float() makes 1.0
        number = None if boolean else float(value)
    except Exception as exc:
        raise MetricError("a metric value must be a number, not %s (%s)"
                          % (type(value).__name__, exc)) from None
    if number is None:
        raise MetricError("a metric value must be a number, not a boolean (%s)"
                          % type(value).__name__)
    return number if math.isfinite(number) else None


def check_step(step: "Any") -> int:
    """``step`` as an int in [0, MAX_STEP), else MetricError."""
    if isinstance(step, bool):
        raise MetricError("step must be an integer, not bool")
    try:
        number = step.__index__()
    except (AttributeError, TypeError):
        raise MetricError("step must be an integer, not %s" % type(step).__name__) from None
    except Exception as exc:    # its own __index__ failed: log_metrics never raises
        raise MetricError("step must be an integer, not %s (%s)"
                          % (type(step).__name__, exc)) from None
    if not 0 <= number < MAX_STEP:
        raise MetricError("step %d is out of range (0 to 2**53)" % number)
    return number


def _finite(value: object) -> bool:
    """A number JSON may carry that is a finite float (a 400-digit integer
    is not one: ``math.isfinite`` raises OverflowError for it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def parse_point(item: object) -> "Optional[Point]":
    """``(step, t, {name: value})`` of a received point, checked; None when
    it is malformed (a received value is already a float or None)."""
    if not isinstance(item, list) or len(item) != 3:
        return None
    step, when, values = item
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < MAX_STEP \
            or isinstance(when, bool) or not isinstance(when, (int, float)) \
            or not _finite(when) or not isinstance(values, dict) \
            or not 0 < len(values) <= MAX_VALUES:
        return None
    clean: Values = {}
    for name, value in values.items():
        if not isinstance(name, str) or not NAME.match(name):
            return None
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not _finite(value)):
            return None
        clean[name] = None if value is None else float(value)
    return step, float(when), clean


DROPPED_KEY = "dropped"


def dropped_datagram(count: int) -> bytes:
    """The datagram by which a process counts to its task entry the points
    it dropped itself (``user_metrics``: a flood past ``MAX_PENDING``)."""
    return json.dumps({DROPPED_KEY: count}).encode("ascii")


def parse_dropped(item: object) -> "Optional[int]":
    """The count of a received ``dropped_datagram``, or None when it is not one."""
    if not isinstance(item, dict) or len(item) != 1:
        return None
    count = item.get(DROPPED_KEY)
    if isinstance(count, bool) or not isinstance(count, int) or not 0 < count < MAX_STEP:
        return None
    return count


def parse_frame(message: "dict[str, Any]") -> "Optional[tuple[float, list[Point], int]]":
    """``(now, [points], dropped)`` of a ``metrics`` frame; malformed points
    are left out (counted in ``dropped``); None when the frame itself is
    malformed."""
    now, points, dropped = message.get("now"), message.get("points"), message.get("dropped", 0)
    if isinstance(now, bool) or not isinstance(now, (int, float)) or not _finite(now) \
            or not isinstance(points, list) or len(points) > MAX_POINTS \
            or isinstance(dropped, bool) or not isinstance(dropped, int) \
            or not 0 <= dropped < MAX_STEP:
        return None
    parsed = [parse_point(item) for item in points]
    good = [point for point in parsed if point is not None]
    return float(now), good, dropped + len(parsed) - len(good)


def counted(total: int, more: int) -> int:
    """``total + more``, a count of dropped points that stops below ``MAX_STEP``
    (what ``parse_frame`` takes):
    what a sender says it dropped is its to say, but the sum must stay a
    number run.json holds (a task's 2,000 datagrams of 2**53 - 1 made tfrun
    fail with its record unreadable)."""
    return min(total + more, MAX_STEP - 1)


class Batcher:
    """The points one sender holds between two batches (not thread-safe:
    its owner locks). At most ``limit`` points: when its thinned share is
    full, every other one is dropped and from then on only every
    ``2**k``-th point is kept until the batch goes, so a flood keeps a
    sample spread over its time; the latest point of each metric (of the
    first ``limit // 4`` names of a batch) always goes, and so does the
    batch's very last point (the step the sender reached, whatever names
    it has): ``limit - limit // 4 - 1`` thinned, ``limit // 4`` latest, 1
    last."""

    def __init__(self, limit: int = MAX_POINTS, interval: float = FLUSH_INTERVAL) -> None:
        self.limit = limit
        self.interval = interval
        self._latest_names = max(1, limit // 4)
        self._keep = max(2, limit - self._latest_names)
        self._points: list[tuple[int, Point]] = []      # (sequence, point) kept by thinning
        self._latest: dict[str, tuple[int, Point]] = {}   # name -> (sequence, latest point)
        self._stride = 1
        self._seen = 0          # points since the last batch
        self._last: Optional[tuple[int, Point]] = None   # the batch's last point
        self.sent_at: Optional[float] = None   # when the last batch went

    def add(self, point: Point) -> None:
        self._seen += 1
        entry = self._last = (self._seen, point)
        for name in point[2]:
            if name in self._latest or len(self._latest) < self._latest_names:
                self._latest[name] = entry
        if (self._seen - 1) % self._stride:
            return
        self._points.append(entry)
        if len(self._points) >= self._keep:
            self._points = self._points[::2]
            self._stride *= 2

    def due(self, now: float) -> bool:
        """Whether a batch should go at ``now`` (monotonic seconds)."""
        return self._seen > 0 and (self.sent_at is None or now - self.sent_at >= self.interval)

    def take(self, now: float) -> "Optional[tuple[list[Point], int]]":
        """``(points, dropped)`` to send, in the order they came, or None
        when nothing is held; starts the next batch."""
        if not self._seen:
            return None
        entries = dict(self._points)
        entries.update(self._latest.values())
        if self._last is not None:
            entries.update((self._last,))
        points = [entries[sequence] for sequence in sorted(entries)]
        taken = (points, self._seen - len(points))
        self._points, self._latest, self._stride, self._seen = [], {}, 1, 0
        self._last = None
        self.sent_at = now
        return taken
