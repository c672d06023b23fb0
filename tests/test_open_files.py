"""A run raises its process's soft open-files limit to what its tasks may
need, within the hard limit, and says so when even that is too low (the
limits faked here; tests/test_tfrun.py runs tfrun under a low one)."""

import resource

from tfmesos.core import open_files


class Limits:
    def __init__(self, soft, hard, refuse=False):
        self.soft, self.hard, self.refuse = soft, hard, refuse

    def get(self, which):
        assert which == resource.RLIMIT_NOFILE
        return self.soft, self.hard

    def set(self, which, limits):
        assert which == resource.RLIMIT_NOFILE
        if self.refuse:
            raise ValueError("not allowed")
        assert limits[1] == self.hard   # the hard limit is never changed
        assert self.hard == resource.RLIM_INFINITY or limits[0] <= self.hard
        self.soft = limits[0]

    def raise_for(self, tasks):
        return open_files.raise_for(tasks, self.get, self.set)


def test_the_soft_limit_is_raised_to_what_the_tasks_need_within_the_hard_one():
    limits = Limits(1024, 524288)
    assert limits.raise_for(1000) is None
    assert limits.soft == open_files.needed(1000) > 1024


def test_a_soft_limit_that_suffices_is_left_as_it_is_never_lowered():
    for soft in (open_files.needed(200), 65536, resource.RLIM_INFINITY):
        limits = Limits(soft, resource.RLIM_INFINITY)
        assert limits.raise_for(200) is None
        assert limits.soft == soft


def test_an_infinite_hard_limit_gives_what_is_needed():
    limits = Limits(1024, resource.RLIM_INFINITY)
    assert limits.raise_for(500) is None
    assert limits.soft == open_files.needed(500)


def test_a_hard_limit_below_the_need_raises_to_it_and_says_how_to_fix_it():
    limits = Limits(256, 1024)
    said = limits.raise_for(2000)
    assert limits.soft == 1024
    assert said.startswith("2000 tasks may need up to %d open files" % open_files.needed(2000))
    assert "may open 1024" in said and "ulimit -Hn" in said


def test_a_refused_raise_is_said_too():
    limits = Limits(256, 4096, refuse=True)
    said = limits.raise_for(2000)
    assert limits.soft == 256 and "may open 256" in said


def test_the_need_grows_with_the_tasks():
    assert open_files.needed(0) == open_files.BASE
    assert open_files.needed(200) - open_files.needed(100) == 100 * open_files.PER_TASK
    # What was measured: 200 tasks on the embedded master, 622 open files at their peak.
    assert open_files.needed(200) >= 622


def test_a_hard_limit_below_what_the_tasks_surely_take_is_why_they_cannot_run():
    assert open_files.too_few(60, Limits(64, 64).get) == (
        "60 tasks need at least 212 open files at once, and this process may open 64 at most "
        "(ulimit -Hn): raise the hard limit (limits.conf, LimitNOFILE=), or run at most 10 "
        "tasks")
    assert "run at most 32 tasks" in open_files.too_few(40, Limits(128, 128).get)
    assert open_files.too_few(30, Limits(128, 128).get) is None     # 122 fit
    assert open_files.too_few(60, Limits(64, resource.RLIM_INFINITY).get) is None
    assert open_files.too_few(60, Limits(64, 4096).get) is None     # the soft one is raised
    assert open_files.too_few(10, Limits(1, 1).get) is None         # a run that surely fits


def test_a_soft_limit_below_the_common_defaults_is_raised_for_a_small_run_too():
    # (ulimit -Sn 16; tfrun -w 2 -s 1 ...): a small run's need (140) is below
    # every common default soft limit, so none was looked at: the run failed
    # in a traceback ('Too many open files') or waited in vain (found by a
    # review helper).
    limits = Limits(16, 20000)
    assert limits.raise_for(3) is None
    assert limits.soft == open_files.needed(3)
