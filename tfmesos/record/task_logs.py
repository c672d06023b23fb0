"""The run directory's log files: one per task, attempt and stream, written
from the output the tasks forward (``worker.1.stderr``;
``worker.1.attempt2.stderr`` from the second attempt on), 0600: a task's
output is its user's alone."""

import contextlib
import os
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, Optional

from .run_dirs import create_private

if TYPE_CHECKING:
    from .schema import Attempt, Logs


def log_name(slot_name: str, attempt: int, stream: str) -> str:
    """``worker.1.stderr``; ``worker.1.attempt2.stderr`` from the second attempt on."""
    base = slot_name.replace(":", ".")
    return "%s.%s" % (base if attempt <= 1 else "%s.attempt%d" % (base, attempt), stream)


# Log files held open at once, the most recently written: a run of hundreds
# of tasks must not hold two descriptors per task (with the rendezvous'
# connection, the embedded agent's, a run of 200 tasks reached the common
# default of 1,024 open files). One written again after it was closed is
# opened again to append.
OPEN_FILES = 32


class TaskLogs:
    """The log files of a run directory (``directory`` None: none), written
    under the record's ``lock``; at most ``open_files`` open at once. A file
    that cannot be written (a full disk) fails nothing: ``on_failure`` is
    told (the file's name, the OSError), under the lock."""

    def __init__(self, directory: Optional[str], lock: contextlib.AbstractContextManager[object],
                 open_files: int = OPEN_FILES,
                 on_failure: Optional[Callable[[str, OSError], None]] = None) -> None:
        self.directory = directory
        self._lock = lock
        self._on_failure = on_failure
        self._open_files = max(1, open_files)
        self._created: set[str] = set()   # log files created by this run
        self._files: dict[str, IO[str]] = {}   # name -> open log file, least recently written first

    def write(self, name: str, text: str) -> None:
        """A log file is created (emptied, in a reused directory) first, then
        appended to, flushed after every write (so ``tail -f`` and ``tail()``
        see everything)."""
        if self.directory is None:
            return
        with self._lock:
            try:
                handle = self._files.pop(name, None)
                if handle is None:
                    descriptor = create_private(os.path.join(self.directory, name),
                                                append=name in self._created)
                    self._created.add(name)
                    handle = open(descriptor, "a", encoding="utf-8", errors="replace")
                    if len(self._files) >= self._open_files:
                        self._close(self._files.pop(next(iter(self._files))))
                self._files[name] = handle
                handle.write(text)
                handle.flush()
            except OSError as exc:   # a full disk must not fail the run
                self._failed(name, exc)

    def adopt(self, names: Iterable[str]) -> None:
        """Files a scheduler before this one wrote (``tfmesos attach``): appended to."""
        with self._lock:
            self._created.update(names)

    def create(self, logs: "Logs") -> None:
        """Both files of ``logs`` (a ``schema.Logs``), empty until output comes
        (so that ``tail -f`` finds them from the launch on)."""
        if self.directory is None:
            return
        with self._lock:
            for name in (logs.stdout, logs.stderr):
                if name in self._created:
                    continue
                try:
                    os.close(create_private(os.path.join(self.directory, name)))
                except OSError as exc:   # as write's: the record is a help
                    self._failed(name, exc)
                    continue
                self._created.add(name)

    def _failed(self, name: str, exc: OSError) -> None:
        if self._on_failure is not None:
            self._on_failure(name, exc)

    def close(self) -> None:
        with self._lock:
            files, self._files = self._files, {}
        for handle in files.values():
            self._close(handle)

    @staticmethod
    def _close(handle: IO[str]) -> None:
        try:
            handle.close()
        except OSError:
            pass

    def path(self, attempt: Optional["Attempt"], stream: str) -> Optional[str]:
        """The path of ``attempt``'s ``stream`` log, or None."""
        if self.directory is None or attempt is None or not attempt.logs:
            return None
        return os.path.join(self.directory, attempt.logs.named(stream))

    def tail(self, attempt: Optional["Attempt"], stream: str, lines: int) -> list[str]:
        """The last ``lines`` lines of ``attempt``'s ``stream`` log (the
        last form of a line redrawn with carriage returns)."""
        path = self.path(attempt, stream)
        if path is None:
            return []
        try:
            with open(path, "rb") as handle:
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - 64 * 1024))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return []
        return [line.rsplit("\r", 1)[-1] for line in text.splitlines()[-lines:]]
