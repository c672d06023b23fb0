"""What MLflow gets of a run besides its metrics, read from this machine:
run.json and the task logs of its run directory (a big log's tail), and
the commit of the git checkout it was started from (``mlflow_logger``)."""

import contextlib
import os
import shutil
import subprocess
from typing import Optional

from .history import HistoryError, Run
from .schema import RunFile, safe_file_name

GIT_TIMEOUT = 5.0


def read_run(directory: str) -> Optional[tuple[RunFile, float]]:
    """(run.json, when it was last written: a time.time()) of the run
    directory ``directory``, or None (none there, unreadable)."""
    try:
        found = Run.load(directory)
        return found.file, os.stat(os.path.join(directory, "run.json")).st_mtime
    except (HistoryError, OSError):
        return None


def log_names(run: RunFile) -> list[str]:
    """The log file names of every attempt of ``run`` that are plain file
    names of its directory (``schema.safe_file_name``), in order."""
    names: list[str] = []
    for task in run.tasks:
        for attempt in task.attempts:
            if attempt.logs:
                for name in (attempt.logs.stdout, attempt.logs.stderr):
                    if safe_file_name(name) and name not in names:
                        names.append(name)
    return names


def copy_tail(source: str, target: str, keep: int, size: int) -> None:
    """Copy the last ``keep`` bytes of ``source`` (``size`` bytes long) to
    ``target``, after a line that says how much was left out."""
    with open(source, "rb") as reading, open(target, "wb") as writing:
        if keep < size:
            writing.write(b"[tfmesos: the first %d bytes of %d were left out]\n"
                          % (size - keep, size))
            reading.seek(size - keep)
        shutil.copyfileobj(reading, writing)


def git_commit(directory: str) -> Optional[str]:
    """``git rev-parse HEAD`` in ``directory``, or None (not a git checkout,
    no git, too slow)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError, ValueError):
        found = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=directory,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=GIT_TIMEOUT)
        commit = found.stdout.strip()
        if found.returncode == 0 and len(commit) in (40, 64) and all(
                c in "0123456789abcdef" for c in commit):
            return commit
    return None


__all__ = ["read_run", "log_names", "copy_tail", "git_commit", "GIT_TIMEOUT"]
