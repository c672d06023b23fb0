"""The times of a run's record: ISO 8601 UTC with milliseconds
(``2026-11-26T10:00:00.000Z``), as run.json writes them and every reader
parses them; and the clock they are read from (``now``).

``now`` is the wall clock as read when the latest run of this process
began (``anchor``), moved on by a clock that never steps
(``CLOCK_BOOTTIME``: it counts a suspended machine's sleep, as
``CLOCK_MONOTONIC`` does not). An NTP step, or a date set by hand, while a
run goes leaves its times in order and its durations true: the time.time()
of every reading would have made a run that went for minutes "took 0.0
s", or one that ended before it started. The next run of a long-lived
process (a notebook's) starts on the corrected clock.
"""

import datetime
import time
from typing import Optional

from .schema import Time

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def _steady() -> float:
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)   # Linux
    except (AttributeError, OSError):
        return time.monotonic()


_anchor = (time.time(), _steady())   # (the wall clock, the steady one) read at once


def anchor() -> None:
    """A run begins: ``now`` counts from the wall clock as it reads now."""
    global _anchor
    _anchor = (time.time(), _steady())


def now() -> float:
    """The time (seconds since the epoch, as time.time()) on this
    process's steady wall clock (above)."""
    wall, steady = _anchor
    return wall + (_steady() - steady)


def reported(seconds: Optional[float], after: Optional[float]) -> float:
    """The time another machine gave for something this process heard of
    only now (a Mesos status update's ``timestamp``: the agent's clock,
    apache/mesos src/common/protobuf_utils.cpp ``createStatusUpdate``):
    taken where it lies between ``after`` (what this process knew came
    before it, on its own clock) and now, else now. An agent whose clock
    runs minutes behind or ahead made a task end before it launched, or
    run for an hour it did not; an update delivered late (re-sent after
    the scheduler came back) still keeps the time it happened at."""
    current = now()
    if seconds is None or not seconds > 0 or seconds > current:
        return current
    if after is not None and seconds < after:
        return current
    return seconds


def timestamp(seconds: Optional[float] = None) -> Time:
    """``seconds`` (as time.time(); default ``now()``) as run.json writes a time."""
    moment = datetime.datetime.fromtimestamp(now() if seconds is None else seconds,
                                             datetime.timezone.utc)
    return Time(moment.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (moment.microsecond // 1000))


def parse_time(text: Optional[str]) -> Optional[datetime.datetime]:
    """A run.json time as an aware datetime, or None (none, or not one)."""
    if not text:
        return None
    try:
        return datetime.datetime.strptime(text, _FORMAT).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None


def parse_timestamp(text: Optional[str]) -> Optional[float]:
    """time.time() of a run.json time, or None."""
    moment = parse_time(text)
    return None if moment is None else moment.timestamp()


__all__ = ["anchor", "now", "reported", "timestamp", "parse_time", "parse_timestamp"]
