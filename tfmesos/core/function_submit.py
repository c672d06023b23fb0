"""``tfmesos.submit(fn, *args, ...)``: ``tfmesos.run`` without waiting for
it. The call is checked and its function packed by ``submit`` itself
(what cannot start is raised there, as by ``run``); the run goes on in a
thread of its own, and ``submit`` returns its ``RunFuture``, a
``concurrent.futures.Future``: ``result(timeout)`` (the ``RunResult``, or
the run's error raised), ``exception()``, ``done()``, ``cancel()``,
``add_done_callback``; ``concurrent.futures.wait`` and ``as_completed``
take it.

Unlike an executor's future, a running one can be cancelled: ``cancel()``
fails the run (``function_run.Cancel``), which kills its tasks and tears
its framework down, as after any failure, and returns once that is done;
``result()`` then raises ``CancelledError``. The future stays pending, for
``concurrent.futures``, until the run's outcome is known: it is set then,
by the run's thread, or by ``cancel()`` once that thread ended (so the
state moves only as ``Future``'s public methods move it:
Lib/concurrent/futures/_base.py).

No signal handler is installed (run() has none either: a Ctrl-C in the
caller's main thread interrupts its ``result()``, not the run). The run's
thread is a daemon; a run still going when the program ends is cancelled
then (an ``atexit`` hook, registered at the first submit), so that nothing
of it is left running; not when a process forked from the caller ends:
the run is the caller's.
"""

import atexit
import concurrent.futures
import logging
import os
import threading
from typing import Any, Callable, Optional

from ..exceptions import TFMesosError
from .function_options import Ship, in_keywords
from .function_output import say
from .function_run import FunctionCall
from .run_cancel import CANCELLED, CANCELLED_AT_EXIT, Cancel
from .run_result import RunResult

_live: "set[RunFuture]" = set()   # the runs going on: cancelled at exit
_working: "set[threading.Thread]" = set()   # their threads, until the callbacks ran: joined at exit
_live_lock = threading.Lock()
_hooked = False
_exiting = False   # cancel_live began: the program ends, no run starts


def _forked() -> None:
    """In a forked child, the runs going on are its parent's: none of them
    is cancelled, nor its thread waited for, at the child's exit."""
    global _live_lock
    _live_lock = threading.Lock()   # perhaps held by another thread at the fork
    _live.clear()
    _working.clear()


os.register_at_fork(after_in_child=_forked)


class RunFuture(concurrent.futures.Future):
    """The future of one ``tfmesos.submit``: see the module."""

    def __init__(self, call: FunctionCall, ship: Ship, name: str) -> None:
        super().__init__()
        self._call = call
        self._ship = ship
        self._cancel = Cancel()
        self._cancelling = threading.Lock()
        self._notified = False
        self._thread = threading.Thread(target=self._work, name="tfmesos.submit(%s)" % name,
                                        daemon=True)
        self._owner = os.getpid()   # a forked child's copy neither cancels nor waits

    def _foreign(self) -> Optional[RuntimeError]:
        """Why this process (a forked child) cannot wait for the run, or None."""
        if os.getpid() == self._owner or self.done():
            return None
        return RuntimeError("the run of %s belongs to process %d, which started it: a forked "
                            "child cannot wait for it" % (self._thread.name, self._owner))

    def result(self, timeout: Optional[float] = None) -> RunResult:
        foreign = self._foreign()
        if foreign is not None:
            raise foreign
        return super().result(timeout)

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        foreign = self._foreign()
        if foreign is not None:
            raise foreign
        return super().exception(timeout)

    def _start(self) -> bool:
        """Start its run; False once the program ends (``cancel_live``)."""
        with _live_lock:
            if _exiting:
                return False
            _live.add(self)
            _working.add(self._thread)
        try:
            self._thread.start()
        except BaseException:   # no thread to be had (ulimit -u reached): no run goes on,
            with _live_lock:    # none to cancel, nor a thread to join, at exit
                _live.discard(self)
                _working.discard(self._thread)
            raise
        return True

    def _work(self) -> None:
        try:
            self._run()
        finally:
            with _live_lock:
                _working.discard(self._thread)

    def _run(self) -> None:
        outcome: Optional[RunResult] = None
        error: Optional[BaseException] = None
        try:
            outcome = self._call.execute(self._cancel)
        except BaseException as exc:
            error = in_keywords(exc, self._ship) if isinstance(exc, TFMesosError) else exc
        finally:
            with _live_lock:
                _live.discard(self)
        if self._cancel.end():
            return   # cancel() sets the future, once this thread has ended
        if self.set_running_or_notify_cancel():   # pending until now: see the module
            if error is None:
                self.set_result(outcome)
            else:
                self.set_exception(error)

    def running(self) -> bool:
        """True while the run goes on (from the submit to its outcome)."""
        return not self.done()

    def cancel(self) -> bool:
        """Cancel the run: kill its tasks, tear its framework down, and
        return True once that is done; ``result()`` raises
        ``CancelledError`` from then on. False when its outcome came first
        (``result()`` gives it), or in a forked child (the run is its parent's)."""
        if os.getpid() != self._owner:
            return False
        return self._cancel_for(CANCELLED)

    def _cancel_for(self, why: str) -> bool:
        if self.done():
            return self.cancelled()
        if not self._cancel.ask(why):
            return False
        if threading.current_thread() is not self._thread:
            self._thread.join()
        with self._cancelling:
            super().cancel()   # pending -> cancelled: result() raises, callbacks run
            if not self._notified:
                self._notified = True
                self.set_running_or_notify_cancel()   # tells concurrent.futures.wait()
        return True

    def __repr__(self) -> str:
        if self.cancelled():
            state = "cancelled"
        elif not self.done():
            state = "running"
        elif self.exception() is not None:
            state = "raised %s" % type(self.exception()).__name__
        else:
            state = "finished: %r" % (self.result(),)
        return "<RunFuture %s %s>" % (self._thread.name, state)


def submit(fn: Callable[..., Any], *args: Any, workers: int = 2, ps: int = 0,
           chief: bool = False, evaluator: bool = False, ship: Ship = ".",
           **options: Any) -> RunFuture:
    """Start ``tfmesos.run(fn, *args, ...)`` (the same arguments and
    options) and return its ``RunFuture`` at once: a
    ``concurrent.futures.Future`` whose ``result(timeout=None)`` is the
    ``RunResult`` (or raises the run's error, as ``run`` would:
    ``RemoteTaskError``, also of the remote exception's type, ...;
    ``TimeoutError`` when ``timeout`` passes first), and whose ``cancel()``
    stops a running run (its tasks killed, its framework torn down) before
    it returns True; ``result()`` then raises
    ``concurrent.futures.CancelledError``.

    What cannot start is raised by ``submit`` itself: a TypeError for an
    unknown option, a ``SpecError`` (a ``ValueError``) for a bad value, a
    function that does not pickle. A run still going when the program
    ends is cancelled then. Runs submitted together run at once, each its
    own framework (on the embedded master, each its own master).
    """
    try:
        call = FunctionCall.make("tfmesos.submit", fn, args, workers, ps, chief, evaluator, ship,
                                 options)
    except TFMesosError as exc:
        worded = in_keywords(exc, ship)
        if worded is exc:
            raise
        raise worded from None   # the caller's mistake: raised by the call
    future = RunFuture(call, ship, str(getattr(fn, "__qualname__", None) or type(fn).__name__))
    _hook_exit()
    try:
        started = future._start()
    except BaseException:   # its thread refused: its payload goes, the error is the caller's
        call.discard()
        raise
    if not started:
        call.discard()
        # As concurrent.futures' executors refuse work once the interpreter shuts down.
        raise RuntimeError("tfmesos.submit: the program is ending: no new run starts")
    return future


def _hook_exit() -> None:
    global _hooked
    with _live_lock:
        if _hooked:
            return
        _hooked = True
    atexit.register(cancel_live)


def _cancel_in_turn(futures: "list[RunFuture]") -> None:
    """Cancel ``futures`` one after another on this thread, every one of
    them before any done-callback runs: a callback waiting on another run
    (its ``result()``) finds it cancelled, not waiting for its turn."""
    held = []
    for future in futures:
        with future._condition:   # concurrent.futures.Future's: add_done_callback's lock
            callbacks, future._done_callbacks = future._done_callbacks, []  # type: ignore[attr-defined]
        future._cancel_for(CANCELLED_AT_EXIT)
        held.append((future, callbacks))
    for future, callbacks in held:
        for callback in callbacks:
            try:
                callback(future)
            except Exception:   # as concurrent.futures says a callback's error
                logging.getLogger("concurrent.futures").exception(
                    "exception calling callback for %r", future)


def cancel_live() -> None:
    """Cancel every run still going (at exit): nothing of them is left.
    Every run is told at once, and each future is cancelled in a thread of
    its own (its done-callbacks run there): a callback that waits on
    another run (its ``result()``) finds it cancelled too, and no new run
    starts (``submit`` refuses). Then wait for the runs' threads, as
    ``concurrent.futures``' executors wait for their workers: a
    done-callback runs on its run's thread, after ``result()`` returned to
    the program, and was cut off as the program exited (a daemon thread)."""
    global _exiting
    with _live_lock:
        _exiting = True
        going = [future for future in _live if not future.done()]
    for future in going:
        say("the program ends: cancelling %s" % future._thread.name)
        future._cancel.ask(CANCELLED_AT_EXIT)
    cancelling, in_turn = [], []
    for future in going:
        thread = threading.Thread(target=future._cancel_for, args=(CANCELLED_AT_EXIT,),
                                  name="cancel %s" % future._thread.name)
        try:
            thread.start()
        except RuntimeError:   # Python 3.12.0-3.12.1: "can't create new thread at
            in_turn.append(future)   # interpreter shutdown": here, in turn
        else:
            cancelling.append(thread)
    _cancel_in_turn(in_turn)
    for thread in cancelling:
        thread.join()
    with _live_lock:
        working = list(_working)
    for thread in working:
        if thread is not threading.current_thread():
            thread.join()


__all__ = ["RunFuture", "submit", "cancel_live"]
