"""TensorFlow's start-up log lines held to ``TF_CPP_MIN_LOG_LEVEL``.

TensorFlow logs a few lines (absl's "before InitializeLog" warning, oneDNN,
the CUDA runtime stub) while each of its shared libraries loads, before it
applies ``TF_CPP_MIN_LOG_LEVEL``: once for ``import tensorflow``, again for
Keras. A fine-grained task passes its stderr through a filter process while
TensorFlow starts; a replica task filters its command's stderr as it
forwards it (``NoiseFilter``), since the command loads TensorFlow whenever
it likes. Only those lines go: C++ log lines below the level, which
TensorFlow drops itself once it has read it (the user's own absl logging
names ``.py`` files), and in a task without GPUs the failed ``cuInit``.
``tfrun -v`` sets no level: everything passes.
"""

import contextlib
import os
import re
import sys

from ..protocol import task_env

# TensorFlow's C++ log lines (absl's format: "I0000 00:00:1795... 123 file.cc:45] ...")
# and their severities; TF_CPP_MIN_LOG_LEVEL=N drops those below N.
_LOG_LINE = re.compile(rb"([IWEF])\d{4} [\d:.]+ +\d+ [^ \]]+\.(?:cc|cpp|c|h):\d+\] ")
# The start of a line that may still become one of those.
_LOG_START = re.compile(rb"[IWEF](?:\d{0,3}|\d{4}(?: (?:[\d:.]*|[\d:.]+ +(?:\d*|\d+ [^ \]]*\]?)))?)")
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}
_BEFORE_INIT = b"WARNING: All log messages before absl::InitializeLog() is called"
# CUDA's answer where there is no driver: expected in a task given no GPUs.
_NO_CUDA = b"failed call to cuInit"

# What the filter process runs: filter_lines from stdin to stdout.
_FILTER = ("import sys; from tfmesos.task.quiet import filter_lines; "
           "filter_lines(sys.stdin.buffer, sys.stdout.buffer, int(sys.argv[1]), "
           "int(sys.argv[2]) if sys.argv[2:] else None)")


def min_log_level(environ):
    """``TF_CPP_MIN_LOG_LEVEL`` as TensorFlow reads it (0: everything)."""
    try:
        return int(environ.get("TF_CPP_MIN_LOG_LEVEL") or 0)
    except ValueError:
        return 0


def task_gpus(environ):
    """The GPUs Mesos gave the task (``TFMESOS_GPUS``), None when unknown."""
    try:
        return int(environ[task_env.GPUS])
    except (KeyError, ValueError):
        return None


def tensorflow_noise(line, level, gpus=None):
    """Whether ``line`` (bytes) is a TensorFlow log line below ``level``
    (``gpus``: the task's, 0 makes the failed cuInit noise too).

    Each library TensorFlow loads logs after absl's "WARNING: All log
    messages before absl::InitializeLog() ..."; this applies the level to
    that line too."""
    if level <= 0:
        return False
    if line.startswith(_BEFORE_INIT):
        return level > _SEVERITY[b"W"]
    match = _LOG_LINE.match(line)
    if match is None:
        return False
    return _SEVERITY[match.group(1)] < level or (gpus == 0 and _NO_CUDA in line)


class NoiseFilter:
    """``tensorflow_noise`` over a stream of bytes cut anywhere: lines of
    noise are dropped, everything else passes as it comes, but the start of
    a line that may still turn out to be noise, held until it is known."""

    def __init__(self, level, gpus=None):
        self.level, self.gpus = level, gpus
        self._held = b""      # the current line so far, while undecided
        self._drop = None     # the current line's verdict once decided

    def feed(self, data):
        """Take ``data``; returns what passes now."""
        if self.level <= 0:
            return data
        out, start = [], 0
        while start < len(data):
            end = data.find(b"\n", start) + 1
            piece, start = data[start:end or len(data)], end or len(data)
            if self._drop is None:
                self._held += piece
                self._drop = self._verdict(self._held, complete=bool(end))
                if self._drop is False:
                    out.append(self._held)
                if self._drop is not None:
                    self._held = b""
            elif not self._drop:
                out.append(piece)
            if end:
                self._drop = None
        return b"".join(out)

    def close(self):
        """The end of the stream: an undecided unfinished line passes."""
        held, self._held, self._drop = self._held, b"", None
        return held

    def _verdict(self, line, complete):
        """True: noise; False: not; None: not known before more of it."""
        if tensorflow_noise(line, self.level, self.gpus):
            return True
        if complete:
            return False
        if _BEFORE_INIT.startswith(line) or _LOG_START.fullmatch(line):
            return None
        if self.gpus == 0 and _LOG_LINE.match(line):
            return None     # the cuInit failure is known by its text
        return False


@contextlib.contextmanager
def tensorflow_startup_filtered(level, gpus=None):
    """Pass this process's stderr (fd 2) through ``tensorflow_noise`` while
    TensorFlow loads and starts; everything else, errors included, passes.
    The filter is a child process, so that what a crash of this one wrote
    last still comes out."""
    if level <= 0:
        yield
        return
    # fine-grained tasks only: not on a replica task's start-up path
    import subprocess
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    argv = [sys.executable, "-c", _FILTER, str(level)] + ([] if gpus is None else [str(gpus)])
    try:
        child = subprocess.Popen(argv, stdin=read_end, stdout=saved, stderr=saved)
    except OSError:
        child = None
    os.close(read_end)
    if child is not None:
        os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)   # the pipe's last write end: the filter reads to its end
        os.close(saved)
        if child is not None:
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:
                pass


def filter_lines(lines, out, level, gpus=None):
    """Copy ``lines`` to ``out``, less ``tensorflow_noise``."""
    for line in lines:
        if not tensorflow_noise(line, level, gpus):
            out.write(line)
            out.flush()
