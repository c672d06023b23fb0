"""The callback contract: the driver calls each documented callback with the
documented arguments, and errors in callbacks reach the caller's thread."""

import inspect
import os
import subprocess
import sys

import pytest
from addict import Dict
from tfrun_helpers import REPO

from tfmesos.exceptions import DriverAborted, MesosConnectionError, MesosError
from tfmesos.mesos import MesosSchedulerDriver, Scheduler
from tfmesos.mesos.interface import CALLBACKS, check_scheduler
from tfmesos.mesos.stream_items import Fatal, Received, StreamLost

FRAMEWORK = {"user": "u", "name": "test"}
CLOSED = "127.0.0.1:1"


class Recorder(Scheduler):
    def __init__(self):
        self.calls = []

    def __getattribute__(self, name):
        if name in CALLBACKS:
            def record(driver, *args):
                object.__getattribute__(self, "calls").append((name, args))
            base = getattr(Scheduler, name)
            record.__signature__ = inspect.signature(base.__get__(self))
            return record
        return object.__getattribute__(self, name)


def make_driver(scheduler=None, **kw):
    return MesosSchedulerDriver(scheduler or Recorder(), FRAMEWORK, CLOSED, **kw)


def test_every_callback_is_dispatched_with_documented_arguments():
    sched = Recorder()
    driver = make_driver(sched, implicit_acknowledgements=False)
    events = [
        ("SUBSCRIBED", Dict(framework_id={"value": "fw"}, master_info={"id": "m"})),
        ("SUBSCRIBED", Dict(framework_id={"value": "fw"}, master_info={"id": "m2"})),
        ("OFFERS", Dict(type="OFFERS", offers={"offers": [{"id": {"value": "o1"}}],
                                               "inverse_offers": [{"id": {"value": "i1"}}]})),
        ("RESCIND", Dict(rescind={"offer_id": {"value": "o1"}})),
        ("UPDATE", Dict(update={"status": {"task_id": {"value": "t"}, "state": "TASK_RUNNING"}})),
        ("MESSAGE", Dict(message={"agent_id": {"value": "a"}, "executor_id": {"value": "e"},
                                  "data": "aGk="})),
        ("FAILURE", Dict(failure={"agent_id": {"value": "a"}})),
        ("FAILURE", Dict(failure={"agent_id": {"value": "a"}, "executor_id": {"value": "e"},
                                  "status": 3})),
    ]
    for kind, event in events:
        driver._handle(Received(kind, event))
    driver._handle(StreamLost())
    names = [name for name, _ in sched.calls]
    assert names == ["registered", "reregistered", "resourceOffers", "inverseOffers",
                     "offerRescinded", "statusUpdate", "frameworkMessage", "slaveLost",
                     "executorLost", "disconnected"]
    calls = dict(sched.calls[2:])
    assert sched.calls[0][1] == ({"value": "fw"}, {"id": "m"})
    assert sched.calls[1][1] == ({"id": "m2"},)
    assert calls["resourceOffers"][0][0].id.value == "o1"  # attribute access works
    assert calls["statusUpdate"][0].state == "TASK_RUNNING"
    assert calls["frameworkMessage"] == ({"value": "e"}, {"value": "a"}, b"hi")
    assert calls["executorLost"] == ({"value": "e"}, {"value": "a"}, 3)
    for name, args in sched.calls:
        inspect.signature(getattr(Scheduler, name)).bind(None, driver, *args)


def test_fatal_error_calls_error_then_stops():
    sched = Recorder()
    driver = make_driver(sched)
    error = MesosConnectionError("gone")
    driver._handle(Fatal(error))
    assert sched.calls == [("error", ("gone",))]
    with pytest.raises(MesosConnectionError, match="gone"):
        driver.join()


def test_scheduler_with_wrong_callback_signature_is_refused_up_front():
    class Bad(Scheduler):
        def statusUpdate(self, driver):  # forgot the update
            pass

    with pytest.raises(TypeError, match="statusUpdate"):
        check_scheduler(Bad())


def test_callback_exception_is_raised_by_join_in_the_caller():
    class Boom(Scheduler):
        def resourceOffers(self, driver, offers):
            raise RuntimeError("bad offer handling")

    driver = make_driver(Boom(), connect_timeout=30)
    driver.start()
    driver._events.put(Received("OFFERS", Dict(offers={"offers": [{"id": {"value": "o"}}]})))
    with pytest.raises(MesosError, match="bad offer handling") as info:
        driver.join(timeout=10)
    assert isinstance(info.value, DriverAborted)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert str(info.value) == ("the scheduler failed handling OFFERS: RuntimeError: "
                               "bad offer handling")


def test_callback_exception_reaches_error_and_stops_the_callbacks():
    class Boom(Scheduler):
        calls = []

        def resourceOffers(self, driver, offers):
            raise RuntimeError("bad offer handling")

        def offerRescinded(self, driver, offer_id):
            self.calls.append(("offerRescinded", (offer_id,)))

        def error(self, driver, message):
            self.calls.append(("error", (message,)))

    sched = Boom()
    driver = make_driver(sched, connect_timeout=30)
    driver.start()
    offers = Dict(offers={"offers": [{"id": {"value": "o"}}]})
    driver._events.put(Received("OFFERS", offers))
    driver._events.put(Received("RESCIND", Dict(rescind={"offer_id": {"value": "o"}})))
    with pytest.raises(DriverAborted, match="bad offer handling"):
        driver.join(timeout=10)
    assert sched.calls == [("error", ("the scheduler failed handling OFFERS: RuntimeError: "
                                      "bad offer handling",))]
    assert isinstance(driver.exception, DriverAborted)
    assert isinstance(driver.exception.__cause__, RuntimeError)
    driver.stop()


def test_a_failing_stream_thread_aborts_the_driver_instead_of_hanging():
    class BrokenDetector:
        leaders_changed = None

        def candidates(self, timeout=0.0):
            raise KeyError("no such thing")

        def close(self):
            pass

    sched = Recorder()
    driver = make_driver(sched, detector=BrokenDetector(), connect_timeout=600)
    driver.start()
    with pytest.raises(DriverAborted, match="subscription stream failed: KeyError") as info:
        driver.join(timeout=30)
    assert isinstance(info.value.__cause__, KeyError)
    assert sched.calls[-1][0] == "error"


def test_unreachable_master_gives_up_with_a_clear_error():
    sched = Recorder()
    driver = make_driver(sched, connect_timeout=1.0)
    driver.start()
    with pytest.raises(MesosConnectionError, match="could not subscribe.*127.0.0.1:1"):
        driver.join(timeout=15)
    assert sched.calls[-1][0] == "error"


def test_calls_before_subscription_raise():
    driver = make_driver()
    with pytest.raises(MesosConnectionError, match="not subscribed"):
        driver.declineOffer([{"value": "o"}])


def test_mesos_layer_imports_without_tensorflow():
    # In a fresh interpreter: tfmesos imported anew in this one would leave
    # a second copy of its modules, exception classes included, to the
    # tests that run after this one.
    probe = ("import sys; sys.modules['tensorflow'] = None; import mesos_local, "
             "tfmesos.cli.tfrun, tfmesos.core.launch, tfmesos.mesos, tfmesos.task.__main__")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_decoded_events_are_addict_dicts_like_pymesos_gives():
    from addict import Dict

    from tfmesos.mesos.decoding import decode_event
    record = b'{"type":"OFFERS","offers":{"offers":[{"id":{"value":"o"},"resources":[{"name":"cpus"}]}]}}'
    event = decode_event(record)
    assert event == Dict(__import__("json").loads(record))
    offer = event.offers.offers[0]
    assert isinstance(offer, Dict) and offer.id.value == "o" and offer.resources[0].name == "cpus"
    offer.new.nested = 1  # addict's auto-vivification still works
    assert offer["new"]["nested"] == 1
