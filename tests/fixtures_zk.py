"""A real ZooKeeper server for tests, and fake Mesos masters to put in it.

``zookeeper`` (session-scoped) starts the Debian ``zookeeper`` package's
server on a free loopback port in a fresh data directory, waits until a
kazoo client connects, yields ``"127.0.0.1:PORT"``, and always kills the
JVM and removes the directory. Without the package the fixture fails (CI
installs it): ``apt-get install zookeeper``.

The command it runs (what ``zkServer.sh start-foreground`` boils down to,
without that script's /etc/zookeeper config and /var/log logging)::

    java -Xms16m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \\
         -Dzookeeper.admin.enableServer=false \\
         -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \\
         org.apache.zookeeper.server.quorum.QuorumPeerMain DIR/zoo.cfg

with ``zoo.cfg``: ``tickTime=2000``, ``dataDir=DIR/data``,
``clientPort=PORT``, ``clientPortAddress=127.0.0.1``,
``admin.enableServer=false``. The jar's manifest carries the rest of its
class path.

``MASTER_INFO_JSON`` is a ``json.info_<seq>`` znode's content exactly as a
Mesos 1.x master writes it (``JSON::protobuf(MasterInfo)``, keys sorted);
``master_info()`` builds one for any address, and ``register_master()``
creates the ephemeral sequential node the way a contending master does.
"""

import contextlib
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import pytest
from tfrun_helpers import free_port
from waiting import wait_until

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
SLF4J_BINDING = "/usr/share/java/slf4j-simple.jar"
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
INSTALL_HINT = "apt-get install zookeeper"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0

MASTER_INFO_JSON = (
    '{"address":{"hostname":"mesos-master-1.example.com","ip":"10.0.0.11","port":5050},'
    '"capabilities":[{"type":"AGENT_UPDATE"},{"type":"AGENT_DRAINING"},{"type":"QUOTA_V2"}],'
    '"hostname":"mesos-master-1.example.com",'
    '"id":"8f4b5d3e-2c71-4a9e-b0d6-5e1f2a3c4b7d",'
    '"ip":184549386,'
    '"pid":"master@10.0.0.11:5050",'
    '"port":5050,'
    '"version":"1.11.0"}'
)


def master_info(ip, port, hostname=None, version="1.11.0"):
    """A MasterInfo dict in the shape Mesos writes (see MASTER_INFO_JSON)."""
    hostname = hostname or ip
    return {
        "address": {"hostname": hostname, "ip": ip, "port": port},
        "capabilities": [{"type": "AGENT_UPDATE"}, {"type": "AGENT_DRAINING"}, {"type": "QUOTA_V2"}],
        "hostname": hostname,
        "id": str(uuid.uuid4()),
        "ip": int.from_bytes(ipaddress.IPv4Address(ip).packed, "little"),
        "pid": f"master@{ip}:{port}",
        "port": port,
        "version": version,
    }


def register_master(client, path, ip, port, hostname=None, data=None):
    """Register a fake master as Mesos does: ephemeral sequential json.info_."""
    if data is None:
        data = json.dumps(master_info(ip, port, hostname), sort_keys=True, separators=(",", ":"))
    if isinstance(data, str):
        data = data.encode("utf-8")
    return client.create(f"{path}/json.info_", data, ephemeral=True, sequence=True, makepath=True)


def unique_path(prefix="/mesos"):
    """A fresh znode path, so tests sharing one server never collide."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def zk_client(hosts, timeout=10.0):
    """A started kazoo client (a fake master's session), always stopped."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts, timeout=timeout)
    try:
        client.start(timeout=timeout)
        yield client
    finally:
        client.stop()
        client.close()


def zookeeper_command(config):
    """The java command line that runs a standalone server from ``config``."""
    java = shutil.which("java")
    if java is None or not os.path.exists(ZOOKEEPER_JAR):
        pytest.fail(
            f"ZooKeeper is not installed (need `java` and {ZOOKEEPER_JAR}): "
            f"run `{INSTALL_HINT}`",
            pytrace=False,
        )
    classpath = ZOOKEEPER_JAR
    if os.path.exists(SLF4J_BINDING):
        classpath += os.pathsep + SLF4J_BINDING
    return [
        java,
        "-Xms16m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Dzookeeper.admin.enableServer=false",
        "-cp",
        classpath,
        ZOOKEEPER_MAIN,
        config,
    ]


class ZooKeeperServer:
    """One standalone ZooKeeper JVM in its own temporary directory."""

    def __init__(self):
        self.workdir = None
        self.proc = None
        self.port = None
        self.log_path = None

    @property
    def hosts(self):
        return f"127.0.0.1:{self.port}"

    def start(self, attempts=3):
        self.workdir = tempfile.mkdtemp(prefix="tfmesos-zk-")
        for attempt in range(attempts):
            self.port = free_port()
            if self._launch(attempt):
                return self.hosts
            self._kill()
        pytest.fail(f"ZooKeeper did not start after {attempts} attempts; log:\n{self.log_tail()}")

    def _launch(self, attempt):
        data_dir = os.path.join(self.workdir, f"data-{attempt}")
        os.makedirs(data_dir)
        config = os.path.join(self.workdir, "zoo.cfg")
        with open(config, "w", encoding="utf-8") as f:
            f.write(
                "tickTime=2000\n"
                f"dataDir={data_dir}\n"
                f"clientPort={self.port}\n"
                "clientPortAddress=127.0.0.1\n"
                "admin.enableServer=false\n"
            )
        command = zookeeper_command(config)
        self.log_path = os.path.join(self.workdir, f"zookeeper-{attempt}.log")
        with open(self.log_path, "wb") as log_file:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # e.g. the port was taken meanwhile: try another
            if self._kazoo_connects(min(2.0, deadline - time.monotonic())):
                return True
            time.sleep(0.1)
        pytest.fail(
            f"ZooKeeper on port {self.port} did not answer within {START_TIMEOUT:g} s; "
            f"command: {' '.join(command)}; log:\n{self.log_tail()}"
        )

    def _kazoo_connects(self, timeout):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
        except OSError:
            return False
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        # A short session timeout: kazoo waits that long for an answer on a
        # socket the server accepted while still starting up.
        client = KazooClient(hosts=self.hosts, timeout=1.0)
        try:
            client.start(timeout=max(timeout, 0.5))
            client.get_children("/")
            return True
        except KazooTimeoutError:
            return False
        finally:
            client.stop()
            client.close()

    def log_tail(self, lines=40):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except (OSError, TypeError):
            return "(no log)"

    def _kill(self):
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        # SIGKILL: the data is thrown away, and a JVM's shutdown hooks
        # sometimes take 10 s or more after SIGTERM with clients connected.
        proc.kill()
        proc.wait(STOP_TIMEOUT)

    def stop(self):
        try:
            self._kill()
        finally:
            if self.workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
                self.workdir = None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info):
        self.stop()


def registered_in_zookeeper(master, zookeeper, password):
    """``master`` (a ``fixtures_master`` LocalMaster) registered as the
    leader (a persistent node: it outlives the client) under a new znode
    path that only ``alice:password`` may read; the zk:// master that finds
    it, with the password."""
    from kazoo.security import make_digest_acl

    path, port = unique_path(), int(master.url.rsplit(":", 1)[1])
    acl = [make_digest_acl("alice", password, all=True)]
    with zk_client(zookeeper) as client:
        client.add_auth("digest", "alice:%s" % password)
        client.create(path, b"", acl=acl)
        client.create(path + "/json.info_", json.dumps(master_info("127.0.0.1", port)).encode(),
                      acl=acl, sequence=True)
    return "zk://alice:%s@%s%s" % (password, zookeeper, path)


def detector_threads():
    """Threads that kazoo or a detector may have started."""
    return {t for t in threading.enumerate() if t is not threading.main_thread() and t.daemon}


@pytest.fixture
def quiet_threads():
    """Assert the test leaves no kazoo thread behind once all is closed."""
    before = detector_threads()
    yield
    wait_until(lambda: not (detector_threads() - before),
               message=lambda: f"threads left running: {detector_threads() - before}")


@pytest.fixture(scope="session")
def zookeeper():
    """``"127.0.0.1:PORT"`` of a running ZooKeeper server (one per session)."""
    with ZooKeeperServer() as server:
        yield server.hosts
