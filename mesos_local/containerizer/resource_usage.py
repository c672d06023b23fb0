"""What a running task uses, as a Mesos agent's ``/monitor/statistics``
and ``GET_CONTAINERS`` report it (``ResourceStatistics``,
include/mesos/v1/mesos.proto).

A plain process task is measured as Mesos' POSIX isolators measure a
container (``PosixCpuIsolatorProcess::usage`` and
``PosixMemIsolatorProcess::usage``, src/slave/containerizer/mesos/isolators/
posix.hpp): the user and system cpu time and the resident memory summed
over its processes, here the live members of its process group read from
/proc. A task in cgroups of its own is measured by them where they
account it (``cgroups.TaskCgroups.cpu_seconds``: the whole cpu time of
every process it ran, dead ones included).
"""

import os
from typing import Optional

try:
    _TICKS = os.sysconf("SC_CLK_TCK")
    _PAGE = os.sysconf("SC_PAGESIZE")
except (ValueError, OSError, AttributeError):
    _TICKS, _PAGE = 100, 4096


def process_group_usage(pgid: Optional[int]) -> Optional[tuple[float, float, int]]:
    """(user cpu seconds, system cpu seconds, resident bytes) summed over
    the live processes of group ``pgid``; None when none is left."""
    if pgid is None:
        return None
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    user = system = rss = 0
    found = False
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            # Fields from the state (3) on: pgrp 5, utime 14, stime 15, rss 24.
            if fields[0] == b"Z" or int(fields[2]) != pgid:
                continue
            user += int(fields[11])
            system += int(fields[12])
            rss += int(fields[21])
            found = True
        except (OSError, IndexError, ValueError):
            continue
    if not found:
        return None
    return user / _TICKS, system / _TICKS, rss * _PAGE


__all__ = ["process_group_usage"]
