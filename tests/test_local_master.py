"""The embedded local master, driven over plain HTTP like a real scheduler.

Every event the test client reads is checked against the v1 Event schema.
Every master is stopped at the end of its test and no task process may
outlive it (``fixtures_master``).
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest
import requests
from fixtures_docker import docker_engine, no_leaked_containers, tfmesos_image
from fixtures_master import (
    RecordingRunner,
    clients,
    launch_running,
    leftover_processes,
    local_master,
    make_local_master,
    marked_environment,
    read_file,
    session_of,
    small_agent,
)
from mesos_http_client import CLOSED, offered, ports, scalar, task_info
from processes import alive
from tfrun_helpers import free_port
from waiting import wait_until

from mesos_local import AgentSpec

pytestmark = pytest.mark.timeout(120)


# --- subscribe, offers, heartbeats ------------------------------------------------------

def test_subscribe_streams_subscribed_heartbeat_and_offers(local_master, clients):
    client = clients(local_master, subscribe=False)
    subscribed = client.subscribe()
    assert client.response.getheader("Content-Type") == "application/json"
    assert client.response.getheader("Transfer-Encoding") == "chunked"
    assert client.stream_id
    body = subscribed["subscribed"]
    assert body["heartbeat_interval_seconds"] == 0.5
    info = body["master_info"]
    assert info["id"] == local_master.id and info["port"] == local_master.port
    assert info["ip"] == 16777343 and info["address"]["ip"] == "127.0.0.1"  # 127.0.0.1
    assert client.next_event(skip=())["type"] == "HEARTBEAT"
    offers = client.next_offers()
    assert len(offers) == 1
    offer = offers[0]
    assert offer["framework_id"]["value"] == client.framework_id
    assert offer["hostname"] == "127.0.0.1"
    assert (offered(offer, "cpus"), offered(offer, "mem"), offered(offer, "disk")) == (
        4, 4096, 10000)
    assert offered(offer, "ports") == [(31000, 31009)]
    assert offered(offer, "gpus") is None
    assert "allocation_info" not in offer  # not a MULTI_ROLE framework
    # Every 0.5 s, as SUBSCRIBED says (Mesos' default is 15 s).
    start = time.monotonic()
    client.next_event("HEARTBEAT", timeout=10)
    client.next_event("HEARTBEAT", timeout=10)
    assert time.monotonic() - start < 5
    framework = local_master.state()["frameworks"][0]
    assert framework["connected"] and framework["active"]
    assert framework["offered_resources"]["cpus"] == 4


def test_a_subscribe_the_master_has_no_file_descriptors_to_stream_is_a_503_naming_it(
        local_master, clients, monkeypatch):
    # Out of file descriptors (tfrun under ulimit -n 16), the stream's pipe
    # failed after the framework was added: the connection closed without a
    # word ("the master closed the connection", retried for the whole
    # --connect-timeout), a framework left behind at every try.
    import errno

    from mesos_http_client import StreamError

    from mesos_local.api import stream

    def no_descriptors(self, *args, **kwargs):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(stream.Subscription, "__init__", no_descriptors)
    with pytest.raises(StreamError) as caught:
        clients(local_master)
    said = str(caught.value)
    assert said.startswith("SUBSCRIBE answered 503: ") and "Too many open files" in said \
        and "ulimit -n" in said, said
    assert local_master.state()["frameworks"] == []
    monkeypatch.undo()
    client = clients(local_master)     # the descriptors back: it subscribes
    assert [f["id"] for f in local_master.state()["frameworks"]] == [client.framework_id]


@pytest.mark.waits
def test_a_master_that_cannot_accept_for_want_of_file_descriptors_says_so_once_and_waits(
        local_master, caplog, monkeypatch):
    # accept() failing with EMFILE left the connection queued and
    # socketserver's loop spinning on it, without a word.
    import errno
    import logging
    import socket as sockets

    server = local_master._http
    real = server.socket
    tries = []

    class NoDescriptors:
        def __getattr__(self, name):
            return getattr(real, name)

        def accept(self):
            tries.append(time.monotonic())
            raise OSError(errno.EMFILE, "Too many open files")

    caplog.set_level(logging.WARNING, logger="mesos_local")
    monkeypatch.setattr(server, "socket", NoDescriptors())
    with sockets.create_connection(("127.0.0.1", local_master.port), timeout=30) as conn:
        time.sleep(1.5)
        said = [r.getMessage() for r in caplog.records if "accept" in r.getMessage()]
        assert len(said) == 1 and "Too many open files" in said[0] and "ulimit -n" in said[0], \
            said
        assert 1 <= len(tries) <= 40, "%d accept() calls in 1.5 s" % len(tries)
        monkeypatch.undo()      # the descriptors back: the waiting connection is served
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert conn.recv(100).startswith(b"HTTP/1.1 200"), "served once it could accept"


def test_offers_for_thousands_of_agents_come_in_one_event(make_local_master, clients):
    agents = [AgentSpec(hostname="h%d" % i, cpus=1, mem=256, disk=100, gpus=0,
                        ports=((31000, 31010),)) for i in range(2000)]
    before = threading.active_count()
    master = make_local_master(agents=agents, allocation_interval=0.2)
    # one thread accepts for every agent's server (it was two threads each)
    assert threading.active_count() - before < 20
    client = clients(master)
    start = time.monotonic()
    # (past 1,024 descriptors: the stream's wait was a select(), dropping it)
    offers = client.next_offers(timeout=60)
    assert len(offers) == 2000 and len({o["agent_id"]["value"] for o in offers}) == 2000
    assert time.monotonic() - start < 30
    client.decline(offers, refuse_seconds=60)
    client.no_event("OFFERS", 1.0)  # a few allocation rounds over 2000 filtered agents


# --- running tasks ------------------------------------------------------------------------

def test_echo_task_updates_in_order_one_per_ack(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    command = ('echo hello; echo "sandbox=$MESOS_SANDBOX executor=$MESOS_EXECUTOR_ID '
               'fw=$MESOS_FRAMEWORK_ID agent=$MESOS_SLAVE_ID mine=$MY_VAR pwd=$(pwd)"')
    client.launch(offer, [task_info("echo-1", offer, command, env={"MY_VAR": "42"})])
    states = []
    for expected in ("TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"):
        status = client.next_update("echo-1")
        assert status["state"] == expected
        assert status["source"] == "SOURCE_EXECUTOR"
        assert status["agent_id"] == offer["agent_id"]
        assert len(__import__("base64").b64decode(status["uuid"])) == 16
        assert isinstance(status["timestamp"], float)
        # The next update waits for this one's acknowledgement.
        client.no_event("UPDATE", 0.2)
        client.acknowledge(status)
        states.append(status["state"])
    assert status["message"] == "Command exited with status 0"
    sandbox = local_master.sandbox("echo-1")
    out = read_file(os.path.join(sandbox, "stdout"))
    assert out.startswith("hello\n")
    assert "sandbox=%s executor=echo-1 fw=%s agent=%s mine=42 pwd=%s" % (
        sandbox, client.framework_id, offer["agent_id"]["value"], sandbox) in out
    state = local_master.wait_until(lambda s: s["frameworks"][0]["completed_tasks"], 30)
    task = state["frameworks"][0]["completed_tasks"][0]
    assert task["state"] == "TASK_FINISHED" and task["resources"]["cpus"] == 0.1
    assert [s["state"] for s in task["statuses"]] == states


# What a Mesos agent gives a command task: executorEnvironment (src/slave/slave.cpp)
# for its command executor, whose environment the task inherits (src/launcher/executor.cpp,
# CommandExecutor::launchTaskSubprocess), MESOS_SANDBOX (MesosContainerizerProcess::_launch,
# src/slave/containerizer/mesos/containerizer.cpp) and MESOS_ALLOCATION_ROLE (the command
# executor's). No MESOS_TASK_ID (Marathon's) nor MESOS_AGENT_ID: no Mesos agent sets them.
MESOS_TASK_ENVIRONMENT = {
    "LIBPROCESS_IP", "LIBPROCESS_PORT", "MESOS_FRAMEWORK_ID", "MESOS_EXECUTOR_ID",
    "MESOS_DIRECTORY", "MESOS_SLAVE_ID", "MESOS_SLAVE_PID", "MESOS_AGENT_ENDPOINT",
    "MESOS_CHECKPOINT", "MESOS_HTTP_COMMAND_EXECUTOR", "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD",
    "MESOS_ALLOCATION_ROLE", "MESOS_SANDBOX"}


def task_environment(master, client, task_id, **kwargs):
    offer = client.next_offers()[0]
    client.launch(offer, [task_info(task_id, offer, "env -0 > env.bin", **kwargs)],
                  filters={"refuse_seconds": 0})
    status = client.wait_state(task_id, "TASK_FINISHED", timeout=30)
    with open(os.path.join(master.sandbox(task_id), "env.bin"), "rb") as handle:
        pairs = [item.partition("=") for item in handle.read().decode().split("\0") if item]
    return offer, status, {name: value for name, _, value in pairs}


def test_a_command_task_gets_the_environment_a_mesos_agent_gives_it(local_master, clients):
    client = clients(local_master)
    offer, _, env = task_environment(local_master, client, "env-1")
    sandbox = local_master.sandbox("env-1")
    endpoint = local_master.state()["slaves"][0]["pid"].rpartition("@")[2]
    assert MESOS_TASK_ENVIRONMENT <= set(env)
    assert "MESOS_TASK_ID" not in env and "MESOS_AGENT_ID" not in env
    assert env["LIBPROCESS_IP"] == endpoint.rpartition(":")[0] == "127.0.0.1"
    assert env["LIBPROCESS_PORT"] == "0"
    assert (env["MESOS_FRAMEWORK_ID"], env["MESOS_EXECUTOR_ID"]) == (client.framework_id, "env-1")
    assert env["MESOS_DIRECTORY"] == env["MESOS_SANDBOX"] == sandbox
    assert env["MESOS_SLAVE_ID"] == offer["agent_id"]["value"]
    assert env["MESOS_AGENT_ENDPOINT"] == endpoint
    assert env["MESOS_SLAVE_PID"] == "slave(1)@" + endpoint
    assert env["MESOS_CHECKPOINT"] == env["MESOS_HTTP_COMMAND_EXECUTOR"] == "0"
    # The agent's --executor_shutdown_grace_period (5secs): no kill policy.
    assert env["MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD"] == "5secs"
    assert env["MESOS_ALLOCATION_ROLE"] == "*"


def test_the_agents_executor_environment_variables_win_over_its_libprocess_ip(
        make_local_master, clients):
    """executorEnvironment (src/slave/slave.cpp) passes the agent's
    LIBPROCESS_IP on, then --executor_environment_variables over it ("a
    LIBPROCESS_IP present in the provided flags will override this
    value"); LIBPROCESS_PORT is 0 whatever they say."""
    master = make_local_master(executor_environment=marked_environment(
        LIBPROCESS_IP="127.0.0.9", LIBPROCESS_PORT="5051"))
    _, _, env = task_environment(master, clients(master), "env-flag")
    assert (env["LIBPROCESS_IP"], env["LIBPROCESS_PORT"]) == ("127.0.0.9", "0")


def test_a_kill_policy_lengthens_the_command_executor_s_grace_period(local_master, clients):
    """Slave::getExecutorInfo (src/slave/slave.cpp): the kill policy's grace
    period + MAX_REAP_INTERVAL (1 s) + 1 s; the task's variables win over the
    agent's, MESOS_ALLOCATION_ROLE over the task's (the command executor sets it last)."""
    client = clients(local_master)
    _, _, env = task_environment(
        local_master, client, "env-2", kill_policy={"grace_period": {"nanoseconds": 7 * 10**9}},
        env={"MESOS_CHECKPOINT": "mine", "MESOS_ALLOCATION_ROLE": "mine"})
    assert env["MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD"] == "9secs"
    assert env["MESOS_CHECKPOINT"] == "mine" and env["MESOS_ALLOCATION_ROLE"] == "*"


def argv_task(task_id, offer, value, arguments):
    info = task_info(task_id, offer, value)
    info["command"].update({"shell": False, "arguments": arguments})
    return info


def test_without_a_shell_value_is_execd_with_the_arguments_as_its_argv(local_master, clients):
    """launch.cpp (src/slave/containerizer/mesos/launch.cpp): ``value`` is the
    program, ``arguments`` its whole argv (arguments[0] is argv[0]); without
    arguments, an empty argv (the kernel gives the program argv[0] "")."""
    client = clients(local_master)
    script = 'printf "argv0=%s\\n" "$0"'   # sh's $0: its argv[0] when no argument follows
    for task_id, value, arguments, out in (
            ("argv0", "/bin/sh", ["my-argv0", "-c", script], "argv0=my-argv0"),
            ("path", "sh", ["/not/sh", "-c", script], "argv0=/not/sh"),
            ("echo", "/bin/echo", ["/bin/false", "hi"], "hi"),
            ("none", "/bin/echo", [], "")):
        offer = client.next_offers()[0]
        client.launch(offer, [argv_task(task_id, offer, value, arguments)],
                      filters={"refuse_seconds": 0})
        status = client.wait_state(task_id, "TASK_FINISHED", timeout=30)
        assert status["message"] == "Command exited with status 0"
        stdout = read_file(os.path.join(local_master.sandbox(task_id), "stdout"))
        assert stdout.splitlines()[0] == out, task_id


@pytest.fixture
def entrypoint_image(docker_engine, tfmesos_image):
    """The tfmesos image with an ENTRYPOINT, built here and removed after."""
    import io

    tag = "mesos-local-test/entrypoint:%s" % uuid.uuid4().hex
    dockerfile = 'FROM %s\nENTRYPOINT ["/bin/echo", "entry"]\n' % tfmesos_image
    docker_engine.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    try:
        yield tag
    finally:
        docker_engine.images.remove(tag)


@pytest.mark.docker
@pytest.mark.timeout(1800)   # the image's first build (minutes when cold)
@pytest.mark.parametrize("containerizer, out", [("DOCKER", "entry /bin/echo a b c"),
                                                ("MESOS", "b c")])
def test_without_a_shell_an_image_task_gets_the_argv_its_containerizer_gives(
        make_local_master, clients, docker_engine, entrypoint_image, no_leaked_containers,
        containerizer, out):
    """Mesos' Docker containerizer runs ``docker run IMAGE value arguments...``
    (src/docker/docker.cpp, Docker::RunOptions::create): every argument
    follows the value, after the image's entrypoint. Its Mesos containerizer
    execs ``value`` with argv = arguments (launch.cpp), so arguments[0] is
    argv[0] there, and ignores the image's entrypoint (the docker/runtime
    isolator's getLaunchCommand)."""
    from mesos_local.containerizer.docker_runner import DockerRunner

    master = make_local_master(container_runner=DockerRunner(docker_engine), allow_root=True)
    client = clients(master)
    offer = client.next_offers()[0]
    image = {"type": "DOCKER", "docker": {"image": entrypoint_image}} \
        if containerizer == "DOCKER" else \
        {"type": "MESOS", "mesos": {"image": {"type": "DOCKER",
                                              "docker": {"name": entrypoint_image}}}}
    info = argv_task("argv", offer, "/bin/echo", ["a", "b", "c"])
    info["container"] = image
    client.launch(offer, [info])
    status = client.wait_state("argv", "TASK_FINISHED", timeout=120)
    assert status["state"] == "TASK_FINISHED", status
    assert read_file(os.path.join(master.sandbox("argv"), "stdout")) == out + "\n"


@pytest.mark.waits
def test_unacknowledged_update_is_resent_with_the_same_uuid(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("retry-1", offer, "true")])
    first = client.next_update("retry-1")
    # Well within Mesos' default of 10 s: the configured 0.5 s.
    again = client.next_update("retry-1", timeout=5)   # retry after 0.5 s
    assert again["uuid"] == first["uuid"] and again["state"] == "TASK_STARTING"
    third = client.next_update("retry-1", timeout=5)   # then after 1 s (doubling)
    assert third["uuid"] == first["uuid"]
    assert third["_received"] - again["_received"] > 0.8
    client.acknowledge(first)
    assert client.next_update("retry-1")["state"] == "TASK_RUNNING"


def test_failing_commands(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("exit-3", offer, "exit 3"),
                          task_info("signal-9", offer, "kill -9 $$")])
    failed = client.wait_state("exit-3", "TASK_FAILED")
    assert failed["message"] == "Command exited with status 3"
    # Mesos' command executor gives a failed command no reason (the proto's
    # default, REASON_COMMAND_EXECUTOR_FAILED, deprecated, is never set:
    # CommandExecutor::reaped, src/launcher/executor.cpp).
    assert "reason" not in failed
    killed = client.wait_state("signal-9", "TASK_FAILED")
    assert killed["message"] == "Command terminated with signal Killed"


def test_image_task_without_container_runner_fails(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    info = task_info("img-1", offer, "echo hi")
    info["container"] = {"type": "MESOS", "mesos": {"image": {
        "type": "DOCKER", "docker": {"name": "python:3.11"}}}}
    client.launch(offer, [info])
    status = client.wait_state("img-1", "TASK_FAILED")
    assert status["message"] == ("the local master cannot run container images: "
                                 "no Docker engine configured")
    assert not os.path.exists(os.path.join(local_master.sandbox("img-1"), "stdout"))


# --- offers: decline, suppress, revive ------------------------------------------------------

def test_decline_refuses_the_agent_for_refuse_seconds(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.decline([offer], refuse_seconds=1.0)
    declined = time.monotonic()
    client.no_event("OFFERS", 0.6)
    again = client.next_offers(timeout=30)
    assert time.monotonic() - declined >= 0.95
    assert again[0]["id"] != offer["id"]
    client.decline(again, refuse_seconds=0)
    client.next_offers(timeout=30)


def test_suppress_and_revive(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.call("SUPPRESS")
    client.decline([offer], refuse_seconds=0)
    client.no_event("OFFERS", 0.5)
    assert local_master.state()["frameworks"][0]["suppressed_roles"] == ["*"]
    client.call("REVIVE")
    client.next_offers(timeout=30)


def test_revive_clears_filters(local_master, clients):
    client = clients(local_master)
    client.decline(client.next_offers(), refuse_seconds=60)
    client.no_event("OFFERS", 0.3)
    client.call("REVIVE")
    client.next_offers(timeout=30)


# --- kill, teardown, reconcile ----------------------------------------------------------------

def test_kill_running_task(local_master, clients):
    client = clients(local_master)
    launch_running(client, local_master, "sleep-1", "sleep 60")
    client.kill("sleep-1")
    status = client.wait_state("sleep-1", "TASK_KILLED")
    # SIGTERM ended it, not the SIGKILL after the 1 s grace period.
    assert status["message"] == "Command terminated with signal Terminated"
    wait_until(lambda: not leftover_processes(local_master),
               message=lambda: "left: %s" % leftover_processes(local_master))


def test_kill_escalates_to_sigkill_after_the_grace_period(local_master, clients):
    client = clients(local_master, capabilities=["TASK_KILLING_STATE"])
    offer = launch_running(client, local_master, "stubborn",
                           "trap '' TERM; echo ready; sleep 60")
    read_file(os.path.join(local_master.sandbox("stubborn"), "stdout"), contains="ready")
    start = time.monotonic()
    client.kill("stubborn", grace=0.5)
    assert client.wait_state("stubborn", "TASK_KILLING")["source"] == "SOURCE_EXECUTOR"
    status = client.wait_state("stubborn", "TASK_KILLED")
    elapsed = time.monotonic() - start
    assert 0.45 <= elapsed < 0.5 + 10, elapsed   # the call's grace, not the task's 60 s
    assert status["message"] == "Command terminated with signal Killed"
    # Its resources come back to the agent and are offered again.
    assert local_master.wait_until(lambda s: s["slaves"][0]["used_resources"]["cpus"] == 0
                                   and s["slaves"][0]["offered_resources"]["cpus"] == 4, 30)
    assert offer["agent_id"]["value"] == local_master.state()["slaves"][0]["id"]


def test_kill_unknown_task_answers_task_lost_without_uuid(local_master, clients):
    client = clients(local_master)
    client.kill("no-such-task")
    status = client.next_update("no-such-task")
    assert status["state"] == "TASK_LOST" and "uuid" not in status
    assert status["reason"] == "REASON_RECONCILIATION"
    assert status["source"] == "SOURCE_MASTER"


def test_teardown_kills_tasks_and_removes_the_framework(local_master, clients):
    client = clients(local_master)
    launch_running(client, local_master, "long-1", "sleep 60")
    # Its process, once readable: /proc/PID/environ reads empty while sh execs sleep.
    wait_until(lambda: leftover_processes(local_master))
    client.call("TEARDOWN")
    assert client.next_event(CLOSED, timeout=30)
    state = local_master.wait_until(lambda s: s["completed_frameworks"], 30)
    assert not state["frameworks"]
    done = state["completed_frameworks"][0]
    assert done["id"] == client.framework_id and not done["connected"]
    assert done["completed_tasks"][0]["state"] == "TASK_KILLED"
    wait_until(lambda: not leftover_processes(local_master),
               message=lambda: "left: %s" % leftover_processes(local_master))
    local_master.wait_until(lambda s: s["slaves"][0]["used_resources"]["cpus"] == 0, 30)


def launch_trapping_term(client, master, task_id, grace):
    """A running task with a KillPolicy of ``grace`` s that writes a line to
    ``term.log`` for each SIGTERM and goes on; its sandbox."""
    launch_running(client, master, task_id,
                   "trap 'echo TERM >> term.log' TERM; echo ready; "
                   "while :; do sleep 0.1; done",
                   kill_policy={"grace_period": {"nanoseconds": grace * 10**9}})
    sandbox = master.sandbox(task_id)
    read_file(os.path.join(sandbox, "stdout"), contains="ready")
    return sandbox


@pytest.mark.parametrize("removal", ["TEARDOWN", "operator", "failover_timeout"])
@pytest.mark.waits
def test_framework_removal_kills_within_the_executor_shutdown_grace_not_the_kill_policy(
        make_local_master, clients, removal):
    # As Mesos: removing a framework shuts its executors down
    # (Slave::shutdownFramework -> _shutdownExecutor, src/slave/slave.cpp),
    # and the command executor then kills its task with its shutdown grace
    # period less 2 s (CommandExecutor::shutdown, src/launcher/executor.cpp:
    # 5 s - MAX_REAP_INTERVAL - 1 s = 3 s by default), whatever the task's
    # KillPolicy; the agent destroys the container after
    # --executor_shutdown_grace_period (5 s) at the latest.
    master = make_local_master()
    client = clients(master, failover_timeout=0.5 if removal == "failover_timeout" else 3600)
    sandbox = launch_trapping_term(client, master, "lingers", 60)
    start = time.monotonic()
    if removal == "TEARDOWN":
        client.call("TEARDOWN")
    elif removal == "operator":
        assert master.teardown(client.framework_id)
    else:
        master.drop_subscription(client.framework_id)
    master.wait_until(lambda s: s["completed_frameworks"], 30)
    # Gone well before its 60 s KillPolicy (3 s here; bounded loosely for loaded hosts).
    wait_until(lambda: not leftover_processes(master), timeout=30,
               message=lambda: "left: %s" % leftover_processes(master))
    assert time.monotonic() - start < 30
    # SIGTERM first, as the command executor sends it.
    assert "TERM" in read_file(os.path.join(sandbox, "term.log"))


@pytest.mark.waits
def test_a_kill_sends_the_task_one_sigterm(make_local_master, clients):
    # The agent signalled the task's leader (Popen.terminate) and then its
    # whole group, leader included: two SIGTERMs. Mesos' command executor
    # sends one to each process of the tree (os::killtree,
    # src/launcher/executor.cpp): a task that handles the first (tfrun's
    # detached scheduler recording its end) was cut short by the second.
    master = make_local_master()
    client = clients(master)
    sandbox = launch_trapping_term(client, master, "counted", 2)
    client.kill("counted")
    client.wait_state("counted", "TASK_KILLED", timeout=60)
    assert read_file(os.path.join(sandbox, "term.log")) == "TERM\n"


def test_reconcile_implicit_and_explicit(local_master, clients):
    client = clients(local_master)
    offer = launch_running(client, local_master, "rec-1", "sleep 60")
    client.call("RECONCILE", {"tasks": []})
    status = client.next_update("rec-1")
    assert status["state"] == "TASK_RUNNING" and status["reason"] == "REASON_RECONCILIATION"
    assert status["source"] == "SOURCE_MASTER" and "uuid" not in status
    client.call("RECONCILE", {"tasks": [
        {"task_id": {"value": "rec-1"}, "agent_id": offer["agent_id"]},
        {"task_id": {"value": "ghost"}},
        {"task_id": {"value": "ghost-on-agent"}, "agent_id": offer["agent_id"]}]})
    assert client.next_update("rec-1")["state"] == "TASK_RUNNING"
    ghost = client.next_update("ghost")
    assert ghost["state"] == "TASK_LOST" and "uuid" not in ghost
    assert ghost["message"] == "Reconciliation: Task is unknown"
    on_agent = client.next_update("ghost-on-agent")
    assert on_agent["message"] == "Reconciliation: Task is unknown to the agent"


def test_reconcile_for_partition_aware_framework(local_master, clients):
    client = clients(local_master, capabilities=["PARTITION_AWARE"])
    client.call("RECONCILE", {"tasks": [{"task_id": {"value": "ghost"}}]})
    assert client.next_update("ghost")["state"] == "TASK_UNKNOWN"


def test_reconcile_answers_the_state_of_the_update_being_delivered(local_master, clients):
    # Master::reconcile (src/master/master.cpp) answers a task's
    # status_update_state (the update forwarded, not yet acknowledged), not
    # the newest state the master recorded: TASK_STARTING here, though the
    # task has finished, its TASK_FINISHED still queued behind it.
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("quick", offer, "true")])
    starting = client.next_update("quick")           # not acknowledged
    assert starting["state"] == "TASK_STARTING"
    local_master.wait_until(lambda s: s["frameworks"][0]["tasks"][0]["state"]
                            == "TASK_FINISHED", 30)
    client.call("RECONCILE", {"tasks": [{"task_id": {"value": "quick"},
                                         "agent_id": offer["agent_id"]}]})
    client.call("RECONCILE", {"tasks": []})
    answers = []
    while len(answers) < 2:
        status = client.next_update("quick")
        if status.get("reason") == "REASON_RECONCILIATION":
            answers.append(status["state"])
    assert answers == ["TASK_STARTING", "TASK_STARTING"]
    client.acknowledge(starting)
    assert client.wait_state("quick", "TASK_FINISHED")["state"] == "TASK_FINISHED"


def test_kill_naming_another_agent_is_ignored(make_local_master, clients):
    # Master::kill: "Cannot kill task ... because it belongs to different agent".
    master = make_local_master(agents=[small_agent(), small_agent()])
    client = clients(master, capabilities=["TASK_KILLING_STATE"])
    offer = launch_running(client, master, "stays", "sleep 60")
    other = [a["id"] for a in master.state()["slaves"]
             if a["id"] != offer["agent_id"]["value"]][0]
    client.kill("stays", agent_id=other)
    client.call("RECONCILE", {"tasks": [{"task_id": {"value": "stays"}}]})
    # A KILL taken sends TASK_KILLING within the call, before this answer.
    answer = client.next_update("stays")
    assert answer["state"] == "TASK_RUNNING", answer
    assert master.state()["frameworks"][0]["tasks"][0]["state"] == "TASK_RUNNING"
    client.kill("stays", agent_id=offer["agent_id"]["value"])
    client.wait_state("stays", "TASK_KILLED")


@pytest.mark.parametrize("roles", [["not-mine"], ["ml", "not-mine"], ["bad role"]])
@pytest.mark.waits
def test_revive_and_suppress_naming_a_role_not_held_are_dropped(local_master, clients, roles):
    # Master::revive and Master::suppress (src/master/master.cpp) drop the
    # whole call when a role is invalid or not the framework's.
    client = clients(local_master, roles=["ml", "other"], capabilities=["MULTI_ROLE"])
    client.decline(client.next_offers(), refuse_seconds=3600)     # in role ml,
    client.decline(client.next_offers(), refuse_seconds=3600)     # then in role other
    client.call("REVIVE", {"roles": roles})
    client.no_event("OFFERS", 0.5)
    client.call("SUPPRESS", {"roles": roles})
    assert local_master.state()["frameworks"][0].get("suppressed_roles", []) == []


def test_revive_of_a_role_clears_only_that_roles_filters(local_master, clients):
    # HierarchicalAllocatorProcess::reviveOffers(frameworkId, roles)
    # (src/master/allocator/mesos/hierarchical.cpp): the filters of the
    # roles named go, the others' stay (offers go to role ml first, then,
    # declined there, to role other).
    client = clients(local_master, roles=["ml", "other"], capabilities=["MULTI_ROLE"])
    for role in ("ml", "other"):
        offers = client.next_offers(timeout=30)
        assert {offer["allocation_info"]["role"] for offer in offers} == {role}
        client.decline(offers, refuse_seconds=3600)
    client.no_event("OFFERS", 0.3)
    client.call("REVIVE", {"roles": ["other"]})
    offers = client.next_offers(timeout=30)           # ml's filter stays
    assert {offer["allocation_info"]["role"] for offer in offers} == {"other"}
    client.decline(offers, refuse_seconds=3600)
    client.no_event("OFFERS", 0.5)
    client.call("REVIVE", {"roles": ["ml"]})
    offers = client.next_offers(timeout=30)
    assert {offer["allocation_info"]["role"] for offer in offers} == {"ml"}


# --- failover and fault injection ---------------------------------------------------------------

def test_failover_keeps_tasks_and_resends_pending_updates(local_master, clients):
    client = clients(local_master, failover_timeout=30)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("keep-1", offer, "sleep 60")])
    client.acknowledge(client.next_update("keep-1"))          # STARTING
    running = client.next_update("keep-1")                    # RUNNING, not acknowledged
    assert running["state"] == "TASK_RUNNING"
    local_master.drop_subscription(client.framework_id)
    assert client.next_event(CLOSED, timeout=30)
    framework = local_master.state()["frameworks"][0]
    assert not framework["connected"] and not framework["active"]
    assert client.call("REVIVE", check=False).status_code == 403

    again = clients(local_master, subscribe=False, failover_timeout=30,
                    framework_id=client.framework_id)
    assert again.subscribe()["subscribed"]["framework_id"]["value"] == client.framework_id
    resent = again.next_update("keep-1")
    assert resent["uuid"] == running["uuid"] and resent["state"] == "TASK_RUNNING"
    again.acknowledge(resent)
    task = local_master.state()["frameworks"][0]["tasks"][0]
    assert task["id"] == "keep-1" and task["state"] == "TASK_RUNNING"
    # Its process, once readable: /proc/PID/environ reads empty while sh execs sleep.
    wait_until(lambda: leftover_processes(local_master))


def test_second_subscription_fails_over_the_first(local_master, clients):
    first = clients(local_master, failover_timeout=30)
    second = clients(local_master, subscribe=False, framework_id=first.framework_id,
                     failover_timeout=30)
    second.subscribe()
    error = first.next_event("ERROR", timeout=30)
    assert error["error"]["message"] == "Framework failed over"
    first.next_event(CLOSED, timeout=30)
    assert first.call("REVIVE", check=False).status_code == 400   # old stream id
    second.call("REVIVE")


def test_no_failover_within_timeout_kills_tasks(local_master, clients):
    client = clients(local_master, failover_timeout=0.5)
    launch_running(client, local_master, "doomed", "sleep 60")
    local_master.drop_subscription(client.framework_id)
    state = local_master.wait_until(lambda s: s["completed_frameworks"], 30)
    assert state["completed_frameworks"][0]["completed_tasks"][0]["state"] == "TASK_KILLED"
    wait_until(lambda: not leftover_processes(local_master),
               message=lambda: "left: %s" % leftover_processes(local_master))
    late = clients(local_master, subscribe=False, framework_id=client.framework_id)
    error = late.subscribe(expect_error=True)
    assert error["error"]["message"] == "Framework has been removed"
    late.next_event(CLOSED, timeout=30)


def test_an_operator_teardown_closes_the_subscription_without_an_error(local_master, clients):
    # As Mesos: /master/teardown removes the framework, whose HTTP stream is
    # closed with no ERROR event (Master::removeFramework ->
    # Framework::disconnect, src/master/master.cpp, framework.cpp); the
    # scheduler learns why when it subscribes again: "Framework has been
    # removed" (Master::validateFramework), which tfrun reads as a kill.
    client = clients(local_master, failover_timeout=3600)
    launch_running(client, local_master, "torn", "sleep 60")
    answer = urllib.request.urlopen(urllib.request.Request(
        local_master.url + "/master/teardown",
        data=("frameworkId=%s" % client.framework_id).encode(), method="POST"), timeout=30)
    assert answer.status == 200
    assert client.next_event(("ERROR", CLOSED), timeout=30)["type"] == CLOSED
    again = clients(local_master, subscribe=False, framework_id=client.framework_id)
    assert again.subscribe(expect_error=True)["error"]["message"] == "Framework has been removed"
    wait_until(lambda: not leftover_processes(local_master),
               message=lambda: "left: %s" % leftover_processes(local_master))


def test_client_hangup_disconnects_the_framework(local_master, clients):
    client = clients(local_master, failover_timeout=30)
    client.close()
    local_master.wait_until(lambda s: not s["frameworks"][0]["connected"], 30)


@pytest.mark.parametrize("partition_aware", [False, True])
def test_remove_agent(make_local_master, clients, partition_aware):
    master = make_local_master(agents=[small_agent(hostname="a"), small_agent(hostname="b")])
    capabilities = ["PARTITION_AWARE"] if partition_aware else []
    client = clients(master, capabilities=capabilities)
    offers = client.next_offers()
    target = next(o for o in offers if o["hostname"] == "a")
    client.launch(target, [task_info("on-a", target, "sleep 60")],
                  filters={"refuse_seconds": 0})
    client.wait_state("on-a", "TASK_RUNNING")
    leftover = client.next_offers()   # what is left of agent a, offered again
    assert [o["hostname"] for o in leftover] == ["a"]
    agent_id = target["agent_id"]["value"]
    master.remove_agent(agent_id)
    rescind = client.next_event("RESCIND")
    assert rescind["rescind"]["offer_id"] == leftover[0]["id"]
    status = client.next_update("on-a")
    # As Mesos marks an agent gone (Master::__removeSlave without an
    # unreachable time; src/master/master.cpp): TASK_GONE_BY_OPERATOR was
    # TASK_GONE, REASON_AGENT_REMOVED_BY_OPERATOR was REASON_AGENT_REMOVED.
    assert status["state"] == ("TASK_GONE_BY_OPERATOR" if partition_aware else "TASK_LOST")
    assert status["reason"] == ("REASON_AGENT_REMOVED_BY_OPERATOR" if partition_aware
                                else "REASON_AGENT_REMOVED") and "uuid" not in status
    assert status["message"] == "Agent has been marked gone"
    assert status["source"] == "SOURCE_MASTER" and "unreachable_time" not in status
    client.call("RECONCILE", {"tasks": [{"task_id": {"value": "on-a"},
                                         "agent_id": {"value": agent_id}}]})
    answer = client.next_update("on-a")
    assert answer["state"] == ("TASK_GONE_BY_OPERATOR" if partition_aware else "TASK_LOST")
    assert answer["message"] == "Reconciliation: Task is gone"
    failure = client.next_event("FAILURE")
    assert failure["failure"]["agent_id"]["value"] == agent_id
    state = master.state()
    assert [s["hostname"] for s in state["slaves"]] == ["b"]
    wait_until(lambda: not leftover_processes(master),
               message=lambda: "left: %s" % leftover_processes(master))
    with pytest.raises(KeyError):
        master.remove_agent(agent_id)


@pytest.mark.waits
def test_stalled_subscription_sends_no_heartbeats(local_master, clients):
    client = clients(local_master)
    client.next_event("HEARTBEAT", timeout=10, skip=())
    local_master.stall_subscription(client.framework_id)
    time.sleep(0.1)
    client.drain()
    client.no_event(("HEARTBEAT", "OFFERS", "UPDATE"), 1.5)
    assert local_master.state()["frameworks"][0]["connected"]


def test_leader_redirect_and_no_leader(local_master, clients):
    client = clients(local_master, subscribe=False)
    body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": client.framework_info}}
    local_master.set_leader("http://10.1.2.3:5050")
    response = client.post(body)
    assert response.status_code == 307
    assert response.headers["Location"] == "//10.1.2.3:5050/api/v1/scheduler"
    local_master.set_leader("")
    response = client.post(body)
    assert response.status_code == 503 and response.text == "No leader elected"
    assert requests.get(local_master.url + "/master/state").status_code == 503
    local_master.set_leader(None)
    client.subscribe()


# --- GPUs and roles ------------------------------------------------------------------------------------

def test_gpu_agents_go_to_gpu_aware_frameworks_only(make_local_master, clients):
    # Mesos' default --filter_gpu_resources=true (src/master/flags.cpp): a
    # framework without GPU_RESOURCES gets no offer of a GPU agent at all.
    master = make_local_master(agents=[small_agent(gpus=2), small_agent(hostname="cpu")])
    assert master.filter_gpu_resources
    assert master.state()["flags"]["filter_gpu_resources"] == "true"
    plain = clients(master)
    offers = plain.next_offers()
    assert [o["hostname"] for o in offers] == ["cpu"]
    plain.decline(offers, refuse_seconds=60)
    plain.no_event(("OFFERS",), 0.5)
    plain.call("TEARDOWN")

    aware = clients(master, capabilities=["GPU_RESOURCES"])
    offer = next(o for o in aware.next_offers() if o["hostname"] != "cpu")
    assert offered(offer, "gpus") == 2
    aware.launch(offer, [
        task_info("two-gpus", offer, 'echo "[$CUDA_VISIBLE_DEVICES]"',
                  extra_resources=[scalar("gpus", 2)]),
        task_info("half-gpu", offer, "true", extra_resources=[scalar("gpus", 0.5)])])
    error = aware.next_update("half-gpu")
    assert error["state"] == "TASK_ERROR" and "whole number" in error["message"]
    aware.wait_state("two-gpus", "TASK_FINISHED")
    assert read_file(os.path.join(master.sandbox("two-gpus"), "stdout")) == "[0,1]\n"


def test_without_gpu_filter_every_framework_gets_gpu_agents_gpus_included(
        make_local_master, clients):
    # --filter_gpu_resources=false: GPU agents go "indiscriminately" to all
    # frameworks, GPUs included (src/master/flags.cpp, hierarchical.cpp).
    master = make_local_master(agents=[small_agent(gpus=2)], filter_gpu_resources=False)
    plain = clients(master)
    offer = plain.next_offers()[0]
    assert offered(offer, "gpus") == 2 and offered(offer, "cpus") == 4
    plain.launch(offer, [task_info("no-gpu", offer, 'echo "[$CUDA_VISIBLE_DEVICES]"')])
    plain.wait_state("no-gpu", "TASK_FINISHED")
    assert read_file(os.path.join(master.sandbox("no-gpu"), "stdout")) == "[]\n"


def test_multi_role_offers_carry_allocation_info(local_master, clients):
    client = clients(local_master, capabilities=["MULTI_ROLE"], roles=["tf"])
    offer = client.next_offers()[0]
    assert offer["allocation_info"] == {"role": "tf"}
    assert all(r["allocation_info"] == {"role": "tf"} for r in offer["resources"])
    good = task_info("with-role", offer, "true")
    good["resources"] = [scalar("cpus", 0.1, "tf"), scalar("mem", 32, "tf")]
    bad = task_info("without-role", offer, "true")
    client.launch(offer, [good, bad])
    error = client.next_update("without-role")
    assert error["state"] == "TASK_ERROR" and "allocation_info" in error["message"]
    client.wait_state("with-role", "TASK_FINISHED")
    assert local_master.state()["frameworks"][0]["roles"] == ["tf"]


def test_roles_without_multi_role_is_refused(local_master, clients):
    client = clients(local_master, subscribe=False, roles=["tf"])
    error = client.subscribe(expect_error=True)
    assert "MULTI_ROLE" in error["error"]["message"]


# --- invalid launches ------------------------------------------------------------------------------------

def test_task_errors(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    executor = task_info("custom-executor", offer, "true")
    executor["executor"] = {"executor_id": {"value": "e"}, "command": {"value": "x"}}
    wrong_agent = task_info("wrong-agent", offer, "true")
    wrong_agent["agent_id"] = {"value": "S-nope"}
    no_command = task_info("no-command", offer, "true")
    del no_command["command"]
    client.launch(offer, [
        task_info("too-big", offer, "true", cpus=100),
        task_info("port-out", offer, "true", extra_resources=[ports((40000, 40000))]),
        task_info("port-a", offer, "sleep 60", extra_resources=[ports((31000, 31001))]),
        task_info("port-b", offer, "true", extra_resources=[ports((31001, 31001))]),
        task_info("port-a", offer, "true"),
        executor, wrong_agent, no_command,
        task_info("bad/id", offer, "true"),
        task_info("x" * 256, offer, "true"),    # TASK_FAILED here (ENAMETOOLONG) before
    ], filters={"refuse_seconds": 0})
    expected = {
        "too-big": "Task uses more resources cpus:100; mem:32 than available",
        "port-out": "ports:[40000-40000]",
        "port-b": "ports:[31001-31001]",
        "port-a": "Task has duplicate ID: port-a",
        "custom-executor": "at least one (but not both) of CommandInfo or ExecutorInfo",
        "wrong-agent": "Task uses invalid agent: S-nope",
        "no-command": "needs 'command'",
        "bad/id": "'bad/id' contains invalid characters",   # validateID's words
        "x" * 256: "ID must not be greater than 255 characters",
    }
    seen = {}
    while len(seen) < len(expected):
        status = client.next_update()
        if status["state"] == "TASK_ERROR":
            assert status["reason"] == "REASON_TASK_INVALID" and "uuid" not in status
            assert status["source"] == "SOURCE_MASTER"
            seen[status["task_id"]["value"]] = status["message"]
        elif "uuid" in status:
            client.acknowledge(status)
    for task_id, text in expected.items():
        assert text in seen[task_id], (task_id, seen[task_id])
    # The first port-a runs; a second launch with its id on a new offer is a duplicate.
    offer = client.next_offers()[0]
    assert offered(offer, "ports") == [(31002, 31009)]
    client.launch(offer, [task_info("port-a", offer, "true")])
    while True:
        status = client.next_update("port-a")
        if status["state"] == "TASK_ERROR":
            break
        client.acknowledge(status)
    assert "duplicate ID" in status["message"]


def test_task_fields_mesos_refuses_are_task_errors(local_master, clients):
    # validateTask (src/master/validation.cpp:1686-1698) refuses these with
    # TASK_ERROR; they used to launch here (negative durations clamped to 0,
    # health checks only warned about, no resources taken as none needed).
    client = clients(local_master)
    offer = client.next_offers()[0]
    command_check = {"type": "COMMAND", "command": {"value": "true"}}
    infos = {
        "negative-grace": dict(kill_policy={"grace_period": {"nanoseconds": -1}}),
        "negative-max-completion": dict(max_completion_time={"nanoseconds": -1000000000}),
        "no-resources": dict(resources=[]),
        "untyped-health-check": dict(health_check={"command": {"value": "true"}}),
        "unknown-health-check": dict(health_check={"type": "UNKNOWN"}),
        "http-health-check-without-http": dict(health_check={"type": "HTTP"}),
        "health-check-relative-path": dict(health_check={"type": "HTTP",
                                                         "http": {"port": 80, "path": "x"}}),
        "negative-interval": dict(health_check=dict(command_check, interval_seconds=-1.0)),
        "negative-delay": dict(health_check=dict(command_check, delay_seconds=-1.0)),
        "negative-timeout": dict(health_check=dict(command_check, timeout_seconds=-1.0)),
        "negative-health-grace": dict(health_check=dict(command_check,
                                                        grace_period_seconds=-1.0)),
        "untyped-check": dict(check={"command": {"command": {"value": "true"}}}),
        "negative-check-interval": dict(check={"type": "COMMAND", "interval_seconds": -1.0,
                                               "command": {"command": {"value": "true"}}}),
        # Numbers as JSON strings, which Mesos' parser reads as numbers too.
        "negative-grace-text": dict(kill_policy={"grace_period": {"nanoseconds": "-1e3"}}),
        "negative-interval-text": dict(health_check=dict(command_check,
                                                         interval_seconds="-1")),
    }
    tasks = []
    for task_id, fields in infos.items():
        info = task_info(task_id, offer, "true")
        info.update(fields)
        tasks.append(info)
    client.launch(offer, tasks, filters={"refuse_seconds": 0})
    expected = {
        "negative-grace": "Task's 'kill_policy.grace_period' must be non-negative",
        "negative-max-completion": "Task's `max_completion_time` must be non-negative",
        "no-resources": "Task uses no resources",
        "untyped-health-check": "Task uses invalid health check: HealthCheck must specify "
                                "'type'",
        "unknown-health-check": "Task uses invalid health check: 'UNKNOWN' is not a valid "
                                "health check type",
        "http-health-check-without-http": "Task uses invalid health check: Expecting 'http' "
                                          "to be set for HTTP health check",
        "health-check-relative-path": "Task uses invalid health check: The path 'x' of HTTP "
                                      "health check must start with '/'",
        "negative-interval": "Task uses invalid health check: Expecting 'interval_seconds' to "
                             "be non-negative",
        "negative-delay": "Task uses invalid health check: Expecting 'delay_seconds' to be "
                          "non-negative",
        "negative-timeout": "Task uses invalid health check: Expecting 'timeout_seconds' to "
                            "be non-negative",
        "negative-health-grace": "Task uses invalid health check: Expecting "
                                 "'grace_period_seconds' to be non-negative",
        "untyped-check": "Task uses invalid check: CheckInfo must specify 'type'",
        "negative-check-interval": "Task uses invalid check: Expecting 'interval_seconds' to "
                                   "be non-negative",
        "negative-grace-text": "Task's 'kill_policy.grace_period' must be non-negative",
        "negative-interval-text": "Task uses invalid health check: Expecting "
                                  "'interval_seconds' to be non-negative",
    }
    seen = {}
    while len(seen) < len(expected):
        status = client.next_update()
        assert status["state"] == "TASK_ERROR", status
        assert status["reason"] == "REASON_TASK_INVALID"
        assert status["source"] == "SOURCE_MASTER"
        seen[status["task_id"]["value"]] = status["message"]
    assert seen == expected


@pytest.mark.parametrize("partition_aware", [False, True])
def test_stale_offer(local_master, clients, partition_aware):
    client = clients(local_master,
                     capabilities=["PARTITION_AWARE"] if partition_aware else [])
    offer = client.next_offers()[0]
    client.decline([offer], refuse_seconds=0)
    client.launch(offer, [task_info("late", offer, "true")])
    status = client.next_update("late")
    assert status["state"] == ("TASK_DROPPED" if partition_aware else "TASK_LOST")
    assert status["reason"] == "REASON_INVALID_OFFERS" and "uuid" not in status
    assert status["message"] == ("Task launched with invalid offers: Offer %s is no longer "
                                 "valid" % offer["id"]["value"])


@pytest.mark.parametrize("partition_aware", [False, True])
def test_accept_naming_another_frameworks_offer_discards_every_named_offer(
        make_local_master, clients, partition_aware):
    """Master::accept (src/master/master.cpp): when validation::offer::validate
    fails, every named offer the master still has is discarded (discardOffer:
    its resources recovered, no RESCIND), another framework's included, and
    each task of the call gets TASK_DROPPED (PARTITION_AWARE) or TASK_LOST,
    REASON_INVALID_OFFERS."""
    master = make_local_master(agents=[small_agent(hostname="h1"), small_agent(hostname="h2")])
    mine = clients(master, name="mine",
                   capabilities=["PARTITION_AWARE"] if partition_aware else [])
    own, spare = mine.next_offers()     # both agents, before another framework subscribes
    theirs = clients(master, name="theirs")
    mine.decline([spare], refuse_seconds=60)   # its agent goes to the other framework
    other = theirs.next_offers()[0]
    assert other["agent_id"] == spare["agent_id"]
    mine.call("ACCEPT", {"offer_ids": [own["id"], other["id"]],
                         "operations": [{"type": "LAUNCH", "launch": {
                             "task_infos": [task_info("mixed", own, "true")]}}]})
    status = mine.next_update("mixed")
    assert status["state"] == ("TASK_DROPPED" if partition_aware else "TASK_LOST")
    assert status["reason"] == "REASON_INVALID_OFFERS" and "uuid" not in status
    assert status["message"] == (
        "Task launched with invalid offers: Offer %s has invalid framework %s while "
        "framework %s is expected" % (other["id"]["value"], theirs.framework_id,
                                      mine.framework_id))
    # Neither offer is kept: their resources come back in new offers, to
    # either framework (the allocator's order decides: theirs may get both
    # agents; mine refused the other's).
    reoffered = {}
    deadline = time.monotonic() + 30
    while len(reoffered) < 2 and time.monotonic() < deadline:
        for client in (mine, theirs):
            with contextlib.suppress(TimeoutError):
                for offer in client.next_offers(timeout=0.2):
                    reoffered[offer["agent_id"]["value"]] = (client, offer)
    assert set(reoffered) == {own["agent_id"]["value"], other["agent_id"]["value"]}, reoffered
    assert reoffered[other["agent_id"]["value"]][0] is theirs
    assert not {offer["id"]["value"] for _, offer in reoffered.values()} & {
        own["id"]["value"], other["id"]["value"]}
    for client in (mine, theirs):
        client.no_event("RESCIND", 0.2)   # discarded, not rescinded
    for client, offer, task_id in ((mine, own, "own-again"), (theirs, other, "theirs-late")):
        client.launch(offer, [task_info(task_id, offer, "true")])
        status = client.next_update(task_id)
        assert status["reason"] == "REASON_INVALID_OFFERS"
        assert status["message"] == ("Task launched with invalid offers: Offer %s is no "
                                     "longer valid" % offer["id"]["value"])


@pytest.mark.parametrize("offer_ids, message", [
    (lambda own, other: [own, own], "Duplicate offer {own} in offer list"),
    # validation::offer::validate runs each check over every offer in turn:
    # an unknown offer is named before another framework's, wherever it is.
    (lambda own, other: [other, {"value": "gone"}], "Offer gone is no longer valid"),
])
def test_invalid_offer_lists_name_mesos_first_error(make_local_master, clients, offer_ids,
                                                    message):
    master = make_local_master(agents=[small_agent(hostname="h1"), small_agent(hostname="h2")])
    mine = clients(master, name="mine")
    own, spare = mine.next_offers()     # both agents, before another framework subscribes
    theirs = clients(master, name="theirs")
    mine.decline([spare], refuse_seconds=60)
    other = theirs.next_offers()[0]
    mine.call("ACCEPT", {"offer_ids": offer_ids(own["id"], other["id"]),
                         "operations": [{"type": "LAUNCH", "launch": {
                             "task_infos": [task_info("bad", own, "true")]}}]})
    status = mine.next_update("bad")
    assert status["message"] == ("Task launched with invalid offers: "
                                 + message.format(own=own["id"]["value"]))


# --- malformed calls ---------------------------------------------------------------------------------------

def test_malformed_calls_are_refused(local_master, clients):
    client = clients(local_master, failover_timeout=30)
    offer = client.next_offers()[0]
    headers = {"Mesos-Stream-Id": client.stream_id}
    fid = {"value": client.framework_id}

    response = client.post(None, headers, raw=b"{not json")
    assert response.status_code == 400 and "Failed to parse body into JSON" in response.text

    bad_task = task_info("t", offer, "true")
    bad_task["resources"][0]["scaler"] = {"value": 1}
    response = client.launch(offer, [bad_task], check=False)
    assert response.status_code == 400
    assert ("Call.accept.operations[0].launch.task_infos[0].resources[0].scaler: "
            "unknown field") in response.text

    response = client.post({"type": "DECLINE", "framework_id": fid,
                            "decline": {"offer_ids": [{"value": 7}]}}, headers)
    assert response.status_code == 400
    assert "Call.decline.offer_ids[0].value: expected a string" in response.text

    response = client.call("REVIVE", stream_id=None, check=False)
    assert response.status_code == 400 and response.text == (
        "All non-subscribe calls should include the 'Mesos-Stream-Id' header")
    response = client.call("REVIVE", stream_id="not-the-stream", check=False)
    assert response.status_code == 400 and "didn't match the stream ID" in response.text

    assert client.post({"type": "REVIVE", "framework_id": fid}, headers,
                       content_type="text/plain").status_code == 415
    assert client.post({"type": "REVIVE", "framework_id": fid}, headers,
                       content_type=None).status_code == 400
    response = client.post({"type": "REVIVE", "framework_id": {"value": "nobody"}}, headers)
    assert response.status_code == 400 and response.text == "Framework cannot be found"
    response = client.post({"type": "REVIVE"}, headers)
    assert response.status_code == 400 and "Expecting 'framework_id'" in response.text

    reserve = {"offer_ids": [offer["id"]], "operations": [{"type": "RESERVE", "reserve": {}}]}
    response = client.call("ACCEPT", reserve, check=False)
    assert response.status_code == 400
    assert "not supported by the local master" in response.text

    ack = {"agent_id": offer["agent_id"], "task_id": {"value": "t"}, "uuid": "YWJj"}
    assert client.call("ACKNOWLEDGE", ack, check=False).status_code == 400
    ack["uuid"] = "MDEyMzQ1Njc4OWFiY2RlZg=="        # valid but unknown: ignored
    assert client.call("ACKNOWLEDGE", ack).status_code == 202

    subscribe = {"type": "SUBSCRIBE", "subscribe": {"framework_info": {
        "user": "u", "name": "n"}}}
    assert client.post(subscribe, headers).status_code == 400     # carries a stream id
    assert client.post(subscribe, {"Accept": "text/html"}).status_code == 406
    response = client.post(subscribe, content_type="application/x-protobuf")  # JSON bytes
    assert (response.status_code, response.text) == (400, "Failed to parse body into Call protobuf")
    assert requests.get(local_master.url + "/api/v1/scheduler").status_code == 405

    local_master.drop_subscription(client.framework_id)
    response = client.call("REVIVE", check=False)
    assert response.status_code == 403 and response.text == "Framework is not subscribed"


def test_other_calls_are_accepted(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.call("MESSAGE", {"agent_id": offer["agent_id"], "executor_id": {"value": "e"},
                            "data": "aGk="})
    client.call("REQUEST", {"requests": []})
    client.call("SHUTDOWN", {"executor_id": {"value": "e"}, "agent_id": offer["agent_id"]})
    client.call("ACCEPT_INVERSE_OFFERS", {"inverse_offer_ids": [{"value": "x"}]})
    client.call("DECLINE_INVERSE_OFFERS", {"inverse_offer_ids": [{"value": "x"}]})


def test_reconcile_operations_answers_202_and_sends_operation_updates(local_master, clients):
    """Mesos >= 1.10 (src/master/http.cpp, Master::reconcileOperations):
    202 with no body, then an UPDATE_OPERATION_STATUS event per operation
    asked about (no uuid); none for an implicit reconciliation."""
    client = clients(local_master)
    agent_id = client.next_offers()[0]["agent_id"]
    response = client.call("RECONCILE_OPERATIONS", {"operations": []})
    assert response.status_code == 202 and response.content == b""
    response = client.call("RECONCILE_OPERATIONS", {"operations": [
        {"operation_id": {"value": "op"}},
        {"operation_id": {"value": "op2"}, "agent_id": agent_id},
        {"operation_id": {"value": "op3"}, "agent_id": {"value": "elsewhere"}}]})
    assert response.status_code == 202 and response.content == b""
    statuses = [client.next_event("UPDATE_OPERATION_STATUS")["update_operation_status"]["status"]
                for _ in range(3)]
    assert [s["operation_id"]["value"] for s in statuses] == ["op", "op2", "op3"]
    assert {s["state"] for s in statuses} == {"OPERATION_UNKNOWN"}
    assert [s["message"] for s in statuses] == [
        "Reconciliation: Operation is unknown and no 'agent_id' was provided",
        "Reconciliation: Operation is unknown",
        "Reconciliation: Both operation and agent are unknown"]
    assert "agent_id" not in statuses[0] and statuses[1]["agent_id"] == agent_id
    assert all("uuid" not in s for s in statuses)
    client.no_event("UPDATE_OPERATION_STATUS", 0.5)


# --- endpoints, stop and the CLI ----------------------------------------------------------------------------

def test_state_version_health_endpoints(local_master, clients):
    client = clients(local_master, name="state-fw", capabilities=["GPU_RESOURCES"])
    client.next_offers()
    state = requests.get(local_master.url + "/master/state").json()
    assert requests.get(local_master.url + "/state").json()["id"] == state["id"]
    assert state["version"] == "1.11.0" and state["id"] == local_master.id
    assert state["leader_info"]["port"] == local_master.port
    slave = state["slaves"][0]
    assert slave["resources"] == {"cpus": 4, "mem": 4096, "disk": 10000, "gpus": 0,
                                  "ports": "[31000-31009]"}
    assert slave["active"] and slave["offered_resources"]["cpus"] == 4
    framework = state["frameworks"][0]
    assert framework["name"] == "state-fw" and framework["capabilities"] == ["GPU_RESOURCES"]
    assert len(framework["offers"]) == 1 and framework["offers"][0]["slave_id"] == slave["id"]
    # json(JSON::ObjectWriter*, const Offer&) in src/common/http.cpp writes it
    assert framework["offers"][0]["allocation_info"] == {"role": "*"}
    assert state["completed_frameworks"] == []
    version = requests.get(local_master.url + "/version").json()
    assert version["version"] == "1.11.0" and "build_date" in version and "git_tag" in version
    assert requests.get(local_master.url + "/health").status_code == 200
    assert requests.get(local_master.url + "/nope").status_code == 404


def test_stop_kills_every_task(make_local_master, clients):
    master = make_local_master(kill_grace_period=0.3)
    client = clients(master)
    launch_running(client, master, "plain", "sleep 60")
    launch_running(client, master, "deaf", "trap '' TERM; sleep 60")
    assert len(leftover_processes(master)) >= 2
    start = time.monotonic()
    master.stop()
    assert time.monotonic() - start < 15   # 0.3 s grace, then SIGKILL: not the sleeps' 60 s
    assert leftover_processes(master) == []
    client.next_event(CLOSED, timeout=30)
    master.stop()   # idempotent
    with pytest.raises(requests.ConnectionError):
        requests.get(master.url + "/health", timeout=2)


def test_a_busy_port_is_an_error_in_the_style_of_every_other(tmp_path, capsys):
    # Before: "Error: the local master cannot listen on ...", where a
    # credentials file's error said "tfmesos local-master: error: ...".
    import socket

    from mesos_local.command_line import main
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        status = main(["--port", str(port), "--cpus", "1", "--mem", "256", "--gpus", "0",
                       "--work-dir", str(tmp_path)], prog="tfmesos local-master")
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("tfmesos local-master: error: the local master cannot listen on "
                          "127.0.0.1:%d: " % port), err
    assert len(err.splitlines()) == 1, err
    status = main(["--port", "0", "--credentials", str(tmp_path / "none")],
                  prog="tfmesos local-master")
    assert status == 2
    assert capsys.readouterr().err.startswith("tfmesos local-master: error: ")


def _cli(port, tmp_path):
    command = [sys.executable, "-m", "mesos_local", "--port", str(port),
               "--cpus", "1", "--mem", "256", "--gpus", "0", "--work-dir", str(tmp_path)]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return command, env


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_cli_runs_until_signalled(tmp_path, signum):
    port = free_port()
    command, env = _cli(port, tmp_path)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line == "local Mesos master listening on http://127.0.0.1:%d\n" % port
        assert requests.get("http://127.0.0.1:%d/health" % port, timeout=5).status_code == 200
        state = requests.get("http://127.0.0.1:%d/master/state" % port, timeout=5).json()
        assert state["slaves"][0]["resources"]["cpus"] == 1
        if signum == signal.SIGTERM:
            second = subprocess.run(command, capture_output=True, text=True, env=env,
                                    timeout=30)
            assert second.returncode == 1
            lines = second.stderr.strip().splitlines()
            assert len(lines) == 1, second.stderr
            assert lines[0].startswith("mesos-local: error: the local master cannot listen "
                                       "on 127.0.0.1:%d" % port)
        proc.send_signal(signum)
        assert proc.wait(timeout=15) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_cli_help_explains_options():
    from mesos_local.command_line import build_parser
    text = build_parser().format_help()
    for option in ("--host", "--port", "--cpus", "--mem", "--gpus", "--agents",
                   "--heartbeat-interval", "--work-dir", "--credentials",
                   "--executor-environment-variables", "--allow-root", "--agent",
                   "--netns", "--no-filter-gpu-resources"):
        assert option in text


def test_json_of_state_is_serializable(local_master):
    json.dumps(local_master.state())


# --- the runner seam, fetcher, limits and agents ------------------------------------------------------------

def test_image_tasks_go_to_the_container_runner(make_local_master, clients):
    runner = RecordingRunner()
    master = make_local_master(agents=[small_agent(gpus=1)], container_runner=runner)
    client = clients(master, capabilities=["GPU_RESOURCES"])
    offer = client.next_offers()[0]
    info = task_info("in-image", offer, "echo from-image", extra_resources=[scalar("gpus", 1)])
    info["container"] = {"type": "DOCKER", "docker": {
        "image": "tensorflow/tensorflow:latest-gpu", "network": "HOST",
        "force_pull_image": True, "parameters": [{"key": "shm-size", "value": "1g"}]},
        "volumes": [{"container_path": "/data", "host_path": "/tmp", "mode": "RO"}]}
    client.launch(offer, [info])
    client.wait_state("in-image", "TASK_FINISHED")
    [launch] = runner.launches
    assert (launch.image, launch.containerizer, launch.force_pull) == (
        "tensorflow/tensorflow:latest-gpu", "DOCKER", True)
    assert launch.volumes == [("/tmp", "/data", "RO")]
    assert launch.docker_parameters == [("shm-size", "1g")]
    assert launch.gpu_ids == ["0"] and launch.env["CUDA_VISIBLE_DEVICES"] == "0"
    assert launch.sandbox == master.sandbox("in-image")


def test_runner_error_fails_the_task_with_its_message(make_local_master, clients):
    master = make_local_master(container_runner=RecordingRunner(fail="no such image: nope"))
    client = clients(master)
    offer = client.next_offers()[0]
    info = task_info("bad-image", offer, "true")
    info["container"] = {"type": "MESOS", "mesos": {"image": {
        "type": "DOCKER", "docker": {"name": "nope"}}}}
    client.launch(offer, [info])
    status = client.wait_state("bad-image", "TASK_FAILED")
    assert status["message"] == "no such image: nope"
    assert status["reason"] == "REASON_CONTAINER_LAUNCH_FAILED"


def test_uris_are_fetched_into_the_sandbox(local_master, clients, tmp_path):
    import tarfile
    (tmp_path / "data.txt").write_text("fetched\n")
    with tarfile.open(tmp_path / "bundle.tar.gz", "w:gz") as archive:
        archive.add(tmp_path / "data.txt", arcname="bundle/data.txt")
    (tmp_path / "run.sh").write_text("#!/bin/sh\ncat bundle/data.txt\n")
    client = clients(local_master)
    offer = client.next_offers()[0]
    info = task_info("fetch", offer, "./run.sh")
    info["command"]["uris"] = [
        {"value": str(tmp_path / "bundle.tar.gz")},
        {"value": "file://%s" % (tmp_path / "run.sh"), "executable": True}]
    client.launch(offer, [info])
    client.wait_state("fetch", "TASK_FINISHED")
    assert read_file(os.path.join(local_master.sandbox("fetch"), "stdout")) == "fetched\n"


def test_max_completion_time(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("slow", offer, "sleep 60",
                                    max_completion_time={"nanoseconds": 300000000})])
    status = client.wait_state("slow", "TASK_FAILED")
    assert status["reason"] == "REASON_MAX_COMPLETION_TIME_REACHED"
    # Worded as the executor words any end (CommandExecutor::reaped).
    assert status["message"] == "Command terminated with signal Terminated"


def test_add_agent_while_running(local_master, clients):
    client = clients(local_master)
    client.decline(client.next_offers(), refuse_seconds=60)
    agent_id = local_master.add_agent(small_agent(hostname="late", attributes={
        "rack": "r2", "speed": 3}))
    offer = client.next_offers()[0]
    assert offer["agent_id"]["value"] == agent_id and offer["hostname"] == "late"
    assert {a["name"]: a for a in offer["attributes"]} == {
        "rack": {"name": "rack", "type": "TEXT", "text": {"value": "r2"}},
        "speed": {"name": "speed", "type": "SCALAR", "scalar": {"value": 3}}}
    assert len(local_master.state()["slaves"]) == 2


def test_subscribe_with_an_id_never_seen_is_readmitted_like_after_master_failover(
        local_master, clients):
    client = clients(local_master, subscribe=False, framework_id="made-up-0001")
    subscribed = client.subscribe()
    assert subscribed["subscribed"]["framework_id"]["value"] == "made-up-0001"
    assert [f["id"] for f in local_master.state()["frameworks"]] == ["made-up-0001"]


def test_a_daemon_that_left_its_group_and_cleared_its_environment_dies_with_its_task(
        local_master, clients):
    # Without cgroups a task's processes were found by its group and its
    # MESOS_SANDBOX: 'setsid env -i ...' outlived it. Mesos' POSIX launcher
    # kills the tree by parent too (os::killtree), which still holds it.
    assert local_master.isolator is None
    daemon = "setsid env -i %s -c 'import time; time.sleep(60)'" % sys.executable
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("cleared", offer, "%s & echo $! > daemon.pid; echo ready; "
                                    "sleep 60" % daemon)])
    client.wait_state("cleared", "TASK_RUNNING")
    read_file(os.path.join(local_master.sandbox("cleared"), "stdout"), contains="ready")
    pid = int(read_file(os.path.join(local_master.sandbox("cleared"), "daemon.pid")))
    try:
        wait_until(lambda: session_of(pid) == pid, message="the daemon did not call setsid()")
        client.kill("cleared")
        client.wait_state("cleared", "TASK_KILLED")
        wait_until(lambda: not alive(pid), timeout=30, message="the daemon outlived its task")
    finally:   # it carries no marker the suite's leak check could find it by
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_processes_that_leave_the_process_group_die_with_their_task(local_master, clients):
    daemon = "%s -c 'import os, time; os.setsid(); time.sleep(60)'" % sys.executable
    client = clients(local_master)
    offer = client.next_offers()[0]
    client.launch(offer, [
        task_info("leaves-daemon", offer, "%s & sleep 0.3; exit 0" % daemon),
        task_info("killed-with-daemon", offer, "%s & echo $! > daemon.pid; echo ready; sleep 60"
                  % daemon)],
        filters={"refuse_seconds": 0})
    client.wait_state("leaves-daemon", "TASK_FINISHED")
    client.wait_state("killed-with-daemon", "TASK_RUNNING")
    read_file(os.path.join(local_master.sandbox("killed-with-daemon"), "stdout"),
              contains="ready")
    pid = int(read_file(os.path.join(local_master.sandbox("killed-with-daemon"), "daemon.pid")))
    wait_until(lambda: session_of(pid) == pid, message="the daemon did not call setsid()")
    client.kill("killed-with-daemon")
    client.wait_state("killed-with-daemon", "TASK_KILLED")
    # As when Mesos destroys a container: nothing of either task is left once
    # its terminal update is out.
    assert leftover_processes(local_master) == []
