"""Fine-grained mode on the task side: a TensorFlow gRPC server for the
task's role, up until the scheduler says stop or goes away. While the
connection registers again (``connection``: the grace after a drop, or a
run's failover timeout while a new scheduler takes over) ``receive`` waits
and the server keeps serving. TensorFlow is imported here only, when a
fine-grained task has its role."""

import os
import threading

from ..protocol import wire
from .quiet import min_log_level, task_gpus, tensorflow_startup_filtered


def run_fine_grained(conn, start):
    """Serve ``/job:<job>/task:<index>`` of ``start["cluster"]``; the exit code.

    The connection is read (its pings answered) from the start, by a thread
    of its own: importing TensorFlow and starting its server take ~5 s of
    CPU, which a loaded agent can stretch past the rendezvous' stall
    timeout, and a task silent that long is counted unreachable (CI saw
    every task of a fine-grained run fail so while its servers trained)."""
    stopped = _StopWatch(conn)
    with tensorflow_startup_filtered(min_log_level(os.environ), task_gpus(os.environ)):
        import tensorflow as tf  # only this mode needs it

        if stopped.done():   # told to stop while TensorFlow loaded: no server
            return stopped.wait()
        server = tf.distribute.Server(tf.train.ClusterSpec(start["cluster"]),
                                      job_name=start["job"], task_index=start["index"],
                                      protocol="grpc", start=True)
    print("tfmesos: TensorFlow server %s for /job:%s/task:%d is up"
          % (server.target, start["job"], start["index"]), flush=True)
    return stopped.wait()


class _StopWatch:
    """Reads ``conn`` in a thread (``receive`` answers the pings) until the
    scheduler says stop or is gone; ``wait`` waits for that and returns 0,
    or raises what else ended the reading (a bug: the task fails)."""

    def __init__(self, conn):
        self._conn = conn
        self._done = threading.Event()
        self._error = None
        threading.Thread(target=self._read, name="tfmesos-receive", daemon=True).start()

    def _read(self):
        try:
            while self._conn.receive()["type"] != "stop":
                pass
        except (wire.WireError, OSError) as exc:
            print("tfmesos: scheduler gone (%s); stopping" % exc, flush=True)
        except BaseException as exc:   # raised again by wait, in the task's main thread
            self._error = exc
        finally:
            self._done.set()

    def done(self):
        return self._done.is_set()

    def wait(self):
        self._done.wait()
        if self._error is not None:
            raise self._error
        return 0
