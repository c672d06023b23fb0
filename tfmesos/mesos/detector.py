"""Find the leading Mesos master.

A master string, as given to ``--master`` or ``MESOS_MASTER``, is parsed by
:func:`parse_master` into a :class:`MasterSpec`; :func:`make_detector` turns
that spec into a :class:`Detector`, which the HTTP scheduler driver asks for
the base URL of the leading master::

    spec = parse_master("zk://zk1:2181,zk2:2181/mesos")
    with make_detector(spec, timeout=10.0) as detector:
        url = detector.leader()          # "http://10.0.0.7:5050"
        ...
        if detector.leaders_changed.is_set():
            detector.leaders_changed.clear()
            url = detector.leader()

Accepted master strings:

* ``local`` -- the embedded single-machine master. It has no detector:
  :func:`make_detector` refuses it, and the caller starts
  ``tfmesos.mesos.local`` instead and talks to the URL that master serves.
* ``host:port``, ``host`` (port 5050), ``[::1]:5050``, ``http://host:port``,
  ``https://host:port``, or a comma-separated list of those (each entry with
  or without a scheme): a :class:`StaticDetector`. Its :meth:`leader` is the
  first entry; the driver tries :meth:`~Detector.candidates` in order and
  follows a master's ``307 Temporary Redirect`` to the leader itself.
* ``zk://host:port[,host:port]/path``, optionally
  ``zk://user:password@host:port/path`` (ZooKeeper ``digest`` credentials,
  as Mesos accepts them): a :class:`ZKDetector`. Mesos masters register as
  the children ``json.info_<sequence>`` of the path, each holding a JSON
  ``MasterInfo``; the child with the lowest sequence number is the leader
  (``src/master/detector/zookeeper.cpp`` and ``src/zookeeper/group.cpp`` in
  apache/mesos).

Nothing here imports TensorFlow.
"""

import functools
import ipaddress
import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field

from tfmesos.exceptions import MasterAddressError, MesosConnectionError

__all__ = [
    "DEFAULT_MESOS_PORT",
    "DEFAULT_ZOOKEEPER_PORT",
    "Detector",
    "MasterSpec",
    "StaticDetector",
    "ZKDetector",
    "make_detector",
    "master_url_from_info",
    "parse_master",
]

log = logging.getLogger(__name__)

DEFAULT_MESOS_PORT = 5050
DEFAULT_ZOOKEEPER_PORT = 2181
DEFAULT_TIMEOUT = 10.0
# Mesos' own detector uses a 10 s ZooKeeper session
# (MASTER_DETECTOR_ZK_SESSION_TIMEOUT in src/master/detector/zookeeper.cpp).
DEFAULT_SESSION_TIMEOUT = 10.0

KINDS = ("local", "http", "zk")
SCHEMES = ("http", "https")

_ACCEPTED_FORMS = (
    "expected host:port, http(s)://host:port, a comma-separated list of "
    "those, zk://host:port[,host:port]/path, or 'local'"
)

# A child "json.info_0000000012" of the masters' path: Mesos >= 0.24 writes
# its MasterInfo as JSON under the label "json.info"; ZooKeeper appends the
# zero-padded sequence number. Older "info_<seq>" children hold protobuf.
_JSON_INFO_CHILD = re.compile(r"json\.info_(\d+)")
_HOST_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOSTNAME = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*")
_SCHEME_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


# --------------------------------------------------------------------------
# Master strings
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class MasterSpec:
    """Where the Mesos master is, as parsed from a master string.

    ``kind`` is ``"local"``, ``"http"`` (``urls``: base URLs such as
    ``"http://10.0.0.1:5050"``, no trailing slash, in the order given) or
    ``"zk"`` (``hosts``: ``"h1:2181,h2:2181"``, ``path``: ``"/mesos"``,
    ``auth``: ``("digest", "user:password")`` or ``None``).

    ``str(spec)`` is the canonical master string without credentials; the
    repr leaves ``auth`` out too, so a spec can be logged safely.
    """

    kind: str
    urls: tuple = ()
    hosts: str = ""
    path: str = ""
    auth: tuple = field(default=None, repr=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise MasterAddressError(
                f"unknown Mesos master kind {self.kind!r}: expected one of {', '.join(KINDS)}"
            )
        if not isinstance(self.urls, tuple):
            object.__setattr__(self, "urls", tuple(self.urls))
        if self.kind == "http" and not self.urls:
            raise MasterAddressError("a Mesos master spec of kind 'http' needs at least one URL")
        if self.kind == "zk":
            if not self.hosts or not self.path.startswith("/"):
                raise MasterAddressError(
                    "a Mesos master spec of kind 'zk' needs hosts and an absolute path, "
                    f"got hosts={self.hosts!r} path={self.path!r}"
                )
            if self.auth is not None and (
                not isinstance(self.auth, tuple) or len(self.auth) != 2
            ):
                raise MasterAddressError(
                    "ZooKeeper auth must be a (scheme, credentials) tuple, "
                    "e.g. ('digest', 'user:password')"
                )

    @property
    def zk_url(self):
        """``zk://hosts/path`` without credentials (empty unless kind is zk)."""
        return f"zk://{self.hosts}{self.path}" if self.kind == "zk" else ""

    def __str__(self):
        if self.kind == "local":
            return "local"
        if self.kind == "http":
            return ",".join(self.urls)
        return self.zk_url


def parse_master(text):
    """Parse a Mesos master string into a :class:`MasterSpec`.

    Raises :class:`~tfmesos.exceptions.MasterAddressError` (a ``ValueError``)
    with a one-line message that quotes the input (credentials masked), says
    what is wrong with it and lists the accepted forms.
    """
    if not isinstance(text, str):
        raise MasterAddressError(
            f"invalid Mesos master {text!r} (not a string): {_ACCEPTED_FORMS}"
        )
    try:
        return _parse(text.strip())
    except _Malformed as exc:
        raise MasterAddressError(
            f"invalid Mesos master {_redact(text)!r} ({exc}): {_ACCEPTED_FORMS}"
        ) from None


class _Malformed(Exception):
    """Internal: why a master string was refused."""


def _parse(text):
    if not text:
        raise _Malformed("it is empty")
    if any(c.isspace() for c in text):
        raise _Malformed("it contains whitespace")
    if text.lower() == "local":
        return MasterSpec(kind="local")
    if text.lower().startswith("zk://"):
        return _parse_zk(text[len("zk://"):])
    urls = []
    for entry in text.split(","):
        if not entry:
            raise _Malformed("it has an empty entry in its comma-separated list")
        url = _parse_http_entry(entry)
        if url not in urls:
            urls.append(url)
    return MasterSpec(kind="http", urls=tuple(urls))


def _parse_http_entry(entry):
    scheme = "http"
    match = _SCHEME_PREFIX.match(entry)
    if match:
        scheme = match.group(1).lower()
        if scheme == "zk":
            raise _Malformed("zk:// must be the only entry, not part of a list")
        if scheme not in SCHEMES:
            raise _Malformed(f"unknown scheme '{scheme}://'")
        entry = entry[match.end():]
        if entry.endswith("/"):
            entry = entry[:-1]
    elif "://" in entry:
        raise _Malformed(f"unknown scheme in {entry!r}")
    if "/" in entry:
        raise _Malformed(f"a master address has no path: {entry!r}")
    if "@" in entry:
        raise _Malformed(f"credentials are not accepted in {entry!r}")
    host, port = _split_host_port(entry, DEFAULT_MESOS_PORT)
    return f"{scheme}://{host}:{port}"


def _parse_zk(rest):
    servers, slash, path = rest.partition("/")
    if not slash or not path:
        raise _Malformed("zk:// needs a path such as /mesos")
    path = "/" + path
    if path.endswith("/") or any(part in ("", ".", "..") for part in path[1:].split("/")):
        raise _Malformed(f"ZooKeeper path {path!r} is not a valid znode path")
    auth = None
    if "@" in servers:
        credentials, _, servers = servers.rpartition("@")
        user, colon, _password = credentials.partition(":")
        if not user or not colon:
            raise _Malformed("ZooKeeper credentials must read user:password@")
        auth = ("digest", credentials)
    if not servers:
        raise _Malformed("zk:// needs at least one host:port")
    hosts = []
    for entry in servers.split(","):
        if not entry:
            raise _Malformed("it has an empty ZooKeeper host in its list")
        host, port = _split_host_port(entry, DEFAULT_ZOOKEEPER_PORT)
        hosts.append(f"{host}:{port}")
    return MasterSpec(kind="zk", hosts=",".join(hosts), path=path, auth=auth)


def _split_host_port(entry, default_port):
    """``"h:1"``, ``"h"``, ``"[::1]:1"`` -> (host for a URL, port)."""
    if entry.startswith("["):
        inner, bracket, after = entry[1:].partition("]")
        if not bracket:
            raise _Malformed(f"unclosed '[' in {entry!r}")
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise _Malformed(f"{inner!r} is not an IPv6 address") from None
        host = f"[{inner}]"
        if not after:
            return host, default_port
        if not after.startswith(":"):
            raise _Malformed(f"expected ':port' after {host!r}")
        return host, _port(after[1:])
    if entry.count(":") > 1:
        raise _Malformed(f"an IPv6 address needs brackets, as in [::1]:{default_port}")
    host, colon, port = entry.partition(":")
    _check_host(host)
    return host, (_port(port) if colon else default_port)


def _check_host(host):
    if not host:
        raise _Malformed("the host is missing")
    if re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise _Malformed(f"{host!r} is not a valid IPv4 address") from None
        return
    if len(host) > 253 or not _HOSTNAME.fullmatch(host):
        raise _Malformed(f"{host!r} is not a valid host name")


def _port(text):
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 65535:
        raise _Malformed(f"port {text!r} is not a number from 1 to 65535")
    return int(text)


def _redact(text):
    """Mask the password of ``zk://user:password@...`` for messages."""
    match = re.match(r"(\s*zk://)([^/]*)@", text, re.IGNORECASE)
    if not match:
        return text
    user, colon, _ = match.group(2).partition(":")
    masked = f"{user}:***" if colon else "***"
    return f"{match.group(1)}{masked}@{text[match.end():]}"


# --------------------------------------------------------------------------
# MasterInfo
# --------------------------------------------------------------------------


def master_url_from_info(data, scheme="http"):
    """Base URL of the master described by a JSON ``MasterInfo``.

    ``data`` is the content of a ``json.info_<seq>`` znode (bytes or str),
    as written by Mesos' ``JSON::protobuf(MasterInfo)``. The address comes
    from ``address.hostname`` or ``address.ip`` with ``address.port`` (Mesos
    >= 0.24), else from the deprecated top-level ``hostname`` or ``ip`` with
    ``port``, else from ``pid`` (``master@10.0.0.1:5050``). A hostname is
    preferred over an IP, as Mesos' own redirects do. The top-level ``ip`` is
    the IPv4 ``s_addr`` -- network byte order -- read as a uint32 on a
    little-endian host, so 10.0.0.1 is 16777226 (MESOS-1201).

    Raises ``ValueError`` naming what is missing or malformed.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, not {scheme!r}")
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("it is not UTF-8 text (a protobuf MasterInfo?)") from None
    try:
        info = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"it is not valid JSON ({exc})") from None
    if not isinstance(info, dict):
        raise ValueError("it is not a JSON object")

    host = port = None
    address = info.get("address")
    if isinstance(address, dict):
        host = _nonempty_str(address.get("hostname")) or _nonempty_str(address.get("ip"))
        port = address.get("port")
    if host is None:
        host = _nonempty_str(info.get("hostname")) or _ip_from_uint32(info.get("ip"))
        port = info.get("port") if port is None else port
    if host is None and isinstance(info.get("pid"), str) and "@" in info["pid"]:
        pid_host, _, pid_port = info["pid"].rpartition("@")[2].rpartition(":")
        host = pid_host or None
        port = int(pid_port) if port is None and pid_port.isdigit() else port
    if host is None:
        raise ValueError("it names no address (no address.hostname, address.ip, hostname, ip or pid)")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"it has no valid port (got {port!r})")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def _nonempty_str(value):
    return value if isinstance(value, str) and value else None


def _ip_from_uint32(value):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**32:
        return None
    return str(ipaddress.IPv4Address(value.to_bytes(4, "little")))


# --------------------------------------------------------------------------
# Detectors
# --------------------------------------------------------------------------


class Detector:
    """Finds the leading Mesos master; see :func:`make_detector`.

    ``leaders_changed`` is a ``threading.Event`` the detector sets whenever
    the leader changes after a first one was found (also when it vanishes);
    the caller clears it, then asks :meth:`leader` again. A detector is a
    context manager; :meth:`close` is idempotent, and :meth:`leader` on a
    closed detector raises ``RuntimeError``.
    """

    def __init__(self, timeout=DEFAULT_TIMEOUT):
        self.timeout = _check_timeout(timeout)
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
            raise RuntimeError(f"{type(self).__name__} is closed")

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
        return f"StaticDetector({list(self.urls)!r})"


class ZKDetector(Detector):
    """The leading master as registered in ZooKeeper, kept current by watches.

    Nothing connects until the first :meth:`leader` or :meth:`candidates`
    (which then answers ``()`` unless it is given time to wait).
    Then a kazoo client connects (retrying every 2 s at most for as long as
    the detector is open), a ``DataWatch`` follows the masters' path and a
    ``ChildrenWatch`` its ``json.info_<seq>`` children: the lowest sequence
    number is the leader, and every change updates the cached leader and
    sets ``leaders_changed``. Other children (``log_replicas``, pre-0.24
    protobuf ``info_<seq>``) are ignored. While ZooKeeper is unreachable the
    last leader seen stays the answer.

    kazoo's own log records are passed to the ``tfmesos.mesos.detector.kazoo``
    logger at DEBUG level, so its connection chatter never reaches a user at
    the default level; the last of them is quoted when no master is found.
    :meth:`close` stops the client and joins its threads.
    """

    def __init__(
        self,
        hosts,
        path,
        auth=None,
        scheme="http",
        timeout=DEFAULT_TIMEOUT,
        session_timeout=DEFAULT_SESSION_TIMEOUT,
    ):
        super().__init__(timeout)
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, not {scheme!r}")
        self.hosts = hosts
        self.path = path
        self.scheme = scheme
        self.zk_url = f"zk://{hosts}{path}"
        self._auth = auth
        self._session_timeout = _check_timeout(session_timeout)
        self._kazoo_log = _KazooLogger(logging.getLogger(f"{__name__}.kazoo"))

        self._lock = threading.Lock()  # client lifecycle
        self._cond = threading.Condition()  # the published state below
        self._update_lock = threading.RLock()  # one children update at a time
        self._client = None

        self._connected = False
        self._ever_connected = False
        self._installed = False
        self._path_gen = 0
        self._children_gen = 0
        self._children_watching = False
        self._path_exists = None
        self._children = []
        self._ignored = []
        self._infos = {}  # child name -> (url or None, problem or None)
        self._unresolved = False
        self._problem = None
        self._leader = None
        self._had_leader = False
        self._candidates = ()

    def __repr__(self):
        return f"ZKDetector({self.zk_url!r})"

    # -- public ------------------------------------------------------------

    def leader(self, timeout=None):
        return self._wait(timeout)[0]

    def candidates(self, timeout=0.0):
        try:
            return self._wait(timeout)[1]
        except MesosConnectionError:
            with self._cond:
                return self._candidates

    def close(self):
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

    def _wait(self, timeout):
        timeout = self.timeout if timeout is None else _check_timeout(timeout)
        deadline = time.monotonic() + timeout
        self._ensure_started()
        with self._cond:
            if self._connected and not self._installed:
                # An earlier install failed (say, no read permission): try
                # once more per call, not in a loop.
                self._installed = True
                self._dispatch(self._install)
            while True:
                self._check_open()
                if self._leader is not None:
                    return self._leader, self._candidates
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise MesosConnectionError(self._why_no_leader(timeout))
                self._cond.wait(remaining)

    def _why_no_leader(self, timeout):
        """One line on why there is no leader yet (called holding _cond)."""
        after = f"after {timeout:g} s"
        if not self._ever_connected:
            last = self._kazoo_log.last_problem
            return (
                f"no Mesos master found under {self.zk_url}: cannot connect to ZooKeeper "
                f"at {self.hosts} {after}"
                + (f" (last error: {last})" if last else "")
                + "; is ZooKeeper running and reachable from here?"
            )
        where = f"no Mesos master registered under {self.zk_url} {after}"
        if self._problem:
            return f"{where}: {self._problem}"
        if self._path_exists is False:
            return (
                f"{where}: the znode {self.path} does not exist "
                f"(is a Mesos master running with --zk={self.zk_url}?)"
            )
        if self._children and self._unresolved:
            return f"{where}: could not read the masters' znodes yet (ZooKeeper connection trouble)"
        if self._path_exists and not self._children:
            if any(name.startswith("info_") for name in self._ignored):
                return (
                    f"{where}: only protobuf info_* nodes found; tfmesos reads the "
                    "json.info_* nodes that Mesos >= 0.24 writes"
                )
            seen = ", ".join(self._ignored[:5]) if self._ignored else "it is empty"
            return f"{where}: {self.path} has no json.info_* children ({seen})"
        if not self._connected:
            return f"{where}: the ZooKeeper connection to {self.hosts} is down"
        return where

    # -- kazoo plumbing ------------------------------------------------------

    def _ensure_started(self):
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

    def _dispatch(self, func):
        """Run ``func`` on kazoo's callback thread (where watches run)."""
        from kazoo.protocol.states import Callback

        client = self._client
        if client is not None:
            client.handler.dispatch_callback(Callback("tfmesos", func, ()))

    def _on_state(self, state):
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
                refresh = self._unresolved
            else:
                self._connected = False
            self._cond.notify_all()
        log.debug("ZooKeeper %s for %s", state, self.zk_url)
        if install:
            self._dispatch(self._install)
        elif refresh:
            self._dispatch(self._refresh)

    def _install(self):
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
                self._problem = _describe(exc, self.path)
                self._cond.notify_all()

    def _on_path(self, gen, data, stat, event=None):
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
                self._problem = _describe(exc, self.path)
                self._cond.notify_all()
        return None

    def _on_children(self, gen, children):
        if self._closed or gen != self._children_gen:
            return False
        self._update(children)
        return None

    def _refresh(self):
        if not self._closed:
            self._update(self._children_names)

    # -- the leader ----------------------------------------------------------

    @property
    def _children_names(self):
        with self._cond:
            return list(self._children) + list(self._ignored)

    def _update(self, children):
        """Recompute leader and candidates from the path's children."""
        from kazoo.exceptions import NoNodeError

        client = self._client
        if client is None:
            return
        with self._update_lock:
            try:
                members = sorted(
                    (int(match.group(1)), name)
                    for name in children
                    if (match := _JSON_INFO_CHILD.fullmatch(name))
                )
                ignored = sorted(name for name in children if not _JSON_INFO_CHILD.fullmatch(name))
                names = {name for _, name in members}
                infos = {name: info for name, info in self._infos.items() if name in names}
                unresolved = False
                problems = []
                gone = set()
                for _, name in members:
                    if name in infos:
                        continue
                    node = f"{self.path}/{name}"
                    try:
                        data, _ = client.get(node)
                    except NoNodeError:
                        gone.add(name)
                        continue
                    except Exception as exc:
                        unresolved = True
                        problems.append(_describe(exc, node))
                        continue
                    try:
                        infos[name] = (master_url_from_info(data, self.scheme), None)
                    except ValueError as exc:
                        infos[name] = (None, f"the leader's znode {node} holds no usable MasterInfo: {exc}")
                self._infos = infos
                live = [name for _, name in members if name not in gone]
                leader = problem = None
                if live:
                    leader, problem = infos.get(live[0], (None, None))
                    if leader is None and problem is None and problems:
                        problem = problems[0]
                candidates = tuple(infos[n][0] for n in live if n in infos and infos[n][0])
                self._publish(live, ignored, unresolved, problem, leader, candidates)
            except Exception as exc:  # a watch callback must never raise into kazoo
                log.debug("updating the Mesos leader from %s failed: %r", self.zk_url, exc)
                with self._cond:
                    self._problem = _describe(exc, self.path)
                    self._cond.notify_all()

    def _publish(self, live, ignored, unresolved, problem, leader, candidates):
        with self._cond:
            if self._closed:
                return
            self._children = live
            self._ignored = ignored
            self._unresolved = unresolved
            self._problem = problem
            self._candidates = candidates
            if leader != self._leader:
                old, self._leader = self._leader, leader
                if self._had_leader:
                    self.leaders_changed.set()
                if leader is not None:
                    self._had_leader = True
                    log.info("leading Mesos master is %s (from %s)", leader, self.zk_url)
                else:
                    log.info("Mesos master %s is no longer leading (%s)", old, self.zk_url)
            self._cond.notify_all()


class _KazooLogger:
    """Hands kazoo's log records to a logger at DEBUG level at most.

    kazoo logs a WARNING for every failed connection attempt; those are
    expected while a detector retries, and tfmesos reports the outcome
    itself. The text of the last WARNING or worse is kept as evidence.
    """

    def __init__(self, logger):
        self._logger = logger
        self.last_problem = None

    def log(self, level, msg, *args, **kwargs):
        if level >= logging.WARNING:
            try:
                self.last_problem = msg % args if args else str(msg)
            except Exception:
                self.last_problem = str(msg)
        self._logger.log(min(level, logging.DEBUG), msg, *args, **kwargs)

    def debug(self, msg, *args, **kwargs):
        self.log(logging.DEBUG, msg, *args, **kwargs)

    def info(self, msg, *args, **kwargs):
        self.log(logging.INFO, msg, *args, **kwargs)

    def warning(self, msg, *args, **kwargs):
        self.log(logging.WARNING, msg, *args, **kwargs)

    warn = warning

    def error(self, msg, *args, **kwargs):
        self.log(logging.ERROR, msg, *args, **kwargs)

    def exception(self, msg, *args, exc_info=True, **kwargs):
        self.log(logging.ERROR, msg, *args, exc_info=exc_info, **kwargs)

    def critical(self, msg, *args, **kwargs):
        self.log(logging.CRITICAL, msg, *args, **kwargs)

    def isEnabledFor(self, level):
        return self._logger.isEnabledFor(min(level, logging.DEBUG))


def _describe(exc, node):
    """A short phrase for a kazoo error met while reading ``node``."""
    name = type(exc).__name__
    if name == "NoAuthError":
        return f"not authorised to read {node} (add credentials: zk://user:password@host:port/path)"
    if name == "AuthFailedError":
        return "ZooKeeper refused the credentials given in the zk:// URL"
    detail = str(exc)
    return f"reading {node} failed: {name}" + (f": {detail}" if detail else "")


def _check_timeout(timeout):
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise ValueError(f"timeout must be a number of seconds >= 0, not {timeout!r}")
    return float(timeout)


def make_detector(
    spec,
    timeout=DEFAULT_TIMEOUT,
    *,
    scheme="http",
    session_timeout=DEFAULT_SESSION_TIMEOUT,
):
    """The :class:`Detector` for a :class:`MasterSpec` (or a master string).

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
        raise TypeError(f"make_detector needs a MasterSpec or a master string, not {spec!r}")
    if spec.kind == "local":
        raise ValueError(
            "the 'local' Mesos master has no detector: start the embedded master "
            "(tfmesos.mesos.local) and connect to the URL it serves"
        )
    if spec.kind == "http":
        return StaticDetector(spec.urls, timeout=timeout)
    return ZKDetector(
        spec.hosts,
        spec.path,
        auth=spec.auth,
        scheme=scheme,
        timeout=timeout,
        session_timeout=session_timeout,
    )
