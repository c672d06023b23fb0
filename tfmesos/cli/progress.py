"""The status line while a run connects and its cluster forms, and, once
it runs, the latest metrics its tasks logged (``tfmesos.log_metrics``).

``ClusterRun`` calls a ``Progress`` about once a second from its waiting
loop (never from another thread). On a terminal it keeps one line on
stderr, redrawn in place with ``\\r`` and taken away by ``hide()`` (before
a task's output is printed) and ``clear()``; elsewhere (a pipe, a file, or
``-v`` with its log lines) it writes the same text as a normal line every
``interval`` seconds (10; ``$TFMESOS_PROGRESS_INTERVAL``). Once the
cluster is ``ready()``, the line shows one task's latest metrics (the
chief's, else worker 0's, else the first task that logged):
``worker:0 step 120 · loss 0.4123 accuracy 0.8812 · 12.3 steps/s``, and
``· 9968 points left out`` once the run left points out (more series than
it keeps, a flood the tasks thinned); nothing while no task logged any.
"""

import os
import shutil
import sys
import time

INTERVAL = 10.0   # seconds between lines when not on a terminal
REDRAW = 1.0      # seconds between redraws on a terminal
SHOWN_VALUES = 6  # metrics on the line at most
PREFERRED = ("chief:0", "worker:0")   # whose metrics the line shows, first found


def describe(run, elapsed):
    """``connecting to MASTER (3 s)``, then ``placed 2/3, registered 1/3,
    waiting for cpus=1 mem=1024 (12 s)``; when a task waits in vain, why
    (``ClusterRun.fit_note``): ``...: worker:0 fits agent a1 (cpus=1
    mem=512) once it is freed``."""
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
    text += " (%d s)" % elapsed
    note = run.fit_note if pending else None
    return text + (": %s" % note if note else "")


def metric_value(value):
    """A metric's value, short: ``0.4123``, ``1.2e+04``; ``n/a`` (not finite)."""
    return "n/a" if value is None else "%.4g" % value


def describe_metrics(task, step, values, rate, limit=SHOWN_VALUES):
    """``worker:0 step 120 · loss 0.4123 accuracy 0.8812 · 12.3 steps/s``."""
    text = "%s step %d · %s" % (task, step, " ".join(
        "%s %s" % (name, metric_value(value)) for name, value in values[:limit]))
    if len(values) > limit:
        text += " ..."
    if rate is not None:
        text += " · %s steps/s" % ("%.2f" % rate if rate < 10 else "%.1f" % rate if rate < 100
                                   else "%.0f" % rate)
    return text


def metrics_line(run):
    """The running run's line: one task's latest metrics, and how many
    points the run left out (if any), or None."""
    latest = run.record.latest_metrics()
    if not latest:
        return None
    by_task = {entry[0]: entry for entry in latest}
    chosen = next((by_task[name] for name in PREFERRED if name in by_task), latest[0])
    text = describe_metrics(*chosen)
    left_out, _ = run.record.metrics_left_out()
    return text + (" · %d points left out" % left_out if left_out else "")


class Progress:
    """The observer ``ClusterRun(on_progress=...)`` calls; ``tty`` None:
    whether ``stream`` is a terminal; ``idle()`` (default: always) says
    whether the terminal's last line is free for the status line (no
    task's line is unfinished there)."""

    def __init__(self, stream=None, prefix="tfrun: ", tty=None, interval=None,
                 environ=None, clock=time.monotonic, idle=None):
        self._stream = stream   # None: sys.stderr as it is at each write (tfrun's console)
        self.prefix = prefix
        self.tty = self.stream.isatty() if tty is None else tty
        environ = os.environ if environ is None else environ
        self.interval = interval if interval is not None else _interval(environ)
        self._clock = clock
        self._started = clock()
        self._written = None   # when the last line (or redraw) was written
        self._drawn = False    # a line is on the terminal
        self._idle = idle or (lambda: True)
        self._ready = False    # the cluster is up: metrics, not its forming

    @property
    def stream(self):
        return self._stream or sys.stderr

    def __call__(self, run):
        now = self._clock()
        elapsed = now - self._started
        if self._ready:
            text = metrics_line(run)
            if text is None:
                return
        else:
            text = None
        if self.tty:
            if (self._written is None or now - self._written >= REDRAW) and self._idle():
                self._draw(text or describe(run, elapsed))
                self._written = now
        elif elapsed >= self.interval and (self._written is None
                                           or now - self._written >= self.interval):
            self._write("%s%s\n" % (self.prefix, text or describe(run, elapsed)))
            self._written = now

    def ready(self):
        """The cluster is up: take the forming line away; from now on the
        line shows the tasks' metrics (non-terminal: a line every
        ``interval``, the first ``interval`` after this)."""
        self.hide()
        self._ready = True
        self._started = self._written = self._clock()

    def hide(self):
        """Take the line away from the terminal (it comes back at the next
        redraw): before a task's output is printed."""
        if self._drawn:
            self._write("\r\033[K")
            self._drawn = False

    def clear(self):
        """Take the line away (terminal); nothing more is written after."""
        self.hide()
        self.tty, self.interval = False, float("inf")

    def _draw(self, text):
        width = shutil.get_terminal_size((80, 24)).columns - 1
        self._write("\r%s\033[K" % ("%s%s" % (self.prefix, text))[:max(width, 10)])
        self._drawn = True

    def _write(self, text):
        try:
            try:
                self.stream.write(text)
            except UnicodeEncodeError:   # a stream that is not UTF-8: "·" becomes "-"
                self.stream.write(text.replace("·", "-"))
            self.stream.flush()
        except (OSError, ValueError):
            pass


def _interval(environ):
    try:
        return max(0.0, float(environ.get("TFMESOS_PROGRESS_INTERVAL") or INTERVAL))
    except ValueError:
        return INTERVAL
