"""What every Mesos task of a tfmesos run does (``python -m tfmesos.task``).

It registers its address with the scheduler's rendezvous, waits for its role
and the cluster spec, then either serves a TensorFlow gRPC server
(fine-grained mode, ``tensorflow_server``) or runs the user's command
(replica mode, ``replica``), sending its output back. When the scheduler goes
away the task stops, and kills what it started: no orphans.

In a run that survives its scheduler (``TFMESOS_FAILOVER_TIMEOUT``), the
task waits that long for a new one (``connection``) with its command
running or its server serving, and a command that ended meanwhile has its
exit (and ``tfmesos.run``'s result) told to the new scheduler before the
task exits (``Connection.flush``); without one by then it stops as above.
"""

import json
import os
import sys

from ..protocol import wire
from ..protocol.hostport import free_port
from .bundle_dir import enter_task_directory
from .connection import Connection
from .replica import run_replica
from .task_environ import TaskEnv, TaskError
from .tensorflow_server import run_fine_grained


def main(environ=None):
    """Register, get the start message, run the task's part; the exit code."""
    environ = os.environ if environ is None else environ
    try:
        env = TaskEnv.from_environ(environ)
        # tfrun --ship's bundle (checked by the command before this started),
        # else the sandbox: a DOCKER task starts in its image's WORKDIR.
        enter_task_directory(environ)
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
        if conn.failover:   # what the task sent since it lost its scheduler, the exit frame last
            conn.flush(env.failover_timeout)
        conn.close()
        return code
    except TaskError as exc:
        print("tfmesos task error: %s" % exc, file=sys.stderr, flush=True)
        return exc.exit_code


def run():
    """``main``, then leave the process at once with its code."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:   # a sandbox file that cannot be written (a full disk)
            pass
    # TensorFlow's server threads do not shut down cleanly; leave at once.
    os._exit(code)
