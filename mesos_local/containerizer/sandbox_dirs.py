"""Making a task's sandbox and giving it to the task's user without
following a link (stout's ``os::chown`` walks with ``FTS_PHYSICAL``).

A command task's sandbox lies in the agent's work directory, whose path
only root can change. A nested container's (a task of the DEFAULT
executor: ``containers/<id>`` in its executor's sandbox, Mesos'
``paths::getContainerPath`` layout) lies in a directory its group's tasks
own: any of them can rename a component there at any moment, even between
two steps of the agent. So everything below such a directory is opened
component by component with ``O_NOFOLLOW`` (``open_below``) and used
through its descriptor, and the agent gives only a sandbox directory it
made itself (root's), whose entries are then its own too.
"""

import errno
import os
import stat

from .users import SANDBOX_MODE

DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
LOG_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LinkFound(OSError):
    """A component of a path opened below a directory is a link."""


def open_below(top, path):
    """(a descriptor of the directory ``path``, relative, below the open
    directory ``top``; whether its last component was made here): each
    component made if missing and opened with O_NOFOLLOW, so that no link
    is followed however the tree changes meanwhile (LinkFound)."""
    fd, made = os.dup(top), False
    try:
        for name in path.split("/"):
            if name in ("", "."):
                continue
            try:
                os.mkdir(name, 0o755, dir_fd=fd)   # the agent's, until it gives it
                made = True
            except FileExistsError:
                made = False
            try:
                below = os.open(name, DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(
                        os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise LinkFound(exc.errno, "a link", name) from None
                raise
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd, made


def make_sandbox(sandbox, user, give, below=None):
    """The directory ``sandbox`` with its (empty) ``stdout`` and ``stderr``;
    with ``give``, made 0750 and, with what is in it, owned by ``user`` (a
    TaskUser; None: the master's user keeps it). ``below``: the executor's
    sandbox a nested container's sandbox is in, which only a directory the
    agent made may stand for (OSError otherwise)."""
    if below is None:
        os.makedirs(sandbox, exist_ok=True)
        fd = os.open(sandbox, DIRECTORY | os.O_NOFOLLOW)
    else:
        top = os.open(below, DIRECTORY)
        try:
            fd = open_below(top, os.path.relpath(sandbox, below))[0]
        finally:
            os.close(top)
    try:
        if below is not None and os.fstat(fd).st_uid != os.geteuid():
            # The group's tasks cannot move the agent's directory elsewhere
            # (renaming a directory to another parent needs write access to
            # it), but can put one of theirs where it was.
            raise OSError(errno.EPERM, "the nested sandbox is not the agent's", sandbox)
        for name in ("stdout", "stderr"):
            os.close(os.open(name, LOG_FLAGS | os.O_CREAT, 0o644, dir_fd=fd))
        if give:
            give_directory(fd, user)
    finally:
        os.close(fd)


def give_directory(fd, user):
    """The open directory ``fd`` 0750 and owned by ``user`` (None: left as
    it is), with what the agent made in it: what root owns, entries before
    the directory that holds them (while only root can add to it), links
    given, never followed. A directory already another's (a SANDBOX_PATH
    volume made for the user, which the group's other tasks may have
    filled since) is not entered."""
    if user is not None:
        _give_entries(fd, user, os.geteuid())
    os.fchmod(fd, SANDBOX_MODE)
    if user is not None:
        os.fchown(fd, user.uid, user.gid)


def _give_entries(fd, user, agent):
    """What is in the open directory ``fd`` (``agent``'s), to ``user``."""
    with os.scandir(fd) as entries:
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            if info.st_uid != agent:
                continue
            if not stat.S_ISDIR(info.st_mode):
                os.chown(entry.name, user.uid, user.gid, dir_fd=fd, follow_symlinks=False)
                continue
            below = os.open(entry.name, DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            try:
                _give_entries(below, user, agent)
                os.fchown(below, user.uid, user.gid)
            finally:
                os.close(below)


__all__ = ["DIRECTORY", "LinkFound", "open_below", "make_sandbox", "give_directory"]
