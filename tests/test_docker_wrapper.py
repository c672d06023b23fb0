"""``run_in_image``: the ``docker run`` wrapper, against a real engine."""

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import requests
from fixtures_docker import (
    docker_engine,
    managed_containers,
    no_leaked_containers,
    tfmesos_image,
    volume_dirs,
)

import docker
import mesos_local
from mesos_local import DockerEngineError
from mesos_local.containerizer.container_options import MASTER_LABEL
from mesos_local.containerizer.docker_engine import MANAGED_LABEL
from tfmesos.cli.docker_wrapper import passthrough_env, resolve_image, run_in_image
from tfmesos.exceptions import DockerError, SpecError


class Recorder(io.RawIOBase):
    """A binary stream that records what was written, and when."""

    def __init__(self, on_write=None):
        self.chunks = []
        self.on_write = on_write

    def writable(self):
        return True

    def write(self, data):
        self.chunks.append((time.monotonic(), bytes(data)))
        if self.on_write:
            self.on_write(self.text())
        return len(data)

    def text(self):
        return b"".join(chunk for _, chunk in self.chunks).decode()


# -- pure ----------------------------------------------------------------------

def test_resolve_image():
    assert resolve_image("mine:1", {"DOCKER_IMAGE": "env:2"}) == "mine:1"
    assert resolve_image(None, {"DOCKER_IMAGE": "env:2"}) == "env:2"
    assert resolve_image(None, {}) == "tfmesos/tfmesos"


def test_passthrough_env():
    environ = {"MESOS_MASTER": "zk://zk1:2181/mesos", "DOCKER_IMAGE": "img",
               "TFMESOS_SECRET_FILE": "/x", "PATH": "/usr/bin", "HOME": "/root",
               "MESOS_OTHER": "no", "ASKED": "yes"}
    assert passthrough_env(["A=1", "B=", "ASKED", "UNSET"], environ) == {
        "MESOS_MASTER": "zk://zk1:2181/mesos", "DOCKER_IMAGE": "img",
        "TFMESOS_SECRET_FILE": "/x", "A": "1", "B": "", "ASKED": "yes"}
    with pytest.raises(SpecError, match="invalid environment entry '=x'"):
        passthrough_env(["=x"], environ)


def test_missing_engine_is_a_docker_error():
    import docker

    client = docker.DockerClient(base_url="unix:///nonexistent/docker.sock", version="1.41",
                                 timeout=5)
    with pytest.raises(DockerError, match="^Docker is unavailable: .*apt-get install docker.io"):
        run_in_image(["true"], image="tfmesos/tfmesos", client=client)


def test_bad_command_and_volume_are_refused_before_docker():
    with pytest.raises(SpecError, match="non-empty list"):
        run_in_image("python train.py")
    with pytest.raises(SpecError, match="invalid volume 'data:/data'"):
        run_in_image(["true"], volumes=["data:/data"])
    with pytest.raises(SpecError, match="invalid environment entry '=x'"):
        run_in_image(["true"], env=["=x"])
    # Run from /, or a directory whose path holds ':': Docker's "invalid volume
    # specification: '/:/:rw'", a volume the user never gave.
    for workdir in ("/", "/tmp/a:b"):
        with pytest.raises(SpecError, match="mounts the working directory .* at its own path"):
            run_in_image(["true"], workdir=workdir)


# -- against the engine ------------------------------------------------------

@pytest.fixture
def engine(docker_engine, no_leaked_containers):
    return docker_engine


@pytest.mark.docker
@pytest.mark.timeout(1800)   # the first test may build the image (minutes when cold)
def test_runs_in_the_image_in_the_cwd_and_returns_the_exit_code(
        engine, tfmesos_image, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "script.py").write_text(
        "import os, sys\n"
        "print(open('/etc/tfmesos-image').read().strip())\n"
        "print(os.getcwd())\n"
        "print('%d:%d' % (os.getuid(), os.getgid()))\n"
        "print('oops', file=sys.stderr)\n"
        "open('made-inside', 'w').close()\n"
        "open('passwd-inside', 'w').write(open('/etc/passwd').read() + open('/etc/group').read())\n"
        "sys.exit(5)\n")
    code = run_in_image(["python3", "script.py"], image=tfmesos_image, client=engine)
    assert code == 5
    out, err = capfd.readouterr()
    assert out.splitlines() == [tfmesos_image, str(tmp_path),
                                "%d:%d" % (os.getuid(), os.getgid())]
    assert err == "oops\n"
    made = (tmp_path / "made-inside").stat()
    assert (made.st_uid, made.st_gid) == (os.getuid(), os.getgid())
    with open("/etc/passwd") as passwd, open("/etc/group") as group:
        assert (tmp_path / "passwd-inside").read_text() == passwd.read() + group.read()


@pytest.mark.docker
def test_runs_as_the_callers_uid(engine, tfmesos_image, monkeypatch):
    # A directory an unprivileged uid may enter (tmp_path's parents are 0700).
    workdir = tempfile.mkdtemp(prefix="tfmesos-wrapper-")
    try:
        os.chmod(workdir, 0o777)
        monkeypatch.setattr(os, "getuid", lambda: 65534)
        monkeypatch.setattr(os, "getgid", lambda: 65534)
        out = Recorder()
        code = run_in_image(["sh", "-c", "id -u; id -g; id -un; touch mine"],
                            image=tfmesos_image, workdir=workdir, client=engine,
                            stdout=out, stderr=out)
        monkeypatch.undo()
        assert code == 0, out.text()
        # /etc/passwd comes from the host: uid 65534 has its host name.
        assert out.text().splitlines() == ["65534", "65534", "nobody"]
        assert os.stat(os.path.join(workdir, "mine")).st_uid == 65534
    finally:
        monkeypatch.undo()
        shutil.rmtree(workdir)


@pytest.mark.docker
def test_output_streams_while_the_command_runs(engine, tfmesos_image, tmp_path):
    out, err = Recorder(), Recorder()
    start = time.monotonic()
    code = run_in_image(["sh", "-c", "echo first; sleep 2; echo second >&2; echo third"],
                        image=tfmesos_image, workdir=str(tmp_path), client=engine,
                        stdout=out, stderr=err)
    end = time.monotonic()
    assert code == 0
    assert out.text() == "first\nthird\n"
    assert err.text() == "second\n"
    first_seen = out.chunks[0][0]
    assert first_seen - start < end - start - 1.5, "the first line came only at the end"


@pytest.mark.docker
def test_environment_and_volumes_pass_through(engine, tfmesos_image, tmp_path, monkeypatch):
    monkeypatch.setenv("MESOS_MASTER", "zk://zk1:2181/mesos")
    monkeypatch.setenv("TFMESOS_SOMETHING", "passed")
    monkeypatch.setenv("ASKED_FOR", "asked")
    monkeypatch.setenv("NOT_ASKED", "leaked")
    monkeypatch.delenv("DOCKER_IMAGE", raising=False)
    data, work = volume_dirs(tmp_path, "data", {"f": "shared\n"}, "work")
    script = ("import os; e = os.environ; "
              "print(e['MESOS_MASTER'], e['TFMESOS_SOMETHING'], e['ASKED_FOR'], e['EXPLICIT'], "
              "e.get('NOT_ASKED'), e['DOCKER_IMAGE'], e['PATH'].split(':')[0]); "
              "print(open('/mnt/data/f').read().strip())")
    out, err = Recorder(), Recorder()
    code = run_in_image(["python", "-c", script + "; open('/mnt/data/g', 'w')"],
                        image=tfmesos_image, env=["ASKED_FOR", "EXPLICIT=1"],
                        volumes=["%s:/mnt/data:ro" % data], workdir=str(work),
                        client=engine, stdout=out, stderr=err)
    assert code == 1
    assert out.text().splitlines() == [
        "zk://zk1:2181/mesos passed asked 1 None %s /opt/tfmesos/bin" % tfmesos_image, "shared"]
    assert "Read-only file system" in err.text()


@pytest.mark.docker
def test_a_tfrun_inside_writes_its_records_where_tfmesos_runs_dir_says(engine, tfmesos_image,
                                                                       tmp_path, monkeypatch):
    # $TFMESOS_RUNS_DIR went into the container, its directory did not: the
    # records of a tfrun inside went with the container.
    runs, work = volume_dirs(tmp_path, "runs-parent", {}, "work")
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(runs / "runs"))
    assert run_in_image(["sh", "-c", 'echo kept > "$TFMESOS_RUNS_DIR/record"'],
                        image=tfmesos_image, workdir=str(work), client=engine) == 0
    assert (runs / "runs" / "record").read_text() == "kept\n"
    assert (runs / "runs").stat().st_uid == os.getuid()


@pytest.mark.docker
def test_missing_image_is_a_docker_error(engine, tmp_path):
    with pytest.raises(DockerError, match="^image tfmesos/no-such-image:0 not found on the "
                                          "Docker engine; build it with docker/build.sh"):
        run_in_image(["true"], image="tfmesos/no-such-image:0", workdir=str(tmp_path),
                     client=engine)


@pytest.mark.docker
def test_a_name_the_engine_cannot_parse_is_not_an_engine_that_is_unavailable(engine):
    # The engine's 400 ("invalid reference format") read "Docker is unavailable".
    with pytest.raises(DockerEngineError, match="^invalid image name 'Bad/Image': .*invalid "
                                                "reference format"):
        mesos_local.docker_engine.ensure_image(engine, "Bad/Image")


@pytest.mark.docker
def test_image_comes_from_docker_image_variable(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_IMAGE", "tfmesos/from-env:0")
    with pytest.raises(DockerError, match="^image tfmesos/from-env:0 not found"):
        run_in_image(["true"], workdir=str(tmp_path), client=engine)


def _interrupted_run(engine, image, tmp_path, interrupt):
    def on_write(text):
        if "ready" in text:
            interrupt()

    out = Recorder(on_write)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_in_image(["sh", "-c", "echo ready; exec sleep 120"], image=image,
                     workdir=str(tmp_path), client=engine, stdout=out, stderr=out)
    assert time.monotonic() - start < 60
    assert not [c for c in managed_containers(engine)
                if c.labels.get("tfmesos.role") == "docker-wrapper"]


@pytest.mark.docker
def test_ctrl_c_stops_and_removes_the_container(engine, tfmesos_image, tmp_path):
    def interrupt():
        raise KeyboardInterrupt

    _interrupted_run(engine, tfmesos_image, tmp_path, interrupt)


@pytest.mark.docker
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_a_closed_terminal_stops_and_removes_the_container(engine, tfmesos_image,
                                                                      tmp_path, signum):
    # SIGHUP (the terminal closed) ended the wrapper and left its container running.
    sent = []

    def interrupt():
        if not sent:
            sent.append(True)
            threading.Timer(0.2, os.kill, (os.getpid(), signum)).start()

    before = signal.getsignal(signum)
    _interrupted_run(engine, tfmesos_image, tmp_path, interrupt)
    assert signal.getsignal(signum) is before


@pytest.mark.docker
def test_what_the_command_says_as_it_stops_reaches_the_terminal(engine, tfmesos_image, tmp_path):
    # A tfrun inside says how its run ended once stopped: the copy ended at
    # the interrupt, and those lines were lost.
    sent = []

    def on_write(text):
        if "ready" in text and not sent:
            sent.append(True)
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
    out = Recorder(on_write)
    with pytest.raises(KeyboardInterrupt):
        run_in_image(["sh", "-c", "trap 'echo stopping cleanly; exit 130' TERM; echo ready; "
                      "while :; do sleep 0.1; done"], image=tfmesos_image,
                     workdir=str(tmp_path), client=engine, stdout=out, stderr=out)
    assert out.text().splitlines() == ["ready", "stopping cleanly"]
    assert not [c for c in managed_containers(engine)
                if c.labels.get("tfmesos.role") == "docker-wrapper"]


@pytest.mark.docker
def test_a_container_of_a_wrapper_that_is_gone_is_removed_by_the_next(engine, tfmesos_image,
                                                                       tmp_path):
    # A wrapper killed with SIGKILL left its container running for ever.
    gone = subprocess.run([sys.executable, "-c", "from mesos_local.cleanup import this_master; "
                           "print(this_master())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    left = engine.containers.run(tfmesos_image, ["sleep", "300"], detach=True, labels={
        MANAGED_LABEL: "1", "tfmesos.role": "docker-wrapper", MASTER_LABEL: gone})
    try:
        assert run_in_image(["true"], image=tfmesos_image, workdir=str(tmp_path),
                            client=engine) == 0
        with pytest.raises(docker.errors.NotFound):
            engine.containers.get(left.id)
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            left.remove(force=True)


@pytest.mark.docker
def test_an_engine_lost_while_the_command_runs_is_one_line(engine, tfmesos_image, tmp_path,
                                                           monkeypatch):
    # A traceback of requests' ConnectionError, where the README promises one line.
    def lost(*args, **kwargs):
        raise requests.exceptions.ConnectionError("Connection aborted.")
    monkeypatch.setattr(engine.api, "wait", lost)
    with pytest.raises(DockerError, match="^lost the Docker engine while true ran in image "):
        run_in_image(["true"], image=tfmesos_image, workdir=str(tmp_path), client=engine)
    assert not [c for c in managed_containers(engine)
                if c.labels.get("tfmesos.role") == "docker-wrapper"]
