"""``tfmesos.run``'s outcomes on the scheduler side: what the tasks' result
frames carry (``task/result_file.py`` has the task's side and the frames),
assembled per task id by the rendezvous' connection threads and waited for
by the calling thread.

The bytes are kept, never unpickled here (``function_run`` does, in the
calling process). Each task's result is bounded: a header announcing more
than ``limit`` bytes, or more than the results kept leave of ``total``
(every task sends its value: the tasks keep to their shares of it, this is
the backstop), data beyond what was announced or out of order, or a
malformed frame marks the result ``broken`` (with why) and nothing more of
it is kept; other tasks and the run are not disturbed. A task whose
connection dropped while it sent its result sends it again, from a header,
once registered again (the frames before the drop are lost): a header
replaces the result so far, and a broken result is final only once the
task's exit frame came. The task keeps its result until told it came whole
(``feed``'s answer): frames the kernels held when a connection dropped are
lost even when the task noticed the drop only after it sent them all.
"""

import base64
import binascii
import itertools
import operator
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ..task.result_file import MAX_OTHER_RESULTS, MAX_RESULT

STATUSES = ("ok", "error")
DROPPED = "its connection dropped while it sent it, and it did not come again whole"


class Result:
    """One task's outcome: ``status`` ("ok" or "error"), ``error`` (what
    happened: "raised Type: message", ...), ``traceback`` (text), ``data`` (the pickle,
    possibly empty), ``size`` announced; ``complete`` once every byte came;
    ``broken``: why it cannot be used, or None."""

    def __init__(self, task_id: str, status: str, error: str, traceback: str,
                 size: int) -> None:
        self.task_id = task_id
        self.status = status
        self.error = error
        self.traceback = traceback
        self.size = size
        self.data = bytearray()
        self.broken: Optional[str] = None
        self.arrival: Optional[int] = None   # its place among the whole ones, by arrival

    @property
    def complete(self) -> bool:
        return self.broken is None and len(self.data) == self.size


class ResultInbox:
    """The results of a run's tasks, by task id; ``limit``: bytes per
    result; ``total``: of the results kept, together."""

    def __init__(self, limit: int = MAX_RESULT, total: int = MAX_RESULT + MAX_OTHER_RESULTS
                 ) -> None:
        self.limit = limit
        self.total = total
        self._results: dict[str, Result] = {}
        self._ended: dict[str, int] = {}   # task id -> its exit frame's place among the arrivals
        self._dropped: set[str] = set()    # task ids whose connection dropped since their header
        self._changed = threading.Condition()
        self._arrivals = itertools.count()

    def feed(self, task_id: str, message: Mapping[str, Any]) -> bool:
        """Take a ``result`` or ``result_data`` frame of ``task_id``; whether
        its task may stop sending it (it is told): the result is whole with
        it, or its header is refused; a header once it is whole, of a copy
        sent again, is answered too, that copy not kept."""
        with self._changed:
            kept = self._results.get(task_id)
            if kept is not None and kept.complete:
                return message.get("type") == "result"
            if message.get("type") == "result":
                self._results.pop(task_id, None)   # a header again: this one replaces it
                self._dropped.discard(task_id)
                self._results[task_id] = self._header(task_id, message)
            else:
                result = self._results.get(task_id)
                if result is None:
                    result = self._results[task_id] = Result(task_id, "error", "", "", 0)
                    result.broken = DROPPED if task_id in self._dropped else \
                        "its data came without a header"
                elif result.broken is None:
                    self._add(result, message)
                    if result.broken is not None and task_id in self._dropped:
                        result.broken = DROPPED   # frames were lost with the connection
            result = self._results[task_id]
            if result.broken is not None:
                result.data = bytearray()   # nothing of it is used, nor counted in ``total``
            if result.complete and result.arrival is None:
                result.arrival = next(self._arrivals)
            self._changed.notify_all()
            # Refused at its header (over a bound, malformed), a copy sent
            # again would be too. A data frame out of order may be a drop's
            # doing that the rendezvous has not told yet: not final.
            return result.complete or (message.get("type") == "result"
                                       and result.broken is not None)

    def _header(self, task_id: str, message: Mapping[str, Any]) -> Result:
        status, size = message.get("status"), message.get("size")
        error, text = message.get("error"), message.get("traceback")
        result = Result(task_id, status if status in STATUSES else "error",
                        error if isinstance(error, str) else "",
                        text if isinstance(text, str) else "",
                        size if isinstance(size, int) and not isinstance(size, bool) else 0)
        if status not in STATUSES or result.size != size or size < 0:
            result.broken = "its header is malformed"
        elif size > self.limit:
            result.broken = "it announced %d bytes, over the %d byte bound" % (size, self.limit)
        elif size > self.total - sum(kept.size for kept in self._results.values()
                                     if kept.broken is None):
            result.broken = "it announced %d bytes, over what the run's results kept leave of " \
                "their %d byte bound" % (size, self.total)
        return result

    @staticmethod
    def _add(result: Result, message: Mapping[str, Any]) -> None:
        offset, data = message.get("offset"), message.get("data")
        try:
            chunk = base64.b64decode(data, validate=True) if isinstance(data, str) else None
        except (binascii.Error, ValueError):
            chunk = None
        if chunk is None or offset != len(result.data):
            result.broken = "a data frame is malformed or out of order"
        elif len(result.data) + len(chunk) > result.size:
            result.broken = "more data came than the %d bytes announced" % result.size
        else:
            result.data += chunk

    def dropped(self, task_id: str) -> None:
        """``task_id``'s connection dropped: frames of its result may be lost
        (it sends the result again once registered again)."""
        with self._changed:
            self._dropped.add(task_id)

    def exited(self, task_id: str) -> None:
        """``task_id``'s exit frame came: nothing more comes from it."""
        with self._changed:
            self._ended.setdefault(task_id, next(self._arrivals))
            result = self._results.get(task_id)
            if result is not None and result.broken is None and not result.complete:
                result.broken = DROPPED if task_id in self._dropped else \
                    "its data has %d of the %d bytes announced" % (len(result.data), result.size)
                result.data = bytearray()
            self._changed.notify_all()

    def first_failure(self, task_ids: Iterable[str], before: Optional[str] = None
                      ) -> Optional[Result]:
        """Of the whole results of ``task_ids`` with status "error", the one
        that came first: a failed task's outcome comes before its exit
        closes its peers' connections (``task/outcome_channel.py``), so a
        peer's error comes after it. ``before``: only one that came before
        that task id's exit frame (None when it has not come), the cause of
        a peer that failed sending no outcome (aborted by its framework),
        not the peer error of a task that such an exit broke (an OOM kill)."""
        with self._changed:
            last = None if before is None else self._ended.get(before)
            if before is not None and last is None:
                return None
            failures = [result for result in map(self._results.get, task_ids)
                        if result is not None and result.complete
                        and result.status == "error" and result.arrival is not None
                        and (last is None or result.arrival < last)]
        return min(failures, key=operator.attrgetter("arrival"), default=None)

    def ended(self, task_id: str) -> bool:
        """Whether ``task_id``'s exit frame came."""
        with self._changed:
            return task_id in self._ended

    def wait(self, task_id: str, timeout: float) -> Optional[Result]:
        """``task_id``'s result once complete or its task ended (None: none
        came; a broken one may come again until then), waiting up to
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                result = self._results.get(task_id)
                if result is not None and result.complete:
                    return result
                if task_id in self._ended:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return result
                self._changed.wait(remaining)
