"""What Mesos' cgroups isolators hold a task to, and how they say it was
over its memory: pure values and text, no cgroup file touched (``cgroups``
applies them). Values from apache/mesos
src/slave/containerizer/mesos/isolators/cgroups/constants.hpp and
subsystems/{cpu,memory}.cpp; sizes printed as stout's ``Bytes``
(3rdparty/stout/include/stout/bytes.hpp)."""

import dataclasses

ISOLATORS = ("cgroups/cpu", "cgroups/mem")
NO_ISOLATORS = ("posix/cpu", "posix/mem")   # Mesos' default: measure, enforce nothing
CPU_SHARES_PER_CPU = 1024
MIN_CPU_SHARES = 2
CPU_CFS_PERIOD_US = 100000
MIN_CPU_CFS_QUOTA_US = 1000
MIN_MEMORY_MB = 32
MB = 1 << 20


def parse_isolation(text):
    """The cgroups isolators that ``text`` (Mesos' ``--isolation`` syntax,
    comma separated) names, as a tuple; ``posix/*`` and "" mean none.
    ValueError naming the choices."""
    if text is None:
        return ()
    chosen = []
    for name in (part.strip() for part in str(text).split(",")):
        if not name or name in NO_ISOLATORS:
            continue
        if name not in ISOLATORS:
            raise ValueError("unknown isolator %r: use cgroups/cpu and/or cgroups/mem "
                             "(or posix/cpu,posix/mem for none)" % name)
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one task is held to: ``cpus``, ``mem`` (MB), and whether the
    CFS quota caps its cpus (``cfs``)."""

    cpus: float
    mem: float
    cfs: bool = False
    isolators: tuple = ISOLATORS

    @property
    def memory_bytes(self):
        return int(max(self.mem, MIN_MEMORY_MB) * MB)

    @property
    def cpu_shares(self):
        return max(int(CPU_SHARES_PER_CPU * self.cpus), MIN_CPU_SHARES)

    @property
    def cfs_quota_us(self):
        return max(int(self.cpus * CPU_CFS_PERIOD_US), MIN_CPU_CFS_QUOTA_US)

    @property
    def cpu_weight(self):
        """cgroup v2's cpu.weight for these shares (1..10000)."""
        return min(10000, max(1, 1 + (self.cpu_shares - 2) * 9999 // 262142))


def stout_bytes(count):
    """``count`` bytes as stout's ``Bytes`` prints them: ``64MB``, ``1GB``,
    ``1536KB``, ``1000B`` (the largest unit that loses nothing)."""
    count = int(count)
    for unit in ("B", "KB", "MB", "GB"):
        if count == 0 or count % 1024:
            return "%d%s" % (count, unit)
        count //= 1024
    return "%dTB" % count


def memory_limit_message(limit_bytes, max_used_bytes):
    """Mesos' message for a task over its memory (memory.cpp, ``oomWaited``)."""
    message = "Memory limit exceeded: "
    if limit_bytes is not None:
        message += "Requested: %s " % stout_bytes(limit_bytes)
    if max_used_bytes is not None:
        message += "Maximum Used: %s" % stout_bytes(max_used_bytes)
    return message.strip()
