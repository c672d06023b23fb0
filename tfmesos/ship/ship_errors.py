"""What cannot be shipped (``ShipError``), and how its messages name paths:
escaped, the home directory as ``~``, a few of many."""

import errno
import os

from ..exceptions import TFMesosError
from ..terminal_text import printable

SHOWN = 5               # names an error lists before "and N more"


class ShipError(TFMesosError):
    """The directory cannot be shipped (too big, unreadable, not a directory,
    a link out of it, likely secrets); it names the ``ShipSpec`` fields to
    change (``error_fields``), which each caller words as it is called."""


def unreadable(path, error, top=None, prefix=""):
    """The ShipError for ``path`` that could not be read, named in the
    bundle as ``prefix + path``; or, where the path is under ``top`` and a
    directory above it may not be searched, that directory."""
    if top is not None and error.errno == errno.EACCES:
        parts = path.split("/")
        for index in range(1, len(parts)):
            if not os.access(os.path.join(top, *parts[:index]), os.X_OK):
                path = "/".join(parts[:index]) + "/"
                break
    return ShipError.about("{ship.directory}: cannot read %s: %s", printable(prefix + path),
                           printable(error.strerror or error))


def tilde(path):
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home):]
    return path


def names(names):
    """The first ``SHOWN`` of ``names`` (file names: their control
    characters escaped) and how many more."""
    shown = ", ".join(printable(name) for name in names[:SHOWN])
    return shown if len(names) <= SHOWN else "%s and %d more" % (shown, len(names) - SHOWN)


__all__ = ["SHOWN", "ShipError", "names", "tilde", "unreadable"]
