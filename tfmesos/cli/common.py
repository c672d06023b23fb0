"""What every tfmesos command does at its boundary."""

import argparse
import difflib
import logging
import os
import shlex
import sys

from ..core.signals import ignore_signals, interrupt_on_signals

__all__ = ["CommandParser", "setup_logging", "interrupt_on_signals", "ignore_signals",
           "leave"]


class _NotUnderstood(Exception):
    """A prefix of the arguments does not parse (``command_start``)."""


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are two lines (the short usage
    and the error, with where to read more) and exit 2; ``usage`` is given
    by hand so that it shows ``-- COMMAND``. No abbreviations: argparse
    would read ``tfrun --worker 2`` as ``--worker-logs 2``; an unknown
    option is named with the ones it may have meant."""

    _probing = False   # command_start is trying prefixes: errors are answers

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        if self._probing:
            raise _NotUnderstood(message)
        self.exit(2, "usage: %s\n%s: error: %s (%s --help explains every option)\n"
                  % (self.usage % {"prog": self.prog}, self.prog, message, self.prog))

    def parse_options(self, argv, rest=None):
        """Parse ``argv`` (the part before ``--``; ``rest``: the words after
        it, if there was one); words it does not know are most likely a
        command whose ``--`` was forgotten: the error shows the line with
        ``--`` put in, the user's words and quoting kept (shlex), the
        command's own flags never read as ours."""
        args, unknown = self.parse_known_args(argv)
        if unknown:
            start = self.command_start(argv)
            if start is not None:
                words = [*argv[:start], "--", *argv[start:]]
                if rest is not None:
                    words += ["--", *rest]
                self.error("%s is not an option: put the command after '--': %s %s"
                           % (shlex.quote(argv[start]), self.prog, shlex.join(words)))
            self.error("unrecognized arguments: %s%s" % (shlex.join(unknown),
                                                          self._meant(unknown)))
        return args

    def _meant(self, unknown):
        """``; did you mean --a or --b?`` for the first unknown option: ours
        it abbreviates or resembles; "" when none."""
        word = next((w.split("=", 1)[0] for w in unknown if w.startswith("--")), None)
        if word is None:
            return ""
        options = [o for o in self._option_string_actions if o.startswith("--")]
        meant = {o for o in options if o.startswith(word)}
        meant.update(difflib.get_close_matches(word, options, n=3, cutoff=0.75))
        if not meant:
            return ""
        *rest, last = sorted(meant)
        return "; did you mean %s?" % (" or ".join([", ".join(rest), last]) if rest else last)

    def command_start(self, argv):
        """The index of the first word of ``argv`` that is neither one of
        our options nor an option's value (the command's first word), or
        None when there is none or something before it is not ours."""
        for index, word in enumerate(argv):
            if not word.startswith("-") and self._understood(argv[:index]):
                return index
        return None

    def _understood(self, words):
        """Whether ``words`` are our options and their values, all of them."""
        self._probing = True
        try:
            _, unknown = self.parse_known_args(words)
            return not unknown
        except _NotUnderstood:
            return False
        finally:
            self._probing = False


def setup_logging(prog, verbose):
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%s: %%(message)s" % prog, stream=sys.stderr)


def leave(code):
    """End a command whose work is done with exit status ``code``, at once:
    its output flushed, but no interpreter finalization (tearing down the
    run's modules and objects took ~25 ms of a 0.3 s run), no wait for
    daemon threads, which have nothing left to do."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code if isinstance(code, int) else 1)
