"""Which run a name means: a run directory (or its run.json), else a
prefix of a run id or of a directory's name under the runs directory
(``find_run``), for ``tfmesos show/logs/report/attach/kill``; the runs
themselves are ``history``'s."""

import os
import stat
from typing import Callable, Optional

from ..terminal_text import printable
from .history import RUN_JSON, HistoryError, Run, most_recent_first, parsed_records


def _names(run: Run, text: str, by_name: bool = True) -> bool:
    return run.run_id.startswith(text) or (
        by_name and os.path.basename(run.directory).startswith(text))


def _may_name(directory: str, data: object, text: str, by_name: bool = True) -> bool:
    """Whether the run of ``directory`` may be one whose id (or directory
    name: ``by_name``) starts with ``text``, told from its run.json's JSON
    before the schema decodes it (``Run.run_id``: its run_id, else the
    directory's name); a run_id that is no string fails the decoding anyway."""
    name = os.path.basename(directory)
    run_id = data.get("run_id") if isinstance(data, dict) else None
    return (by_name and name.startswith(text)) or (
        isinstance(run_id, str) and run_id.startswith(text)) or (
        not isinstance(run_id, str) and name.startswith(text))


def find_run(text: str, root: str, keep: Optional[Callable[[Run], bool]] = None,
             prefer: Optional[Callable[[Run], bool]] = None, by_name: bool = True) -> Run:
    """The run ``text`` names: a run directory (or its run.json), else a
    prefix of a run id (or of a directory name, unless ``by_name`` is
    False) under ``root``, among the runs ``keep`` keeps (the caller's own:
    another user's look-alike is no second match). Of several, the one
    whose whole id ``text`` is wins, and of several such (copies: a
    look-alike another user planted), the one ``prefer`` alone prefers
    (the caller's own record); else it is one line naming them."""
    if not text:
        raise HistoryError("give a run id or a run directory (tfmesos runs lists them)")
    named = directory_named(text)
    if named is not None:
        return Run.load(named)
    if os.sep in text or text.startswith("."):
        raise HistoryError("%s is not a run directory (it has no %s)" % (text, RUN_JSON))
    # Only the runs it may name are decoded (most of a lookup's time when
    # every run was: 500 records, 1.5 s before the decoders were made fast).
    runs: list[Run] = []
    unread: list[HistoryError] = []   # what the records named but not decoded say
    for directory, data in parsed_records(root):
        if _may_name(directory, data, text, by_name):
            try:
                run = Run.decode(directory, data)
            except HistoryError as exc:
                unread.append(exc)
                continue
            if _names(run, text, by_name) and (keep is None or keep(run)):
                runs.append(run)
    matches = most_recent_first(runs)
    if not matches and unread:   # (one a newer tfmesos wrote: its schema_version says so)
        raise HistoryError("%s%s" % (unread[0], " (and %d more records %s names)" % (
            len(unread) - 1, printable(repr(text))) if len(unread) > 1 else ""))
    if not matches:
        raise HistoryError("no run %s in %s (tfmesos runs lists them)"
                           % (printable(repr(text)), root))
    if len(matches) == 1:
        return matches[0]
    whole = [run for run in matches if run.run_id == text]
    if len(whole) == 1:
        return whole[0]
    preferred = [run for run in whole or matches if prefer is not None and prefer(run)]
    if len(preferred) == 1:
        return preferred[0]
    names = ", ".join(printable(os.path.basename(run.directory)) for run in matches[:5])
    more = " and %d more" % (len(matches) - 5) if len(matches) > 5 else ""
    raise HistoryError("%s %s %d runs (%s%s): %s" % (
        printable(repr(text)), "is the id of" if whole else "matches", len(matches), names,
        more, "give the run directory of the one meant" if whole
        else "give more of the id, or the run directory"))


def directory_named(text: str) -> Optional[str]:
    """The run directory ``text`` names (itself, or the directory of the
    run.json it names), or None: it is no path to one (a run id, say)."""
    if os.path.basename(text) == RUN_JSON and _is_file(text):
        return os.path.dirname(text) or "."
    if _is_file(os.path.join(text, RUN_JSON)):
        return text
    return None


def _is_file(path: str) -> bool:
    """Whether ``path`` is a file (following links); a path the caller may
    not look at is an error that says so, not a file that is not there."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except PermissionError as exc:
        raise HistoryError("cannot read %s: %s (a run directory of another user?)"
                           % (path, exc.strerror or exc)) from None
    except (OSError, ValueError):
        return False
