"""Removing a framework as one of its own schedulers: subscribe with its id
and its ``FrameworkInfo`` changed (Mesos' scheduler failover,
docs/high-availability-framework-guide.md), let the tasks named end, then
TEARDOWN (every task is killed, the framework removed; a finished framework
keeps its ``FrameworkInfo``, labels included).

Why a subscription: only a scheduler of a framework changes its
``FrameworkInfo``. ``UPDATE_FRAMEWORK`` needs the caller's subscription,
the operator API has no call for it, and ``/master/teardown`` changes
nothing. Mesos lets the SUBSCRIBE change labels but never the principal
or user (``validateUpdate`` and ``preserveImmutableFields`` in
src/master/validation.cpp), and on a master that authenticates, only the
framework's principal may subscribe as it (src/master/http.cpp): whoever
can do this could take the framework over anyway. The scheduler subscribed
until then gets the ERROR ``FAILED_OVER`` (``Master::failoverFramework``
in src/master/master.cpp) after the new ``FrameworkInfo`` is the
framework's, and the framework's task updates come here from then on.
"""

import logging
import queue
import time
from collections.abc import Iterable
from typing import Any, Callable

from ..exceptions import MesosConnectionError, MesosError
from .interface import Scheduler, SchedulerDriver
from .task_states import TERMINAL_STATES

logger = logging.getLogger(__name__)


class _Subscriber(Scheduler):
    """Holds the framework and nothing else: offers go back at once;
    subscription, updates and errors go to ``events``."""

    def __init__(self) -> None:
        self.events: queue.Queue[tuple] = queue.Queue()

    def registered(self, driver: SchedulerDriver, framework_id: Any, master_info: Any) -> None:
        self.events.put(("subscribed",))

    def resourceOffers(self, driver: SchedulerDriver, offers: list) -> None:
        driver.declineOffer([offer["id"] for offer in offers], {"refuse_seconds": 3600.0})

    def statusUpdate(self, driver: SchedulerDriver, update: Any) -> None:
        self.events.put(("update", update.task_id.value, update.state))

    def error(self, driver: SchedulerDriver, message: str) -> None:
        self.events.put(("error", message))


def teardown_as_scheduler(driver_class: Callable[..., Any], master: str, framework_info: dict,
                          wait_for: Iterable[str] = (), wait: float = 0.0, timeout: float = 30.0,
                          **options: Any) -> None:
    """Subscribe to ``master`` as the framework of ``framework_info`` (its
    id included; what the framework says from now on: its labels), wait up
    to ``wait`` s for the tasks ``wait_for`` (ids) to end, then tear the
    framework down. ``driver_class``: ``driver.MesosSchedulerDriver`` (its
    own teardown of a framework whose subscription is gone comes here: the
    driver imports this module, and no module cycle is allowed, lazy
    imports included: tests/test_import_graph.py). ``options`` go to the driver (``principal``,
    ``secret``, ``verify``, ``ca_bundle``, ``scheme``). ``MesosError``
    when the master refuses the subscription (the framework is as it was)
    or nothing subscribed within ``timeout`` s."""
    if not (framework_info.get("id") or {}).get("value"):
        raise ValueError("a framework to tear down has an id")
    subscriber = _Subscriber()
    driver = driver_class(subscriber, framework_info, master, connect_timeout=timeout,
                          refused_timeout=min(timeout, 5.0), **options)
    driver.start()
    try:
        _wait_subscribed(subscriber, driver, timeout)
        _wait_ended(subscriber, set(wait_for), wait)
        driver.stop()    # TEARDOWN
    finally:
        driver.abort()
    try:
        driver.join(timeout=15)
    except MesosError as exc:     # stopped after the teardown: nothing to report
        logger.debug("the driver ended with %r", exc)


def _wait_subscribed(subscriber: _Subscriber, driver: Any,
                     timeout: float) -> None:
    deadline = time.monotonic() + timeout + 5.0   # the driver's own deadline comes first
    while True:
        try:
            event = subscriber.events.get(timeout=max(0.05, deadline - time.monotonic()))
        except queue.Empty:
            raise MesosConnectionError("could not subscribe to the Mesos master within %.0f s"
                                       % timeout) from None
        if event[0] == "subscribed":
            return
        if event[0] == "error":
            raise driver.exception or MesosError(event[1])


def _wait_ended(subscriber: _Subscriber, waiting: "set[str]", wait: float) -> None:
    deadline = time.monotonic() + wait
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            logger.info("%s did not end within %.0f s", ", ".join(sorted(waiting)), wait)
            return
        try:
            event = subscriber.events.get(timeout=left)
        except queue.Empty:
            continue
        if event[0] == "update" and event[2] in TERMINAL_STATES:
            waiting.discard(event[1])
        elif event[0] == "error":
            raise MesosError(event[1])


__all__ = ["teardown_as_scheduler"]
