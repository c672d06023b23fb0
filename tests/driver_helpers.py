"""Driving the HTTP scheduler driver in tests: ``Events`` (a scheduler that
queues its callbacks), the ``drivers`` fixture (started drivers, aborted at
the end of the test), ``task``/``launch`` (a TaskInfo on an offer) and
``states_of`` (a task's updates up to a final state)."""

import getpass
import queue
import time

import pytest

from tfmesos.mesos import MesosSchedulerDriver, Scheduler


class Events(Scheduler):
    """Puts every callback on a queue; declines nothing by itself."""

    def __init__(self):
        self.queue = queue.Queue()

    def _put(self, name, *args):
        self.queue.put((name, args))

    def registered(self, driver, framework_id, master_info):
        self._put("registered", framework_id.value, master_info)

    def reregistered(self, driver, master_info):
        self._put("reregistered", master_info)

    def disconnected(self, driver):
        self._put("disconnected")

    def resourceOffers(self, driver, offers):
        self._put("offers", offers)

    def statusUpdate(self, driver, update):
        self._put("update", update)

    def slaveLost(self, driver, agent_id):
        self._put("agent_lost", agent_id.value)

    def error(self, driver, message):
        self._put("error", message)

    def next(self, name, timeout=10, where=lambda *args: True):
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("no %s callback within %s s" % (name, timeout))
            try:
                got, args = self.queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if got == name and where(*args):
                return args

    def none(self, name, seconds):
        """Assert no ``name`` callback arrives for ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                got, _ = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            assert got != name, "unexpected %s callback" % name


@pytest.fixture
def drivers():
    made = []

    def make(master, scheduler=None, **kwargs):
        framework = kwargs.pop("framework", {})
        info = dict({"user": getpass.getuser(), "name": "driver-test"}, **framework)
        sched = scheduler or Events()
        driver = MesosSchedulerDriver(sched, info, master, **kwargs)
        made.append(driver)
        driver.start()
        return driver, sched

    yield make
    for driver in made:
        try:
            driver.abort()
            driver.join(timeout=10)
        except Exception:
            pass


def task(name, offer, command, cpus=0.1, mem=32):
    return {"name": name, "task_id": {"value": name}, "agent_id": offer.agent_id,
            "command": {"value": command},
            "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": cpus}},
                          {"name": "mem", "type": "SCALAR", "scalar": {"value": mem}}]}


def launch(driver, sched, name, command):
    offer = sched.next("offers")[0][0]
    driver.launchTasks([offer.id], [task(name, offer, command)], {"refuse_seconds": 0})
    return offer


def states_of(sched, name, final, timeout=15):
    seen = []
    while not seen or seen[-1].state != final:
        seen.append(sched.next("update", timeout, lambda u: u.task_id.value == name)[0])
    return seen
