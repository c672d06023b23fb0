"""When a failed run may start again: the restart policy of ``tfrun
--max-restarts`` / ``cluster(max_restarts=...)`` as pure functions.

Infrastructure losses are what ``--restart-on lost`` (the default once
restarts are allowed) restarts for: the task's agent or its connection went
away, or something other than the task killed it — Mesos' terminal states
for lost tasks (TASK_LOST, and GONE/DROPPED/UNREACHABLE for partition-aware
frameworks, include/mesos/v1/mesos.proto), the reasons for agent loss,
preemption and resource limits (the OOM killer: REASON_CONTAINER_LIMITATION*),
and a command ended by a signal tfmesos did not send. ``--restart-on
failure`` restarts for any non-zero exit as well.
"""

import dataclasses
import re
from typing import Optional

from ..exceptions import SpecError
from ..field_methods import FrozenFieldMethods
from .inputs import MAX_ATTEMPTS, MAX_SECONDS, number_error

RESTART_ON = ("lost", "failure")
LOST_STATES = frozenset(("TASK_LOST", "TASK_GONE", "TASK_DROPPED", "TASK_UNREACHABLE",
                         "TASK_GONE_BY_OPERATOR", "TASK_UNKNOWN"))
LOST_REASONS = frozenset((
    "REASON_AGENT_REMOVED", "REASON_AGENT_REMOVED_BY_OPERATOR", "REASON_AGENT_DISCONNECTED",
    "REASON_AGENT_RESTARTED", "REASON_AGENT_UNKNOWN", "REASON_CONTAINER_PREEMPTED",
    "REASON_CONTAINER_LIMITATION", "REASON_CONTAINER_LIMITATION_MEMORY",
    "REASON_CONTAINER_LIMITATION_DISK", "REASON_EXECUTOR_TERMINATED",
    "REASON_MASTER_DISCONNECTED"))
_SIGNALLED = re.compile(r"terminated with signal|killed by signal", re.IGNORECASE)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class RestartPolicy(FrozenFieldMethods):
    """``max_restarts`` whole restarts (0: a failure ends the run), for
    ``restart_on`` "lost" or "failure", waiting ``backoff`` seconds before the
    first and twice as long before each next one (at most ``max_backoff``)."""

    max_restarts: int = 0
    restart_on: str = "lost"
    backoff: float = 2.0
    max_backoff: float = 60.0

    def __post_init__(self) -> None:
        why = number_error(self.max_restarts, 0, MAX_ATTEMPTS, integer=True)
        if why:
            raise SpecError.about("{restart_policy.max_restarts} %s, got %r", why,
                                  self.max_restarts)
        if self.restart_on not in RESTART_ON:
            raise SpecError.about("{restart_policy.restart_on} must be 'lost' or 'failure', "
                                  "got %r", self.restart_on)
        for field, value in (("backoff", self.backoff), ("max_backoff", self.max_backoff)):
            why = number_error(value, 0, MAX_SECONDS)
            if why:
                raise SpecError.about("{restart_policy.%s} %%s seconds, got %%r" % field, why,
                                      value)

    def allows(self, restarts_done: int, cause: Optional[str]) -> bool:
        """Whether a run that already restarted ``restarts_done`` times may
        restart for ``cause`` (from ``failure_cause``)."""
        if restarts_done >= self.max_restarts or cause is None:
            return False
        return cause == "lost" or self.restart_on == "failure"

    def delay(self, restarts_done: int) -> float:
        """Seconds to wait before restart number ``restarts_done + 1``."""
        return min(self.backoff * (2 ** restarts_done), self.max_backoff)


# Linux' highest signal (SIGRTMAX): an exit code above 128 + this is a
# command's own (sys.exit(-1): 255), not a signal's.
MAX_SIGNAL = 64


def killed_by_signal(exit_code: Optional[int]) -> bool:
    """Whether ``exit_code`` is a shell's (and the task entry's) 128 + N of a
    command killed by signal N."""
    return exit_code is not None and 128 < exit_code <= 128 + MAX_SIGNAL


def failure_cause(state: Optional[str], reason: Optional[str] = None, message: Optional[str] = "",
                  exit_code: Optional[int] = None) -> Optional[str]:
    """"lost" for an infrastructure loss, "failure" for the task's own
    failure (a non-zero exit), None for success. (Tasks tfmesos stops are
    forgotten first: their ends never reach the policy.)"""
    if state in LOST_STATES or reason in LOST_REASONS:
        return "lost"
    if _SIGNALLED.search(message or "") or killed_by_signal(exit_code):
        return "lost"    # killed by a signal, and not by us: OOM killer, an operator
    if state == "TASK_FINISHED" and not exit_code:
        return None
    return "failure"
