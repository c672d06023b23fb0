"""Mesos task states (``TaskState`` in include/mesos/v1/mesos.proto), and
the exit code in the command executor's message."""

import functools
import re
from typing import Optional

# A task in one of these states will never change state again.
TERMINAL_STATES = frozenset((
    "TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST",
    "TASK_DROPPED", "TASK_GONE", "TASK_GONE_BY_OPERATOR"))


_EXIT_STATUS = re.compile(r"exited with status (\d+)")


def says_only_the_exit(status_message: Optional[str], code: Optional[int]) -> bool:
    """Whether ``status_message`` is the command executor's bare "Command
    exited with status ``code``", or the docker executor's "Container ..."
    (a DOCKER containerizer task, src/docker/executor.cpp ``_reaped``):
    nothing an exit code does not say."""
    return code is not None and (status_message or "").strip() in (
        "Command exited with status %d" % code, "Container exited with status %d" % code)


def exit_code_of(status_message: Optional[str]) -> Optional[int]:
    """The exit code in Mesos' "Command exited with status N" (the command
    executor's message, src/launcher/executor.cpp; the docker executor's
    "Container exited with status N"), or a shell's 128 + N for its
    "Command terminated with signal NAME" (``strsignal``'s name), or None."""
    match = _EXIT_STATUS.search(status_message or "")
    if match:
        return int(match.group(1))
    match = _SIGNALLED.search(status_message or "")
    if match:
        number = _signal_numbers().get(match.group(1).strip())
        return 128 + number if number is not None else None
    return None


# src/common/status_utils.hpp: strsignal's name, " (core dumped)" after it with WCOREDUMP
_SIGNALLED = re.compile(r"terminated with signal (.+?)(?: \(core dumped\))?$")


@functools.cache
def _signal_numbers() -> dict[str, int]:
    """strsignal's names (this host's libc's, as the agent's) -> numbers."""
    import signal
    names: dict[str, int] = {}
    for number in range(1, 65):
        try:
            name = signal.strsignal(number)
        except ValueError:
            continue
        if name and not name.startswith(("Unknown signal", "Real-time signal")):
            names.setdefault(name, number)
    return names
