"""Where run directories go: ``$TFMESOS_RUNS_DIR``, else ``./tfmesos-runs``
(``runs_root``), one ``<name>-<run id>`` directory a run
(``default_run_dir``), unless the run names its own (``tfrun --run-dir``,
``cluster(run_dir=...)``)."""

import contextlib
import errno
import json
import os
import re
from collections.abc import Mapping
from typing import Optional

RUNS_DIR = "tfmesos-runs"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def runs_root(environ: Mapping[str, str], given: Optional[str] = None) -> str:
    """The runs directory: ``given``, else ``$TFMESOS_RUNS_DIR``, else ./tfmesos-runs."""
    return given or environ.get("TFMESOS_RUNS_DIR") or RUNS_DIR


def default_run_dir(name: str, run_id: str, environ: Mapping[str, str]) -> str:
    """``<runs dir>/<name>-<run id>``, the name made safe for a file name."""
    return os.path.join(runs_root(environ),
                        "%s-%s" % (_UNSAFE.sub("_", name).strip(".") or "run", run_id))


def make_run_dir(directory: str) -> None:
    """Make the run directory ``directory`` and its parent (the runs
    directory) where they are not, 0700: a task's output is its user's
    alone. An existing directory is left as it is; OSError."""
    parent = os.path.dirname(os.path.abspath(directory))
    try:
        os.makedirs(parent, mode=0o700, exist_ok=True)
    except FileExistsError:     # a file: what makedirs of the whole path says
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), parent) from None
    os.makedirs(directory, mode=0o700, exist_ok=True)


def create_private(path: str, append: bool = False) -> int:
    """A descriptor of ``path`` open for writing, created 0600 (its user's
    alone; an existing file keeps its mode), emptied unless ``append``; a
    symbolic link there is not followed (OSError)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
                   | (os.O_APPEND if append else os.O_TRUNC), 0o600)


__all__ = ["RUNS_DIR", "runs_root", "default_run_dir", "make_run_dir", "create_private"]


def run_json_text(document: Mapping[str, object]) -> str:
    """run.json's text: a top-level field a line, and an item a line of each
    list (tasks, restarts, ...), each written by json's C encoder. (An
    indented dump runs json's Python encoder, four times the cost, and a run
    of hundreds of tasks saves at every second.)"""
    fields = []
    for key, value in document.items():
        head = json.dumps(key) + ": "
        if isinstance(value, list) and value:
            fields.append(head + "[\n  " + ",\n  ".join(json.dumps(item) for item in value)
                          + "\n ]")
        else:
            fields.append(head + json.dumps(value))
    return "{\n " + ",\n ".join(fields) + "\n}"


def write_run_json(directory: str, text: str) -> Optional[OSError]:
    """``text`` as ``directory``'s run.json, atomically (a temporary file,
    then a rename); the OSError of a failure (a full disk), or None: the
    record is a help, not a reason to fail the run. A failed write leaves
    no temporary file behind (and the run.json before it as it was)."""
    temporary = os.path.join(directory, ".run.json.tmp")
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)   # one left by a process killed mid-write: made anew, 0600
        with open(create_private(temporary), "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        os.replace(temporary, os.path.join(directory, "run.json"))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        return exc
    return None
