"""Refusals of a server said so that no flood of them floods the run's
output: ``RefusalLog``. A peer without the key or token, connecting in a
loop, put a line a connection into it (the rendezvous: 2000 in 14 s; the
bundle server: a 404 each). Used by the rendezvous
(``tfmesos.core.rendezvous_refusals``) and the bundle server
(``tfmesos.ship.bundle_server``), each with its own words and logger."""

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Optional

FIRST_REFUSALS = 5              # refusals said each (RefusalLog)
REFUSALS_PERIOD = 60.0          # seconds: at most one line counting the others


class RefusalLog:
    """Where refusals are said: the first ``first`` each in a line
    ("refused a NOUN from PEER: WHY"), then at most one line a ``period``
    (seconds of ``clock``) counting those since, with the latest; after a
    ``period`` without any, the next are said each again. ``log`` says a
    line (default: a warning of ``logger``); ``prefix`` starts each line."""

    def __init__(self, noun: str, first: int = FIRST_REFUSALS,
                 period: float = REFUSALS_PERIOD, clock: Callable[[], float] = time.monotonic,
                 log: Optional[Callable[[str], None]] = None,
                 logger: Optional[logging.Logger] = None, prefix: str = "") -> None:
        self._noun, self._prefix = noun, prefix
        self._first, self._period, self._clock = first, period, clock
        said_by = logger or logging.getLogger(__name__)
        self._log = log or (lambda line: said_by.warning("%s", line))
        self._lock = threading.Lock()
        self._said = 0           # said each since the last quiet period
        self._held = 0           # counted, not said yet
        self._latest = ""
        self._since = 0.0        # when the count began
        self._last = -math.inf   # when the latest refusal came

    def refused(self, peer: str, why: object) -> None:
        line = "%srefused a %s from %s: %s" % (self._prefix, self._noun, peer, why)
        with self._lock:
            now = self._clock()
            if now - self._last >= self._period and not self._held:
                self._said = 0
            self._last = now
            if self._said < self._first:
                self._said += 1
                if self._said == self._first:
                    self._since = now
                    line += " (more are counted, said at most once in %.0f s)" % self._period
                said: Optional[str] = line
            else:
                self._held += 1
                self._latest = "from %s: %s" % (peer, why)
                said = self._count(now)
        if said:
            self._log(said)

    def flush(self, final: bool = False) -> None:
        """Say the count, if there is one and a period has passed since the
        last (``final``: at once, the server closes)."""
        with self._lock:
            said = self._count(self._clock(), final)
        if said:
            self._log(said)

    def _count(self, now: float, final: bool = False) -> Optional[str]:
        if not self._held or (now - self._since < self._period and not final):
            return None
        line = "%srefused %d more %s%s in the last %.0f s (the latest %s)" % (
            self._prefix, self._held, self._noun, "" if self._held == 1 else "s",
            now - self._since, self._latest)
        self._held, self._since = 0, now
        return line


__all__ = ["RefusalLog", "FIRST_REFUSALS", "REFUSALS_PERIOD"]
