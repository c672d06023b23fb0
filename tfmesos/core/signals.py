"""SIGTERM as Ctrl-C, for the blocks that need it: handlers are installed
only inside a ``with`` block (never at import) and the previous ones come
back after it. Used by the commands (``tfmesos/cli/``) and the ``docker run``
wrapper."""

import contextlib
import signal
from collections.abc import Iterable, Iterator
from types import FrameType
from typing import Callable, Optional, Union

__all__ = ["INTERRUPTING", "interrupt_on_signals", "ignore_signals"]

INTERRUPTING = (signal.SIGTERM, signal.SIGINT)

# What ``signal.signal`` takes: a function, SIG_IGN or SIG_DFL.
_Handler = Union[Callable[[int, Optional[FrameType]], object], int, signal.Handlers]


def _interrupt(signum: int, frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _handling(signals: Iterable[signal.Signals], handler: _Handler) -> Iterator[None]:
    """``signals`` go to ``handler`` inside the block; the previous handlers
    (those installed from Python) come back after it."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            if old is not None:
                signal.signal(sig, old)


def interrupt_on_signals(signals: Iterable[signal.Signals] = INTERRUPTING
                         ) -> contextlib.AbstractContextManager[None]:
    """Inside the block, ``signals`` (default SIGTERM and SIGINT) raise
    ``KeyboardInterrupt``, as Ctrl-C does. Main thread only, unless
    ``signals`` is empty."""
    return _handling(signals, _interrupt)


def ignore_signals(signals: Iterable[signal.Signals] = INTERRUPTING
                   ) -> contextlib.AbstractContextManager[None]:
    """Inside the block, ``signals`` (default SIGTERM and SIGINT) are
    ignored: cleanup that must not be cut short."""
    return _handling(signals, signal.SIG_IGN)
