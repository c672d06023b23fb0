"""``tfmesos.run`` called from a thread other than the main one: at the
program's exit, such a run still going is cancelled (``CANCELLED_AT_EXIT``)
and waited for, as ``tfmesos.submit``'s runs (``function_submit.cancel_live``)
and open ``cluster()`` blocks are. A daemon thread is cut off as the
interpreter ends: its run's record said "running" for good, its tasks were
ended only by the master's watchdog, its cgroups stayed until another master
started."""

import atexit
import contextlib
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Optional

from .function_output import say

if TYPE_CHECKING:
    from .run_cancel import Cancel

_lock = threading.Lock()
_going: "dict[Cancel, tuple[str, threading.Event]]" = {}   # cancel -> (what, ended)
_hooked = False
_exiting = False   # cancel_going began: the program is ending


def _forked() -> None:   # a forked child's exit cancels none of its parent's runs
    _going.clear()


os.register_at_fork(after_in_child=_forked)


@contextlib.contextmanager
def cancelled_at_exit(what: str) -> "Iterator[Optional[Cancel]]":
    """The ``Cancel`` of a run ``what`` (``tfmesos.run(fn)``) made in this
    thread, which the program's exit asks; None in the main thread, whose
    run has ended by the time the program exits."""
    if threading.current_thread() is threading.main_thread():
        yield None
        return
    from .run_cancel import Cancel
    global _hooked
    cancel, ended = Cancel(), threading.Event()
    with _lock:
        _going[cancel] = ("%s in thread %s" % (what, threading.current_thread().name), ended)
        if not _hooked:
            _hooked = True
            atexit.register(cancel_going)
    try:
        yield cancel
    except BaseException:
        with _lock:
            _going.pop(cancel, None)
            exiting = _exiting
        ended.set()
        if exiting:
            # Only daemon threads run at exit (non-daemon ones were joined
            # first): this one is parked until the interpreter ends, not
            # handed a cancellation its code never asked for (printed half,
            # "Exception in thread ...", as the interpreter ends).
            threading.Event().wait()
        raise
    else:
        with _lock:
            _going.pop(cancel, None)
        ended.set()


def cancel_going() -> None:
    """At exit: cancel every run still going in a thread, then wait until
    each has stopped its tasks and written its record."""
    from .run_cancel import CANCELLED_AT_EXIT
    global _exiting
    with _lock:
        _exiting = True
        going = list(_going.items())
    for cancel, (what, _) in going:
        if cancel.ask(CANCELLED_AT_EXIT):
            say("the program ends: cancelling %s" % what)
    for _, (_, ended) in going:
        ended.wait()


__all__ = ["cancelled_at_exit", "cancel_going"]
