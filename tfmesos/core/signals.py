"""SIGTERM as Ctrl-C, for the blocks that need it: handlers are installed
only inside a ``with`` block (never at import) and the previous ones come
back after it. Used by the commands (``tfmesos/cli/``) and the ``docker run``
wrapper."""

import contextlib
import signal

__all__ = ["INTERRUPTING", "interrupt_on_signals", "ignore_signals"]

INTERRUPTING = (signal.SIGTERM, signal.SIGINT)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def _handling(signals, handler):
    """``signals`` go to ``handler`` inside the block; the previous handlers
    (those installed from Python) come back after it."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            if old is not None:
                signal.signal(sig, old)


def interrupt_on_signals(signals=INTERRUPTING):
    """Inside the block, ``signals`` (default SIGTERM and SIGINT) raise
    ``KeyboardInterrupt``, as Ctrl-C does. Main thread only, unless
    ``signals`` is empty."""
    return _handling(signals, _interrupt)


def ignore_signals(signals=INTERRUPTING):
    """Inside the block, ``signals`` (default SIGTERM and SIGINT) are
    ignored: cleanup that must not be cut short."""
    return _handling(signals, signal.SIG_IGN)
