"""The agent's one OOM watch (``mesos_local/containerizer/oom_watch.py``):
every watched look runs from its thread until it says done or is
forgotten, a failing look does not blind it to the others, and the thread
ends once nothing is watched."""

import threading
import time

import pytest

from mesos_local.containerizer.executor import TaskProcess
from mesos_local.containerizer.oom_watch import OomWatch


def wait_until(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_looks_run_until_done_or_forgotten_and_the_thread_ends_with_them():
    watch = OomWatch(interval=0.01)
    calls = {"done": 0, "forgotten": 0, "broken": 0}
    threads = set()

    def done_at_third():
        threads.add(threading.current_thread().name)
        calls["done"] += 1
        return calls["done"] == 3

    def never_done():
        calls["forgotten"] += 1
        return False

    def broken():
        calls["broken"] += 1
        raise OSError("cgroup gone")

    watch.watch("a", done_at_third)
    watch.watch("b", never_done)
    watch.watch("c", broken)
    wait_until(lambda: calls["done"] == 3 and calls["forgotten"] >= 3)
    thread = watch._thread          # alive while "b" is watched
    assert thread is not None
    watch.forget("b")
    thread.join(30)
    assert not thread.is_alive() and watch._thread is None
    assert calls["done"] == 3        # not looked at once done
    assert calls["broken"] == 1      # a failing look is dropped, the others go on
    assert threads == {"oom-watch"}
    release = threading.Event()
    watch.watch("d", lambda: release.wait(30))   # a new watch starts a new thread
    second = watch._thread
    assert second is not None and second is not thread
    release.set()
    second.join(30)
    assert not second.is_alive() and watch._thread is None


def test_a_watch_whose_thread_cannot_start_says_so_and_keeps_nothing(monkeypatch):
    watch = OomWatch(interval=0.01)

    def refused(thread):
        raise RuntimeError("can't start new thread")
    monkeypatch.setattr(threading.Thread, "start", refused)
    with pytest.raises(RuntimeError):
        watch.watch("a", lambda: False)
    assert watch._looks == {} and watch._thread is None
    monkeypatch.undo()
    release = threading.Event()
    watch.watch("b", lambda: release.wait(30))   # a thread starts once one can
    thread = watch._thread
    assert thread is not None
    release.set()
    thread.join(30)
    assert not thread.is_alive()


class FoundNothing:
    def limitation(self, status=None):
        return None

    def kill(self):
        raise AssertionError("nothing to kill")


def test_a_late_look_never_unsets_the_limitation_found_at_the_exit():
    # The task's thread found it (its exit status, a count that moved after
    # the watch read it); a look already running reads nothing and must not
    # overwrite it with None.
    proc = TaskProcess.__new__(TaskProcess)
    proc.cgroups, proc.limitation = FoundNothing(), "Memory limit exceeded: ..."
    assert proc._look_for_limitation() is True
    assert proc.limitation == "Memory limit exceeded: ..."
    proc.limitation = None
    assert proc._look_for_limitation() is False and proc.limitation is None


def test_a_watched_eventfd_wakes_the_watch_and_a_forgotten_one_is_never_read():
    # A task with an eventfd is looked at once as it is watched, then when
    # the kernel signals it (until its look finds the kill), not every
    # interval; one forgotten is out of the watch's hands before its owner
    # closes it (its number may be reused at once).
    import os

    from mesos_local.containerizer import oom_watch
    watch = OomWatch(interval=600.0, safety=600.0)
    looks = {"a": 0, "b": 0}
    found = threading.Event()

    def look_a():
        looks["a"] += 1
        return found.is_set()
    wake_a = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
    wake_b = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
    try:
        watch.watch("a", look_a, wake_a)
        watch.watch("b", lambda: looks.__setitem__("b", looks["b"] + 1), wake_b)
        wait_until(lambda: looks["a"] == 1 and looks["b"] == 1)   # once at once
        time.sleep(0.2)
        assert looks == {"a": 1, "b": 1}                          # then nothing to do
        os.eventfd_write(wake_a, 1)
        wait_until(lambda: looks["a"] >= 3)    # woken, and again until it finds the kill
        found.set()
        wait_until(lambda: "a" not in watch._looks)
        watch.forget("b")
        os.eventfd_write(wake_b, 1)
        time.sleep(0.2)
        assert looks["b"] == 1
        assert os.eventfd_read(wake_b) == 1    # left unread by the watch
        assert oom_watch.AFTER_EVENT_POLL < oom_watch.LIMITATION_POLL
    finally:
        watch.forget("a")
        watch.forget("b")
        os.close(wake_a)
        os.close(wake_b)
