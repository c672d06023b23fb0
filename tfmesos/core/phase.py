"""The phases of a run and the moves between them (docs/architecture.md).

::

    NEW ──► FORMING ──► RUNNING ──► RESTARTING ──┐
     │        ▲ │          │            │        │
     │        │ │          │            │        │
     │        └─┼──────────┼────────────┘ (back-off over: launch again)
     ▼          ▼          ▼            ▼
    STOPPING ◄──────────────────────────┘ ──► STOPPED

``ClusterRun`` alone moves its phase, under its one lock. Once the run
stops, stopping wins: a later move to another phase is refused (``move``
returns False) rather than undoing the stop; any other move not in the
table is a bug and raises ``IllegalTransition``.
"""

import enum
from typing import Optional


class Phase(str, enum.Enum):
    NEW = "new"                # built, nothing started
    FORMING = "forming"        # tasks launched; waiting until every one registered
    RUNNING = "running"        # the cluster is complete and has its roles
    RESTARTING = "restarting"  # a whole restart: the tasks stop, the back-off runs
    STOPPING = "stopping"      # stop() runs: tasks and framework go down
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value


TRANSITIONS = {
    Phase.NEW: {Phase.FORMING, Phase.STOPPING},
    Phase.FORMING: {Phase.RUNNING, Phase.STOPPING},
    Phase.RUNNING: {Phase.RESTARTING, Phase.STOPPING},
    Phase.RESTARTING: {Phase.FORMING, Phase.STOPPING},
    Phase.STOPPING: {Phase.STOPPED},
    Phase.STOPPED: set(),
}
ENDING = frozenset((Phase.STOPPING, Phase.STOPPED))


class IllegalTransition(RuntimeError):
    """A move the phase table does not allow: a bug in tfmesos."""


def next_phase(current: Phase, target: Phase) -> Optional[Phase]:
    """``target`` when the run may move there from ``current``; None when the
    run is stopping and ``target`` would undo that; raises
    ``IllegalTransition`` for a move the table does not have."""
    if target in TRANSITIONS[current]:
        return target
    if current in ENDING and target not in ENDING:
        return None
    if current in ENDING and target in ENDING:
        return None   # stopping twice: the first stop goes on
    raise IllegalTransition("a run cannot go from %s to %s" % (current.value, target.value))
