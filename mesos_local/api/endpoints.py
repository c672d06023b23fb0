"""The read-only HTTP endpoints tools use (``mesos-cli``, the Mesos web UI,
Mesos-DNS, Marathon, metrics dashboards), built from the master's state as
real Mesos builds them (``Master::ReadOnlyHandler``,
src/master/readonly_handler.cpp; the JSON models of src/common/http.cpp):

* ``/master/state``, ``/master/state-summary``, ``/master/slaves``,
  ``/master/frameworks``, ``/master/tasks`` (``framework_id``,
  ``task_id``, ``limit``, ``offset``, ``order``), ``/master/roles``,
  ``/master/flags``: JSON, ``?jsonp=f`` wraps it in ``f(...);``;
* ``/master/redirect``: 307 to the leading master's base URL
  (``Master::Http::redirect``, src/master/http.cpp);
* ``/metrics/snapshot``: ``metrics.py``; ``/version``.

Each is served at ``/master/X`` and ``/X`` (a Mesos master is libprocess'
default process, so ``/state`` reaches ``/master/state``), at any path under
them (``/master/state/x``: libprocess routes a path to the longest route
that prefixes it, ``routes.py``) and, as Mesos before 1.7 had it,
``X.json``. Like Mesos' read-only endpoints without
``--authenticate_http_readonly`` they need no credentials, and they show no
secrets (no task commands or environments, no credentials). The ones that
Mesos answers only as the leader redirect (307) or answer 503 otherwise.

``find(route)`` gives the ``Endpoint`` of a route ``routes.resolve`` found; ``Endpoint.reply(master, path,
query)`` holds the master's lock only to build the document
(``LocalMaster.read``).
"""

import json
import re
import urllib.parse

from ..durations import DurationError, parse_duration
from ..resources import Resources
from .metrics import snapshot
from .state_json import agent_json, framework_json, master_flags, render_version, task_json

TASK_LIMIT = 100                   # src/master/constants.hpp
TASK_STATES = ("TASK_STAGING", "TASK_STARTING", "TASK_RUNNING", "TASK_KILLING",
               "TASK_FINISHED", "TASK_KILLED", "TASK_FAILED", "TASK_LOST", "TASK_ERROR",
               "TASK_UNREACHABLE")
SUMMARY_FRAMEWORK_KEYS = ("id", "name", "used_resources", "offered_resources",
                          "capabilities", "hostname", "webui_url", "active", "connected",
                          "recovered")
JSON_TYPE = "application/json"


class Reply:
    __slots__ = ("status", "body", "content_type", "headers")

    def __init__(self, status, body=b"", content_type=None, headers=()):
        self.status, self.body = status, body
        self.content_type, self.headers = content_type, list(headers)


def accepts(header, media_type):
    """Whether an Accept header allows ``media_type``, as libprocess'
    ``Request::_acceptsMediaType`` (3rdparty/libprocess/src/http.cpp)
    decides: no header allows anything; else the first of ``type/subtype``,
    ``type/*``, ``*/*`` that the header names decides, by its ``q`` (absent
    or malformed: allowed; else above 0)."""
    if header is None:
        return True
    text = "".join(c for c in header if c not in " \t\n")
    entries = [part.split(";") for part in text.split(",") if part]
    major = media_type.split("/")[0]
    for candidate in (media_type, major + "/*", "*/*"):
        for tokens in entries:
            if not tokens[0] or tokens[0].lower() != candidate.lower():
                continue
            qualities = [value for key, _, value in (t.partition("=") for t in tokens[1:])
                         if key == "q"]
            if len(qualities) != 1:
                return True
            try:
                return float(qualities[0]) > 0
            except ValueError:
                return False
    return False


def negotiate(header, offered, refusal):
    """The first of ``offered`` that an Accept-like header allows (as Mesos'
    handlers pick their answer's type: a chain of ``acceptsMediaType``
    tests in src/master/http.cpp and src/slave/http.cpp), or the 406 Reply
    with ``refusal``, the handler's own wording."""
    for media_type in offered:
        if accepts(header, media_type):
            return media_type
    return Reply(406, refusal)


def redirect_location(leader, path):
    """Mesos' protocol-relative redirect: ``//host:port/path``."""
    parsed = urllib.parse.urlsplit(leader if "//" in leader else "//" + leader)
    return "//%s%s" % (parsed.netloc, path)


# libprocess writes any ``jsonp`` into its reply; the local master takes only
# what a JavaScript caller names a function with, so that nothing else (a
# <script>, say) is ever echoed back.
_CALLBACK = re.compile(r"[A-Za-z_$][\w$.]*\Z", re.ASCII)


def bad_callback(query):
    """A 400 Reply when ``?jsonp=`` is not a JavaScript identifier, else None."""
    callback = query.get("jsonp")
    if callback and not _CALLBACK.match(callback):
        return Reply(400, b"Invalid 'jsonp' callback: expecting a JavaScript identifier "
                          b"such as 'handler' or 'ns.handler'\n")
    return None


def json_reply(document, query):
    """200 with the document; ``?jsonp=f``: ``f(document);`` as JavaScript
    (libprocess' ``OK(json, jsonp)``); 400 for a callback that is not an
    identifier."""
    refused = bad_callback(query)
    if refused is not None:
        return refused
    body = json.dumps(document)
    callback = query.get("jsonp")
    if callback:
        return Reply(200, ("%s(%s);" % (callback, body)).encode("utf-8"), "text/javascript")
    return Reply(200, body.encode("utf-8"), JSON_TYPE)


class Endpoint:
    """``render(master, records, query)`` -> JSON document, under the lock;
    ``leader_only``: redirect to the leader when this master does not lead."""

    def __init__(self, render, leader_only=True):
        self.render = render
        self.leader_only = leader_only

    def reply(self, master, path, query, target=None):
        """The Reply to GET ``path`` (``target``: with its query string)."""
        if self.leader_only:
            leader = master.leader()
            if leader == "":
                return Reply(503, b"No leader elected")
            if leader is not None:
                return Reply(307, headers=[("Location",
                                            redirect_location(leader, target or path))])
        return json_reply(master.read(self.render, query), query)


def _filter(value, wanted):
    return wanted is None or value == wanted


# The query key (not a string: no URL can set it) under which the HTTP server
# passes the (host, port) a request came in at. The embedded agents' endpoints
# are the master's own, so their ``pid`` names that address: the one the
# reader reached (a --netns master's hub address from inside the hub,
# loopback from this host), as an agent's pid names where it is reachable.
LOCAL_ADDRESS = object()


def _files_address(records, query):
    return query.get(LOCAL_ADDRESS) or records.files_address


def slaves(master, records, query):
    wanted = query.get("slave_id")
    return {"slaves": [agent_json(a, _files_address(records, query))
                       for a in records.agents.values()
                       if _filter(a.id, wanted)],
            "recovered_slaves": []}


def frameworks(master, records, query):
    wanted = query.get("framework_id")
    return {"frameworks": [framework_json(f) for f in records.frameworks.values()
                           if _filter(f.id, wanted)],
            "completed_frameworks": [framework_json(f) for f in records.completed_frameworks
                                     if _filter(f.id, wanted)],
            "unregistered_frameworks": []}


def _int(text):
    """``numify<int>``: an int, or None when absent or not a number."""
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _all_tasks(records):
    for framework in list(records.frameworks.values()) + list(records.completed_frameworks):
        for task in list(framework.tasks.values()) + list(framework.completed_tasks):
            yield framework, task


def tasks(master, records, query):
    """``/tasks``: active and completed frameworks' tasks, sorted by their
    first status' timestamp (descending unless ``order=asc``; tasks without
    statuses first when ascending, last when descending), then
    ``offset`` and ``limit`` (default 100; negative: unlimited, as Mesos
    casts it to size_t)."""
    limit, offset = _int(query.get("limit")), _int(query.get("offset"))
    limit = TASK_LIMIT if limit is None else limit
    offset = 0 if offset is None else offset
    ascending = query.get("order") == "asc"
    selected = [task for framework, task in _all_tasks(records)
                if _filter(framework.id, query.get("framework_id"))
                and _filter(task.id, query.get("task_id"))]
    timed = sorted((t for t in selected if t.statuses),
                   key=lambda t: t.statuses[0]["timestamp"], reverse=not ascending)
    untimed = [t for t in selected if not t.statuses]
    ordered = untimed + timed if ascending else timed + untimed
    if offset < 0:
        ordered = []
    elif limit >= 0:
        ordered = ordered[offset:offset + limit]
    else:
        ordered = ordered[offset:]
    return {"tasks": [task_json(t) for t in ordered]}


def _state_counts(tasks_of):
    counts = dict.fromkeys(TASK_STATES, 0)
    for task in tasks_of:
        if task.state in counts:
            counts[task.state] += 1
    return counts


def state_summary(master, records, query):
    """``/state-summary``: agents and frameworks with task counts by state
    and which frameworks run on which agents (``stateSummary``)."""
    pairs = [(f, t) for f, t in _all_tasks(records)
             if records.frameworks.get(f.id) is f]   # registered frameworks only
    agents = []
    for agent in records.agents.values():
        out = agent_json(agent, _files_address(records, query))
        out.update(_state_counts(t for _, t in pairs if t.agent_id == agent.id))
        out["framework_ids"] = sorted({f.id for f, t in pairs if t.agent_id == agent.id})
        agents.append(out)
    summaries = []
    for framework in records.frameworks.values():
        full = framework_json(framework)
        out = {key: full[key] for key in SUMMARY_FRAMEWORK_KEYS}
        out.update(_state_counts(t for f, t in pairs if f is framework))
        out["slave_ids"] = sorted({t.agent_id for f, t in pairs if f is framework})
        summaries.append(out)
    return {"hostname": (master.master_info or {}).get("hostname", ""),
            "slaves": agents, "frameworks": summaries}


def _quantities(resources):
    """A ResourceQuantities as JSON: scalar name -> amount, zeros left out."""
    return {name: value for name, value in resources.to_state().items()
            if isinstance(value, (int, float)) and value}


def role_usage(records):
    """(name, framework ids, allocated Resources, offered Resources) of
    every role a registered framework is subscribed to, by name (the roles
    Mesos' master knows with no weights, quotas or reservations set:
    ``Master::knownRoles``)."""
    names = sorted({role for f in records.frameworks.values() for role in f.roles})
    for name in names:
        allocated, offered = Resources(), Resources()
        members = []
        for framework in records.frameworks.values():
            if name in framework.roles:
                members.append(framework.id)
            for task in framework.tasks.values():
                if task.role == name and not task.terminal:
                    allocated.add(task.resources)
            for offer in framework.offers.values():
                if offer.role == name:
                    offered.add(offer.resources)
        yield name, members, allocated, offered


def roles(master, records, query):
    """``/roles``: every role a framework is subscribed to, with what its
    tasks hold and what it is offered; no quotas or weights here (1.0)."""
    out = []
    for name, members, allocated, offered in role_usage(records):
        total = allocated.copy().add(offered)
        out.append({"name": name, "weight": 1.0,
                    "quota": {"role": name, "guarantee": {}, "limit": {},
                              "consumed": _quantities(allocated)},
                    "resources": _quantities(total), "allocated": _quantities(allocated),
                    "offered": _quantities(offered), "reserved": {}, "frameworks": members})
    return {"roles": out}


def flags(master, records, query):
    return {"flags": master_flags(master)}


def state(master, records, query):
    return master.state(query.get(LOCAL_ADDRESS))


class _Redirect(Endpoint):
    """``/master/redirect``: 307 to the leading master's base URL (this
    one's when it leads); ``/master/redirect/X``: 404 (no loops)."""

    def __init__(self):
        super().__init__(None, leader_only=False)

    def reply(self, master, path, query, target=None):
        if path.rstrip("/") not in ("/redirect", "/master/redirect"):
            return Reply(404)
        leader = master.leader()
        if leader == "":
            return Reply(503, b"No leader elected")
        base = redirect_location(leader if leader is not None else master.url, "")
        return Reply(307, headers=[("Location", base)])


class _Open(Endpoint):
    """An endpoint any master answers, leader or not."""

    def __init__(self, render):
        super().__init__(render, leader_only=False)


_ROUTES = {
    "state": Endpoint(state), "state.json": Endpoint(state),
    "state-summary": Endpoint(state_summary),
    "slaves": Endpoint(slaves), "frameworks": Endpoint(frameworks),
    "tasks": Endpoint(tasks), "tasks.json": Endpoint(tasks),
    "roles": Endpoint(roles), "roles.json": Endpoint(roles),
    "flags": _Open(flags), "redirect": _Redirect(),
}
class _Metrics(_Open):
    """``/metrics/snapshot``: a ``timeout`` must be a duration, as libprocess'
    ``MetricsProcess::_snapshot`` reads it (3rdparty/libprocess/src/metrics/
    metrics.cpp; every metric here is ready at once, so its value waits for
    nothing)."""

    def __init__(self):
        super().__init__(lambda master, records, query: snapshot(master, records))

    def reply(self, master, path, query, target=None):
        timeout = query.get("timeout")
        if timeout is not None:
            try:
                parse_duration(timeout)
            except DurationError as exc:
                return Reply(400, ("Invalid timeout '%s': %s.\n" % (timeout, exc)).encode(
                    "utf-8", "replace"))
        return super().reply(master, path, query, target)


_METRICS = _Metrics()
_VERSION = _Open(lambda master, records, query: render_version())


def find(target):
    """The Endpoint serving ``target``, a route as ``routes.resolve`` gives
    it (``master/state``, ``metrics/snapshot``, ``version/``), or None."""
    if target == "metrics/snapshot":
        return _METRICS
    if target == "version/":
        return _VERSION
    if target is None or not target.startswith("master/"):
        return None
    return _ROUTES.get(target[len("master/"):])


__all__ = ["find", "accepts", "negotiate", "role_usage", "Endpoint", "Reply", "json_reply",
           "redirect_location", "TASK_LIMIT"]
