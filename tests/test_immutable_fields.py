"""The FrameworkInfo fields a framework keeps for its life (principal,
user, checkpoint: Mesos' ``validateUpdate``/``preserveImmutableFields``):
a scheduler that takes a framework over says them as the master holds
them, and the driver's UPDATE_FRAMEWORK never changes them."""

import threading

import pytest

from tfmesos.exceptions import MesosError, TFMesosError
from tfmesos.mesos import MesosSchedulerDriver, Scheduler
from tfmesos.mesos.immutable import adopt_held, with_immutable_fields
from tfmesos.mesos.mock_transport import MockTransport

TODAYS = {"id": {"value": "fw-1"}, "user": "alice", "name": "run", "checkpoint": True,
          "principal": "p", "labels": {"labels": [{"key": "k", "value": "new"}]}}


def test_the_held_fields_replace_todays_and_nothing_else():
    held = {"id": {"value": "fw-1"}, "user": "bob", "name": "old", "principal": "q",
            "labels": {"labels": []}}
    adopted = with_immutable_fields(TODAYS, held)
    # A field the master does not hold is Mesos' default: no checkpoint.
    assert adopted == {key: value for key, value in dict(TODAYS, user="bob", principal="q").items()
                       if key != "checkpoint"}
    assert with_immutable_fields(TODAYS, dict(held, checkpoint=False))["checkpoint"] is False
    assert TODAYS["checkpoint"] is True   # not changed in place


class Reader:
    def __init__(self, held=None, error=None):
        self.held, self.error, self.asked = held, error, []

    def framework_info(self, framework_id):
        self.asked.append(framework_id)
        if self.error is not None:
            raise self.error
        return self.held


def test_a_takeover_adopts_what_the_master_registered():
    reader = Reader({"id": {"value": "fw-1"}, "user": "alice", "principal": "p",
                     "checkpoint": False})
    assert adopt_held(TODAYS, reader) == dict(TODAYS, checkpoint=False)
    assert reader.asked == ["fw-1"]


@pytest.mark.parametrize("reader", [
    Reader(None), Reader(error=MesosError("unreachable")),
    # A zk:// master whose password the reader was not given: the detached
    # scheduler task failed with it (CI of 84470c1, test_secrets_grep).
    Reader(error=TFMesosError("tfmesos keeps the ZooKeeper password in no file"))])
def test_a_framework_the_master_cannot_say_is_taken_over_as_it_was(reader):
    assert adopt_held(TODAYS, reader) == TODAYS


def test_a_new_framework_asks_the_master_nothing():
    reader = Reader({"user": "bob"})
    assert adopt_held({"user": "alice", "name": "run"}, reader) == {"user": "alice",
                                                                    "name": "run"}
    assert reader.asked == []


class Subscriber(Scheduler):
    def __init__(self):
        self.subscribed = threading.Event()

    def registered(self, driver, framework_id, master_info):
        self.subscribed.set()


def test_update_framework_keeps_the_fields_the_driver_subscribed_with():
    # A detached run's proof label is set with the FrameworkInfo this
    # tfmesos builds (checkpoint true): the framework subscribed without.
    mock, scheduler = MockTransport(framework_id="fw-1"), Subscriber()
    subscribed = {"id": {"value": "fw-1"}, "user": "bob", "name": "run", "principal": "q"}
    driver = MesosSchedulerDriver(scheduler, subscribed, "mock-master:5050", transport=mock)
    driver.start()
    try:
        assert scheduler.subscribed.wait(10), "never subscribed"
        driver.updateFramework(dict(TODAYS))
    finally:
        driver.abort()
    [update] = mock.calls_of("UPDATE_FRAMEWORK")
    sent = update["update_framework"]["framework_info"]
    expected = dict(TODAYS, user="bob", principal="q")
    del expected["checkpoint"]
    assert sent == expected
    # The next SUBSCRIBE says the same (the driver keeps what it sent).
    assert driver.framework == sent
