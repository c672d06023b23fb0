"""TensorFlow's start-up log lines held to ``TF_CPP_MIN_LOG_LEVEL``.

TensorFlow logs a few lines (oneDNN, the CUDA runtime stub) while its shared
libraries load, before it applies ``TF_CPP_MIN_LOG_LEVEL``; a fine-grained
task passes its stderr through a filter process while TensorFlow starts.
"""

import contextlib
import os
import re
import subprocess
import sys

# TensorFlow's C++ log lines (absl's format: "I0000 00:00:1795... 123 file.cc:45] ...")
# and their severities; TF_CPP_MIN_LOG_LEVEL=N drops those below N.
_LOG_LINE = re.compile(rb"([IWEF])\d{4} [\d:.]+ +\d+ [^ \]]+:\d+\] ")
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}
_BEFORE_INIT = b"WARNING: All log messages before absl::InitializeLog() is called"

# What the filter process runs: filter_lines from stdin to stdout.
_FILTER = ("import sys; from tfmesos.task.quiet import filter_lines; "
           "filter_lines(sys.stdin.buffer, sys.stdout.buffer, int(sys.argv[1]))")


def min_log_level(environ):
    """``TF_CPP_MIN_LOG_LEVEL`` as TensorFlow reads it (0: everything)."""
    try:
        return int(environ.get("TF_CPP_MIN_LOG_LEVEL") or 0)
    except ValueError:
        return 0


def tensorflow_noise(line, level):
    """Whether ``line`` (bytes) is a TensorFlow log line below ``level``.

    Each library TensorFlow loads logs after absl's "WARNING: All log
    messages before absl::InitializeLog() ..."; this applies the level to
    that line too."""
    if line.startswith(_BEFORE_INIT):
        return level > _SEVERITY[b"W"]
    match = _LOG_LINE.match(line)
    return match is not None and _SEVERITY[match.group(1)] < level


@contextlib.contextmanager
def tensorflow_startup_filtered(level):
    """Pass this process's stderr (fd 2) through ``tensorflow_noise`` while
    TensorFlow loads and starts; everything else, errors included, passes.
    The filter is a child process, so that what a crash of this one wrote
    last still comes out."""
    if level <= 0:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    try:
        child = subprocess.Popen([sys.executable, "-c", _FILTER, str(level)], stdin=read_end,
                                 stdout=saved, stderr=saved)
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


def filter_lines(lines, out, level):
    """Copy ``lines`` to ``out``, less ``tensorflow_noise``."""
    for line in lines:
        if not tensorflow_noise(line, level):
            out.write(line)
            out.flush()
