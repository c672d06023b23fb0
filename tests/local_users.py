"""The second local user the tests act as, or give files to: ``nobody``."""

import os
import pwd
import subprocess
import sys

import pytest


def nobody(needs_root=None):
    """``nobody``'s password entry; the test is skipped where there is no
    such user, or, when ``needs_root`` says why root is needed, without root."""
    if needs_root and os.geteuid() != 0:
        pytest.skip(needs_root)
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' here")


def as_user(user, function):
    """The text ``function()`` returns in a forked child of this process
    running as ``user`` (a pwd entry; no supplementary groups), or
    ``raised ...`` for what it raised. No exec: this Python may sit where
    ``user`` cannot run it, and for the same reason what ``function``
    imports must be imported here first."""
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:   # pragma: no cover - the child reports through the pipe
        try:
            try:
                os.setgroups([])
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)
                text = function()
            except BaseException as exc:
                text = "raised %r" % exc
            os.write(writer, text.encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as handle:
        text = handle.read().decode()
    os.waitpid(child, 0)
    return text


def python_for(user, same_version=False):
    """An interpreter ``user`` can run (the tasks' --python), of this one's
    version when ``same_version`` (tfmesos.run's pickles need it), or skip."""
    check = "import sys; assert sys.version_info %s %r" % (
        ("[:2] ==", tuple(sys.version_info[:2])) if same_version else (">=", (3, 9)))
    for python in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3",
                   "/usr/bin/python%d.%d" % sys.version_info[:2]):
        entry = pwd.getpwnam(user)
        try:
            done = subprocess.run([python, "-c", check],
                                  user=entry.pw_uid, group=entry.pw_gid, extra_groups=[],
                                  cwd="/", capture_output=True, timeout=60, check=False)
        except OSError:
            continue
        if done.returncode == 0:
            return python
    pytest.skip("no Python %s that %s can run" % (
        "%d.%d" % sys.version_info[:2] if same_version else ">= 3.9", user))
