"""Whether the embedded master can run a run's plain tasks as the run's user
(``tfrun -u USER``), asked before anything starts.

The embedded master runs each plain task as the framework's user, as a
Mesos agent with ``--switch_user`` does (``mesos_local/containerizer/
users.py``): only when it runs as root, and only as a user this machine
knows. That user then starts the task entry (``PYTHON -m tfmesos.task``):
it must be able to run the tasks' interpreter and import tfmesos' task side
(from the submitter's ``PYTHONPATH``, or from the sandbox with ``--ship``).
An interpreter or a checkout under ``/root`` (mode 0700) is no use to any
other user: ``check_task_user`` finds out by trying, as that user, and
names the fix. Container tasks (``--image``) keep their own user handling.
"""

import os
import pwd
import subprocess
from typing import Optional

from ..exceptions import SpecError

PROBE_TIMEOUT = 60

# What of the submitter's environment the tasks of another user get on the
# embedded master (which gives its own tasks all of it, as an agent gives
# its executors its own): the names an interpreter and the task side start
# with, and tfmesos' settings; not the submitter's credentials or HOME.
START_UP_NAMES = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM")
START_UP_PREFIXES = ("LC_", "PYTHON", "TFMESOS_")


def environment_for_another_user(environ):
    """The part of ``environ`` the embedded master hands the tasks of
    another user (``tfrun -u``): ``START_UP_NAMES`` and ``START_UP_PREFIXES``."""
    return {name: value for name, value in environ.items()
            if name in START_UP_NAMES or name.startswith(START_UP_PREFIXES)}


def check_task_user(user: Optional[str], python: Optional[str], pythonpath: Optional[str],
                    switch_user: bool = True, euid: Optional[int] = None,
                    path: Optional[str] = None) -> None:
    """SpecError (one line, naming the fix) unless the embedded master of
    this process can run plain tasks as ``user`` (None: this process's
    own): ``python`` (a path or a name looked up on ``path``, the tasks'
    ``PATH``; None: it comes with the run) must run as that user and, with
    ``pythonpath`` (None: the task side is shipped), import
    ``tfmesos.task``. ``switch_user``: the master's ``switch_user``
    option; ``euid``: this process's effective uid (default: its own)."""
    if not user or not switch_user:
        return
    euid = os.geteuid() if euid is None else euid
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise SpecError.about("{user=%s}: no such user on this machine, where the embedded "
                              "master runs the tasks", user) from None
    if entry.pw_uid == euid:
        return
    if euid != 0:
        raise SpecError.about("{user=%s}: the embedded master runs tasks as %s only when tfrun "
                              "runs as root (as a Mesos agent, it cannot switch users "
                              "otherwise): drop {user}, or run on a Mesos cluster ({master})",
                              user, user)
    if python is None:
        return
    env = {"PATH": path or os.environ.get("PATH", os.defpath)}
    why = _as_user(entry, [python, "-c", ""], env)
    if why is not None:
        raise SpecError.about("{user=%s}: %s cannot run the tasks' Python, %s (%s): give "
                              "{python} an interpreter %s can run (e.g. /usr/bin/python3)",
                              user, user, python, why, user)
    if pythonpath is None:
        return
    why = _as_user(entry, [python, "-c", "import tfmesos.task"], dict(env, PYTHONPATH=pythonpath))
    if why is not None:
        raise SpecError.about("{user=%s}: %s cannot import tfmesos from the tasks' PYTHONPATH "
                              "(%s): give {ship.directory}, which sends the tasks tfmesos' task "
                              "side, or install tfmesos where %s can read it", user, user, why,
                              user)


def _as_user(entry: pwd.struct_passwd, argv: list[str], env: dict[str, str]) -> Optional[str]:
    """None when ``argv`` runs to success as the user of ``entry``, else why not."""
    try:
        done = subprocess.run(argv, user=entry.pw_uid, group=entry.pw_gid,
                              extra_groups=os.getgrouplist(entry.pw_name, entry.pw_gid),
                              env=env, cwd="/", stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=PROBE_TIMEOUT, check=False)
    except OSError as exc:
        return exc.strerror or str(exc)
    except subprocess.TimeoutExpired:
        return "no answer within %d s" % PROBE_TIMEOUT
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else "exit status %d" % done.returncode


__all__ = ["check_task_user"]
