"""What every tfmesos command does at its boundary."""

import argparse
import logging
import sys

from ..signals import ignore_signals, interrupt_on_signals

__all__ = ["CommandParser", "setup_logging", "interrupt_on_signals", "ignore_signals"]


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are two lines (the short usage
    and the error, with where to read more) and exit 2; ``usage`` is given
    by hand so that it shows ``-- COMMAND``."""

    def error(self, message):
        self.exit(2, "usage: %s\n%s: error: %s (%s --help explains every option)\n"
                  % (self.usage % {"prog": self.prog}, self.prog, message, self.prog))

    def parse_options(self, argv):
        """Parse ``argv`` (the part before ``--``); words it does not know
        are most likely a command whose ``--`` was forgotten."""
        args, unknown = self.parse_known_args(argv)
        if unknown:
            hint = ""
            if not unknown[0].startswith("-"):
                hint = "; put the command after '--': %s [options] -- %s" % (
                    self.prog, " ".join(unknown))
            self.error("unrecognized arguments: %s%s" % (" ".join(unknown), hint))
        return args


def setup_logging(prog, verbose):
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%s: %%(message)s" % prog, stream=sys.stderr)
