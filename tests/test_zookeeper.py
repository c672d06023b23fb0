"""ZKDetector against a real ZooKeeper server (the Debian zookeeper package)."""

import contextlib
import http.server
import logging
import os
import subprocess
import sys
import threading
import time
import types

import fixtures_zk
import pytest
from fixtures_zk import (
    MASTER_INFO_JSON,
    free_port,
    quiet_threads,
    register_master,
    unique_path,
    zk_client,
    zookeeper,
)
from tfrun_helpers import REPO, tfrun_argv
from waiting import wait_until

from tfmesos.exceptions import MesosConnectionError
from tfmesos.mesos.detection import make_detector
from tfmesos.mesos.master_address import parse_master

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(120)]
# What a loaded machine may add to a deadline the detector keeps.
SLACK = 5.0


def test_leader_is_lowest_sequence_and_follows_a_change(zookeeper, quiet_threads):
    path = unique_path()
    with zk_client(zookeeper) as first, zk_client(zookeeper) as second:
        register_master(first, path, "127.0.0.1", 5051)
        register_master(second, path, "127.0.0.2", 5052, hostname="master-2.local")
        with make_detector(parse_master(f"zk://{zookeeper}{path}"), timeout=30) as detector:
            assert detector.leader() == "http://127.0.0.1:5051"
            assert detector.candidates() == ("http://127.0.0.1:5051",)   # the leader alone
            assert not detector.leaders_changed.is_set()

            first.stop()  # the leading master's session ends: its ephemeral node goes
            assert detector.leaders_changed.wait(30), "leaders_changed was not set"
            detector.leaders_changed.clear()
            assert detector.leader(timeout=30) == "http://127.0.0.2:5052"   # its IP, as Mesos
            assert detector.candidates() == ("http://127.0.0.2:5052",)


def test_deleted_leader_node_and_https_scheme(zookeeper, quiet_threads):
    path = unique_path()
    with zk_client(zookeeper) as master:
        leader_node = register_master(master, path, "10.0.0.1", 5050)
        register_master(master, path, "10.0.0.2", 5050)
        with make_detector(f"zk://{zookeeper}{path}", timeout=30, scheme="https") as detector:
            assert detector.leader() == "https://10.0.0.1:5050"
            master.delete(leader_node)
            wait_until(detector.leaders_changed.is_set)
            assert detector.leader() == "https://10.0.0.2:5050"


def test_waits_for_a_master_that_registers_later(zookeeper, quiet_threads):
    path = unique_path()
    with zk_client(zookeeper) as master:
        master.ensure_path(path)
        with make_detector(f"zk://{zookeeper}{path}", timeout=30) as detector:
            assert detector.candidates() == ()
            # Most likely while leader() waits (if not, it finds it at once).
            timer = threading.Timer(0.5, register_master, (master, path, "127.0.0.9", 5059))
            timer.start()
            try:
                assert detector.leader() == "http://127.0.0.9:5059"   # or raises after 30 s
            finally:
                timer.join()
            assert not detector.leaders_changed.is_set()


def test_path_created_after_the_detector_started(zookeeper, quiet_threads):
    path = unique_path()
    with make_detector(f"zk://{zookeeper}{path}", timeout=10) as detector:
        with pytest.raises(MesosConnectionError, match="does not exist"):
            detector.leader(timeout=1)
        with zk_client(zookeeper) as master:
            register_master(master, path, "127.0.0.3", 5053)
            assert detector.leader(timeout=30) == "http://127.0.0.3:5053"


def test_other_children_are_ignored(zookeeper, quiet_threads):
    path = unique_path()
    with zk_client(zookeeper) as master:
        master.create(f"{path}/info_", b"\x0a\x24protobuf", sequence=True, makepath=True)
        master.create(f"{path}/log_replicas", b"")
        master.create(f"{path}/log_replicas/0000000001", b"")
        master.create(f"{path}/notes", b"{}")
        node = register_master(master, path, "127.0.0.4", 5054)
        assert node.endswith("json.info_0000000003")
        with make_detector(f"zk://{zookeeper}{path}", timeout=30) as detector:
            assert detector.leader() == "http://127.0.0.4:5054"
            assert detector.candidates() == ("http://127.0.0.4:5054",)


def test_real_master_info_sample(zookeeper, quiet_threads):
    path = unique_path()
    with zk_client(zookeeper) as master:
        register_master(master, path, None, None, data=MASTER_INFO_JSON)
        with make_detector(f"zk://{zookeeper}{path}", timeout=30) as detector:
            assert detector.leader() == "http://10.0.0.11:5050"


def test_leader_with_unusable_data(zookeeper, quiet_threads):
    path = unique_path()
    with zk_client(zookeeper) as master:
        register_master(master, path, None, None, data=b"master@10.0.0.1:5050")
        with make_detector(f"zk://{zookeeper}{path}", timeout=1) as detector:
            with pytest.raises(MesosConnectionError, match=r"json\.info_0+ holds no usable MasterInfo"):
                detector.leader()


@pytest.mark.waits
def test_empty_path_fails_within_the_timeout(zookeeper, quiet_threads):
    path = unique_path()
    with zk_client(zookeeper) as master:
        master.ensure_path(f"{path}/log_replicas")
        # The detector's own timeout is long: candidates() must not wait it.
        with make_detector(f"zk://{zookeeper}{path}", timeout=60) as detector:
            started = time.monotonic()
            assert detector.candidates() == ()
            assert detector.candidates(timeout=0.3) == ()
            assert time.monotonic() - started < 0.3 + SLACK
            started = time.monotonic()
            with pytest.raises(MesosConnectionError) as info:
                detector.leader(timeout=1.5)
            elapsed = time.monotonic() - started
    assert 1.4 <= elapsed < 1.5 + SLACK
    message = str(info.value)
    assert message.startswith(f"no Mesos master registered under zk://{zookeeper}{path} after 1.5 s")
    assert "log_replicas" in message
    assert "\n" not in message


@pytest.mark.waits
def test_unreachable_zookeeper_fails_within_the_timeout(caplog, quiet_threads):
    caplog.set_level(logging.INFO)
    hosts = f"127.0.0.1:{free_port()}"
    detector = make_detector(f"zk://{hosts}/mesos", timeout=1.5)
    started = time.monotonic()
    with pytest.raises(MesosConnectionError) as info:
        detector.leader()
    elapsed = time.monotonic() - started
    assert 1.4 <= elapsed < 1.5 + SLACK
    message = str(info.value)
    assert f"cannot connect to ZooKeeper at {hosts} after 1.5 s" in message
    assert "refused" in message
    started = time.monotonic()
    detector.close()
    assert time.monotonic() - started < SLACK
    noisy = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert not noisy, f"kazoo/detector logged at INFO or above: {[r.getMessage() for r in noisy]}"


@contextlib.contextmanager
def digest_protected(zookeeper):
    """(a client holding ``mesos:s3cret``, a new path only it may read, the
    path's ACL)."""
    from kazoo.security import make_digest_acl

    path = unique_path()
    acl = [make_digest_acl("mesos", "s3cret", all=True)]
    with zk_client(zookeeper) as master:
        master.add_auth("digest", "mesos:s3cret")
        master.create(path, b"", acl=acl)
        yield master, path, acl


def test_digest_credentials_from_the_url(zookeeper, quiet_threads):
    with digest_protected(zookeeper) as (master, path, acl):
        master.create(f"{path}/json.info_", b"{}", acl=acl, ephemeral=True, sequence=True)
        master.set(f"{path}/json.info_0000000000", b'{"address":{"ip":"127.0.0.5","port":5055}}')
        with make_detector(f"zk://mesos:s3cret@{zookeeper}{path}", timeout=30) as detector:
            assert detector.leader() == "http://127.0.0.5:5055"
        with make_detector(f"zk://{zookeeper}{path}", timeout=1) as detector:
            with pytest.raises(MesosConnectionError, match="not authorised to read"):
                detector.leader()


def test_a_wrong_password_is_said_to_be_wrong_and_never_shown(zookeeper, quiet_threads):
    # Before: "not authorised to read PATH (add credentials: zk://user:password@...)",
    # the hint for no credentials, though the URL held some.
    with digest_protected(zookeeper) as (_, path, _):
        with make_detector(f"zk://mesos:wr0ng@{zookeeper}{path}", timeout=1) as detector:
            with pytest.raises(MesosConnectionError) as info:
                detector.leader()
    message = str(info.value)
    assert message.endswith(
        f": ZooKeeper refused the credentials of user 'mesos' for {path}: check the password "
        f"in zk://mesos:***@{zookeeper}{path}"), message
    assert "wr0ng" not in message and "add credentials" not in message


def test_close_while_zookeeper_is_gone(quiet_threads):
    with fixtures_zk.ZooKeeperServer() as server:
        path = unique_path()
        with zk_client(server.hosts) as master:
            register_master(master, path, "127.0.0.6", 5056)
            detector = make_detector(f"zk://{server.hosts}{path}", timeout=30)
            assert detector.leader() == "http://127.0.0.6:5056"
            server.stop()
            wait_until(lambda: not detector._connected, message="the detector did not notice")
            assert detector.leader(timeout=0) == "http://127.0.0.6:5056"
            started = time.monotonic()
            detector.close()
            assert time.monotonic() - started < SLACK


def test_missing_zookeeper_fails_with_install_hint(monkeypatch):
    monkeypatch.setattr(fixtures_zk, "ZOOKEEPER_JAR", "/nonexistent/zookeeper.jar")
    with pytest.raises(pytest.fail.Exception, match="apt-get install zookeeper"):
        fixtures_zk.zookeeper_command("/tmp/zoo.cfg")


@pytest.mark.waits
def test_a_member_after_the_leader_never_gets_the_run_or_its_credentials(zookeeper, tmp_path):
    # The leader's entry names a master that does not answer (crashed, its
    # znode not expired yet); anyone who may add a child to the path added
    # one after it. tfrun sent that one its SUBSCRIBE, with the principal's
    # secret, and ran its tasks there. Mesos connects to the leader alone.
    heard = []

    class Capture(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            heard.append(self.headers.get("Authorization"))
            self.send_error(503)

        def log_message(self, *args):
            pass

    capture = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=capture.serve_forever, daemon=True).start()
    path = unique_path()
    try:
        with zk_client(zookeeper) as client:
            register_master(client, path, "127.0.0.1", free_port())            # the leader
            register_master(client, path, "127.0.0.1", capture.server_address[1])
            result = subprocess.run(
                tfrun_argv("-w", "1", "-s", "0", "--connect-timeout", "3", "--", "true"),
                cwd=REPO, capture_output=True, text=True, timeout=90,
                env=dict(os.environ, MESOS_MASTER="zk://%s%s" % (zookeeper, path),
                         MESOS_PRINCIPAL="alice", MESOS_SECRET="topsecret",
                         TFMESOS_RUNS_DIR=str(tmp_path)))
    finally:
        capture.shutdown()
        capture.server_close()
    assert result.returncode == 1, result.stderr
    assert "could not subscribe" in result.stderr
    assert heard == []


@pytest.mark.waits
def test_credentials_zookeeper_refuses_end_the_wait_at_once(zookeeper, tmp_path):
    # A wrong password was said at once ("check the password") and waited for
    # the whole --connect-timeout; Mesos takes ZNOAUTH for an error it does
    # not retry. With a 10-minute timeout, the 2-minute limit here is the check.
    zk_master = fixtures_zk.registered_in_zookeeper(
        types.SimpleNamespace(url="http://127.0.0.1:%d" % free_port()), zookeeper, "right")
    wrong = zk_master.replace(":right@", ":wrong@")
    env = dict(os.environ, MESOS_MASTER=wrong, TFMESOS_RUNS_DIR=str(tmp_path))
    result = subprocess.run(tfrun_argv("-w", "1", "-s", "0", "--connect-timeout", "600", "--",
                                       "true"), cwd=REPO, capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 1, result.stderr
    assert "ZooKeeper refused the credentials of user 'alice'" in result.stderr
    assert "wrong" not in result.stderr
    listed = subprocess.run([sys.executable, "-m", "tfmesos.cli.main", "runs", "--master", wrong],
                            cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert listed.returncode != 0 and "refused the credentials" in listed.stderr, listed.stderr
