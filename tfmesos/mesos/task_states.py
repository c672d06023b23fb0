"""Mesos task states (``TaskState`` in include/mesos/v1/mesos.proto), and
the exit code in the command executor's message."""

import re
from typing import Optional

# A task in one of these states will never change state again.
TERMINAL_STATES = frozenset((
    "TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST",
    "TASK_DROPPED", "TASK_GONE", "TASK_GONE_BY_OPERATOR"))


_EXIT_STATUS = re.compile(r"exited with status (\d+)")


def exit_code_of(status_message: Optional[str]) -> Optional[int]:
    """The exit code in Mesos' "Command exited with status N" (the command
    executor's message, src/launcher/executor.cpp), or None."""
    match = _EXIT_STATUS.search(status_message or "")
    return int(match.group(1)) if match else None
