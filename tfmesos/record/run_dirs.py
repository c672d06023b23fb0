"""Where run directories go: ``$TFMESOS_RUNS_DIR``, else ``./tfmesos-runs``
(``runs_root``), one ``<name>-<run id>`` directory a run
(``default_run_dir``), unless the run names its own (``tfrun --run-dir``,
``cluster(run_dir=...)``)."""

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


__all__ = ["RUNS_DIR", "runs_root", "default_run_dir"]


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


def write_run_json(directory: str, text: str) -> None:
    """``text`` as ``directory``'s run.json, atomically (a temporary file,
    then a rename); a failure is ignored: the record is a help, not a
    reason to fail the run."""
    temporary = os.path.join(directory, ".run.json.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        os.replace(temporary, os.path.join(directory, "run.json"))
    except OSError:
        pass
