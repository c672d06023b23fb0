"""Mesos master strings, as given to ``--master`` or ``MESOS_MASTER``.

:func:`parse_master` turns one into a :class:`MasterSpec`, which
:func:`tfmesos.mesos.detection.make_detector` turns into a detector.
Accepted master strings:

* ``local`` -- the embedded single-machine master (``mesos_local``).
* ``host:port``, ``host`` (port 5050), ``[::1]:5050``, ``http://host:port``,
  ``https://host:port``, or a comma-separated list of those (each entry with
  or without a scheme): fixed master URLs, the first one tried first.
* ``zk://host:port[,host:port]/path``, optionally
  ``zk://user:password@host:port/path`` (ZooKeeper ``digest`` credentials,
  as Mesos accepts them): the masters registered in ZooKeeper under that
  path (see :mod:`tfmesos.mesos.zookeeper`).

Nothing here imports TensorFlow or kazoo.
"""

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Optional

from tfmesos.exceptions import MasterAddressError
from tfmesos.field_methods import FrozenFieldMethods

__all__ = [
    "DEFAULT_MESOS_PORT",
    "DEFAULT_ZOOKEEPER_PORT",
    "KINDS",
    "MasterSpec",
    "PASSWORD_MASK",
    "SCHEMES",
    "parse_master",
    "with_password",
    "without_password",
]

DEFAULT_MESOS_PORT = 5050
DEFAULT_ZOOKEEPER_PORT = 2181

KINDS = ("local", "http", "zk")
SCHEMES = ("http", "https")

_ACCEPTED_FORMS = (
    "expected host:port, http(s)://host:port, a comma-separated list of "
    "those, zk://host:port[,host:port]/path, or 'local'"
)

_HOST_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOSTNAME = re.compile(r"%s(?:\.%s)*" % (_HOST_LABEL, _HOST_LABEL))
_SCHEME_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


@dataclass(frozen=True, eq=False, repr=False)
class MasterSpec(FrozenFieldMethods):
    """Where the Mesos master is, as parsed from a master string.

    ``kind`` is ``"local"``, ``"http"`` (``urls``: base URLs such as
    ``"http://10.0.0.1:5050"``, no trailing slash, in the order given) or
    ``"zk"`` (``hosts``: ``"h1:2181,h2:2181"``, ``path``: ``"/mesos"``,
    ``auth``: ``("digest", "user:password")`` or ``None``).

    ``str(spec)`` is the canonical master string without credentials; the
    repr leaves ``auth`` out too, so a spec can be logged safely.
    """

    kind: str
    urls: tuple[str, ...] = ()
    hosts: str = ""
    path: str = ""
    auth: Optional[tuple[str, str]] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise MasterAddressError(
                "unknown Mesos master kind %r: expected one of %s" % (self.kind, ", ".join(KINDS))
            )
        if not isinstance(self.urls, tuple):
            object.__setattr__(self, "urls", tuple(self.urls))
        if self.kind == "http" and not self.urls:
            raise MasterAddressError("a Mesos master spec of kind 'http' needs at least one URL")
        if self.kind == "zk":
            if not self.hosts or not self.path.startswith("/"):
                raise MasterAddressError(
                    "a Mesos master spec of kind 'zk' needs hosts and an absolute path, "
                    "got hosts=%r path=%r" % (self.hosts, self.path)
                )
            if self.auth is not None and (
                not isinstance(self.auth, tuple) or len(self.auth) != 2
            ):
                raise MasterAddressError(
                    "ZooKeeper auth must be a (scheme, credentials) tuple, "
                    "e.g. ('digest', 'user:password')"
                )

    @property
    def zk_url(self) -> str:
        """``zk://hosts/path`` without credentials (empty unless kind is zk)."""
        return "zk://%s%s" % (self.hosts, self.path) if self.kind == "zk" else ""

    def __str__(self) -> str:
        if self.kind == "local":
            return "local"
        if self.kind == "http":
            return ",".join(self.urls)
        return self.zk_url


def parse_master(text: object) -> MasterSpec:
    """Parse a Mesos master string into a :class:`MasterSpec`.

    Raises :class:`~tfmesos.exceptions.MasterAddressError` (a ``ValueError``)
    with a one-line message that quotes the input (credentials masked), says
    what is wrong with it and lists the accepted forms.
    """
    if not isinstance(text, str):
        raise MasterAddressError(
            "invalid Mesos master %r (not a string): %s" % (text, _ACCEPTED_FORMS)
        )
    try:
        return _parse(text.strip())
    except _Malformed as exc:
        shown, why = without_password(text), str(exc)
        if "/" in _credentials(text):
            # An '@' after the first '/', which Mesos reads as the path's
            # (include/mesos/zookeeper/url.hpp): a password holding '/', whose
            # pieces the reason (a port 's3cr') and the text would show.
            shown, why = _masked_to_the_last_at(text), _SLASHED
        raise MasterAddressError(
            "invalid Mesos master %r (%s): %s" % (shown, why, _ACCEPTED_FORMS)) from None


# Why a zk:// master with an '@' after its first '/' did not parse: a
# password that holds '/'.
_SLASHED = ("a ZooKeeper user:password@ may not hold '/': the path starts at the first '/', "
            "as Mesos reads it")


# "master@HOST:PORT": a master's libprocess UPID, which Mesos' detector takes
# for HOST:PORT (src/master/detector/detector.cpp, MasterDetector::create).
MASTER_UPID_PREFIX = "master@"


class _Malformed(Exception):
    """Internal: why a master string was refused."""


def _parse(text: str) -> MasterSpec:
    if not text:
        raise _Malformed("it is empty")
    if any(c.isspace() for c in text):
        raise _Malformed("it contains whitespace")
    if text.lower() == "local":
        return MasterSpec(kind="local")
    if text.lower().startswith("zk://"):
        return _parse_zk(text[len("zk://"):])
    urls: list[str] = []
    for entry in text.split(","):
        if not entry:
            raise _Malformed("it has an empty entry in its comma-separated list")
        url = _parse_http_entry(entry)
        if url not in urls:
            urls.append(url)
    return MasterSpec(kind="http", urls=tuple(urls))


def _parse_http_entry(entry: str) -> str:
    scheme = "http"
    match = _SCHEME_PREFIX.match(entry)
    if match:
        scheme = match.group(1).lower()
        if scheme == "zk":
            raise _Malformed("zk:// must be the only entry, not part of a list")
        if scheme == "file":   # Mesos' detector reads the address from the file
            raise _Malformed("a file:// master (deprecated in Mesos) is not read: give the "
                             "address the file holds")
        if scheme not in SCHEMES:
            raise _Malformed("unknown scheme '%s://'" % (scheme,))
        entry = entry[match.end():]
        if entry.endswith("/"):
            entry = entry[:-1]
    elif "://" in entry:
        raise _Malformed("unknown scheme in %r" % (entry,))
    if "/" in entry:
        raise _Malformed("a master address has no path: %r" % (entry,))
    if not match and entry.startswith(MASTER_UPID_PREFIX):   # a UPID, as Mesos' detector reads it
        entry = entry[len(MASTER_UPID_PREFIX):]
    if "@" in entry:
        raise _Malformed("credentials are not accepted in %r" % (entry,))
    host, port = _split_host_port(entry, DEFAULT_MESOS_PORT)
    return "%s://%s:%s" % (scheme, host, port)


def _parse_zk(rest: str) -> MasterSpec:
    servers, slash, path = rest.partition("/")
    if not slash or not path:
        raise _Malformed("zk:// needs a path such as /mesos")
    path = "/" + path
    if path.endswith("/") and len(path) > 1:   # as Mesos' src/zookeeper/group.cpp strips it
        path = path[:-1]
    if path.endswith("/") or any(part in ("", ".", "..") for part in path[1:].split("/")):
        raise _Malformed("ZooKeeper path %r is not a valid znode path" % (path,))
    auth = None
    if "@" in servers:
        credentials, _, servers = servers.rpartition("@")
        user, colon, _password = credentials.partition(":")
        if not user or not colon:
            raise _Malformed("ZooKeeper credentials must read user:password@")
        auth = ("digest", credentials)
    if not servers:
        raise _Malformed("zk:// needs at least one host:port")
    hosts: list[str] = []
    for entry in servers.split(","):
        if not entry:
            raise _Malformed("it has an empty ZooKeeper host in its list")
        host, port = _split_host_port(entry, DEFAULT_ZOOKEEPER_PORT)
        hosts.append("%s:%s" % (host, port))
    return MasterSpec(kind="zk", hosts=",".join(hosts), path=path, auth=auth)


def _split_host_port(entry: str, default_port: int) -> tuple[str, int]:
    """``"h:1"``, ``"h"``, ``"[::1]:1"`` -> (host for a URL, port)."""
    if entry.startswith("["):
        inner, bracket, after = entry[1:].partition("]")
        if not bracket:
            raise _Malformed("unclosed '[' in %r" % (entry,))
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise _Malformed("%r is not an IPv6 address" % (inner,)) from None
        host = "[%s]" % (inner,)
        if not after:
            return host, default_port
        if not after.startswith(":"):
            raise _Malformed("expected ':port' after %r" % (host,))
        return host, _port(after[1:])
    if entry.count(":") > 1:
        raise _Malformed("an IPv6 address needs brackets, as in [::1]:%s" % (default_port,))
    host, colon, port = entry.partition(":")
    _check_host(host)
    return host, (_port(port) if colon else default_port)


def _check_host(host: str) -> None:
    if not host:
        raise _Malformed("the host is missing")
    if re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise _Malformed("%r is not a valid IPv4 address" % (host,)) from None
        return
    # An absolute name (``master.example.com.``: no search domain appended)
    # ends with its root's empty label.
    name = host[:-1] if host.endswith(".") and not host.endswith("..") else host
    if len(name) > 253 or not _HOSTNAME.fullmatch(name):
        raise _Malformed("%r is not a valid host name" % (host,))


def _port(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 65535:
        raise _Malformed("port %r is not a number from 1 to 65535" % (text,))
    return int(text)


PASSWORD_MASK = "***"


def without_password(text: str) -> str:
    """``text`` with the password of a ``zk://user:password@...`` master
    masked (``zk://user:***@...``): the form of the master in every
    message, record and file of tfmesos. The password stays in the
    processes that connect, which take it from where the user gave it
    (``with_password``)."""
    # Before the first '/', as Mesos reads a zk:// URL's credentials (its
    # path may hold '@').
    match = re.match(r"(\s*zk://)([^/]*)@", text, re.IGNORECASE)
    if not match:
        return text
    user, colon, _ = match.group(2).partition(":")
    masked = "%s:%s" % (user, PASSWORD_MASK) if colon else PASSWORD_MASK
    return "%s%s@%s" % (match.group(1), masked, text[match.end():])


def _masked_to_the_last_at(text: str) -> str:
    """A zk:// master that does not parse, all before its last '@' masked."""
    return re.sub(r"^(\s*zk://).*@", r"\1%s@" % PASSWORD_MASK, text,
                  flags=re.IGNORECASE | re.DOTALL)


def _credentials(text: str) -> str:
    """What stands before the last '@' of a ``zk://`` master ('' when none)."""
    match = re.match(r"\s*zk://(.*)@", text, re.IGNORECASE | re.DOTALL)
    return match.group(1) if match else ""


def with_password(text: str, *given: Optional[str]) -> str:
    """``text``; but a ``zk://`` master whose password is masked
    (``without_password``: a record's, a file's) is the first of ``given``
    (what the user gave: ``--master``, ``$MESOS_MASTER``) that names the
    same ZooKeeper servers, path and user with a password.
    MasterAddressError when none does: the password is in no file."""
    try:
        spec = parse_master(text)
    except MasterAddressError:
        return text   # its user reports it
    if spec.auth is None or spec.auth[1].partition(":")[2] != PASSWORD_MASK:
        return text
    user = spec.auth[1].partition(":")[0]
    for candidate in filter(None, given):
        try:
            found = parse_master(candidate)
        except MasterAddressError:
            continue
        if found.auth is not None and (found.hosts, found.path) == (spec.hosts, spec.path):
            found_user, _, password = found.auth[1].partition(":")
            if found_user == user and password != PASSWORD_MASK:
                return candidate.strip()
    raise MasterAddressError(
        "the Mesos master %s: tfmesos keeps the ZooKeeper password in no file: give this "
        "master with it in $MESOS_MASTER (or --master)" % text.strip())
