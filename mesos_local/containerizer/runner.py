"""How the local master's agents run a task: the seam between the master's
bookkeeping and the processes (or containers) that do the work.

A runner takes a ``TaskLaunch`` and returns a ``RunningTask``. The plain
``ProcessRunner`` runs the command as a subprocess in its own process group
(``ProcessTask``);
a container runner (Docker) implements the same two classes' interface.
"""

import dataclasses
import errno
import os
import signal
import subprocess
import sys
from typing import Any, Optional

from .fs_isolation import hide_script, unshare_argv
from .netns import ip_command
from .pidfd import open_pidfd, wait_readable
from .users import open_log, switched


@dataclasses.dataclass
class TaskLaunch:
    """Everything a runner needs to start one task (no Mesos JSON here)."""

    task_id: str
    framework_id: str
    agent_id: str
    sandbox: str                       # existing directory, the task's cwd
    command: str                       # shell command, or the program when not shell
    arguments: list = dataclasses.field(default_factory=list)   # after argv[0]
    # Without a shell: argv[0] (CommandInfo.arguments[0]; "" without
    # arguments); None: the program's path is argv[0] (the DOCKER
    # containerizer's, where every argument follows it: planning).
    argv0: Optional[str] = None
    shell: bool = True
    env: dict = dataclasses.field(default_factory=dict)   # complete environment
    # The task's own variables (CommandInfo.environment), what a DOCKER
    # container gets of ``env`` (docker_runner); None: all of ``env``.
    task_env: Optional[dict] = None
    user: Optional[str] = None
    image: Optional[str] = None        # container image, None for a plain task
    containerizer: Optional[str] = None  # "MESOS" or "DOCKER" when image is set
    force_pull: bool = False
    volumes: list = dataclasses.field(default_factory=list)  # (host, container, "RW"|"RO")
    docker_parameters: list = dataclasses.field(default_factory=list)  # (key, value)
    gpu_ids: list = dataclasses.field(default_factory=list)  # e.g. ["0", "1"]
    netns: Optional[str] = None        # the agent's network namespace (netns.py)
    hidden_paths: list = dataclasses.field(default_factory=list)  # fs_isolation.py
    limits: Any = None                 # cgroup_limits.Limits when the master isolates, else None
    cgroups: Any = None                # cgroups.TaskCgroups a plain process task joins
    run_as: Any = None                 # users.TaskUser a plain task switches to, None: ours
    # The executor's sandbox a nested container's sandbox is in (its tasks
    # own it: sandbox_dirs.make_sandbox opens below it); None: the agent's.
    sandbox_below: Optional[str] = None
    # The Mesos container id of the task's run (its sandbox's run directory),
    # nested ones as Mesos writes them: parent.child. A Docker container is
    # named after it, as Mesos' Docker containerizer does: mesos-<container id>.
    container_id: Optional[str] = None

    @property
    def creates_logs(self):
        """Whether a missing stdout or stderr may be created at its path: in
        the agent's own tree. A nested container's exist (its sandbox's
        preparation made them): none is created through a link its group's
        tasks planted since."""
        return self.sandbox_below is None

    @property
    def stdout_path(self):
        return os.path.join(self.sandbox, "stdout")

    @property
    def stderr_path(self):
        return os.path.join(self.sandbox, "stderr")

    def argv(self):
        """The command line a container runs (the program as argv[0])."""
        if self.shell:
            return ["/bin/sh", "-c", self.command]
        return [self.command] + list(self.arguments)

    def exec_args(self):
        """(program, argv) of a plain process, as Mesos' launcher execs a
        command without a shell (``MesosContainerizerLaunch::execute``,
        src/slave/containerizer/mesos/launch.cpp): ``value`` with
        ``arguments`` as its whole argv, arguments[0] being argv[0]; an empty
        argv reaches a program as [""] (Linux >= 5.18 gives it that)."""
        argv = self.argv()
        if not self.shell and self.argv0 is not None:
            argv = [self.argv0] + list(self.arguments)
        return argv[0] if self.shell else self.command, argv


class RunningTask:
    """A started task. ``wait`` returns the exit status: >= 0 an exit code,
    < 0 the number of the signal that ended it, None on timeout."""

    def wait(self, timeout=None):
        raise NotImplementedError

    def terminate(self):
        """Ask the task to stop (SIGTERM to the whole process group)."""
        raise NotImplementedError

    def kill(self):
        """Stop the task now (SIGKILL to the whole process group)."""
        raise NotImplementedError

    def cleanup(self):
        """Release what the task held once it has ended (e.g. a container)."""

    def lost(self):
        """Why the runner lost the task while it ran (its container engine
        stopped answering), or None: the task's TASK_FAILED message then."""
        return None


class RunnerError(Exception):
    """The task could not be started; the message goes into TASK_FAILED."""


# The last step of a plain task whose argv[0] is not its program, when other
# steps (cgroups, network or mount namespace) come first: ``python -I -S -c
# EXEC_STEP SCRIPT PROGRAM ARGV...`` runs SCRIPT (the mounts that hide paths,
# which may hide this interpreter, loaded by then) and execs PROGRAM with ARGV,
# in Mesos' launcher's words when it cannot (launch.cpp).
EXEC_STEP = """import os, sys
script, program, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
os.get_exec_path()
if script:
    status = os.waitpid(os.posix_spawn("/bin/sh", ["/bin/sh", "-c", script], os.environ), 0)[1]
    if status:
        sys.stderr.write("Failed to prepare the task's mount namespace\\n")
        os._exit(1)
try:
    os.execvp(program, argv)
except OSError as exc:
    sys.stderr.write("Failed to execute '%s': %s\\n" % (program, exc.strerror))
    os._exit(1)
"""


SHOWN_COMMAND = 200   # characters of a command its failure to start quotes


def start_failure(launch, exc):
    """Why ``launch`` could not start (``exc``), in one line: its command
    quoted, its start only when long (a shipping task's check alone is
    ~900 characters, before the cause); with E2BIG, the size of its
    environment, which is most often what was too big."""
    command = launch.command
    shown = repr(command)
    if len(command) > SHOWN_COMMAND:
        shown = "%r... (%d bytes)" % (command[:SHOWN_COMMAND],
                                      len(command.encode("utf-8", "surrogateescape")))
    why = "cannot start %s: %s" % (shown, exc)
    if exc.errno == errno.E2BIG:
        size = sum(len(("%s=%s" % item).encode("utf-8", "surrogateescape")) + 1
                   for item in launch.env.items())
        why += " (its environment: %d variables, %d bytes)" % (len(launch.env), size)
    return why


class ProcessRunner:
    """Runs a task as a local subprocess, stdout/stderr in its sandbox; in
    its agent's network namespace under ``ip netns exec`` (which execs the
    command in place: the task's pid and process group stay the same); in
    its cgroups (``launch.cgroups``, ``cgroups.py``) from its first
    instruction on; as ``launch.run_as`` (``users.switched``), switched to
    after all that."""

    def launch(self, launch):
        if launch.image:
            raise RunnerError("task %s names the image %r but this agent runs plain "
                              "processes only" % (launch.task_id, launch.image))
        hide = hide_script(launch.hidden_paths, launch.sandbox) if launch.hidden_paths \
            else None
        # A task of another user has its paths hidden by the switching step.
        before = hide if launch.run_as is not None else None
        create = launch.creates_logs
        program, task_argv = launch.exec_args()
        # argv[0] other than the program: exec'd so by Popen's ``executable``
        # when nothing comes before it, else by the last step (become_user's
        # --exec, or EXEC_STEP), which hides paths itself when it must.
        other = program != task_argv[0]
        wrapped = hide is not None or launch.netns is not None or launch.cgroups is not None
        with switched(launch.run_as, launch.env, task_argv, before,
                      program if other else None) as (argv, env, fds), \
                os.fdopen(open_log(launch.stdout_path, launch.run_as, create), "ab") as out, \
                os.fdopen(open_log(launch.stderr_path, launch.run_as, create), "ab") as err:
            executable = None
            hides_itself = before is not None   # the last step hides the paths
            if other and launch.run_as is None:
                if wrapped:
                    argv = [sys.executable, "-I", "-S", "-c", EXEC_STEP, hide or "",
                            program] + argv
                    hides_itself = True
                else:
                    executable = program
            if hide is not None:
                argv = unshare_argv(argv, None if hides_itself else hide)
            if launch.netns is not None:
                argv = [ip_command(), "netns", "exec", launch.netns] + argv
            if launch.cgroups is not None:
                argv = launch.cgroups.join_argv(argv)
            try:
                popen = subprocess.Popen(
                    argv, executable=executable, cwd=launch.sandbox, env=env, pass_fds=fds,
                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    start_new_session=True)
            except OSError as exc:
                raise RunnerError(start_failure(launch, exc)) from exc
        return ProcessTask(popen)


class GroupLeaderTask(RunningTask):
    """A task whose process ``pid`` leads its own process group: stopping it
    signals the whole group."""

    pid: int   # set by the subclass once the process exists

    def _signal_group(self, signum):
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def terminate(self):
        self._signal_group(signal.SIGTERM)

    def kill(self):
        self._signal_group(signal.SIGKILL)

    def cleanup(self):
        # The leader may be gone while children of its group live on.
        self._signal_group(signal.SIGKILL)


class ProcessTask(GroupLeaderTask):
    """A task that is a child process of the agent, ``popen`` (a
    ``subprocess.Popen`` that leads its own process group): a ProcessRunner
    task, or another runner's that started it its own way. Its timed
    ``wait`` ends when the process does: it waits on a pidfd (``pidfd.py``),
    where ``Popen.wait(timeout)`` would sleep in steps of up to 50 ms; then
    ``Popen.wait()`` reaps it, so Popen keeps its returncode. Without
    pidfds, ``Popen.wait(timeout)`` it is."""

    def __init__(self, popen):
        self.popen = popen
        self.pid = popen.pid
        try:
            self._pidfd = open_pidfd(popen.pid)    # not reaped yet: it exists
        except ProcessLookupError:
            self._pidfd = None

    def wait(self, timeout=None):
        if self.popen.returncode is not None:
            return self.popen.returncode
        if self._pidfd is not None and timeout is not None:
            if not wait_readable([self._pidfd], timeout):
                return None
            timeout = None                      # it ended: reap it now
        try:
            status = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._close_pidfd()
        return status

    def _close_pidfd(self):
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            os.close(fd)

    def cleanup(self):
        super().cleanup()
        self._close_pidfd()
