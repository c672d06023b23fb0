"""Find the leading Mesos master: which :class:`~tfmesos.mesos.detector.Detector`
a master string gets.

A master string (see :mod:`tfmesos.mesos.master_address`) is parsed by
:func:`~tfmesos.mesos.master_address.parse_master` into a ``MasterSpec``;
:func:`make_detector` turns that spec into a ``Detector``, which the HTTP
scheduler driver asks for the base URL of the leading master::

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
  ``mesos_local`` instead and talks to the URL that master serves.
* fixed URLs (``host:port``, ``https://host:port``, lists of those): a
  :class:`~tfmesos.mesos.detector.StaticDetector`. Its ``leader()`` is the
  first entry; the driver tries ``candidates()`` in order and follows a
  master's ``307 Temporary Redirect`` to the leader itself.
* ``zk://...``: a :class:`~tfmesos.mesos.zookeeper.ZKDetector`, which follows
  the masters registered in ZooKeeper (kazoo is imported only once it
  connects).

This module sits above ``detector`` and ``zookeeper`` (which subclasses
``Detector``), so neither imports the other in a circle.
"""

from typing import Union

from tfmesos.mesos.detector import DEFAULT_SESSION_TIMEOUT, DEFAULT_TIMEOUT, Detector, StaticDetector
from tfmesos.mesos.master_address import MasterSpec, parse_master

__all__ = ["make_detector"]


def make_detector(
    spec: Union[MasterSpec, str],
    timeout: float = DEFAULT_TIMEOUT,
    *,
    scheme: str = "http",
    session_timeout: float = DEFAULT_SESSION_TIMEOUT,
) -> Detector:
    """The :class:`Detector` for a ``MasterSpec`` (or a master string).

    ``timeout`` is the default deadline of ``leader()``/``candidates()``;
    ``scheme`` (``"http"`` or ``"https"``) is used for masters found in
    ZooKeeper, whose MasterInfo does not say; ``session_timeout`` is the
    ZooKeeper session timeout.

    A ``local`` spec raises ``ValueError``: the embedded master has no
    detector -- start ``mesos_local`` and use the URL it serves.
    """
    if isinstance(spec, str):
        spec = parse_master(spec)
    if not isinstance(spec, MasterSpec):
        raise TypeError("make_detector needs a MasterSpec or a master string, not %r" % (spec,))
    if spec.kind == "local":
        raise ValueError(
            "the 'local' Mesos master has no detector: start the embedded master "
            "(mesos_local) and connect to the URL it serves"
        )
    if spec.kind == "http":
        return StaticDetector(spec.urls, timeout=timeout)
    # Imported here: a run on fixed masters loads nothing of ZooKeeper.
    from tfmesos.mesos.zookeeper import ZKDetector

    return ZKDetector(
        spec.hosts,
        spec.path,
        auth=spec.auth,
        scheme=scheme,
        timeout=timeout,
        session_timeout=session_timeout,
    )
