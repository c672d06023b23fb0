"""What every tfmesos command does at its boundary."""

import logging
import sys

from ..signals import ignore_signals, interrupt_on_signals

__all__ = ["setup_logging", "interrupt_on_signals", "ignore_signals"]


def setup_logging(prog, verbose):
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%s: %%(message)s" % prog, stream=sys.stderr)
