"""Where a run's rendezvous is now, as its Mesos master says: read by a task
that lost its scheduler in a run that survives it (``TFMESOS_FAILOVER_TIMEOUT``,
``connection``), between its tries to register again.

``Rediscovery.rendezvous()`` asks ``GET {master}/master/frameworks?framework_id=F``
and reads the framework's label ``labels.RENDEZVOUS`` (``host:port``,
``[v6]:port``): the address a scheduler that took the framework over
listens at. A redirect (a master that is not the leader answers 307 with a
scheme-relative ``Location: //host:port/...``) is followed, and the leader
is asked first from then on (Mesos' redirect drops the query: it is
kept). Each question takes at most ``TIMEOUT`` seconds all told and reads
at most ``MAX_BODY`` bytes; a failure of any kind (no answer, an error
status, garbage, a framework without the label) is no news: None.
Mesos' answer that the framework is over (only in ``completed_frameworks``)
raises ``FrameworkGone``: the run is over and the task stops. A master
that knows no framework of that id may have just been elected: a new
leader learns a framework from its scheduler's re-subscription or from
the agents as they re-register, within ``--agent_reregister_timeout``
(10 minutes at the least, src/master/constants.hpp
MIN_AGENT_REREGISTER_TIMEOUT), and its ``unregistered_frameworks`` is always
empty (src/master/readonly_handler.cpp); so the framework's absence is
``FrameworkGone`` only once it lasted ``UNKNOWN_GRACE`` seconds. (A
framework Mesos removes meanwhile has its tasks killed by Mesos.)

Loaded only on that path (it imports ``http.client``; ``ssl`` for an https
master): the task entry's import stays small (tests/test_task_package.py).
"""

import http.client
import socket
import threading
import time
import urllib.parse

from ..protocol import json_documents, labels
from ..protocol.task_env import FRAMEWORK_UNKNOWN_GRACE

TIMEOUT = 5.0               # seconds per question, redirects included
MAX_BODY = 1 << 20          # bytes of an answer read
MAX_REDIRECTS = 3
REDIRECTS = (301, 302, 303, 307, 308)
ENDPOINT = "/master/frameworks"
UNKNOWN_GRACE = FRAMEWORK_UNKNOWN_GRACE   # a master may know no such framework: a new leader's


class FrameworkGone(Exception):
    """The master answered: the framework was torn down, or it knows none of that id."""


class FrameworkUnknown(FrameworkGone):
    """The master knows no framework of that id (yet: a newly elected one)."""


def master_url(master):
    """``master`` (``http(s)://host:port``, or a bare ``host:port``) as a
    base URL without a trailing slash; None when it is not an HTTP one."""
    master = (master or "").strip()
    if not master:
        return None
    if "://" not in master:
        master = "http://" + master
    parts = urllib.parse.urlsplit(master)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return "%s://%s%s" % (parts.scheme, parts.netloc, parts.path.rstrip("/"))


def parse_address(value):
    """``(host, port)`` of a ``host:port`` or ``[v6]:port`` label; None when malformed."""
    host, _, port = (value or "").strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def framework_rendezvous(answer, framework_id):
    """The rendezvous address in a ``/master/frameworks`` answer (parsed
    JSON): ``(host, port)``, None when it names none; ``FrameworkGone`` when
    Mesos says the framework is over or unknown (an answer without both of
    Mesos' lists, ``frameworks`` and ``completed_frameworks``, says nothing)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("frameworks"), list) \
            or not isinstance(answer.get("completed_frameworks"), list):
        return None   # not Mesos' answer

    def has(key):
        found = answer.get(key)
        return isinstance(found, list) and any(
            (entry.get("id") if isinstance(entry, dict) else entry) == framework_id
            for entry in found)

    for framework in answer["frameworks"]:
        if isinstance(framework, dict) and framework.get("id") == framework_id:
            return parse_address(labels.label_map(framework.get("labels")).get(
                labels.RENDEZVOUS))
    if has("unregistered_frameworks"):
        return None   # after a master failover, before its scheduler came back
    if has("completed_frameworks"):
        raise FrameworkGone("the framework %s was torn down" % framework_id)
    raise FrameworkUnknown("the master knows no framework %s" % framework_id)


def get(url, timeout=TIMEOUT):
    """``(final URL, body)`` of a GET of ``url`` that answered 200, following
    redirects; None on anything else. Takes ``timeout`` seconds at most, all
    told."""
    deadline = time.monotonic() + timeout
    for _ in range(MAX_REDIRECTS + 1):
        left = deadline - time.monotonic()
        reply = _get_once(url, left) if left > 0 else None
        if reply is None:
            return None
        status, location, body = reply
        if status == 200:
            return url, body
        if status not in REDIRECTS or not location:
            return None
        url = _redirected(url, location)
        if url is None:
            return None
    return None


def _redirected(url, location):
    """Where ``Location`` leads from ``url``: a scheme-relative one keeps the
    scheme; one without a query to the same path keeps ``url``'s query (Mesos'
    redirect to the leader drops it); None for a scheme other than HTTP(S)."""
    new = urllib.parse.urlsplit(urllib.parse.urljoin(url, location))
    old = urllib.parse.urlsplit(url)
    if new.scheme not in ("http", "https"):
        return None
    if not new.query and new.path == old.path:
        new = new._replace(query=old.query)
    return urllib.parse.urlunsplit(new)


def _get_once(url, timeout):
    """``(status, Location, body)`` of one request; None when it failed,
    took longer than ``timeout`` or the body is larger than ``MAX_BODY``."""
    parts = urllib.parse.urlsplit(url)
    target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    try:
        if parts.scheme == "https":
            import ssl
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=timeout,
                context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    except ValueError:   # a malformed port
        return None
    # A hard bound on the whole request: a master that drips bytes is cut off.
    watchdog = threading.Timer(timeout, _cut, (conn,))
    watchdog.daemon = True
    watchdog.start()
    try:
        conn.request("GET", target, headers={"Accept": "application/json",
                                             "Connection": "close"})
        response = conn.getresponse()
        length = response.getheader("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > MAX_BODY:
            return None
        body = response.read(MAX_BODY + 1)
        if len(body) > MAX_BODY:
            return None
        return response.status, response.getheader("Location"), body
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        watchdog.cancel()
        conn.close()


def _cut(conn):
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Rediscovery:
    """Asks ``master`` (the URL the task was given) where the rendezvous of
    framework ``framework_id`` is; the leader it was redirected to first
    once there was one."""

    def __init__(self, master, framework_id, timeout=TIMEOUT, unknown_grace=UNKNOWN_GRACE,
                 clock=time.monotonic):
        self.master = master_url(master)
        self.framework_id = framework_id
        self.timeout = timeout
        self.leader = None    # the master a redirect led to
        self.unknown_grace = unknown_grace
        self._clock = clock
        self._unknown_since = None   # when the master first knew no such framework

    @property
    def usable(self):
        return self.master is not None and bool(self.framework_id)

    def rendezvous(self, timeout=None):
        """``(host, port)`` the framework's label names now, or None (no
        news); ``FrameworkGone`` when Mesos says the run is over."""
        if not self.usable:
            return None
        deadline = time.monotonic() + (self.timeout if timeout is None
                                        else min(timeout, self.timeout))
        query = ENDPOINT + "?" + urllib.parse.urlencode({"framework_id": self.framework_id})
        for base in dict.fromkeys(filter(None, (self.leader, self.master))):
            left = deadline - time.monotonic()
            reply = get(base + query, left) if left > 0 else None
            if reply is None:
                continue
            url, body = reply
            try:
                answer = json_documents.loads(body)
            except ValueError:   # not JSON
                return None
            path = urllib.parse.urlsplit(url).path
            if url != base + query and path.endswith(ENDPOINT):
                self.leader = urllib.parse.urljoin(url, path[:-len(ENDPOINT)] or "/").rstrip("/")
            return self._told(answer)
        return None

    def _told(self, answer):
        """What ``answer`` says, a framework unknown for less than
        ``unknown_grace`` seconds being no news."""
        try:
            address = framework_rendezvous(answer, self.framework_id)
        except FrameworkUnknown as exc:
            now = self._clock()
            if self._unknown_since is None:
                self._unknown_since = now
            if now - self._unknown_since < self.unknown_grace:
                return None
            raise FrameworkGone("%s for %.0f s (a master elected since would know it by "
                                "now)" % (exc, now - self._unknown_since)) from None
        if isinstance(answer, dict) and isinstance(answer.get("frameworks"), list):
            self._unknown_since = None   # known (or not Mesos' answer): the wait starts anew
        return address
