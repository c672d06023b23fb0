"""The temporary directories of a submitting process (what ``--ship``
packs, the scratch files of ``tfrun --detach``, ``tfmesos attach`` and
``tfmesos.run``), named after the process that made them, so that a later
tfrun or ``tfmesos attach`` removes those of one killed before it could
(SIGKILL), as the embedded master removes the cgroups of a master killed so:

    tfmesos-ship-<pid namespace>.<pid>.<start ticks>-XXXXXXXX

``make(kind)`` makes one (0700, ``tempfile.mkdtemp``); ``remove_stale()``
removes, in the temporary directory, those whose creator is gone: a
directory itself (never through a symbolic link), of this user, named
after a process of this pid namespace that is no longer there (its pid
gone or reused: ``record.liveness``). Anything else, a live process's, another
user's or one named otherwise (an older tfmesos's), is left as it is.
"""

import dataclasses
import logging
import os
import re
import shutil
import stat
import tempfile
from typing import Optional

from ..record.liveness import gone, this_process

logger = logging.getLogger(__name__)

KINDS = ("ship", "detach", "attach", "function")
_NAME = re.compile(r"^tfmesos-(?:%s)-(\d+)\.(\d+)\.(\d+)-[A-Za-z0-9_]+$" % "|".join(KINDS))


def _namespace_number(namespace: Optional[str]) -> Optional[int]:
    """4026531836 of ``pid:[4026531836]``, or None."""
    found = re.fullmatch(r"pid:\[(\d+)\]", namespace or "")
    return int(found.group(1)) if found else None


def make(kind: str) -> str:
    """A new temporary directory of ``kind`` (one of ``KINDS``) named after
    this process (where /proc tells its pid namespace and start time; else
    a plain ``tfmesos-KIND-XXXXXXXX``, which nothing removes but its maker)."""
    if kind not in KINDS:
        raise ValueError("%r is not one of %s" % (kind, ", ".join(KINDS)))
    here = this_process()
    namespace = _namespace_number(here.pid_namespace)
    if namespace is None or here.start_ticks is None:
        return tempfile.mkdtemp(prefix="tfmesos-%s-" % kind)
    return tempfile.mkdtemp(prefix="tfmesos-%s-%d.%d.%d-" % (kind, namespace, here.pid,
                                                            here.start_ticks))


def remove_stale(directory: Optional[str] = None) -> list[str]:
    """Remove the directories ``make`` made in ``directory`` (default: the
    temporary directory) for processes that are gone; returns their paths.
    One that cannot be removed is left, not an error."""
    root = directory or tempfile.gettempdir()
    here = this_process()
    namespace = _namespace_number(here.pid_namespace)
    if namespace is None or here.start_ticks is None:
        return []   # no /proc: nothing tells a gone process from a live one
    try:
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    for name in sorted(names):
        found = _NAME.match(name)
        if found is None or int(found.group(1)) != namespace:
            continue
        creator = dataclasses.replace(here, pid=int(found.group(2)),
                                      start_ticks=int(found.group(3)))
        if not gone(creator):
            continue
        path = os.path.join(root, name)
        try:
            status = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid():
            continue   # a symbolic link, or another user's: not ours to remove
        try:
            # rmtree follows no link, here or inside (it refuses a link as its top).
            shutil.rmtree(path)
        except OSError as exc:
            logger.debug("could not remove %s: %s", path, exc)
            continue
        removed.append(path)
    if removed:
        logger.info("removed the temporary directories of tfmesos processes that are gone: %s",
                    ", ".join(removed))
    return removed


__all__ = ["KINDS", "make", "remove_stale"]
