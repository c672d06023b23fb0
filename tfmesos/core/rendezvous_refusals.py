"""The refused connections of a rendezvous, said so that no flood of them
floods the run's output (a local user without the key, connecting in a
loop, put a line a connection into it: 2000 in 14 s): ``RefusalLog``, the
shared ``tfmesos.refusal_log.RefusalLog`` in the rendezvous' words
("refused a rendezvous connection from ...") and logger."""

import logging
import time
from collections.abc import Callable
from typing import Optional

from .. import refusal_log
from ..refusal_log import FIRST_REFUSALS, REFUSALS_PERIOD

logger = logging.getLogger("tfmesos.core.rendezvous")   # the rendezvous' own lines


class RefusalLog(refusal_log.RefusalLog):
    """Where refused rendezvous connections are said: the first ``first``
    each in a line, then at most one line a ``period`` (seconds of
    ``clock``) counting those since, with the latest; after a ``period``
    without any, the next are said each again."""

    def __init__(self, first: int = FIRST_REFUSALS, period: float = REFUSALS_PERIOD,
                 clock: Callable[[], float] = time.monotonic,
                 log: Optional[Callable[[str], None]] = None) -> None:
        super().__init__("rendezvous connection", first, period, clock, log, logger)


__all__ = ["RefusalLog", "FIRST_REFUSALS", "REFUSALS_PERIOD"]
