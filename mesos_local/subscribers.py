"""The operator API's event stream: its subscribers, as Mesos' master keeps
them (``Master::Subscribers``, src/master/master.hpp and master.cpp;
docs/operator-http-api.md, "Events").

A ``SUBSCRIBE`` call to ``/api/v1`` gets a ``Subscription``
(``api/stream.py``, the same streams the scheduler API serves) that starts
with ``SUBSCRIBED`` (the whole state as ``GET_STATE``, and
``heartbeat_interval_seconds``) and a ``HEARTBEAT`` (``ReadOnlyHandler::
subscribe``, src/master/readonly_handler.cpp), then carries every event
``send`` is given, and a ``HEARTBEAT`` every ``heartbeat_interval``
seconds (Mesos: ``DEFAULT_HEARTBEAT_INTERVAL``, 15 s, src/master/constants.hpp).

Bounds: at most ``max_subscribers`` streams (Mesos' flag
``--max_operator_event_stream_subscribers``, default 1000: a new one closes
the oldest, as its ``BoundedHashMap`` drops it, ``Master::subscribe``); and,
which Mesos does not bound, at most ``buffer_bytes`` of events waiting for
any one subscriber: one that reads too slowly is dropped (its connection
shut down, its queue freed) and the others go on.

Everything runs with the master's lock held; ``send`` takes the event or a
function that builds it, called only when someone is subscribed (as
Mesos' master builds events only ``if (!subscribers.subscribed.empty())``).
"""

import collections
import logging

from .api.stream import HEARTBEAT, Subscription, frame

log = logging.getLogger(__name__)

DEFAULT_MAX_SUBSCRIBERS = 1000           # DEFAULT_MAX_OPERATOR_EVENT_STREAM_SUBSCRIBERS
DEFAULT_BUFFER_BYTES = 16 * 1024 * 1024  # the local master's own bound, per subscriber


class Subscribers:
    def __init__(self, heartbeat_interval=15.0, max_subscribers=DEFAULT_MAX_SUBSCRIBERS,
                 buffer_bytes=DEFAULT_BUFFER_BYTES):
        self.heartbeat_interval = heartbeat_interval
        self.max_subscribers = max_subscribers
        self.buffer_bytes = buffer_bytes
        # stream id -> Subscription, oldest first
        self.subscribed: collections.OrderedDict[str, Subscription] = collections.OrderedDict()

    def __len__(self):
        return len(self.subscribed)

    def subscribe(self, subscribed_event):
        """A new subscriber's Subscription, starting with ``subscribed_event``
        (SUBSCRIBED) and a HEARTBEAT; the oldest is closed past
        ``max_subscribers``."""
        while len(self.subscribed) >= self.max_subscribers:
            stream_id, oldest = self.subscribed.popitem(last=False)
            log.info("reached the maximum number of operator event stream subscribers (%d): "
                     "closing the oldest, %s", self.max_subscribers, stream_id)
            oldest.close()
        subscription = Subscription(None, self.heartbeat_interval,
                                    max_queued=self.buffer_bytes,
                                    first=(subscribed_event, HEARTBEAT))
        self.subscribed[subscription.stream_id] = subscription
        log.info("added operator event stream subscriber %s", subscription.stream_id)
        return subscription

    def send(self, event):
        """Send an Event (or what ``event()`` returns) to every subscriber;
        one that has fallen ``buffer_bytes`` behind is dropped."""
        if not self.subscribed:
            return
        data = frame(event() if callable(event) else event)
        for stream_id, subscription in list(self.subscribed.items()):
            if not subscription.send_frame(data) and subscription.overflowed:
                self.subscribed.pop(stream_id, None)
                log.warning("operator event stream subscriber %s dropped: more than %d bytes "
                            "of events waited for it (it reads too slowly)", stream_id,
                            self.buffer_bytes)

    def queued_bytes(self):
        """Bytes of events waiting for the subscribers, all of them together."""
        return sum(s.queued_bytes for s in self.subscribed.values())

    def ended(self, subscription: Subscription) -> None:
        """The HTTP layer reports that a subscriber's stream ended."""
        stream_id = subscription.stream_id
        if self.subscribed.get(stream_id) is subscription:
            del self.subscribed[stream_id]
            log.info("removed operator event stream subscriber %s", stream_id)

    def close_all(self):
        """The master stops: end every stream once what is queued is written."""
        for subscription in self.subscribed.values():
            subscription.close()
        self.subscribed.clear()


__all__ = ["Subscribers", "DEFAULT_MAX_SUBSCRIBERS", "DEFAULT_BUFFER_BYTES"]
