"""The tfmesos scheduler fed with synthetic offers and a recording driver."""

import queue
import threading

import pytest
from addict import Dict
from offers import FakeDriver, offer

from tfmesos.core.jobs import parse_jobs
from tfmesos.core.scheduler import TFMesosScheduler
from tfmesos.core.slots import make_slots
from tfmesos.exceptions import MesosCallError, MesosConnectionError


def make(jobs, extra_ports=None):
    slots = make_slots(parse_jobs(jobs))
    built = []

    def build(slot, assignment):
        built.append((slot.name, assignment.port))
        return {"task_id": {"value": slot.task_id}}
    return TFMesosScheduler(slots, build, queue.Queue(), "run1", extra_ports=extra_ports), \
        slots, built


def test_places_all_tasks_then_declines_the_rest_and_suppresses():
    sched, slots, built = make([{"name": "ps", "cpus": 1, "mem": 512},
                                {"name": "worker", "num": 2, "cpus": 1, "mem": 512}])
    driver = FakeDriver()
    sched.resourceOffers(driver, [Dict(offer("o1", cpus=2)), Dict(offer("o2", cpus=2)),
                                  Dict(offer("o3", cpus=2))])
    launches = [c for c in driver.calls if c[0] == "launch"]
    assert sum(len(c[2]) for c in launches) == 3
    assert ("decline", ["o3"], {"refuse_seconds": 120.0}) in driver.calls
    assert driver.calls[-1] == ("suppress",)
    assert {s.state for s in slots} == {"TASK_STAGING"}
    assert [s.task_id for s in slots] == ["tfmesos.run1.ps.0.1", "tfmesos.run1.worker.0.1",
                                          "tfmesos.run1.worker.1.1"]
    assert sched.slot_of("tfmesos.run1.worker.1.1") is slots[2]


def test_extra_ports_are_asked_for_and_kept_on_the_slot():
    sched, slots, built = make([{"name": "worker", "num": 2, "cpus": 1, "mem": 1}],
                               extra_ports=lambda slot: 1 if slot.index == 0 else 0)
    sched.resourceOffers(FakeDriver(), [Dict(offer("o1", cpus=2, ports=((31000, 31009),)))])
    assert [(s.port, s.extra_ports) for s in slots] == [(31000, (31001,)), (31002, ())]
    slots.requeue([slots[0]])
    sched.revive(FakeDriver())
    sched.resourceOffers(FakeDriver(), [Dict(offer("o2", ports=((32000, 32009),)))])
    assert (slots[0].port, slots[0].extra_ports) == (32000, (32001,))


def test_an_agent_whose_ports_are_all_in_use_gets_no_task_and_the_wait_says_why():
    # Its third task went to the agent's next offer, which came without
    # ports (all in use), and bound a port of its own, outside the agent's
    # (found by a review helper with the embedded master's port window
    # nearly all taken by another program).
    sched, slots, built = make([{"name": "worker", "num": 3, "cpus": 1, "mem": 1}])
    sched.resourceOffers(FakeDriver(), [Dict(offer("o1", cpus=2, ports=((31000, 31001),),
                                                   agent="a1", hostname="h1"))])
    sched.resourceOffers(FakeDriver(), [Dict(offer("o2", cpus=2, ports=(), agent="a1",
                                                   hostname="h1"))])
    assert sorted(port for _, port in built) == [31000, 31001]
    assert [s.state for s in slots].count("PENDING") == 1
    assert "agent h1 offered no port: every port it offers is in use (each task needs one)" \
        in sched.missing_message(600, "m:5050")
    # Its ports free again (one more task asks for more memory than it has):
    # the message no longer blames the ports (found by a review helper).
    sched.resourceOffers(FakeDriver(), [Dict(offer("o3", cpus=2, mem=0.5, agent="a1",
                                                   hostname="h1"))])
    assert "offered no port" not in sched.missing_message(600, "m:5050")


def test_offers_when_nothing_is_pending_are_declined_for_long():
    sched, slots, _ = make([{"name": "worker", "cpus": 1, "mem": 1}])
    driver = FakeDriver()
    sched.resourceOffers(driver, [Dict(offer("o1"))])
    driver.calls.clear()
    sched.resourceOffers(driver, [Dict(offer("o2"))])
    assert driver.calls == [("decline", ["o2"], {"refuse_seconds": 120.0})]


def test_partial_placement_keeps_offers_coming():
    sched, slots, _ = make([{"name": "worker", "num": 2, "cpus": 2, "mem": 1}])
    driver = FakeDriver()
    sched.resourceOffers(driver, [Dict(offer("o1", cpus=3))])
    assert [s.state for s in slots] == ["TASK_STAGING", "PENDING"]
    assert ("suppress",) not in driver.calls
    assert sched.largest_offer["cpus"] == 3


def test_relaunch_revives_and_uses_a_new_task_id():
    sched, slots, _ = make([{"name": "worker", "cpus": 1, "mem": 1}])
    driver = FakeDriver()
    sched.resourceOffers(driver, [Dict(offer("o1"))])
    slots.requeue([slots[0]])
    sched.revive(driver)
    assert driver.calls[-1] == ("revive",) and slots[0].state == "PENDING"
    sched.resourceOffers(driver, [Dict(offer("o2"))])
    assert slots[0].task_id == "tfmesos.run1.worker.0.2" and slots[0].attempts == 2


def test_launch_lost_to_a_disconnection_leaves_the_task_pending():
    sched, slots, _ = make([{"name": "worker", "cpus": 1, "mem": 1}])
    sched.resourceOffers(FakeDriver(fail_launch=MesosConnectionError("gone")), [Dict(offer("o1"))])
    assert slots[0].state == "PENDING" and slots[0].attempts == 0 and slots[0].task_id is None


def test_other_launch_errors_propagate_to_the_driver():
    sched, slots, _ = make([{"name": "worker", "cpus": 1, "mem": 1}])
    with pytest.raises(RuntimeError):
        sched.resourceOffers(FakeDriver(fail_launch=RuntimeError("bug")), [Dict(offer("o1"))])


def test_a_launch_lost_to_a_disconnection_puts_back_the_unsent_offers_tasks_too():
    sched, slots, _ = make([{"name": "worker", "num": 2, "cpus": 2, "mem": 1}])
    offers = [Dict(offer("o1", cpus=2, agent="a1")), Dict(offer("o2", cpus=2, agent="a2"))]
    driver = FakeDriver(fail_launch=MesosConnectionError("gone"))
    sched.resourceOffers(driver, offers)
    assert [(s.state, s.attempts, s.task_id) for s in slots] == [("PENDING", 0, None)] * 2
    assert sched.slot_of("tfmesos.run1.worker.1.1") is None
    # Where the subscription lives on (a refused or timed-out call), the
    # offers not sent would stay this framework's (Mesos has no offer
    # timeout by default): they go back.
    assert driver.calls == [("decline", ["o1", "o2"], {"refuse_seconds": 2.0})]


@pytest.mark.parametrize("status", [307, 503])
def test_a_launch_refused_by_a_master_that_does_not_lead_waits_for_the_leader(status):
    """Mesos answers a scheduler call 503 ("Not the leading master", "Master
    has not finished recovery") or 307 (to the leader) before it looks at it
    (src/master/http.cpp, Master::Http::scheduler): nothing was launched, and
    the driver's subscription moves to the leader. The tasks wait; the run
    does not abort."""
    sched, slots, _ = make([{"name": "worker", "cpus": 1, "mem": 1}])
    driver = FakeDriver(fail_launch=MesosCallError("refused: HTTP %d" % status, status=status))
    sched.resourceOffers(driver, [Dict(offer("o1"))])
    assert (slots[0].state, slots[0].attempts, slots[0].task_id) == ("PENDING", 0, None)

def test_a_failed_launch_gives_back_the_offers_placement_left_unused_too():
    sched, slots, _ = make([{"name": "worker", "cpus": 2, "mem": 1}])
    offers = [Dict(offer("o1", cpus=2, agent="a1")), Dict(offer("o2", cpus=2, agent="a2"))]
    driver = FakeDriver(fail_launch=MesosConnectionError("gone"))
    sched.resourceOffers(driver, offers)
    assert slots[0].state == "PENDING"
    assert driver.calls == [("decline", ["o2", "o1"], {"refuse_seconds": 2.0})]

def test_a_launch_the_master_may_have_received_keeps_its_tasks_and_asks_mesos_of_them():
    """A LAUNCH whose answer never came (a timeout): the master may have
    launched its tasks. They keep their task ids (their registrations and
    updates are the run's, and no second attempt doubles them) and are
    reconciled: Mesos says whether they run, or TASK_LOST when it never got
    them. The offers not sent yet go back, their tasks wait for others."""
    sched, slots, _ = make([{"name": "worker", "num": 2, "cpus": 2, "mem": 1}])
    offers = [Dict(offer("o1", cpus=2, agent="a1")), Dict(offer("o2", cpus=2, agent="a2"))]
    driver = FakeDriver(fail_launch=MesosConnectionError("timed out", maybe_delivered=True))
    sched.resourceOffers(driver, offers)
    assert [(s.state, s.attempts, s.task_id) for s in slots] == [
        ("TASK_STAGING", 1, "tfmesos.run1.worker.0.1"), ("PENDING", 0, None)]
    assert sched.slot_of("tfmesos.run1.worker.0.1") is slots[0]
    assert driver.calls == [("reconcile", [("tfmesos.run1.worker.0.1", "a1")]),
                            ("decline", ["o2"], {"refuse_seconds": 2.0})]


def test_the_run_hears_of_launches_outside_the_lock_before_mesos_does():
    slots = make_slots(parse_jobs([{"name": "worker", "num": 2, "cpus": 1, "mem": 1}]))
    heard = []

    class Driver(FakeDriver):
        def launchTasks(self, offer_ids, tasks, filters=None):
            heard.append("launch")
            super().launchTasks(offer_ids, tasks, filters)

    def lock_is_free():
        """Whether another thread could take the lock now."""
        free = []

        def probe():
            if slots.lock.acquire(blocking=False):
                free.append(True)
                slots.lock.release()
        thread = threading.Thread(target=probe)
        thread.start()
        thread.join()
        return bool(free)

    def on_launch(launches):
        heard.append(("expect", [(x.slot.name, x.task_id, x.attempt, x.agent_id)
                                 for x in launches], lock_is_free()))

    sched = TFMesosScheduler(slots, lambda slot, a: {"task_id": {"value": slot.task_id}},
                             queue.Queue(), "run1", on_launch=on_launch)
    sched.resourceOffers(Driver(), [Dict(offer("o1", cpus=2, agent="a1"))])
    assert heard == [("expect", [("worker:0", "tfmesos.run1.worker.0.1", 1, "a1"),
                                 ("worker:1", "tfmesos.run1.worker.1.1", 1, "a1")], True),
                     "launch"]


def test_an_offer_declined_after_the_run_tore_its_framework_down_is_no_news(caplog):
    """tfrun -v said "offers lost to a disconnection" at the end of most runs:
    an offer that came while the framework was torn down."""
    sched, _, _ = make([{"name": "worker", "cpus": 1, "mem": 512}])
    driver = FakeDriver()

    def torn_down(*args, **kwargs):
        raise MesosConnectionError("cannot send DECLINE: the framework was torn down")
    driver.declineOffer = torn_down
    caplog.set_level("DEBUG", logger="tfmesos.core.scheduler")
    sched.close()
    sched.resourceOffers(driver, [Dict(offer("o1", agent="a1", hostname="agent-1"))])
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "offers lost" in r.getMessage()]
    assert said == [("DEBUG", "offers lost to a disconnection: cannot send DECLINE: the framework "
                              "was torn down")]
