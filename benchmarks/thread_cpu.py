"""Runs tfrun in this process (as ``python -m tfmesos.cli.tfrun ARGS``)
and, as it leaves, writes where its own CPU went to OUT, by thread: JSON
``{"user": s, "system": s, "threads": [[name, cpu seconds, count], ...]}``,
the CPU of threads named alike summed (digits, addresses and run ids left
out of the name: ``task-tfmesos.worker``, ``rendezvous``), the
largest first; each thread's CPU is its own clock read as it ends, or at
tfrun's exit for those still running (the main thread among them).
A benchmark's tool: it wraps a private method of ``threading``.

    python benchmarks/thread_cpu.py OUT [tfrun options] -- COMMAND
"""

import json
import os
import re
import resource
import runpy
import sys
import threading
import time

_VARYING = re.compile(r"\[[0-9a-f:.]*\]|[0-9a-f]{8}|[0-9][0-9.:]*")
_SEPARATORS = re.compile(r"([.:-])[.:-]+")
_TRAILING = re.compile(r"[.:-]+(?=\s|$)")
_spent: dict = {}
_lock = threading.Lock()


def group(name):
    """A thread's name without what varies between threads of one role:
    ``task-tfmesos.3f2a1b4c.worker.12.1`` is ``task-tfmesos.worker``."""
    name = _TRAILING.sub("", _SEPARATORS.sub(r"\1", _VARYING.sub("", name)))
    return name or "(unnamed)"


def _add(name, seconds):
    with _lock:
        cpu, count = _spent.get(name, (0.0, 0))
        _spent[name] = (cpu + seconds, count + 1)


def _thread_cpu(thread):
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except (OSError, TypeError):   # ended meanwhile: it added itself
        return None


def _write(out):
    for thread in threading.enumerate():   # the main thread and those still running
        seconds = _thread_cpu(thread)
        if seconds is not None:
            _add(group(thread.name), seconds)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with _lock:
        rows = sorted(([name, cpu, count] for name, (cpu, count) in _spent.items()),
                      key=lambda row: -row[1])
    with open(out, "w", encoding="utf-8") as handle:
        json.dump({"user": usage.ru_utime, "system": usage.ru_stime, "threads": rows}, handle)


def main():
    out = sys.argv[1]
    started = threading.Thread._bootstrap_inner

    def measured(self):
        try:
            started(self)
        finally:
            _add(group(self.name), time.thread_time())

    threading.Thread._bootstrap_inner = measured
    leave = os._exit

    def written_then_left(code):   # tfrun leaves through os._exit (cli.common.leave)
        _write(out)
        leave(code)

    os._exit = written_then_left
    sys.argv = ["tfrun"] + sys.argv[2:]
    sys.path[0] = os.getcwd()   # as ``python -m`` has it, not this script's folder
    try:
        runpy.run_module("tfmesos.cli.tfrun", run_name="__main__", alter_sys=True)
    except SystemExit:
        _write(out)
        raise


if __name__ == "__main__":
    main()
