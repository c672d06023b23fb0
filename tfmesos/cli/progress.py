"""The status line while a run connects and its cluster forms.

``ClusterRun`` calls a ``Progress`` about once a second from its waiting
loop (never from another thread). On a terminal it keeps one line on
stderr, redrawn in place with ``\\r`` and cleared by ``clear()``; elsewhere
(a pipe, a file, or ``-v`` with its log lines) it writes the same text as a
normal line every ``interval`` seconds (10; ``$TFMESOS_PROGRESS_INTERVAL``).
"""

import os
import shutil
import sys
import time

INTERVAL = 10.0   # seconds between lines when not on a terminal
REDRAW = 1.0      # seconds between redraws on a terminal


def describe(run, elapsed):
    """``connecting to MASTER (3 s)``, then ``placed 2/3, registered 1/3,
    waiting for cpus=1 mem=1024 (12 s)``."""
    driver, scheduler = run.driver, run.scheduler
    if driver is None or scheduler is None or not driver.connected:
        verb = "reconnecting" if scheduler is not None and scheduler.framework_id else "connecting"
        where = run.backend.describe()
        return "%s to %s (%d s)" % (verb, where, elapsed)
    slots = run.slots
    placed = sum(1 for slot in slots if slot.state != "PENDING")
    registered = sum(1 for slot in slots if slot.address is not None)
    text = "placed %d/%d, registered %d/%d" % (placed, len(slots), registered, len(slots))
    pending = [slot.job for slot in slots if slot.state == "PENDING"]
    if pending:
        text += ", waiting for cpus=%g mem=%g" % (
            round(sum(job.cpus for job in pending), 3), sum(job.mem for job in pending))
        gpus = sum(job.gpus for job in pending)
        if gpus:
            text += " gpus=%d" % gpus
    return text + " (%d s)" % elapsed


class Progress:
    """The observer ``ClusterRun(on_progress=...)`` calls; ``tty`` None:
    whether ``stream`` is a terminal."""

    def __init__(self, stream=None, prefix="tfrun: ", tty=None, interval=None,
                 environ=None, clock=time.monotonic):
        self.stream = stream or sys.stderr
        self.prefix = prefix
        self.tty = self.stream.isatty() if tty is None else tty
        environ = os.environ if environ is None else environ
        self.interval = interval if interval is not None else _interval(environ)
        self._clock = clock
        self._started = clock()
        self._written = None   # when the last line (or redraw) was written
        self._drawn = False    # a line is on the terminal

    def __call__(self, run):
        now = self._clock()
        elapsed = now - self._started
        if self.tty:
            if self._written is None or now - self._written >= REDRAW:
                self._draw(describe(run, elapsed))
                self._written = now
        elif elapsed >= self.interval and (self._written is None
                                           or now - self._written >= self.interval):
            self._write("%s%s\n" % (self.prefix, describe(run, elapsed)))
            self._written = now

    def clear(self):
        """Take the line away (terminal); nothing more is written after."""
        if self._drawn:
            self._write("\r\033[K")
            self._drawn = False
        self.tty, self.interval = False, float("inf")

    def _draw(self, text):
        width = shutil.get_terminal_size((80, 24)).columns - 1
        self._write("\r%s\033[K" % ("%s%s" % (self.prefix, text))[:max(width, 10)])
        self._drawn = True

    def _write(self, text):
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass


def _interval(environ):
    try:
        return max(0.0, float(environ.get("TFMESOS_PROGRESS_INTERVAL") or INTERVAL))
    except ValueError:
        return INTERVAL
