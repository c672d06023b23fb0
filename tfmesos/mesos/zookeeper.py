"""The leading Mesos master as registered in ZooKeeper (``zk://`` masters).

Mesos masters register as the children ``json.info_<sequence>`` of a path,
each holding a JSON ``MasterInfo`` (decoded by :mod:`tfmesos.mesos.master_info`);
the child with the lowest sequence number is the leader
(``src/master/detector/zookeeper.cpp`` and ``src/zookeeper/group.cpp`` in
apache/mesos). Here:

* :func:`~tfmesos.mesos.zk_leader.choose_leader` picks the leader from the
  children's names and their decoded MasterInfos -- pure logic, no
  ZooKeeper (``zk_leader``);
* :class:`ZKDetector` keeps that answer current with kazoo watches;
* :class:`_KazooLogger` is the one place kazoo's logging is quieted.

kazoo itself is imported only once a :class:`ZKDetector` connects.
"""

import functools
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from tfmesos.exceptions import MesosConnectionError
from tfmesos.mesos.detector import (
    DEFAULT_SESSION_TIMEOUT,
    DEFAULT_TIMEOUT,
    Detector,
    NoLeader,
    check_timeout,
)
from tfmesos.mesos.http_transport import UnknownHost, connect_within
from tfmesos.mesos.master_address import without_password
from tfmesos.mesos.master_info import Decoded, check_scheme, decode_master_info
from tfmesos.mesos.zk_leader import Leadership, choose_leader, master_children
from tfmesos.terminal_text import quoted

__all__ = ["ZKDetector"]

log = logging.getLogger(__name__)

# A server that neither accepts nor refuses a connection within this is
# not one where nothing listens (``ZKDetector.refusing``).
_REFUSAL_PROBE_TIMEOUT = 1.0


# --------------------------------------------------------------------------
# The detector
# --------------------------------------------------------------------------


class ZKDetector(Detector):
    """The leading master as registered in ZooKeeper, kept current by watches.

    Nothing connects until the first :meth:`leader` or :meth:`candidates`
    (which then answers ``()`` unless it is given time to wait).
    Then a kazoo client connects (retrying every 2 s at most for as long as
    the detector is open), a ``DataWatch`` follows the masters' path and a
    ``ChildrenWatch`` its ``json.info_<seq>`` children: the lowest sequence
    number is the leader (:func:`choose_leader`), and every change updates
    the cached leader and sets ``leaders_changed``. Other children
    (``log_replicas``, pre-0.24 protobuf ``info_<seq>``) are ignored. While
    ZooKeeper is unreachable the last leader seen stays the answer.

    kazoo's own log records are passed to the ``tfmesos.mesos.zookeeper.kazoo``
    logger at DEBUG level (:class:`_KazooLogger`), so its connection chatter
    never reaches a user at the default level; the last of them is quoted
    when no master is found. :meth:`close` stops the client and joins its
    threads.
    """

    def __init__(self, hosts: str, path: str, auth: Optional[tuple[str, str]] = None,
                 scheme: str = "http", timeout: float = DEFAULT_TIMEOUT,
                 session_timeout: float = DEFAULT_SESSION_TIMEOUT) -> None:
        super().__init__(timeout)
        check_scheme(scheme)
        self.hosts = hosts
        self.path = path
        self.scheme = scheme
        self.zk_url = "zk://%s%s" % (hosts, path)
        self._auth = auth
        # Whose credentials the zk:// URL gave, and the URL as a message shows it.
        self._credentials: Optional[tuple[str, str]] = None
        if auth is not None:
            self._credentials = (auth[1].partition(":")[0],
                                 without_password("zk://%s@%s%s" % (auth[1], hosts, path)))
        self._session_timeout = check_timeout(session_timeout)
        self._kazoo_log = _KazooLogger(logging.getLogger(__name__ + ".kazoo"))

        self._lock = threading.Lock()  # client lifecycle
        self._cond = threading.Condition()  # the published state below
        self._update_lock = threading.RLock()  # one children update at a time
        self._client: Any = None   # a kazoo KazooClient, once started

        # The connection and the watches.
        self._connected = False
        self._ever_connected = False
        self._installed = False
        self._path_gen = 0
        self._children_gen = 0
        self._children_watching = False
        self._path_exists: Optional[bool] = None
        # What the path holds.
        self._infos: dict[str, Decoded] = {}  # json.info_<seq> child -> (url, problem)
        self._seen = Leadership()
        self._problem: Optional[str] = None  # why there is no leader: the leader's or the watches' trouble
        self._had_leader = False

    def __repr__(self) -> str:
        return "ZKDetector(%r)" % (self.zk_url,)

    # -- public ------------------------------------------------------------

    def leader(self, timeout: Optional[float] = None) -> str:
        return self._wait(timeout)[0]

    def candidates(self, timeout: float = 0.0) -> Sequence[str]:
        try:
            return self._wait(timeout)[1]
        except MesosConnectionError:
            with self._cond:
                return self._seen.candidates

    def reached(self) -> bool:
        with self._cond:
            return self._ever_connected

    def denied(self) -> Optional[str]:
        with self._cond:
            problem = self._problem if self._seen.leader is None else None
        return problem if problem and problem.startswith(_DENIALS) else None

    def refusing(self) -> Optional[str]:
        """While ZooKeeper was never reached and every server of the zk://
        address refuses a connection now or has a host name that does not
        resolve (one plain TCP connection each: kazoo's log says it only in
        its text): "nothing listens at HOST:PORT, the ZooKeeper of
        zk://...: check the zk:// address"."""
        if self.reached():
            return None
        refused, unknown = [], []
        for server in self.hosts.split(","):
            host, _, port = server.rpartition(":")
            try:
                connect_within((host.strip("[]"), int(port)), _REFUSAL_PROBE_TIMEOUT).close()
            except UnknownHost:
                unknown.append(host)
                continue
            except ConnectionRefusedError:
                refused.append(server)
                continue
            except (OSError, ValueError):
                pass   # no answer, or no route: not "nothing listens"
            return None
        found = ["nothing listens at %s" % ", ".join(refused)] if refused else []
        if unknown:
            found.append(("the host names %s do not resolve" if len(unknown) > 1 else
                          "the host name %s does not resolve") % ", ".join(unknown))
        return "%s, the ZooKeeper of %s: check the zk:// address" % (" and ".join(found),
                                                                     self.zk_url)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            client, self._client = self._client, None
        with self._cond:
            self._cond.notify_all()
        if client is None:
            return
        for step in (client.stop, client.close):
            try:
                step()
            except Exception as exc:  # closing must not fail the caller
                log.debug("closing the ZooKeeper client for %s: %r", self.zk_url, exc)

    # -- waiting -------------------------------------------------------------

    def _wait(self, timeout: Optional[float]) -> tuple[str, tuple[str, ...]]:
        seconds = self.timeout if timeout is None else check_timeout(timeout)
        deadline = time.monotonic() + seconds
        self._ensure_started()
        with self._cond:
            if self._connected and not self._installed:
                # An earlier install failed (say, no read permission): try
                # once more per call, not in a loop.
                self._installed = True
                self._dispatch(self._install)
            while True:
                self._check_open()
                if self._seen.leader is not None:
                    return self._seen.leader, self._seen.candidates
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise NoLeader(self._why_no_leader(" after %g s" % (round(seconds, 1),)),
                                   self._why_no_leader(""))
                self._cond.wait(remaining)

    def _why_no_leader(self, after: str) -> str:
        """One line on why there is no leader yet (called holding _cond);
        ``after``: " after N s", this look's wait (rounded: the driver's time
        left may be 2.9998 s), or nothing."""
        if not self._ever_connected:
            last = self._kazoo_log.last_problem
            return (
                "no Mesos master found under %s: cannot connect to ZooKeeper at %s%s"
                % (self.zk_url, self.hosts, after)
                + (" (last error: %s)" % (quoted(last),) if last else "")
                + "; is ZooKeeper running and reachable from here?"
            )
        where = "no Mesos master registered under %s%s" % (self.zk_url, after)
        seen = self._seen
        if self._problem:
            return "%s: %s" % (where, self._problem)
        if self._path_exists is False:
            return "%s: the znode %s does not exist (is a Mesos master running with --zk=%s?)" % (
                where, self.path, self.zk_url)
        if seen.members and seen.unresolved:
            return "%s: could not read the masters' znodes yet (ZooKeeper connection trouble)" % (
                where,)
        if self._path_exists and not seen.members:
            if any(name.startswith("info_") for name in seen.ignored):
                return (
                    "%s: only protobuf info_* nodes found; tfmesos reads the "
                    "json.info_* nodes that Mesos >= 0.24 writes" % (where,)
                )
            listed = quoted(", ".join(seen.ignored[:5])) if seen.ignored else "it is empty"
            return "%s: %s has no json.info_* children (%s)" % (where, self.path, listed)
        if not self._connected:
            return "%s: the ZooKeeper connection to %s is down" % (where, self.hosts)
        return where

    # -- kazoo plumbing ------------------------------------------------------

    def _ensure_started(self) -> None:
        with self._lock:
            self._check_open()
            if self._client is not None:
                return
            from kazoo.client import KazooClient
            from kazoo.retry import KazooRetry

            client = KazooClient(
                hosts=self.hosts,
                timeout=self._session_timeout,
                auth_data=[self._auth] if self._auth else None,
                connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=2.0),
                command_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=2.0),
                logger=self._kazoo_log,
            )
            client.add_listener(self._on_state)
            self._client = client
            client.start_async()

    def _dispatch(self, func: Callable[[], None]) -> None:
        """Run ``func`` on kazoo's callback thread (where watches run)."""
        from kazoo.protocol.states import Callback

        client = self._client
        if client is not None:
            client.handler.dispatch_callback(Callback("tfmesos", func, ()))

    def _on_state(self, state: str) -> None:
        """kazoo connection listener: runs on its connection thread, briefly."""
        from kazoo.protocol.states import KazooState

        install = refresh = False
        with self._cond:
            if self._closed:
                return
            if state == KazooState.CONNECTED:
                self._connected = self._ever_connected = True
                install = not self._installed
                self._installed = True
                refresh = self._seen.unresolved
            else:
                self._connected = False
            self._cond.notify_all()
        log.debug("ZooKeeper %s for %s", state, self.zk_url)
        if install:
            self._dispatch(self._install)
        elif refresh:
            self._dispatch(self._refresh)

    def _install(self) -> None:
        from kazoo.recipe.watchers import DataWatch

        with self._cond:
            if self._closed or self._client is None:
                return
            self._path_gen += 1
            gen = self._path_gen
            client = self._client
        try:
            DataWatch(client, self.path, functools.partial(self._on_path, gen))
        except Exception as exc:
            with self._cond:
                self._installed = False
                self._problem = _describe(exc, self.path, self._credentials)
                self._cond.notify_all()

    def _on_path(self, gen: int, data: Optional[bytes], stat: Any,
                 event: Any = None) -> Optional[bool]:
        from kazoo.recipe.watchers import ChildrenWatch

        if self._closed or gen != self._path_gen:
            return False
        if stat is None:
            with self._cond:
                self._path_exists = False
                self._children_watching = False
                self._children_gen += 1
            self._update([])
            return None
        with self._cond:
            self._path_exists = True
            if self._children_watching:
                return None
            self._children_watching = True
            self._children_gen += 1
            children_gen = self._children_gen
            client = self._client
        if client is None:
            return False
        try:
            ChildrenWatch(client, self.path, functools.partial(self._on_children, children_gen))
        except Exception as exc:
            with self._cond:
                self._children_watching = False
                self._problem = _describe(exc, self.path, self._credentials)
                self._cond.notify_all()
        return None

    def _on_children(self, gen: int, children: list[str]) -> Optional[bool]:
        if self._closed or gen != self._children_gen:
            return False
        self._update(children)
        return None

    def _refresh(self) -> None:
        if not self._closed:
            with self._cond:
                children = self._seen.members + self._seen.ignored
            self._update(children)

    # -- the leader ----------------------------------------------------------

    def _update(self, children: Sequence[str]) -> None:
        """Read the MasterInfos of the path's ``children``, then publish the leader."""
        client = self._client
        if client is None:
            return
        with self._update_lock:
            try:
                infos, unreadable, gone = _read_master_infos(
                    client, self.path, master_children(children), self._infos, self.scheme,
                    self._credentials)
                self._infos = infos
                live = [name for name in children if name not in gone]
                self._publish(choose_leader(live, infos, unreadable))
            except Exception as exc:  # a watch callback must never raise into kazoo
                log.debug("updating the Mesos leader from %s failed: %r", self.zk_url, exc)
                with self._cond:
                    self._problem = _describe(exc, self.path, self._credentials)
                    self._cond.notify_all()

    def _publish(self, seen: Leadership) -> None:
        with self._cond:
            if self._closed:
                return
            old = self._seen.leader
            self._seen = seen
            self._problem = seen.problem
            if seen.leader != old:
                if self._had_leader:
                    self.leaders_changed.set()
                if seen.leader is not None:
                    self._had_leader = True
                    log.info("leading Mesos master is %s (from %s)", seen.leader, self.zk_url)
                else:
                    log.info("Mesos master %s is no longer leading (%s)", old, self.zk_url)
            self._cond.notify_all()


class _KazooLogger(logging.LoggerAdapter):
    """Hands kazoo's log records to a logger at DEBUG level at most.

    kazoo logs a WARNING for every failed connection attempt; those are
    expected while a detector retries, and tfmesos reports the outcome
    itself. The text of the last WARNING or worse is kept as evidence.

    This is the only kazoo log suppression tfmesos needs: every record of a
    kazoo client and its connection goes to the ``logger=`` it was given.
    kazoo's module loggers (``kazoo.handlers.threading``,
    ``kazoo.recipe.watchers``) log only when a watch or callback function
    raises, and :class:`ZKDetector`'s never do.
    """

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, None)
        self.last_problem: Optional[str] = None

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        # debug(), info(), warning(), error(), exception(), critical() call this.
        if level >= logging.WARNING:
            try:
                self.last_problem = msg % args if args else str(msg)
            except Exception:
                self.last_problem = str(msg)
        self.logger.log(min(level, logging.DEBUG), msg, *args, **kwargs)

    warn = logging.LoggerAdapter.warning  # kazoo still calls warn()

    def isEnabledFor(self, level: int) -> bool:
        return self.logger.isEnabledFor(min(level, logging.DEBUG))


def _read_master_infos(client: Any, path: str, members: Sequence[str],
                       cached: Mapping[str, Decoded], scheme: str,
                       credentials: Optional[tuple[str, str]] = None,
                       ) -> tuple[dict[str, Decoded], dict[str, str], set[str]]:
    """Decoded MasterInfos of the children ``members`` of ``path``.

    Those in ``cached`` are not read again. Returns ``(infos, unreadable,
    gone)``: the decoded MasterInfos, a phrase for each member whose znode
    could not be read, and the members whose znode has vanished.
    ``credentials``: ``_describe``'s.
    """
    from kazoo.exceptions import NoNodeError

    infos = {name: info for name, info in cached.items() if name in members}
    unreadable: dict[str, str] = {}
    gone: set[str] = set()
    for name in members:
        if name in infos:
            continue
        node = "%s/%s" % (path, name)
        try:
            data, _ = client.get(node)
        except NoNodeError:
            gone.add(name)
            continue
        except Exception as exc:
            unreadable[name] = _describe(exc, node, credentials)
            continue
        infos[name] = decode_master_info(node, data, scheme)
    return infos, unreadable, gone


# How _describe begins a refusal of the credentials (or of none): no wait mends it.
_DENIALS = ("ZooKeeper refused the credentials", "not authorised to read")


def _describe(exc: BaseException, node: str,
              credentials: Optional[tuple[str, str]] = None) -> str:
    """A short phrase for a kazoo error met while reading ``node``;
    ``credentials``: the user the zk:// URL named and the URL, its
    password masked, where it did."""
    name = type(exc).__name__
    if name == "NoAuthError" and credentials is not None:
        # A digest identity is not checked when it is added: a wrong password
        # shows only as a node its ACL keeps from that identity.
        return ("ZooKeeper refused the credentials of user %r for %s: check the password in %s"
                % (credentials[0], node, credentials[1]))
    if name == "NoAuthError":
        return "not authorised to read %s (add credentials: zk://user:password@host:port/path)" % (
            node,)
    if name == "AuthFailedError":
        return "ZooKeeper refused the credentials given in the zk:// URL"
    detail = quoted(str(exc))
    return "reading %s failed: %s" % (node, name) + (": %s" % (detail,) if detail else "")
