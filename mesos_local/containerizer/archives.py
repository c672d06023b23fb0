"""Extracting a fetched archive into a sandbox, contained by this module's
own checks rather than by trusting ``tarfile``'s filters (CVE-2025-4517
writes outside the destination through ``filter="data"`` on Pythons before
3.11.13 / 3.12.11 / 3.13.4).

Every member lands at a path inside the sandbox, reached through real
directories only (a directory member that names the archive's top, ``.``
or ``./`` as ``tar -C DIR .`` writes it, is the sandbox itself, left as
it is): a member whose parent is a symlink (the archive's own or
one already there) is refused, so no link can carry a later member out.
Symlinks may point only inside the sandbox, by a relative path whose
``..`` steps come first and stay within the real directories above the
link, then go down only: so no chain of links leads out, whichever of
them the archive makes first (``sub/s -> ..`` then ``t -> sub/s/..``,
which a lexical check takes for ``sub``). Hard links only to a regular
file the archive already put there. Devices, fifos and other special files
are refused; what a member replaces is removed first (as ``tar -x``
overwrites it), never written through, and files keep their permission
bits without set-id, sticky, group-write or world bits. What an archive may expand to is bounded
(``Limits``), and a long extraction stops when ``cancelled()`` says so.
"""

import dataclasses
import os
import stat
from typing import Callable, Optional

CHUNK = 1 << 20


class ArchiveError(Exception):
    """The archive is refused; the message says which member and why."""


class _Stopped(ArchiveError):
    """The extraction was cancelled: no refusal of the archive."""


# What every refusal of an archive's content (a member, its expansion)
# starts with, in the task's TASK_FAILED message as ``Failed to fetch 'URI':
# REFUSED: why``. Such an archive is refused however often it is fetched:
# tfrun reads this phrase (tfmesos/core/task_ends.py) and does not relaunch.
REFUSED = "the local master's fetcher refuses this archive"


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one URI may bring into a sandbox: ``max_bytes`` downloaded or
    extracted, an archive expanding to at most ``max_ratio`` times its size
    (or ``min_expansion`` bytes, whichever is more), within ``timeout``
    seconds."""

    max_bytes: int = 4 << 30
    max_ratio: float = 200.0
    min_expansion: int = 64 << 20
    timeout: float = 600.0

    def expansion_for(self, archive_size):
        return min(self.max_bytes, max(self.min_expansion, int(archive_size * self.max_ratio)))


class _Budget:
    """Bytes written so far against the expansion allowed; cancellation."""

    def __init__(self, allowed, archive_size, cancelled):
        self.allowed = allowed
        self.archive_size = archive_size
        self.written = 0
        self.cancelled = cancelled or (lambda: False)

    def spend(self, count):
        self.written += count
        if self.written > self.allowed:
            raise ArchiveError("it expands to more than %d MB (%d times its size)"
                               % (self.allowed >> 20, self.allowed // max(self.archive_size, 1)))
        if self.cancelled():
            raise _Stopped("the fetch was cancelled")


def extract(archive_path, sandbox, limits: Optional[Limits] = None,
            cancelled: Optional[Callable] = None):
    """Extract the tar or zip ``archive_path`` into ``sandbox`` (an existing
    directory); ``ArchiveError`` naming the member that is refused (its
    message ``REFUSED: why``), or saying that it is no archive."""
    import tarfile
    import zipfile

    root = os.path.realpath(sandbox)
    size = os.path.getsize(archive_path)
    budget = _Budget((limits or Limits()).expansion_for(size), size, cancelled)
    try:
        if archive_path.endswith(".zip"):
            with zipfile.ZipFile(archive_path) as archive:
                for info in archive.infolist():
                    _zip_member(archive, info, root, budget)
        else:
            with tarfile.open(archive_path) as archive:
                for member in archive:
                    _tar_member(archive, member, root, budget)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise ArchiveError("it is not a readable archive: %s" % exc) from exc
    except _Stopped:
        raise
    except ArchiveError as exc:
        raise ArchiveError("%s: %s" % (REFUSED, exc)) from None


def _parts(name):
    return [part for part in name.replace("\\", "/").split("/") if part not in ("", ".")]


def names_top(name):
    """Whether member ``name`` names the archive's top itself (``.``,
    ``./``: ``tar -C DIR .`` writes one), which is the sandbox's top."""
    return bool(name) and not name.startswith("/") and not _parts(name)


def inside(root, name, what="member"):
    """Where member ``name`` goes: inside ``root``, by a relative path with no
    ``..``; its parent directories made (real ones, never through a link).
    Its own path is not checked: ``_directory``, ``_write`` and ``os.symlink``
    never follow a link there. ``what`` the error calls ``name``."""
    parts = _parts(name)
    if not parts or name.startswith("/") or ".." in parts:
        raise ArchiveError("%s %r leaves the sandbox" % (what, name))
    directory = root
    for part in parts[:-1]:
        directory = os.path.join(directory, part)
        try:
            mode = os.lstat(directory).st_mode
        except FileNotFoundError:
            os.mkdir(directory, 0o755)
            continue
        if not stat.S_ISDIR(mode):
            raise ArchiveError("%s %r goes through %r, which is not a directory (a link?)"
                               % (what, name, os.path.relpath(directory, root)))
    return os.path.join(directory, parts[-1])


def _directory(path, name):
    """A directory member: made, or a real directory already there."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        os.mkdir(path, 0o755)
        return
    if not stat.S_ISDIR(mode):
        raise ArchiveError("member %r is a directory over something else (a link?)" % name)


def _mode(mode):
    """Permission bits without set-id, sticky, group-write or world bits."""
    return (mode & 0o750) | 0o600


def _replace(path, name):
    """Make room for member ``name`` at ``path``: what is there (a file or a
    link, as ``tar -x`` overwrites it) is removed, never written through."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise ArchiveError("member %r would replace a directory" % name)
    os.unlink(path)


def _write(path, source, mode, budget, name):
    _replace(path, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        while True:
            chunk = source.read(CHUNK)
            if not chunk:
                break
            budget.spend(len(chunk))
            out.write(chunk)
    os.chmod(path, _mode(mode))


def _link_inside(name, linkname):
    """A symlink member may point inside the sandbox only: relative, its
    ``..`` steps first and no more of them than real directories above it
    (``inside`` made its parents real ones), then down only. Each link so
    made leads inside, so any chain of them does."""
    if linkname.startswith("/"):
        # venv-pack's bin/python3, to the base interpreter (issue 26: a
        # fetcher that contains itself makes links only to inside).
        raise ArchiveError("member %r is a link to an absolute path, and only links that stay "
                           "inside the sandbox are extracted here (a Mesos agent's tar takes "
                           "this one): give it to the task as a file that the task extracts "
                           "itself, or make it with conda-pack" % name)
    steps = _parts(linkname)
    ups = 0
    while ups < len(steps) and steps[ups] == "..":
        ups += 1
    if ups > len(_parts(name)) - 1:
        raise ArchiveError("member %r is a link that leaves the sandbox" % name)
    if ".." in steps[ups:]:
        raise ArchiveError("member %r is a link to %r, which may leave the sandbox through "
                           "another link: only leading '..' steps are taken" % (name, linkname))


def _tar_member(archive, member, root, budget):
    name = member.name
    if member.isdir() and names_top(name):
        return   # the sandbox, there already (its mode is the agent's, not the archive's)
    path = inside(root, name)
    if member.isdir():
        _directory(path, name)
        return
    if member.isfile():
        source = archive.extractfile(member)
        if source is None:
            raise ArchiveError("member %r cannot be read" % name)
        _write(path, source, member.mode, budget, name)
    elif member.issym():
        _link_inside(name, member.linkname)
        _replace(path, name)
        os.symlink(member.linkname, path)
    elif member.islnk():
        target = inside(root, member.linkname)
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            raise ArchiveError("member %r is a hard link to %r, which the archive did not put "
                               "there first" % (name, member.linkname)) from None
        if not stat.S_ISREG(mode):
            raise ArchiveError("member %r is a hard link to something other than a file" % name)
        _replace(path, name)
        os.link(target, path, follow_symlinks=False)
    else:
        raise ArchiveError("member %r is a device, fifo or other special file" % name)


def _zip_member(archive, info, root, budget):
    name = info.filename
    mode = info.external_attr >> 16
    if info.is_dir():
        if not names_top(name):   # the sandbox, there already
            _directory(inside(root, name), name)
        return
    # unzip (which Mesos' fetcher runs) takes a member whose mode names no
    # file type (0o644 alone, or no Unix mode at all) for a regular file.
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
        raise ArchiveError("member %r is a link or special file, which a zip does not ship "
                           "here" % name)
    with archive.open(info) as source:
        _write(inside(root, name), source, mode or 0o644, budget, name)


__all__ = ["ArchiveError", "Limits", "REFUSED", "extract"]
