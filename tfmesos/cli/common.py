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
def exit_on_signals():
    """SIGTERM behaves like Ctrl-C inside the block; afterwards both are
    ignored so that cleaning up cannot be cut short."""
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)

