"""The task entry point, ``python -m tfmesos.server``: what every Mesos task
of a tfmesos run executes.

It registers its address with the scheduler's rendezvous, waits for its role
and the cluster spec, then either serves a TensorFlow gRPC server
(fine-grained mode) or runs the user's command (replica mode, ``replica``),
sending its output back. When the scheduler goes away the task stops, and
kills what it started: no orphans. TensorFlow is imported only in
fine-grained mode, where what it logs while it loads is held to
``TF_CPP_MIN_LOG_LEVEL`` as well (``tensorflow_noise``).
"""

import contextlib
import json
import os
import re
import subprocess
import sys

from . import wire
from .hostport import free_port
from .replica import run_replica
from .task_connection import Connection, TaskEnv, TaskError


# TensorFlow's C++ log lines (absl's format: "I0000 00:00:1795... 123 file.cc:45] ...")
# and their severities; TF_CPP_MIN_LOG_LEVEL=N drops those below N.
_LOG_LINE = re.compile(rb"([IWEF])\d{4} [\d:.]+ +\d+ [^ \]]+:\d+\] ")
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}
_BEFORE_INIT = b"WARNING: All log messages before absl::InitializeLog() is called"


def run_fine_grained(conn, start):
    with tensorflow_startup_filtered(min_log_level(os.environ)):
        import tensorflow as tf  # only this mode needs it

        server = tf.distribute.Server(tf.train.ClusterSpec(start["cluster"]),
                                      job_name=start["job"], task_index=start["index"],
                                      protocol="grpc", start=True)
    print("tfmesos: TensorFlow server %s for /job:%s/task:%d is up"
          % (server.target, start["job"], start["index"]), flush=True)
    try:
        while conn.receive()["type"] != "stop":
            pass
    except (wire.WireError, OSError) as exc:
        print("tfmesos: scheduler gone (%s); stopping" % exc, flush=True)
    return 0


def min_log_level(environ):
    """``TF_CPP_MIN_LOG_LEVEL`` as TensorFlow reads it (0: everything)."""
    try:
        return int(environ.get("TF_CPP_MIN_LOG_LEVEL") or 0)
    except ValueError:
        return 0


def tensorflow_noise(line, level):
    """Whether ``line`` (bytes) is a TensorFlow log line below ``level``.

    TensorFlow logs a few lines (oneDNN, the CUDA runtime stub) while its
    shared libraries load, before it applies ``TF_CPP_MIN_LOG_LEVEL``, each
    library after absl's "WARNING: All log messages before
    absl::InitializeLog() ..."; this applies the level to those too."""
    if line.startswith(_BEFORE_INIT):
        return level > _SEVERITY[b"W"]
    match = _LOG_LINE.match(line)
    return bool(match) and _SEVERITY[match.group(1)] < level


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


_FILTER = ("import sys; from tfmesos.server import filter_lines; "
           "filter_lines(sys.stdin.buffer, sys.stdout.buffer, int(sys.argv[1]))")


def filter_lines(lines, out, level):
    """Copy ``lines`` to ``out``, less ``tensorflow_noise``."""
    for line in lines:
        if not tensorflow_noise(line, level):
            out.write(line)
            out.flush()


def main(environ=None):
    environ = os.environ if environ is None else environ
    try:
        env = TaskEnv.from_environ(environ)
        port = env.port or free_port()
        conn = Connection(env)
        conn.register(env.host, port)
        try:
            start = conn.receive()
        except (wire.WireError, OSError) as exc:
            raise TaskError("no start message from the scheduler: %s" % exc) from None
        if start["type"] != "start":
            raise TaskError("the scheduler sent %r instead of start" % start["type"])
        print("tfmesos: %s task %d of %s, cluster %s"
              % (start["mode"], start["index"], start["job"], json.dumps(start["cluster"])),
              flush=True)
        if start["mode"] == "fine":
            code = run_fine_grained(conn, start)
        else:
            code = run_replica(conn, start)
        conn.close()
        return code
    except TaskError as exc:
        print("tfmesos task error: %s" % exc, file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # TensorFlow's server threads do not shut down cleanly; leave at once.
    os._exit(code)
