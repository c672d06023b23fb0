"""What a run that outlives its scheduler leaves for the next one
(``tfrun --failover``, ``--detach``; ``tfmesos attach``).

* ``failover.json`` in the run directory (``FailoverFile``): the run's
  saved form, nothing to replay: its identity (``RunIdentity.public()``:
  no key), its spec (``core.spec_codec``: no secret, only secrets' names),
  the files ``--ship`` packed, kept in the run directory (``shipped/``) so
  that a takeover serves exactly those bytes, and the directory its plain
  tasks run in. Written 0600, atomically; read back with every field's
  shape checked before any is used.
* the run's key (its rendezvous secret) under ``$TFMESOS_KEYS_DIR``, else
  ``~/.tfmesos/keys``, one file per run id, readable by its owner only: the
  tasks authenticate the scheduler that takes the run over with it, so
  whoever attaches from another machine copies it there
  (``tfmesos attach --key FILE``). Removed once the run has ended
  (``forget_key``), by whichever sees the end: its scheduler (tfrun, or the
  ``tfmesos attach`` that took it over), ``tfmesos kill``, ``tfmesos attach``
  finding it finished, ``tfmesos runs --prune``.
"""

import contextlib
import dataclasses
import json
import os
import re
import stat
from collections.abc import Mapping
from typing import Any, BinaryIO, Optional, Protocol

from ..exceptions import TFMesosError
from ..protocol import json_documents
from .run_dirs import UnsafeRunDir, check_path

FAILOVER_FILE = "failover.json"
FAILOVER_FORMAT = 2   # 1: tfrun's command line replayed (no "format" field)
KEPT_DIR = "shipped"  # in the run directory: what a --failover run packed
KEY_BYTES = 32
_RUN_ID = re.compile(r"^[0-9a-f]{1,64}\Z")


class TakeoverError(TFMesosError):
    """A run cannot be taken over; the message is one line naming the fix."""


class Keyed(Protocol):
    """What ``save_key`` reads of a run's identity (``core.identity.RunIdentity``,
    which this layer does not import)."""

    @property
    def run_id(self) -> str: ...

    @property
    def key(self) -> bytes: ...


def keys_dir(environ: Mapping[str, str]) -> str:
    return environ.get("TFMESOS_KEYS_DIR") or os.path.join(
        os.path.expanduser("~"), ".tfmesos", "keys")


def check_keys_dir(environ: Mapping[str, str]) -> str:
    """The keys directory, once only the caller and root can change where
    it leads (``run_dirs.check_path``: it, each directory above it, each
    link on the way); TakeoverError naming the fix otherwise: another user
    who could would swap or remove the runs' keys."""
    directory = keys_dir(environ)
    home = os.path.expanduser("~")
    if not environ.get("TFMESOS_KEYS_DIR") and not os.path.isdir(home):
        # (root may make any path: a home that is not there is a mistake)
        raise TakeoverError("the home directory %s, where the runs' keys are kept "
                            "(~/.tfmesos/keys), does not exist: set $TFMESOS_KEYS_DIR to a "
                            "directory of your own" % home)
    try:
        check_path(directory, "the keys directory", "who could swap or remove the runs' keys")
    except UnsafeRunDir as exc:
        raise TakeoverError("%s: set $TFMESOS_KEYS_DIR to a directory of your own" % exc) \
            from None
    return directory


def key_path(run_id: str, environ: Mapping[str, str]) -> str:
    if not _RUN_ID.match(run_id):
        raise TakeoverError("%r is not a run id" % run_id)
    return os.path.join(keys_dir(environ), run_id)


def _write_private(path: str, text: str) -> None:
    """``text`` to ``path``, mode 0600 from its creation, atomically."""
    temporary = "%s.tmp%d" % (path, os.getpid())
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)   # one left by a killed process of the same pid
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)   # a full disk: nothing half-written left behind
        raise


def save_key(identity: Keyed, environ: Mapping[str, str]) -> str:
    """Keep the key of the run ``identity`` (a ``RunIdentity``) in the keys
    directory (``check_keys_dir``: TakeoverError); returns where; OSError."""
    path = key_path(identity.run_id, environ)
    os.makedirs(check_keys_dir(environ), mode=0o700, exist_ok=True)
    check_keys_dir(environ)   # what was made: another user's, made first?
    _write_private(path, identity.key.hex() + "\n")
    return path


def check_keys_writable(environ: Mapping[str, str]) -> str:
    """The keys directory (``check_keys_dir``), made if need be (0700), once
    a key file can be written there: a probe of a key's size written and
    removed. TakeoverError naming the fix otherwise (a read-only or full
    file system, a path through a file): checked before a run is launched,
    so that no run goes on whose key nobody kept."""
    directory = check_keys_dir(environ)
    probe = os.path.join(directory, ".probe%d" % os.getpid())
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        check_keys_dir(environ)   # what was made: another user's, made first?
        _write_private(probe, "0" * (2 * KEY_BYTES) + "\n")
    except OSError as exc:
        raise TakeoverError("cannot keep the run's key in %s (%s): set $TFMESOS_KEYS_DIR to a "
                            "directory you can write" % (directory, exc.strerror or exc)) \
            from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)
    return directory


def forget_key(run_id: str, environ: Mapping[str, str]) -> Optional[str]:
    """Remove the caller's key of run ``run_id``, which has ended, from the
    keys directory; returns its path, or None: there was none, or it is no
    regular file of the caller's, or the keys directory is not the
    caller's alone (``check_keys_dir``: left as it is)."""
    try:
        path = key_path(run_id, environ)
        check_keys_dir(environ)
        found = os.lstat(path)
    except (TakeoverError, OSError):
        return None
    if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
        return None
    try:
        os.unlink(path)
    except OSError:
        return None
    return path


def held_run_ids(environ: Mapping[str, str]) -> list[str]:
    """The run ids the keys directory holds a key file for (sorted)."""
    try:
        names = os.listdir(keys_dir(environ))
    except OSError:
        return []
    return sorted(name for name in names if _RUN_ID.match(name))


class NotRegularFile(OSError):
    """What ``open_regular`` found is no regular file (``mode``: its st_mode)."""

    def __init__(self, mode: int) -> None:
        super().__init__("not a regular file")
        self.mode = mode


def open_regular(path: str, flags: int = 0) -> BinaryIO:
    """``path`` opened for reading, if it is a regular file; OSError
    otherwise (a directory: IsADirectoryError, as ``open`` says), and
    NotRegularFile when it is something else (a FIFO is refused, not waited
    on for a writer)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | flags)
    try:
        handle = os.fdopen(fd, "rb")
    except BaseException:   # a directory: fdopen refuses it, and left it open
        os.close(fd)
        raise
    mode = os.fstat(handle.fileno()).st_mode
    if not stat.S_ISREG(mode):
        handle.close()
        raise NotRegularFile(mode)
    return handle


def read_private(path: str, limit: int, shared: int = 0o022) -> bytes:
    """At most ``limit`` bytes of ``path``, a regular file (never through a
    symbolic link) of this process' user that no one else may write
    (``shared``: the mode bits others must not have); OSError naming the
    problem otherwise. What a run left for its takeover is taken only from
    its submitter: a file others could write or plant is no proof of it."""
    with open_regular(path, os.O_NOFOLLOW) as handle:
        found = os.fstat(handle.fileno())
        if found.st_uid != os.geteuid():
            raise OSError("it belongs to uid %d, not to you" % found.st_uid)
        if found.st_mode & shared:
            raise OSError("others may %s it (mode %o)" % (
                "read or write" if shared & 0o044 else "write", found.st_mode & 0o777))
        return handle.read(limit)


def held_key(run_id: str, environ: Mapping[str, str]) -> Optional[bytes]:
    """The caller's key of run ``run_id`` in the keys directory, or None when
    there is none there; TakeoverError for one that is there but is not
    the caller's alone (another user's, readable or writable by others, in
    a keys directory another user could change: ``check_keys_dir``) or no
    key."""
    try:
        path = key_path(run_id, environ)
    except TakeoverError:     # no run id: no key file can be its
        return None
    if not os.path.lexists(path):
        return None
    check_keys_dir(environ)
    return read_key(path, private=True)


def run_key(run_id: str, environ: Mapping[str, str], key_file: Optional[str] = None) -> bytes:
    """The key of run ``run_id``: ``key_file`` (``tfmesos attach --key``),
    else the caller's in the keys directory; TakeoverError naming the fix."""
    if key_file:
        return read_key(key_file)
    key = held_key(run_id, environ)
    if key is None:
        raise TakeoverError("cannot read the run's key %s (no such file): copy it from the "
                            "machine that submitted the run (tfmesos attach --key FILE)"
                            % key_path(run_id, environ))
    return key


def read_key(path: str, private: bool = False) -> bytes:
    """The secret in a key file ``path`` (``private``: one of the keys
    directory, which must be the caller's alone, ``read_private``);
    TakeoverError naming the problem."""
    try:
        if private:
            data = read_private(path, 4 * KEY_BYTES, shared=0o077)
        else:
            with open_regular(path) as handle:
                data = handle.read(4 * KEY_BYTES)
        text = data.decode("ascii", "replace").strip()
    except OSError as exc:
        raise TakeoverError("cannot read the run's key %s (%s): copy it from the machine that "
                            "submitted the run (tfmesos attach --key FILE)"
                            % (path, exc.strerror or exc)) from None
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) != KEY_BYTES:
        raise TakeoverError("%s is not a tfmesos run key (%d hex digits)" % (path, 2 * KEY_BYTES))
    return secret


@dataclasses.dataclass(frozen=True)
class FailoverFile:
    """``failover.json``: ``identity``, the run's ``RunIdentity.public()``
    (with its framework id); ``spec``, its ``spec_codec.spec_to_dict``;
    ``packed``: ``Shipment.packed_files()``'s roles -> absolute paths of
    the files kept for a takeover (empty: nothing shipped); ``workdir``:
    the absolute directory the run's plain (not shipped) tasks run in.
    Checked on construction (``TakeoverError``)."""

    identity: dict[str, Any]
    spec: dict[str, Any]
    packed: dict[str, str]
    workdir: str

    def __post_init__(self) -> None:
        why = _shape_error(self)
        if why:
            raise TakeoverError(why)

    @property
    def run_id(self) -> str:
        return self.identity["run_id"]

    @property
    def framework_id(self) -> str:
        return self.identity["framework_id"]

    @property
    def master(self) -> str:
        return self.spec["master"]

    def to_dict(self) -> dict[str, Any]:
        return {"format": FAILOVER_FORMAT, "identity": dict(self.identity),
                "spec": dict(self.spec), "packed": dict(self.packed), "workdir": self.workdir}

    @classmethod
    def from_dict(cls, data: object) -> "FailoverFile":
        """The FailoverFile ``to_dict`` wrote; TakeoverError naming what is wrong."""
        if not isinstance(data, dict):
            raise TakeoverError("not a JSON object")
        given = data.get("format", 1)
        if given != FAILOVER_FORMAT:
            raise TakeoverError("written by another tfmesos (format %s; this one reads %d): "
                                "take the run over with the tfmesos that started it"
                                % (given, FAILOVER_FORMAT))
        fields = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(fields) - {"format"})
        if unknown:
            raise TakeoverError("unknown field(s) %s (a newer tfmesos wrote it?): take the run "
                                "over with the tfmesos that started it" % ", ".join(unknown))
        missing = [name for name in fields if name not in data]
        if missing:
            raise TakeoverError("no %s" % ", ".join(missing))
        return cls(**{name: data[name] for name in fields})


def _shape_error(failover: FailoverFile) -> Optional[str]:
    """Why ``failover`` is not a FailoverFile's shape, or None."""
    identity = failover.identity
    if not isinstance(identity, dict) or "key" in identity:
        return "its identity must be the run's public identity (never its key)"
    if not (isinstance(identity.get("run_id"), str) and _RUN_ID.match(identity["run_id"])):
        return "its identity has no run id"
    if not (isinstance(identity.get("framework_id"), str) and identity["framework_id"]):
        return "its identity has no framework id"
    if not isinstance(failover.spec, dict) or not isinstance(failover.spec.get("master"), str):
        return "its spec must be the run's spec, with its master"
    packed = failover.packed
    if not isinstance(packed, dict) or not all(
            isinstance(role, str) and isinstance(path, str) and os.path.isabs(path)
            for role, path in packed.items()):
        return "its packed files must map roles to absolute paths"
    if not isinstance(failover.workdir, str) or not os.path.isabs(failover.workdir):
        return "its workdir must be an absolute path"
    return None


def save_failover(directory: Optional[str], failover: FailoverFile) -> None:
    """Write ``failover`` (a ``FailoverFile``) to ``directory``'s
    failover.json (none without a run directory)."""
    if directory is None:
        return
    _write_private(os.path.join(directory, FAILOVER_FILE),
                   json.dumps(failover.to_dict(), indent=1) + "\n")


def not_taken_over(directory: str) -> TakeoverError:
    """Why a run directory without failover.json cannot be taken over."""
    return TakeoverError("run %s was not started with --failover or --detach: there is "
                         "nothing to take over (its tasks stopped with its tfrun)"
                         % os.path.basename(directory))


def read_failover(directory: str) -> FailoverFile:
    """The ``FailoverFile`` of a run directory, a file of the caller's that
    no one else may write (``read_private``); TakeoverError, one line, if
    there is none or it is not one."""
    path = os.path.join(directory, FAILOVER_FILE)
    try:
        data = json_documents.loads(read_private(path, 16 << 20))
    except FileNotFoundError:
        raise not_taken_over(directory) from None
    except (OSError, ValueError) as exc:
        raise TakeoverError("cannot read %s: %s" % (path, getattr(exc, "strerror", None)
                                                    or exc)) from None
    try:
        return FailoverFile.from_dict(data)
    except TakeoverError as exc:
        raise TakeoverError("%s is not a tfmesos failover file: %s" % (path, exc)) from None
