"""The embedded master's one agent is sized to the run's cluster: cpus and
memory to the cluster's sum where it asks for more than the machine, and
a port window with a port for every task (and worker 0's coordinator),
room for relaunches, at least the 101 ports two small runs draw from."""

import collections
import socket

import pytest

from tfmesos.backends import sizing
from tfmesos.exceptions import SpecError

Job = collections.namedtuple("Job", "name num cpus mem gpus")


@pytest.fixture(autouse=True)
def default_ports(monkeypatch):
    monkeypatch.delenv(sizing.PORTS_ENV, raising=False)   # (test lanes set their own)


@pytest.fixture
def every_port_free(monkeypatch):
    """Windows as drawn, whatever this machine holds now (other tests' tasks,
    outgoing connections' ports): the tests of the drawing, not the probe."""
    monkeypatch.setattr(sizing, "free_ranges", lambda low, high: [(low, high)])


def window(agent):
    """The window the agent's ports were drawn from: its first and last port
    (the ports something on this machine holds are left out of it)."""
    return agent.ports[0][0], agent.ports[-1][1]


def count(ranges):
    return sum(high - low + 1 for low, high in ranges)


@pytest.mark.parametrize("tasks", [1, 3, 100, 210, 1000])
def test_the_port_window_holds_every_task_and_a_relaunch_of_each(tasks, every_port_free):
    jobs = [Job("ps", 1, 0.1, 32, 0), Job("worker", tasks - 1, 0.1, 32, 0)] if tasks > 1 \
        else [Job("worker", 1, 0.1, 32, 0)]
    for _ in range(20):   # a random window each time: each inside 20000-30999
        agent = sizing.local_agent(jobs)
        low, high = window(agent)
        assert high - low + 1 >= max(101, 2 * tasks + 1)
        assert 20000 <= low and high <= 30999
        assert count(agent.ports) >= tasks + 1


def test_two_small_runs_draw_from_many_windows(every_port_free):
    drawn = {window(sizing.local_agent([Job("worker", 2, 0.1, 32, 0)])) for _ in range(200)}
    assert len(drawn) > 50


def test_beyond_the_embedded_masters_bound_is_one_line_naming_the_fix():
    with pytest.raises(SpecError) as caught:
        sizing.check_fits([Job("worker", sizing.LOCAL_MAX_TASKS + 1, 0.1, 32, 0)])
    assert "runs at most %d" % sizing.LOCAL_MAX_TASKS in str(caught.value)
    assert "run on a Mesos cluster" in str(caught.value)


def test_tfmesos_local_ports_is_the_range_windows_are_drawn_from(monkeypatch, every_port_free):
    monkeypatch.setenv(sizing.PORTS_ENV, "40000-40300")
    drawn = {window(sizing.local_agent([Job("worker", 2, 0.1, 32, 0)])) for _ in range(100)}
    assert drawn == {(40000, 40100), (40101, 40201)}   # whole windows of 101 only
    for text, said in (("x", "give a range of ports LOW-HIGH within 1024-65535"),
                       ("40000-30000", "give a range"), ("80-90", "give a range"),
                       ("40000-40050", "holds 51 ports; the embedded master needs a window "
                                       "of 101 for 2 tasks: widen it")):
        monkeypatch.setenv(sizing.PORTS_ENV, text)
        with pytest.raises(SpecError, match=said):
            sizing.check_local([Job("worker", 2, 0.1, 32, 0)], {})


@pytest.fixture
def held():
    """Sockets holding ports: ``held(port, listen)``; closed after."""
    sockets = []

    def hold(port, listen=True):
        sock = socket.socket()
        sock.bind(("", port))
        if listen:
            sock.listen()
        sockets.append(sock)
        return sock
    yield hold
    for sock in sockets:
        sock.close()


def free_window(size):
    """A window of ``size`` ports that nothing holds now: below the ports
    the suite's runs draw their windows from (20000-30999) and Linux's
    ephemeral range (32768-60999), which outgoing connections take."""
    for low in range(20000 - size, 10000, -size):
        if sizing.free_ranges(low, low + size - 1) == [(low, low + size - 1)]:
            return low
    pytest.skip("no window of %d free ports here" % size)


def test_ports_something_holds_are_left_out_of_the_agent_s(monkeypatch, held):
    low = free_window(101)
    held(low)                       # a server's
    held(low + 50, listen=False)    # a socket bound, not listening yet
    monkeypatch.setenv(sizing.PORTS_ENV, "%d-%d" % (low, low + 100))
    agent = sizing.local_agent([Job("worker", 2, 0.1, 32, 0)])
    assert agent.ports == ((low + 1, low + 49), (low + 51, low + 100))


def test_a_window_without_a_port_for_every_task_is_drawn_again(monkeypatch, held):
    low = free_window(202)
    first, second = (low, low + 100), (low + 101, low + 201)
    for port in range(low, low + 100):   # the first window: one port free of 101
        held(port)
    drawn = iter([first, second])
    monkeypatch.setattr(sizing, "local_port_window", lambda tasks: next(drawn))
    assert sizing.local_port_ranges(3) == (second,)
    # none of the draws can hold 3 tasks: the last drawn, whatever it holds
    monkeypatch.setattr(sizing, "local_port_window", lambda tasks: first)
    assert sizing.local_port_ranges(3) == ((low + 100, low + 100),)
