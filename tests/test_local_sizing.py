"""The embedded master's one agent is sized to the run's cluster: cpus and
memory to the cluster's sum where it asks for more than the machine, and
a port window with a port for every task (and worker 0's coordinator),
room for relaunches, at least the 101 ports two small runs draw from."""

import collections

import pytest

from tfmesos.backends import sizing
from tfmesos.exceptions import SpecError

Job = collections.namedtuple("Job", "name num cpus mem gpus")


def window(agent):
    [(low, high)] = agent.ports
    return low, high


@pytest.mark.parametrize("tasks", [1, 3, 100, 210, 1000])
def test_the_port_window_holds_every_task_and_a_relaunch_of_each(tasks):
    jobs = [Job("ps", 1, 0.1, 32, 0), Job("worker", tasks - 1, 0.1, 32, 0)] if tasks > 1 \
        else [Job("worker", 1, 0.1, 32, 0)]
    for _ in range(20):   # a random window each time: each inside 20000-30999
        low, high = window(sizing.local_agent(jobs))
        assert high - low + 1 >= max(101, 2 * tasks + 1)
        assert 20000 <= low and high <= 30999


def test_two_small_runs_draw_from_many_windows():
    drawn = {window(sizing.local_agent([Job("worker", 2, 0.1, 32, 0)])) for _ in range(200)}
    assert len(drawn) > 50


def test_beyond_the_embedded_masters_bound_is_one_line_naming_the_fix():
    with pytest.raises(SpecError) as caught:
        sizing.check_fits([Job("worker", sizing.LOCAL_MAX_TASKS + 1, 0.1, 32, 0)])
    assert "runs at most %d" % sizing.LOCAL_MAX_TASKS in str(caught.value)
    assert "run on a Mesos cluster" in str(caught.value)
