"""The driver gives up at ``connect_timeout``, whatever keeps the master from
answering, a master whose host name does not resolve is an error at once,
and one that was never reached and refuses every connection after
``refused_timeout``; through the driver and through tfrun.

The upper bounds leave seconds of slack for a loaded machine; where a test
checks that some wait is capped by the time left, that wait is made long
(a call timeout or a back-off cap of 100 s), so that a wait which is not
capped still shows far beyond the slack."""

import contextlib
import os
import socket
import subprocess
import threading
import time

import fixtures_zk
import pytest
from fixtures_master import make_local_master
from fixtures_zk import quiet_threads, zookeeper
from local_addresses import non_loopback_address
from tfrun_helpers import free_port, run_tfrun, tfrun_argv
from waiting import wait_until

from tfmesos.exceptions import MesosConnectionError
from tfmesos.mesos import MesosSchedulerDriver, Scheduler, http_transport
from tfmesos.mesos.detection import make_detector

FRAMEWORK = {"user": "u", "name": "timeouts"}
SLACK = 4.0   # seconds a loaded machine may add to a deadline the driver keeps
# Far below which a failure "at once" shows (the alternative: waiting 60 s).
AT_ONCE = 20.0
# Waits the driver must cap by the time left before connect_timeout.
LONG_WAITS = dict(timeout=100.0, backoff_cap=100.0)
UNKNOWN = "no-such-host.invalid:5050"
# Not used: no task starts. An address of this machine that is not
# loopback, so that tfrun does not refuse it for a master on another host.
ADVERTISE = ["--advertise-address", non_loopback_address() or "127.0.0.1"]


@contextlib.contextmanager
def silent_server():
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""
    server = socket.create_server(("127.0.0.1", 0), backlog=64)
    held = []

    def accept():
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield "127.0.0.1:%d" % server.getsockname()[1]
    finally:
        server.shutdown(socket.SHUT_RDWR)   # wakes accept(), which close() alone does not
        server.close()
        acceptor.join()
        for conn in held:
            conn.close()


@pytest.fixture(params=["closed port", "silent server"])
def unreachable(request):
    if request.param == "closed port":
        yield "127.0.0.1:%d" % free_port()
    else:
        with silent_server() as master:
            yield master


def error_line(stderr):
    """tfrun's one-line error (other lines may follow it)."""
    lines = [line for line in stderr.splitlines() if line.startswith("tfrun: error: ")]
    assert len(lines) == 1, stderr
    return lines[0]


def give_up_time(master, **options):
    """Seconds until the driver gives up on ``master``, and its exception."""
    driver = MesosSchedulerDriver(Scheduler(), FRAMEWORK, master, **options)
    started = time.monotonic()
    driver.start()
    with pytest.raises(MesosConnectionError) as info:
        driver.join(timeout=60)
    return time.monotonic() - started, info.value


@pytest.mark.waits   # the connect timeout
def test_driver_gives_up_at_the_connect_timeout(unreachable):
    # The per-call timeout and the back-off (both up to 100 s here) do not add to it.
    took, error = give_up_time(unreachable, connect_timeout=8, **LONG_WAITS)
    assert 8 <= took < 8 + SLACK, took
    assert "could not subscribe to the Mesos master %s for 8 s" % unreachable in str(error)


@pytest.mark.waits
def test_tfrun_gives_up_at_the_connect_timeout(unreachable):
    started = time.monotonic()
    result = run_tfrun("-m", unreachable, "--connect-timeout", "8", "--", "true", timeout=60)
    took = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    # The option's 8 s, not the default 60 s (the driver's own precision is
    # checked above; tfrun's start-up adds to this one).
    assert 8 <= took < 30, took
    if "did not answer" not in result.stderr:   # refused: said at once, not only at the end
        assert "cannot reach the Mesos master %s yet" % unreachable in result.stderr
    assert error_line(result.stderr).startswith(
        "tfrun: error: the Mesos driver stopped: could not subscribe to the Mesos master %s "
        "for 8 s" % unreachable), result.stderr


# The driver's error names the run's field; tfrun, its flag.
NOTHING_LISTENS = "nothing listens at %s: check the port (or connect_timeout to wait longer)"
TFRUN_NOTHING_LISTENS = NOTHING_LISTENS.replace("connect_timeout", "--connect-timeout")


@pytest.mark.waits
def test_a_master_never_reached_that_refuses_is_given_up_after_the_refused_timeout():
    closed = "127.0.0.1:%d" % free_port()
    took, error = give_up_time(closed, connect_timeout=60, refused_timeout=2)
    assert 2 <= took < 5, took
    assert str(error) == NOTHING_LISTENS % closed


@pytest.mark.waits
def test_refusals_are_retried_while_one_master_of_the_list_accepts():
    with silent_server() as silent:
        took, error = give_up_time("127.0.0.1:%d,%s" % (free_port(), silent),
                                   connect_timeout=3, refused_timeout=1)
    assert 3 <= took < 5 and "could not subscribe" in str(error), (took, error)


@pytest.mark.waits
def test_tfrun_fails_within_seconds_when_nothing_listens_at_the_master():
    # The case: -m 127.0.0.1:1 took the whole default connect timeout (60 s).
    started = time.monotonic()
    result = run_tfrun("-m", "127.0.0.1:1", *ADVERTISE, "--", "true", timeout=60)
    took = time.monotonic() - started
    assert result.returncode == 1 and took < 10, (took, result.stderr)
    assert error_line(result.stderr).endswith(TFRUN_NOTHING_LISTENS % "127.0.0.1:1"), \
        result.stderr


# A zk:// master: its ZooKeeper servers refuse (nothing listens at their port).
ZK_NOTHING_LISTENS = ("nothing listens at %s, the ZooKeeper of %s: check the zk:// address "
                      "(or connect_timeout to wait longer)")


@pytest.mark.waits
@pytest.mark.parametrize("servers, said", [
    ("{closed}", "nothing listens at {closed}"),
    ("no-such-host.invalid:2181,{closed}",
     "nothing listens at {closed} and the host name no-such-host.invalid does not resolve"),
], ids=["refused", "refused-or-unknown"])
def test_a_zookeeper_never_reached_that_refuses_is_given_up_after_the_refused_timeout(
        servers, said):
    closed = "127.0.0.1:%d" % free_port()
    master = "zk://%s/mesos" % servers.format(closed=closed)
    took, error = give_up_time(master, connect_timeout=60, refused_timeout=2)
    assert 2 <= took < 2 + SLACK, took
    assert str(error) == "%s, the ZooKeeper of %s: check the zk:// address (or " \
        "connect_timeout to wait longer)" % (said.format(closed=closed), master)


@pytest.mark.waits
def test_zookeeper_refusals_are_retried_while_one_server_of_the_list_accepts():
    with silent_server() as silent:
        took, error = give_up_time("zk://127.0.0.1:%d,%s/mesos" % (free_port(), silent),
                                   connect_timeout=4, refused_timeout=1)
    assert 4 <= took < 4 + SLACK and "could not subscribe" in str(error), (took, error)
    assert "nothing listens" not in str(error)


@pytest.mark.waits
def test_tfrun_fails_within_seconds_when_nothing_listens_at_the_zookeeper():
    # zk://127.0.0.1:1/mesos took the whole default connect timeout (60 s),
    # where 127.0.0.1:1 took 5 s.
    master = "zk://127.0.0.1:1/mesos"
    started = time.monotonic()
    result = run_tfrun("-m", master, *ADVERTISE, "--", "true", timeout=90)
    took = time.monotonic() - started
    assert result.returncode == 1 and took < 30, (took, result.stderr)
    assert error_line(result.stderr).endswith(
        ZK_NOTHING_LISTENS.replace("connect_timeout", "--connect-timeout")
        % ("127.0.0.1:1", master)), result.stderr
    assert "cannot reach the Mesos master %s yet" % master in result.stderr


@pytest.mark.waits
def test_tfrun_shows_a_zookeeper_password_as_stars_while_it_connects():
    # Its status line said "connecting to zk://alice:PASSWORD@..." every second.
    result = subprocess.run(tfrun_argv(*ADVERTISE, "--", "true"), capture_output=True,
                            text=True, timeout=90, env=dict(
                                os.environ, MESOS_MASTER="zk://alice:s3cret@127.0.0.1:1/mesos",
                                TFMESOS_PROGRESS_INTERVAL="1"))
    assert result.returncode == 1, result.stderr
    assert "tfrun: connecting to zk://alice:***@127.0.0.1:1/mesos (1 s)" in result.stderr
    assert "cannot reach the Mesos master zk://alice:***@127.0.0.1:1/mesos yet" in result.stderr
    assert "s3cret" not in result.stdout + result.stderr


@pytest.mark.waits
@pytest.mark.zookeeper
def test_once_zookeeper_was_reached_its_refusals_wait_the_whole_connect_timeout(
        quiet_threads):
    # ZooKeeper answers, no master registered yet; then ZooKeeper stops (a
    # restart): the driver waits for it, as for a master once reached.
    with fixtures_zk.ZooKeeperServer() as server:
        master = "zk://%s/mesos-%d" % (server.hosts, free_port())
        detector = make_detector(master)
        driver = MesosSchedulerDriver(Scheduler(), FRAMEWORK, master, connect_timeout=8,
                                      refused_timeout=0.5, detector=detector)
        driver.start()
        try:
            wait_until(lambda: detector._ever_connected, message="ZooKeeper not reached")
            server.stop()
            with pytest.raises(TimeoutError):
                driver.join(timeout=4)   # far past refused_timeout, still waiting
            with pytest.raises(MesosConnectionError, match="could not subscribe") as info:
                driver.join(timeout=30)
            assert "nothing listens" not in str(info.value)
        finally:
            driver.abort()
            detector.close()


def test_a_zookeeper_detector_is_refusing_only_while_every_server_refuses(quiet_threads):
    closed = "127.0.0.1:%d" % free_port()
    with silent_server() as silent:
        for hosts, refusing in ((closed, True), ("%s,%s" % (closed, closed), True),
                                ("%s,%s" % (closed, silent), False)):
            master = "zk://%s/mesos" % hosts
            with make_detector(master) as detector:
                assert not detector.reached()
                assert detector.refusing() == (ZK_NOTHING_LISTENS.split(" (or")[0] % (
                    hosts.replace(",", ", "), master) if refusing else None), hosts
    with make_detector("zk://no-such-host.invalid:2181,other.invalid:2181/mesos") as detector:
        assert detector.refusing() == (
            "the host names no-such-host.invalid, other.invalid do not resolve, the ZooKeeper "
            "of zk://no-such-host.invalid:2181,other.invalid:2181/mesos: check the zk:// "
            "address")
    with make_detector(UNKNOWN) as static:
        assert static.reached() and static.refusing() is None


@pytest.mark.waits
def test_once_a_master_was_reached_refusals_wait_the_whole_connect_timeout(
        make_local_master):
    class Subscribed(Scheduler):
        def __init__(self):
            self.registered_event = threading.Event()

        def registered(self, driver, framework_id, master_info):
            self.registered_event.set()

    master = make_local_master()
    scheduler = Subscribed()
    driver = MesosSchedulerDriver(scheduler, FRAMEWORK, master.url, connect_timeout=6,
                                  refused_timeout=0.5)
    driver.start()
    try:
        assert scheduler.registered_event.wait(30)
        stopped = time.monotonic()
        master.stop()   # its port refuses from now on: a master restarting
        with pytest.raises(TimeoutError):
            driver.join(timeout=3)   # far past refused_timeout, still retrying
        with pytest.raises(MesosConnectionError, match="could not subscribe") as info:
            driver.join(timeout=30)
        assert 6 <= time.monotonic() - stopped < 9
        assert "nothing listens" not in str(info.value)
    finally:
        driver.abort()


def test_driver_fails_at_once_on_an_unknown_host():
    took, error = give_up_time(UNKNOWN, connect_timeout=60)
    assert took < AT_ONCE, took
    assert "'no-such-host.invalid' does not resolve" in str(error)
    assert "fix the master address" in str(error)


def test_driver_fails_at_once_when_no_master_of_a_list_resolves():
    took, error = give_up_time("no-such-host.invalid:5050,other.invalid:5050",
                               connect_timeout=60)
    assert took < AT_ONCE, took
    assert "(no-such-host.invalid, other.invalid)" in str(error)


@pytest.mark.parametrize("advertise", [ADVERTISE, []], ids=["driver", "advertise-check"])
def test_tfrun_fails_at_once_on_an_unknown_host(advertise):
    # Without --advertise-address, tfrun's look-up of the route to the master
    # fails first; either way the host is named at once, not after 60 s.
    started = time.monotonic()
    result = run_tfrun("-m", UNKNOWN, *advertise, "--connect-timeout", "60", "--", "true",
                       timeout=60)
    assert time.monotonic() - started < AT_ONCE
    assert result.returncode == 1
    last = error_line(result.stderr)
    assert "no-such-host.invalid" in last
    assert "Traceback" not in result.stderr
    if advertise:
        assert "does not resolve" in last, last


@pytest.mark.waits
def test_a_master_that_resolves_is_still_retried(monkeypatch):
    # One master of the list resolves (its port is closed): keep trying.
    took, error = give_up_time("%s,127.0.0.1:%d" % (UNKNOWN, free_port()), connect_timeout=2,
                               **LONG_WAITS)
    assert 2 <= took < 2 + SLACK and "could not subscribe" in str(error)


@pytest.mark.waits
def test_a_dns_server_that_fails_for_now_is_retried(monkeypatch):
    def again(*args, **kwargs):
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", again)
    took, error = give_up_time("mesos.example:5050", connect_timeout=2, **LONG_WAITS)
    assert 2 <= took < 2 + SLACK, took
    assert "Temporary failure in name resolution" in str(error)


def test_a_slow_name_lookup_is_bounded(monkeypatch):
    answered = threading.Event()

    def slow(*args, **kwargs):
        answered.wait(120)   # a look-up that would take minutes
        return []

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match="resolving mesos.example took more than 0.5 s"):
            http_transport.connect_within(("mesos.example", 5050), 0.5)
        assert time.monotonic() - started < 0.5 + SLACK
    finally:
        answered.set()


@pytest.mark.waits
def test_zookeeper_wait_is_bounded_by_the_connect_timeout():
    pytest.importorskip("kazoo")
    # The detector would wait the call timeout (100 s here) for a leader.
    took, error = give_up_time("zk://127.0.0.1:%d/mesos" % free_port(), connect_timeout=3,
                               **LONG_WAITS)
    assert 3 <= took < 3 + SLACK, took
    assert "cannot connect to ZooKeeper" in str(error)


@pytest.mark.waits
def test_a_silent_zookeeper_is_given_up_with_one_duration_in_the_line(quiet_threads):
    # Before: "could not subscribe ... for 3 s: no Mesos master found under
    # zk://...: cannot connect to ZooKeeper at ... after 1 s; ...": the last
    # one-second look's wait beside the driver's whole one.
    pytest.importorskip("kazoo")
    with silent_server() as hosts:
        took, error = give_up_time("zk://%s/mesos" % hosts, connect_timeout=3)
    message = str(error)
    assert message.startswith("could not subscribe to the Mesos master zk://%s/mesos for 3 s: "
                              "no Mesos master found under zk://%s/mesos: cannot connect to "
                              "ZooKeeper at %s" % (hosts, hosts, hosts)), message
    assert " after " not in message, message


@pytest.mark.waits
@pytest.mark.zookeeper
def test_a_missing_znode_is_given_up_with_one_duration_in_the_line(zookeeper, quiet_threads):
    master = "zk://%s/mesos-%d" % (zookeeper, free_port())
    took, error = give_up_time(master, connect_timeout=3)
    message = str(error)
    assert message.startswith("could not subscribe to the Mesos master %s for 3 s: no Mesos "
                              "master registered under %s: the znode " % (master, master)), message
    assert " after " not in message, message


def test_a_master_that_closed_the_stream_is_said_in_words_not_pythons():
    # tfrun said "lost the Mesos subscription (IncompleteRead: IncompleteRead(0
    # bytes read)); re-subscribing" when a master's process was killed.
    import http.client

    from tfmesos.mesos.http_transport import describe
    assert describe(http.client.IncompleteRead(b"")) == "the master closed the connection"
    assert describe(http.client.RemoteDisconnected("Remote end closed connection")) == \
        "the master closed the connection"
    assert describe(ConnectionRefusedError(111, "Connection refused")) == \
        "ConnectionRefusedError: [Errno 111] Connection refused"
