"""What a master's answer to SUBSCRIBE says before its stream
(``Subscription``, subscription.py): a refusal, worded for the user and
fatal where subscribing again cannot help (``refusal``); a 200 that is no
Mesos event stream (``check_stream``); the heartbeat interval its
SUBSCRIBED event gives (``heartbeat_interval``)."""

import http.client
import math
from typing import Any, Optional

from ..exceptions import MesosCallError, MesosError
from ..terminal_text import MAX_QUOTED, SHOWN_AT_MOST, printable, quoted
from .http_transport import basic_principal

# SUBSCRIBE answers that re-subscribing cannot fix (bad call, credentials).
FATAL_STATUSES = (400, 401, 403, 404, 415)
# What a SUBSCRIBE stream may come as: the JSON asked for, or protobuf.
STREAM_TYPES = ("application/json", "application/x-protobuf")


class Unrecoverable(Exception):
    """Stop the driver: reconnecting cannot help."""

    def __init__(self, error: MesosError) -> None:
        super().__init__(str(error))
        self.error = error


def refusal(url: str, response: http.client.HTTPResponse, auth: Optional[str]) -> Exception:
    """What to raise for a SUBSCRIBE answered with another status than
    200 (its body read, quoted in one line): a ``MesosCallError``, wrapped
    in ``Unrecoverable`` for the ``FATAL_STATUSES``."""
    text = quoted(response.read(SHOWN_AT_MOST * MAX_QUOTED))   # what a message quotes of it
    principal = basic_principal(auth)
    if response.status == 401 and principal is None:
        # A Mesos master's 401 says nothing more (libprocess' Unauthorized).
        message = ("the Mesos master at %s wants credentials: set MESOS_PRINCIPAL and "
                   "MESOS_SECRET" % url)
    elif response.status == 401:
        message = ("the Mesos master at %s refused the credentials of principal %r: check "
                   "MESOS_PRINCIPAL and MESOS_SECRET" % (url, principal))
    else:
        message = ("Mesos master at %s refused SUBSCRIBE: HTTP %d %s"
                   % (url, response.status, text))
    error = MesosCallError(message, status=response.status)
    return Unrecoverable(error) if response.status in FATAL_STATUSES else error


def check_stream(url: str, response: http.client.HTTPResponse) -> None:
    """A 200 to SUBSCRIBE is Mesos' event stream in the encoding asked
    for (``Accept: application/json``; src/master/http.cpp answers in
    it, with its Mesos-Stream-Id): any other answer (a web page, a
    proxy) is no master, said at once (``Unrecoverable``) rather than
    retried as a stream the master closed."""
    kind = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
    if kind in STREAM_TYPES:
        return
    text = quoted(response.read(SHOWN_AT_MOST * MAX_QUOTED))
    raise Unrecoverable(MesosError(
        "%s answered SUBSCRIBE with 200 %s, not the event stream of a Mesos master: is it "
        "one? (MESOS_MASTER, -m) %s" % (url, printable(kind or "with no Content-Type"), text)))


def heartbeat_interval(value: Any, default: float = 15.0, most: float = 86400.0) -> float:
    """The master's heartbeat interval in seconds: a finite one above 0
    (at most a day), else Mesos' ``default`` (a master that sends NaN, 0
    or text must not make the stream's timeout wrong)."""
    try:
        interval = float(value)
    except (TypeError, ValueError):
        return default
    return min(interval, most) if math.isfinite(interval) and interval > 0 else default


__all__ = ["FATAL_STATUSES", "STREAM_TYPES", "Unrecoverable", "refusal", "check_stream",
           "heartbeat_interval"]
