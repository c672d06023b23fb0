"""What every tfmesos command does at its boundary."""

import contextlib
import logging
import signal
import sys


def setup_logging(prog, verbose):
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%s: %%(message)s" % prog, stream=sys.stderr)
    if not verbose:
        logging.getLogger("kazoo").setLevel(logging.ERROR)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def _handling_signals(handler):
    """SIGTERM and SIGINT go to ``handler`` inside the block; the previous
    handlers come back after it."""
    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def interrupt_on_signals():
    """SIGTERM behaves like Ctrl-C (KeyboardInterrupt) inside the block."""
    return _handling_signals(_interrupt)


def ignore_signals():
    """Neither signal can cut the block short (cleaning up)."""
    return _handling_signals(signal.SIG_IGN)
