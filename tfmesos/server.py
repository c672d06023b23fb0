"""The task entry point, ``python -m tfmesos.server``: what every Mesos task
of a tfmesos run executes.

It registers its address with the scheduler's rendezvous, waits for its role
and the cluster spec, then either serves a TensorFlow gRPC server
(fine-grained mode) or runs the user's command (replica mode, ``replica``),
sending its output back. When the scheduler goes away the task stops, and
kills what it started: no orphans. TensorFlow is imported only in
fine-grained mode.
"""

import json
import os
import sys

from . import wire
from .hostport import free_port
from .replica import run_replica
from .task_connection import Connection, TaskEnv, TaskError


def run_fine_grained(conn, start):
    import tensorflow as tf  # only this mode needs it

    server = tf.distribute.Server(tf.train.ClusterSpec(start["cluster"]), job_name=start["job"],
                                  task_index=start["index"], protocol="grpc", start=True)
    print("tfmesos: TensorFlow server %s for /job:%s/task:%d is up"
          % (server.target, start["job"], start["index"]), flush=True)
    try:
        while conn.receive()["type"] != "stop":
            pass
    except (wire.WireError, OSError) as exc:
        print("tfmesos: scheduler gone (%s); stopping" % exc, flush=True)
    return 0


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
