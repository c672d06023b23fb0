"""What a subscription (``subscription.Subscription``, or the mock
transport's stream) puts on its driver's queue, in order: an event the
master sent (``Received``), the stream lost (``StreamLost``: it
re-subscribes), or an end that re-subscribing cannot mend (``Fatal``). The
driver's dispatcher thread calls the scheduler's callbacks from there."""

import dataclasses
from typing import Any

from ..exceptions import MesosError
from ..field_methods import FrozenFieldMethods


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Received(FrozenFieldMethods):
    """An event the master sent (``kind`` is its ``type``)."""

    kind: str
    event: Any


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class StreamLost(FrozenFieldMethods):
    """The subscription is gone; the stream thread re-subscribes."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Fatal(FrozenFieldMethods):
    """Reconnecting cannot help: ``error`` (a ``MesosError``) stops the driver."""

    error: MesosError


__all__ = ["Fatal", "Received", "StreamLost"]
