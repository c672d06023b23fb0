"""What a replica task's command really used, measured by the task entry
itself from ``/proc`` (so the same on the embedded master and on any Mesos
agent): ``UsageMonitor`` follows the command's process tree while it runs
and reports, with the exit frame (``rendezvous`` protocol), ::

    wall_s            seconds from the command's start to its end
    cpu_s             user + system cpu seconds of the whole tree (user_s, system_s)
    peak_rss_mb       peak RSS of the largest single process (its VmHWM,
                      and getrusage's ru_maxrss of the reaped children)
    peak_tree_rss_mb  peak of the tree's summed RSS (sampled each second)
    peak_gpu_mb       peak GPU memory of the tree's processes (nvidia-smi),
                      only when the task was given GPUs, else null
    samples           [{t, cpu_s, rss_mb[, gpu_mb]}] every ``sample_interval_s``
                      (10 s, ``$TFMESOS_USAGE_INTERVAL`` in the task's
                      environment; at most MAX_SAMPLES: past that, every other
                      sample is dropped and the interval doubles)
    cgroup            {limit_mb, peak_mb, oom_kills}: the task's memory cgroup
                      (a Mesos container, or the embedded master's isolation),
                      when it has a limit; oom_kills counts the OOM killer's
                      kills in it while the command ran

The command's tree is its guard's process group and session (``replica``
starts each command as a session leader) plus any descendant by parent
pid. Nothing here imports more than the standard library.
"""

import os
import resource
import threading
import time

from ..protocol import task_env

SAMPLE_INTERVAL = 10.0     # seconds between the samples kept in run.json
PEAK_INTERVAL = 1.0        # seconds between looks at the tree for its peaks
# A look reads the stat of the tree's processes and of those new since the
# last look, not of the machine's others (each task of a host read every
# process's each second: 100 tasks on one machine burnt a core). One in
# FULL_LOOK_EVERY reads them all: a pid reused within a look shows then.
FULL_LOOK_EVERY = 30
MAX_SAMPLES = 360
# MB as Mesos counts mem: 2^20 bytes (stout's Megabytes, 3rdparty/stout/include/stout/bytes.hpp)
MB = 1024.0 * 1024.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_NVIDIA_TIMEOUT = 10.0
_UNLIMITED = 1 << 60


def _read(path):
    with open(path, "rb") as handle:
        return handle.read().decode("ascii", "replace")


class ProcessTable:
    """One look at ``/proc``: pid -> (ppid, session, cpu ticks of itself
    and its reaped children, rss bytes) of the processes listed, but for
    those in ``skip`` (not read: ``listed`` has every pid)."""

    def __init__(self, proc="/proc", skip=frozenset()):
        self.proc = proc
        self.entries = {}
        self.listed = set()
        try:
            names = os.listdir(proc)
        except OSError:
            names = []
        for name in names:
            if not name.isdigit():
                continue
            pid = int(name)
            self.listed.add(pid)
            if pid in skip:
                continue
            try:
                fields = _read(os.path.join(proc, name, "stat")).rsplit(")", 1)[1].split()
                if fields[0] in ("Z", "X"):
                    continue
                ppid, session = int(fields[1]), int(fields[3])
                ticks = sum(int(v) for v in fields[11:15])   # utime stime cutime cstime
                rss = int(fields[21]) * _PAGE
            except (OSError, IndexError, ValueError):
                continue
            self.entries[pid] = (ppid, session, ticks, rss)

    def tree(self, root):
        """Pids of ``root``, its session and their descendants."""
        children: dict[int, list[int]] = {}
        found = set()
        for pid, (ppid, session, _, _) in self.entries.items():
            children.setdefault(ppid, []).append(pid)
            if session == root or pid == root:
                found.add(pid)
        todo = list(found)
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return found

    def high_water_mark(self, pid):
        """A process's peak RSS in bytes (VmHWM), or 0."""
        try:
            for line in _read(os.path.join(self.proc, str(pid), "status")).splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        return 0


def gpu_memory_mb(pids, visible=None, run=None):
    """MB of GPU memory that ``pids`` hold (``nvidia-smi`` compute apps); when
    none of them is listed (another pid namespace), the memory in use on
    the ``visible`` GPUs (the task's own). None without nvidia-smi.
    ``run``: ``subprocess.run`` (it and shutil imported here: a task without
    GPUs, most of them, never needs them)."""
    import shutil
    if shutil.which("nvidia-smi") is None:
        return None
    import subprocess
    run = run or subprocess.run
    try:
        out = run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                   "--format=csv,noheader,nounits"], capture_output=True, text=True,
                  timeout=_NVIDIA_TIMEOUT, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    listed = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            try:
                listed.append((int(parts[0]), float(parts[1])))
            except ValueError:
                continue
    mine = [used for pid, used in listed if pid in pids]
    if mine or not visible:
        return float(sum(mine))
    try:
        out = run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits",
                   "-i", visible], capture_output=True, text=True, timeout=_NVIDIA_TIMEOUT,
                  check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    total = 0.0
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            total += float(parts[1])
        except (IndexError, ValueError):
            continue
    return total


def memory_cgroup(proc_self="/proc/self/cgroup", root="/sys/fs/cgroup"):
    """The directory of this process's memory cgroup (v1 ``memory``, else
    v2), where this host shows it; None otherwise."""
    try:
        lines = _read(proc_self).splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            for base in (os.path.join(root, "memory"), os.path.join(root, "memory,cpu")):
                path = os.path.join(base, parts[2].lstrip("/"))
                if os.path.exists(os.path.join(path, "memory.limit_in_bytes")):
                    return path
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "0" and parts[1] == "":
            for base in (root, os.path.join(root, "unified")):
                path = os.path.join(base, parts[2].lstrip("/"))
                if os.path.exists(os.path.join(path, "memory.max")):
                    return path
    return None


class CgroupMemory:
    """The memory cgroup of this task: its limit, peak and OOM kill count."""

    def __init__(self, path):
        self.path = path
        self.v2 = os.path.exists(os.path.join(path, "memory.max"))

    def _number(self, name):
        try:
            text = _read(os.path.join(self.path, name)).split()[0]
        except (OSError, IndexError):
            return None
        return int(text) if text.isdigit() else None

    def limit(self):
        value = self._number("memory.max" if self.v2 else "memory.limit_in_bytes")
        return value if value is not None and value < _UNLIMITED else None

    def peak(self):
        return self._number("memory.peak" if self.v2 else "memory.max_usage_in_bytes")

    def oom_kills(self):
        try:
            text = _read(os.path.join(self.path, "memory.events" if self.v2
                                      else "memory.oom_control"))
        except OSError:
            return None
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "oom_kill" and parts[1].isdigit():
                return int(parts[1])
        return None


def _mb(count):
    return round(count / MB, 1)


class UsageMonitor:
    """Follows the process tree of ``root`` (a pid) on a thread from
    ``start()`` until ``stop()``, which returns the usage report (module
    docstring). ``gpus``: whether the task was given GPUs (``visible``: their
    ids, from ``CUDA_VISIBLE_DEVICES``); ``started``: when the command began,
    on ``clock`` (None: now)."""

    def __init__(self, root, gpus=False, visible=None, proc="/proc", clock=time.monotonic,
                 sample_interval=SAMPLE_INTERVAL, peak_interval=PEAK_INTERVAL,
                 max_samples=MAX_SAMPLES, cgroup=None, gpu_reader=gpu_memory_mb,
                 started=None):
        self.root = root
        self.gpus = bool(gpus)
        self.visible = visible or None
        self.proc = proc
        self.clock = clock
        self.sample_interval = sample_interval
        self.peak_interval = peak_interval
        self.max_samples = max(2, max_samples)
        self.gpu_reader = gpu_reader
        self.cgroup = cgroup
        self._oom_before = cgroup.oom_kills() if cgroup is not None else None
        self._start = clock() if started is None else started   # the command's start
        self._usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._next_sample = self._start + sample_interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._cpu_ticks = {}      # pid -> (ppid, cpu ticks of itself and its reaped children)
        self._gone_ticks = 0      # ticks of tree processes gone, not reaped in the tree
        self._cpu_max = 0.0
        self._looks = 0
        # Listed at the last look, neither in the tree nor able to join it:
        # a session is joined only by a fork inside it, and a process is
        # adopted only by init or a subreaper, whose orphans were the
        # subreaper's descendants (in the tree) already.
        self._others: frozenset[int] = frozenset()
        self.peak_rss = 0         # bytes, the largest process
        self.peak_tree_rss = 0    # bytes, the tree
        self.peak_gpu = None      # MB
        self.samples = []
        self._thread = threading.Thread(target=self._loop, name="tfmesos-usage", daemon=True)

    @classmethod
    def for_task(cls, root, environ, started=None):
        """A monitor for the command ``root`` of the task whose environment
        is ``environ`` (``TFMESOS_GPUS``: GPUs given by Mesos), started at
        ``started`` (``time.monotonic()``; None: now)."""
        try:
            gpus = int(environ.get(task_env.GPUS) or 0) > 0
        except ValueError:
            gpus = False
        try:
            interval = float(environ.get(task_env.USAGE_INTERVAL) or SAMPLE_INTERVAL)
        except ValueError:
            interval = SAMPLE_INTERVAL
        path = memory_cgroup()
        cgroup = CgroupMemory(path) if path else None
        if cgroup is not None and cgroup.limit() is None:
            cgroup = None     # the agent's own, shared cgroup: its OOM kills are not ours
        return cls(root, gpus=gpus, visible=environ.get("CUDA_VISIBLE_DEVICES"), cgroup=cgroup,
                   sample_interval=max(interval, PEAK_INTERVAL), started=started)

    def start(self):
        self._thread.start()
        return self

    def _loop(self):
        while True:
            self.observe()
            if self._stop.wait(self.peak_interval):
                return

    def observe(self):
        """One look at the tree: peaks, cpu, and a sample when one is due."""
        full = self._looks % FULL_LOOK_EVERY == 0
        table = ProcessTable(self.proc, skip=frozenset() if full else self._others)
        pids = table.tree(self.root)
        self._others = frozenset(table.listed - pids)
        self._looks += 1
        now = self.clock()
        with self._lock:
            for pid in set(self._cpu_ticks) - pids:
                ppid, ticks = self._cpu_ticks.pop(pid)
                # A process reaped by a parent in the tree adds to the
                # parent's cutime/cstime, counted from then on; what others
                # reaped (or nobody yet) is kept here.
                if ppid not in pids:
                    self._gone_ticks += ticks
            tree_rss = 0
            for pid in pids:
                ppid, _, ticks, rss = table.entries[pid]
                self._cpu_ticks[pid] = (ppid, max(ticks, self._cpu_ticks.get(pid, (0, 0))[1]))
                tree_rss += rss
                self.peak_rss = max(self.peak_rss, rss, table.high_water_mark(pid))
            self.peak_tree_rss = max(self.peak_tree_rss, tree_rss)
            gpu = None
            if self.gpus:
                gpu = self.gpu_reader(pids, self.visible)
                if gpu is not None:
                    self.peak_gpu = max(self.peak_gpu or 0.0, gpu)
            if now >= self._next_sample:
                self._sample(now, tree_rss, gpu)
        return pids

    def _cpu_seconds(self):
        ticks = sum(t for _, t in self._cpu_ticks.values()) + self._gone_ticks
        self._cpu_max = max(self._cpu_max, ticks / float(_TICKS))   # a zombie dips it
        return self._cpu_max

    def _sample(self, now, tree_rss, gpu):
        sample = {"t": round(now - self._start, 1), "cpu_s": round(self._cpu_seconds(), 2),
                  "rss_mb": _mb(tree_rss)}
        if self.gpus:
            sample["gpu_mb"] = gpu
        self.samples.append(sample)
        if len(self.samples) > self.max_samples:
            self.samples = self.samples[1::2]     # bounded: half as many, twice as far apart
            self.sample_interval *= 2
        self._next_sample = now + self.sample_interval

    def stop(self):
        """Stop following the tree (the command has ended and was reaped);
        the usage report."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        end = self.clock()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        user = max(0.0, after.ru_utime - self._usage_before.ru_utime)
        system = max(0.0, after.ru_stime - self._usage_before.ru_stime)
        with self._lock:
            sampled = self._cpu_seconds()
            # ru_maxrss: the largest reaped descendant, in KB on Linux.
            peak_rss = max(self.peak_rss, after.ru_maxrss * 1024)
            report = {
                "wall_s": round(end - self._start, 2),
                "cpu_s": round(max(user + system, sampled), 2),
                "user_s": round(user, 2), "system_s": round(system, 2),
                "peak_rss_mb": _mb(peak_rss),
                "peak_tree_rss_mb": _mb(max(self.peak_tree_rss, peak_rss)),
                "peak_gpu_mb": self.peak_gpu if self.gpus else None,
                "sample_interval_s": self.sample_interval,
                "samples": list(self.samples),
            }
        if self.cgroup is not None:
            after_kills = self.cgroup.oom_kills()
            limit, peak = self.cgroup.limit(), self.cgroup.peak()
            report["cgroup"] = {
                "limit_mb": _mb(limit) if limit else None,
                "peak_mb": _mb(peak) if peak else None,
                "oom_kills": (after_kills - (self._oom_before or 0))
                if after_kills is not None else None}
        return report


__all__ = ["UsageMonitor", "ProcessTable", "CgroupMemory", "memory_cgroup", "gpu_memory_mb",
           "SAMPLE_INTERVAL", "MAX_SAMPLES"]
