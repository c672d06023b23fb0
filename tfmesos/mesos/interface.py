"""The scheduler callback interface, as pymesos and libmesos users know it.

Subclass ``Scheduler`` and override the callbacks you need; the driver calls
them on its single dispatcher thread, one at a time, in the order the master
sent the events. Every argument that came from the master is an
``addict.Dict`` (``offer.resources``, ``update.state``). An exception raised
by a callback stops the driver and is re-raised by ``join()`` / ``run()``.
The ``driver`` each callback gets is a ``SchedulerDriver``: what a
scheduler may ask of it (mypy checks ``driver.MesosSchedulerDriver``
against it where the driver calls back).
"""

import base64
import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, Protocol, Union

from addict import Dict

from .calls import Ids, Json


class SchedulerDriver(Protocol):
    """The driver as its scheduler's callbacks see it (``driver.
    MesosSchedulerDriver``; pymesos' ``SchedulerDriver``): the calls map one
    to one onto Mesos Calls and raise ``MesosError`` when refused."""

    @property
    def framework_id(self) -> Optional[str]:
        """The framework's id once subscribed, else None."""

    @property
    def master(self) -> Optional[str]:
        """Base URL of the master subscribed to (or None)."""

    @property
    def connected(self) -> bool:
        """Whether the subscription is up."""

    def stop(self, failover: bool = False) -> str:
        """Stop; without ``failover`` the framework is torn down."""

    def abort(self) -> str:
        """Stop calling back, without tearing the framework down."""

    def launchTasks(self, offer_ids: Ids, tasks: Iterable[Json],
                    filters: Optional[Json] = None) -> None:
        """ACCEPT with one LAUNCH of ``tasks``."""

    def acceptOffers(self, offer_ids: Ids, operations: Iterable[Json],
                     filters: Optional[Json] = None) -> None:
        """ACCEPT with ``operations``."""

    def declineOffer(self, offer_ids: Ids, filters: Optional[Json] = None) -> None:
        """DECLINE."""

    def reviveOffers(self, roles: Sequence[str] = ()) -> None:
        """REVIVE (every role of the framework by default)."""

    def suppressOffers(self, roles: Sequence[str] = ()) -> None:
        """SUPPRESS (every role of the framework by default)."""

    def killTask(self, task_id: Json, agent_id: Optional[Json] = None) -> None:
        """KILL."""

    def acknowledgeStatusUpdate(self, status: Json) -> None:
        """ACKNOWLEDGE (nothing for an update without a uuid)."""

    def reconcileTasks(self, tasks: Iterable[Json]) -> None:
        """RECONCILE (none: every task of the framework)."""

    def updateFramework(self, framework_info: Mapping[str, Any]) -> None:
        """UPDATE_FRAMEWORK."""

    def sendFrameworkMessage(self, executor_id: Json, agent_id: Json,
                             data: Union[str, bytes]) -> None:
        """MESSAGE."""


class Scheduler:
    def registered(self, driver: SchedulerDriver, framework_id: Dict,
                   master_info: Dict) -> None:
        """The first SUBSCRIBED of this driver. ``framework_id`` is
        ``{"value": ...}``; ``master_info`` the leading master's MasterInfo."""

    def reregistered(self, driver: SchedulerDriver, master_info: Dict) -> None:
        """SUBSCRIBED again after a disconnection, with the same framework id:
        the framework's tasks were kept."""

    def disconnected(self, driver: SchedulerDriver) -> None:
        """The subscription stream was lost (closed, broken, or silent for
        several heartbeat intervals). The driver re-subscribes by itself."""

    def resourceOffers(self, driver: SchedulerDriver, offers: list[Dict]) -> None:
        """New offers (a list of Offer). Accept them with ``launchTasks`` /
        ``acceptOffers`` or give them back with ``declineOffer``."""

    def inverseOffers(self, driver: SchedulerDriver, offers: list[Dict]) -> None:
        """Inverse offers (maintenance): resources the operator wants back."""

    def offerRescinded(self, driver: SchedulerDriver, offer_id: Dict) -> None:
        """An offer is no longer valid; launching on it would fail."""

    def statusUpdate(self, driver: SchedulerDriver, update: Dict) -> None:
        """A TaskStatus. With implicit acknowledgements (the default) the
        driver acknowledges it after this callback returns."""

    def frameworkMessage(self, driver: SchedulerDriver, executor_id: Dict,
                         agent_id: Dict, message: bytes) -> None:
        """A message (bytes) from an executor of this framework."""

    def slaveLost(self, driver: SchedulerDriver, agent_id: Dict) -> None:
        """An agent was removed; its tasks are lost or gone."""

    def executorLost(self, driver: SchedulerDriver, executor_id: Dict, agent_id: Dict,
                     status: Any) -> None:
        """An executor ended; ``status`` is its exit status."""

    def error(self, driver: SchedulerDriver, message: str) -> None:
        """The master reported an unrecoverable error (or no master could be
        reached); the driver stops after this callback. ``FAILED_OVER`` in
        ``message``: another scheduler subscribed as this framework;
        ``REMOVED``: the master removed the framework (a teardown) while
        this scheduler was away."""


# Mesos' error to a scheduler that another SUBSCRIBE with its framework's id
# replaced (``Master::failoverFramework``, src/master/master.cpp).
FAILED_OVER = "Framework failed over"
# Mesos' answer (400) to a call with a stream that is no longer the
# framework's: another SUBSCRIBE of it took over (src/master/http.cpp).
STREAM_MISMATCH = "didn't match the stream ID currently associated with framework"
# Mesos' error to a SUBSCRIBE with the id of a framework it removed (torn
# down, or not failed over in time: ``validateFramework``, src/master/master.cpp).
REMOVED = "Framework has been removed"


CALLBACKS = ("registered", "reregistered", "disconnected", "resourceOffers",
             "inverseOffers", "offerRescinded", "statusUpdate", "frameworkMessage",
             "slaveLost", "executorLost", "error")

# Positional arguments after ``driver`` of every callback, for the contract check.
_CALLBACK_ARITY = {
    "registered": 2, "reregistered": 1, "disconnected": 0, "resourceOffers": 1,
    "inverseOffers": 1, "offerRescinded": 1, "statusUpdate": 1,
    "frameworkMessage": 3, "slaveLost": 1, "executorLost": 3, "error": 1,
}


def check_scheduler(scheduler: object) -> None:
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


def dispatch_event(scheduler: Scheduler, driver: SchedulerDriver, kind: str, event: Dict,
                   again: bool = False) -> bool:
    """Call ``scheduler``'s callback for the Mesos event ``event`` of type
    ``kind``; ``again``: a SUBSCRIBED after the first (``reregistered``).
    False when no callback takes this kind of event."""
    if kind == "SUBSCRIBED":
        master_info = event.get("master_info") or Dict()
        if again:
            scheduler.reregistered(driver, master_info)
        else:
            scheduler.registered(driver, event.framework_id, master_info)
    elif kind == "OFFERS":
        offers = event["offers"]
        if offers.get("offers"):
            scheduler.resourceOffers(driver, offers["offers"])
        if offers.get("inverse_offers"):
            scheduler.inverseOffers(driver, offers["inverse_offers"])
    elif kind == "INVERSE_OFFERS":
        scheduler.inverseOffers(driver, event["inverse_offers"]["inverse_offers"])
    elif kind == "RESCIND":
        scheduler.offerRescinded(driver, event["rescind"]["offer_id"])
    elif kind == "UPDATE":
        scheduler.statusUpdate(driver, event["update"]["status"])
    elif kind == "MESSAGE":
        message = event["message"]
        scheduler.frameworkMessage(driver, message["executor_id"], message["agent_id"],
                                   base64.b64decode(message.get("data", "")))
    elif kind == "FAILURE":
        failure = event["failure"]
        if "executor_id" in failure:
            scheduler.executorLost(driver, failure["executor_id"], failure["agent_id"],
                                   failure.get("status"))
        else:
            scheduler.slaveLost(driver, failure["agent_id"])
    else:
        return False
    return True
