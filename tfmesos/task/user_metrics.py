"""``tfmesos.log_metrics(step=None, **values)``: metrics from any process of
a run, recorded by tfrun (run.json, the status line, ``tfmesos show``,
report.html). Standard library only: importing it costs nothing.

Where a point goes:

* in a process that runs ``tfmesos.cluster()`` (fine-grained mode), to that
  run's record directly (``record_locally``, set by ``cluster()``);
* in a replica task's command (and what it starts), to its task entry as
  one datagram on the unix socket ``$TFMESOS_METRICS_SOCKET``; the entry
  sends them on to tfrun over its authenticated rendezvous connection
  (``metrics_relay``);
* anywhere else nowhere: a warning, once.

``log_metrics`` never raises and never blocks: what cannot be logged (a
value that is not a number, a name too long, more than ``MAX_VALUES``
values) is left out with a warning, once per kind; a value that is not
finite (NaN, inf) is recorded as null; a point the task entry cannot take
at once (its queue is full: the relay's thread is slow to run on a loaded
machine, or a flood) waits in this process, in order, for the next call or
the process's exit; only past ``MAX_PENDING`` waiting points is the oldest
dropped (and counted).
"""

import atexit
import collections
import json
import os
import socket
import sys
import threading
import time
import warnings

from ..protocol import task_env
from ..protocol.metric_points import (
    MAX_DATAGRAM,
    MAX_VALUES,
    MetricError,
    check_name,
    check_step,
    check_value,
    dropped_datagram,
)

_lock = threading.Lock()
# cluster()'s recorders open in this process, the newest last: (the thread
# that opened its block, its token, callable(point)).
_local: list = []
_socket = None         # (pid, socket) to the task entry
MAX_PENDING = 512      # points waiting in this process for the task entry
PENDING_AT_EXIT = 1.0  # seconds the exit waits for the task entry to take them
_pending: collections.deque = collections.deque()   # (path, datagram), oldest first
_next_step = 0         # the step of a call without one
_warned: set[str] = set()
dropped = 0            # points the task entry could not take (a flood)
_untold = 0            # of dropped: not yet counted to the task entry (DROPPED_KEY)


class MetricsWarning(RuntimeWarning):
    """Metrics that are not recorded, or not as given."""


def log_metrics(step=None, **values):
    """Record ``values`` (numbers: Python's, numpy's, TensorFlow's or JAX's
    scalars, PyTorch's tensors of one element on any device) at ``step``
    (an int; None: one more than this process's last step, 0 at first) for
    the task this process belongs to. Returns True when the point went to
    tfrun (or cluster()'s record), else False."""
    return log_values(step, values)


def log_values(step, values, depth=0, checked=False):
    """``log_metrics(step, **values)`` for the integrations (``tfmesos.torch``,
    ``tfmesos.lightning``): ``depth`` is how many frames more than
    log_metrics' lie between the user's code and this call (a warning
    points at the user's line); ``checked``: ``values`` are ``numbers()``'
    already."""
    global _next_step
    if step is None:
        step = _next_step
    try:
        step = check_step(step)
    except MetricError as exc:
        _warn("step", "tfmesos.log_metrics: %s; the values were not recorded" % exc,
              4 + depth)
        return False
    clean = values if checked else numbers(values, depth + 2)
    if not clean:
        return False
    point = [step, round(time.time(), 3), clean]
    with _lock:
        _next_step = max(_next_step, step + 1)
        local = _recorder()
    if local is not None:
        local(point)
        return True
    path = os.environ.get(task_env.METRICS_SOCKET)
    if not path:
        _warn("outside", "tfmesos.log_metrics: not in a tfmesos run (no tfrun task, no "
              "tfmesos.cluster() in this process): metrics are not recorded", 4 + depth)
        return False
    return _send(path, point, depth)


def record_locally(recorder):
    """``cluster()``: send points to ``recorder(point)`` while its block is
    open: those of the thread that opens it (until it opens another), and
    of any other thread, to the newest block open. Returns the token that
    ``stop_recording`` takes. Two blocks open at once in threads of one
    process shared one recorder: the second took the first's points, and
    lost its own once the first closed (it restored the one it replaced)."""
    token = object()
    with _lock:
        _local.append((threading.get_ident(), token, recorder))
    return token


def stop_recording(token):
    """``cluster()``'s block closed: its recorder gets no more points."""
    with _lock:
        _local[:] = [entry for entry in _local if entry[1] is not token]


def _recorder():
    """(Under the lock) where a point of this thread goes: its newest open
    block's recorder, else the newest block's; None outside cluster()."""
    me = threading.get_ident()
    for thread, _, recorder in reversed(_local):
        if thread == me:
            return recorder
    return _local[-1][2] if _local else None


def numbers(values, depth=0, keep=False):
    """``{name: float, or None when not finite}`` of ``values``: what cannot
    be logged is left out with a warning, once per kind (``keep``: a value
    that is not a number is kept as NaN, so that every rank of a collective
    reduces the same names; recorded as null). ``depth``: how many frames
    lie between the user's code and this call (warnings point there)."""
    clean: dict[str, object] = {}
    for name, value in values.items():
        if len(clean) == MAX_VALUES:
            _warn("many", "tfmesos.log_metrics: at most %d values a call; %s and what "
                  "follows were not recorded" % (MAX_VALUES, name), 3 + depth)
            break
        try:
            check_name(name)
        except MetricError as exc:
            _warn("name:%s" % str(name)[:80], "tfmesos.log_metrics: %s; not recorded" % exc,
                  3 + depth)
            continue
        try:
            scalar = _scalar(value)
            clean[name] = number = check_value(scalar)
        except MetricError as exc:
            _warn("value:%s" % name, "tfmesos.log_metrics: %s: %s; %s" % (
                name, exc, "recorded as null" if keep else "not recorded"), 3 + depth)
            if keep:
                clean[name] = None
            continue
        if number is None:
            _warn("finite:%s" % name, "tfmesos.log_metrics: %s is not finite (%r): recorded "
                  "as null" % (name, scalar), 3 + depth)
    return clean


def _scalar(value):
    """A PyTorch tensor's one element as a Python number (``item()``: copied
    off its device, outside autograd); MetricError for a tensor of more or
    fewer elements; any other value as given (numpy's, TensorFlow's and
    JAX's scalars convert through ``float()``, ``check_value``). PyTorch is
    not imported here: a tensor exists only in a process that imported it."""
    torch = sys.modules.get("torch")
    tensor = getattr(torch, "Tensor", None) if torch is not None else None
    if tensor is None or not isinstance(value, tensor):
        return value
    count = value.numel()
    if count != 1:
        raise MetricError("a metric value must be one number, not a tensor of %d elements "
                          "(shape %s): log its mean() or one element"
                          % (count, list(value.shape)))
    try:
        return value.detach().item()
    except Exception as exc:     # its device's error (CUDA): log_metrics never raises
        raise MetricError("a tensor whose value cannot be read (%s)" % exc) from None


def _send(path, point, depth=0):
    """One datagram to the task entry, after those waiting; kept in order
    when it cannot take it now (its queue holds ``max_dgram_qlen``, 10 by
    Linux's default: a relay thread that waits for the CPU a tenth of a
    second is enough)."""
    data = json.dumps(point, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(data) > MAX_DATAGRAM:
        _warn("size", "tfmesos.log_metrics: a point of %d bytes exceeds %d; not recorded"
              % (len(data), MAX_DATAGRAM), 5 + depth)
        return False
    with _lock:
        sock = _connected()
        while _pending and _try(sock, _pending[0][0], _pending[0][1], depth):
            _pending.popleft()
        if not _pending:
            _tell_dropped(sock, path, depth)
        if not _pending and _try(sock, path, data, depth):
            return True
        if len(_pending) == MAX_PENDING:
            _pending.popleft()
            _dropped(1)
        _pending.append((path, data))
        return False


def _connected():
    """This process's socket (a forked child makes its own)."""
    global _socket
    if _socket is None or _socket[0] != os.getpid():
        _pending.clear()    # a forked child's: its parent's points are the parent's to send
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        if _socket is None:
            atexit.register(_send_pending)
        _socket = (os.getpid(), sock)
    return _socket[1]


def _try(sock, path, data, depth):
    """Whether the task entry took ``data`` at once."""
    try:
        sock.sendto(data, path)
        return True
    except BlockingIOError:     # its queue is full: a flood
        return False
    except OSError as exc:
        _warned_gone(exc, depth)
        return True             # nothing will take it: not kept


def _dropped(count):
    global dropped, _untold
    dropped += count
    _untold += count


def _tell_dropped(sock, path, depth):
    """(Under the lock) count the points dropped here to the task entry, so
    that the run's record says they were left out (``metrics_dropped``)."""
    global _untold
    if _untold and _try(sock, path, dropped_datagram(_untold), depth):
        _untold = 0


def _warned_gone(exc, depth):
    kind = "gone"
    if kind not in _warned:
        _warned.add(kind)
        warnings.warn("tfmesos.log_metrics: the task entry does not take metrics (%s); they "
                      "are not recorded" % exc, MetricsWarning, stacklevel=6 + depth)


def _send_pending(timeout=PENDING_AT_EXIT):
    """At exit: the points the task entry could not take yet, waiting up to
    ``timeout`` in all for it to make room."""
    global _untold
    with _lock:
        if not _pending or _socket is None or _socket[0] != os.getpid():
            return
        sock = _socket[1]
        deadline = time.monotonic() + timeout
        try:
            path = _pending[0][0]
            while _pending:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                sock.sendto(_pending[0][1], _pending[0][0])
                _pending.popleft()
            if _untold:
                sock.sendto(dropped_datagram(_untold), path)
                _untold = 0
        except OSError:
            _dropped(len(_pending))
            _pending.clear()
        finally:
            sock.setblocking(False)    # called before the exit too (tests, a flush)


def _warn(kind, message, stacklevel=4):
    """``message`` once per ``kind``, at the caller of log_metrics."""
    with _lock:
        if kind in _warned:
            return
        _warned.add(kind)
    warnings.warn(message, MetricsWarning, stacklevel=stacklevel)
