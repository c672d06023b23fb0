"""Saying when nothing can fit (issue 35): the decision from the agents'
totals and the offers seen (pure), the watch the waiting loop asks, and
tfrun against a separate master whose agents are too small or busy."""

import re
import time

import pytest
from addict import Dict
from fixtures_master import (
    clients,
    launch_running,
    make_local_master,
    small_agent,
)
from offers import FakeDriver, offer
from tfrun_helpers import run_tfrun
from waiting import wait_until

from tfmesos.cli.tfrun_flags import in_flags
from tfmesos.core import fit
from tfmesos.core.fit import (
    BUSY,
    FITS,
    NEVER,
    UNKNOWN,
    Agent,
    FitWatch,
    OfferLog,
    Size,
    agents_of,
    judge,
    judge_cluster,
)
from tfmesos.core.jobs import parse_jobs
from tfmesos.core.scheduler import TFMesosScheduler
from tfmesos.core.slots import make_slots
from tfmesos.exceptions import ClusterError
from tfmesos.mesos.master_reads import MasterReader

SMALL = [Agent("a1", Size(4, 512)), Agent("a2", Size(2, 7800))]


# -- the decision (pure) --------------------------------------------------------


def test_an_ask_bigger_than_every_agent_never_fits():
    verdict = judge("worker:0", Size(1, 30000), SMALL, [("a1", Size(4, 512))])
    assert verdict.kind == NEVER
    assert verdict.agent == Agent("a2", Size(2, 7800))   # the nearest to holding it
    assert verdict.lacking == ("mem",)
    assert verdict.offer == ("a1", Size(4, 512))


def test_the_nearest_agent_is_the_one_lacking_the_fewest_resources():
    verdict = judge("worker:0", Size(3, 600), SMALL, [])
    assert verdict.kind == NEVER
    # each lacks one resource: the one with more memory is named
    assert (verdict.agent, verdict.lacking) == (Agent("a2", Size(2, 7800)), ("cpus",))
    assert judge("worker:0", Size(3, 8000), SMALL, []).lacking == ("mem",)   # a1: mem only
    assert judge("worker:0", Size(1, 100, gpus=1), SMALL, []).lacking == ("gpus",)


def test_an_ask_an_agent_could_hold_but_no_offer_does_is_busy():
    verdict = judge("worker:0", Size(1, 4000), SMALL, [("a1", Size(4, 512)), ("a2", Size(0.5, 100))])
    assert verdict.kind == BUSY
    assert verdict.agent == Agent("a2", Size(2, 7800))
    assert verdict.offer == ("a1", Size(4, 512))
    assert judge("worker:0", Size(1, 4000), SMALL, []).kind == BUSY   # no offer at all


def test_without_totals_offers_alone_never_decide_never():
    assert judge("worker:0", Size(1, 30000), None, [("a1", Size(4, 512))]).kind == UNKNOWN
    assert judge("worker:0", Size(1, 30000), [], [("a1", Size(4, 512))]).kind == UNKNOWN
    assert judge("worker:0", Size(1, 30000), [], []).agents == 0


def test_an_offer_that_holds_it_fits_whatever_the_totals_say():
    assert judge("worker:0", Size(1, 500), SMALL, [("a1", Size(4, 512))]).kind == FITS
    assert judge("worker:0", Size(1, 500), None, [("a1", Size(4, 512))]).kind == FITS


def test_a_cluster_bigger_than_all_agents_together_never_fits():
    assert judge_cluster([Size(1, 4000)] * 3, SMALL) == (Size(3, 12000), Size(6, 8312))
    assert judge_cluster([Size(1, 4000)] * 2, SMALL) is None
    assert judge_cluster([Size(1, 4000)] * 3, None) is None
    assert judge_cluster([Size(1, 4000)] * 3, []) is None


def test_the_never_line_names_the_ask_the_largest_agent_and_offer_and_the_flag():
    verdict = judge("worker:0", Size(1, 30000), SMALL, [("a1", Size(4, 512))])
    error = fit.never_error(verdict, "worker")
    assert isinstance(error, ClusterError)
    assert str(in_flags(error)) == (
        "worker:0 asks cpus=1 mem=30000 but no agent can hold it: the largest agent has "
        "cpus=2 mem=7800 (total, of 2 agents); largest offer: cpus=4 mem=512 on a1; lower "
        "mem (-Mw or --job worker:COUNT:CPUS:MEM) or add a bigger agent")


def test_the_busy_and_unknown_notes_name_the_largest_offer_and_the_agent():
    busy = judge("worker:0", Size(1, 4000), SMALL, [("a1", Size(4, 512))])
    assert fit.note(busy, 30) == (
        "worker:0 asks cpus=1 mem=4000: no offer in 30 s could hold it (largest offer: "
        "cpus=4 mem=512 on a1); agent a2 could (cpus=2 mem=7800 in total) once what runs "
        "there ends: waiting")
    assert fit.short_note(busy) == "worker:0 fits agent a2 (cpus=2 mem=7800) once it is freed"
    unknown = judge("worker:0", Size(1, 30000), None, [])
    assert fit.note(unknown, 30, "HTTP 401") == (
        "worker:0 asks cpus=1 mem=30000: no offer in 30 s could hold it (no offer seen); the "
        "agents' totals are not known (HTTP 401): waiting")
    assert fit.note(judge("w:0", Size(1, 1), [], []), 30).endswith(
        "the master lists no agent: waiting for one")


def test_agents_are_read_from_the_masters_document():
    document = {"slaves": [
        {"id": "S0", "hostname": "h0", "resources": {"cpus": 4.0, "mem": 512.0, "gpus": 1.0,
                                                     "disk": 100.0, "ports": "[1-2]"}},
        {"id": "S1", "resources": {"cpus": 1.0, "mem": 64.0}},
        {"id": "S2", "resources": {"cpus": "many"}}, "junk", {"id": "S3"}]}
    assert agents_of(document) == [Agent("h0", Size(4, 512, 1)), Agent("S1", Size(1, 64))]
    assert agents_of({}) == []


def test_an_agents_reservations_to_other_roles_are_nothing_a_run_can_ever_get():
    # /master/slaves: "reserved_resources" by the role each reservation is for
    # (src/master/readonly_handler.cpp); Mesos offers a role what is
    # unreserved or reserved to it or to an ancestor (Resources::isAllocatableTo,
    # src/common/resources.cpp).
    document = {"slaves": [
        {"id": "S0", "hostname": "big", "resources": {"cpus": 16.0, "mem": 65536.0, "gpus": 2.0},
         "reserved_resources": {"prod": {"cpus": 12.0, "mem": 60000.0, "gpus": 2.0},
                                "ml/team/x": {"cpus": 2.0, "mem": 1000.0}},
         "unreserved_resources": {"cpus": 2.0, "mem": 4536.0}}]}
    totals = {role: agents_of(document, role)[0].total
              for role in (None, "prod", "prod/a", "production", "ml/team", "ml/team/x")}
    assert totals == {None: Size(2, 4536), "prod": Size(14, 64536, 2),
                      "prod/a": Size(14, 64536, 2), "production": Size(2, 4536),
                      "ml/team": Size(2, 4536), "ml/team/x": Size(4, 5536)}
    ask = Size(8, 8000)
    assert judge("worker:0", ask, agents_of(document), []).kind == fit.NEVER
    assert judge("worker:0", ask, agents_of(document, "prod"), []).kind == fit.BUSY
    # A master that lists no reservations (older, or hiding roles this
    # principal may not view): its totals, as before.
    del document["slaves"][0]["reserved_resources"]
    assert agents_of(document)[0].total == Size(16, 65536, 2)


def test_the_offer_log_keeps_each_agents_recent_offers_no_later_one_holds():
    now = [0.0]
    log = OfferLog(clock=lambda: now[0])
    log.add("S1", "h1", Size(1, 100))
    log.add("S1", "h1", Size(4, 512))    # holds the one before: that one goes
    log.add("S1", "h1", Size(8, 64))     # does not: both stay
    log.add("S2", "h1", Size(1, 100))    # another agent on the same host
    assert log.recent() == [("h1", Size(4, 512)), ("h1", Size(8, 64)), ("h1", Size(1, 100))]
    now[0] = 20.0
    log.add("S1", "h1", Size(0.5, 50))
    assert log.recent(10) == [("h1", Size(0.5, 50))]
    now[0] = 45.0
    assert log.recent() == [("h1", Size(0.5, 50))]


def test_an_offer_of_any_shape_that_holds_the_ask_fits():
    offers = [("h1", Size(8, 64)), ("h1", Size(1, 500))]
    assert judge("worker:0", Size(4, 32), SMALL, offers).kind == FITS
    assert judge("worker:0", Size(1, 400), SMALL, offers).kind == FITS


def test_the_scheduler_notes_every_offer_in_its_log():
    slots = make_slots(parse_jobs([{"name": "worker", "cpus": 1, "mem": 30000}]))
    sched = TFMesosScheduler(slots, lambda slot, a: {}, None, "run1")
    sched.resourceOffers(FakeDriver(), [Dict(offer("o1", cpus=4, mem=512, hostname="h1")),
                                        Dict(offer("o2", cpus=2, mem=7800, hostname="h2"))])
    assert sched.offer_log.recent() == [("h1", Size(4, 512)), ("h2", Size(2, 7800))]


# -- the watch the waiting loop asks ---------------------------------------------


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _watch(agents, offers=None):
    clock, reads = Clock(), []

    def read():
        reads.append(clock.now)
        if isinstance(agents, Exception):
            raise agents
        return agents
    log = OfferLog(clock=clock)
    for agent, size in offers or ():
        log.add(agent, agent, size)
    return FitWatch(read, log, clock=clock), clock, reads


WAITING = [("worker:0", "worker", Size(1, 30000))]


def test_the_watch_fails_once_the_totals_say_never():
    watch, clock, reads = _watch(SMALL, [("a1", Size(4, 512))])
    assert watch.check(WAITING, [Size(1, 30000)]) is None
    clock.now = 9.0
    assert watch.check(WAITING, [Size(1, 30000)]) is None and reads == []
    clock.now = 10.0
    try:
        watch.check(WAITING, [Size(1, 30000)])   # the read starts, in its thread
    except ClusterError:
        pass
    watch.join(10)
    assert reads == [10.0]
    with pytest.raises(ClusterError, match="worker:0 asks cpus=1 mem=30000 but no agent can "
                                           "hold it"):
        watch.check(WAITING, [Size(1, 30000)])


def test_the_watch_says_busy_once_and_keeps_it_for_the_waiting_line():
    watch, clock, _ = _watch(SMALL, [("a1", Size(4, 512))])
    waiting = [("worker:0", "worker", Size(1, 4000))]
    watch.check(waiting, [Size(1, 4000)])
    clock.now = 12.0
    said = [watch.check(waiting, [Size(1, 4000)])]   # the read starts, in its thread
    watch.join(10)
    said += [watch.check(waiting, [Size(1, 4000)]), watch.check(waiting, [Size(1, 4000)])]
    [text] = [text for text in said if text is not None]   # said once
    assert text.startswith(
        "worker:0 asks cpus=1 mem=4000: no offer in 12 s could hold it (largest offer: cpus=4 "
        "mem=512 on a1); agent a2 could")
    assert watch.short == "worker:0 fits agent a2 (cpus=2 mem=7800) once it is freed"
    assert watch.check([], [Size(1, 4000)]) is None and watch.short is None   # placed


def test_unreadable_totals_wait_for_the_window_then_say_so_and_keep_waiting():
    watch, clock, reads = _watch(ClusterError("HTTP 401"), [("a1", Size(4, 512))])
    watch.check(WAITING, [Size(1, 30000)])
    clock.now = 10.0
    assert watch.check(WAITING, [Size(1, 30000)]) is None
    watch.join(10)
    clock.now = 29.0
    assert watch.check(WAITING, [Size(1, 30000)]) is None
    clock.now = 30.0
    text = watch.check(WAITING, [Size(1, 30000)])   # a read again, never an error
    watch.join(10)
    assert text == ("worker:0 asks cpus=1 mem=30000: no offer in 30 s could hold it (largest "
                    "offer: cpus=4 mem=512 on a1); the agents' totals are not known (HTTP 401): "
                    "waiting")
    assert watch.short == "no offer could hold worker:0 (largest offer: cpus=4 mem=512 on a1)"
    assert reads == [10.0]   # read again only REREAD s after the last read began
    clock.now = 40.0
    watch.check(WAITING, [Size(1, 30000)])
    watch.join(10)
    assert reads == [10.0, 40.0]


def test_the_watch_fails_a_cluster_bigger_than_all_agents():
    watch, clock, _ = _watch(SMALL)
    asks = [Size(1, 4000)] * 3
    waiting = [("worker:2", "worker", Size(1, 4000))]
    watch.check(waiting, asks)
    clock.now = 10.0
    try:
        watch.check(waiting, asks)
    except ClusterError:
        pass
    watch.join(10)
    with pytest.raises(ClusterError, match=r"the cluster needs cpus=3 mem=12000 in total but "
                                           r"the master's 2 agents have cpus=6 mem=8312 in all"):
        watch.check(waiting, asks)


# -- the master's document ---------------------------------------------------------


def test_the_local_master_lists_each_agents_total(make_local_master):
    master = make_local_master([small_agent(cpus=2, mem=512, hostname="tiny"),
                                small_agent(cpus=1, mem=256, hostname="tinier")])
    agents = agents_of(MasterReader(master.url, environ={}).agents())
    assert sorted(agents, key=lambda a: a.name) == [
        Agent("tinier", Size(1, 256)), Agent("tiny", Size(2, 512))]


# -- tfrun against a separate master -------------------------------------------------


def _address(master):
    return master.url.split("//", 1)[1]


def _others(master, but="test-framework"):
    """The names of the frameworks still registered with ``master``, but ``but``."""
    return [f["name"] for f in master.state()["frameworks"] if f["name"] != but]


@pytest.mark.waits
def test_tfrun_fails_at_once_when_no_agent_is_big_enough(make_local_master,
                                                         tmp_path):
    master = make_local_master([small_agent(cpus=2, mem=512)])
    started = time.monotonic()
    result = run_tfrun("-m", _address(master), "-w", "1", "-s", "0", "-Cw", "1", "-Mw", "30000",
                       "--run-dir", str(tmp_path / "run"), "--", "true", timeout=120)
    took = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("tfrun: error: ")]
    assert errors == [
        "tfrun: error: worker:0 asks cpus=1 mem=30000 but no agent can hold it: the largest "
        "agent has cpus=2 mem=512 (total, 1 agent); largest offer: cpus=2 mem=512 on 127.0.0.1; "
        "lower mem (-Mw or --job worker:COUNT:CPUS:MEM) or add a bigger agent"], result.stderr
    assert "Traceback" not in result.stderr
    assert took < 90, took   # about 15 s: never the 600 s launch timeout
    wait_until(lambda: _others(master) == [], message=lambda: _others(master))


@pytest.mark.waits   # tfrun's --launch-timeout, 30 s
def test_tfrun_waits_for_an_agent_another_framework_occupies_and_says_so(
        make_local_master, clients, tmp_path):
    master = make_local_master([small_agent(cpus=1, mem=512)])
    other = clients(master)
    launch_running(other, master, "hog", "sleep 600", cpus=0.8, mem=400)
    result = run_tfrun("-m", _address(master), "-w", "1", "-s", "0", "-Cw", "0.5",
                       "-Mw", "256", "--launch-timeout", "30", "--run-dir",
                       str(tmp_path / "run"), "--", "true", timeout=120,
                       env={"TFMESOS_PROGRESS_INTERVAL": "2"})
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    said = [line for line in lines if line.startswith("tfrun: worker:0 asks")]
    assert len(said) == 1, result.stderr   # once
    assert re.fullmatch(
        # (what is left there may be held in the other framework's offers)
        r"tfrun: worker:0 asks cpus=0.5 mem=256: no offer in \d+ s could hold it \((largest "
        r"offer: cpus=0.2 mem=112 on 127.0.0.1|no offer seen)\); agent 127.0.0.1 could "
        r"\(cpus=1 mem=512 in total\) once what runs there ends: waiting", said[0]), said
    waiting = [line for line in lines if "waiting for" in line]
    assert waiting and re.fullmatch(
        r"tfrun: placed 0/1, registered 0/1, waiting for cpus=0.5 mem=256 \(\d+ s\): worker:0 "
        r"fits agent 127.0.0.1 \(cpus=1 mem=512\) once it is freed", waiting[-1]), waiting
    [error] = [line for line in lines if line.startswith("tfrun: error: ")]
    assert "the cluster was not complete after 30 s" in error
    assert "agent 127.0.0.1 could (cpus=1 mem=512 in total) once what runs there ends" in error
    wait_until(lambda: _others(master) == [], message=lambda: _others(master))
    [hog] = master.state()["frameworks"][0]["tasks"]   # the other framework's task goes on
    assert hog["id"] == "hog" and hog["state"] == "TASK_RUNNING"


def test_one_agent_is_worded_as_one():
    # It said "the master's 1 agent have".
    error = fit.cluster_error(Size(3, 12000), Size(2, 8000), 1)
    assert "but the master's agent has cpus=2 mem=8000 in all:" in str(error), str(error)
    assert "master's 2 agents have" in str(fit.cluster_error(Size(3, 12000), Size(2, 8000), 2))
