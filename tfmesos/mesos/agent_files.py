"""Reading a task's sandbox through its agent's ``/files`` endpoints
(src/files/files.cpp; docs/endpoints/files/read.md and browse.md): what a
task printed before anything of tfmesos ran in it.

* ``agent_base_url``: ``scheme://ip:port`` of an ``Offer.url`` (the agent's
  address; its ``path``, the agent's libprocess id, is not where ``/files``
  is: that is at the root);
* ``sandbox_path``: the virtual path an agent attaches an executor's latest
  run at (``paths::getExecutorVirtualPath``, src/slave/paths.cpp; a command
  task's executor id is its task id);
* ``read_tails``: the last lines of some files of a sandbox, within a hard
  time limit: it runs in a daemon thread that is given up on at the
  deadline, so a silent or slow agent cannot hold the caller;
* ``download``: a whole file of a sandbox, byte for byte (a packed bundle,
  a zip), page by page through ``/files/read``, bounded in size and time.

``/files/read`` answers a file's bytes as a JSON string written byte by
byte (stout's ``jsonify``: ``"``, ``\\``, ``/`` and the control characters
escaped, every other byte as it is, valid UTF-8 or not), as the embedded
agent does (``mesos_local/api/files.py``, ``surrogateescape``). Decoded
with ``surrogateescape`` and encoded back the same way, a page gives back
exactly the file's bytes, a UTF-8 sequence cut between pages included.
(Mesos' ``/files/download`` sends the raw bytes, but the embedded agent
does not serve it, so ``download`` keeps to ``/files/read``.)
"""

import ipaddress
import json
import os
import re
import socket
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ..exceptions import MesosError
from ..terminal_text import quoted
from .http_transport import TLS, describe, open_connection

MAX_REPLY = 256 * 1024     # a read answers at most 16 pages, JSON-escaped
DOWNLOAD_PAGE = 64 * 1024  # bytes a download asks of each /files/read (16 pages of 4 KiB)
# A byte JSON-escapes to 6 characters at most (\u00XX): a page's reply is bounded by that.
DOWNLOAD_REPLY = 6 * DOWNLOAD_PAGE + 1024


def agent_base_urls(state: Mapping[str, Any], scheme: str) -> dict[str, str]:
    """{agent id: ``scheme://ip:port``} from the agents' pids (``/master/state``
    or ``/master/slaves``)."""
    urls = {}
    for agent in state.get("slaves") or []:
        if not isinstance(agent, dict) or not isinstance(agent.get("id"), str):
            continue
        address = str(agent.get("pid") or "").rpartition("@")[2]
        if address:
            urls[agent["id"]] = "%s://%s" % (scheme, address)
    return urls


def task_sandbox(framework_id: str, task: Mapping[str, Any]) -> str:
    """The virtual path of ``task``'s sandbox on its agent."""
    return sandbox_path(framework_id, task.get("executor_id") or task["id"])


class AgentFilesError(MesosError):
    """A sandbox could not be read; the message says why."""

    def __init__(self, message: str, unreachable: bool = False,
                 status: Optional[int] = None) -> None:
        super().__init__(message)
        self.unreachable = unreachable   # no answer at all: the agent is out of reach
        self.status = status             # the agent's HTTP status (404: no such file), if any


def agent_base_url(url: object, scheme: Optional[str] = None) -> Optional[str]:
    """``http://ip:port`` of ``url`` (an ``Offer.url``: Mesos' URL message,
    as JSON), by its ``ip``, else its ``hostname``; ``scheme`` replaces its
    scheme (https for a cluster whose master speaks https, as the Mesos web
    UI reaches agents with its page's scheme). None when it names no host."""
    if not isinstance(url, dict):
        return None
    address = url.get("address") or {}
    host, port = address.get("ip") or address.get("hostname"), address.get("port")
    if not host or not isinstance(port, int):
        return None
    try:
        if ipaddress.ip_address(host).version == 6:
            host = "[%s]" % host
    except ValueError:
        pass
    return "%s://%s:%d" % (scheme or url.get("scheme") or "http", host, port)


def sandbox_path(framework_id: str, executor_id: str) -> str:
    return "/frameworks/%s/executors/%s/runs/latest" % (framework_id, executor_id)


def silent(base_url: str, seconds: float) -> AgentFilesError:
    """The error of an agent that did not answer within ``seconds``."""
    return AgentFilesError("%s did not answer within %.1f s" % (base_url, seconds),
                           unreachable=True)


class AgentFiles:
    """GETs to one agent's ``/files`` over one kept-alive connection."""

    def __init__(self, base_url: str, timeout: float, auth: Optional[str], context: TLS) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self._conn = open_connection(base_url, timeout, context)
        self._headers = {"Accept": "application/json", "User-Agent": "tfmesos"}
        if auth:
            self._headers["Authorization"] = auth

    def get(self, route: str, **params: Any) -> Any:
        return self.fetch(route, MAX_REPLY, "replace", params)

    def fetch(self, route: str, limit: int, errors: str, params: Mapping[str, Any]) -> Any:
        """The JSON the agent answers GET ``route`` with, at most ``limit``
        bytes, decoded with ``errors`` (``surrogateescape``: a file's bytes
        that are not UTF-8 kept as they came)."""
        target = "%s?%s" % (route, urllib.parse.urlencode(params))
        try:
            self._conn.request("GET", target, headers=self._headers)
            response = self._conn.getresponse()
            body = response.read(limit + 1)
        except TimeoutError:   # the same silent agent as read_tails' join sees
            raise silent(self.base_url, self.timeout) from None
        except OSError as exc:
            raise AgentFilesError("%s: %s" % (self.base_url, describe(exc)),
                                  unreachable=True) from None
        except Exception as exc:  # http.client's own errors: a garbled answer
            raise AgentFilesError("%s: %s" % (self.base_url, describe(exc))) from None
        if response.status != 200:
            text = quoted(body)
            raise AgentFilesError("%s%s answered %d%s" % (self.base_url, route, response.status,
                                                         ": " + text if text else ""),
                                  status=response.status)
        if len(body) > limit:
            self.close()     # the rest of the answer is unread: the connection cannot go on
            raise AgentFilesError("%s%s answered more than %d bytes"
                                  % (self.base_url, route, limit))
        try:
            return json.loads(body.decode("utf-8", errors))
        except ValueError:
            raise AgentFilesError("%s%s answered no JSON" % (self.base_url, route)) from None

    def close(self) -> None:
        self._conn.close()


# What Mesos' own programs log in a sandbox's stderr (glog to stderr,
# src/logging/logging.cpp): the command executor's lines after the
# command ended ("executor.cpp:190] Received ACKNOWLEDGED event",
# src/launcher/executor.cpp), the fetcher's before it began. Not the task's.
MESOS_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ "
                            r"(?:executor|fetcher|logging|exec|docker)\.cpp:\d+\] ")


def last_lines(data: str, whole: bool, lines: int) -> list[str]:
    """The last ``lines`` lines of ``data`` but Mesos' own (``MESOS_LOG_LINE``);
    unless ``whole`` (it starts the file), its first line may be a part of
    one and is left out. A line redrawn with carriage returns (a progress
    bar) is its last form."""
    if not whole:
        data = data.partition("\n")[2]
    found = data.split("\n")
    if found[-1] == "":
        found.pop()                   # after the last newline
    found = [line for line in found if not MESOS_LOG_LINE.match(line)]
    return [line.rstrip("\r").rsplit("\r", 1)[-1] for line in found[-lines:]]


def _tails(agent: AgentFiles, path: str, names: Iterable[str], max_bytes: int,
           lines: int) -> dict[str, list[str]]:
    """{name: its last lines} of the files ``names`` of the sandbox at ``path``."""
    listing = agent.get("/files/browse", path=path)
    if not isinstance(listing, list):
        raise AgentFilesError("%s/files/browse answered no listing" % agent.base_url)
    sizes = {entry.get("path", "").rsplit("/", 1)[-1]: entry.get("size")
             for entry in listing if isinstance(entry, dict)}
    found: dict[str, list[str]] = {}
    for name in names:
        size = sizes.get(name)
        if not isinstance(size, int) or size <= 0:
            found[name] = []
            continue
        offset = max(0, size - max_bytes)
        answer = agent.get("/files/read", path="%s/%s" % (path, name), offset=offset,
                           length=max_bytes)
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, str):
            raise AgentFilesError("%s/files/read answered no data" % agent.base_url)
        found[name] = last_lines(data, offset == 0, lines)
    return found


def read_tails(base_url: str, path: str, names: Iterable[str] = ("stdout", "stderr"),
               max_bytes: int = 8192, lines: int = 20, timeout: float = 2.0,
               auth: Optional[str] = None, context: TLS = None) -> dict[str, list[str]]:
    """{name: its last ``lines`` lines (of its last ``max_bytes``)} of the
    files ``names`` of the sandbox at virtual ``path`` on the agent at
    ``base_url``, within ``timeout`` seconds all told; AgentFilesError
    otherwise. ``auth``: an Authorization header value; ``context``: TLS
    (https)."""
    result: dict[str, Any] = {}   # "tails" or "error", from the worker

    def work() -> None:
        try:
            agent = AgentFiles(base_url, timeout, auth, context)
            try:
                result["tails"] = _tails(agent, path, names, max_bytes, lines)
            finally:
                agent.close()
        except Exception as exc:  # reported to the caller, whatever it is
            result["error"] = exc

    started = time.monotonic()
    worker = threading.Thread(target=work, daemon=True, name="tfmesos-sandbox-read")
    worker.start()
    worker.join(timeout)
    if "tails" in result:
        return result["tails"]
    error = result.get("error")
    if isinstance(error, AgentFilesError):
        raise error
    if error is not None:
        raise AgentFilesError("%s: %s" % (base_url, describe(error)))
    raise silent(base_url, time.monotonic() - started)


# -- whole files ------------------------------------------------------------------


def _read_at(files: AgentFiles, path: str, offset: int,
             length: Optional[int] = None) -> tuple[int, bytes]:
    """(the offset answered, the bytes of ``path`` from ``offset``, at most
    ``length``); ``offset`` -1: (the file's size, no bytes)."""
    params: dict[str, Any] = {"path": path, "offset": offset}
    if length is not None:
        params["length"] = length
    answer = files.fetch("/files/read", DOWNLOAD_REPLY, "surrogateescape", params)
    data = answer.get("data") if isinstance(answer, dict) else None
    at = answer.get("offset") if isinstance(answer, dict) else None
    if not isinstance(data, str) or isinstance(at, bool) or not isinstance(at, int) or at < 0:
        raise AgentFilesError("%s/files/read answered no offset and data for %s"
                              % (files.base_url, path))
    try:
        raw = data.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise AgentFilesError("%s/files/read answered data that is no file's bytes for %s"
                              % (files.base_url, path)) from None
    if len(raw) > (length or 0):
        raise AgentFilesError("%s/files/read answered %d bytes of %s, %d were asked"
                              % (files.base_url, len(raw), path, length or 0))
    return at, raw


def download(files: AgentFiles, path: str, dest: str, max_bytes: int,
             deadline: Optional[float] = None) -> int:
    """Copy the file at virtual ``path`` of ``files``' agent (an
    ``AgentFiles``) to ``dest``, byte for byte; its size. Its size is asked
    first (``offset=-1``): a file over ``max_bytes`` is refused before a
    byte is read; then it is read page by page (``DOWNLOAD_PAGE`` bytes),
    and its size asked again: a file that changed meanwhile is refused.
    ``dest`` appears whole or not at all (a temporary file beside it,
    renamed). ``deadline``: a ``time.monotonic()`` value past which the
    download fails, the connection shut down then even mid-answer (and
    closed: ``files`` connects again for its next request).
    AgentFilesError, one line, otherwise."""
    where = "%s%s" % (files.base_url, path)
    _in_time(deadline, where, "before it started")
    watchdog = shut = None
    if deadline is not None:
        shut = threading.Event()
        watchdog = threading.Timer(deadline - time.monotonic(), _shut, (files, shut))
        watchdog.daemon = True
        watchdog.start()
    partial = None
    try:
        size = _size_of(files, path, deadline, where)
        if size > max_bytes:
            raise AgentFilesError("%s is %d bytes, over the %d a download may take"
                                  % (where, size, max_bytes))
        try:
            handle, partial = tempfile.mkstemp(prefix=".%s." % os.path.basename(dest),
                                               suffix=".partial",
                                               dir=os.path.dirname(os.path.abspath(dest)))
            out = os.fdopen(handle, "wb")
        except OSError as exc:
            raise AgentFilesError("cannot write %s: %s" % (dest, exc.strerror or exc)) from None
        try:
            with out:
                offset = 0
                while offset < size:
                    _in_time(deadline, where, "after %d of %d bytes" % (offset, size))
                    at, page = _read_at(files, path, offset, min(DOWNLOAD_PAGE, size - offset))
                    if at != offset or not page:
                        raise AgentFilesError("%s ended after %d of its %d bytes: it changed "
                                              "while it was downloaded" % (where, offset, size))
                    out.write(page)
                    offset += len(page)
        except OSError as exc:        # writing here; the agent's errors are AgentFilesError
            raise AgentFilesError("cannot write %s: %s" % (dest, exc.strerror or exc)) from None
        if _size_of(files, path, deadline, where) != size:
            raise AgentFilesError("%s changed while it was downloaded (it was %d bytes)"
                                  % (where, size))
        try:
            os.replace(partial, dest)
        except OSError as exc:
            raise AgentFilesError("cannot write %s: %s" % (dest, exc.strerror or exc)) from None
        partial = None
        return size
    except AgentFilesError as exc:
        if deadline is not None and time.monotonic() >= deadline and "in time" not in str(exc):
            raise AgentFilesError("%s: the download did not finish in time (%s)"
                                  % (where, exc), unreachable=exc.unreachable) from None
        raise
    finally:
        if watchdog is not None:
            watchdog.cancel()
            watchdog.join()
            if shut is not None and shut.is_set():
                files.close()     # its next request connects again
        if partial is not None:
            try:
                os.unlink(partial)
            except OSError:
                pass


def _size_of(files: AgentFiles, path: str, deadline: Optional[float], where: str) -> int:
    _in_time(deadline, where, "before its size was known")
    return _read_at(files, path, -1)[0]


def _in_time(deadline: Optional[float], where: str, when: str) -> None:
    if deadline is not None and time.monotonic() >= deadline:
        raise AgentFilesError("%s: the download did not finish in time (%s)" % (where, when))


def _shut(files: AgentFiles, shut: threading.Event) -> None:
    """The deadline: a read that is waiting for the agent ends at once."""
    shut.set()
    sock = getattr(files._conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


__all__ = ["AgentFiles", "AgentFilesError", "agent_base_url", "sandbox_path", "read_tails",
           "last_lines", "download", "DOWNLOAD_PAGE"]
