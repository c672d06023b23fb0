"""Pruning old run directories (``tfmesos runs --prune --keep N``): every
run but the most recent and those still going is removed, each record read
again just before, never through a symbolic link, and only the caller's
in a shared runs directory."""

import os
import shutil
from typing import Any, Callable, Optional

from .history import RUN_JSON, HistoryError, Run, list_runs
from .liveness import gone, this_process
from .run_dir_lock import in_use


def _still_ending(run: Run, host: str) -> bool:
    """Whether ``run`` has its outcome but not yet its end, and the process
    that runs it is there (on ``host``, this one): a cluster() whose task
    failed while its block runs on (its record says so at once), not to be
    pruned under it."""
    scheduler = run.file.scheduler
    return not run.running and run.file.timings.finished is None \
        and scheduler is not None and scheduler.host == host and not gone(scheduler)


def prune(root: str, keep: int, hold: Optional[Callable[[Run], bool]] = None,
          mine: Optional[Callable[[Run], bool]] = None
          ) -> tuple[list[Run], list[Run], list[tuple[Run, str]]]:
    """Remove every run directory under ``root`` but the ``keep`` most recent
    and those still running (a run whose tfrun is ``gone`` is not, unless
    ``hold(run)`` says its tasks may still run: a ``--failover`` run's
    framework its master still has). Only the runs ``mine`` says are the
    caller's count and go (None: every run): in a shared runs directory,
    records another user planted, dated in the future, made the caller's
    own newest runs "older" than the ``keep`` kept. A symbolic link is
    never followed nor removed (with ``mine``, each is named), and a directory that cannot be removed is
    named, not an end: every run is seen to. Returns (removed, kept
    running, left: [(run, why)])."""
    if keep < 0:
        raise HistoryError("--keep %d: give 0 or more runs to keep" % keep)
    removed: list[Run] = []
    running: list[Run] = []
    left: list[tuple[Run, str]] = []
    runs = list_runs(root)
    past = runs[keep:] if mine is None else [run for run in runs if mine(run)][keep:] + [
        # Never the caller's own (``mine`` looks at the link itself), never
        # counted: every link is named, not followed.
        run for run in runs if os.path.islink(run.directory)]
    host = this_process().host

    def runs_on(run: Run) -> bool:
        return run.running and (not run.gone or (hold is not None and hold(run))) \
            or _still_ending(run, host) or in_use(run.directory)

    for run in past:
        if runs_on(run):
            running.append(run)
            continue
        if os.path.islink(run.directory):
            left.append((run, "a symbolic link (not followed: remove it by hand)"))
            continue
        # Read again just before: a run may have begun in the directory since
        # it was listed (tfrun --run-dir), or another prune removed it.
        now = _read_again(run.directory)
        if now is None:
            if os.path.lexists(os.path.join(run.directory, RUN_JSON)):
                left.append((run, "its record changed since it was listed: run again"))
            continue       # else another prune removed it
        if runs_on(now):
            running.append(now)
            continue
        if now.run_id != run.run_id:
            continue       # another run's record now: not the one listed
        try:
            shutil.rmtree(run.directory, onerror=_gone_meanwhile)
        except OSError as exc:
            left.append((run, exc.strerror or str(exc)))
            continue
        removed.append(run)
    return removed, running, left


def _read_again(directory: str) -> Optional[Run]:
    """The run ``directory`` holds now; None when its record is gone or
    cannot be read."""
    try:
        return Run.load(directory)
    except HistoryError:
        return None


def _gone_meanwhile(function: Callable[..., Any], path: str, info: Any) -> None:
    """rmtree's onerror: what another prune removed first is removed."""
    if not isinstance(info[1], FileNotFoundError):
        raise info[1]


__all__ = ["prune"]
