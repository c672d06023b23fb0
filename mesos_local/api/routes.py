"""Which endpoint a request path reaches, found as libprocess finds it.

A Mesos master is a libprocess process, ``master``, beside others with
endpoints of their own (``metrics``, ``files``, ``version``). A path's
first component names the process; a path whose first component names
none goes to the master, the delegate (``ProcessManager::handle``:
``/state`` is ``/master/state``). The rest, its slashes trimmed at both
ends, is looked up as the longest route that is a prefix of it, one
component at a time (``ProcessBase::consume``,
3rdparty/libprocess/src/process.cpp): ``/api/v1/operator`` is the master's
``api/v1`` (the operator API), ``/api/v1/scheduler/x`` its
``api/v1/scheduler``, ``/master/state/`` its ``state``,
``/metrics/snapshot/x`` the metrics process' ``snapshot``.

``resolve(path)`` gives ``"<process>/<route>"`` (``"master/api/v1"``,
``"version/"``), or None (404): the routes here are those the local
master serves.
"""

import urllib.parse
from typing import Optional

DELEGATE = "master"

ROUTES = {
    # Master::initialize (src/master/master.cpp), the ones served here; the
    # .json forms as masters before 1.7 had them (apache/mesos 42551cb52).
    "master": frozenset((
        "api/v1", "api/v1/scheduler", "frameworks", "flags", "health", "redirect", "roles",
        "roles.json", "teardown", "slaves", "state", "state.json", "state-summary", "tasks",
        "tasks.json")),
    "metrics": frozenset(("snapshot",)),          # MetricsProcess (libprocess)
    "files": frozenset(("read", "browse")),       # FilesProcess (src/files/files.cpp)
    "version": frozenset(("",)),                  # VersionProcess: route("/")
}

SCHEDULER = "master/api/v1/scheduler"
OPERATOR = "master/api/v1"
TEARDOWN = "master/teardown"
HEALTH = "master/health"
READ_FILE = "files/read"
BROWSE_FILES = "files/browse"


def dirname(name):
    """stout's ``Path::dirname`` with separator ``/``: ``a/b/c`` -> ``a/b``,
    ``a`` -> ``.``, ``""`` -> ``.``, ``a//b`` -> ``a``."""
    if not name:
        return "."
    end = len(name.rstrip("/"))
    if end == 0:
        return "/"
    cut = name.rfind("/", 0, end)
    if cut < 0:
        return "."
    parent = name[:cut].rstrip("/")
    return parent or "/"


def resolve(path) -> Optional[str]:
    """``"<process>/<route>"`` that ``path`` (no query) reaches, or None."""
    return resolve_in(path, ROUTES, DELEGATE)


def resolve_in(path, table, delegate) -> Optional[str]:
    """``resolve`` among the processes of ``table`` (name -> routes), the
    unnamed ones going to ``delegate``: an agent's server routes so too."""
    tokens = [token for token in path.split("/") if token]
    process = urllib.parse.unquote(tokens[0]) if tokens else None
    if process not in table:
        path = "/" + delegate + path
        process, tokens = delegate, [delegate] + tokens
    prefix = "/" + tokens[0]
    name = path[len(prefix):] if path.startswith(prefix) else path
    name = name.strip("/")
    routes = table[process]
    while dirname(name) != name:
        if name in routes:
            return "%s/%s" % (process, name)
        name = dirname(name)
    return None


__all__ = ["resolve", "resolve_in", "dirname", "ROUTES", "DELEGATE", "SCHEDULER", "OPERATOR", "TEARDOWN",
           "HEALTH", "READ_FILE", "BROWSE_FILES"]
