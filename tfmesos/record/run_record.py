"""The run directory: what a run leaves behind for whoever looks into it.

``./tfmesos-runs/<name>-<run id>/`` by default (``$TFMESOS_RUNS_DIR``
instead of ``./tfmesos-runs``; ``tfrun --run-dir`` / ``cluster(run_dir=)``
name the directory itself) holds

* one log file per task, attempt and stream, written from the output the
  tasks forward (replica mode): ``ps.0.stdout``, ``ps.0.stderr``,
  ``worker.1.attempt2.stdout`` (the first attempt has no ``attemptN``);
* ``run.json``, rewritten atomically (a temporary file, then a rename) as
  the run goes. Format 1, times in ISO 8601 UTC::

    format        1
    run_id, name  the run's id (in task ids) and framework name
    mode          "replica" (tfrun) or "fine" (cluster())
    master        the master as given ("local": the embedded one)
    framework_id  Mesos' id of the framework (null before it registered)
    command       the command template (replica mode), else null
    jobs          [{name, num, start, cpus, mem, gpus}]
    tasks         [{name, job, index, state, exit_code, attempts}]: state and
                  exit_code are the last attempt's
    attempts      [{attempt, restart (0 before the first whole restart),
                  task_id, agent_id, hostname, address (the registered
                  host:port), launched, registered (when it first
                  registered), states, exit_code, logs ({stdout, stderr}
                  file names, null without forwarding), usage}]
    usage         what the attempt's command used, as the task measured it
                  (replica mode; null until its exit message came):
                  {wall_s, cpu_s, user_s, system_s (cpu seconds of its
                  process tree), peak_rss_mb (largest process),
                  peak_tree_rss_mb (the tree), peak_gpu_mb (null without
                  GPUs), sample_interval_s, samples [{t (s since start),
                  cpu_s, rss_mb, gpu_mb}] (every 10 s, bounded), cgroup
                  {limit_mb, peak_mb, oom_kills} (in a memory-limited cgroup)}
                  (tfmesos.task.usage); tfrun's end-of-run table reads it
    states        [{state, time, source, reason, message}]: each change of
                  Mesos state, with Mesos' source, reason and message. Once
                  the run is over, every attempt's last state is terminal:
                  when the framework was torn down before Mesos' terminal
                  update arrived, the end is the task's own exit frame
                  (source "exit frame": TASK_FINISHED for code 0, else
                  TASK_FAILED) or, without one, TASK_KILLED with source
                  "stopped by tfrun" ("stopped by cluster()")
    outcome       {status, message, task, exit_code, hint}; status is "running",
                  "succeeded", "failed", "aborted" (ended before the cluster
                  was complete) or "interrupted" (Ctrl-C, SIGTERM);
                  exit_code: what tfrun exits with (0, the failed task's
                  code, 1, 130); in fine-grained mode the failed task's
                  code or null; hint: one line of advice when the failed
                  task's last stderr lines, exit code or Mesos message match
                  a known failure (tfmesos.record.hints), else null
    timings       {submitted, first_offer, all_registered, finished}
    restarts      [{restart, time, cause ("lost" or "failure"), task, message,
                  delay}]: each whole restart (tfrun --max-restarts)
    relaunches    [{task, time, cause, message, agent_id, address, back}]: each
                  sticky relaunch of a worker; back: when it registered again
    shipped       only with tfrun --ship: {bundle: {source, files, bytes,
                  archive_bytes, sha256, name} or null, task_side, python_env}
"""

import contextlib
import datetime
import json
import os
import re
import threading
import time

from ..exceptions import TFMesosError
from .hints import LINES as HINT_LINES, hint_for
from ..mesos.task_states import TERMINAL_STATES, exit_code_of

FORMAT = 1
RUNS_DIR = "tfmesos-runs"
SAVE_INTERVAL = 1.0      # run.json is rewritten at most this often, but at milestones
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def default_run_dir(name, run_id, environ):
    """``<runs dir>/<name>-<run id>``: ``$TFMESOS_RUNS_DIR``, else ./tfmesos-runs."""
    root = environ.get("TFMESOS_RUNS_DIR") or RUNS_DIR
    return os.path.join(root, "%s-%s" % (_UNSAFE.sub("_", name).strip(".") or "run", run_id))


def timestamp(seconds=None):
    moment = datetime.datetime.fromtimestamp(time.time() if seconds is None else seconds,
                                             datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (moment.microsecond // 1000)


def log_name(slot_name, attempt, stream):
    """``worker.1.stderr``; ``worker.1.attempt2.stderr`` from the second attempt on."""
    base = slot_name.replace(":", ".")
    return "%s.%s" % (base if attempt <= 1 else "%s.attempt%d" % (base, attempt), stream)


# The ``source`` of an attempt's last state when Mesos' terminal update did
# not arrive before the framework was torn down.
EXIT_FRAME = "exit frame"
STOPPED_BY = {"replica": "stopped by tfrun", "fine": "stopped by cluster()"}


def tfrun_exit_code(status, error=None):
    """What tfrun exits with for a run that ended with ``status`` (and
    ``error``): its ``--help`` epilog."""
    if status == "succeeded":
        return 0
    if status == "interrupted":
        return 130
    return getattr(error, "exit_code", None) or 1


# The run's phases (``core.phase.Phase`` values) before its cluster was complete.
BEFORE_COMPLETE = ("new", "forming")


def outcome_of(error, phase):
    """(status, message) of a run that ``error`` ends in ``phase`` (a
    ClusterRun phase, or "block": cluster()'s with block raised it)."""
    if isinstance(error, KeyboardInterrupt):
        return "interrupted", "interrupted (Ctrl-C or SIGTERM)"
    status = "aborted" if phase in BEFORE_COMPLETE else "failed"
    if phase == "block":   # cluster()'s with block
        return status, "the with block raised %s: %s" % (type(error).__name__, error)
    if isinstance(error, TFMesosError):
        return status, str(error)
    return status, "%s: %s" % (type(error).__name__, error)


class RunRecord:
    """The record of one run, kept in memory and, with a ``directory``, in
    the run directory. ``launched`` may be called from any thread; the rest
    from the thread that handles the run's events."""

    def __init__(self, directory, header, slots, forwarding):
        self.directory = directory
        self._lock = threading.RLock()
        self._forwarding = forwarding
        self._data = dict({"format": FORMAT}, **header, framework_id=None, tasks=[
            {"name": s.name, "job": s.job.name, "index": s.index, "state": "PENDING",
             "exit_code": None, "attempts": []} for s in slots])
        self._data["outcome"] = {"status": "running", "message": None, "task": None,
                                 "exit_code": None, "hint": None}
        self._data["timings"] = {"submitted": None, "first_offer": None,
                                 "all_registered": None, "finished": None}
        self._data["restarts"], self._data["relaunches"] = [], []
        self._restart = 0      # the whole restart new attempts belong to
        self._tasks = {task["name"]: task for task in self._data["tasks"]}
        self._attempts = {}   # task id -> (task, attempt)
        self._exits = {}      # task id -> when its exit frame came
        self._created = set()   # log files created by this run
        self._files = {}        # name -> open log file
        self._dirty, self._saved = True, 0.0
        if directory is not None:
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as exc:
                raise TFMesosError("cannot create the run directory %s: %s; choose another "
                                   "(tfrun --run-dir DIR, cluster(run_dir=...))"
                                   % (directory, exc.strerror or exc)) from None

    # -- what happened ----------------------------------------------------

    def submitted(self):
        self._set_timing("submitted")

    def shipped(self, what):
        """``tfrun --ship``: what goes to every task (``Shipment.record``)."""
        with self._lock:
            self._data["shipped"] = what
            self._dirty = True

    def launched(self, launch):
        """A new attempt (``scheduler.Launch``) goes to Mesos (the driver's thread)."""
        slot, number = launch.slot, launch.attempt
        logs = None
        if self._forwarding:
            logs = {s: log_name(slot.name, number, s) for s in ("stdout", "stderr")}
        attempt = {"attempt": number, "restart": self._restart, "task_id": launch.task_id,
                   "agent_id": launch.agent_id, "hostname": launch.assignment.hostname,
                   "address": None, "launched": timestamp(), "registered": None, "states": [],
                   "exit_code": None, "logs": logs, "usage": None}
        with self._lock:
            task = self._tasks[slot.name]
            # A launch call that failed is retried with the same attempt number.
            task["attempts"] = [a for a in task["attempts"] if a["attempt"] != number]
            task["attempts"].append(attempt)
            self._attempts[launch.task_id] = (task, attempt)
            self._dirty = True

    def status(self, status):
        """A Mesos status update; repeated states (reconciliation) are not changes."""
        with self._lock:
            task, attempt = self._attempts.get(status.task_id.value, (None, None))
            if attempt is None or (attempt["states"] and
                                   attempt["states"][-1]["state"] == status.state):
                return
            message = status.get("message") or ""
            attempt["states"].append({
                "state": status.state, "time": timestamp(status.get("timestamp") or None),
                "source": status.get("source") or None, "reason": status.get("reason") or None,
                "message": message})
            if status.state in TERMINAL_STATES and attempt["exit_code"] is None:
                code = exit_code_of(message)
                attempt["exit_code"] = 0 if code is None and status.state == "TASK_FINISHED" \
                    else code
            self._summarize(task)

    def registered(self, task_id, address):
        with self._lock:
            _, attempt = self._attempts.get(task_id, (None, None))
            if attempt is not None and attempt["registered"] is None:
                attempt["registered"] = timestamp()
        self._update(task_id, "address", address)

    def exited(self, task_id, code, when=None, usage=None):
        """The task's exit frame (``when``: time.time() it came; ``usage``:
        what its command used)."""
        self._exits.setdefault(task_id, timestamp(when))
        self._update(task_id, "exit_code", code)
        if usage is not None:
            self._update(task_id, "usage", usage)

    def restarting(self, restart, cause, task, message, delay):
        """Whole restart number ``restart`` begins (``delay`` s from now)."""
        with self._lock:
            self._restart = restart
            self._data["restarts"].append({"restart": restart, "time": timestamp(),
                                           "cause": cause, "task": task, "message": message,
                                           "delay": delay})
        self.save()

    def relaunching(self, task, cause, message, agent_id, address):
        """A sticky relaunch of ``task`` (to ``address`` on ``agent_id``) begins."""
        with self._lock:
            self._data["relaunches"].append({"task": task, "time": timestamp(), "cause": cause,
                                             "message": message, "agent_id": agent_id,
                                             "address": address, "back": None})
        self.save()

    def back(self, task):
        """The sticky relaunch of ``task`` registered again."""
        with self._lock:
            for relaunch in reversed(self._data["relaunches"]):
                if relaunch["task"] == task and relaunch["back"] is None:
                    relaunch["back"] = timestamp()
                    break
            self._dirty = True

    def all_registered(self, framework_id):
        with self._lock:
            self._data["framework_id"] = framework_id
        self._set_timing("all_registered")
        self.save()

    def ended(self, error, phase):
        """The run ends with ``error`` (an exception) in ``phase``; the
        first outcome stays."""
        status, message = outcome_of(error, phase)
        task, code = getattr(error, "task", None), getattr(error, "exit_code", None)
        self.outcome(status, message, task,
                     tfrun_exit_code(status, error) if self._data.get("mode") == "replica"
                     else code, self._hint(task, code))

    def _hint(self, task, exit_code):
        """Advice for ``task``'s failure, from its last stderr lines, its exit
        code and Mesos' last message about it (``tfmesos.record.hints``), or None."""
        attempts = self._tasks[task]["attempts"] if task in self._tasks else []
        if not attempts:
            return None
        states = attempts[-1]["states"]
        message = states[-1]["message"] if states else ""
        return hint_for(self.tail(task, "stderr", HINT_LINES), exit_code, message,
                        self._tasks[task]["job"])

    @contextlib.contextmanager
    def recording(self, phase):
        """Record the outcome of an exception that leaves the block;
        ``phase()`` tells the run's phase then."""
        try:
            yield
        except BaseException as exc:
            self.ended(exc, phase())
            raise

    def outcome(self, status, message=None, task=None, exit_code=None, hint=None):
        if exit_code is None and self._data.get("mode") == "replica":
            exit_code = tfrun_exit_code(status)
        with self._lock:
            if self._data["outcome"]["status"] == "running":
                self._data["outcome"] = {"status": status, "message": message, "task": task,
                                         "exit_code": exit_code, "hint": hint}
                self._dirty = True

    def finish(self, framework_id=None, first_offer=None, status="succeeded"):
        """The run stopped: ``status`` unless an outcome was recorded; every
        attempt gets its end."""
        self.outcome(status)
        self._end_attempts()
        with self._lock:
            if framework_id:
                self._data["framework_id"] = framework_id
            if first_offer:
                self._data["timings"]["first_offer"] = timestamp(first_offer)
        self._set_timing("finished")
        self.save()
        self._close_logs()

    # -- logs -------------------------------------------------------------

    def output(self, task_id, stream, text):
        """Append forwarded output to the attempt's log file."""
        _, attempt = self._attempts.get(task_id, (None, None))
        if self.directory is not None and attempt is not None and attempt["logs"]:
            self._write_log(attempt["logs"][stream], text)

    def _write_log(self, name, text):
        """A log file is created (emptied, in a reused directory) first, then
        appended to; it stays open until the run finishes, flushed after every
        write (so ``tail -f`` and ``tail()`` see everything)."""
        with self._lock:
            try:
                handle = self._files.get(name)
                if handle is None:
                    mode = "a" if name in self._created else "w"
                    self._created.add(name)
                    handle = self._files[name] = open(
                        os.path.join(self.directory, name), mode, encoding="utf-8",
                        errors="replace")
                handle.write(text)
                handle.flush()
            except OSError:
                pass   # a full disk must not fail the run

    def _close_logs(self):
        with self._lock:
            files, self._files = self._files, {}
        for handle in files.values():
            try:
                handle.close()
            except OSError:
                pass

    def log_path(self, task_name, stream="stderr"):
        """The path of the last attempt's ``stream`` log of ``task_name``, or None."""
        task = self._tasks.get(task_name)
        if self.directory is None or not task or not task["attempts"] \
                or not task["attempts"][-1]["logs"]:
            return None
        return os.path.join(self.directory, task["attempts"][-1]["logs"][stream])

    def tail(self, task_name, stream="stderr", lines=10):
        """The last ``lines`` lines of a task's last attempt's log."""
        path = self.log_path(task_name, stream)
        try:
            with open(path, "rb") as handle:
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - 64 * 1024))
                text = handle.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return []
        return [line.rsplit("\r", 1)[-1] for line in text.splitlines()[-lines:]]

    # -- saving -----------------------------------------------------------

    def flush(self):
        """Save run.json when something changed, at most every SAVE_INTERVAL."""
        if self._dirty and time.monotonic() - self._saved >= SAVE_INTERVAL:
            self.save()

    def save(self):
        if self.directory is None:
            return
        with self._lock:
            self._create_logs()
            text = json.dumps(self._data, indent=1)
            self._dirty, self._saved = False, time.monotonic()
            temporary = os.path.join(self.directory, ".run.json.tmp")
            try:
                with open(temporary, "w", encoding="utf-8") as handle:
                    handle.write(text + "\n")
                os.replace(temporary, os.path.join(self.directory, "run.json"))
            except OSError:
                pass   # the record is a help, not a reason to fail the run

    @property
    def outcome_status(self):
        return self._data["outcome"]["status"]

    @property
    def hint(self):
        """The outcome's hint (None without one)."""
        return self._data["outcome"]["hint"]

    def snapshot(self):
        """A copy of what run.json holds."""
        with self._lock:
            return json.loads(json.dumps(self._data))

    # -- helpers ----------------------------------------------------------

    def _create_logs(self):
        """Every forwarding attempt has both files, empty until output comes."""
        for _, attempt in list(self._attempts.values()):
            for name in (attempt["logs"] or {}).values():
                if name not in self._created:
                    self._write_log(name, "")

    def _end_attempts(self):
        """Every attempt without a terminal state (the framework was torn
        down before Mesos' update came) ends with its exit frame, else as
        stopped by tfrun."""
        with self._lock:
            for task_id, (task, attempt) in self._attempts.items():
                states = attempt["states"]
                if states and states[-1]["state"] in TERMINAL_STATES:
                    continue
                code = attempt["exit_code"]
                if task_id in self._exits and code is not None:
                    end = {"state": "TASK_FINISHED" if code == 0 else "TASK_FAILED",
                           "time": self._exits[task_id], "source": EXIT_FRAME, "reason": None,
                           "message": "exited with code %d; Mesos' update did not come before "
                                      "the framework was torn down" % code}
                else:
                    end = {"state": "TASK_KILLED", "time": timestamp(),
                           "source": STOPPED_BY.get(self._data.get("mode"), STOPPED_BY["replica"]),
                           "reason": None, "message": "no exit frame and no update from Mesos "
                                                      "before the framework was torn down"}
                states.append(end)
                self._summarize(task)

    def _update(self, task_id, key, value):
        with self._lock:
            task, attempt = self._attempts.get(task_id, (None, None))
            if attempt is not None:
                attempt[key] = value
                self._summarize(task)

    def _summarize(self, task):
        last = task["attempts"][-1]
        task["state"] = last["states"][-1]["state"] if last["states"] else "TASK_STAGING"
        task["exit_code"] = last["exit_code"]
        self._dirty = True

    def _set_timing(self, name):
        with self._lock:
            if self._data["timings"][name] is None:
                self._data["timings"][name] = timestamp()
                self._dirty = True
