"""A scheduler driver for the Mesos v1 scheduler HTTP API, with the
interface of pymesos' ``MesosSchedulerDriver``.

Threads: a *stream* thread holds the SUBSCRIBE connection, decodes RecordIO
events and queues them; a *dispatcher* thread calls the scheduler's callbacks
one at a time, in event order. Calls (ACCEPT, KILL, ...) go on a second
connection from whichever thread makes them, and raise on failure. A callback
that raises stops the driver; ``join()`` re-raises the exception in the
caller's thread.
"""

import base64
import copy
import http.client
import inspect
import json
import logging
import os
import queue
import random
import socket
import ssl
import threading
import time
import urllib.parse

from addict import Dict

from ..exceptions import MesosCallError, MesosConnectionError, MesosError
from . import recordio
from .detector import make_detector, parse_master
from .interface import CALLBACKS

logger = logging.getLogger(__name__)

API_PATH = "/api/v1/scheduler"
DRIVER_RUNNING = "DRIVER_RUNNING"
DRIVER_STOPPED = "DRIVER_STOPPED"
DRIVER_ABORTED = "DRIVER_ABORTED"

_MAX_REDIRECTS = 5
_STOP = object()

# Positional arguments after ``driver`` of every callback, for the contract check.
_CALLBACK_ARITY = {
    "registered": 2, "reregistered": 1, "disconnected": 0, "resourceOffers": 1,
    "inverseOffers": 1, "offerRescinded": 1, "statusUpdate": 1,
    "frameworkMessage": 3, "slaveLost": 1, "executorLost": 3, "error": 1,
}


def encode_data(data):
    """bytes -> base64 text, as Mesos JSON carries ``bytes`` fields."""
    return base64.b64encode(data).decode("ascii")


def decode_data(text):
    return base64.b64decode(text)


def check_scheduler(scheduler):
    """Fail early when a callback cannot take the arguments the driver passes."""
    for name in CALLBACKS:
        method = getattr(scheduler, name, None)
        if method is None:
            continue
        if not callable(method):
            raise TypeError("scheduler.%s is not callable" % name)
        try:
            inspect.signature(method).bind(None, *([None] * _CALLBACK_ARITY[name]))
        except TypeError:
            raise TypeError("scheduler.%s%s does not accept the driver's arguments "
                            "(driver + %d)" % (name, inspect.signature(method),
                                               _CALLBACK_ARITY[name])) from None
        except ValueError:  # builtins without a signature
            pass


class _StreamEnded(Exception):
    """The subscription stream ended; the driver reconnects."""


class _Fatal(Exception):
    """Stop the driver: reconnecting cannot help."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


class MesosSchedulerDriver:
    """Drive ``scheduler`` against the Mesos master ``master``.

    ``master``: ``host:port``, ``http(s)://host:port``, a comma-separated list
    of those, or ``zk://host:port,.../path`` (see ``detector.parse_master``).
    ``framework_info``: a FrameworkInfo dict (``user`` and ``name`` at least).
    ``principal``/``secret`` (default: ``MESOS_PRINCIPAL``/``MESOS_SECRET``)
    are sent as HTTP basic authentication. ``verify=False`` turns certificate
    checks off for ``https://`` masters; ``ca_bundle`` names a CA file.
    ``timeout`` bounds every call; ``connect_timeout`` bounds how long the
    driver goes without a subscription before it gives up (``error`` is
    called and ``join()`` raises ``MesosConnectionError``).
    """

    def __init__(self, scheduler, framework_info, master, implicit_acknowledgements=True,
                 principal=None, secret=None, timeout=10.0, verify=True, ca_bundle=None,
                 heartbeat_misses=3, backoff_cap=15.0, connect_timeout=60.0, detector=None):
        check_scheduler(scheduler)
        self.scheduler = scheduler
        self.framework = copy.deepcopy(dict(framework_info))
        for field in ("user", "name"):
            if not self.framework.get(field):
                raise ValueError("framework_info needs a %r" % field)
        self.implicit_acknowledgements = implicit_acknowledgements
        self._detector = detector or make_detector(parse_master(master))
        self._master_text = master
        principal = principal if principal is not None else os.environ.get("MESOS_PRINCIPAL")
        secret = secret if secret is not None else os.environ.get("MESOS_SECRET")
        self._auth = None
        if principal:
            token = base64.b64encode(("%s:%s" % (principal, secret or "")).encode()).decode()
            self._auth = "Basic " + token
        self._timeout = timeout
        self._ssl = _ssl_context(verify, ca_bundle)
        self._heartbeat_misses = heartbeat_misses
        self._backoff_cap = backoff_cap
        self._connect_timeout = connect_timeout

        self._lock = threading.Lock()
        self._call_lock = threading.Lock()
        self._events = queue.Queue()
        self._stopping = threading.Event()
        self._status = None
        self._exception = None
        self._threads = []
        self._stream_conn = None
        self._call_conn = None
        self._call_conn_url = None
        self._leader_url = None
        self._stream_id = None
        self._subscribed = False
        self._closing = False  # stop() began: a closed stream is expected
        self._registered_once = False
        self.master_info = None

    # -- properties ---------------------------------------------------------

    @property
    def framework_id(self):
        fid = self.framework.get("id")
        return fid["value"] if fid else None

    @property
    def master(self):
        """Base URL of the master the driver is subscribed to (or None)."""
        return self._leader_url

    @property
    def connected(self):
        return self._subscribed

    # -- lifecycle ----------------------------------------------------------

    def start(self):
        with self._lock:
            if self._status is not None:
                raise RuntimeError("a MesosSchedulerDriver can only be started once")
            self._status = DRIVER_RUNNING
        for target, name in ((self._stream_loop, "mesos-stream"),
                             (self._dispatch_loop, "mesos-dispatch"),
                             (self._watch_leader, "mesos-leader-watch")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()
        return self._status

    def stop(self, failover=False):
        """Stop the driver. Without ``failover`` the framework is torn down
        (Mesos kills its tasks); with it, the framework stays registered for
        its ``failover_timeout`` so another driver can take over."""
        error = None
        self._closing = True
        if not failover and self._subscribed and not self._stopping.is_set():
            try:
                self._call({"type": "TEARDOWN"})
            except MesosError as exc:
                error = exc
        self._shutdown(DRIVER_STOPPED)
        if error is not None:
            raise error
        return DRIVER_STOPPED

    def abort(self):
        """Stop without tearing the framework down."""
        self._shutdown(DRIVER_ABORTED)
        return DRIVER_ABORTED

    def join(self, timeout=None):
        """Wait until the driver stops; re-raise what stopped it abnormally."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            if thread is threading.current_thread():
                raise RuntimeError("join() called from a driver callback")
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise TimeoutError("the Mesos driver is still running after %s s" % timeout)
        if self._exception is not None:
            raise self._exception
        return self._status

    def run(self):
        self.start()
        return self.join()

    def _shutdown(self, status):
        with self._lock:
            if self._stopping.is_set():
                return
            self._stopping.set()
            if self._status == DRIVER_RUNNING:
                self._status = status
            conn = self._stream_conn
        _shutdown_socket(conn)  # the stream thread notices and closes it itself
        self._events.put(_STOP)
        with self._call_lock:
            if self._call_conn is not None:
                self._call_conn.close()
                self._call_conn = None
        self._detector.close()

    def _fail(self, exc):
        if self._exception is None:
            self._exception = exc
        self._shutdown(DRIVER_ABORTED)

    # -- calls --------------------------------------------------------------

    def launchTasks(self, offer_ids, tasks, filters=None):
        operations = [{"type": "LAUNCH", "launch": {"task_infos": list(tasks)}}]
        self.acceptOffers(offer_ids, operations, filters)

    def acceptOffers(self, offer_ids, operations, filters=None):
        accept = {"offer_ids": _as_list(offer_ids), "operations": list(operations)}
        if filters is not None:
            accept["filters"] = filters
        self._call({"type": "ACCEPT", "accept": accept})

    def declineOffer(self, offer_ids, filters=None):
        decline = {"offer_ids": _as_list(offer_ids)}
        if filters is not None:
            decline["filters"] = filters
        self._call({"type": "DECLINE", "decline": decline})

    def reviveOffers(self, roles=()):
        call = {"type": "REVIVE"}
        if roles:
            call["revive"] = {"roles": list(roles)}
        self._call(call)

    def suppressOffers(self, roles=()):
        call = {"type": "SUPPRESS"}
        if roles:
            call["suppress"] = {"roles": list(roles)}
        self._call(call)

    def killTask(self, task_id, agent_id=None):
        kill = {"task_id": task_id}
        if agent_id is not None:
            kill["agent_id"] = agent_id
        self._call({"type": "KILL", "kill": kill})

    def acknowledgeStatusUpdate(self, status):
        if "uuid" not in status:
            return
        self._call({"type": "ACKNOWLEDGE", "acknowledge": {
            "agent_id": status["agent_id"], "task_id": status["task_id"],
            "uuid": status["uuid"]}})

    def reconcileTasks(self, tasks):
        self._call({"type": "RECONCILE", "reconcile": {"tasks": [
            {key: task[key] for key in ("task_id", "agent_id") if key in task}
            for task in tasks]}})

    def sendFrameworkMessage(self, executor_id, agent_id, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._call({"type": "MESSAGE", "message": {
            "agent_id": agent_id, "executor_id": executor_id, "data": encode_data(data)}})

    frameworkMessage = sendFrameworkMessage

    def _call(self, call):
        """Send one call to the leader; 202 or raise ``MesosError``."""
        with self._lock:
            url, stream_id, framework_id = self._leader_url, self._stream_id, self.framework_id
            subscribed = self._subscribed
        kind = call.get("type")
        if not subscribed or url is None:
            raise MesosConnectionError("cannot send %s: not subscribed to a Mesos master "
                                       "(the driver is %s)" % (kind, "stopped" if self._stopping.is_set()
                                                               else "reconnecting"))
        call = dict(call, framework_id={"value": framework_id})
        body = json.dumps(call).encode("utf-8")
        headers = self._headers(stream_id)
        with self._call_lock:
            for attempt in (0, 1):
                conn = self._call_connection(url)
                reused = conn.sock is not None
                try:
                    conn.request("POST", _api_path(url), body=body, headers=headers)
                    response = conn.getresponse()
                    payload = response.read()
                    break
                except (OSError, http.client.HTTPException) as exc:
                    conn.close()
                    self._call_conn = None
                    # A kept-alive connection the master closed: retry once on a new one.
                    if attempt == 0 and reused and isinstance(
                            exc, (http.client.RemoteDisconnected, BrokenPipeError,
                                  ConnectionResetError)):
                        continue
                    raise MesosConnectionError("%s call to the Mesos master at %s failed: %s"
                                               % (kind, url, _describe(exc))) from exc
        if response.status not in (200, 202):
            raise MesosCallError("Mesos master at %s refused %s: HTTP %d %s" % (
                url, kind, response.status, payload.decode("utf-8", "replace").strip()[:500]),
                status=response.status)

    def _call_connection(self, url):
        if self._call_conn is None or self._call_conn_url != url:
            if self._call_conn is not None:
                self._call_conn.close()
            self._call_conn = self._connection(url)
            self._call_conn_url = url
        return self._call_conn

    def _connection(self, url):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "https":
            return http.client.HTTPSConnection(parts.hostname, parts.port or 443,
                                               timeout=self._timeout, context=self._ssl)
        return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=self._timeout)

    def _headers(self, stream_id=None):
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": "tfmesos"}
        if stream_id:
            headers["Mesos-Stream-Id"] = stream_id
        if self._auth:
            headers["Authorization"] = self._auth
        return headers

    # -- the subscription stream --------------------------------------------

    def _stream_loop(self):
        backoff = 0.5
        unsubscribed_since = time.monotonic()
        last_error = "no attempt yet"
        while not self._stopping.is_set():
            try:
                self._subscribe_once()
                last_error = "the master closed the subscription stream"
            except _Fatal as fatal:
                self._events.put(("fatal", fatal.error))
                return
            except (OSError, http.client.HTTPException, recordio.RecordIOError,
                    MesosError, _StreamEnded, ValueError, AttributeError) as exc:
                # AttributeError: http.client reading a connection shut down meanwhile.
                last_error = _describe(exc)
            if self._stopping.is_set() or self._closing:
                return
            if self._subscribed:
                with self._lock:
                    self._subscribed = False
                    self._stream_conn = None
                unsubscribed_since = time.monotonic()
                backoff = 0.5
                logger.warning("lost the Mesos subscription (%s); re-subscribing", last_error)
                self._events.put(("disconnected", None))
            elif time.monotonic() - unsubscribed_since > self._connect_timeout:
                self._events.put(("fatal", MesosConnectionError(
                    "could not subscribe to the Mesos master %s for %.0f s: %s"
                    % (self._master_text, self._connect_timeout, last_error))))
                return
            else:
                logger.info("Mesos master not reachable yet (%s); retrying", last_error)
            self._stopping.wait(backoff * random.uniform(0.8, 1.2))
            backoff = min(backoff * 2, self._backoff_cap)

    def _candidates(self):
        urls = [self._leader_url] if self._leader_url else []
        for url in self._detector.candidates() or [self._detector.leader(self._timeout)]:
            if url not in urls:
                urls.append(url)
        return urls

    def _subscribe_once(self):
        last = None
        for url in self._candidates():
            for _ in range(_MAX_REDIRECTS):
                try:
                    url = self._subscribe_at(url)
                except (OSError, http.client.HTTPException, MesosConnectionError) as exc:
                    last = exc
                    break
                if url is None:
                    return  # a stream was read to its end
        raise last or MesosConnectionError("no Mesos master known")

    def _subscribe_at(self, url):
        """Subscribe at ``url``: read the stream (returns None when it ends),
        or return the URL the master redirected to."""
        framework = copy.deepcopy(self.framework)
        call = {"type": "SUBSCRIBE", "subscribe": {"framework_info": framework}}
        if "id" in framework:  # re-subscription: Mesos wants the id in both places
            call["framework_id"] = framework["id"]
        body = json.dumps(call)
        conn = self._connection(url)
        with self._lock:
            if self._stopping.is_set():
                return None
            self._stream_conn = conn
        try:
            conn.request("POST", _api_path(url), body=body.encode("utf-8"), headers=self._headers())
            response = conn.getresponse()
            if response.status == 307:
                location = response.getheader("Location") or ""
                response.read()
                return _redirect_base(url, location)
            if response.status == 503:
                response.read()
                raise MesosConnectionError("the Mesos master at %s has no leader yet (503)" % url)
            if response.status != 200:
                text = response.read().decode("utf-8", "replace").strip()[:500]
                error = MesosCallError("Mesos master at %s refused SUBSCRIBE: HTTP %d %s"
                                       % (url, response.status, text), status=response.status)
                if response.status in (400, 401, 403, 404, 415):
                    raise _Fatal(error)
                raise error
            self._read_stream(url, conn, response)
            return None
        finally:
            _shutdown_connection(conn)
            with self._lock:
                if self._stream_conn is conn:
                    self._stream_conn = None

    def _read_stream(self, url, conn, response):
        stream_id = response.getheader("Mesos-Stream-Id")
        decoder = recordio.Decoder()
        while not self._stopping.is_set():
            try:
                data = response.read1(65536)
            except TimeoutError as exc:
                raise _StreamEnded("no event from the master for %.1f s (missed heartbeats)"
                                   % (conn.sock.gettimeout() if conn.sock else 0)) from exc
            if not data:
                return
            for record in decoder.feed(data):
                event = decode_event(record)
                kind = event.get("type")
                if kind == "SUBSCRIBED":
                    self._on_subscribed(url, conn, stream_id, event.subscribed)
                elif kind == "ERROR":
                    raise _Fatal(MesosError("Mesos master error: %s" % event.error.message))
                elif kind != "HEARTBEAT":
                    self._events.put((kind, event))

    def _on_subscribed(self, url, conn, stream_id, subscribed):
        if not stream_id:
            raise _Fatal(MesosError("the master at %s sent no Mesos-Stream-Id header" % url))
        interval = float(subscribed.get("heartbeat_interval_seconds") or 15.0)
        if conn.sock is not None:
            conn.sock.settimeout(interval * self._heartbeat_misses)
        with self._lock:
            self.framework["id"] = {"value": subscribed.framework_id.value}
            self._leader_url = url
            self._stream_id = stream_id
            self._subscribed = True
            self.master_info = subscribed.get("master_info") or Dict()
        self._events.put(("SUBSCRIBED", subscribed))

    def _watch_leader(self):
        changed = getattr(self._detector, "leaders_changed", None)
        if changed is None:
            return
        while not self._stopping.is_set():
            if changed.wait(0.5):
                changed.clear()
                with self._lock:
                    self._leader_url = None
                    conn = self._stream_conn
                logger.info("the Mesos leader changed; re-subscribing")
                _shutdown_socket(conn)

    # -- dispatching --------------------------------------------------------

    def _dispatch_loop(self):
        while True:
            item = self._events.get()
            if item is _STOP:
                return
            if self._stopping.is_set():
                continue  # no callbacks once stop() or abort() was called
            kind, payload = item
            try:
                self._dispatch(kind, payload)
            except BaseException as exc:  # noqa: B902 - re-raised by join()
                if self._closing or self._stopping.is_set():
                    # A callback racing stop(): its calls fail because we left.
                    logger.debug("callback failed while stopping", exc_info=True)
                    continue
                logger.debug("scheduler callback failed", exc_info=True)
                self._fail(exc)
                return

    def _dispatch(self, kind, event):
        sched = self.scheduler
        if kind == "SUBSCRIBED":
            if self._registered_once:
                sched.reregistered(self, event.get("master_info") or Dict())
            else:
                self._registered_once = True
                sched.registered(self, event.framework_id, event.get("master_info") or Dict())
        elif kind == "OFFERS":
            offers = event["offers"]
            if offers.get("offers"):
                sched.resourceOffers(self, offers["offers"])
            if offers.get("inverse_offers"):
                sched.inverseOffers(self, offers["inverse_offers"])
        elif kind == "INVERSE_OFFERS":
            sched.inverseOffers(self, event["inverse_offers"]["inverse_offers"])
        elif kind == "RESCIND":
            sched.offerRescinded(self, event["rescind"]["offer_id"])
        elif kind == "UPDATE":
            status = event["update"]["status"]
            sched.statusUpdate(self, status)
            if self.implicit_acknowledgements and "uuid" in status and not self._stopping.is_set():
                self._acknowledge_implicitly(status)
        elif kind == "MESSAGE":
            message = event["message"]
            sched.frameworkMessage(self, message["executor_id"], message["agent_id"],
                                   decode_data(message.get("data", "")))
        elif kind == "FAILURE":
            failure = event["failure"]
            if "executor_id" in failure:
                sched.executorLost(self, failure["executor_id"], failure["agent_id"],
                                   failure.get("status"))
            else:
                sched.slaveLost(self, failure["agent_id"])
        elif kind == "disconnected":
            sched.disconnected(self)
        elif kind == "fatal":
            sched.error(self, str(event))
            self._fail(event)
        else:
            logger.debug("ignoring Mesos event %s", kind)

    def _acknowledge_implicitly(self, status):
        try:
            self.acknowledgeStatusUpdate(status)
        except (MesosConnectionError, MesosCallError) as exc:
            # Disconnected meanwhile (403 "not subscribed" counts): the agent
            # re-sends unacknowledged updates after re-subscription.
            if isinstance(exc, MesosCallError) and exc.status != 403:
                raise
            logger.info("acknowledgement of %s postponed: %s", status.task_id.value, exc)


def _dict_from_pairs(pairs):
    """A JSON object as an ``addict.Dict``, built once: ``Dict(json.loads(...))``
    would copy every nested object again and costs twice the time."""
    obj = Dict.__new__(Dict)
    object.__setattr__(obj, "__parent", None)
    object.__setattr__(obj, "__key", None)
    object.__setattr__(obj, "__frozen", False)
    dict.update(obj, pairs)
    return obj


def decode_event(record):
    """One RecordIO record -> Event as an ``addict.Dict``."""
    return json.loads(record, object_pairs_hook=_dict_from_pairs)


def _as_list(ids):
    if isinstance(ids, dict):
        return [ids]
    return list(ids)


def _api_path(base_url):
    return urllib.parse.urlsplit(base_url).path.rstrip("/") + API_PATH


def _redirect_base(url, location):
    """The base URL of the leader named by a 307 ``Location`` header (Mesos
    sends a scheme-relative ``//host:port/api/v1/scheduler``)."""
    target = urllib.parse.urljoin(url, location)
    parts = urllib.parse.urlsplit(target)
    if not parts.hostname:
        raise MesosConnectionError("the Mesos master at %s redirected to %r" % (url, location))
    path = parts.path
    if path.endswith(API_PATH):
        path = path[:-len(API_PATH)]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path.rstrip("/"), "", ""))


def _ssl_context(verify, ca_bundle):
    if not verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=ca_bundle)


def _shutdown_socket(conn):
    """Unblock a thread reading ``conn`` without closing it under its feet."""
    sock = conn.sock if conn is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _shutdown_connection(conn):
    if conn is not None:
        _shutdown_socket(conn)
        conn.close()


def _describe(exc):
    text = str(exc) or type(exc).__name__
    return "%s: %s" % (type(exc).__name__, text) if not isinstance(exc, MesosError) else text
