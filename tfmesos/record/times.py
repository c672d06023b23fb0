"""The times of a run's record: ISO 8601 UTC with milliseconds
(``2026-11-26T10:00:00.000Z``), as run.json writes them and every reader
parses them (pure)."""

import datetime
import time
from typing import Optional

from .schema import Time

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def timestamp(seconds: Optional[float] = None) -> Time:
    """``seconds`` (time.time(); default now) as run.json writes a time."""
    moment = datetime.datetime.fromtimestamp(time.time() if seconds is None else seconds,
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


__all__ = ["timestamp", "parse_time", "parse_timestamp"]
