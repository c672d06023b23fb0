"""Find the leading Mesos master.

A master string (see :mod:`tfmesos.mesos.master_address`) is parsed by
:func:`~tfmesos.mesos.master_address.parse_master` into a ``MasterSpec``;
:func:`make_detector` turns that spec into a :class:`Detector`, which the
HTTP scheduler driver asks for the base URL of the leading master::

    spec = parse_master("zk://zk1:2181,zk2:2181/mesos")
    with make_detector(spec, timeout=10.0) as detector:
        url = detector.leader()          # "http://10.0.0.7:5050"
        ...
        if detector.leaders_changed.is_set():
            detector.leaders_changed.clear()
            url = detector.leader()

By kind of spec:

* ``local`` -- the embedded single-machine master. It has no detector:
  :func:`make_detector` refuses it, and the caller starts
  ``tfmesos.mesos.local`` instead and talks to the URL that master serves.
* fixed URLs (``host:port``, ``https://host:port``, lists of those): a
  :class:`StaticDetector`. Its :meth:`leader` is the first entry; the driver
  tries :meth:`~Detector.candidates` in order and follows a master's
  ``307 Temporary Redirect`` to the leader itself.
* ``zk://...``: a :class:`~tfmesos.mesos.zookeeper.ZKDetector`, which follows
  the masters registered in ZooKeeper.

Nothing here imports TensorFlow.
"""

import threading

from tfmesos.mesos.master_address import MasterSpec, parse_master

__all__ = [
    "DEFAULT_SESSION_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "Detector",
    "StaticDetector",
    "make_detector",
]

DEFAULT_TIMEOUT = 10.0
# Mesos' own detector uses a 10 s ZooKeeper session
# (MASTER_DETECTOR_ZK_SESSION_TIMEOUT in src/master/detector/zookeeper.cpp).
DEFAULT_SESSION_TIMEOUT = 10.0


class Detector:
    """Finds the leading Mesos master; see :func:`make_detector`.

    ``leaders_changed`` is a ``threading.Event`` the detector sets whenever
    the leader changes after a first one was found (also when it vanishes);
    the caller clears it, then asks :meth:`leader` again. A detector is a
    context manager; :meth:`close` is idempotent, and :meth:`leader` on a
    closed detector raises ``RuntimeError``.
    """

    def __init__(self, timeout=DEFAULT_TIMEOUT):
        self.timeout = check_timeout(timeout)
        self.leaders_changed = threading.Event()
        self._closed = False

    @property
    def closed(self):
        return self._closed

    def leader(self, timeout=None):
        """Base URL of the leading master, e.g. ``"http://10.0.0.1:5050"``.

        Waits at most ``timeout`` seconds (default: the detector's timeout),
        then raises :class:`~tfmesos.exceptions.MesosConnectionError`.
        """
        raise NotImplementedError

    def candidates(self, timeout=0.0):
        """Every master URL known now, the leader (or best guess) first.

        Waits at most ``timeout`` seconds (default: not at all) for a
        leader, and returns an empty tuple rather than raising when none is
        known: ``candidates() or [leader(timeout)]`` is the usual call.
        """
        raise NotImplementedError

    def close(self):
        self._closed = True

    def _check_open(self):
        if self._closed:
            raise RuntimeError("%s is closed" % (type(self).__name__,))

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


class StaticDetector(Detector):
    """Masters given as a fixed list of URLs.

    :meth:`leader` is the first URL; the driver walks :meth:`candidates` in
    order when one is unreachable and follows a non-leader's ``307`` to the
    leader. ``leaders_changed`` is never set.
    """

    def __init__(self, urls, timeout=DEFAULT_TIMEOUT):
        super().__init__(timeout)
        self.urls = tuple(urls)
        if not self.urls:
            raise ValueError("StaticDetector needs at least one master URL")

    def leader(self, timeout=None):
        self._check_open()
        return self.urls[0]

    def candidates(self, timeout=0.0):
        self._check_open()
        return self.urls

    def __repr__(self):
        return "StaticDetector(%r)" % (list(self.urls),)


def check_timeout(timeout):
    """``timeout`` as a float, or ``ValueError`` unless it is a number >= 0."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise ValueError("timeout must be a number of seconds >= 0, not %r" % (timeout,))
    return float(timeout)


def make_detector(
    spec,
    timeout=DEFAULT_TIMEOUT,
    *,
    scheme="http",
    session_timeout=DEFAULT_SESSION_TIMEOUT,
):
    """The :class:`Detector` for a ``MasterSpec`` (or a master string).

    ``timeout`` is the default deadline of ``leader()``/``candidates()``;
    ``scheme`` (``"http"`` or ``"https"``) is used for masters found in
    ZooKeeper, whose MasterInfo does not say; ``session_timeout`` is the
    ZooKeeper session timeout.

    A ``local`` spec raises ``ValueError``: the embedded master has no
    detector -- start ``tfmesos.mesos.local`` and use the URL it serves.
    """
    if isinstance(spec, str):
        spec = parse_master(spec)
    if not isinstance(spec, MasterSpec):
        raise TypeError("make_detector needs a MasterSpec or a master string, not %r" % (spec,))
    if spec.kind == "local":
        raise ValueError(
            "the 'local' Mesos master has no detector: start the embedded master "
            "(tfmesos.mesos.local) and connect to the URL it serves"
        )
    if spec.kind == "http":
        return StaticDetector(spec.urls, timeout=timeout)
    # Imported here: ZKDetector subclasses Detector, so its module imports this one.
    from tfmesos.mesos.zookeeper import ZKDetector

    return ZKDetector(
        spec.hosts,
        spec.path,
        auth=spec.auth,
        scheme=scheme,
        timeout=timeout,
        session_timeout=session_timeout,
    )
