"""The HTTP scheduler driver against the embedded local master (and a real
ZooKeeper for zk:// detection)."""

import os
import threading
import time

import pytest
from driver_helpers import drivers, launch, states_of, task
from fixtures_master import make_local_master, small_agent
from fixtures_zk import register_master, unique_path, zk_client, zookeeper

from tfmesos.exceptions import MesosCallError, MesosConnectionError


def test_subscribe_launch_echo_and_acknowledge(make_local_master, drivers):
    master = make_local_master()
    driver, sched = drivers(master.url)
    framework_id, master_info = sched.next("registered")
    assert framework_id == driver.framework_id and master_info.port
    launch(driver, sched, "hello", "echo hello")
    updates = states_of(sched, "hello", "TASK_FINISHED")
    # Each update came only after the previous one was acknowledged.
    assert [u.state for u in updates] == ["TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"]
    assert all(u.uuid for u in updates)
    with open(os.path.join(master.sandbox("hello"), "stdout")) as handle:
        assert handle.read() == "hello\n"


def test_exit_code_3_is_task_failed_with_the_code(make_local_master, drivers):
    driver, sched = drivers(make_local_master().url)
    launch(driver, sched, "three", "exit 3")
    final = states_of(sched, "three", "TASK_FAILED")[-1]
    assert final.message == "Command exited with status 3"


def test_explicit_acknowledgements(make_local_master, drivers):
    driver, sched = drivers(make_local_master().url, implicit_acknowledgements=False)
    launch(driver, sched, "t", "sleep 30")
    starting = sched.next("update")[0]
    assert starting.state == "TASK_STARTING"
    # Not acknowledged: the agent only re-sends STARTING, never goes on to RUNNING.
    resent = sched.next("update", timeout=5)[0]
    assert (resent.state, resent.uuid) == ("TASK_STARTING", starting.uuid)
    driver.acknowledgeStatusUpdate(starting)
    assert sched.next("update", where=lambda u: u.state != "TASK_STARTING")[0].state == "TASK_RUNNING"


@pytest.mark.waits
def test_decline_with_filter_holds_the_offer_back(make_local_master, drivers):
    driver, sched = drivers(make_local_master().url)
    offer = sched.next("offers")[0][0]
    declined = time.monotonic()
    driver.declineOffer([offer.id], {"refuse_seconds": 1.5})
    sched.next("offers", timeout=30)
    assert time.monotonic() - declined >= 1.4


def test_suppress_and_revive(make_local_master, drivers):
    driver, sched = drivers(make_local_master().url)
    offer = sched.next("offers")[0][0]
    driver.suppressOffers()
    driver.declineOffer([offer.id], {"refuse_seconds": 0})
    sched.none("offers", 1.0)
    driver.reviveOffers()
    sched.next("offers", timeout=5)


@pytest.mark.waits
def test_suppression_survives_a_resubscription(make_local_master, drivers):
    master = make_local_master()
    driver, sched = drivers(master.url, framework={"failover_timeout": 30})
    framework_id, _ = sched.next("registered")
    offer = sched.next("offers")[0][0]
    driver.suppressOffers()
    driver.declineOffer([offer.id], {"refuse_seconds": 0})
    master.drop_subscription(framework_id)
    sched.next("reregistered", timeout=15)
    # The new SUBSCRIBE said so (else Mesos would offer again).
    [framework] = master.state()["frameworks"]
    assert framework["suppressed_roles"] == ["*"]
    sched.none("offers", 1.5)
    driver.reviveOffers()
    sched.next("offers", timeout=5)


def test_labels_set_after_subscribing_survive_a_resubscription(make_local_master, drivers):
    # A SUBSCRIBE replaces the framework's info: the driver must send the
    # labels UPDATE_FRAMEWORK set (a run's proof), as libmesos does.
    master = make_local_master()
    driver, sched = drivers(master.url, framework={"failover_timeout": 30})
    framework_id, _ = sched.next("registered")
    driver.updateFramework(dict(driver.framework, labels={"labels": [
        {"key": "tfmesos.proof", "value": "signed"}]}))
    master.drop_subscription(framework_id)
    sched.next("reregistered", timeout=15)
    [framework] = master.state()["frameworks"]
    assert framework["labels"] == [{"key": "tfmesos.proof", "value": "signed"}]


@pytest.mark.waits
def test_suppression_survives_an_update_of_the_framework(make_local_master, drivers):
    # UPDATE_FRAMEWORK's suppressed_roles are the framework's new set
    # (scheduler.proto; the allocator revives every role left out,
    # hierarchical.cpp): one without them revived the framework while the
    # driver still believed it suppressed (found by a review helper).
    master = make_local_master()
    driver, sched = drivers(master.url)
    offer = sched.next("offers")[0][0]
    driver.suppressOffers()
    driver.declineOffer([offer.id], {"refuse_seconds": 0})
    driver.updateFramework(dict(driver.framework, labels={"labels": [
        {"key": "tfmesos.proof", "value": "signed"}]}))
    [framework] = master.state()["frameworks"]
    assert framework["suppressed_roles"] == ["*"]
    sched.none("offers", 1.5)
    driver.reviveOffers()
    sched.next("offers", timeout=5)


def test_no_call_goes_out_after_teardown(make_local_master, drivers):
    master = make_local_master()
    driver, sched = drivers(master.url)
    launch(driver, sched, "sleeper", "sleep 60")
    running = sched.next("update", where=lambda u: u.state == "TASK_RUNNING")[0]
    driver.stop()
    with pytest.raises(MesosConnectionError, match="cannot send ACKNOWLEDGE: the framework "
                                                   "was torn down"):
        driver._call({"type": "ACKNOWLEDGE", "acknowledge": {
            "agent_id": running.agent_id, "task_id": running.task_id, "uuid": "AAAA"}})


def test_kill_task(make_local_master, drivers):
    driver, sched = drivers(make_local_master().url)
    launch(driver, sched, "sleeper", "sleep 60")
    sched.next("update", where=lambda u: u.state == "TASK_RUNNING")
    driver.killTask({"value": "sleeper"})
    assert sched.next("update", where=lambda u: u.state in ("TASK_KILLED", "TASK_FAILED"))[0].state \
        == "TASK_KILLED"


def test_stop_tears_the_framework_down(make_local_master, drivers):
    master = make_local_master()
    driver, sched = drivers(master.url)
    launch(driver, sched, "sleeper", "sleep 60")
    sched.next("update", where=lambda u: u.state == "TASK_RUNNING")
    assert driver.stop() == "DRIVER_STOPPED"
    assert driver.join(timeout=10) == "DRIVER_STOPPED"
    state = master.wait_until(lambda s: not s["frameworks"] and s["completed_frameworks"], 10)
    assert state["completed_frameworks"][0]["id"] == driver.framework_id


def test_a_stop_while_the_driver_connects_leaves_no_framework(make_local_master, drivers,
                                                              monkeypatch):
    # stop() found no SUBSCRIBE in flight and so waited for no answer; the
    # stream thread, still connecting, then sent one (it checked only that
    # the driver had not stopped yet): the master registered a framework
    # that nobody tore down. Here the SUBSCRIBE goes as stop() looks, and
    # its SUBSCRIBED is read only after stop() returned.
    from tfmesos.mesos.subscription import Subscription
    go, posted, read = threading.Event(), threading.Event(), threading.Event()
    post, read_stream = Subscription._post, Subscription._read_stream

    def gated_post(self, *args):
        go.wait(30)
        try:
            return post(self, *args)
        finally:
            posted.set()

    def gated_read(self, *args):
        read.wait(30)
        return read_stream(self, *args)
    monkeypatch.setattr(Subscription, "_post", gated_post)
    monkeypatch.setattr(Subscription, "_read_stream", gated_read)
    master = make_local_master()
    driver, _ = drivers(master.url)
    answer = driver._stream.await_answer

    def await_answer(timeout):
        go.set()
        assert posted.wait(30)
        return answer(timeout)
    driver._stream.await_answer = await_answer
    try:
        driver.stop()
    finally:
        go.set()     # (a stop that asked for no answer leaves no post waiting)
        read.set()
    assert master.state()["frameworks"] == []


def test_dropped_stream_resubscribes_with_the_same_id_and_tasks_survive(make_local_master, drivers):
    master = make_local_master()
    driver, sched = drivers(master.url, framework={"failover_timeout": 30})
    framework_id, _ = sched.next("registered")
    launch(driver, sched, "survivor", "sleep 60")
    sched.next("update", where=lambda u: u.state == "TASK_RUNNING")
    master.drop_subscription(framework_id)
    sched.next("disconnected")
    sched.next("reregistered", timeout=15)
    assert driver.framework_id == framework_id
    driver.reconcileTasks([{"task_id": {"value": "survivor"}}])
    reconciled = sched.next("update", where=lambda u: u.get("reason") == "REASON_RECONCILIATION")[0]
    assert reconciled.state == "TASK_RUNNING" and "uuid" not in reconciled


def test_heartbeat_loss_is_detected_and_resubscribes(make_local_master, drivers, caplog):
    master = make_local_master(heartbeat_interval=0.3)
    driver, sched = drivers(master.url, framework={"failover_timeout": 30})
    framework_id, _ = sched.next("registered")
    master.stall_subscription(framework_id)
    stalled = time.monotonic()
    sched.next("disconnected", timeout=30)
    # 3 missed heartbeats of 0.3 s plus slack, far below 3 of Mesos' default 15 s.
    assert time.monotonic() - stalled < 10
    sched.next("reregistered", timeout=30)
    assert driver.framework_id == framework_id
    # In the words of the message, not a class of tfmesos' ("_StreamEnded: ...").
    [said] = [r.getMessage() for r in caplog.records if "lost the Mesos subscription" in
              r.getMessage()]
    assert said.startswith("lost the Mesos subscription (no event from the master for "), said


def test_failover_timeout_expiry_kills_tasks(make_local_master, drivers):
    master = make_local_master()
    driver, sched = drivers(master.url, framework={"failover_timeout": 1})
    launch(driver, sched, "orphan", "sleep 60")
    sched.next("update", where=lambda u: u.state == "TASK_RUNNING")
    driver.abort()  # gone without a TEARDOWN
    state = master.wait_until(lambda s: s["completed_frameworks"], 15)
    tasks = state["completed_frameworks"][0]["completed_tasks"]
    assert [t["state"] for t in tasks] == ["TASK_KILLED"]


def test_agent_removal_reports_lost_tasks_and_agent(make_local_master, drivers):
    master = make_local_master()
    driver, sched = drivers(master.url)
    offer = launch(driver, sched, "on-agent", "sleep 60")
    sched.next("update", where=lambda u: u.state == "TASK_RUNNING")
    master.remove_agent(offer.agent_id.value)
    seen = {}
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        name, args = sched.queue.get(timeout=10)
        if name in ("agent_lost", "update"):
            seen[name] = args[0]
    assert seen["agent_lost"] == offer.agent_id.value
    assert (seen["update"].task_id.value, seen["update"].state) == ("on-agent", "TASK_LOST")


def test_follows_a_307_redirect_to_the_leader(make_local_master, drivers):
    follower, leader = make_local_master(), make_local_master()
    follower.set_leader(leader.url)
    driver, sched = drivers(follower.url)
    sched.next("registered")
    assert driver.master == leader.url
    assert leader.state()["frameworks"] and not follower.state()["frameworks"]


def test_retries_while_no_leader_is_elected(make_local_master, drivers):
    master = make_local_master()
    master.set_leader("")
    driver, sched = drivers(master.url)
    sched.none("registered", 1.0)
    master.set_leader(None)
    sched.next("registered", timeout=15)


def test_a_refused_call_raises_in_the_caller(make_local_master, drivers):
    driver, sched = drivers(make_local_master().url)
    offer = sched.next("offers")[0][0]
    bad = task("bad", offer, "true")
    bad["comand"] = bad.pop("command")
    with pytest.raises(MesosCallError, match="comand") as info:
        driver.launchTasks([offer.id], [bad])
    assert info.value.status == 400


def test_tries_each_master_of_a_list(make_local_master, drivers):
    master = make_local_master()
    host_port = master.url[len("http://"):]
    driver, sched = drivers("127.0.0.1:1,%s" % host_port)
    sched.next("registered", timeout=15)
    assert driver.master == master.url


@pytest.mark.zookeeper
@pytest.mark.waits
def test_zk_master_detection_and_leader_change(zookeeper, make_local_master, drivers):
    first, second = make_local_master(), make_local_master()
    path = unique_path()
    with zk_client(zookeeper) as client:
        nodes = []
        for master in (first, second):
            port = int(master.url.rsplit(":", 1)[1])
            nodes.append(register_master(client, path, "127.0.0.1", port))
        driver, sched = drivers("zk://%s%s" % (zookeeper, path),
                                framework={"failover_timeout": 30})
        framework_id, _ = sched.next("registered", timeout=15)
        assert driver.master == first.url
        client.delete(nodes[0])
        sched.next("disconnected", timeout=15)
        sched.next("reregistered", timeout=20)
        assert driver.master == second.url and driver.framework_id == framework_id
        assert [f["id"] for f in second.state()["frameworks"]] == [framework_id]


@pytest.mark.zookeeper
def test_stop_tears_down_a_framework_whose_subscription_is_gone(zookeeper, make_local_master,
                                                                drivers):
    # The leader's znode became junk: the driver cannot re-subscribe through
    # ZooKeeper. stop() subscribes to the master it last reached, with the
    # framework's id, and tears it down (it stayed registered for its
    # failover timeout, an hour here, and nothing said so).
    master = make_local_master()
    path = unique_path()
    with zk_client(zookeeper) as client:
        port = int(master.url.rsplit(":", 1)[1])
        node = register_master(client, path, "127.0.0.1", port)
        driver, sched = drivers("zk://%s%s" % (zookeeper, path),
                                framework={"failover_timeout": 3600})
        framework_id, _ = sched.next("registered", timeout=15)
        client.delete(node)
        register_master(client, path, "127.0.0.1", port, data=b"junk")
        sched.next("disconnected", timeout=15)
        assert not driver.connected
        started = time.monotonic()
        assert driver.stop() == "DRIVER_STOPPED"
        assert time.monotonic() - started < 20   # bounded: a short timeout
        state = master.wait_until(lambda s: not s["frameworks"], 10)
        assert [f["id"] for f in state["completed_frameworks"]] == [framework_id]


def test_stop_says_when_the_framework_stays_registered(make_local_master, drivers):
    # Nothing answers at the master last reached: stop() raises what the
    # caller tells the user (the framework stays until its failover timeout).
    master = make_local_master()
    driver, sched = drivers(master.url, framework={"failover_timeout": 3600},
                            connect_timeout=60, teardown_timeout=1.0)
    framework_id, _ = sched.next("registered")
    master.set_leader("")            # 503: no leader, the stream cannot come back
    master.drop_subscription(framework_id)
    sched.next("disconnected")
    with pytest.raises(MesosConnectionError, match="framework %s stays registered until its "
                       "failover timeout \\(3600 s\\) passes" % framework_id):
        driver.stop()
    assert [f["id"] for f in master.state()["frameworks"]] == [framework_id]
    assert driver.join(timeout=10) == "DRIVER_STOPPED"


@pytest.mark.zookeeper
def test_a_leader_change_is_said_as_such_not_as_the_master_closing(zookeeper, make_local_master,
                                                                   drivers, caplog):
    # The driver itself closes the stream when ZooKeeper names a new leader:
    # the warning says so (it said "the master closed the connection").
    first, second = make_local_master(), make_local_master()
    path = unique_path()
    with zk_client(zookeeper) as client:
        nodes = [register_master(client, path, "127.0.0.1", int(m.url.rsplit(":", 1)[1]))
                 for m in (first, second)]
        driver, sched = drivers("zk://%s%s" % (zookeeper, path),
                                framework={"failover_timeout": 30})
        sched.next("registered", timeout=15)
        caplog.set_level("WARNING", logger="tfmesos.mesos.subscription")
        client.delete(nodes[0])
        sched.next("reregistered", timeout=20)
        client.delete(nodes[1])
        register_master(client, path, "127.0.0.1", 1, data=b"junk")
        sched.next("disconnected", timeout=15)
    said = [r.getMessage() for r in caplog.records if r.name == "tfmesos.mesos.subscription"]
    assert said[0] == ("the Mesos leader changed (ZooKeeper names %s now); re-subscribing"
                       % second.url[len("http://"):]), said
    assert said[1].startswith("the Mesos leader changed (ZooKeeper names no leader now: no Mesos "
                              "master registered under zk://%s%s: " % (zookeeper, path)), said
    assert said[1].endswith("); re-subscribing"), said
