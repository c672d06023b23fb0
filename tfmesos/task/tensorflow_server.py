"""Fine-grained mode on the task side: a TensorFlow gRPC server for the
task's role, up until the scheduler says stop or goes away. While the
connection registers again (``connection``: the grace after a drop, or a
run's failover timeout while a new scheduler takes over) ``receive`` waits
and the server keeps serving. TensorFlow is imported here only, when a
fine-grained task has its role. Told to stop (or its scheduler gone) while
TensorFlow still loads, the task ends at once, as it would have once its
server was up: an import cannot be cut short, and the ~5 s of CPU it has
left would only hold the run's stop until its grace ran out and the
teardown killed the task."""

import os
import sys
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
        if not stopped.loading():     # told to stop before TensorFlow began to load
            return stopped.wait()
        tf = import_tensorflow()  # only this mode needs it

        server = tf.distribute.Server(tf.train.ClusterSpec(start["cluster"]),
                                      job_name=start["job"], task_index=start["index"],
                                      protocol="grpc", start=True)
        if not stopped.loaded():     # told to stop as the server started: none is up
            return stopped.wait()
    print("tfmesos: TensorFlow server %s for /job:%s/task:%d is up"
          % (server.target, start["job"], start["index"]), flush=True)
    return stopped.wait()


# What ``import tensorflow`` loads where it is installed, each an ImportError
# ignored, which a server needs none of: Keras (tensorflow/__init__.py:
# ``importlib.import_module("keras.src.optimizers")``, to register its
# optimizers for SavedModel; scikit-learn with it), JAX
# (tensorflow/lite/python/util.py: ``from jax import jit``, for TFLite's
# conversion of JAX functions), SciPy (the legacy tensorflow/python/keras:
# ``from scipy.sparse import issparse``).
NOT_FOR_A_SERVER = ("keras", "tf_keras", "jax", "scipy")


def import_tensorflow():
    """TensorFlow, without the packages of ``NOT_FOR_A_SERVER``, which a
    task that serves gRPC never uses: it runs none of the user's Python and
    loads no SavedModel. Keras is ~2 s of its CPU, JAX ~1-2 s, SciPy ~0.3 s.
    Hidden for the import only: ``tf.keras`` still loads Keras afterwards,
    though ``import tensorflow.keras`` does not resolve."""
    hidden = [name for name in NOT_FOR_A_SERVER if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # import: "not installed"
    try:
        import tensorflow
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    return tensorflow


# How a task leaves while TensorFlow loads: os._exit, from the reading
# thread. Tests that run a task in their own process put a recorder here.
_leave_process = os._exit


class _StopWatch:
    """Reads ``conn`` in a thread (``receive`` answers the pings) until the
    scheduler says stop or is gone; ``wait`` waits for that and returns 0,
    or raises what else ended the reading (a bug: the task fails)."""

    def __init__(self, conn):
        self._conn = conn
        self._done = threading.Event()
        self._error = None
        self._lock = threading.Lock()
        self._loading = False
        self.reader = threading.Thread(target=self._read, name="tfmesos-receive", daemon=True)
        self.reader.start()

    def loading(self):
        """TensorFlow begins to load (True), unless the reading ended first."""
        with self._lock:
            self._loading = not self._done.is_set()
            return self._loading

    def loaded(self):
        """TensorFlow and the server are up (True), unless the reading ended
        meanwhile (the task did not end at once: it ended in error)."""
        with self._lock:
            self._loading = False
            return not self._done.is_set()

    def _read(self):
        try:
            while self._conn.receive()["type"] != "stop":
                pass
        except (wire.WireError, OSError) as exc:
            try:
                print("tfmesos: scheduler gone (%s); stopping" % exc, flush=True)
            except (OSError, ValueError):
                pass    # a sandbox file that cannot be written: nowhere to say it
        except BaseException as exc:   # raised again by wait, in the task's main thread
            self._error = exc
        finally:   # also when saying so failed (a closed stdout): else wait() never returns
            with self._lock:
                self._done.set()
                if self._loading and self._error is None:
                    self._end_now()

    def _end_now(self):
        """Leave while the main thread still imports TensorFlow: as ``entry.run``
        leaves once the server stopped (exit code 0), the connection closed."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            self._conn.close()
        except OSError:
            pass
        _leave_process(0)

    def done(self):
        return self._done.is_set()

    def wait(self):
        self._done.wait()
        if self._error is not None:
            raise self._error
        return 0
