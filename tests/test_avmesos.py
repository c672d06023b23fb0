"""A framework written with avmesos (the Python library of the people who
maintain Apache Mesos today), not by this project, drives the embedded
master started tolerant, as Mesos parses calls: its normal launch call
(``Offer.accept``, which adds a v0 ``slave_id`` to each TaskInfo) runs
tasks to every end, and reconcile, decline filters, suppress/revive,
failover and HTTP basic authentication behave as on Mesos."""

import getpass
import logging
import queue
import threading

import pytest
from fixtures_master import make_local_master

client_module = pytest.importorskip("avmesos.client")
requests = pytest.importorskip("requests")
MesosClient = client_module.MesosClient

DEVIATIONS = "mesos_local.api.stout"


class AvFramework:
    """One avmesos MesosClient on its own thread, its events in queues."""

    def __init__(self, url, name="avmesos-test", framework_id=None, failover_timeout=None,
                 auth=None):
        client = self.client = MesosClient(mesos_urls=[url], frameworkId=framework_id,
                                           frameworkName=name, frameworkUser=getpass.getuser(),
                                           max_reconnect=1)
        if failover_timeout is not None:
            client.set_failover_timeout(failover_timeout)
        if auth is not None:
            client.set_credentials(*auth)   # avmesos puts them in SUBSCRIBE (Mesos ignores)
            client.requests_auth = requests.auth.HTTPBasicAuth(*auth)
        self.subscribed, self.offers, self.updates = queue.Queue(), queue.Queue(), queue.Queue()
        client.on(MesosClient.SUBSCRIBED, self.subscribed.put)
        client.on(MesosClient.OFFERS, lambda offers: [self.offers.put(o) for o in offers])
        client.on(MesosClient.UPDATE, lambda update: self.updates.put(update["status"]))
        self.thread = threading.Thread(target=client.register, daemon=True,
                                       name="avmesos-" + name)
        self.driver = None
        self.seen = []

    def start(self, timeout=15):
        self.thread.start()
        self.driver = self.subscribed.get(timeout=timeout)
        return self

    @property
    def framework_id(self):
        return self.client.frameworkId

    def next_offer(self, timeout=15):
        return self.offers.get(timeout=timeout)

    def no_offer(self, seconds):
        try:
            offer = self.offers.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError("unexpected offer %s" % offer.get_offer()["id"])

    def drain_offers(self):
        while True:
            try:
                self.offers.get_nowait()
            except queue.Empty:
                return

    def wait_state(self, task_id, state, timeout=20):
        """The first update (avmesos acknowledges each) of ``task_id`` in
        ``state`` not yet returned; others are kept for later calls."""
        def wanted(status):
            return status["task_id"]["value"] == task_id and status["state"] == state

        for index, status in enumerate(self.seen):
            if wanted(status):
                return self.seen.pop(index)
        while True:
            status = self.updates.get(timeout=timeout)
            if wanted(status):
                return status
            self.seen.append(status)

    def stop(self, teardown=False):
        """Hang up (a failover can follow), or TEARDOWN; the thread ends at
        the next event (heartbeats come every 0.5 s)."""
        if teardown:
            self.client.tearDown()
        else:
            self.client.disconnect_framework()
        self.thread.join(15)
        if self.client.long_pool is not None:
            self.client.long_pool.close()
        assert not self.thread.is_alive()


def task(offer, task_id, command):
    """A TaskInfo as an avmesos user writes it; Offer.accept adds slave_id."""
    return {"name": task_id, "task_id": {"value": task_id},
            "agent_id": {"value": offer.get_offer()["agent_id"]["value"]},
            "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                          {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}],
            "command": {"value": command}}


@pytest.fixture
def frameworks():
    made = []

    def make(*args, **kwargs):
        framework = AvFramework(*args, **kwargs)
        made.append(framework)
        return framework

    yield make
    for framework in made:
        if framework.thread.is_alive():
            framework.stop(teardown=True)


@pytest.mark.waits
def test_tasks_reach_finished_failed_killed_and_reconcile(make_local_master, frameworks,
                                                          caplog):
    master = make_local_master(strict=False)
    framework = frameworks(master.url).start()
    offer = framework.next_offer()
    with caplog.at_level(logging.WARNING, logger=DEVIATIONS):
        offer.accept([task(offer, "finishes", "true"), task(offer, "fails", "exit 3"),
                      task(offer, "sleeps", "sleep 600")])
        finished = framework.wait_state("finishes", "TASK_FINISHED")
        failed = framework.wait_state("fails", "TASK_FAILED")
        framework.wait_state("sleeps", "TASK_RUNNING")
        offer = framework.next_offer()
        offer.accept([task(offer, "again", "true")])
        framework.wait_state("again", "TASK_FINISHED")
    assert "3" in failed["message"]
    assert finished["container_status"]["network_infos"][0]["ip_addresses"][0][
        "ip_address"] == "127.0.0.1"
    framework.driver.reconcile([{"task_id": {"value": "sleeps"},
                                 "agent_id": finished["agent_id"]}])
    reconciled = framework.wait_state("sleeps", "TASK_RUNNING")
    assert reconciled["reason"] == "REASON_RECONCILIATION" and "uuid" not in reconciled
    framework.driver.kill(finished["agent_id"]["value"], "sleeps")
    framework.wait_state("sleeps", "TASK_KILLED")
    warnings = [r.getMessage() for r in caplog.records if r.name == DEVIATIONS]
    assert len(warnings) == 1, warnings      # two ACCEPTs, four TaskInfos: said once
    assert "task_infos[0].slave_id: unknown field (TaskInfo has no field 'slave_id'); " \
           "real Mesos skips it" in warnings[0]


@pytest.mark.waits
def test_a_strict_master_refuses_avmesos_launches(make_local_master, frameworks):
    master = make_local_master(strict=True)
    framework = frameworks(master.url).start()
    offer = framework.next_offer()
    offer.accept([task(offer, "never", "true")])    # answered 400, which avmesos hides
    with pytest.raises(queue.Empty):
        framework.updates.get(timeout=2)
    assert master.state()["frameworks"][0]["tasks"] == []


@pytest.mark.waits
def test_decline_filters_and_suppress_revive(make_local_master, frameworks):
    master = make_local_master(strict=False)
    framework = frameworks(master.url).start()
    framework.next_offer().decline({"filters": {"refuse_seconds": 60}})
    framework.no_offer(1.5)
    framework.driver.revive()                   # clears the filter
    offer = framework.next_offer()
    framework.driver.suppress()
    offer.decline({"filters": {"refuse_seconds": 0}})
    framework.no_offer(1.5)
    assert master.state()["frameworks"][0]["suppressed_roles"] == ["*"]
    framework.driver.revive()
    framework.next_offer()


@pytest.mark.waits
def test_failover_keeps_the_tasks(make_local_master, frameworks):
    master = make_local_master(strict=False)
    first = frameworks(master.url, failover_timeout=60).start()
    offer = first.next_offer()
    offer.accept([task(offer, "survivor", "sleep 600")])
    running = first.wait_state("survivor", "TASK_RUNNING")
    framework_id = first.framework_id
    first.stop()
    master.wait_until(lambda state: not state["frameworks"][0]["connected"], 15)
    second = frameworks(master.url, framework_id=framework_id, failover_timeout=60).start()
    assert second.framework_id == framework_id
    second.driver.reconcile([{"task_id": {"value": "survivor"},
                              "agent_id": running["agent_id"]}])
    assert second.wait_state("survivor", "TASK_RUNNING")["reason"] == "REASON_RECONCILIATION"
    [framework] = master.state()["frameworks"]
    assert framework["connected"] and [t["id"] for t in framework["tasks"]] == ["survivor"]
    second.stop(teardown=True)
    master.wait_until(lambda state: state["completed_frameworks"], 15)


@pytest.mark.waits
def test_http_basic_authentication(make_local_master, frameworks):
    master = make_local_master(strict=False, credentials={"alice": "secret"})
    refused = frameworks(master.url, name="no-credentials")
    refused.thread.start()
    refused.thread.join(20)                     # 401: avmesos gives up (max_reconnect=1)
    assert refused.subscribed.empty() and not refused.thread.is_alive()
    framework = frameworks(master.url, auth=("alice", "secret")).start()
    offer = framework.next_offer()
    offer.accept([task(offer, "authenticated", "true")])
    framework.wait_state("authenticated", "TASK_FINISHED")
    assert master.state()["frameworks"][0]["principal"] == "alice"
