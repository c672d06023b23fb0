"""Session fixtures for tests that need the Docker engine and the tfmesos
image. Import them into a test module::

    from fixtures_docker import docker_engine, tfmesos_image, no_leaked_containers  # noqa: F401

* ``docker_engine``: a ``docker.DockerClient`` for a running engine. When
  none answers, starts ``dockerd`` (needs root) and stops it at the end of the
  session; fails, naming the fix, when Docker is not installed.
* ``tfmesos_image``: builds the image with ``docker/build.sh`` once per
  session (seconds when cached) and yields its name.
* ``no_leaked_containers``: fails a test that leaves a container labelled
  ``tfmesos.managed=1`` behind (and removes it).
* ``volume_dirs``: host directories (one with files) to mount as volumes.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
IMAGE = os.environ.get("TFMESOS_TEST_IMAGE", "tfmesos/tfmesos")
ENGINE_START_TIMEOUT = 60
BUILD_TIMEOUT = 1500
# The embedded master's containers and the docker wrapper's.
MANAGED = ("mesos_local.managed=1", "tfmesos.managed=1")


def _client(timeout=10):
    import docker
    return docker.from_env(timeout=timeout)


def _engine_error():
    """None when the engine answers, else why not."""
    import requests

    import docker

    try:
        client = _client(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
        return None
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        return " ".join(str(exc).split())


def _tail(path, lines=20):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@pytest.fixture(scope="session")
def docker_engine():
    try:
        import docker
    except ImportError:
        pytest.fail("the docker Python package is missing: pip install 'docker>=6'", pytrace=False)
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        pytest.fail("Docker is not installed: apt-get install -y docker.io (as root)", pytrace=False)

    started = None
    log_path = None
    error = _engine_error()
    if error is not None:
        if os.geteuid() != 0:
            pytest.fail("the Docker engine is not running (%s) and only root can start it: "
                        "sudo dockerd &" % error, pytrace=False)
        log_fd, log_path = tempfile.mkstemp(prefix="tfmesos-dockerd-", suffix=".log")
        # The engine is not one of the tests' processes: keep TFMESOS_* (the
        # session marker among them) out of its environment.
        env = {k: v for k, v in os.environ.items() if not k.startswith("TFMESOS_")}
        started = subprocess.Popen(["dockerd"], stdin=subprocess.DEVNULL, stdout=log_fd,
                                   stderr=subprocess.STDOUT, env=env, start_new_session=True)
        os.close(log_fd)
        deadline = time.monotonic() + ENGINE_START_TIMEOUT
        while _engine_error() is not None:
            if started.poll() is not None:
                pytest.fail("dockerd exited with status %s:\n%s"
                            % (started.returncode, _tail(log_path)), pytrace=False)
            if time.monotonic() > deadline:
                _stop(started)
                pytest.fail("dockerd did not answer within %d s:\n%s"
                            % (ENGINE_START_TIMEOUT, _tail(log_path)), pytrace=False)
            time.sleep(0.5)

    client = _client(timeout=120)
    try:
        yield client
    finally:
        client.close()
        if started is not None:
            _stop(started)
            os.unlink(log_path)


def _stop(process):
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@pytest.fixture(scope="session")
def tfmesos_image(docker_engine):
    """Build (or refresh from cache) the tfmesos image; yields its name."""
    repo, sep, tag = IMAGE.rpartition(":")
    if not sep or "/" in tag:
        repo, tag = IMAGE, ""
    env = dict(os.environ, TFMESOS_IMAGE_REPO=repo)
    argv = [str(REPO_ROOT / "docker" / "build.sh")] + ([tag] if tag else [])
    with tempfile.TemporaryFile() as output:
        try:
            result = subprocess.run(argv, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
                                    stdout=output, stderr=subprocess.STDOUT,
                                    timeout=BUILD_TIMEOUT)
            code = result.returncode
        except subprocess.TimeoutExpired:
            code = "timeout (%d s)" % BUILD_TIMEOUT
        if code != 0:
            output.seek(0)
            tail = output.read().decode("utf-8", "replace").splitlines()[-30:]
            pytest.fail("docker/build.sh failed (%s):\n%s" % (code, "\n".join(tail)),
                        pytrace=False)
    yield IMAGE


def volume_dirs(root, readable, files, writable):
    """Two new directories under ``root`` to mount into containers:
    ``readable`` holding ``files`` ({name: text}) and an empty ``writable``;
    returns both paths."""
    data, out = root / readable, root / writable
    data.mkdir()
    for name, text in files.items():
        (data / name).write_text(text)
    out.mkdir()
    return data, out


def managed_containers(client):
    """Containers (running or not) labelled ``mesos_local.managed=1`` (the
    embedded master's) or ``tfmesos.managed=1`` (the docker wrapper's)."""
    found = {}
    for label in MANAGED:
        for container in client.containers.list(all=True, filters={"label": label},
                                                ignore_removed=True):
            found[container.id] = container
    return list(found.values())


@pytest.fixture
def no_leaked_containers(docker_engine):
    """Fail a test that leaves a managed container behind."""
    before = {c.id for c in managed_containers(docker_engine)}
    yield
    leaked = [c for c in managed_containers(docker_engine) if c.id not in before]
    for container in leaked:
        try:
            container.remove(force=True)
        except Exception:
            pass
    if leaked:
        pytest.fail("containers left behind: %s" % ", ".join(
            "%s (%s)" % (c.name, c.labels.get("mesos_local.task-id", "-")) for c in leaked),
            pytrace=False)


class EngineProxy:
    """A unix socket that passes every connection on to the Docker engine's,
    until ``cut()``: then the engine stops answering, as far as a client of
    this socket can tell (an engine stopped or restarted), while the real
    engine (and the tests' client of it) goes on."""

    def __init__(self, path):
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        if not host.startswith("unix://"):
            pytest.skip("the engine is not on a unix socket here (DOCKER_HOST=%s)" % host)
        self.target, self.path = host[len("unix://"):], str(path)
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.open, self.lock = [], threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return   # cut
            engine = socket.socket(socket.AF_UNIX)
            engine.connect(self.target)
            with self.lock:
                self.open += [client, engine]
            for source, sink, asks in ((client, engine, True), (engine, client, False)):
                threading.Thread(target=self._pump, args=(source, sink, asks),
                                 daemon=True).start()

    def before_request(self, data):
        """Called with what a client sends, before it goes on (a subclass
        holds some)."""

    def _pump(self, source, sink, asks):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if asks:
                    self.before_request(data)
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def cut(self):
        self.listener.close()
        os.unlink(self.path)
        with self.lock:
            for sock in self.open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
