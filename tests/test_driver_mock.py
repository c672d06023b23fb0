"""The driver over its transport seam, with a master in memory
(``mesos.mock_transport.MockTransport``): callbacks, calls and failures
without a socket."""

import threading

import pytest
from offers import offer

from tfmesos.exceptions import MesosCallError, MesosConnectionError
from tfmesos.mesos import MesosSchedulerDriver, Scheduler
from tfmesos.mesos.mock_transport import MockTransport


class Recorder(Scheduler):
    def __init__(self):
        self.seen = []
        self.changed = threading.Condition()

    def _note(self, *item):
        with self.changed:
            self.seen.append(item)
            self.changed.notify_all()

    def registered(self, driver, framework_id, master_info):
        self._note("registered", framework_id.value)

    def resourceOffers(self, driver, offers):
        self._note("offers", [o.id.value for o in offers])
        driver.launchTasks([offers[0].id], [{"task_id": {"value": "t1"}, "name": "t1",
                                             "agent_id": offers[0].agent_id}])

    def statusUpdate(self, driver, status):
        self._note("update", status.task_id.value, status.state)

    def disconnected(self, driver):
        self._note("disconnected")

    def error(self, driver, message):
        self._note("error", message)

    def wait_for(self, kind, timeout=10):
        with self.changed:
            assert self.changed.wait_for(lambda: any(i[0] == kind for i in self.seen), timeout), \
                "no %s within %s s: %s" % (kind, timeout, self.seen)


@pytest.fixture
def driven():
    mock, scheduler = MockTransport(framework_id="fw-7"), Recorder()
    driver = MesosSchedulerDriver(scheduler, {"user": "u", "name": "n"}, "mock-master:5050",
                                  transport=mock)
    driver.start()
    yield driver, mock, scheduler
    driver.abort()


def test_subscribes_dispatches_offers_and_sends_calls_through_the_transport(driven):
    driver, mock, scheduler = driven
    scheduler.wait_for("registered")
    assert ("registered", "fw-7") in scheduler.seen and driver.framework_id == "fw-7"
    mock.offer(offer("o1"))
    scheduler.wait_for("offers")
    [accept] = mock.calls_of("ACCEPT")
    assert accept["framework_id"] == {"value": "fw-7"}
    assert accept["accept"]["offer_ids"] == [{"value": "o1"}]
    assert accept["accept"]["operations"][0]["type"] == "LAUNCH"


def test_updates_are_acknowledged_implicitly(driven):
    driver, mock, scheduler = driven
    scheduler.wait_for("registered")
    mock.update({"task_id": {"value": "t1"}, "state": "TASK_RUNNING", "uuid": "AAEC",
                 "agent_id": {"value": "a1"}})
    scheduler.wait_for("update")
    assert scheduler.seen[-1] == ("update", "t1", "TASK_RUNNING")
    [ack] = mock.calls_of("ACKNOWLEDGE")
    assert ack["acknowledge"]["uuid"] == "AAEC"


def test_a_refused_call_raises_in_the_caller(driven):
    driver, mock, scheduler = driven
    scheduler.wait_for("registered")
    mock.refuse("KILL", 400, "Framework cannot be found")
    with pytest.raises(MesosCallError, match="refused KILL: HTTP 400 Framework cannot be"):
        driver.killTask({"value": "t1"})


def test_an_acknowledgement_refused_for_a_framework_torn_down_does_not_abort_the_driver(driven):
    # An operator tore the framework down as an update came: its implicit
    # ACKNOWLEDGE got 400 "Framework cannot be found" and the driver aborted
    # ("the scheduler failed handling UPDATE"), where the run should learn
    # of the teardown (CI: test_an_operator_teardown_of_a_foreground_run_is_a_kill).
    driver, mock, scheduler = driven
    scheduler.wait_for("registered")
    mock.refuse("ACKNOWLEDGE", 400, "Framework cannot be found")
    mock.update({"task_id": {"value": "t1"}, "state": "TASK_KILLED", "uuid": "AAEC",
                 "agent_id": {"value": "a1"}})
    scheduler.wait_for("update")
    mock.update({"task_id": {"value": "t2"}, "state": "TASK_KILLED",
                 "agent_id": {"value": "a1"}})   # no uuid: nothing to acknowledge
    with scheduler.changed:   # dispatched: the driver went on (an aborted one calls no more)
        assert scheduler.changed.wait_for(
            lambda: sum(1 for seen in scheduler.seen if seen[0] == "update") == 2, 10), \
            scheduler.seen
    assert not any(seen[0] == "error" for seen in scheduler.seen), scheduler.seen


def test_a_lost_stream_and_a_driver_that_gives_up(driven):
    driver, mock, scheduler = driven
    scheduler.wait_for("registered")
    mock.lose_stream()
    scheduler.wait_for("disconnected")
    assert not driver.connected
    mock.give_up("no master for 60 s")
    with pytest.raises(MesosConnectionError, match="no master for 60 s"):
        driver.join(10)
    assert ("error", "no master for 60 s") in scheduler.seen


MISMATCH = ("The stream ID 'old' included in this request didn't match the stream ID "
            "currently associated with framework ID fw-7")


def test_a_call_refused_for_a_stream_another_subscription_replaced_is_a_fail_over(driven):
    # Two `tfmesos attach` at once: the loser's calls were refused (400,
    # the stream ID) before its stream had Mesos' ERROR "Framework failed
    # over"; it failed "handling OFFERS", recorded a failure, stopped the tasks.
    from tfmesos.exceptions import FrameworkFailedOver
    from tfmesos.mesos.interface import FAILED_OVER
    driver, mock, scheduler = driven
    scheduler.wait_for("registered")
    mock.refuse("REVIVE", 400, MISMATCH)
    with pytest.raises(FrameworkFailedOver) as caught:
        driver.reviveOffers()
    assert str(caught.value).startswith(FAILED_OVER + ": another scheduler subscribed as "
                                        "framework fw-7 (")
    assert caught.value.status == 400 and isinstance(caught.value, MesosCallError)


def test_the_same_refusal_after_a_subscription_of_its_own_is_no_fail_over(driven):
    # The driver re-subscribed (a new stream) while the call went with the old one.
    from tfmesos.exceptions import FrameworkFailedOver
    driver, mock, scheduler = driven
    scheduler.wait_for("registered")
    mock.refuse("REVIVE", 400, MISMATCH)
    real_state, answers = driver._stream.state, []

    def state():
        url, stream_id, subscribed = real_state()
        answers.append(stream_id)
        return url, stream_id if len(answers) == 1 else "a-newer-stream", subscribed
    driver._stream.state = state
    # Mesos refused the call before it handled it (src/master/http.cpp,
    # Master::Http::scheduler): a call of a lost subscription, to send again
    # or reconcile as after a disconnection. It was a plain refusal: an
    # acknowledgement or a reconcile so refused aborted the driver and
    # failed a healthy run (found by a review helper).
    with pytest.raises(MesosConnectionError, match="cannot send REVIVE: the driver subscribed "
                       "again as it was sent") as caught:
        driver.reviveOffers()
    assert not isinstance(caught.value, FrameworkFailedOver)
    assert caught.value.means_disconnected and not caught.value.maybe_delivered


def test_a_stop_while_the_subscription_is_answered_tears_the_new_framework_down():
    # tfrun --detach interrupted right after the master registered its
    # framework, before the driver read SUBSCRIBED: the driver knew no id,
    # sent no TEARDOWN, and the framework stayed for its failover timeout
    # (CI: test_a_detached_submit_stopped_before_the_takeover_leaves_nothing).
    mock = MockTransport(framework_id="fw-9", answer_after=0.3)
    driver = MesosSchedulerDriver(Recorder(), {"user": "u", "name": "n"}, "mock-master:5050",
                                  transport=mock)
    driver.start()
    try:
        driver.stop()
        [teardown] = mock.calls_of("TEARDOWN")
        assert teardown["framework_id"] == {"value": "fw-9"}
    finally:
        driver.abort()
