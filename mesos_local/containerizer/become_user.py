"""``python -I -S become_user.py [--before SCRIPT] [--exec PROGRAM] ENV_FD UID
GID GROUPS -- ARGV...``: the last step of a plain task's start when it runs as another
user (``users.switched``).

Run as root after every step that needs root (the task's cgroups, network
namespace, mount namespace), with root's own environment, it reads the
task's environment from ``ENV_FD`` (``NAME=VALUE`` entries, each ending in
a NUL), runs ``SCRIPT`` with ``/bin/sh`` when given (the mounts that hide
paths from the task, ``fs_isolation.hide_script``: they may hide this very
interpreter, already loaded by then), sets the supplementary groups
``GROUPS`` (comma-separated gids), the gid and the uid, in that order, as
Mesos' launcher does (src/slave/containerizer/mesos/launch.cpp), and execs
``ARGV`` (``PROGRAM`` with ``ARGV`` as its argv when given) with the task's
environment in place: the task keeps its pid and
process group. Whatever fails is said on stderr (the sandbox's) in the
launcher's words, and the exit status is 1.

A script of its own, run by path: it imports nothing but ``os`` and ``sys``.
"""

import os
import sys


def _fail(message):
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(1)


def _environment(fd):
    data = b""
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(fd)
    env = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep:
            env[name] = value
    return env


def _run_before(script):
    try:
        pid = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", script], os.environ)
        status = os.waitpid(pid, 0)[1]
    except OSError as exc:
        _fail("Failed to prepare the task's mount namespace: %s" % exc.strerror)
    if status != 0:
        _fail("Failed to prepare the task's mount namespace: '%s' ended with status %d"
              % (script, os.waitstatus_to_exitcode(status)))


def _switch(uid, gid, groups):
    try:
        os.setgroups(groups)
    except OSError as exc:
        _fail("Failed to set supplementary gids: %s" % exc.strerror)
    try:
        os.setgid(gid)
    except OSError as exc:
        _fail("Failed to set gid to %d: %s" % (gid, exc.strerror))
    try:
        os.setuid(uid)
    except OSError as exc:
        _fail("Failed to set uid to %d: %s" % (uid, exc.strerror))
    if (os.getuid(), os.geteuid(), os.getgid(), os.getegid()) != (uid, uid, gid, gid):
        _fail("Failed to change user to uid %d, gid %d" % (uid, gid))


def main(argv):
    args = argv[1:]
    before = None
    if args[:1] == ["--before"] and len(args) > 1:
        before, args = args[1], args[2:]
    program = None
    if args[:1] == ["--exec"] and len(args) > 1:   # argv[0] is not the program
        program, args = args[1], args[2:]
    if len(args) < 6 or args[4] != "--":
        _fail("usage: become_user.py [--before SCRIPT] [--exec PROGRAM] ENV_FD UID GID GROUPS "
              "-- ARGV...")
    fd, uid, gid = int(args[0]), int(args[1]), int(args[2])
    groups = [int(g) for g in args[3].split(",") if g]
    command = args[5:]
    env = _environment(fd)
    # Imports what the path search imports (warnings) while this
    # interpreter's library can still be read: the user may not, and the
    # mounts before may hide it.
    os.get_exec_path(env)
    if before is not None:
        _run_before(before)
    _switch(uid, gid, groups)
    program = command[0] if program is None else program
    try:
        os.execvpe(program, command, env)
    except OSError as exc:
        _fail("Failed to execute '%s': %s" % (program, exc.strerror))


if __name__ == "__main__":
    main(sys.argv)
