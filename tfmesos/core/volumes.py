"""Volume options (``-V HOST:CONTAINER[:ro|rw]``), parsed and validated.

Pure functions, shared by the scheduler's ``-V`` option and the ``docker run``
wrapper. Modes are returned in Mesos' spelling (``"RW"``/``"RO"``), which is
also what the local master's runners take.
"""

import posixpath
from typing import NoReturn

from tfmesos.exceptions import SpecError

__all__ = ["parse_volume", "VOLUME_FORMAT"]

VOLUME_FORMAT = "HOST:CONTAINER[:ro|rw], e.g. /nfs/data:/data:ro"

_MODES = {"rw": "RW", "ro": "RO"}


def _fail(text: str, why: str) -> NoReturn:
    raise SpecError("invalid volume %r: %s (expected %s)" % (text, why, VOLUME_FORMAT))


# Where a Mesos agent mounts the sandbox in a container (flags.sandbox_directory).
SANDBOX_MOUNT = "/mnt/mesos/sandbox"


def parse_volume(text: object) -> tuple[str, str, str]:
    """Parse ``"HOST:CONTAINER[:ro|rw]"`` into ``(host, container, mode)``.

    Both paths must be absolute (they are normalised: ``/a/b/`` is
    ``/a/b``); the mode is ``"RW"`` (the default) or ``"RO"``. Anything else
    raises ``SpecError`` with a one-line message naming the problem.
    """
    if not isinstance(text, str):
        raise SpecError("invalid volume %r: expected a string like %s" % (text, VOLUME_FORMAT))
    if not text or any(ch in text for ch in "\n\r\0"):
        _fail(text, "empty or contains control characters")
    parts = text.split(":")
    if len(parts) == 1:
        _fail(text, "no container path")
    if len(parts) > 3:
        _fail(text, "too many ':' (paths containing ':' are not supported)")
    host, container = parts[0], parts[1]
    mode = parts[2] if len(parts) == 3 else "rw"
    for name, path in (("host", host), ("container", container)):
        if not path:
            _fail(text, "the %s path is empty" % name)
        if not path.startswith("/"):
            _fail(text, "the %s path %r is not absolute" % (name, path))
    container = posixpath.normpath(container)
    host = posixpath.normpath(host)
    if container == "/":
        _fail(text, "the container path cannot be '/'")
    if mode.lower() not in _MODES:
        _fail(text, "unknown mode %r, use ro or rw" % mode)
    # posixpath.normpath keeps a leading '//' (POSIX allows it to be special).
    return ("/" + host.lstrip("/"), "/" + container.lstrip("/"), _MODES[mode.lower()])
