"""Mesos task states (``TaskState`` in include/mesos/v1/mesos.proto)."""

# A task in one of these states will never change state again.
TERMINAL_STATES = frozenset((
    "TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST",
    "TASK_DROPPED", "TASK_GONE", "TASK_GONE_BY_OPERATOR"))
