"""How often run.json is rewritten: at most every SAVE_INTERVAL seconds
(milestones save at once, outside this pace), and at most SAVE_SHARE of
the time of the thread that handles the run's events: a run of a thousand
tasks (a run.json of 600 kB, saved while as many connections want the
interpreter) saves less often, not slower."""

import time

SAVE_INTERVAL = 1.0
SAVE_SHARE = 0.1


class SavePace:
    """When the last save ended and what it took: ``due()`` says whether
    another may run now; ``timed()`` measures one."""

    def __init__(self) -> None:
        self._saved = 0.0      # time.monotonic() when the last save ended
        self._took = 0.0       # seconds it took

    def due(self) -> bool:
        return time.monotonic() - self._saved >= max(SAVE_INTERVAL, self._took / SAVE_SHARE)

    def saved(self, began: float) -> None:
        """A save that began at ``began`` (time.monotonic()) ended now."""
        self._saved = time.monotonic()
        self._took = self._saved - began
