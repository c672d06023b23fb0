"""Which framework on a Mesos master is the caller's run: what ``tfmesos
attach``, ``kill``, ``logs --master`` and ``show --master`` act on or read.

A run is found only where it is provably the caller's, never as the first
of several:

* **With a local record** (a run directory of the caller's, under
  ``$TFMESOS_RUNS_DIR`` or ``./tfmesos-runs``, whose failover.json or
  run.json names the run's framework id): that framework, by its id only,
  where the master shows it as the caller's as below (the record is the
  caller's own writing: it names any framework its writer likes).
* **From the master alone**: the frameworks whose ``tfmesos.run_id`` starts
  with what was given (or whose framework id it is), whose ``principal`` is
  the caller's (``MESOS_PRINCIPAL``; a framework with none is one of a
  master that authenticates nobody) and whose ``user`` is the caller's
  (the local user); and where the caller holds the run's key
  (``~/.tfmesos/keys/RUN``, ``$TFMESOS_KEYS_DIR``, ``--key FILE``), only
  those whose ``tfmesos.proof`` label verifies with it
  (``RunIdentity.proves``; a framework proven so is the run's whatever user
  it names: ``tfrun -u``).

Why: labels and the framework's user are what a framework says of itself.
Anyone who reaches a master can subscribe a framework that carries a run's
labels (Mesos lets a framework choose its user, and its principal too where
the master authenticates nobody); on a ``--credentials`` master the
principal is the authenticated one, so another principal's look-alike is
told apart by it. The proof label signs the framework's own id with the
run's key: copied onto another framework it does not verify.

Exactly one candidate is the run. None is an error naming why; two or more
are one line listing them all (framework id, user, principal, start time),
exit status 2 (``AmbiguousRun``).
"""

import dataclasses
import datetime
import getpass
import os
import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Optional

from ..core.identity import IdentityError, RunIdentity
from ..exceptions import TFMesosError
from ..protocol import labels as run_labels
from .cluster_runs import ClusterRun, run_frameworks
from .tables import local_time, printable

if TYPE_CHECKING:
    import argparse

    from ..record.history import Run
    from ..record.takeover_files import FailoverFile

# A run id's key, or None when the caller holds none for it.
Keys = Callable[[str], Optional[bytes]]


class RunNotFound(TFMesosError):
    """No framework is provably the caller's run; one line saying why."""


class AmbiguousRun(TFMesosError):
    """Several frameworks could be the caller's run; one line listing them."""

    exit_code = 2


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who asks: the local user and the Mesos principal (None: none)."""

    user: str
    principal: Optional[str] = None

    def text(self) -> str:
        return "user %s, principal %s" % (self.user, self.principal or "none")


def caller_of(environ: Mapping[str, str]) -> Caller:
    """The caller as the commands' environment says: ``getpass.getuser()``
    (whose runs' frameworks name it: ``taskinfo.run_user``) and
    ``MESOS_PRINCIPAL``."""
    return Caller(getpass.getuser(), environ.get("MESOS_PRINCIPAL") or None)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A framework of the master that carries a tfmesos run id."""

    run: ClusterRun
    framework: dict
    finished: bool
    user: str
    principal: Optional[str]
    proven: Optional[bool]     # its proof label verifies with the caller's key; None: no key

    def text(self) -> str:
        """``F (run R, user U, principal P, started T)``: how a list names it."""
        started = local_time(datetime.datetime.fromtimestamp(
            self.run.registered, datetime.timezone.utc)) if self.run.registered else "-"
        return "%s (run %s, user %s, principal %s, started %s%s)" % (
            self.run.framework_id, self.run.run_id, self.user or "-", self.principal or "none",
            started, ", finished" if self.finished else "")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def candidates(state: dict, caller: Caller, keys: Keys,
               named: Callable[[ClusterRun], bool] = lambda run: True) -> "list[Candidate]":
    """The frameworks of ``state`` (``/master/state``) that carry a tfmesos
    run id and are ``named``, newest first, each with whether the caller's
    key for its run proves it."""
    found = []
    for framework, finished, run in run_frameworks(state):
        if not named(run):
            continue
        user = _text(framework.get("user"))
        principal = _text(framework.get("principal")) or None
        found.append(Candidate(run, framework, finished, user, principal,
                               proven(run, user, principal, framework, caller, keys)))
    return found


def proven(run: ClusterRun, user: str, principal: Optional[str], framework: dict,
           caller: Caller, keys: Keys) -> Optional[bool]:
    """Whether the framework's proof label verifies with the caller's key
    for its run id (None: the caller holds no key for it). The run signed
    the principal it authenticated with; a master that authenticates nobody
    shows none, so the caller's is tried for such a framework (the proof
    binds the framework id either way)."""
    key = keys(run.run_id)
    if key is None:
        return None
    proof = run_labels.label_map(framework.get("labels")).get(run_labels.PROOF)
    try:
        identity = RunIdentity(run_id=run.run_id, key=key, user=user or caller.user)
    except IdentityError:       # no run id of tfmesos': nothing signed it
        return False
    signed = (principal,) if principal is not None else (None, caller.principal)
    return any(identity.proves(run.framework_id, who, user, proof) for who in set(signed))


def _principal_fits(candidate: Candidate, caller: Caller) -> bool:
    # None: a master that authenticates nobody (any caller's principal is
    # then not the framework's; what the caller sends goes unchecked).
    return candidate.principal is None or candidate.principal == caller.principal


def _callers(candidate: Candidate, caller: Caller) -> bool:
    """Whether the master shows ``candidate`` as the caller's: its
    principal (where the master authenticates one) and its user, or the
    caller's key proves it (a run of ``tfrun -u`` names another user)."""
    return _principal_fits(candidate, caller) \
        and (candidate.user == caller.user or bool(candidate.proven))


def decide(state: dict, wanted: str, caller: Caller, keys: Keys, master: str,
           live_only: bool = False,
           needs_proof: Optional[Callable[[ClusterRun], bool]] = None) -> Candidate:
    """The caller's run that ``wanted`` (a run id prefix, or a framework id)
    names on the master whose ``/master/state`` is ``state`` (pure: the
    module docstring's rules). ``live_only``: not a finished one;
    ``needs_proof(run)``: that run is the caller's only when the key proves
    it (``tfmesos attach`` of a detached run, which hands it the key).
    RunNotFound or AmbiguousRun otherwise."""
    listing = "`tfmesos runs --master %s` lists the master's runs" % master
    named = candidates(state, caller, keys, lambda run: bool(wanted) and (
        run.run_id.startswith(wanted) or run.framework_id == wanted))
    if not wanted or not named:
        raise RunNotFound("the master at %s knows no tfmesos run %r: %s"
                          % (master, wanted, listing))
    mine = [c for c in named if _callers(c, caller)]
    if not mine:
        raise RunNotFound("no run %s of yours (%s) on %s: %s of another user or principal "
                          "carr%s that id: %s; tfmesos acts only on a run of yours: give this "
                          "command with the MESOS_PRINCIPAL that started it, as its user or "
                          "holding the run's key (~/.tfmesos/keys/RUN, or $TFMESOS_KEYS_DIR)" % (
                              wanted, caller.text(), master, _count(named, "framework"),
                              "ies" if len(named) == 1 else "y",
                              "; ".join(c.text() for c in named)))
    held = [c for c in mine if c.proven is not None]
    unproven = [c for c in mine if c.proven is False
                or (c.proven is None and needs_proof is not None and needs_proof(c.run))]
    chosen = [c for c in mine if c not in unproven]
    if not chosen:
        if held:
            raise RunNotFound(
                "no run %s of yours on %s shows the proof of the run's key: %s carr%s its id "
                "but not its proof (another's look-alike, or the key is another run's): "
                "nothing is done to %s" % (
                    wanted, master, ", ".join(c.run.framework_id for c in unproven),
                    "ies" if len(unproven) == 1 else "y",
                    "it" if len(unproven) == 1 else "them"))
        raise RunNotFound(
            "run %s needs its key to be told from a look-alike (it is handed to the run): "
            "copy ~/.tfmesos/keys/RUN from the machine that submitted it, then give --key "
            "FILE (or set $TFMESOS_KEYS_DIR)" % wanted)
    if live_only:
        live = [c for c in chosen if not c.finished]
        if not live:
            raise RunNotFound("the %d runs of yours %r names have finished already: %s" % (
                len(chosen), wanted, "; ".join("run %s (framework %s)" % (
                    c.run.run_id, c.run.framework_id) for c in chosen))
                if len(chosen) > 1 else "run %s has finished already (framework %s)" % (
                    chosen[0].run.run_id, chosen[0].run.framework_id))
        chosen = live
    if len(chosen) > 1:
        raise AmbiguousRun("%r names %s of yours: %s; give the whole run id, or the framework "
                           "id of the one meant" % (
                               wanted, _count(chosen, "run"),
                               "; ".join(c.text() for c in chosen)))
    return chosen[0]


def _count(items: list, word: str) -> str:
    return "%d %s%s" % (len(items), word, "" if len(items) == 1 else "s")


def by_framework(state: dict, framework_id: str, run_id: str, caller: Caller, keys: Keys,
                 master: str, where: str, live_only: bool = False) -> Candidate:
    """The framework ``framework_id`` that the caller's local record
    (``where``) names, as run ``run_id``'s (pure). It must carry that run
    id, be the caller's as the master shows it (``_callers``: the caller's
    own record is no proof of another's run), and, where the caller holds
    the run's key, its proof: a master
    re-admits a framework id it does not know (as Mesos' does after a
    failover of the master), so a record's id alone is another's on a
    master the run is not on. RunNotFound otherwise."""
    for candidate in candidates(state, caller, keys,
                                lambda run: run.framework_id == framework_id):
        if candidate.run.run_id != run_id:
            raise RunNotFound("framework %s on %s carries run id %s, not run %s's (%s): not "
                              "the run's framework" % (framework_id, master,
                                                       candidate.run.run_id, run_id, where))
        if candidate.proven is False:
            raise RunNotFound("framework %s on %s carries run %s's id but not the proof of "
                              "its key: not the run's framework (%s); nothing is done to it"
                              % (framework_id, master, run_id, where))
        if not _callers(candidate, caller):   # the record is the caller's own writing
            raise RunNotFound("framework %s on %s is run %s's of %s, not yours (%s): a record "
                              "of yours (%s) proves nothing of another's run; nothing is done "
                              "to it" % (framework_id, master, run_id,
                                         Caller(candidate.user or "-", candidate.principal).text(),
                                         caller.text(), where))
        if live_only and candidate.finished:
            raise RunNotFound("run %s has finished already (framework %s)"
                              % (run_id, framework_id))
        return candidate
    from ..protocol.task_env import FRAMEWORK_UNKNOWN_GRACE
    raise RunNotFound("the master at %s does not know run %s's framework %s (%s): the run "
                      "ended, or is on another master; should its tasks still run (a master "
                      "restarted without its state, as tfmesos local-master is), each stops by "
                      "itself within %d minutes of losing its framework" % (
                          master, run_id, framework_id, where, FRAMEWORK_UNKNOWN_GRACE // 60))


# -- what the caller holds ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LocalRecord:
    """A run directory of the caller's that names its run's framework:
    ``run`` (its ``history.Run``: run.json, read once), ``failover`` (its
    failover.json, read once; None without one, ``failover_error`` saying
    why when there was one that is not)."""

    run: "Run"
    failover: Optional["FailoverFile"]
    failover_error: Optional[TFMesosError]

    @property
    def directory(self) -> str:
        return self.run.directory

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def framework_id(self) -> Optional[str]:
        return self.failover.framework_id if self.failover is not None \
            else self.run.file.framework_id

    def takeover(self) -> "FailoverFile":
        """Its failover.json; TakeoverError saying why there is none."""
        if self.failover is not None:
            return self.failover
        from ..record.takeover_files import not_taken_over
        raise self.failover_error or not_taken_over(self.directory)


def local_record(text: str, environ: Mapping[str, str]) -> Optional[LocalRecord]:
    """The caller's local record of the run ``text`` names (a run
    directory, or a run id prefix under the runs directory), or None: none
    there; not the caller's (a directory, run.json or failover.json of
    another user, one others may write, or one reached through a symbolic
    link: a ``./tfmesos-runs`` in a shared directory is no proof of
    anything); one of an embedded master (gone with its tfrun); or one that
    names no framework yet."""
    from ..record.takeover_files import FAILOVER_FILE, TakeoverError, read_failover
    run = callers_run(text, environ)
    if run is None:
        return None
    failover, error = None, None
    path = os.path.join(run.directory, FAILOVER_FILE)
    if os.path.lexists(path):
        if not _owned(path, stat.S_ISREG):
            return None
        try:
            failover = read_failover(run.directory)
        except TakeoverError as exc:
            error = exc
    record = LocalRecord(run, failover, error)
    if not record.framework_id or run.file.master == "local":
        return None
    return record


def which_master(text: str, environ: Mapping[str, str], parser: "argparse.ArgumentParser"
                 ) -> NoReturn:
    """No master given for the run ``text`` names: a usage error, naming
    what reaches a run of its tfrun's embedded master."""
    parser.error(embedded_run(text, environ)
                 or "which master? give --master HOST:PORT (or zk://...), or set MESOS_MASTER")


def embedded_run(text: str, environ: Mapping[str, str]) -> Optional[str]:
    """Why no master reaches the run ``text`` names, when the caller's
    record of it says it ran on its tfrun's embedded master (only that
    tfrun reaches it, and no ``--master`` does): a line naming what does;
    else None."""
    run = callers_run(text, environ)
    if run is None or run.file.master != "local":
        return None
    scheduler = run.file.scheduler
    where = " (pid %d on %s)" % (scheduler.pid, printable(scheduler.host)) \
        if scheduler is not None and scheduler.pid else ""
    return ("run %s ran on the embedded master of its tfrun%s, which no other process "
            "reaches: Ctrl-C there stops the run; tfmesos show %s reads its record"
            % (run.run_id, where, run.run_id))


def callers_run(text: str, environ: Mapping[str, str]) -> Optional["Run"]:
    """The run ``text`` names (a run directory, or a run id prefix under the
    runs directory) when its record is the caller's (``callers_record``),
    else None."""
    from ..record.history import HistoryError
    from ..record.run_dirs import runs_root
    from ..record.run_finding import find_run
    try:
        # By run id only: a run's name may start as another run's id does.
        run = find_run(text, runs_root(environ), keep=callers_record, by_name=False)
    except HistoryError:
        return None
    return run if callers_record(run) else None


def callers_record(run: "Run") -> bool:
    """Whether the run directory of ``run`` (a ``history.Run``) and its
    run.json are the caller's, no one else may write them, and neither is
    a link: what it says may be acted on (its key removed, its run
    attached)."""
    return _owned(run.directory, stat.S_ISDIR) \
        and _owned(os.path.join(run.directory, "run.json"), stat.S_ISREG)


def _owned(path: str, kind: Callable[[int], bool]) -> bool:
    """Whether ``path`` itself (not what a link points to) is of ``kind``,
    the caller's, and writable by nobody else: not by all (sticky or not),
    nor by a group with other members (``run_dirs._unsafe``)."""
    from ..record.run_dirs import _unsafe
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return kind(found.st_mode) and not found.st_mode & 0o002 \
        and _unsafe(found, (os.geteuid(),)) is None


def keys_of(environ: Mapping[str, str], key_file: Optional[str] = None) -> Keys:
    """The caller's key of a run id: ``key_file`` (given: for any run, it
    proves only its own), else its file under the keys directory when there
    is one (``takeover_files.held_key``: the caller's alone), read once found. A
    key file that is there but not the caller's alone or no key is an error."""
    from ..record.takeover_files import held_key, read_key
    if key_file:
        key = read_key(key_file)
        return lambda run_id: key
    held: dict[str, bytes] = {}

    def of(run_id: str) -> Optional[bytes]:
        if run_id not in held:
            key = held_key(run_id, environ)
            if key is None:
                return None
            held[run_id] = key
        return held[run_id]
    return of


def find_run(reader: Any, text: str, environ: Mapping[str, str], master: str, key_file: Optional[str] = None,
             live_only: bool = False, needs_proof: Optional[Callable[[ClusterRun], bool]] = None,
             local: Optional[LocalRecord] = None) -> "tuple[Candidate, dict]":
    """(the ``Candidate`` that is the caller's run ``text`` names on the
    master ``reader`` reads, that master's ``/master/state``): by the
    caller's local record when there is one (``local``, else looked for),
    else from the master alone (``decide``)."""
    from ..mesos.master_address import without_password
    master = without_password(master)   # as its messages show it
    caller, keys = caller_of(environ), keys_of(environ, key_file)
    local = local if local is not None else local_record(text, environ)
    state = reader.state()
    if local is not None:
        assert local.framework_id is not None   # (local_record keeps no record without)
        if text != local.run_id and not _names_directory(text):   # a prefix of its id
            _only_one(state, text, local, caller, keys, master, live_only)
        found = by_framework(state, local.framework_id, local.run_id, caller, keys, master,
                             "from its record in %s" % local.directory, live_only)
        if needs_proof is not None and needs_proof(found.run) and not found.proven:
            raise RunNotFound("run %s needs its key to be told from a look-alike: give --key "
                              "FILE (or set $TFMESOS_KEYS_DIR)" % local.run_id)
        return found, state
    return decide(state, text, caller, keys, master, live_only, needs_proof), state


def _names_directory(text: str) -> bool:
    """Whether ``text`` names a run directory (or its run.json), as
    ``run_finding.find_run`` reads it, not a run id prefix."""
    from ..record.history import HistoryError
    from ..record.run_finding import directory_named
    try:
        return directory_named(text) is not None
    except HistoryError:    # one the caller may not look at: no record of theirs
        return False


def _only_one(state: dict, prefix: str, local: LocalRecord, caller: Caller, keys: Keys,
              master: str, live_only: bool) -> None:
    """AmbiguousRun when ``prefix``, the start of the id of the caller's
    run that ``local`` records, also names another run of the caller's on
    the master (as ``decide`` tells the caller's): a prefix is taken only
    when it names one run, here as from the master alone."""
    others = [c for c in candidates(state, caller, keys, lambda run: run.run_id.startswith(
                  prefix) and run.framework_id != local.framework_id)
              if _principal_fits(c, caller) and (c.user == caller.user or c.proven)
              and c.proven is not False and not (live_only and c.finished)]
    if others:
        raise AmbiguousRun("%r names %s of yours: run %s (framework %s, from its record in %s); "
                           "%s; give the whole run id, or the framework id of the one meant" % (
                               prefix, _count(others + [None], "run"), local.run_id,
                               local.framework_id, local.directory,
                               "; ".join(c.text() for c in others)))


__all__ = ["AmbiguousRun", "Caller", "Candidate", "LocalRecord", "RunNotFound", "by_framework",
           "caller_of", "candidates", "decide", "find_run", "keys_of", "local_record"]
