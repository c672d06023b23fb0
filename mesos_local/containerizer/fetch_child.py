"""``python -m mesos_local.containerizer.fetch_child``: one step of the
fetcher in a process of its own, as Mesos' fetcher program, and as a task's
user when it has one, as that program runs as the task's user (``os::su``
in src/launcher/fetcher.cpp) so that "filesystem permissions are
enforced". A task of another user's steps all run here; the agent's own
user's extractions of archives from ``fetcher.CHILD_EXTRACT_BYTES`` up
(smaller ones are not worth a process' start).

Started by the agent with a JSON request on stdin: the user (``uid``,
``gid``, ``groups``; absent: stay the agent's), the step (``fill``: download ``value`` to ``path``, a
cache entry; ``place``: one URI into ``sandbox``, from ``source`` when
cached; ``fetcher.fill`` and ``fetcher.place``), ``stall``, ``limits`` and
the seconds ``remaining`` of the URI's time limit. It imports everything a
step may need while root can still read this interpreter's library, sets
the user's groups, gid and uid, then does the step and answers one JSON
line on stdout: ``{"ok": true}`` or ``{"error": WHY}``. The agent kills it
when the task is killed.
"""

import importlib
import json
import os
import sys
import time

from . import fetcher
from .archives import Limits

# What a step imports on its way (urllib's handlers, TLS, archives and their
# compressions, the codec of host names): the user may not be able to read
# this interpreter's library once it is that user.
PRELOAD = ("bz2", "encodings.idna", "ftplib", "gzip", "lzma", "ssl", "tarfile",
           "urllib.request", "zipfile")


def _preload():
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass    # a Python without bz2 or lzma: such archives fail later, as here


def _never():
    return False    # the agent kills this process instead


def _become(request):
    os.setgroups([int(g) for g in request["groups"]])
    os.setgid(int(request["gid"]))
    os.setuid(int(request["uid"]))
    if (os.getuid(), os.geteuid()) != (request["uid"], request["uid"]):
        raise OSError("the fetcher could not become uid %d" % request["uid"])


def main():
    request = json.loads(sys.stdin.buffer.read())
    becomes = request.get("uid") is not None   # else: as the agent's user
    if becomes:
        _preload()
    try:
        if becomes:
            _become(request)
        limits = Limits(**request["limits"])
        deadline = time.monotonic() + request["remaining"]
        if request["step"] == "fill":
            fetcher.fill(request["value"], request["path"], request["stall"], limits,
                         deadline, _never)
        else:
            fetcher.place(request["uri"], request["value"], request["sandbox"],
                          request["source"], request["stall"], limits, deadline, _never)
        reply = {"ok": True}
    except Exception as exc:    # the step's failure is the URI's
        reply = {"error": fetcher.why(exc)}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
    return 0 if "ok" in reply else 1


if __name__ == "__main__":
    sys.exit(main())
