"""The bounds of what users give tfmesos, in one place (README "Limits"):
every number is finite and within a documented range, and every name is
one a task's environment or a file system takes, checked before anything
is built. ``tfrun``'s and ``tfmesos``' options use them as argparse types
(``cli.common.bounded``); ``Job``, ``RunSpec`` and ``RestartPolicy`` check
``cluster()``'s arguments against the same numbers (pure)."""

import math
import re
from typing import Optional

MAX_TASKS = 10_000                 # tasks of one run, every job together
MAX_TASK_INDEX = 1_000_000         # a job's first task index (``Job.start``)
MAX_CPUS = 10_000.0                # cpus of one task
MAX_MEM_MB = 100_000_000.0         # memory of one task, MB (100 TB)
MAX_GPUS = 1_024                   # GPUs of one task
MAX_ATTEMPTS = 1_000               # --max-attempts, --max-restarts
MAX_SECONDS = 30 * 24 * 3600.0     # any timeout or back-off: 30 days
MAX_SHIP_MB = 100_000.0            # --ship-max-size, MB (ship.bundle.MAX_SIZE_LIMIT)
MAX_NAME = 200                     # characters of a run's name
MAX_COUNT = 1_000_000              # tfmesos runs -n / --keep, logs --attempt

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _text(value: float) -> str:
    return "%d" % value if float(value).is_integer() else "%g" % value


def describe(low: float, high: float, integer: bool = False, low_open: bool = False) -> str:
    """``a whole number from 0 to 10000``, ``a number above 0, at most 60``."""
    if integer:
        return "a whole number from %s to %s" % (_text(low), _text(high))
    if low_open:
        return "a number above %s, at most %s" % (_text(low), _text(high))
    return "a number from %s to %s" % (_text(low), _text(high))


def number_error(value: object, low: float, high: float, integer: bool = False,
                 low_open: bool = False) -> Optional[str]:
    """Why ``value`` is not a finite number within [low, high] (above
    ``low`` with ``low_open``; whole with ``integer``): ``must be ...``;
    None when it is."""
    wanted = "must be %s" % describe(low, high, integer, low_open)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return wanted
    if integer and not isinstance(value, int):
        return wanted
    if not math.isfinite(value) or value < low or value > high or (low_open and value == low):
        return wanted
    return None


def has_control_characters(text: str) -> bool:
    """Whether ``text`` holds a control character (a newline, NUL, ESC, ...)."""
    return bool(_CONTROL.search(text))


def milli(value: float) -> int:
    """``value`` in thousandths, as Mesos keeps every scalar before it adds
    or compares them (src/common/values.cpp, ``convertToFixed``:
    ``llround(value * 1000)``): placement counts in them, so that what it
    fits Mesos finds available, and no task's share has a piece of less
    than 0.001, which Mesos refuses ("Invalid scalar resource: value <= 0",
    src/common/resources.cpp)."""
    return int(math.floor(value * 1000 + 0.5))


def as_switch(value: object) -> Optional[bool]:
    """``value`` as True or False when it is one (a bool, numpy's, 0 or 1),
    else None: a string such as "no" is truthy, and was taken as True."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (str, bytes)):
        return None
    try:
        return bool(value) if value in (0, 1) else None
    except (TypeError, ValueError):   # (an array's ``in`` is no single truth)
        return None


__all__ = ["MAX_TASKS", "MAX_TASK_INDEX", "MAX_CPUS", "MAX_MEM_MB", "MAX_GPUS", "MAX_ATTEMPTS",
           "MAX_SECONDS", "MAX_SHIP_MB", "MAX_NAME", "MAX_COUNT", "ENV_NAME", "describe",
           "number_error", "has_control_characters", "milli", "as_switch"]
