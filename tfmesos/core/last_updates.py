"""What the run records while it stops: the events still queued, and Mesos'
terminal updates of tasks whose exit frames came first, waited for a little
before the framework is torn down (after the teardown Mesos sends none), so
that run.json keeps Mesos' state, reason and message (an OOM kill's
``REASON_CONTAINER_LIMITATION_MEMORY``) rather than the exit frame's."""

import queue
import time
from typing import TYPE_CHECKING, Callable, Optional

from ..record.usage_table import clean_usage
from .events import StatusUpdate, TaskExited, TaskMetrics, TaskOutput

if TYPE_CHECKING:
    from ..record.run_record import RunRecord

# ``show(task_id, stream, text)``: the output that came late, shown as the
# run showed its output (tfrun's console, cluster()'s on_log): a task's last
# lines can come after Mesos said it finished, once the run is stopping.
Show = Optional[Callable[[str, str, str], None]]

# Seconds the stop waits at most for those updates. Mesos sends them within
# milliseconds of a task's end on an idle agent; on a loaded one (the
# isolator's OOM poll, the executor's update waiting for the CPU) 2 s was
# seen to fall short. The wait ends as soon as every update came: this
# bound costs time only when the master has gone silent.
MESOS_ENDS_WAIT = 5.0


def record_event(record: "RunRecord", event: object, show: Show = None) -> None:
    """Record ``event`` (a ``core.events`` object) without acting on it:
    output (and ``show`` it), metrics, exit frames (with what the tasks
    used), Mesos' updates."""
    if isinstance(event, TaskOutput):
        record.output(event.task_id, event.stream, event.text)
        if show is not None:
            show(event.task_id, event.stream, event.text)
    elif isinstance(event, TaskExited):
        record.exited(event.task_id, event.code, event.at, clean_usage(event.usage),
                      event.stopped)
    elif isinstance(event, StatusUpdate):
        record.status(event.status)
    elif isinstance(event, TaskMetrics):
        record.metrics(event.task_id, event.points, event.dropped, event.source)


def wait_for_mesos_ends(record: "RunRecord", events: "queue.SimpleQueue[object]",
                        timeout: float = MESOS_ENDS_WAIT,
                        clock: Callable[[], float] = time.monotonic, show: Show = None) -> None:
    """Record what is queued on ``events``, then what comes until no attempt
    of ``record`` awaits Mesos' terminal update after its exit frame, for
    ``timeout`` s at most."""
    deadline = clock() + timeout
    while True:
        try:
            event = events.get_nowait()
        except queue.Empty:
            remaining = deadline - clock()
            if remaining <= 0 or not record.awaiting_mesos():
                return
            try:
                event = events.get(timeout=remaining)
            except queue.Empty:
                return
        record_event(record, event, show)


def record_leftovers(record: "RunRecord", events: "queue.SimpleQueue[object]",
                     show: Show = None) -> None:
    """What is still queued when the run stops is recorded too: output
    (shown), exit frames (with what the stopped tasks used), Mesos' updates."""
    while True:
        try:
            event = events.get_nowait()
        except queue.Empty:
            return
        record_event(record, event, show)
