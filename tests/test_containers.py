"""Container tasks end to end on a real Docker engine: ``tfrun -I IMAGE`` on
the embedded master with the MESOS and DOCKER containerizers, volumes,
environment, failures, Ctrl-C, a missing engine, and the ``tfmesos docker``
wrapper running tfrun inside the image against ``tfmesos local-master``.

Tasks here run shell commands and examples/container_check.py (standard
library only); one test imports TensorFlow in its containers.
"""

import contextlib
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from conftest import MARKER
from fixtures_docker import (
    EngineProxy,
    docker_engine,
    managed_containers,
    no_leaked_containers,
    tfmesos_image,
    volume_dirs,
)
from local_users import nobody
from tfrun_helpers import REPO, SMALL, marked_tasks, run_tfrun, start_tfrun, wait_for_line

# The image build (first use, in the fixture) is not part of a test's time.
pytestmark = [pytest.mark.docker, pytest.mark.timeout(300, func_only=True)]

EXAMPLES = os.path.join(REPO, "examples")
CHECK_ARGS = ("--ps_hosts {ps_hosts} --worker_hosts {worker_hosts} "
              "--job_name {job_name} --task_index {task_index}")
CHECK = "python3 /examples/container_check.py " + CHECK_ARGS
EXAMPLES_VOLUME = "%s:/examples:ro" % EXAMPLES


@pytest.fixture
def image(tfmesos_image, no_leaked_containers):
    """The tfmesos image; the test fails if it leaves a container behind."""
    return tfmesos_image


def session_containers(client):
    """Managed containers started by this test session (their
    environment carries its marker), not those of anyone else on the engine."""
    token = "%s=%s" % (MARKER, os.environ[MARKER])
    return [c for c in managed_containers(client)
            if token in (c.attrs.get("Config", {}).get("Env") or ())]


def assert_no_containers(client, within=0.0):
    """No container of this session is left (now, or within ``within`` s)."""
    deadline = time.monotonic() + within
    while True:
        left = session_containers(client)
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    assert not left, "containers left: %s" % ", ".join(
        "%s (%s)" % (c.name, c.labels.get("mesos_local.task-id", c.labels.get("tfmesos.role")))
        for c in left)


def lines(text, prefix):
    return [line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)]


# -- replica runs in containers ---------------------------------------------------

@pytest.mark.parametrize("containerizer", ["DOCKER", "MESOS"])
def test_replica_run_in_containers(image, docker_engine, containerizer):
    result = run_tfrun("-C", containerizer, "-I", image, "-V", EXAMPLES_VOLUME,
                       "-w", "2", "-s", "1", *SMALL, "--", CHECK, timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for index in (0, 1):
        prefix = "[worker:%d] " % index
        assert "worker:%d image: %s" % (index, image) in lines(out, prefix)
        assert "worker:%d python: /opt/tfmesos/bin/python3" % index in lines(out, prefix)
        assert "placeholders and TF_CONFIG agree" in lines(out, prefix)
    assert "[ps:0]" not in out
    assert "DISAGREE" not in out and "MISMATCH" not in result.stderr
    assert "cluster ready" in result.stderr
    assert_no_containers(docker_engine)


@pytest.mark.parametrize("containerizer", ["DOCKER", "MESOS"])
def test_the_command_runs_in_the_sandbox_where_mesos_maps_it(image, containerizer):
    # Mesos maps a container's sandbox at /mnt/mesos/sandbox; its Docker
    # containerizer starts the task in the image's WORKDIR (/ here), not there
    # (src/docker/docker.cpp, Docker::run: no -w). The command still runs in the
    # sandbox and writes there, as it does in a plain task (the task entry enters it).
    cmd = 'echo "pwd=$(pwd)"; echo "sandbox=$MESOS_SANDBOX"; echo kept > relative; cat relative'
    result = run_tfrun("-C", containerizer, "-I", image, "-w", "1", "-s", "0", *SMALL, "--",
                       cmd, timeout=120)
    assert result.returncode == 0, result.stderr
    assert lines(result.stdout, "[worker:0] ") == [
        "pwd=/mnt/mesos/sandbox", "sandbox=/mnt/mesos/sandbox", "kept"]


@pytest.mark.parametrize("containerizer", ["DOCKER", "MESOS"])
def test_a_container_task_of_another_user_has_its_sandbox(image, containerizer):
    # Its sandbox was root's 0755, its URIs fetched as root: the command,
    # run as nobody, could not write there ("Permission denied"). A Mesos
    # agent gives it to the task's user (Slave::launchExecutor's chown).
    nobody("a task of another user needs a root master")
    cmd = 'id -un; echo kept > relative; cat relative; stat -c %U "$MESOS_SANDBOX"'
    result = run_tfrun("-u", "nobody", "-C", containerizer, "-I", image, "-w", "1", "-s", "0",
                       *SMALL, "--", cmd, timeout=120)
    assert result.returncode == 0, result.stderr
    assert lines(result.stdout, "[worker:0] ") == ["nobody", "kept", "nobody"]


def test_a_docker_task_is_limited_to_its_resources_without_isolation(image):
    # Mesos' Docker containerizer sets --cpu-shares and --memory whatever the
    # agent's --isolation (Docker::RunOptions::create); without isolation here
    # the container had no limit at all.
    if not os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        pytest.skip("cgroup v1's memory hierarchy is not mounted here")
    result = run_tfrun("--no-isolation", "-C", "DOCKER", "-I", image, "-w", "1", "-s", "0",
                       "-Mw", "64", "-Cw", "0.5", "--", "cat /sys/fs/cgroup/memory/"
                       "memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.shares", timeout=120)
    assert result.returncode == 0, result.stderr
    assert lines(result.stdout, "[worker:0] ") == [str(64 << 20), "512"]


def test_volumes_are_mounted_with_their_modes(image, tmp_path):
    shared, out_dir = volume_dirs(tmp_path, "shared", {"host.txt": "written on the host\n"},
                                  "out")
    cmd = ("cat /data/host.txt; "
           "if touch /data/new 2>/dev/null; then echo ro-write-allowed; "
           "else echo ro-write-refused; fi; "
           "echo from-{job_name}-{task_index} > /out/{job_name}-{task_index}")
    result = run_tfrun("-C", "DOCKER", "-I", image, "-V", "%s:/data:ro" % shared,
                       "-V", "%s:/out:rw" % out_dir, "-w", "2", "-s", "0", *SMALL, "--", cmd)
    assert result.returncode == 0, result.stderr
    for index in (0, 1):
        assert lines(result.stdout, "[worker:%d] " % index) == [
            "written on the host", "ro-write-refused"]
        assert (out_dir / ("worker-%d" % index)).read_text() == "from-worker-%d\n" % index
    assert not (shared / "new").exists()


@pytest.mark.parametrize("containerizer", ["DOCKER", "MESOS"])
def test_a_volume_with_a_comma_and_one_at_etc_passwd_mount_as_docker_takes_them(image, tmp_path,
                                                                                containerizer):
    # A ',' in a path failed three launches ("must ... contain no ':' or ','"),
    # though the engine takes it; a volume at /etc/passwd met tfmesos' own
    # there: "Duplicate mount point", three launches.
    shared, _ = volume_dirs(tmp_path, "a,b", {"f.txt": "through a comma\n"}, "unused")
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/sh\nalice:x:%d:%d::/:/bin/sh\n"
                      % (os.getuid(), os.getgid()))
    passwd.chmod(0o644)
    result = run_tfrun("-C", containerizer, "-I", image, "-V", "%s:/x:ro" % shared,
                       "-V", "%s:/etc/passwd:ro" % passwd, "-w", "1", "-s", "0", *SMALL, "--",
                       "cat /x/f.txt; grep -c alice /etc/passwd")
    assert result.returncode == 0, result.stderr
    assert lines(result.stdout, "[worker:0] ") == ["through a comma", "1"]


def test_env_reaches_the_task_and_the_images_path_rules(image):
    cmd = ('echo "FOO=$FOO"; echo "PATH=$PATH"; echo "PYTHONPATH=${{PYTHONPATH-unset}}"; '
           'command -v python3; '
           'python3 -c "import sys, tfmesos; print(sys.version_info >= (3, 11), '
           'tfmesos.__file__.startswith(\'/opt/tfmesos/\'))"')
    host_path = "/host-only/bin:" + os.environ["PATH"]
    result = run_tfrun("-C", "MESOS", "-I", image, "-E", "FOO=bar", "-w", "1", "-s", "0",
                       *SMALL, "--", cmd,
                       env={"PATH": host_path, "PYTHONPATH": "/host-only/lib"})
    assert result.returncode == 0, result.stderr
    got = lines(result.stdout, "[worker:0] ")
    assert got[0] == "FOO=bar"
    assert got[1].startswith("PATH=/opt/tfmesos/bin:") and "/host-only" not in got[1]
    assert got[2:] == ["PYTHONPATH=unset", "/opt/tfmesos/bin/python3", "True True"]


def test_failing_worker_gives_its_exit_code_and_leaves_no_container(
        image, docker_engine):
    cmd = "if [ {task_index} = 1 ]; then echo failing >&2; exit 3; fi; sleep 600"
    started = time.monotonic()
    result = run_tfrun("-C", "DOCKER", "-I", image, "-w", "2", "-s", "1", *SMALL, "--", cmd,
                       timeout=90)
    assert result.returncode == 3, result.stderr
    assert "task worker:1 exited with code 3" in result.stderr
    assert "[worker:1] failing" in result.stderr
    assert time.monotonic() - started < 60
    assert_no_containers(docker_engine)


def test_ctrl_c_stops_every_container_and_exits_130(image, docker_engine):
    with start_tfrun("-C", "MESOS", "-I", image, "-w", "2", "-s", "1", *SMALL, "--",
                     "sleep 600") as proc:
        wait_for_line(proc.stderr, "cluster ready", timeout=60)
        running = [c for c in session_containers(docker_engine) if c.status == "running"]
        assert len(running) == 3, [c.name for c in running]
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        assert proc.returncode == 130
        assert time.monotonic() - started < 20
        assert "interrupted" in proc.stderr.read()
    assert_no_containers(docker_engine)


def test_without_a_docker_engine_image_tasks_fail_and_never_run_on_the_host(image, tmp_path):
    ran = tmp_path / "ran-on-the-host"
    started = time.monotonic()
    result = run_tfrun("-C", "DOCKER", "-I", image, "-w", "1", "-s", "0", *SMALL, "--",
                       "touch %s" % ran, timeout=60,
                       env={"DOCKER_HOST": "unix://%s" % (tmp_path / "no-docker.sock")})
    assert result.returncode == 1, result.stderr
    # Not transient: no relaunch, the run aborts at the first attempt.
    assert "worker:0 cannot be launched: TASK_FAILED: Docker is unavailable: " in result.stderr
    assert result.stderr.count("Docker is unavailable") == 1
    assert "Traceback" not in result.stderr
    assert not ran.exists()
    assert time.monotonic() - started < 45


@pytest.mark.tensorflow
def test_tensorflow_runs_across_ps_and_worker_containers(image):
    result = run_tfrun("-C", "DOCKER", "-I", image, "-V", EXAMPLES_VOLUME, "-w", "1", "-s", "1",
                       "-Cw", "0.5", "-Mw", "1024", "-Cs", "0.5", "-Ms", "1024", "--",
                       CHECK + " --tensorflow", timeout=180)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^\[worker:0\] 10 \+ 32 = 42 \(TensorFlow \d", result.stdout, re.M), \
        result.stdout


# -- the image ----------------------------------------------------------------------

def test_image_names_itself_and_builds_on_the_local_base(image, docker_engine):
    built = docker_engine.images.get(image)
    env = dict(item.split("=", 1) for item in built.attrs["Config"]["Env"])
    assert env["DOCKER_IMAGE"] == image
    assert env["PATH"].startswith("/opt/tfmesos/bin:")
    base = docker_engine.images.get(os.environ.get("BASE_IMAGE", "tfmesos/base:bookworm"))
    base_layers = base.attrs["RootFS"]["Layers"]
    assert built.attrs["RootFS"]["Layers"][:len(base_layers)] == base_layers
    marker = docker_engine.containers.run(image, ["cat", "/etc/tfmesos-image"], remove=True,
                                          labels={"mesos_local.managed": "1"})
    assert marker.decode().strip() == image


# -- the docker run wrapper around tfrun ----------------------------------------------

@contextlib.contextmanager
def reaped(proc, stop=signal.SIGTERM):
    """Yield ``proc``; on the way out stop it (``stop``, then SIGKILL) if it runs."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(stop)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def host_master(image):
    """``tfmesos local-master`` on the host, on a free port; yields the port.
    Its SIGTERM stop kills (and removes) every task container."""
    proc = subprocess.Popen([sys.executable, "-m", "tfmesos.cli.main", "local-master",
                             "--port", "0", "--log-level", "warning", *marked_tasks()],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    with reaped(proc):
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        assert selector.select(timeout=30), "the local master printed nothing in 30 s"
        line = proc.stdout.readline()
        match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        assert match, "unexpected first line %r; stderr: %s" % (line, proc.stderr.read())
        yield int(match.group(1))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.stderr.read()


def run_wrapper(args, cwd, env=None, timeout=120):
    full_env = {k: v for k, v in os.environ.items() if k != "MESOS_MASTER"}
    full_env.update(env or {})
    proc = subprocess.Popen([sys.executable, "-m", "tfmesos.cli.main", "docker", *args],
                            cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=full_env)
    with reaped(proc):
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail("tfmesos docker %s did not finish within %d s" % (args, timeout))
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_wrapper_runs_tfrun_in_the_image_against_the_host_master(
        image, host_master, docker_engine, tmp_path):
    inner = ("echo \"tfrun runs in $(cat /etc/tfmesos-image) in $(pwd)\"; "
             "exec tfrun -m 127.0.0.1:%d -I %s -w 1 -s 0 %s -- "
             "'cat /etc/tfmesos-image; echo task {job_name}:{task_index} done'"
             % (host_master, image, " ".join(SMALL)))
    result = run_wrapper(["-i", image, "--", "sh", "-c", inner], cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "tfrun runs in %s in %s" % (image, tmp_path),
        "[worker:0] %s" % image, "[worker:0] task worker:0 done"]
    assert "tfrun: cluster ready" in result.stderr
    assert_no_containers(docker_engine, within=10)


def test_wrapper_exits_with_the_jobs_code(
        image, host_master, docker_engine, tmp_path):
    # MESOS_MASTER passes through, and without -I the inner tfrun's tasks run
    # in the image the wrapper runs (its $DOCKER_IMAGE; an empty one here
    # does not override that).
    result = run_wrapper(["-i", image, "--", "tfrun", "-w", "2", "-s", "0", "-E", "CODE=7",
                          *SMALL, "--", "cat /etc/tfmesos-image; exit $(({task_index} * CODE))"],
                         cwd=str(tmp_path),
                         env={"MESOS_MASTER": "127.0.0.1:%d" % host_master, "DOCKER_IMAGE": ""})
    assert result.returncode == 7, result.stderr
    assert "task worker:1 exited with code 7" in result.stderr
    # The failing task's own output comes before its exit (the other's may not).
    assert "[worker:1] %s" % image in result.stdout.splitlines()
    assert_no_containers(docker_engine, within=10)


def test_wrapper_without_a_master_outside_says_where_the_master_belongs(image, tmp_path):
    # tfrun's embedded master inside the container cannot reach the engine:
    # a one-line error naming the fix, and no task runs.
    result = run_wrapper(["-i", image, "--", "tfrun", "-w", "1", "-s", "0", *SMALL, "--",
                          "true"], cwd=str(tmp_path))
    assert result.returncode == 1, result.stderr
    [error] = [line for line in result.stderr.splitlines() if "cannot be launched" in line]
    assert error.startswith("tfrun: worker:0 cannot be launched: TASK_FAILED: Docker is "
                            "unavailable: ")
    assert "runs inside the tfmesos image: run the master outside it" in error
    assert result.stderr.strip().splitlines()[-1].startswith("tfrun: logs and run record: ")
    assert "Traceback" not in result.stderr


def test_an_engine_that_stops_answering_fails_the_task_and_its_container_goes_next_run(
        image, docker_engine, tmp_path):
    # The embedded master's engine, as it sees it, goes away under a running
    # container (dockerd stopped, restarted by an upgrade); the real one keeps it.
    proxy = EngineProxy(tmp_path / "engine.sock")
    env = dict(os.environ, MESOS_MASTER="", DOCKER_HOST="unix://%s" % proxy.path)
    with start_tfrun("-I", image, "-w", "1", "-s", "0", *SMALL, "--", "sleep 600",
                     env=env) as proc:
        wait_for_line(proc.stderr, "cluster ready", timeout=120)
        [container] = session_containers(docker_engine)
        proxy.cut()
        proc.wait(60)
        said = proc.stderr.read()
    assert proc.returncode == 1, said
    assert "TASK_FAILED Docker container run error: " in said, said
    assert "hint: the Docker engine on the task's agent stopped answering" in said
    assert "Traceback" not in said
    assert [c.id for c in session_containers(docker_engine)] == [container.id]   # its orphan
    # The next master on the engine removes what the gone one could not.
    result = run_tfrun("-I", image, "-w", "1", "-s", "0", *SMALL, "--", "true", timeout=120)
    assert result.returncode == 0, result.stderr
    assert_no_containers(docker_engine)


def test_only_the_containers_of_masters_that_are_gone_are_removed(image, docker_engine):
    from mesos_local.cleanup import this_master
    from mesos_local.containerizer.container_options import MASTER_LABEL
    from mesos_local.containerizer.docker_engine import MANAGED_LABEL
    from mesos_local.containerizer.docker_runner import remove_orphans
    gone = subprocess.Popen(["true"])
    gone.wait()
    namespace = this_master().split(".")[0]
    owners = {"gone": "%s.%d.1" % (namespace, gone.pid),   # its pid, not its start: gone
              "alive": this_master(),                      # this process: a live master
              "elsewhere": "1.%d.1" % gone.pid,            # another pid namespace's
              "unlabelled": None,
              # Another host's on an engine they share (DOCKER_HOST=tcp://...): its
              # pid namespace numbered as this one's, its pid gone here. It was removed.
              "other host": "%s.%d.1" % (namespace, gone.pid)}
    token = "%s=%s" % (MARKER, os.environ[MARKER])   # (session_containers' mark)
    made = {}
    try:
        for name, owner in owners.items():
            labels = {MANAGED_LABEL: "1"}
            if owner is not None:
                labels[MASTER_LABEL] = owner
            if name == "other host":
                labels["mesos_local.boot"] = "00000000-0000-0000-0000-000000000000"
            made[name] = docker_engine.containers.create(image, ["true"], labels=labels,
                                                         environment=[token])
        removed = remove_orphans(docker_engine)
        left = {c.id for c in session_containers(docker_engine)}
        assert made["gone"].name in removed   # (and any other gone master's on this engine)
        assert left == {made[name].id for name in ("alive", "elsewhere", "unlabelled",
                                                   "other host")}
    finally:
        for container in made.values():
            with contextlib.suppress(Exception):
                container.remove(force=True)
