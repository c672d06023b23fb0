"""The local agents' fetcher: a task's ``CommandInfo.uris``, downloaded or
copied into its sandbox (archives extracted) before the task starts, as
Mesos' fetcher does (src/launcher/fetcher.cpp, docs/fetcher.md).

It contains itself: a URI brings at most ``archives.Limits.max_bytes`` within
``Limits.timeout`` seconds (a download stalled for ``stall`` seconds fails as
Mesos' ``--fetcher_stall_timeout``, default 60 s), a local path must be
absolute (as an agent without ``--frameworks_home``, Mesos' default: a
relative one is refused, never looked for in the master's working directory;
``local_path``) and a regular file (never ``/dev/zero``), a URI's file name
is Mesos' (a query kept: ``basename``), what it writes is never world-readable,
archives are extracted by ``archives.extract``'s own checks, and a fetch
stops as soon as ``cancelled()`` says the task is being killed. Whatever goes
wrong with one URI fails the task with ``Failed to fetch 'URI': why``, never
the master. For a task of another user (``run_as``) it fetches as that user,
as Mesos' fetcher does: each step in a child process that became that user
(``fetch_child.py``).
"""

import dataclasses
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from typing import Optional

from .archives import CHUNK, ArchiveError, Limits, extract, inside

_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")
STALL_TIMEOUT = 60.0
POLL = 1.0          # seconds between a download's looks at the kill
CHILD_POLL = 0.25   # seconds between looks at the kill while a fetch child works
CHILD_EXTRACT_BYTES = 4 << 20   # an archive this big is extracted in a fetcher process


class FetchError(Exception):
    """A URI could not be fetched; the message goes into TASK_FAILED."""


class _Cancelled(Exception):
    """The task is being killed: the fetch stops."""


class _Refused(Exception):
    """Why one URI is refused (``fetch_uris`` names the URI)."""


LIMITS = Limits()


def fetch_uris(uris, sandbox, timeout=STALL_TIMEOUT, cache=None, user=None, limits=LIMITS,
               cancelled=None, run_as=None):
    """Mesos' fetcher: download or copy each URI into the sandbox, extract
    archives unless ``extract`` is false, chmod ``executable``; URIs with
    ``cache: true`` go through ``cache`` (a ``fetch_cache.FetcherCache``)
    when there is one, for tasks of ``user``. ``timeout``: how long a
    download may stall; ``limits``: what one URI may bring. ``run_as`` (a
    ``users.TaskUser``): fetch as that user, as Mesos' fetcher does
    (``os::su`` in src/launcher/fetcher.cpp): each step runs in a child
    process that became that user (``fetch_child.py``), so a ``file://``
    source is opened with that user's permissions and what lands in the
    sandbox (and in that user's part of the cache) is that user's."""
    cancelled = cancelled or (lambda: False)
    for uri in uris:
        value = uri.get("value", "")
        try:
            _fetch_one(uri, value, sandbox, timeout, cache, user, limits, cancelled, run_as)
        except _Cancelled:
            raise FetchError("Failed to fetch '%s': the task was killed" % value) from None
        except Exception as exc:   # whatever one URI does fails its task only
            raise FetchError("Failed to fetch '%s': %s" % (value, why(exc))) from exc


def why(exc):
    """What went wrong with a URI, in one line."""
    return str(exc) or type(exc).__name__


def _target(uri, value, sandbox):
    """Where ``uri`` lands in the sandbox: its ``output_file``, else
    ``basename(value)``; _Refused outside it. The URI is checked as
    ``Fetcher::validateUri`` does even with an ``output_file``."""
    base = basename(value)
    name = uri.get("output_file") or base
    target = os.path.normpath(os.path.join(sandbox, name))
    if not target.startswith(os.path.normpath(sandbox) + os.sep):
        raise _Refused("output_file %r leaves the sandbox" % name)
    return target


def _landing(sandbox, target):
    """``target`` (``_target``'s), its parent directories made: real ones,
    never through a link (an archive's, fetched before: Mesos' fetcher
    writes through it); _Refused otherwise."""
    try:
        return inside(os.path.realpath(sandbox), os.path.relpath(target, sandbox), "output_file")
    except ArchiveError as exc:
        raise _Refused(str(exc)) from None


def basename(value):
    """The file name a URI lands as, or _Refused in Mesos' words
    (``Fetcher::basename``, src/slave/containerizer/fetcher.cpp): with a
    scheme, all that follows the last '/', a query included
    ('http://h/f.tar.gz?v=1' is 'f.tar.gz?v=1', no archive to extract);
    without, the path's (stout's ``Path::basename``)."""
    if "\\" in value or "'" in value or "\0" in value:
        raise _Refused("Illegal characters in URI")
    index = value.find("://")
    if index > 1:
        path = value[index + 3:]
        if "/" not in path or len(path) <= path.find("/") + 1:
            raise _Refused("Malformed URI (missing path): " + value)
        return path[path.rfind("/") + 1:]
    if not value:
        return "."
    stripped = value.rstrip("/")
    return stripped.rpartition("/")[2] if stripped else "/"


FILE_PREFIX = "file://"
NET_PREFIXES = ("http://", "https://", "ftp://")   # ftps:// too in Mesos; not urllib's
RELATIVE_PATH = ("A relative path was passed for the resource but the Mesos framework home "
                 "was not specified. Please either provide this config option or avoid "
                 "using a relative path")


def local_path(value):
    """The local file a URI names, None for a URI of another scheme, or
    _Refused (``Fetcher::uriToLocalPath``, src/slave/containerizer/
    fetcher.cpp): ``file://`` (a ``localhost`` after it dropped) or no
    scheme; absolute only, as an agent without ``--frameworks_home``
    (Mesos' default, and the local agents have none) takes it: a relative
    path is never resolved against this process' working directory."""
    file_uri = value.startswith(FILE_PREFIX)
    if not file_uri and "://" in value:
        return None
    path = value[len(FILE_PREFIX):] if file_uri else value   # path::from_uri
    if path.startswith("localhost"):
        path = path[len("localhost"):]
    if not path.startswith("/"):                              # path::is_absolute
        raise _Refused("File URI only supports absolute paths" if file_uri else RELATIVE_PATH)
    return path


def _fetch_one(uri, value, sandbox, stall, cache, user, limits, cancelled, run_as):
    target = _target(uri, value, sandbox)   # refused before anything is fetched
    deadline = time.monotonic() + limits.timeout
    # An FTP download is a process of its own, which a kill ends at once:
    # ftplib's sockets are not this process' to shut, and each of its reads
    # waits up to the stall (a read that timed out sooner left its file
    # unreadable: "cannot read from timed out object").
    in_child = run_as is not None or value.lstrip(" \t\n\r").startswith("ftp://")
    if uri.get("cache") and cache is not None:
        # As Mesos' fetchFromCache: an archive is extracted from the cache
        # (only what it holds lands in the sandbox), anything else copied.
        def download(path):
            if not in_child:
                fill(value, path, stall, limits, deadline, cancelled)
            else:
                _in_child(run_as, {"step": "fill", "value": value, "path": path},
                          stall, limits, deadline, cancelled)
        # Held until it is in the sandbox: an entry a fetch uses is never
        # evicted (Mesos references it until its mesos-fetcher run ends).
        with cache.use(value, user, download, owner=run_as) as source:
            _place_one(uri, value, sandbox, target, source, in_child, run_as, stall, limits,
                       deadline, cancelled)
    else:
        _place_one(uri, value, sandbox, target, None, in_child, run_as, stall, limits,
                   deadline, cancelled)


def _place_one(uri, value, sandbox, target, source, in_child, run_as, stall, limits, deadline,
               cancelled):
    """``_fetch_one``'s URI into the sandbox, from ``source`` (its cached file) or not."""
    if in_child:
        _in_child(run_as, {"step": "place", "uri": uri, "value": value, "sandbox": sandbox,
                           "source": source}, stall, limits, deadline, cancelled)
        return
    if _extracts(uri, target):
        if source is None:   # not cached: downloaded into the sandbox, extracted there
            target = _landing(sandbox, target)
            _download(value, target, stall, limits, deadline, cancelled)
            source = target
        if os.path.getsize(source) >= CHILD_EXTRACT_BYTES:
            # A big extraction runs in a process of its own, as Mesos runs
            # its fetcher program per container (src/slave/containerizer/
            # fetcher.cpp runs mesos-fetcher): tasks that start together
            # extract on all the cores, not one at a time on this process'
            # interpreter lock. A small one is not worth a process' start.
            _in_child(None, {"step": "place", "uri": uri, "value": value, "sandbox": sandbox,
                             "source": source}, stall, limits, deadline, cancelled)
            return
    place(uri, value, sandbox, source, stall, limits, deadline, cancelled)


def _extracts(uri, target):
    """Whether ``uri``, landing at ``target``, is an archive to extract."""
    return not uri.get("executable") and uri.get("extract", True) \
        and target.endswith(_ARCHIVES)


def fill(value, path, stall, limits, deadline, cancelled):
    """Download ``value`` to ``path`` (a cache entry's)."""
    _download(value, path, stall, limits, deadline, cancelled)


def place(uri, value, sandbox, source, stall, limits, deadline, cancelled):
    """One URI into the sandbox: downloaded, or from ``source`` (its file in
    the cache), extracted when it is an archive to extract, made
    executable when asked."""
    target = _landing(sandbox, _target(uri, value, sandbox))
    extracting = _extracts(uri, target)
    if source is not None:
        if extracting:
            _extract(source, sandbox, limits, cancelled)
            return
        _copy_file(source, target, limits, deadline, cancelled)
    else:
        _download(value, target, stall, limits, deadline, cancelled)
        if extracting:
            _extract(target, sandbox, limits, cancelled)
    if uri.get("executable"):
        os.chmod(target, 0o750)


CHILD_MODULE = "mesos_local.containerizer.fetch_child"
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _in_child(run_as, request, stall, limits, deadline, cancelled):
    """Run one step (``fill`` or ``place``) in ``fetch_child``, as
    ``run_as`` (None: as this process' user); a kill stops it at once (the
    child is killed)."""
    request = dict(request, stall=stall, limits=dataclasses.asdict(limits),
                   remaining=deadline - time.monotonic())
    if run_as is not None:
        request.update(uid=run_as.uid, gid=run_as.gid, groups=list(run_as.groups))
    # It starts as root with this process's environment (the master's own,
    # none of the task's) and becomes the user before it touches anything.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH"))
                                        if p)
    data: Optional[bytes] = json.dumps(request).encode()   # sent once, then None
    child = subprocess.Popen([sys.executable, "-S", "-m", CHILD_MODULE], env=env, cwd="/",
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    while True:
        try:
            out, err = child.communicate(data, timeout=CHILD_POLL)
            break
        except subprocess.TimeoutExpired:
            data = None
            if cancelled():
                child.kill()
                child.communicate()
                raise _Cancelled() from None
    try:
        reply = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        lines = err.decode("utf-8", "replace").strip().splitlines()
        raise _Refused("the fetcher%s failed (exit %s)%s" % (
            " as user %s" % run_as.name if run_as is not None else "", child.returncode,
            ": " + lines[-1] if lines else "")) from None
    if "error" in reply:
        raise _Refused(reply["error"])


def _extract(archive, sandbox, limits, cancelled):
    try:
        extract(archive, sandbox, limits, cancelled)
    except ArchiveError:
        if cancelled():
            raise _Cancelled() from None
        raise


def _download(value, target, stall, limits, deadline, cancelled):
    """``download`` of src/launcher/fetcher.cpp: the URI (leading blanks
    trimmed) checked, then copied when local, downloaded when http(s) or
    ftp."""
    value = value.lstrip(" \t\n\r")
    basename(value)                                      # Fetcher::validateUri
    path = local_path(value)
    if path is not None:
        _copy_file(path, target, limits, deadline, cancelled)
    elif value.startswith("ftp://"):
        from urllib.request import urlopen

        # In a fetch child (``_fetch_one``), which a kill ends.
        with urlopen(value, timeout=stall) as response:
            _copy_stream(response, target, 0o640, limits, deadline, cancelled, stall)
    elif value.startswith(NET_PREFIXES):
        # Connecting, the answer's headers and each read wait up to the stall
        # (a server that answers late, a bundle server whose downloads are all
        # busy, is no failure before it: Mesos' --fetcher_stall_timeout); a
        # kill shuts the download's sockets at once (``_Downloading``).
        with _Downloading(cancelled) as downloading:
            try:
                with downloading.open(value, stall) as response:
                    _copy_stream(response, target, 0o640, limits, deadline, cancelled, stall)
            except (OSError, ValueError) as exc:
                if downloading.killed:
                    raise _Cancelled() from None
                if isinstance(exc, socket.timeout):
                    raise _Refused("nothing came for %.0f s" % stall) from None
                raise
            if downloading.killed:   # the shut socket's end read as the file's
                raise _Cancelled()
    else:
        raise _Refused("the scheme %r is not supported here (http, https, ftp, file)"
                       % value.partition("://")[0])


class _Downloading:
    """One network download (``open``: urllib's, following redirects as
    Mesos' fetcher does), whose sockets a thread of its own shuts down as
    soon as ``cancelled()`` says so (``killed``)."""

    def __init__(self, cancelled):
        self._cancelled = cancelled
        self._sockets = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.killed = False

    def __enter__(self):
        threading.Thread(target=self._watch, name="fetch-kill-watch", daemon=True).start()
        return self

    def __exit__(self, *exc_info):
        self._done.set()

    def open(self, value, stall):
        return _opener(self._add, self._cancelled, stall).open(value, timeout=stall)

    def _add(self, sock):
        with self._lock:
            self._sockets.append(sock)
            if self.killed:
                _shut(sock)

    def _watch(self):
        while not self._done.wait(POLL):
            if self._cancelled():
                with self._lock:
                    self.killed = True
                    for sock in self._sockets:
                        _shut(sock)
                return


def _opener(add, cancelled, stall):
    """urllib's opener whose HTTP and HTTPS connections connect a second at
    a time, looking at the kill in between, up to ``stall`` seconds, then
    hand their sockets to ``add``."""
    import http.client
    import urllib.request

    class Polled(http.client.HTTPConnection):
        def connect(self):
            _connect_polled(super().connect, self, cancelled, stall)
            add(self.sock)

    class HTTPConnection(Polled):
        pass

    class HTTPSConnection(Polled, http.client.HTTPSConnection):
        pass

    # Made with no arguments, as build_opener makes them: the defaults (a
    # default SSL context, its host name checked) are the connections' own.
    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(HTTPConnection, req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(HTTPSConnection, req)

    return urllib.request.build_opener(HTTP, HTTPS)


def _connect_polled(connect, connection, cancelled, stall):
    """``connect()`` (an http.client connection's) tried with a one-second
    timeout until it connects, ``cancelled()`` says so (_Cancelled) or
    ``stall`` seconds passed (its timeout raised); then its socket waits up
    to the stall. A connection's SYNs dropped (a firewall, a full backlog)
    held a kill for the whole stall."""
    deadline = time.monotonic() + stall
    connection.timeout = min(stall, POLL)
    while True:
        try:
            connect()
            break
        except socket.timeout:
            if cancelled():
                raise _Cancelled() from None
            if time.monotonic() >= deadline:
                raise
    connection.sock.settimeout(stall)


def _shut(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _copy_file(path, target, limits, deadline, cancelled):
    """Copy the regular file ``path``; its mode kept, without world bits.
    In the kernel where it can (``copy_file_range``), as the ``cp`` that
    Mesos' fetcher runs does (apache/mesos 3rdparty/stout/include/stout/os/
    posix/copyfile.hpp spawns ``cp SOURCE DESTINATION``; coreutils' cp
    copies with copy_file_range, or clones where the file system can):
    no byte passes through this process, and tasks that start together
    copy at once, not one at a time on its interpreter lock."""
    with open(path, "rb") as source:
        status = os.fstat(source.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise _Refused("not a regular file")
        mode = (status.st_mode & 0o750) | 0o600
        if status.st_size > limits.max_bytes:
            raise _Refused("it is larger than %d MB" % (limits.max_bytes >> 20))
        if not _copy_in_kernel(source, target, mode, limits, deadline, cancelled):
            _copy_stream(source, target, mode, limits, deadline, cancelled)


KERNEL_CHUNK = 64 << 20   # bytes one copy_file_range call copies, between looks at the kill


def _copy_in_kernel(source, target, mode, limits, deadline, cancelled):
    """Copy the open regular file ``source`` to ``target`` by
    ``os.copy_file_range``; False, with nothing written to ``target``,
    where the kernel or the file systems cannot (then it is read and
    written here)."""
    copy = getattr(os, "copy_file_range", None)
    if copy is None:
        return False
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        written = 0
        while True:
            if cancelled():
                raise _Cancelled()
            if time.monotonic() > deadline:
                raise _Refused("it took longer than %.0f s" % limits.timeout)
            try:
                count = copy(source.fileno(), fd, KERNEL_CHUNK)
            except OSError:
                if written:
                    raise
                return False   # EXDEV, ENOSYS, EINVAL ...: copied the ordinary way
            if not count:
                break
            written += count
            if written > limits.max_bytes:   # the file grew while it was copied
                raise _Refused("it is larger than %d MB" % (limits.max_bytes >> 20))
        os.fchmod(fd, mode)
        return True
    finally:
        os.close(fd)


def _copy_stream(source, target, mode, limits, deadline, cancelled, stall=None):
    """Copy ``source`` to ``target`` (mode ``mode``) within ``limits``; a read
    that times out is waited on again until ``stall`` seconds without data."""
    written = 0
    heard = time.monotonic()
    read = getattr(source, "read1", source.read)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        while True:
            if cancelled():
                raise _Cancelled()
            now = time.monotonic()
            if now > deadline:
                raise _Refused("it took longer than %.0f s" % limits.timeout)
            try:
                chunk = read(CHUNK)
            except socket.timeout:
                if stall is None or now - heard > stall:
                    raise _Refused("nothing came for %.0f s" % (now - heard)) from None
                continue
            heard = time.monotonic()
            if not chunk:
                break
            written += len(chunk)
            if written > limits.max_bytes:
                raise _Refused("it is larger than %d MB" % (limits.max_bytes >> 20))
            out.write(chunk)
    os.chmod(target, mode)


__all__ = ["FetchError", "fetch_uris", "fill", "place", "why", "Limits", "basename",
           "local_path"]
