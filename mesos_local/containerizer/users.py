"""Who a plain task runs as, and what is theirs: Mesos' agent flag
``--switch_user`` (default on, docs/configuration/agent.md).

With it a task runs as its ``CommandInfo.user``, else its
``FrameworkInfo.user`` (``Framework::addExecutor``, src/slave/slave.cpp);
its sandbox is made 0750 and given to that user
(``createSandboxDirectory``, src/slave/paths.cpp), the fetcher runs as that
user (``os::su`` in src/launcher/fetcher.cpp; ``fetch_child.py``) and the
launcher sets the user's groups, gid and uid last, after every step that
needs root, then execs the command (src/slave/containerizer/mesos/
launch.cpp; ``become_user.py``). A user this host does not know, or one a
master not run as root cannot give a sandbox to, is a task that never
launches: the agent's ``Failed to create executor directory`` (``UserError``,
``sandbox_message``). A task of the master's own user needs no switch
(launch.cpp: "No need to change user/groups if the specified user is the
same as the effective user"). Without ``--switch_user`` every task runs as
the master's own user. Container tasks keep the runner's own handling of
their user (``container_options.container_user``).

Root runs nothing with a task's environment here (a framework sets it:
``LD_PRELOAD`` would run its code as root): the steps before the switch get
``step_environment``, and the task's own environment reaches the command
through a file only root can read (``switched``).
"""

import contextlib
import dataclasses
import errno
import os
import pwd
import stat
import sys
import tempfile
from typing import Optional

from .environment import DEFAULT_PATH

SANDBOX_MODE = 0o750        # createSandboxDirectory, src/slave/paths.cpp
WORK_DIR_MODE = 0o711       # the tasks' users pass through to their sandboxes, list nothing
BECOME_USER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "become_user.py")


class UserError(Exception):
    """A task's sandbox cannot be given to its user: Mesos' reason
    (``No such user 'x'``, ``Operation not permitted``)."""


@dataclasses.dataclass(frozen=True)
class TaskUser:
    """A user of this host a task runs as: its uid, primary gid and every
    gid it belongs to (``os.getgrouplist``, as ``os::getgrouplist`` in
    launch.cpp)."""

    name: str
    uid: int
    gid: int
    groups: tuple


def lookup(name):
    """The ``TaskUser`` named ``name``; UserError as stout's ``os::chown``
    words an unknown one (3rdparty/stout/include/stout/os/posix/chown.hpp)."""
    try:
        entry = pwd.getpwnam(name)
    except (KeyError, ValueError):     # ValueError: a NUL in the name
        raise UserError("No such user '%s'" % name) from None
    return TaskUser(name, entry.pw_uid, entry.pw_gid,
                    tuple(os.getgrouplist(name, entry.pw_gid)))


class UserSwitch:
    """The agents' ``--switch_user`` (``enabled``), for a master whose
    effective uid is ``euid`` (default: this process's)."""

    def __init__(self, enabled=True, euid=None):
        self.enabled = bool(enabled)
        self.euid = os.geteuid() if euid is None else int(euid)

    @property
    def switches(self):
        """Whether tasks may run as users other than the master's."""
        return self.enabled and self.euid == 0

    def task_user(self, name):
        """The user a plain task of user ``name`` runs as: None for the
        master's own (switching off, or ``name`` is it), else a TaskUser;
        UserError when its sandbox cannot be given to ``name``."""
        if not self.enabled:
            return None
        user = lookup(name)
        if user.uid == self.euid:
            return None
        if self.euid != 0:
            # A Mesos agent not run as root: chown of the sandbox fails.
            raise UserError(os.strerror(errno.EPERM))
        return user

    def describe(self):
        """What the master says of it once, at its start (None: nothing to say)."""
        if not self.enabled or self.euid == 0:
            return None
        me = _name_of(self.euid)
        return ("not running as root: tasks run as %s; a task of another user does not "
                "launch, as on a Mesos agent that cannot switch users (--no-switch-user runs "
                "every task as %s)" % (me, me))


def root_submissions_error(switch_user, root_submissions, euid=None):
    """Why refusing root submissions (``root_submissions`` false) cannot
    keep tasks from root on a master of effective uid ``euid`` (default:
    this process's) whose agents do not switch users: every task runs as
    root there, whatever user it names. None where it can."""
    euid = os.geteuid() if euid is None else euid
    if root_submissions or switch_user or euid != 0:
        return None
    return ("--no-root-submissions (root_submissions=False) keeps no task from root on a "
            "master run as root with --no-switch-user (switch_user=False): every task runs "
            "as root there; drop --no-switch-user")


def _name_of(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "uid %d" % uid


def sandbox_message(sandbox, name, why):
    """Mesos' agent when a sandbox cannot be given to its user
    (``createExecutorDirectory``, src/slave/paths.cpp)."""
    return ("Failed to create executor directory '%s': Failed to chown directory to '%s': %s"
            % (sandbox, name, why))


def open_log(path, user, create=True):
    """A descriptor to append to the sandbox file ``path`` (stdout, stderr)
    with: never through a link or into anything but a regular file, which
    ``user`` (None: the master's) owns: the sandbox is theirs, and their
    other tasks could have put anything there. Without ``create``, only a
    file that exists (the sandbox's preparation made it): a link planted
    above it since then cannot make root create a file elsewhere."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | (os.O_CREAT if create else 0) | os.O_NOFOLLOW
                 | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != (os.geteuid() if user is None
                                                         else user.uid):
        os.close(fd)
        raise OSError(errno.EPERM, "not a regular file of the task's user", path)
    os.set_blocking(fd, True)
    return fd


def step_environment(env):
    """The environment of the steps before the switch (root's): the default
    PATH and the agent's ``MESOS_*`` variables (by which the task's
    processes are found), nothing a framework chose."""
    kept = {k: v for k, v in env.items()
            if k in ("MESOS_SANDBOX", "MESOS_DIRECTORY", "MESOS_FRAMEWORK_ID",
                     "MESOS_SLAVE_ID", "MESOS_EXECUTOR_ID")}
    kept["PATH"] = DEFAULT_PATH
    return kept


@contextlib.contextmanager
def switched(user: Optional[TaskUser], env, argv, before=None, program=None):
    """``(argv, env, pass_fds)`` that start ``argv`` with ``env`` as
    ``user``: ``become_user.py`` in front of it, the environment in an
    unlinked file root alone can read (its descriptor passed on, closed
    when the context ends), ``before`` (a shell script, root's) run first;
    as given when ``user`` is None."""
    if user is None:
        yield list(argv), env, ()
        return
    first = ["--before", before] if before is not None else []
    if program is not None:   # argv[0] is not the program (TaskLaunch.exec_args)
        first += ["--exec", program]
    with tempfile.TemporaryFile(prefix="mesos-local-env-") as handle:
        handle.write(b"".join(b"%s=%s\0" % (os.fsencode(k), os.fsencode(v))
                              for k, v in env.items()))
        handle.flush()
        handle.seek(0)
        fd = handle.fileno()
        # -I -S: root's interpreter reads nothing of the task's (PYTHON*, site).
        yield ([sys.executable, "-I", "-S", BECOME_USER] + first
               + [str(fd), str(user.uid), str(user.gid), ",".join(str(g) for g in user.groups),
                  "--"] + list(argv),
               step_environment(env), (fd,))


__all__ = ["SANDBOX_MODE", "WORK_DIR_MODE", "UserError", "TaskUser", "lookup", "UserSwitch",
           "root_submissions_error", "sandbox_message", "open_log",
           "step_environment", "switched"]
