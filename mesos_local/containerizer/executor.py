"""Running one task on a local agent: ``TaskProcess`` (the thread that
prepares the sandbox, fetches, launches through a runner, waits, kills and
reaps). A plain process task is killed as completely as Mesos destroys a
container: by its cgroups when it has them, else by its process tree
(``process_tree.py``).

Nothing here touches the master's state: a ``TaskProcess`` reports back
through callbacks from its own thread.

A task belongs to its user where the agents switch users
(``users.UserSwitch``): its sandbox is 0750 and that user's and its URIs
are fetched as that user, whatever runs it (a Mesos agent fetches a Docker
task's as its user too: ``DockerContainerizerProcess::fetch``,
src/slave/containerizer/docker.cpp); a plain task's runner switches to it
(``launch.run_as``), a container runs as its image says. A sandbox that
cannot be given to its user is a task that never launched (``dropped``),
as Mesos' agent reports it.

With an ``isolator`` (``cgroups.Isolator``) a plain process task runs in
cgroups of its own: the OOM killer acting there is a memory limitation
(``limitation``), upon which the whole task is killed at once, as Mesos
destroys a container whose isolator reported one; the cgroups go with the
task. A container runner's task reports its own (``handle.limitation()``).
Its processes that left its cgroups are killed by ``escapes`` (an
``escapes.EscapeSweeper``) after its terminal update, else at its end here.

A task is watched by the master's watchdog (``watchdog.py``) from its
launch to its destruction: should the master die meanwhile, the watchdog
ends it, a plain process task's processes or a Docker task's container.
"""

import logging
import os
import signal
import threading
import time
from typing import Optional

from .fetcher import FetchError, fetch_uris
from .oom_watch import LIMITATION_POLL, OOM_WATCH
from .process_tree import destroy_task, signal_task, start_ticks, task_processes
from .resource_usage import process_group_usage
from .runner import ProcessRunner, RunnerError, RunningTask
from .sandbox_dirs import make_sandbox
from .users import UserError, open_log, sandbox_message

log = logging.getLogger(__name__)

# Tasks being started at once (cgroups, the runner's launch; not their
# fetch, which Mesos runs in a process of its own), in this process: a Mesos agent launches containers on
# libprocess' worker threads, max(8, cores) of them
# (3rdparty/libprocess/src/process.cpp). Hundreds of launch threads at once
# would starve the master's own threads: an ACCEPT of 210 tasks was not
# answered within the scheduler's 10-s call timeout.
LAUNCH_SLOTS = max(8, os.cpu_count() or 1)
LAUNCHES = threading.BoundedSemaphore(LAUNCH_SLOTS)


_OWN_START: list = [None, None]   # (pid, its start ticks): this master's, read once


def _own_start():
    """When this process started (``start_ticks``), read once per process."""
    pid = os.getpid()
    if _OWN_START[0] != pid:
        _OWN_START[:] = [pid, start_ticks(pid)]
    return _OWN_START[1]


class TaskProcess:
    """Runs one task on its own thread: sandbox, fetch, ``runner.launch``,
    wait, cleanup. ``kill`` may be called from any thread at any time.

    Callbacks (from the task's thread): ``on_running(proc)`` once launched,
    ``on_exit(proc, status, error)`` exactly once at the end: ``status`` is the
    runner's exit status (>= 0 exit code, < 0 signal) or None when the task
    never started, ``error`` the reason it did not (``dropped``: its sandbox
    could not be given to its user).

    ``user``: the task's user (``CommandInfo.user``, else
    ``FrameworkInfo.user``); ``switch``: the agents' ``users.UserSwitch``
    (None: every task is this process' user's).
    ``watchdog``: the master's ``watchdog.Watchdog``, which ends the task
    if the master dies: SIGTERM (a container's stop signal), SIGKILL after
    ``grace`` seconds, at once or, where its framework ``checkpoint``s,
    after the recovery timeout; a container is removed.
    """

    def __init__(self, launch, runner, uris, on_running, on_exit, make_sandbox=True,
                 fetch=None, isolator=None, user=None, switch=None, escapes=None,
                 watchdog=None, grace=0.0, checkpoint=False):
        self.launch = launch
        self.watchdog = watchdog
        self._watched = None        # its key, while the watchdog watches it
        self._shutdown = (grace, checkpoint)
        self.isolator = isolator
        self.escapes = escapes     # escapes.EscapeSweeper: None, swept here at the end
        self.cgroups = None        # cgroups.TaskCgroups of an isolated process task
        self._limits_lock = threading.Lock()   # resize() against _isolate's making them
        self.limitation = None     # Mesos' message when the task outgrew its memory
        self.lost = None           # why its runner lost it while it ran (RunningTask.lost)
        self.runner = runner
        self.uris = uris
        self.user = user
        self.switch = switch
        self.task_user = None      # users.TaskUser: its sandbox's and its fetch's; None: ours
        self.dropped = False
        # fetch(uris, sandbox, cancelled, run_as): the agent's fetcher, as run_as
        self.fetch = fetch or (lambda uris, sandbox, cancelled, run_as:
                               fetch_uris(uris, sandbox, cancelled=cancelled, run_as=run_as))
        self.on_running = on_running
        self.on_exit = on_exit
        self.make_sandbox = make_sandbox
        self.handle: Optional[RunningTask] = None
        self._lock = threading.Lock()
        self._launched = threading.Event()
        self._exited = threading.Event()
        self._kill_deadline: Optional[float] = None
        self._kill_wake = threading.Event()   # a new deadline, or the task's end
        self._terminate_first = True
        self._killer = None
        self._local_group = None   # process group of a ProcessRunner task
        self._started = None       # its leader's start (process_tree.start_ticks)
        self._marker = ("MESOS_SANDBOX=%s" % launch.env["MESOS_SANDBOX"]).encode() \
            if launch.env.get("MESOS_SANDBOX") else None
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="task-%s" % launch.task_id)

    def usage(self):
        """(user cpu seconds, system cpu seconds, resident bytes) of the
        task's processes now (``resource_usage.process_group_usage``), the cpu time
        of its cgroups where they have it; None when nothing is measured
        (not started, ended, or run by a container engine)."""
        measured = process_group_usage(self._local_group)
        if measured is None:
            return None
        cgroups = self.cgroups
        total = cgroups.cpu_seconds() if cgroups is not None else None
        if total is not None and total > measured[0] + measured[1]:
            # The cgroup counts what exited children used too; split as measured.
            user, system, rss = measured
            share = user / (user + system) if user + system else 1.0
            return total * share, total * (1 - share), rss
        return measured

    @property
    def killing(self):
        return self._kill_deadline is not None

    def start(self):
        self._thread.start()

    def join(self, timeout=None):
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _start(self):
        """Prepare and launch the task: (None, None), or (None, why it did
        not start); ``self.handle`` once launched."""
        status, error = None, None
        ahead = None   # the watchdog's key of the watch ahead of its start
        try:
            if self.switch is not None:
                self.task_user = self.switch.task_user(self.user)
                if isinstance(self.runner, ProcessRunner):
                    self.launch.run_as = self.task_user
            if self.make_sandbox:
                self._make_sandbox()
            if self.uris:
                self.fetch(self.uris, self.launch.sandbox, lambda: self.killing,
                           self.task_user)
            with LAUNCHES:
                if not self.killing:
                    self._isolate()
                    ahead = self._watch_ahead()
                    self.handle = self.runner.launch(self.launch)
            if self.handle is None:
                error = "killed before it was launched"
            elif isinstance(self.runner, ProcessRunner):
                self._local_group = getattr(self.handle, "pid", None)
                if self._local_group is not None:
                    self._started = start_ticks(self._local_group)
                    self._watch()
            else:
                self._watch_container()

        except UserError as exc:
            self.dropped = True
            error = sandbox_message(self.launch.sandbox, self.user, exc)
        except FetchError as exc:
            error = str(exc)
            self._note_in_stderr(error)
        except RunnerError as exc:
            error = str(exc)
        except OSError as exc:
            error = "cannot prepare the sandbox %s: %s" % (self.launch.sandbox, exc)
        except Exception as exc:  # a runner bug must not leave the task hanging
            log.exception("task %s: the runner failed", self.launch.task_id)
            error = "the local master's runner failed: %s: %s" % (type(exc).__name__, exc)
        finally:
            # The watch ahead goes once the task's own took its place, or it never
            # started; else it is the task's watch (forgotten at its end).
            if ahead is not None:
                if self._watched is not None or self.handle is None:
                    self.watchdog.forget(ahead)
                else:
                    self._watched = ahead
        return status, error

    def _run(self):
        status, error = self._start()
        self._launched.set()
        if self.handle is not None:
            if self.killing:
                self._ensure_killer()
            else:
                self.on_running(self)
            status = self._wait(self.handle)
            self._set_exited()
            self._note_limitation(self.handle, status)
            lost = getattr(self.handle, "lost", None)   # (a runner's own handle may lack it)
            self.lost = lost() if lost is not None else None
            try:
                self.handle.cleanup()
            except Exception:  # cleanup is best effort
                log.exception("task %s: cleanup failed", self.launch.task_id)
            # As Mesos destroys a container before its terminal update: the
            # task's ports and files are free once the scheduler hears of it.
            # A task with cgroups is all in them (cgroups.destroy, below).
            if self._local_group is not None and self.cgroups is None:
                destroy_task(self._local_group, self._marker, since=self._started)
        if self.cgroups is not None:
            self.cgroups.destroy()
            # A process may leave its cgroups (a root task can write its pid
            # elsewhere): its environment still names the task's sandbox. Swept
            # with other tasks' after the update where a sweeper is given.
            if self._marker is not None:
                if self.escapes is not None:
                    self.escapes.add(self._marker, self._started)
                else:
                    destroy_task(None, self._marker, since=self._started)
        self._set_exited()
        if self._watched is not None:
            self.watchdog.forget(self._watched)
        self.on_exit(self, status, error)

    def _watch_ahead(self):
        """A plain task watched before it starts, by what carries its
        marker and by its cgroups (``_watch`` then adds its group): a master
        killed between its start and ``_watch`` would leave it running. The
        key, or None."""
        if self.watchdog is None or self._marker is None \
                or not isinstance(self.runner, ProcessRunner):
            return None
        cgroups = self.cgroups.directories.values() if self.cgroups is not None else ()
        grace, checkpoint = self._shutdown
        return self.watchdog.watch(None, _own_start(), self._marker, cgroups, grace, checkpoint)

    def _watch(self):
        if self.watchdog is None:
            return
        cgroups = self.cgroups.directories.values() if self.cgroups is not None else ()
        grace, checkpoint = self._shutdown
        self._watched = self.watchdog.watch(self._local_group, self._started, self._marker,
                                            cgroups, grace, checkpoint)

    def _watch_container(self):
        """A container runner's task (``DockerTask``: ``id``), by its container."""
        container = getattr(self.handle, "id", None)
        if self.watchdog is None or not isinstance(container, str) or not container:
            return
        grace, checkpoint = self._shutdown
        self._watched = self.watchdog.watch_container(container, grace, checkpoint)

    def _make_sandbox(self):
        """The sandbox and its stdout and stderr; a plain task's is its user's."""
        make_sandbox(self.launch.sandbox, self.task_user, give=self.switch is not None,
                     below=self.launch.sandbox_below)

    def _note_in_stderr(self, text):
        """As Mesos' fetcher, whose output goes to the sandbox's stderr
        (src/slave/containerizer/fetcher.cpp): there for whoever reads it."""
        try:
            log_fd = open_log(self.launch.stderr_path, self.task_user,
                              create=self.launch.creates_logs)
            with os.fdopen(log_fd, "a", encoding="utf-8") as err:
                err.write(text + "\n")
        except OSError:
            pass

    def _set_exited(self):
        self._exited.set()
        self._kill_wake.set()

    def _isolate(self):
        """Make the cgroups of an isolated plain process task (the runner
        starts it in them)."""
        if self.isolator is None or self.launch.limits is None \
                or not isinstance(self.runner, ProcessRunner):
            return
        try:
            with self._limits_lock:   # a resize meanwhile: its limits, not these
                self.cgroups = self.isolator.prepare(self.launch.task_id, self.launch.limits)
        except OSError as exc:
            raise RunnerError("cannot create the cgroups of task %s: %s"
                              % (self.launch.task_id, exc)) from exc
        self.launch.cgroups = self.cgroups

    def resize(self, limits):
        """New limits for its cgroups (an executor's, as its tasks come and
        go: ``Executors._resize``): applied to them, or, before they exist,
        those they will be made with. Never lost to their making, which
        another thread may be doing (it read the limits before: the
        executor's own and its first task's only). OSError: not applied."""
        with self._limits_lock:
            self.launch.limits = limits
            cgroups = self.cgroups
            if cgroups is not None:
                cgroups.limits = limits
                cgroups.apply()

    def _wait(self, handle: RunningTask) -> Optional[int]:
        """The exit status of the task (its ``handle``); an isolated task
        whose memory cgroup saw the OOM killer is killed whole at once
        (Mesos' limitation) by the agent's OOM watch."""
        if self.cgroups is None:
            return handle.wait()
        wake = self.cgroups.oom_events()   # None: the watch polls
        try:
            return self._wait_watched(handle, wake)
        finally:
            if wake is not None:
                os.close(wake)   # after the watch forgot it

    def _wait_watched(self, handle: RunningTask, wake: Optional[int]) -> Optional[int]:
        """``_wait`` with the OOM watch looking (woken by ``wake``), or this
        thread where the watch cannot start its own."""
        try:
            OOM_WATCH.watch(self, self._look_for_limitation, wake)
        except RuntimeError as exc:   # no thread for the watch: this one looks
            log.warning("task %s: no OOM watch (%s): its thread looks every %.2f s",
                        self.launch.task_id, exc, LIMITATION_POLL)
            while True:
                status = handle.wait(LIMITATION_POLL)
                if status is not None or self._look_for_limitation():
                    return handle.wait() if status is None else status
        try:
            return handle.wait()
        finally:
            OOM_WATCH.forget(self)

    def _look_for_limitation(self) -> bool:
        """The OOM watch's look (``oom_watch``): kill the task once its
        memory cgroup saw the OOM killer; True then (nothing more to watch).
        A look still running as the task ends never unsets what the task's
        own thread found at its exit (``_note_limitation``)."""
        cgroups = self.cgroups
        if self.limitation is None and cgroups is not None:
            found = cgroups.limitation()
            if found is not None:
                self.limitation = found
                log.info("task %s: %s; killing it", self.launch.task_id, found)
                cgroups.kill()
        return self.limitation is not None

    def _note_limitation(self, handle: RunningTask, status: Optional[int]) -> None:
        if self.limitation is not None:
            return
        try:
            if self.cgroups is not None:
                self.limitation = self.cgroups.limitation(status)
            elif hasattr(handle, "limitation"):
                self.limitation = handle.limitation()
        except Exception:  # a limitation is a diagnosis, not a reason to hang the task
            log.exception("task %s: cannot read its resource limitation", self.launch.task_id)

    def kill(self, grace):
        """SIGTERM now, SIGKILL after ``grace`` seconds (a shorter grace given
        later wins). Never blocks."""
        with self._lock:
            deadline = time.monotonic() + max(0.0, grace)
            if self._kill_deadline is not None and deadline >= self._kill_deadline:
                return
            self._kill_deadline = deadline
        self._kill_wake.set()
        self._ensure_killer()

    def kill_at_once(self):
        """SIGKILL, no SIGTERM first: the task's host is gone (agent removal),
        so the task gets no chance to report its own end. Never blocks."""
        with self._lock:
            self._terminate_first = False
            self._kill_deadline = time.monotonic()
        self._kill_wake.set()
        self._ensure_killer()

    def _ensure_killer(self):
        with self._lock:
            if self._killer is not None:
                return
            self._killer = threading.Thread(target=self._kill_loop, daemon=True,
                                            name="kill-%s" % self.launch.task_id)
        self._killer.start()

    def _kill_loop(self):
        self._launched.wait()
        handle = self.handle
        if handle is None or self._exited.is_set():
            return
        if self._terminate_first:
            self._signal(handle.terminate, signal.SIGTERM, "terminate")
        while True:
            # Cleared before the state is read: a deadline set (or an exit)
            # after this is seen now or wakes the wait below.
            self._kill_wake.clear()
            if self._exited.is_set():
                return
            deadline = self._kill_deadline   # set before the killer starts
            remaining = 0.0 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                self._signal(handle.kill, signal.SIGKILL, "kill")
                return
            self._kill_wake.wait(remaining)

    def _signal(self, handle_method, signum, what):
        """``signum`` to a plain process task's whole tree (its cgroups, else
        its group and escapees), each process once as Mesos' command executor
        does (``os::killtree``, src/launcher/executor.cpp): the leader is in
        both, so ``handle.terminate``/``kill`` only for a task with neither
        (a container: its own stop). Failures are logged."""
        try:
            if self.cgroups is None and self._local_group is None:
                handle_method()
            if self.cgroups is not None:
                held = self.cgroups.signal(signum)
                if self._marker is not None:   # and the processes that left them
                    signal_task(None, self._marker, signum, self._started, held)
            elif self._local_group is not None:
                signal_task(self._local_group, self._marker, signum, self._started)
        except Exception:
            log.exception("task %s: %s failed", self.launch.task_id, what)


def describe_exit(status):
    """Mesos' command executor wording: 'Command exited with status 3',
    'Command terminated with signal Killed'."""
    if status is None:
        return "Command never started"
    if status >= 0:
        return "Command exited with status %d" % status
    try:
        name = signal.strsignal(-status) or "Unknown signal %d" % -status
    except ValueError:
        name = "Unknown signal %d" % -status
    return "Command terminated with signal %s" % name


def describe_container_exit(status):
    """Mesos' docker executor wording (src/docker/executor.cpp, ``_reaped``):
    'Container exited with status 3', the wait status of ``docker run``,
    which exits 128 + N for a container ended by signal N."""
    if status is None:
        return describe_exit(status)
    return "Container exited with status %d" % (status if status >= 0 else 128 - status)


__all__ = ["TaskProcess", "task_processes", "signal_task", "destroy_task", "describe_exit",
           "describe_container_exit"]
