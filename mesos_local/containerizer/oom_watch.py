"""One thread that looks at the OOM count of every running isolated task
for the whole agent (``OOM_WATCH``): when the kernel signals the task's
eventfd (cgroup v1: ``cgroups.TaskCgroups.oom_events``, as Mesos' memory
subsystem listens, ``MemorySubsystemProcess::oomListen``,
src/slave/containerizer/mesos/isolators/cgroups/subsystems/memory.cpp, through
``cgroups::memory::oom::listen``, src/linux/cgroups.cpp), once as it is
watched (an OOM before that), and every ``SAFETY`` seconds; a task without
an eventfd (cgroup v2, no ``os.eventfd``) every LIMITATION_POLL seconds.

A task whose memory cgroup saw the OOM killer is killed whole at once, as
Mesos destroys a container whose memory isolator reported a limitation
(``oomWaited``): the killer may have taken a child while the task's shell
lives on. Each task's own thread waits for its exit only; a timed wait per
task, looking between waits, woke 210 running tasks' threads 840 times a
second and cost the agent's process ~1.7 s of CPU in a 210-task run, and
one look at every task every 0.25 s still read 840 files a second.
"""

import logging
import os
import select
import threading
import time

log = logging.getLogger(__name__)

LIMITATION_POLL = 0.25    # seconds between looks at a task without an eventfd
SAFETY = 5.0              # seconds between looks at every task all the same
# The eventfd fires as the OOM killer starts; its count moves once it has
# killed: a woken task is looked at every AFTER_EVENT_POLL seconds for
# AFTER_EVENT seconds, until its look finds the kill.
AFTER_EVENT = 2.0
AFTER_EVENT_POLL = 0.02


class OomWatch:
    """``watch(key, look, wake=None)``: call ``look()`` from the watch's
    one thread, once at once, then when ``wake`` (a file descriptor the
    caller owns and closes after ``forget``) is readable, else every
    ``interval`` seconds, and every ``safety`` seconds either way, until it
    returns True or ``forget(key)``; the thread runs while something is
    watched."""

    def __init__(self, interval=LIMITATION_POLL, safety=SAFETY):
        self.interval, self.safety = interval, safety
        self._lock = threading.Lock()
        self._looks = {}          # key -> (look, wake fd or None)
        self._new = set()         # keys not looked at yet
        self._woken = {}          # key -> until when it is looked at every AFTER_EVENT_POLL
        self._by_fd = {}          # wake fd -> key
        self._thread = None
        self._epoll = None
        self._nudge = None        # (read fd, write fd): wakes the thread for a new watch

    def watch(self, key, look, wake=None):
        """RuntimeError when the watch's thread cannot start (nothing watched then)."""
        with self._lock:
            self._looks[key] = (look, wake)
            self._new.add(key)
            if self._thread is None:
                self._epoll = select.epoll()
                self._nudge = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
                self._epoll.register(self._nudge[0], select.EPOLLIN)
                thread = threading.Thread(target=self._run, args=(self._epoll, self._nudge),
                                          daemon=True, name="oom-watch")
                try:
                    thread.start()
                except RuntimeError:   # "can't start new thread"
                    self._drop(key)
                    self._close_loop(self._epoll, self._nudge)
                    self._epoll = self._nudge = None
                    raise
                self._thread = thread
            epoll, nudge = self._epoll, self._nudge
            assert epoll is not None and nudge is not None, "made with the thread"
            if wake is not None:
                self._by_fd[wake] = key
                epoll.register(wake, select.EPOLLIN)
            try:
                os.write(nudge[1], b"x")
            except BlockingIOError:
                pass          # it has been nudged already

    def forget(self, key):
        with self._lock:
            self._drop(key)

    def _drop(self, key):
        _, wake = self._looks.pop(key, (None, None))
        self._new.discard(key)
        self._woken.pop(key, None)
        if wake is not None and self._by_fd.get(wake) == key:
            del self._by_fd[wake]
            try:
                if self._epoll is not None:
                    self._epoll.unregister(wake)   # before the caller closes it
            except (OSError, ValueError):
                pass

    @staticmethod
    def _close_loop(epoll, nudge):
        epoll.close()
        for fd in nudge:
            os.close(fd)

    def _run(self, epoll, nudge):
        polled_at = safe_at = time.monotonic()
        while True:
            with self._lock:
                if not self._looks:
                    self._thread = self._epoll = self._nudge = None
                    self._close_loop(epoll, nudge)
                    return
                polls = any(wake is None for _, wake in self._looks.values())
                hot = bool(self._woken)
            now = time.monotonic()
            due_at = safe_at + self.safety
            if polls:
                due_at = min(due_at, polled_at + self.interval)
            if hot:
                due_at = min(due_at, now + AFTER_EVENT_POLL)
            events = epoll.poll(max(0.0, due_at - now)) if not self._new else ()
            now = time.monotonic()
            with self._lock:
                woken = set()
                for fd, _ in events:
                    if fd == nudge[0]:
                        _drain(fd, 4096)
                    elif fd in self._by_fd:   # still watched: this thread may read it
                        _drain(fd, 8)
                        woken.add(self._by_fd[fd])
                for key in woken:
                    self._woken[key] = now + AFTER_EVENT
                for key, until in list(self._woken.items()):
                    if now >= until:
                        del self._woken[key]
                due = set(self._new) | set(self._woken)
                self._new.clear()
                if now - safe_at >= self.safety:
                    due.update(self._looks)
                    safe_at = now
                if polls and now - polled_at >= self.interval:
                    due.update(key for key, (_, wake) in self._looks.items() if wake is None)
                    polled_at = now
                looks = [(key, self._looks[key][0]) for key in due if key in self._looks]
            for key, look in looks:
                try:
                    done = look()
                except Exception:   # one task's failure must not blind the watch to the rest
                    log.exception("the OOM watch of %s failed", key)
                    done = True
                if done:
                    self.forget(key)


def _drain(fd, size):
    try:
        os.read(fd, size)
    except OSError:   # (BlockingIOError too: nothing left to read)
        pass


OOM_WATCH = OomWatch()

__all__ = ["OOM_WATCH", "OomWatch", "LIMITATION_POLL", "SAFETY"]
