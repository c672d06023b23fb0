"""What ``--ship`` packs from a directory, decided before anything is packed
or launched (``select``).

Listed: inside a git work tree, what git would commit (``git ls-files
--cached --others --exclude-standard``: ``.gitignore`` honoured); elsewhere
everything but ``.git``, ``__pycache__``, ``*.pyc`` and virtual environments
(a directory with ``pyvenv.cfg`` or ``conda-meta``): ``listing``. ``exclude``
patterns (``exclude_patterns``: ``fnmatch``, matched against the relative
path and against each of its components) drop more.

Never packed: run directories — any ``tfmesos-runs``, the directories given
as ``leave_out`` (the run's own, ``$TFMESOS_RUNS_DIR``) and any directory
holding a run record (a ``run.json`` of ``record/run_record.py``'s making):
earlier runs' logs.

Symbolic links: one that stays inside the directory is packed as a link
(the fetcher extracts it as one). One that leads out of it (absolute,
``..`` beyond its top, or a ``..`` after a name, which another link may
carry out) points at what the agents do not have: refused,
naming it, unless ``follow_links`` packs what it points to (a file's
content, a directory's files, listed as a directory outside git is).

Likely secrets (``likely_secrets``: by the path in the bundle, or where
the file really is) are refused, naming them, unless ``allow_secrets``.

What cannot be read (a directory that may not be listed or searched, a
file or link that may not be looked at) is refused, naming it, never left
out. What is neither a file, a link nor a directory (FIFOs, sockets,
devices) is left out, and counted (``others``). More files than an archive
of ``max_size`` could hold (``MEMBER_AT_LEAST`` each) are refused as soon
as they are found; the exact size of the archive is ``bundle``'s to check.
"""

import dataclasses
import errno
import os
import posixpath
import stat
from typing import Optional

from ..terminal_text import printable
from .exclude_patterns import excluded, normalised
from .likely_secrets import likely_secret
from .listing import (
    TooMany,
    beyond_a_link,
    git_files,
    into_repositories,
    lstat_in,
    paths_inside,
    readlink_in,
    run_directories,
    walk,
)
from .ship_errors import ShipError, names, tilde, unreadable

ALWAYS_EXCLUDED = ("tfmesos-runs",)
# What a member takes in the archive at the least (bundle.pack's layout):
# its header block (a pax header too where its name needs one: mtimes are
# whole seconds); its content rounds up to blocks.
MEMBER_AT_LEAST = 512


@dataclasses.dataclass(frozen=True)
class Member:
    """One entry of the bundle: ``path`` in it (relative, ``/``-separated),
    read from ``source`` here; ``link``: packed as a symbolic link to this,
    else ``source`` is a regular file. ``followed``: reached through a
    followed link, where it really is (its whole path)."""

    path: str
    source: str
    link: Optional[str] = None
    followed: Optional[str] = None


def select(directory, exclude=(), leave_out=(), follow_links=False, allow_secrets=False,
           max_size=None, others=None):
    """The ``Member``s to pack from ``directory``, sorted by path; ShipError,
    one line naming the fix, for links out of it and likely secrets, and
    as soon as there are more of them than an archive of ``max_size``
    bytes holds (``MEMBER_AT_LEAST`` each): neither the rest of the
    directory nor its files' sizes are looked at. ``others``: a list the
    paths of what is neither a file, a link nor a directory (FIFOs,
    sockets, devices: left out) go to."""
    others = [] if others is None else others
    directory = os.path.abspath(directory)
    if not os.path.isdir(directory):
        raise ShipError.about("{ship.directory=%s}: %s", printable(directory),
                              not_a_directory(directory))
    where = printable(tilde(directory))   # as messages name it
    most = None if max_size is None else int(max_size // MEMBER_AT_LEAST)
    patterns = normalised(exclude, directory) + ALWAYS_EXCLUDED
    left = paths_inside(directory, leave_out)
    from_git = git_files(directory)
    if from_git is None:
        try:
            listed = walk(directory, patterns=patterns, skip=left, most=most)
        except TooMany:
            raise _too_many(where, most, max_size) from None
    else:
        listed, unopened = from_git
        try:
            listed = into_repositories(directory, listed, most)
        except TooMany:
            raise _too_many(where, most, max_size) from None
        for path, why in unopened:   # one left out is not read, as the walk does not
            inside = path.rstrip("/")
            if not excluded(inside, patterns) and not any(
                    inside == run or inside.startswith(run + "/") for run in left):
                raise ShipError.about("{ship.directory}: cannot read %s: %s",
                                      printable(path), printable(why))
    listed = sorted(set(listed))
    runs = left + run_directories(directory, listed)
    members, leading_out = [], []
    linked: dict[str, bool] = {}
    for path in listed:
        if excluded(path, patterns) or any(path.startswith(run + "/") for run in runs):
            continue
        if from_git is not None and beyond_a_link(directory, path, linked):
            # Git lists a committed file whose directory is now a link (a
            # .gitignore'd one, to ~/.aws): git says it is deleted; read
            # through the link it shipped what is outside the directory.
            continue
        full = os.path.join(directory, path)
        found = lstat_in(directory, path)
        if found is None:   # git lists deleted files
            continue
        if stat.S_ISLNK(found.st_mode):
            target = readlink_in(directory, path)
            if _stays_inside(path, target):
                members.append(Member(path, full, link=target))
            elif follow_links:
                try:
                    members.extend(_followed(where, path, full, target, patterns,
                                             (os.path.realpath(directory),), others,
                                             None if most is None else most - len(members)))
                except TooMany:
                    raise _too_many(where, most, max_size) from None
            else:
                leading_out.append("%s -> %s" % (path, target))
        elif stat.S_ISREG(found.st_mode):
            members.append(Member(path, full))
        elif not stat.S_ISDIR(found.st_mode):   # (a repository's directory: walked above)
            others.append(path)
        if most is not None and len(members) > most:
            raise _too_many(where, most, max_size)
    if leading_out:
        raise ShipError.about("{ship.directory=%s}: links lead out of it, to what the agents "
                              "do not have: %s; make them relative links inside it ('..' steps "
                              "first, then names), leave them "
                              "out ({ship.exclude}), or ship what they point to with "
                              "{ship.follow_links=True}", where, names(leading_out))
    if not allow_secrets:
        top = _as_path(os.path.realpath(directory))
        found = sorted({_secret(member, top) for member in members} - {None})
        if found:
            raise ShipError.about("{ship.directory=%s}: likely secrets would go to every task: "
                                  "%s; leave them out with {ship.exclude} (or .gitignore), or "
                                  "pass {ship.allow_secrets=True}", where, names(found))
    return sorted(members, key=lambda member: member.path)


def _too_many(where, most, max_size):
    return ShipError.about("{ship.directory=%s}: more than %d files, each at least %s in the "
                           "archive, are over {ship.max_size=%s}: leave them out with "
                           "{ship.exclude} or .gitignore, or read large data from shared "
                           "storage", where, most, human_size(MEMBER_AT_LEAST),
                           human_size(max_size))


def not_a_directory(path):
    """Why ``path``, which is not a directory, cannot be shipped."""
    return "a file, not a directory: ship the directory it is in" \
        if os.path.isfile(path) else "no such directory"


def left_out(others):
    """What a summary says of ``others`` (``select``'s), or ""."""
    if not others:
        return ""
    return "; left out %d that %s neither a file, a link nor a directory: %s" % (
        len(others), "is" if len(others) == 1 else "are", names(others))


def human_size(size):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return "%.1f %s" % (size / scale, unit)
    return "%d byte%s" % (size, "" if size == 1 else "s")


def _secret(member, top):
    """What of ``member`` looks like a secret (``likely_secret``): its path
    in the bundle, or where it really is (``top``: the real path of the
    directory it is in, as ``_as_path`` writes it): ``--ship /etc``'s
    ``shadow``, a followed link to ``/etc/shadow``."""
    named = likely_secret(member.path)
    real = member.followed if member.followed is not None else "%s/%s" % (top, member.path)
    if named is None and likely_secret(real):
        return member.path
    return named


# -- links ---------------------------------------------------------------------------------


def _stays_inside(path, target):
    """Whether the link at ``path`` (relative to a top) to ``target`` leads
    to a place under that top whatever the other links: relative, its
    ``..`` steps first and no more of them than the directories above it,
    then down only; so no chain of such links leads out (``sub/s -> ..``
    then ``up -> sub/s/..``, which reads as ``sub`` but is the top's
    parent). The embedded agent's fetcher extracts such links only
    (mesos_local/containerizer/archives.py, ``_link_inside``)."""
    if not target or posixpath.isabs(target):
        return False
    steps = [step for step in target.split("/") if step not in ("", ".")]
    ups = 0
    while ups < len(steps) and steps[ups] == "..":
        ups += 1
    return ".." not in steps[ups:] and ups <= path.count("/")


def _followed(where, path, full, target, patterns, following, others, most=None):
    """The members that stand for the link ``full`` at ``path`` (of the
    directory ``where``, as errors name it), which points at ``target``
    (as its caller read it): its target's content;
    ``following``: the real paths of the directories being packed, which a
    link back into would never end; ``TooMany`` past ``most`` members
    (what the early stop has left: links to links to ... fanned out to
    131,072 members, walked for 19 s before the stop looked)."""
    real = os.path.realpath(full)
    try:
        reached = os.stat(real)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            raise unreadable(path, exc) from None
        reached = None
    if reached is not None and stat.S_ISREG(reached.st_mode):
        return [Member(path, real, followed=_as_path(real))]
    if reached is None or not stat.S_ISDIR(reached.st_mode):
        raise ShipError.about("{ship.directory=%s}: %s -> %s leads to nothing to ship: fix the "
                              "link, or leave it out ({ship.exclude})", where, printable(path),
                              printable(target))
    if real in following:
        raise ShipError.about("{ship.directory=%s}: %s -> %s loops back to a directory it is "
                              "in: leave it out ({ship.exclude})", where, printable(path),
                              printable(target))
    members = []
    for inner in sorted(walk(real, named=path + "/", patterns=patterns, prefix=path + "/",
                              most=most)):
        inside = "%s/%s" % (path, inner)
        if excluded(inside, patterns):
            continue
        source = os.path.join(real, inner)
        found = lstat_in(real, inner, path + "/")
        if found is None:
            continue
        if stat.S_ISLNK(found.st_mode):
            link = readlink_in(real, inner, path + "/")
            if _stays_inside(inner, link):
                members.append(Member(inside, source, link=link, followed=_as_path(source)))
            else:
                members.extend(_followed(where, inside, source, link, patterns,
                                         following + (real,), others,
                                         None if most is None else most - len(members)))
        elif stat.S_ISREG(found.st_mode):
            members.append(Member(inside, source, followed=_as_path(source)))
        elif not stat.S_ISDIR(found.st_mode):
            others.append(inside)
        if most is not None and len(members) > most:
            raise TooMany()
    return members


def _as_path(real):
    """An absolute path as ``likely_secrets`` reads paths: ``/``-separated,
    relative to the root (a file under ~/.ssh is as secret as ~/.ssh)."""
    return real.replace(os.sep, "/").lstrip("/")


__all__ = ["Member", "ShipError", "select", "tilde", "left_out", "not_a_directory",
           "ALWAYS_EXCLUDED"]
