"""A scheduler driver for the Mesos v1 scheduler HTTP API, with the
interface of pymesos' ``MesosSchedulerDriver``: its methods map one to one
onto the Calls of ``calls``; events are decoded by ``decoding``; how the
master is reached is its transport's (the ``transport.Transport``
contract: ``transport.HTTPTransport``, or ``mock_transport.MockTransport``
in tests).

Threads: a *stream* thread (``subscription``) holds the SUBSCRIBE
connection, decodes RecordIO events and queues them; a *dispatcher* thread calls the scheduler's callbacks
one at a time, in event order. Calls (ACCEPT, KILL, ...) go on a second
connection from whichever thread makes them, and raise on failure. A callback
that raises stops the driver; ``join()`` raises ``DriverAborted`` in the
caller's thread, with the callback's exception as ``__cause__``.
"""

import copy
import logging
import os
import queue
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, Union

from addict import Dict

from ..exceptions import (
    DriverAborted,
    FrameworkFailedOver,
    MesosCallError,
    MesosConnectionError,
    MesosError,
)
from . import calls
from .calls import Ids, Json
from .detector import Detector
from .http_transport import TLSContext, basic_auth
from .immutable import with_immutable_fields
from .interface import (
    FAILED_OVER,
    REMOVED,
    STREAM_MISMATCH,
    Scheduler,
    check_scheduler,
    dispatch_event,
)
from .master_address import parse_master, with_password
from .stream_items import Fatal, Received, StreamLost
from .transport import HTTPTransport, Stream, Transport

logger = logging.getLogger(__name__)

DRIVER_RUNNING = "DRIVER_RUNNING"
DRIVER_STOPPED = "DRIVER_STOPPED"
DRIVER_ABORTED = "DRIVER_ABORTED"

_STOP = object()
# How long a call waits for the master's answer (``timeout``'s default).
CALL_TIMEOUT = 10.0
# How long stop() tries to subscribe again, when the subscription is gone,
# to tear the framework down.
TEARDOWN_TIMEOUT = 10.0
# stop(): how long the answer to a SUBSCRIBE in flight is waited for, so
# that a framework the master just registered is torn down by its id.
ANSWER_WAIT = 5.0


class MesosSchedulerDriver:
    """Drive ``scheduler`` against the Mesos master ``master``.

    ``master``: ``host:port``, ``http(s)://host:port``, a comma-separated list
    of those, or ``zk://host:port,.../path`` (see ``master_address.parse_master``).
    ``framework_info``: a FrameworkInfo dict (``user`` and ``name`` at least).
    ``principal``/``secret`` (default: ``MESOS_PRINCIPAL``/``MESOS_SECRET``)
    are sent as HTTP basic authentication. ``verify=False`` turns certificate
    checks off for ``https://`` masters; ``ca_bundle`` names a CA file;
    ``scheme`` is used for masters found in ZooKeeper (their MasterInfo does
    not say whether they serve http or https).
    ``timeout`` (default ``CALL_TIMEOUT``) bounds every call; ``connect_timeout`` bounds how long the
    driver goes without a subscription before it gives up (``error`` is
    called and ``join()`` raises ``MesosConnectionError``): the attempts'
    waits are capped by the time left, so it gives up on time. Before the
    first subscription, masters none of whose host names resolve are an
    error at once, and masters that refuse every connection (nothing
    listens at their port) one after ``refused_timeout`` seconds (default:
    ``connect_timeout``); once a master was reached, only
    ``connect_timeout`` applies (a failover takes its time).
    ``transport`` replaces the HTTP transport (``transport.HTTPTransport``):
    tests give a ``mock_transport.MockTransport``.

    ``stop()`` without the subscription (it was lost and not won back: the
    leader's ZooKeeper entry is junk, say) subscribes once more as the
    framework, to the masters it last knew, within ``teardown_timeout``
    s, and tears it down (``failover_teardown``, as ``tfmesos kill``
    does); else it raises: the framework stays registered until its
    failover timeout. ``quiet_retries``: a master not reached yet is said
    at INFO level only (not in a warning: the caller says what failed).
    """

    def __init__(self, scheduler: Scheduler, framework_info: Mapping[str, Any], master: str,
                 implicit_acknowledgements: bool = True, principal: Optional[str] = None,
                 secret: Optional[str] = None, timeout: Optional[float] = None, verify: bool = True,
                 ca_bundle: Optional[str] = None, heartbeat_misses: int = 3,
                 backoff_cap: float = 15.0, connect_timeout: float = 60.0,
                 detector: Optional[Detector] = None, scheme: str = "http",
                 refused_timeout: Optional[float] = None,
                 transport: Optional[Transport] = None,
                 teardown_timeout: float = TEARDOWN_TIMEOUT, quiet_retries: bool = False) -> None:
        check_scheduler(scheduler)
        self.scheduler = scheduler
        self.framework: dict[str, Any] = copy.deepcopy(dict(framework_info))
        for field in ("user", "name"):
            if not self.framework.get(field):
                raise ValueError("framework_info needs a %r" % field)
        self.implicit_acknowledgements = implicit_acknowledgements
        # A record's master (its ZooKeeper password masked) takes the password
        # from $MESOS_MASTER, as the credentials below come from the environment.
        master = with_password(master, os.environ.get("MESOS_MASTER"))
        address = parse_master(master)
        # What subscribing once more to tear the framework down needs (the
        # HTTP transport's settings); None with a transport given.
        self._teardown_options: Optional[dict[str, Any]] = None
        if transport is None:
            # pymesos users set these in the environment of the scheduler process.
            principal = principal if principal is not None else os.environ.get("MESOS_PRINCIPAL")
            secret = secret if secret is not None else os.environ.get("MESOS_SECRET")
            # Loading the CA certificates takes tens of milliseconds: only for
            # https masters (at once, so that a bad CA bundle is an early error).
            context = TLSContext(verify, ca_bundle)
            if scheme == "https" or any(url.startswith("https:") for url in address.urls):
                context.get()
            transport = HTTPTransport(
                address, master, context, basic_auth(principal, secret),
                CALL_TIMEOUT if timeout is None else timeout, scheme=scheme,
                detector=detector, heartbeat_misses=heartbeat_misses, backoff_cap=backoff_cap,
                connect_timeout=connect_timeout, quiet_retries=quiet_retries,
                refused_timeout=connect_timeout if refused_timeout is None else refused_timeout)
            self._teardown_options = dict(principal=principal or "", secret=secret or "",
                                          verify=verify, ca_bundle=ca_bundle, scheme=scheme)
        self._transport: Transport = transport

        self._lock = threading.Lock()
        self._events: queue.Queue[object] = queue.Queue()
        self._stopping = threading.Event()
        self._ended = threading.Event()   # stopped or aborted: join() returns
        self._gate = threading.Lock()     # no call may follow TEARDOWN
        self._torn_down = False
        self._teardown_timeout = teardown_timeout
        self._aborted = False             # abort() was called: no teardown
        self._stream: Stream = transport.open_stream(self.framework, self._events, self._stopping)
        self._status: Optional[str] = None
        self._exception: Optional[BaseException] = None
        self._threads: list[threading.Thread] = []
        self._registered_once = False

    # -- properties ---------------------------------------------------------

    @property
    def framework_id(self) -> Optional[str]:
        fid = self.framework.get("id")
        return fid["value"] if fid else None

    @property
    def master(self) -> Optional[str]:
        """Base URL of the master the driver is subscribed to (or None)."""
        return self._stream.leader_url

    @property
    def connected(self) -> bool:
        return self._stream.subscribed

    @property
    def master_info(self) -> Any:
        """The leading master's MasterInfo from the last SUBSCRIBED (or None)."""
        return self._stream.master_info

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> str:
        with self._lock:
            if self._status is not None:
                raise RuntimeError("a MesosSchedulerDriver can only be started once")
            self._status = DRIVER_RUNNING
        for target, name in ((self._stream.run, "mesos-stream"),
                             (self._dispatch_loop, "mesos-dispatch"),
                             (self._stream.watch_leader, "mesos-leader-watch")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()
        return self._status

    def stop(self, failover: bool = False) -> str:
        """Stop the driver. Without ``failover`` the framework is torn down
        (Mesos kills its tasks); with it, the framework stays registered for
        its ``failover_timeout`` so another driver can take over.

        Without the subscription (lost, not won back), the framework is
        torn down through a new one (``_teardown_unsubscribed``); when that
        fails too, ``MesosConnectionError`` says that the framework stays
        registered."""
        error: Optional[MesosError] = None
        self._stream.stop_subscribing()
        if not failover and self.framework_id is None and not self._stopping.is_set():
            # A SUBSCRIBE the master may have taken, its answer not read yet
            # (a signal right after the master registered the framework): its
            # id is learnt first, so that it is torn down, not left registered
            # for its failover timeout with an id known to no one (tfrun
            # --detach interrupted: "nothing of the run is left", and it was).
            self._stream.await_answer(ANSWER_WAIT)
        if not failover and self._stream.subscribed and not self._stopping.is_set():
            try:
                self._call(calls.teardown())
            except MesosError as exc:
                error = exc
        elif not failover and self._left_registered():
            masters = self._stream.masters_known()
            self._shutdown(DRIVER_STOPPED)   # this subscription tries no more
            error = self._teardown_unsubscribed(masters)
        self._shutdown(DRIVER_STOPPED)
        if error is not None:
            raise error
        return DRIVER_STOPPED

    def _left_registered(self) -> bool:
        """Whether the framework was subscribed, is not torn down and is not
        subscribed now, for no reason that ends it (an ERROR: removed,
        failed over to another scheduler) or leaves it on purpose
        (``abort()``)."""
        return (self.framework_id is not None and self._registered_once
                and not self._torn_down and not self._aborted
                and not self._stream.subscribed
                and (self._exception is None
                     or isinstance(self._exception, (MesosConnectionError, DriverAborted))))

    def _teardown_unsubscribed(self, masters: Sequence[str]) -> Optional[MesosError]:
        """Subscribe as the framework to ``masters`` (the one last reached
        first; a master that no longer leads redirects to the leader) and
        tear it down, within ``teardown_timeout`` s; None once done (or the
        master had removed it already), else the error that says that the
        framework stays registered."""
        framework_id = self.framework_id
        if self._teardown_options is None:
            why = "not subscribed to a Mesos master"
        elif not masters:
            why = "no Mesos master known"
        else:
            from .failover_teardown import teardown_as_scheduler
            try:
                teardown_as_scheduler(type(self), ",".join(masters), copy.deepcopy(self.framework),
                                      timeout=self._teardown_timeout, quiet_retries=True,
                                      **self._teardown_options)
                with self._gate:
                    self._torn_down = True
                return None
            except MesosError as exc:
                if REMOVED in str(exc):
                    return None   # an operator, or its failover timeout, did it
                why = str(exc)
        return MesosConnectionError(
            "framework %s stays registered until its failover timeout (%g s) passes: no "
            "subscription to tear it down with (%s)"
            % (framework_id, float(self.framework.get("failover_timeout") or 0), why))

    def abort(self) -> str:
        """Stop without tearing the framework down."""
        self._aborted = True
        self._shutdown(DRIVER_ABORTED)
        return DRIVER_ABORTED

    def join(self, timeout: Optional[float] = None) -> Optional[str]:
        """Wait until the driver stops or aborts; raise what made it abort
        (a ``MesosError``: ``DriverAborted`` when a callback raised, else the
        error that made the driver give up).

        After an abort (a callback raised), the subscription stays open until
        ``stop()``, which can still tear the framework down."""
        if any(thread is threading.current_thread() for thread in self._threads):
            raise RuntimeError("join() called from a driver callback")
        if self._threads:
            deadline = None if timeout is None else time.monotonic() + timeout
            if not self._ended.wait(timeout):
                raise TimeoutError("the Mesos driver is still running after %s s" % timeout)
            if self._stopping.is_set():
                for thread in self._threads:
                    thread.join(None if deadline is None
                                else max(0.0, deadline - time.monotonic()))
                    if thread.is_alive():
                        raise TimeoutError("the Mesos driver is still running after %s s"
                                           % timeout)
        if self._exception is not None:
            raise self._exception
        return self._status

    @property
    def exception(self) -> Optional[BaseException]:
        """What aborted the driver (``DriverAborted`` with a callback's
        exception as ``__cause__``, or the error that made it give up), else
        None."""
        return self._exception

    def run(self) -> Optional[str]:
        self.start()
        return self.join()

    def _shutdown(self, status: str) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            self._stopping.set()
            if self._status == DRIVER_RUNNING:
                self._status = status
        self._ended.set()
        self._stream.interrupt()
        self._events.put(_STOP)
        self._transport.close()

    def _fail(self, exc: BaseException) -> None:
        if self._exception is None:
            self._exception = exc
        self._shutdown(DRIVER_ABORTED)

    # -- calls --------------------------------------------------------------

    def launchTasks(self, offer_ids: Ids, tasks: Iterable[Json],
                    filters: Optional[Json] = None) -> None:
        self._call(calls.launch(offer_ids, tasks, filters))

    def acceptOffers(self, offer_ids: Ids, operations: Iterable[Json],
                     filters: Optional[Json] = None) -> None:
        self._call(calls.accept(offer_ids, operations, filters))

    def declineOffer(self, offer_ids: Ids, filters: Optional[Json] = None) -> None:
        self._call(calls.decline(offer_ids, filters))

    def reviveOffers(self, roles: Sequence[str] = ()) -> None:
        # First: should the call fail (a reconnection), the next SUBSCRIBE
        # carries the revival, not the suppression.
        self._stream.suppressed_roles -= set(roles or self._roles())
        self._call(calls.revive(roles))

    def suppressOffers(self, roles: Sequence[str] = ()) -> None:
        self._call(calls.suppress(roles))
        # Carried by the next SUBSCRIBE, or Mesos would offer again after a
        # re-subscription (Call.Subscribe.suppressed_roles in scheduler.proto).
        self._stream.suppressed_roles |= set(roles or self._roles())

    def _roles(self) -> list[str]:
        """The framework's roles (``*`` when it names none)."""
        return self.framework.get("roles") or [self.framework.get("role") or "*"]

    def killTask(self, task_id: Json, agent_id: Optional[Json] = None) -> None:
        self._call(calls.kill(task_id, agent_id))

    def acknowledgeStatusUpdate(self, status: Json) -> None:
        call = calls.acknowledge(status)
        if call is not None:
            self._call(call)

    def reconcileTasks(self, tasks: Iterable[Json]) -> None:
        self._call(calls.reconcile(tasks))

    def updateFramework(self, framework_info: Mapping[str, Any]) -> None:
        """Change the framework's info (its labels, ...): ``framework_info``
        with the framework's id (the driver sets it). The driver keeps it:
        every SUBSCRIBE after this one (a lost connection, a new leader)
        says it, as libmesos' does (src/sched/sched.cpp, updateFramework),
        or the master would take the older info back. Its principal, user
        and checkpoint stay as the driver subscribed with them: Mesos
        refuses to change them (``immutable``)."""
        info = dict(with_immutable_fields(copy.deepcopy(dict(framework_info)), self.framework),
                    id={"value": self.framework_id})
        self._call(calls.update_framework(info, self._stream.suppressed_roles))
        # In place: the subscription stream holds this very dict.
        self.framework.clear()
        self.framework.update(info)

    def sendFrameworkMessage(self, executor_id: Json, agent_id: Json,
                             data: Union[str, bytes]) -> None:
        self._call(calls.message(executor_id, agent_id, data))

    frameworkMessage = sendFrameworkMessage

    def _call(self, call: calls.Call) -> None:
        """Send one call to the leader; 202 or raise ``MesosError``."""
        kind = call.get("type")
        with self._gate:
            # The stream as the call goes, not as it waited for the calls
            # before it (each up to the transport's timeout).
            url, stream_id, subscribed = self._stream.state()
            if not subscribed or url is None:
                raise MesosConnectionError(
                    "cannot send %s: not subscribed to a Mesos master (the driver is %s)"
                    % (kind, "stopped" if self._stopping.is_set() else "reconnecting"))
            # After TEARDOWN the framework is gone: Mesos answers any other
            # call with 400 "Framework cannot be found".
            if self._torn_down:
                raise MesosConnectionError("cannot send %s: the framework was torn down" % kind)
            self._torn_down = kind == "TEARDOWN"
            try:
                self._transport.post(url, dict(call, framework_id={"value": self.framework_id}),
                                     stream_id)
            except MesosCallError as exc:
                # Another scheduler subscribed as the framework (two `tfmesos
                # attach` at once): the loser's calls were refused before its
                # stream had the ERROR, and it failed "handling OFFERS",
                # recorded a failure and stopped the tasks the winner ran.
                # Not after a re-subscription of its own: the stream it sent
                # is still the one it holds.
                if exc.status == 400 and STREAM_MISMATCH in str(exc):
                    if self._stream.state()[1] == stream_id:
                        raise FrameworkFailedOver("%s: another scheduler subscribed as "
                                                  "framework %s (%s)" % (
                                                      FAILED_OVER, self.framework_id, exc),
                                                  exc.status) from exc
                    # Its own re-subscription (a lost stream) came between:
                    # Mesos checks the stream id before it handles a call
                    # (src/master/http.cpp, Master::Http::scheduler), so
                    # nothing was done; as a call made while disconnected.
                    raise MesosConnectionError("cannot send %s: the driver subscribed again as "
                                               "it was sent (a new stream id)" % kind) from exc
                raise

    # -- dispatching --------------------------------------------------------

    def _dispatch_loop(self) -> None:
        while True:
            item = self._events.get()
            if item is _STOP:
                return
            if self._stopping.is_set():
                continue  # no callbacks once stop() or abort() was called
            try:
                self._handle(item)
            except BaseException as exc:  # noqa: B902 - re-raised by join()
                if self._stream.closing or self._stopping.is_set():
                    # A callback racing stop(): its calls fail because we left.
                    logger.debug("callback failed while stopping", exc_info=True)
                    continue
                self._callback_failed(item, exc)
                return

    def _callback_failed(self, item: object, exc: BaseException) -> None:
        """A callback raised: stop calling back (libmesos' abort), tell the
        scheduler through ``error``, and keep the subscription, so that
        ``stop()`` can still send TEARDOWN and Mesos kills the tasks at once
        rather than after the failover timeout."""
        logger.debug("scheduler callback failed", exc_info=True)
        what = item.kind if isinstance(item, Received) else type(item).__name__
        message = "the scheduler failed handling %s: %s: %s" % (what, type(exc).__name__, exc)
        if self._exception is None:
            self._exception = DriverAborted(message)
            self._exception.__cause__ = exc
        with self._lock:
            if self._status == DRIVER_RUNNING:
                self._status = DRIVER_ABORTED
        try:
            self.scheduler.error(self, message)
        except Exception:  # noqa: B902 - the first failure is the one to report
            logger.warning("scheduler.error failed as well", exc_info=True)
        self._ended.set()

    def _handle(self, item: object) -> None:
        if isinstance(item, Received):
            self._dispatch(item.kind, item.event)
        elif isinstance(item, StreamLost):
            self.scheduler.disconnected(self)
        elif isinstance(item, Fatal):   # the queue holds nothing else
            if self._exception is None:   # scheduler.error finds it as driver.exception
                self._exception = item.error
            self.scheduler.error(self, str(item.error))
            self._fail(item.error)

    def _dispatch(self, kind: str, event: Dict) -> None:
        """Call the scheduler's callback for a Mesos event."""
        again = kind == "SUBSCRIBED" and self._registered_once
        self._registered_once = self._registered_once or kind == "SUBSCRIBED"
        if not dispatch_event(self.scheduler, self, kind, event, again):
            logger.debug("ignoring Mesos event %s", kind)
        if kind == "UPDATE":
            status = event["update"]["status"]
            if self.implicit_acknowledgements and "uuid" in status and not (
                    self._stopping.is_set() or self._torn_down):
                self._acknowledge_implicitly(status)

    def _acknowledge_implicitly(self, status: Dict) -> None:
        try:
            self.acknowledgeStatusUpdate(status)
        except MesosError as exc:
            # Disconnected meanwhile: the agent re-sends unacknowledged
            # updates after re-subscription.
            if not exc.means_disconnected:
                raise
            logger.info("acknowledgement of %s postponed: %s", status.task_id.value, exc)
