"""SIGTERM and SIGHUP as Ctrl-C, for the blocks that need it: handlers are installed
only inside a ``with`` block (never at import) and the previous ones come
back after it. Used by the commands (``tfmesos/cli/``) and the ``docker run``
wrapper.

A ``KeyboardInterrupt`` raised by a handler comes at whatever bytecode the
main thread runs. Inside ``queue.Queue.get`` (``Condition.wait`` taking its
lock back) that releases a lock the main thread does not hold: a
``RuntimeError``, or another thread's lock freed under it. So while a run
waits for its events (``interrupts_queued_on``), the signal is put on the
run's queue instead and the loop raises it between two events.

A block that must not be cut short anywhere but where it says so
(``interrupting_only_inside``: tfrun's run and its end) lets a signal
interrupt only inside its ``interruptible()`` parts and ignores it
elsewhere. Putting handlers in place is itself bytecode a signal can come
between: a ``with ignore_signals()`` in a ``finally`` is entered only after
the ``finally``'s first lines, so a Ctrl-C just then escaped as a
traceback, and the run was never stopped (CI: a second Ctrl-C as tfrun
stopped its run)."""

import contextlib
import os
import signal
import threading
from collections.abc import Iterable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Callable, Optional, Union

if TYPE_CHECKING:
    import queue

__all__ = ["INTERRUPTING", "interrupt_on_signals", "ignore_signals", "interrupts_queued_on",
           "interrupting_only_inside", "interruptible", "deferring_signals", "interrupted_by"]

# SIGHUP: the terminal closed, the ssh session gone; a run then stops as on
# Ctrl-C (its record says so) instead of dying with its tasks unstopped.
INTERRUPTING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Started with SIGHUP ignored (nohup): it stays ignored, whatever the block.
_HANGUP_IGNORED = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN

# What ``signal.signal`` takes: a function, SIG_IGN or SIG_DFL.
_Handler = Union[Callable[[int, Optional[FrameType]], object], int, signal.Handlers]


class _Queued:
    """Where ``_interrupt`` puts a signal instead of raising it, and
    whether it already did."""

    def __init__(self, events: "queue.SimpleQueue[object]") -> None:
        # (imported here, not at the top: tfrun's option parsing imports
        # this module and none of the run's; not in the handler either)
        from .events import Interrupted
        self.events = events
        self.event = Interrupted
        self.put = False


_queued_on: list[_Queued] = []   # the innermost ``interrupts_queued_on`` last


class _Gate:
    """An ``interrupting_only_inside`` block: whether the main thread is in
    one of its ``interruptible()`` parts."""

    def __init__(self) -> None:
        self.open = False


_gates: list[_Gate] = []   # the innermost ``interrupting_only_inside`` last


_interrupted_by: Optional[int] = None   # the signal of the latest interrupt


def interrupted_by() -> Optional[int]:
    """The signal that made the latest interrupt (SIGHUP: the terminal went
    away, where a run that outlives its scheduler is left to its tasks), or
    None."""
    return _interrupted_by


def _interrupt(signum: int, frame: Optional[FrameType]) -> None:
    global _interrupted_by
    if _gates and not _gates[-1].open:
        return      # outside the block's interruptible parts: ignored
    _interrupted_by = signum
    target = _queued_on[-1] if _queued_on else None
    if target is None or target.put:   # a second signal: the user insists
        raise KeyboardInterrupt
    target.put = True
    # SimpleQueue.put is reentrant: safe from a handler, even one that came
    # inside a get or put of the same queue (queue.Queue's would deadlock).
    target.events.put(target.event(signum))


@contextlib.contextmanager
def _handling(signals: Iterable[signal.Signals], handler: _Handler) -> Iterator[None]:
    """``signals`` go to ``handler`` inside the block; the previous handlers
    (those installed from Python) come back after it. A SIGHUP that this
    process was started ignoring (``nohup``) is left as it is."""
    previous = {sig: signal.signal(sig, handler) for sig in signals
                if not (sig == signal.SIGHUP and _HANGUP_IGNORED)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            if old is not None:
                signal.signal(sig, old)


def interrupt_on_signals(signals: Iterable[signal.Signals] = INTERRUPTING
                         ) -> contextlib.AbstractContextManager[None]:
    """Inside the block, ``signals`` (default SIGTERM, SIGINT, SIGHUP) raise
    ``KeyboardInterrupt``, as Ctrl-C does, except inside an
    ``interrupts_queued_on`` block (a run's wait for its events): there the
    first one is queued for the run's loop to raise. Main thread only,
    unless ``signals`` is empty."""
    return _handling(signals, _interrupt)


@contextlib.contextmanager
def interrupting_only_inside(signals: Iterable[signal.Signals] = INTERRUPTING
                             ) -> Iterator[None]:
    """As ``interrupt_on_signals``, but ``signals`` interrupt only inside
    the block's ``interruptible()`` parts; elsewhere they are ignored, from
    the block's first line to its last (no ``ignore_signals`` to enter, no
    moment when a signal slips through). Main thread only."""
    global _interrupted_by
    gate = _Gate()
    _gates.append(gate)
    _interrupted_by = None   # what interrupted an earlier block is not this one's
    try:
        with _handling(signals, _interrupt):
            yield
    finally:
        _gates.remove(gate)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Inside an ``interrupting_only_inside`` block: a part that a signal
    interrupts (``KeyboardInterrupt``, or queued by ``interrupts_queued_on``).
    One that comes as it ends is raised from its ``with``, so a ``try``
    around it catches it. Elsewhere (another thread, no such block): no-op."""
    if not _gates or threading.current_thread() is not threading.main_thread():
        yield
        return
    gate = _gates[-1]
    was, gate.open = gate.open, True
    try:
        yield
    finally:
        gate.open = was


@contextlib.contextmanager
def deferring_signals(signals: Iterable[signal.Signals] = INTERRUPTING) -> Iterator[None]:
    """Inside the block, ``signals`` wait: each that comes is delivered again
    once the block ends, to whatever handled it before (the caller's
    handler, Python's ``KeyboardInterrupt``, the default action). For the
    cleanup of a run in a caller's process (``cluster()``, ``run()``): a
    second Ctrl-C as the run stops must not cut the stop short, and a
    SIGTERM must not be lost. Main thread only; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []

    def hold(signum: int, frame: Optional[FrameType]) -> None:
        if signum not in came:
            came.append(signum)

    # One whose handler was not installed from Python (None) could not be put
    # back, and would be held for good: it is left as it is.
    with _handling([sig for sig in signals if signal.getsignal(sig) is not None], hold):
        yield
    for signum in came:
        signal.raise_signal(signum)


def ignore_signals(signals: Iterable[signal.Signals] = INTERRUPTING,
                   notice: Optional[str] = None) -> contextlib.AbstractContextManager[None]:
    """Inside the block, ``signals`` (default SIGTERM, SIGINT, SIGHUP) are
    ignored: cleanup that must not be cut short. ``notice``: said on stderr
    at the first one, so that a Ctrl-C is not taken for lost (written to
    the descriptor: a handler's print could come inside another print)."""
    if notice is None:
        return _handling(signals, signal.SIG_IGN)
    said: list[int] = []

    def answer(signum: int, frame: Optional[FrameType]) -> None:
        if not said:
            said.append(signum)
            try:
                os.write(2, notice.encode("utf-8", "replace"))
            except OSError:
                pass    # no terminal any more (SIGHUP): nothing to say it to
    return _handling(signals, answer)


@contextlib.contextmanager
def interrupts_queued_on(events: "queue.SimpleQueue[object]") -> Iterator[None]:
    """Inside the block, a signal that ``interrupt_on_signals`` handles is
    put on ``events`` as ``Interrupted`` (once; a second one raises, as
    before); whoever takes it raises ``KeyboardInterrupt`` where that is
    safe (``ClusterRun.step``: it may first finish a call to the master,
    bounded by the driver's timeouts). A signal queued but not taken when
    the block ends (it came after the wait's last event) is raised there,
    not lost. Takes effect in the main thread only (where handlers run);
    elsewhere, and where no handler of ours is installed, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    target = _Queued(events)
    _queued_on.append(target)
    try:
        yield
    finally:
        _queued_on.remove(target)
    if target.put:   # queued, not taken (taking it raises, which skips this)
        raise KeyboardInterrupt
