"""Messages that name a run's tasks stay one readable line at any size
(``core.task_names``): at 1,000 tasks a launch timeout's error and an
unanswered LAUNCH's warning each were one line of tens of kB."""

from addict import Dict
from offers import FakeDriver, offer

from tfmesos.core.jobs import parse_jobs
from tfmesos.core.scheduler import TFMesosScheduler
from tfmesos.core.slots import make_slots
from tfmesos.core.task_names import brief, grouped, ranges
from tfmesos.exceptions import MesosConnectionError


def test_consecutive_indices_of_a_job_are_one_range():
    names = ["ps:0"] + ["worker:%d" % i for i in range(999)] + ["worker:1000", "chief:0"]
    assert ranges(names) == [("ps:0", 1), ("worker:0-998", 999), ("worker:1000", 1),
                             ("chief:0", 1)]
    assert brief(names) == "ps:0, worker:0-998, worker:1000, chief:0"


def test_a_name_that_is_not_job_index_is_kept_as_it_is():
    assert brief(["tensorboard", "worker:1", "worker:2"]) == "tensorboard, worker:1-2"


def test_past_the_shown_ranges_the_tasks_are_counted():
    names = ["worker:%d" % i for i in range(0, 100, 2)]   # 50 ranges of one
    text = brief(names, shown=3)
    assert text == "worker:0, worker:2, worker:4, and 47 more"


def test_grouped_names_each_reason_once_in_the_order_it_first_comes():
    said = [("ps:0", "TASK_FAILED: out of memory")] + [
        ("worker:%d" % i, "no offer fits cpus=0.5 mem=32 gpus=0") for i in range(299)] + [
        ("worker:299", "TASK_STAGING")]
    assert grouped(said) == ("ps:0 (TASK_FAILED: out of memory), worker:0-298 (no offer fits "
                             "cpus=0.5 mem=32 gpus=0), worker:299 (TASK_STAGING)")


def test_grouped_counts_what_it_does_not_name():
    said = [("w:%d" % i, "reason %d" % (i % 2)) for i in range(10)]   # 5 ranges per reason
    assert grouped(said, shown=3) == "w:0, w:2, w:4 and 2 more (reason 0), and 5 more"
    assert grouped(said, shown=7) == ("w:0, w:2, w:4, w:6, w:8 (reason 0), w:1, w:3 and 3 more "
                                      "(reason 1)")


def _scheduler(workers):
    slots = make_slots(parse_jobs([{"name": "ps", "cpus": 0.5, "mem": 32},
                                   {"name": "worker", "num": workers, "cpus": 0.5, "mem": 32}]))
    return TFMesosScheduler(slots, lambda slot, a: {"task_id": {"value": slot.task_id}},
                            None, "run1"), slots


def test_a_launch_timeout_of_300_tasks_is_one_short_line():
    sched, slots = _scheduler(299)
    sched.resourceOffers(FakeDriver(), [Dict(offer("o1", cpus=2, mem=4000, agent="a1",
                                                   hostname="agent-1"))])
    launched = [slot for slot in slots if slot.state != "PENDING"]
    assert [slot.name for slot in launched] == ["ps:0", "worker:0", "worker:1", "worker:2"]
    launched[0].address = "h:1"   # ps:0 registered; the workers launched did not yet
    text = sched.missing_message(600, "m:5050")
    assert "missing: worker:0-2 (TASK_STAGING), worker:3-298 (no offer fits cpus=0.5 mem=32 " \
           "gpus=0); the cluster needs cpus=150 mem=9600 gpus=0 in total" in text
    assert len(text) < 400


def test_an_unanswered_launch_of_many_tasks_is_warned_in_one_short_line(caplog):
    sched, slots = _scheduler(299)
    driver = FakeDriver()

    def no_answer(*args, **kwargs):
        raise MesosConnectionError("ACCEPT call to the Mesos master failed: timed out",
                                   maybe_delivered=True)
    driver.launchTasks = no_answer
    sched.resourceOffers(driver, [Dict(offer("o1", cpus=1000, mem=100000, agent="a1",
                                             ports=((31000, 31999),), hostname="agent-1"))])
    warned = [r.getMessage() for r in caplog.records if "no answer" in r.getMessage()]
    assert warned == ["no answer from the Mesos master to the launch of ps:0, worker:0-298 "
                      "(ACCEPT call to the Mesos master failed: timed out); asking it whether "
                      "they were launched"]
