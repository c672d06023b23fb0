"""Where a task's metric points land on this machine's clock
(``record.times.now``): the task's clock plus the least difference between
a frame's arrival and its ``now`` seen on the connection in the last
``OFFSET_WINDOW`` seconds (the fastest transit: a frame that waited for
the CPU does not move its points; recent only: the task's clock, stepped
back, would have put every later point at the same moment until the step
had passed), never in the future, never before the connection's previous
point (so a series' times only grow)."""

import collections
import math
import time
from collections.abc import Iterable
from typing import Any

from ..record import times

OFFSET_WINDOW = 10.0   # seconds of metrics frames whose least clock offset places points


class MetricClock:
    """The placement of one connection's points."""

    def __init__(self) -> None:
        # (arrival on time.monotonic(), this clock minus the task's plus the
        # transit) of its recent frames; their offsets only grow along it
        self._offsets: collections.deque[tuple[float, float]] = collections.deque()
        self._last = -math.inf   # where its latest point was placed

    def place(self, sent: float, points: Iterable[tuple[int, float, Any]]
              ) -> tuple[tuple[int, float, Any], ...]:
        """``points`` (step, the task's time, values) of a frame the task
        sent at its ``sent``, each at its time here."""
        now, arrived = times.now(), time.monotonic()
        offsets = self._offsets
        while offsets and arrived - offsets[0][0] > OFFSET_WINDOW:
            offsets.popleft()
        while offsets and offsets[-1][1] >= now - sent:
            offsets.pop()   # never the least again
        offsets.append((arrived, now - sent))
        placed = []
        for step, when, values in points:
            self._last = max(self._last, min(now, when + offsets[0][1]))
            placed.append((step, self._last, values))
        return tuple(placed)
