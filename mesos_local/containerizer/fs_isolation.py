"""Agents that do not share the submitter's files (``--agent ...,isolate=fs``,
``AgentSpec(isolate=("fs",))``): each task of such an agent runs in a mount
namespace of its own where some directories of this host are hidden under
an empty read-only tmpfs, as on a separate host. By default: the master's
working directory, the home directory and this master's own package
(``default_hidden_paths``); ``--hide PATH`` / ``LocalMaster(hidden_paths=)``
name them instead.

The task is started as ``unshare --mount --propagation private sh -c 'mount
...; exec "$@"' sh ARGV``: unshare and the shell exec in place, so the task's
pid and process group are the ones the executor started. Needs root. A task
that runs as another user (``users.switched``) has its paths hidden by the
step that switches to that user, which runs inside the namespace before
the mounts hide what it runs from (this host's Python, under the home
directory or the master's installation).
"""

import os
import shlex
import shutil

from ..errors import LocalMasterError

ISOLATIONS = ("fs",)
_MOUNT = "mount -t tmpfs -o ro,size=64k,mode=0755 mesos-local-hidden %s"


def default_hidden_paths():
    """The master's working directory, the home directory, and the directory
    of this master's own package."""
    return [os.getcwd(), os.path.expanduser("~"),
            os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]


def check_supported():
    """LocalMasterError (naming the fix) unless tasks can get mount namespaces."""
    if os.geteuid() != 0:
        raise LocalMasterError("isolate=fs needs root (a mount namespace per task): run the "
                               "master as root or drop isolate=fs")
    if shutil.which("unshare") is None:
        raise LocalMasterError("isolate=fs needs util-linux's unshare: install util-linux or "
                               "drop isolate=fs")


def _contains(outer, inner):
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def effective_paths(paths, sandbox):
    """The directories to hide for a task in ``sandbox``: existing ones, not
    ``/``, not the sandbox or a directory above it (the task needs it), and
    none inside another (hidden with it)."""
    sandbox = os.path.realpath(sandbox)
    kept: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if p}):
        if path == "/" or not os.path.isdir(path) or _contains(path, sandbox):
            continue
        if any(_contains(outer, path) for outer in kept):
            continue
        kept.append(path)
    return kept


def hide_script(paths, sandbox):
    """The shell commands (root's, in the task's mount namespace) that hide
    ``paths`` from a task in ``sandbox``; None when none remain."""
    paths = effective_paths(paths, sandbox)
    if not paths:
        return None
    return " && ".join(_MOUNT % shlex.quote(path) for path in paths)


def unshare_argv(argv, script=None):
    """``argv`` in a mount namespace of its own, after ``script`` (None:
    ``argv`` hides what it must itself)."""
    prefix = [shutil.which("unshare") or "unshare", "--mount", "--propagation", "private"]
    if script is None:
        return prefix + list(argv)
    return prefix + ["/bin/sh", "-c", script + ' && exec "$@"', "sh"] + list(argv)


def hidden_argv(paths, sandbox, argv):
    """``argv`` run with ``paths`` hidden (unchanged when none remain)."""
    script = hide_script(paths, sandbox)
    return list(argv) if script is None else unshare_argv(argv, script)


__all__ = ["ISOLATIONS", "default_hidden_paths", "check_supported", "effective_paths",
           "hide_script", "unshare_argv", "hidden_argv"]
