"""What every tfmesos command does at its boundary."""

import argparse
import errno
import logging
import os
import shlex
import sys

from ..core.inputs import describe, number_error
from ..core.signals import (
    ignore_signals,
    interrupt_on_signals,
    interruptible,
    interrupting_only_inside,
)

__all__ = ["CommandParser", "setup_logging", "interrupt_on_signals", "ignore_signals",
           "interrupting_only_inside", "interruptible",
           "leave", "bounded", "run_word", "OutputClosed", "SIGPIPE_EXIT", "quiet_on_closed_pipe",
           "output_closed"]

SIGPIPE_EXIT = 128 + 13   # a shell's status for a process SIGPIPE killed (cat in cat | head)


class _NotUnderstood(Exception):
    """A prefix of the arguments does not parse (``command_start``)."""


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are two lines (the short usage
    and the error, with where to read more) and exit 2; ``usage`` is given
    by hand so that it shows ``-- COMMAND``. No abbreviations: argparse
    would read ``tfrun --worker 2`` as ``--worker-logs 2``; an unknown
    option is named with the ones it may have meant. ``takes_command``: a
    command follows ``--`` (tfrun, tfmesos docker), so a word that is not
    ours is most likely that command with its ``--`` forgotten; the other
    commands take their options before, between and after their
    positionals (``tfmesos logs RUN --master M worker:0``)."""

    _probing = False   # command_start is trying prefixes: errors are answers

    def __init__(self, *args, takes_command=False, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.takes_command = takes_command

    def error(self, message):
        if self._probing:
            raise _NotUnderstood(message)
        usage = (self.usage or "%(prog)s") % {"prog": self.prog}   # given by hand, or bare
        self.exit(2, "usage: %s\n%s: error: %s (%s --help explains every option)\n"
                  % (usage, self.prog, message, self.prog))

    def parse_options(self, argv, rest=None):
        """Parse ``argv``. Of a parser that ``takes_command`` it is the part
        before ``--`` (``rest``: the words after it, if there was one), and
        words it does not know are most likely a command whose ``--`` was
        forgotten: the error shows the line with ``--`` put in, the user's
        words and quoting kept (shlex), the command's own flags never read
        as ours. Other parsers read options and positionals in any order
        (argparse's intermixed parsing)."""
        if not self.takes_command:
            args, unknown = self.parse_known_intermixed_args(argv)
            if unknown:
                self.error("unrecognized arguments: %s%s" % (shlex.join(unknown),
                                                              self._meant(unknown)))
            return args
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
        import difflib  # a usage error's suggestion only: not on tfrun's start-up path
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
    # Its retries of an unreachable server (MLflow's client) are two lines of
    # urllib3's before the one that says what failed.
    logging.getLogger("urllib3").setLevel(logging.ERROR)


_abandoned = False   # abandon_streams(): leave() flushes nothing


def abandon_streams():
    """``leave`` flushes neither stdout nor stderr: a writer may be blocked
    in one, holding it, for a reader that does not read."""
    global _abandoned
    _abandoned = True


def leave(code):
    """End a command whose work is done with exit status ``code``, at once:
    its output flushed (unless ``abandon_streams``), but no interpreter
    finalization (tearing down the run's modules and objects took ~25 ms of
    a 0.3 s run), no wait for daemon threads, which have nothing left to do."""
    if _abandoned:
        os._exit(code if isinstance(code, int) else 1)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code if isinstance(code, int) else 1)


def bounded(kind, low, high, low_open=False):
    """An argparse ``type``: a finite ``kind`` (int or float) within [low,
    high] (above ``low`` with ``low_open``), else a usage error that says
    which (``core.inputs``): NaN and infinities never pass."""
    integer = kind is int
    wanted = describe(low, high, integer, low_open)

    def parse(text):
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError("expected %s, got %r" % (wanted, text)) from None
        why = number_error(value, low, high, integer, low_open)
        if why:
            raise argparse.ArgumentTypeError("%s, got %s" % (why, text))
        return value
    parse.__name__ = "integer" if integer else "number"
    return parse


def run_word(text):
    """An argparse ``type`` for the RUN of show, logs, report, kill and
    attach: an empty one names no run, a usage error as a missing one is
    (it was looked for: 'give a run id', exit 1, or the master asked first)."""
    if not text:
        raise argparse.ArgumentTypeError("'' names no run: give a run's id (tfmesos runs "
                                         "lists them)")
    return text


class OutputClosed(KeyboardInterrupt):
    """The reader of our output went away (``tfrun ... | head``): the run
    stops as a process killed by SIGPIPE would, every task with it."""

    exit_code = SIGPIPE_EXIT

    def __init__(self):
        super().__init__("the reader of tfrun's output went away (a closed pipe)")


def output_closed():
    """Quiet stdout and stderr for good (a closed pipe, written to again,
    would fail again) and leave with ``SIGPIPE_EXIT``, no traceback."""
    for stream in (sys.stdout, sys.stderr):
        try:
            descriptor = stream.fileno()
        except (OSError, ValueError, AttributeError):
            continue
        _devnull_onto(descriptor)
    leave(SIGPIPE_EXIT)


def _devnull_onto(descriptor):
    """Make ``descriptor`` /dev/null's (open or closed before); a failure
    leaves it as it was."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    if devnull == descriptor:   # it was closed, and the lowest free: /dev/null's now
        return
    try:
        os.dup2(devnull, descriptor)
    except OSError:
        pass
    finally:
        os.close(devnull)


def standard_streams():
    """Ready a command's standard streams: a descriptor 0, 1 or 2 that was
    closed at its start (``tfrun ... >&-``, a daemon's child) opened on
    /dev/null, so that no socket or file of the run takes its number (and
    its place in what tasks inherit), and Python's stream for it made; what
    stdout cannot encode (a task's output where the locale is not UTF-8,
    PYTHONIOENCODING=ascii) written as backslash escapes, as Python writes
    them on stderr, rather than a UnicodeEncodeError ending the command."""
    for descriptor, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(descriptor)
        except OSError:
            _devnull_onto(descriptor)
        if getattr(sys, name) is None:
            setattr(sys, name, open(descriptor, mode, closefd=False))
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def quiet_hung_up_terminal():
    """Point the standard streams that are a terminal gone (hung up: the
    ssh session or the window closed, its SIGHUP under way) at /dev/null:
    every write to one fails (EIO), and what is left to say (the stop's
    lines, the usage table) must neither fail the stop nor its exit
    status. One that is no terminal, or one still there, is left alone."""
    import termios
    for descriptor in (0, 1, 2):
        try:
            termios.tcgetattr(descriptor)
        except termios.error as exc:
            if exc.args[0] == errno.EIO:   # (ENOTTY: no terminal, a pipe, a file)
                _devnull_onto(descriptor)


def quiet_on_closed_pipe(main, *args):
    """``main(*args)``'s exit status, its output flushed; a reader that went
    away (``tfmesos logs RUN | head``) ends the command quietly, as SIGPIPE
    ends ``cat``: ``SIGPIPE_EXIT``, no traceback. The standard streams are
    readied first (``standard_streams``)."""
    standard_streams()
    try:
        try:
            code = main(*args)
        finally:
            sys.stdout.flush()   # --help's text may still be in the buffer
        return code
    except BrokenPipeError:
        output_closed()
        raise   # not reached: output_closed leaves
