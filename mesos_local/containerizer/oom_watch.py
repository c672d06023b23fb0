"""One thread that looks at the OOM count of every running isolated task,
every LIMITATION_POLL seconds, for the whole agent (``OOM_WATCH``).

A task whose memory cgroup saw the OOM killer is killed whole at once, as
Mesos destroys a container whose memory isolator reported a limitation
(src/slave/containerizer/mesos/isolators/cgroups/subsystems/memory.cpp,
``oomWaited``): the killer may have taken a child while the task's shell
lives on. Each task's own thread waits for its exit only; a timed wait per
task, looking between waits, woke 210 running tasks' threads 840 times a
second and cost the agent's process ~1.7 s of CPU in a 210-task run.
"""

import logging
import threading
import time

log = logging.getLogger(__name__)

LIMITATION_POLL = 0.25    # seconds between looks at an isolated task's OOM count


class OomWatch:
    """``watch(key, look)``: call ``look()`` every ``interval`` seconds,
    from the watch's one thread, until it returns True or ``forget(key)``;
    the thread runs while something is watched."""

    def __init__(self, interval=LIMITATION_POLL):
        self.interval = interval
        self._lock = threading.Lock()
        self._looks = {}
        self._thread = None

    def watch(self, key, look):
        """RuntimeError when the watch's thread cannot start (nothing watched then)."""
        with self._lock:
            self._looks[key] = look
            if self._thread is None:
                thread = threading.Thread(target=self._run, daemon=True, name="oom-watch")
                try:
                    thread.start()
                except RuntimeError:   # "can't start new thread"
                    del self._looks[key]
                    raise
                self._thread = thread

    def forget(self, key):
        with self._lock:
            self._looks.pop(key, None)

    def _run(self):
        while True:
            time.sleep(self.interval)
            with self._lock:
                if not self._looks:
                    self._thread = None
                    return
                looks = list(self._looks.items())
            for key, look in looks:
                try:
                    done = look()
                except Exception:   # one task's failure must not blind the watch to the rest
                    log.exception("the OOM watch of %s failed", key)
                    done = True
                if done:
                    self.forget(key)


OOM_WATCH = OomWatch()

__all__ = ["OOM_WATCH", "OomWatch", "LIMITATION_POLL"]
