"""Task names in one line that stays short however many tasks a run has:
``ps:0, worker:0-998`` (``brief``), and names grouped by what is said of
each (``grouped``: ``worker:7-299 (no offer fits cpus=0.5 mem=32 gpus=0)``),
for the messages that name a run's tasks (a launch timeout's, a LAUNCH
without an answer): at 1,000 tasks each was one line of tens of kB."""

import re
from collections.abc import Iterable, Sequence

SHOWN = 12   # ranges (or groups) named in one line at most; the rest are counted

_NAME = re.compile(r"^(.+):(\d+)\Z")


def ranges(names: Iterable[str]) -> list[tuple[str, int]]:
    """``names`` (``job:index``, in the order given) as ``(text, count)``:
    consecutive indices of one job are one range (``worker:0-2``, 3)."""
    found: list[list] = []   # [job, first, last] or [name, None, None]
    for name in names:
        match = _NAME.match(name)
        if match is None:
            found.append([name, None, None])
            continue
        job, index = match.group(1), int(match.group(2))
        last = found[-1] if found else None
        if last is not None and last[0] == job and last[2] is not None and index == last[2] + 1:
            last[2] = index
        else:
            found.append([job, index, index])
    return [(job, 1) if first is None else
            ("%s:%d" % (job, first), 1) if first == last else
            ("%s:%d-%d" % (job, first, last), last - first + 1)
            for job, first, last in found]


def brief(names: Iterable[str], shown: int = SHOWN) -> str:
    """``names`` as ranges (``ranges``), the first ``shown`` of them named
    and the tasks of the others counted: ``ps:0, worker:0-2, worker:5``;
    ``..., and 40 more``."""
    text, rest = _named(ranges(names), shown)
    return text + (", and %d more" % rest if rest else "")


def grouped(said: Sequence[tuple[str, str]], shown: int = SHOWN) -> str:
    """``said`` (``(name, what is said of it)``, in the run's order) as
    ``NAMES (WHAT)`` per distinct ``WHAT``, in the order each first comes:
    ``worker:0 (TASK_FAILED: ...), worker:7-299 (no offer fits ...)``. At
    most ``shown`` ranges are named in all; the tasks of the others are
    counted, in their group (``worker:0-3 and 5 more (WHAT)``) or, for a
    group none of whose tasks is named, at the end (``, and 9 more``)."""
    groups: dict[str, list[str]] = {}
    for name, what in said:
        groups.setdefault(what, []).append(name)
    parts: list[str] = []
    left, unnamed = shown, 0
    for what, names in groups.items():
        found = ranges(names)
        if left <= 0:
            unnamed += len(names)
            continue
        text, more = _named(found, left)
        left -= min(left, len(found))
        parts.append("%s%s (%s)" % (text, " and %d more" % more if more else "", what))
    return ", ".join(parts) + (", and %d more" % unnamed if unnamed else "")


def _named(found: list[tuple[str, int]], shown: int) -> tuple[str, int]:
    """The first ``shown`` of ``found`` (``ranges``) named, and how many
    tasks the others hold."""
    return (", ".join(text for text, _ in found[:shown]),
            sum(count for _, count in found[shown:]))


__all__ = ["SHOWN", "ranges", "brief", "grouped"]
