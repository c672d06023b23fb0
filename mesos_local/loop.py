"""The local master's loop thread: it runs timers (status update retries,
failover timeouts, max completion times) when due and allocation rounds
when asked for or every ``allocation_interval``.

The loop holds the master's lock only to pick what is due; each timer
callback and each allocation round takes the lock itself.
"""

import heapq
import itertools
import logging
import threading
import time

log = logging.getLogger(__name__)


class Timers:
    """A heap of (deadline, callback, args); the loop runs what is due."""

    def __init__(self):
        self._heap = []
        self._counter = itertools.count()

    def add(self, deadline, callback, args):
        heapq.heappush(self._heap, (deadline, next(self._counter), callback, args))

    def next_deadline(self):
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now):
        due = []
        while self._heap and self._heap[0][0] <= now:
            _, _, callback, args = heapq.heappop(self._heap)
            due.append((callback, args))
        return due

    def clear(self):
        self._heap.clear()


class MasterLoop:
    """The thread behind ``records.cond``: runs until the master stops
    running. ``allocator`` gives ``due(now)``, ``next_round`` and
    ``allocate()``."""

    def __init__(self, records, allocator):
        self.records = records
        self.allocator = allocator
        self.timers = Timers()
        self._thread = None

    def start(self):
        thread = threading.Thread(target=self._run, daemon=True, name="local-master-loop")
        thread.start()   # RuntimeError where no thread is to be had: none to join then
        self._thread = thread

    def join(self, timeout):
        if self._thread is not None:
            self._thread.join(timeout)

    def schedule(self, delay, callback, *args):
        """Run ``callback(*args)`` on the loop thread in ``delay`` seconds.
        Call with the lock held."""
        self.timers.add(time.monotonic() + delay, callback, args)
        self.records.cond.notify_all()

    def _run(self):
        records, allocator = self.records, self.allocator
        while True:
            with records.lock:
                if not records.running:
                    return
                now = time.monotonic()
                due = self.timers.pop_due(now)
                allocate = allocator.due(now)
                if not due and not allocate:
                    wake = allocator.next_round
                    deadline = self.timers.next_deadline()
                    if deadline is not None:
                        wake = min(wake, deadline)
                    records.cond.wait(max(0.0, wake - now))
                    continue
            for callback, args in due:
                try:
                    callback(*args)
                except Exception:
                    log.exception("local master timer %s failed", callback.__name__)
            if allocate:
                try:
                    allocator.allocate()
                except Exception:
                    log.exception("local master allocation failed")
