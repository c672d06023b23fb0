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
