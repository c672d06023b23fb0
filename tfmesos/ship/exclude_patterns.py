"""``--ship-exclude`` patterns (``ShipSpec.exclude``): normalised as the
shell writes paths (``normalised``), then matched against a path in the
bundle and against each of its components (``fnmatch``: ``excluded``), or
against a whole directory (``excludes_all``)."""

import fnmatch
import os

from ..terminal_text import printable
from .ship_errors import ShipError, tilde


def normalised(exclude, directory):
    """``exclude`` as ``excluded`` matches them: ``./data`` and an
    absolute path inside ``directory`` relative to it, and ``**/X`` also
    as ``X`` (gitignore's ``**/`` matches no directory too): each matched
    nothing before, and the files went with no word. ShipError for an
    absolute path outside it."""
    top = os.path.realpath(directory)
    found = []
    for pattern in exclude:
        given = pattern
        if os.path.isabs(pattern):
            real = os.path.realpath(pattern.rstrip("/") or "/")
            if real != top and not real.startswith(top.rstrip("/") + "/"):
                raise ShipError.about("{ship.exclude=%s}: it is outside {ship.directory=%s}, "
                                      "which holds what is shipped: give a pattern or a path "
                                      "inside it", printable(given), printable(tilde(top)))
            pattern = os.path.relpath(real, top) + ("/" if pattern.endswith("/") else "")
        while pattern.startswith("./"):
            pattern = pattern[2:].lstrip("/")
        if pattern in ("", ".", "./"):
            raise ShipError.about("{ship.exclude=%s} would leave out the whole directory: "
                                  "ship another one, or none", printable(given))
        found.append(pattern)
        if pattern.startswith("**/") and pattern[3:]:
            found.append(pattern[3:])
    return tuple(found)


def excludes_all(directory, patterns):
    """Whether ``patterns`` exclude every path under ``directory``."""
    parts = directory.split("/")
    return any(any(fnmatch.fnmatch(part, pattern.rstrip("/")) for part in parts)
               or ("/" in pattern.rstrip("/") and fnmatch.fnmatch(directory, pattern.rstrip("/")))
               for pattern in patterns)


def excluded(path, patterns):
    parts = path.split("/")
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(path, pattern) or any(fnmatch.fnmatch(part, pattern)
                                                 for part in parts):
            return True
        # a directory pattern with a slash: "data/raw" drops data/raw/...
        if "/" in pattern and any(fnmatch.fnmatch("/".join(parts[:i]), pattern)
                                  for i in range(1, len(parts))):
            return True
    return False


__all__ = ["excluded", "excludes_all", "normalised"]
