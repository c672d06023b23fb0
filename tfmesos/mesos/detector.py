"""The detector interface: a :class:`Detector` finds the leading Mesos master
for the HTTP scheduler driver; a :class:`StaticDetector` serves a fixed list
of URLs. :func:`tfmesos.mesos.detection.make_detector` picks the detector
for a master string (``zookeeper.ZKDetector`` for ``zk://``).

Nothing here imports TensorFlow.
"""

import threading
from collections.abc import Sequence
from typing import Any, Optional

from ..exceptions import MesosConnectionError

__all__ = [
    "DEFAULT_SESSION_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "Detector",
    "NoLeader",
    "StaticDetector",
    "UNREACHED_WAIT",
    "check_timeout",
]

DEFAULT_TIMEOUT = 10.0
# Mesos' own detector uses a 10 s ZooKeeper session
# (MASTER_DETECTOR_ZK_SESSION_TIMEOUT in src/master/detector/zookeeper.cpp).
DEFAULT_SESSION_TIMEOUT = 10.0
# The longest wait for a leader from a detector that never reached its
# servers, after which whether they all refuse is looked at
# (``Detector.refusing``): a ZooKeeper that answers is reached in less.
UNREACHED_WAIT = 1.0


class NoLeader(MesosConnectionError):
    """No leader within a wait: the message says how long it waited;
    ``unwaited``, the same without that, for a caller that says its own
    wait (the driver: "could not subscribe ... for 8 s: ...")."""

    def __init__(self, message: str, unwaited: Optional[str] = None) -> None:
        super().__init__(message)
        self.unwaited = message if unwaited is None else unwaited   # (unpickled: the message)


class Detector:
    """Finds the leading Mesos master; see
    :func:`tfmesos.mesos.detection.make_detector`.

    ``leaders_changed`` is a ``threading.Event`` the detector sets whenever
    the leader changes after a first one was found (also when it vanishes);
    the caller clears it, then asks :meth:`leader` again. A detector is a
    context manager; :meth:`close` is idempotent, and :meth:`leader` on a
    closed detector raises ``RuntimeError``.
    """

    def __init__(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = check_timeout(timeout)
        self.leaders_changed = threading.Event()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def leader(self, timeout: Optional[float] = None) -> str:
        """Base URL of the leading master, e.g. ``"http://10.0.0.1:5050"``.

        Waits at most ``timeout`` seconds (default: the detector's timeout),
        then raises :class:`~tfmesos.exceptions.MesosConnectionError`.
        """
        raise NotImplementedError

    def candidates(self, timeout: float = 0.0) -> Sequence[str]:
        """Every master URL known now, the leader (or best guess) first.

        Waits at most ``timeout`` seconds (default: not at all) for a
        leader, and returns an empty tuple rather than raising when none is
        known: ``candidates() or [leader(timeout)]`` is the usual call.
        """
        raise NotImplementedError

    def reached(self) -> bool:
        """Whether the detector ever reached the servers it reads the
        leader from (ZooKeeper's); True for one that reads none."""
        return True

    def denied(self) -> Optional[str]:
        """Why the servers the detector reads, reached, refuse it what it
        reads (ZooKeeper: the credentials of the zk:// URL, or none where
        its ACL asks for some): no wait mends it, as Mesos' group takes
        ZNOAUTH for an error it does not retry (src/zookeeper/group.cpp);
        None otherwise."""
        return None

    def refusing(self) -> Optional[str]:
        """When the detector never reached the servers it reads and each
        refuses a connection now (nothing listens at its port) or has a
        host name that does not resolve, a line that says so and names the
        fix; else None."""
        return None

    def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("%s is closed" % (type(self).__name__,))

    def __enter__(self) -> "Detector":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class StaticDetector(Detector):
    """Masters given as a fixed list of URLs.

    :meth:`leader` is the first URL; the driver walks :meth:`candidates` in
    order when one is unreachable and follows a non-leader's ``307`` to the
    leader. ``leaders_changed`` is never set.
    """

    def __init__(self, urls: Sequence[str], timeout: float = DEFAULT_TIMEOUT) -> None:
        super().__init__(timeout)
        self.urls = tuple(urls)
        if not self.urls:
            raise ValueError("StaticDetector needs at least one master URL")

    def leader(self, timeout: Optional[float] = None) -> str:
        self._check_open()
        return self.urls[0]

    def candidates(self, timeout: float = 0.0) -> Sequence[str]:
        self._check_open()
        return self.urls

    def __repr__(self) -> str:
        return "StaticDetector(%r)" % (list(self.urls),)


def check_timeout(timeout: object) -> float:
    """``timeout`` as a float, or ``ValueError`` unless it is a number >= 0."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise ValueError("timeout must be a number of seconds >= 0, not %r" % (timeout,))
    return float(timeout)

