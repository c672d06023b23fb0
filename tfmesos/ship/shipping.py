"""``tfrun --ship``: what a run sends to every task, and how each task gets it.

A ``Shipment`` is made when the run starts (``ClusterRun.start``): it packs
the user's directory (``bundle.pack``) and the task side of tfmesos
(``bundle.pack_task_side``), and serves both, with a local ``--python-env``
archive, from a ``BundleServer`` until the run stops. Each TaskInfo then
carries them as ``CommandInfo.uris`` (apache/mesos docs/fetcher.md): the
agent's fetcher puts them in the task's sandbox before the command starts,
for every launch, relaunch and restart alike:

* the bundle, ``cache: true``: downloaded once per agent into its fetcher
  cache and copied from there into each sandbox;
* the task side, a zip, not cached: put on ``PYTHONPATH``, so an agent
  needs only a Python >= 3.9, not tfmesos at the submitter's paths;
* ``extra_files`` (``tfmesos.run``'s function), not cached: put in the
  sandbox as they are;
* ``--python-env``, ``cache: true``: the fetcher cache keeps it per agent
  (keyed by URI), and its ``bin/python3`` runs the task.

None of them is extracted by the fetcher: the task's command checks the
sha256 of each (``fetch_check``: the digests are in the command's own
text, which comes from the scheduler, not over the files' HTTP) before
it extracts the bundle (``project/``, the task's working directory) and
the environment into the sandbox and runs anything. A ``--python-env``
URL is the exception: tfrun never has its bytes, the fetcher extracts it
from its cache unchecked.

Inside containers the sandbox is ``$MESOS_SANDBOX``; the command finds
everything there.

``Shipment.from_packed`` serves what an earlier Shipment packed
(``packed_files``: the very files, so the same names and sha256), packing
nothing: the detached scheduler of ``tfrun --detach`` (its sandbox got the
files from the submitter's Shipment), ``tfmesos attach`` relaunching it, and
``tfmesos attach`` taking a ``tfrun --failover`` run over.

Packed files live in a temporary directory removed when the Shipment stops
(or, when its tfrun was killed first, by the next tfrun: ``work_dirs``), or,
for a run that a later scheduler may take over (``keep_in``: the run
directory's ``shipped/``), in a directory the run keeps while it is left to
its tasks (``stop(keep=True)``) and that goes when it is finally stopped.
"""

import contextlib
import copy
import errno
import logging
import os
import re
import shlex
import shutil
import stat
import tempfile
from typing import Optional

from ..protocol import task_env
from . import work_dirs
from .bundle import (
    ARCHIVE_SUFFIXES,
    TOP,
    WARN_SIZE,
    Bundle,
    file_sha256,
    human_size,
    pack,
    pack_task_side,
)
from .bundle_server import BundleServer
from .contents import ShipError
from .fetch_check import Fetched, check_command

logger = logging.getLogger(__name__)

SANDBOX = '"${MESOS_SANDBOX:-$PWD}"'   # the sandbox, in the task's shell command
ENV_PYTHON = "bin/python3"             # the interpreter of a --python-env archive


# Where writing fails for the place, not for what is written: said so.
_PLACE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)


@contextlib.contextmanager
def _where_written(place):
    """An OSError of ``place`` itself (full, read-only) as one ShipError."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in _PLACE_ERRORS:
            raise
        raise ShipError("cannot write what the run ships in %s: %s: free space there, or "
                        "give the run another (--run-dir DIR for --failover and --detach, "
                        "$TMPDIR otherwise)" % (place, exc.strerror)) from None


class Shipment:
    """The packed files of one run and the server that hands them out.
    ``say(text)`` tells the user what was shipped; ``leave_out``:
    directories never packed (run directories); ``keep_in``: pack into this
    directory (made 0700), kept by ``stop(keep=True)``, instead of a
    temporary one (module docstring). ``from_packed`` serves files an
    earlier Shipment packed (``packed_files``) instead of packing."""

    def __init__(self, spec, bind_host=None, say=None, leave_out=(), keep_in=None):
        if spec.packed:
            # A run taken over serves what it packed (``from_packed``): a
            # ShipSpec read as packed never names what to pack.
            raise ValueError("a packed ShipSpec is served with Shipment.from_packed")
        self.spec = spec
        say = say or logger.info
        self._work: Optional[str]   # stop removes it, unless it is kept
        if keep_in is None:
            with _where_written(tempfile.gettempdir()):
                self._work = work_dirs.make("ship")   # removed by stop, else by the next tfrun
        else:
            with _where_written(keep_in):
                os.makedirs(keep_in, mode=0o700, exist_ok=True)
            found = os.lstat(keep_in)
            if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
                raise ShipError("%s, where the run keeps what it packs, is not a directory of "
                                "yours: remove it" % keep_in)
            os.chmod(keep_in, 0o700)
            self._work = keep_in
        self._kept = keep_in is not None
        self.server: Optional[BundleServer] = None
        self._recorded = None   # from_packed's: the original's record()
        try:
            with _where_written(self._work):
                self._pack(spec, say, leave_out)
            self._hash_served()
            self._serve(bind_host)
        except BaseException:
            self.stop()
            raise

    def _pack(self, spec, say, leave_out):
        """Pack what ``spec`` ships into the work directory."""
        self.bundle = None
        if spec.directory is not None:
            self.bundle = pack(spec.directory, self._work, spec.exclude, spec.max_size,
                               follow_links=spec.follow_links,
                               allow_secrets=spec.allow_secrets, leave_out=leave_out)
            say(self.bundle.summary())
            if self.bundle.archive_size > WARN_SIZE:
                say("warning: the bundle is %s and every task downloads it: keep data out "
                    "of it (--ship-exclude, .gitignore) and read it from shared storage"
                    % human_size(self.bundle.archive_size))
        self.task_side = pack_task_side(self._work)
        self.extra_files = list(spec.extra_files)
        self.python_env = spec.python_env    # as given: run.json's python_env
        self.env_name = self.env_path = None
        if spec.python_env is not None and "://" not in spec.python_env:
            self.env_name = served_env_name(spec.python_env)
            self.env_path = spec.python_env

    @classmethod
    def from_packed(cls, spec, files, bind_host=None, say=None, recorded=None, keep_in=None,
                    hashed=None):
        """A Shipment that serves files an earlier one packed, under the names
        it served them, without packing anything (the detached scheduler, and
        ``tfmesos attach`` relaunching it): the same ``uris`` (but for the
        server's address and secret path), ``environment``, ``command`` and,
        given the original's ``record()`` as ``recorded``, the same
        ``record``. ``files``: ``packed_files()``'s roles -> paths here
        (``bundle`` and ``python_env`` may be None or absent, ``extra:NAME``
        in the original's order). ``spec``: the run's ``ShipSpec``, or None;
        only its ``python_env`` is read, and only without ``recorded`` (whose
        ``python_env`` is the original's): a URL goes to the tasks as it is,
        a file's name is the one ``files["python_env"]`` is served under.
        A content-addressed file (``NAME-<sha256[:16]>.EXT``:
        the bundle, the task side, ``tfmesos.run``'s function) whose sha256
        is not its name's, or not ``recorded``'s, is a ShipError. ``stop``
        removes none of these files, but for ``keep_in``: the directory a
        run kept them in (``tfmesos attach`` of a ``--failover`` run),
        removed by ``stop()`` as a Shipment removes what it packed.
        ``hashed``: {path: sha256} of files whose digest was computed just
        before (``takeover.check_kept``): not read a second time."""
        self = cls.__new__(cls)
        self.spec, self._work, self.server = spec, keep_in, None
        self._kept = keep_in is not None
        say = say or logger.info
        files = dict(files)
        recorded = copy.deepcopy(dict(recorded)) if recorded is not None else None
        self._recorded = recorded
        unknown = [role for role in files if role not in _ROLES and not role.startswith(
            _EXTRA)]
        if unknown:
            raise ShipError("packed files: unknown role%s %s (known: %s, %sNAME)" % (
                "s" if len(unknown) > 1 else "", ", ".join(map(repr, unknown)),
                ", ".join(_ROLES), _EXTRA))
        self.bundle = None
        if files.get("bundle") is not None:
            self.bundle = _packed_bundle(files["bundle"], (recorded or {}).get("bundle"), hashed)
        elif recorded is not None and recorded.get("bundle") is not None:
            raise ShipError("packed files: the run shipped the bundle %s, but no file was "
                            "given for it" % recorded["bundle"].get("name"))
        if files.get("task_side") is None:
            raise ShipError("packed files: the task side zip (role 'task_side') is missing")
        self.task_side = _packed_bundle(files["task_side"], None, hashed)
        if recorded is not None and recorded.get("task_side") != self.task_side.name:
            raise ShipError("packed files: the task side is %s, but the run shipped %s"
                            % (self.task_side.name, recorded.get("task_side")))
        self.extra_files = []
        hashed = dict(hashed or {})
        for role, path in files.items():
            if role.startswith(_EXTRA):
                name = role[len(_EXTRA):]
                if not name or name != os.path.basename(name) or name.startswith("."):
                    raise ShipError("packed files: %r: a plain file name after %r, please"
                                    % (role, _EXTRA))
                hashed[os.path.abspath(path)] = _check_named_sha(name, path, hashed)
                self.extra_files.append((name, os.path.abspath(path)))
        given = recorded.get("python_env") if recorded is not None else \
            (spec.python_env if spec is not None else None)
        self.python_env = given
        self.env_name = self.env_path = None
        env_file = files.get("python_env")
        if env_file is not None:
            if given is not None and "://" in given:
                raise ShipError("packed files: --python-env was the URL %s, not a file" % given)
            self.env_path = os.path.abspath(env_file)
            self.env_name = served_env_name(given or env_file)
            self.python_env = given or self.env_path
        elif given is not None and "://" not in given:
            raise ShipError("packed files: the run shipped --python-env %s, but no file was "
                            "given for it" % given)
        for path in [p for _, p in self.extra_files] + [self.env_path]:
            if path is not None and not os.path.isfile(path):
                raise ShipError("packed files: %s: no such file" % path)
        self._hash_served(hashed)
        try:
            self._serve(bind_host)
        except BaseException:
            self.stop(keep=True)   # not the run's end: its files stay
            raise
        say("serving the shipped files as they were packed: %s" % ", ".join(
            name for name, _ in self._served()))
        return self

    def _served(self):
        """``[(name, path)]`` the server hands out, in ``uris``' order."""
        served = [(self.bundle.name, self.bundle.path)] if self.bundle is not None else []
        served.append((self.task_side.name, self.task_side.path))
        served.extend(self.extra_files)
        if self.env_name is not None:
            served.append((self.env_name, self.env_path))
        return served

    def _hash_served(self, hashed=None):
        """``self.digests``: {path: (sha256, size)} of every file served
        (``hashed``: {path: sha256} known already), what the tasks' command
        checks."""
        known = dict(hashed or {})
        known.update({self.task_side.path: self.task_side.sha256})
        if self.bundle is not None:
            known[self.bundle.path] = self.bundle.sha256
        self.digests = {}
        for _, path in self._served():
            try:
                self.digests[path] = (known.get(path) or file_sha256(path),
                                      os.path.getsize(path))
            except OSError as exc:
                raise ShipError("cannot read %s, which the tasks fetch: %s"
                                % (path, exc.strerror or exc)) from None

    def _serve(self, bind_host):
        self.server = BundleServer(bind_host=bind_host)
        for name, path in self._served():
            self.server.add(name, path)

    @property
    def env_sha256(self):
        """The sha256 of the ``--python-env`` archive served (what the tasks'
        command checks), or None (none, or a URL the tasks fetch)."""
        return self.digests[self.env_path][0] if self.env_path is not None else None

    def packed_files(self):
        """The files this Shipment serves, by role (``from_packed``'s
        ``files``): ``bundle`` (None without), ``task_side``, ``extra:NAME``
        for each extra file, ``python_env`` (None without, or when it is a
        URL)."""
        files = {"bundle": self.bundle.path if self.bundle is not None else None,
                 "task_side": self.task_side.path}
        files.update((_EXTRA + name, path) for name, path in self.extra_files)
        files["python_env"] = self.env_path
        return files

    def uris(self, host):
        """The TaskInfo's ``CommandInfo.uris``; ``host``: this machine's
        address as the agents reach it."""
        server = self.server
        if server is None:   # both constructors serve, or raise
            raise RuntimeError("Shipment.uris: the files are not served")
        # Cached ones (the bundle, the environment): an agent downloads
        # them once for all its tasks (and their relaunches) and copies them
        # from its fetcher cache. Nothing is extracted by the fetcher, but a
        # --python-env URL: the command does it once it checked them
        # (module docstring).
        uris = []
        if self.bundle is not None:
            uris.append({"value": server.url(host, self.bundle.name), "extract": False,
                         "cache": True})
        uris.append({"value": server.url(host, self.task_side.name), "extract": False,
                     "cache": False})
        uris.extend({"value": server.url(host, name), "extract": False, "cache": False}
                    for name, _ in self.extra_files)
        if self.env_name is not None:
            uris.append({"value": server.url(host, self.env_name), "extract": False,
                         "cache": True})
        elif self.python_env is not None:
            uris.append({"value": self.python_env, "extract": True, "cache": True})
        return uris

    def fetched(self):
        """What the tasks' command checks (``fetch_check.Fetched``): every
        file served, in ``uris``' order, the bundle and the environment
        extracted once checked."""
        unpacked = {self.bundle.name if self.bundle is not None else None, self.env_name}
        return [Fetched(name, self.digests[path][0], name in unpacked, self.digests[path][1])
                for name, path in self._served()]

    def environment(self):
        """The task environment's part: where the task entry finds the bundle."""
        if self.bundle is None:
            return {}
        return {task_env.BUNDLE: self.bundle.name, task_env.BUNDLE_DIR: TOP}

    def command(self, image=None, python=None):
        """The task entry's command line: the check of what the task
        fetched (``fetch_check``), then the shipped task side first on
        ``PYTHONPATH``, run by ``python`` (a relative path is in the sandbox
        with ``--python-env``), else the environment's ``bin/python3``, else
        ``python3`` from the agent's (or image's) ``PATH``. The directory of
        the interpreter chosen, then the environment's ``bin/``, come first
        on ``PATH``: ``python`` and ``python3`` in the command are its."""
        interpreter, path = interpreter_and_path(image, python, self.python_env is not None)
        # exec: Mesos' SIGTERM must reach the entry point itself, not a shell.
        return ('%s%sPYTHONPATH=%s/%s"${PYTHONPATH:+:$PYTHONPATH}" exec %s -m tfmesos.task'
                % (check_command(self.fetched()), path, SANDBOX,
                   shlex.quote(self.task_side.name), interpreter))

    def record(self):
        """run.json's ``shipped``."""
        if self._recorded is not None:
            return copy.deepcopy(self._recorded)
        what = {"bundle": self.bundle.record() if self.bundle else None,
                "task_side": self.task_side.name}
        if self.python_env is not None:
            what["python_env"] = self.python_env
        return what

    def stop(self, keep=False):
        """Stop serving and remove the packed files (idempotent); the files
        of ``from_packed`` stay, but for its ``keep_in``. ``keep``: the run
        is left to its tasks, a later scheduler serves what it kept
        (``keep_in``'s; a temporary directory goes all the same)."""
        if self.server is not None:
            self.server.stop()
        if self._work is not None and not (keep and self._kept):
            shutil.rmtree(self._work, ignore_errors=True)


_ROLES = ("bundle", "task_side", "python_env")
SERVED_ENV = "python-env"


def served_env_name(path):
    """The name a ``--python-env`` archive is served and fetched under:
    ``python-env`` and the archive's suffix (which says how the task
    extracts it), never the user's file name, which a URL may not hold
    as written (a quote, a space: Mesos' fetcher refuses "Illegal
    characters in URI", Fetcher::basename, and the task failed 3 times)."""
    lower = os.path.basename(path).lower()
    suffix = max((s for s in ARCHIVE_SUFFIXES if lower.endswith(s)), key=len, default="")
    return SERVED_ENV + suffix
_EXTRA = "extra:"
# A content-addressed name: PREFIX-<the first 16 hex digits of its sha256>.EXT
# A bundle is a .tar; one a run packed before it was (a takeover of such a
# run) a .tar.gz.
_NAMED_SHA = re.compile(r"^[A-Za-z0-9_.-]+-([0-9a-f]{16})\.(?:tar|tar\.gz|zip)\Z")


def _check_named_sha(name, path, hashed=None):
    """The sha256 of ``path`` (``hashed``: {path: sha256} known already),
    served as ``name``; ShipError when ``name`` is content-addressed and
    names another sha256."""
    try:
        sha = (hashed or {}).get(path) or file_sha256(path)
    except OSError as exc:
        raise ShipError("packed files: cannot read %s: %s" % (path, exc.strerror or exc)) \
            from None
    match = _NAMED_SHA.match(name)
    if match and not sha.startswith(match.group(1)):
        raise ShipError("packed files: %s (%s) has sha256 %s, not the one its name says: it "
                        "changed since it was packed" % (name, path, sha))
    return sha


def _packed_bundle(path, recorded, hashed=None):
    """The ``Bundle`` of a packed archive at ``path``, its name content-
    addressed; ``recorded``: the original's ``Bundle.record()`` (its
    ``source``, ``files`` and ``bytes`` are carried over; its sha256 and name
    must be this file's), or None."""
    name = os.path.basename(path)
    if not _NAMED_SHA.match(name):
        raise ShipError("packed files: %s is not a name tfrun --ship packs under "
                        "(NAME-<sha256[:16]>.tar, .tar.gz or .zip)" % name)
    sha = _check_named_sha(name, path, hashed)
    recorded = dict(recorded or {})
    if recorded and (recorded.get("sha256"), recorded.get("name")) != (sha, name):
        raise ShipError("packed files: %s has sha256 %s, but the run shipped %s (%s)" % (
            name, sha, recorded.get("name"), recorded.get("sha256")))
    return Bundle(os.path.abspath(path), name, sha, int(recorded.get("files") or 0),
                  int(recorded.get("bytes") or 0), str(recorded.get("source") or ""))


def interpreter_and_path(image, python, python_env):
    """(the interpreter, a ``PATH=...`` assignment or "") of a task's shell
    command (``Shipment.command``): ``python`` (a relative path is in the
    sandbox when ``python_env``), else with ``python_env`` the environment's
    ``bin/python3``, else ``python3``; with ``image``, the image's
    ``python3``. The chosen interpreter's directory, then the environment's
    ``bin/``, come first on ``PATH``."""
    first = []      # directories put first on PATH, the first first
    if image:
        interpreter = "python3"
    elif python_env:
        chosen = python or ENV_PYTHON
        interpreter = shlex.quote(chosen) if os.path.isabs(chosen) \
            else "%s/%s" % (SANDBOX, shlex.quote(chosen))
        first = [_directory(chosen), "%s/bin" % SANDBOX]
    elif python:
        interpreter = shlex.quote(python)
        first = [_directory(python)]
    else:
        interpreter = "python3"
    first = [d for i, d in enumerate(first) if d and d not in first[:i]]
    path = 'PATH=%s"${PATH:+:$PATH}" ' % ":".join(first) if first else ""
    return interpreter, path


def _directory(python):
    """The directory of ``python`` as the task's shell names it (a relative
    one is in the sandbox), or None for a name looked up on PATH."""
    directory = os.path.dirname(python)
    if not directory:
        return None
    return shlex.quote(directory) if os.path.isabs(directory) \
        else "%s/%s" % (SANDBOX, shlex.quote(directory))


__all__ = ["Shipment", "SANDBOX", "ENV_PYTHON", "interpreter_and_path"]
