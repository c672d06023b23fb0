"""The local master's Docker runner, against a real engine and the tfmesos
image (pure tests of the container arguments first)."""

import contextlib
import os
import shutil
import signal
import socket
import threading
import time

import pytest
from fixtures_docker import EngineProxy, docker_engine, no_leaked_containers, tfmesos_image
from fixtures_master import clients, make_local_master
from local_users import as_user, nobody
from mesos_http_client import task_info

from mesos_local.cleanup import boot_id, this_master
from mesos_local.containerizer.container_options import container_env, container_kwargs
from mesos_local.containerizer.docker_runner import DockerRunner
from mesos_local.containerizer.planning import build_launch, plan_task
from mesos_local.containerizer.runner import RunnerError, TaskLaunch

WAIT = 60


def make_launch(tmp_path, command, image=None, **fields):
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir(exist_ok=True)
    fields.setdefault("env", {"TFMESOS_TASK": "yes"})
    return TaskLaunch(task_id=fields.pop("task_id", "test-%s" % tmp_path.name),
                      framework_id="fw-1", agent_id="agent-1", sandbox=str(sandbox),
                      command=command, image=image, **fields)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def wait_for_text(path, text, task, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while text not in read(path):
        assert task.wait(0) is None, "the task ended before printing %r" % text
        assert time.monotonic() < deadline, "%r not in %s after %d s" % (text, path, timeout)
        time.sleep(0.1)


@pytest.fixture
def runner(docker_engine, no_leaked_containers):
    return DockerRunner(docker_engine)


@pytest.fixture
def run(runner, tmp_path):
    """Launch a task and always clean it up."""
    tasks = []

    def launch(command, image, **fields):
        task = runner.launch(make_launch(tmp_path, command, image, **fields))
        tasks.append(task)
        return task

    yield launch
    for task in tasks:
        task.kill()
        task.cleanup()


# -- pure: the container's arguments --------------------------------------

def test_container_env_drops_host_only_variables():
    env = {"PATH": "/host/bin", "HOME": "/root", "PYTHONPATH": "/src", "VIRTUAL_ENV": "/v",
           "LD_LIBRARY_PATH": "/l", "LANG": "en_US.UTF-8", "LC_ALL": "C", "PIP_FIND_LINKS": "/w",
           "TFMESOS_SECRET": "s", "MESOS_SANDBOX": "/sb", "TF_CONFIG": "{}",
           "CUDA_VISIBLE_DEVICES": "0", "MY_OWN": "x"}
    assert container_env(env) == {"TFMESOS_SECRET": "s", "MESOS_SANDBOX": "/sb",
                                  "TF_CONFIG": "{}", "CUDA_VISIBLE_DEVICES": "0",
                                  "MY_OWN": "x", "NVIDIA_VISIBLE_DEVICES": "void"}


def test_container_env_renumbers_cuda_devices_inside_the_container():
    env = {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert container_env(env, gpu_ids=["2", "3"]) == {"CUDA_VISIBLE_DEVICES": "0,1",
                                                      "NVIDIA_VISIBLE_DEVICES": "2,3"}


def test_the_images_nvidia_all_never_reaches_a_task():
    # Under an NVIDIA runtime, the image's NVIDIA_VISIBLE_DEVICES=all would
    # hand the task every GPU of the host.
    assert container_env({})["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert container_env({}, gpu_ids=["1"])["NVIDIA_VISIBLE_DEVICES"] == "1"


@pytest.mark.docker
def test_the_image_declares_nvidia_visible_devices(docker_engine, tfmesos_image):
    # A Mesos agent mounts the NVIDIA driver into an image task only then
    # (src/slave/containerizer/mesos/isolators/gpu/volume.cpp).
    env = docker_engine.images.get(tfmesos_image).attrs["Config"]["Env"]
    assert "NVIDIA_VISIBLE_DEVICES=all" in env


def test_container_kwargs(tmp_path):
    import docker.types

    launch = make_launch(
        tmp_path, "echo hi", "img:1", user="1000:1000", gpu_ids=["1", "3"],
        volumes=[("/nfs/data", "/data", "RO"), ("/scratch", "/scratch", "RW")],
        docker_parameters=[("memory-swap", "2g"), ("--shm-size", "1g"), ("cpus", "1.5"),
                           ("cap-add", "SYS_PTRACE"), ("cap-add", "NET_ADMIN"),
                           ("ulimit", "nofile=1024:2048"), ("label", "team=ml"),
                           ("env", "EXTRA=1"), ("privileged", "false")])
    kwargs = container_kwargs(launch, name="n")
    sandbox = launch.sandbox
    assert kwargs["image"] == "img:1"
    assert kwargs["network_mode"] == "host"
    # (the MESOS containerizer's: the sandbox where Mesos maps it, as working directory)
    assert kwargs["working_dir"] == "/mnt/mesos/sandbox"
    assert kwargs["init"] is True
    assert kwargs["volumes"] == ["/nfs/data:/data:ro", "/scratch:/scratch:rw",
                                 "%s:/mnt/mesos/sandbox:rw" % sandbox]
    assert kwargs["entrypoint"] == ["/bin/sh", "-c", "echo hi"]
    assert kwargs["user"] == "1000:1000"
    assert kwargs["security_opt"] == ["no-new-privileges"]
    assert kwargs["labels"] == {"mesos_local.managed": "1", "mesos_local.task-id": launch.task_id,
                                "mesos_local.framework-id": "fw-1", "mesos_local.agent-id": "agent-1",
                                # the master that made it, for the next one's sweep of orphans
                                "mesos_local.master": this_master(), "team": "ml",
                                "mesos_local.boot": boot_id()}
    assert kwargs["environment"] == {"TFMESOS_TASK": "yes", "EXTRA": "1",
                                     "NVIDIA_VISIBLE_DEVICES": "1,3",
                                     "MESOS_SANDBOX": "/mnt/mesos/sandbox"}
    assert kwargs["memswap_limit"] == "2g"
    assert kwargs["shm_size"] == "1g"
    assert kwargs["nano_cpus"] == 1500000000
    assert kwargs["cap_add"] == ["SYS_PTRACE", "NET_ADMIN"]
    assert kwargs["ulimits"][0]["Name"] == "nofile"
    assert (kwargs["ulimits"][0]["Soft"], kwargs["ulimits"][0]["Hard"]) == (1024, 2048)
    assert kwargs["privileged"] is False
    [request] = kwargs["device_requests"]
    assert isinstance(request, docker.types.DeviceRequest)
    assert request["DeviceIDs"] == ["1", "3"]
    assert request["Capabilities"] == [["gpu"]]


def test_container_kwargs_of_a_docker_containerizer_task(tmp_path):
    # As Mesos' Docker containerizer runs it (src/docker/docker.cpp): the sandbox
    # at /mnt/mesos/sandbox, MESOS_SANDBOX and MESOS_CONTAINER_NAME set over the
    # task's own, no --init, no -w (the image's WORKDIR).
    launch = make_launch(tmp_path, "echo hi", "img:1", containerizer="DOCKER",
                         env={"MESOS_SANDBOX": "/host/path", "MESOS_CONTAINER_NAME": "x"})
    kwargs = container_kwargs(launch, name="mesos-c1")
    assert "working_dir" not in kwargs
    assert kwargs["init"] is False
    assert kwargs["volumes"] == ["%s:/mnt/mesos/sandbox:rw" % launch.sandbox]
    assert kwargs["environment"]["MESOS_SANDBOX"] == "/mnt/mesos/sandbox"
    assert kwargs["environment"]["MESOS_CONTAINER_NAME"] == "mesos-c1"


def test_a_docker_containerizer_task_gets_its_own_environment_not_its_executors(tmp_path):
    # Mesos' Docker containerizer gives the container the task's
    # CommandInfo.environment, then MESOS_SANDBOX, MESOS_CONTAINER_NAME and
    # MESOS_ALLOCATION_ROLE (RunOptions::create, src/docker/docker.cpp); the
    # executor's variables (executorEnvironment: MESOS_DIRECTORY, a host
    # path, MESOS_SLAVE_ID, LIBPROCESS_*...) and the agent's own environment
    # stay with the mesos-docker-executor. Here the container got them all.
    from mesos_local.containerizer.planning import TaskPlan, build_launch

    plan = TaskPlan(command="env", image="img:1", containerizer="DOCKER",
                    env={"TFMESOS_TASK": "yes", "MESOS_SLAVE_ID": "the task's own"})
    (tmp_path / "sandbox").mkdir()
    launch = build_launch(plan, "t1", "fw-1", "agent-1", str(tmp_path / "sandbox"), [], False,
                          {"AGENTS_OWN": "x", "LIBPROCESS_PORT": "0", "MESOS_CHECKPOINT": "0"})
    launch.env["MESOS_ALLOCATION_ROLE"] = "ml"      # what the agent sets over the task's own
    environment = container_kwargs(launch, name="mesos-c1")["environment"]
    assert environment == {"TFMESOS_TASK": "yes", "MESOS_SLAVE_ID": "the task's own",
                           "MESOS_SANDBOX": "/mnt/mesos/sandbox",
                           "MESOS_CONTAINER_NAME": "mesos-c1", "MESOS_ALLOCATION_ROLE": "ml",
                           "CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"}
    # The Mesos containerizer's task is its command executor's child: it
    # inherits the executor's environment (host-only names left out).
    plan.containerizer = "MESOS"
    launch = build_launch(plan, "t1", "fw-1", "agent-1", str(tmp_path / "sandbox"), [], False,
                          {"AGENTS_OWN": "x"})
    assert container_kwargs(launch)["environment"]["AGENTS_OWN"] == "x"


def test_container_user_resolves_host_names():
    from mesos_local.containerizer.container_options import container_user

    assert container_user("1000") == "1000"
    assert container_user("1000:1000") == "1000:1000"
    assert container_user("root") == "0:0"
    assert container_user("nobody") == "65534:65534"
    assert container_user("nobody:0") == "65534:0"
    assert container_user("nobody:root") == "65534:0"
    assert container_user("no-such-user") == "no-such-user"
    assert container_user("nobody:no-such-group") == "nobody:no-such-group"


def test_container_kwargs_without_shell_keeps_the_entrypoint_under_docker_only(tmp_path):
    launch = make_launch(tmp_path, "python", "img", shell=False, arguments=["-c", "pass"],
                         containerizer="DOCKER")
    kwargs = container_kwargs(launch)
    assert kwargs["command"] == ["python", "-c", "pass"]
    assert "entrypoint" not in kwargs and "device_requests" not in kwargs
    launch.containerizer = "MESOS"
    kwargs = container_kwargs(launch)
    assert kwargs["entrypoint"] == ["python", "-c", "pass"] and "command" not in kwargs


@pytest.mark.parametrize("container, key, command", [
    ({"type": "DOCKER", "docker": {"image": "img"}}, "command", ["/bin/echo", "a", "b", "c"]),
    ({"type": "MESOS", "mesos": {"image": {"type": "DOCKER", "docker": {"name": "img"}}}},
     "entrypoint", ["/bin/echo", "b", "c"]),
])
def test_a_planned_task_without_shell_runs_the_argv_of_its_containerizer(
        tmp_path, container, key, command):
    # DOCKER: `docker run IMAGE value arguments...` (src/docker/docker.cpp,
    # Docker::RunOptions::create), after the image's entrypoint; MESOS: value
    # exec'd with argv = arguments, the image's entrypoint ignored.
    info = {"name": "t", "task_id": {"value": "t-1"}, "agent_id": {"value": "a"},
            "resources": [], "container": container,
            "command": {"value": "/bin/echo", "shell": False, "arguments": ["a", "b", "c"]}}
    launch = build_launch(plan_task(info), "t-1", "fw-1", "a", str(tmp_path), [], False, {})
    kwargs = container_kwargs(launch)
    assert kwargs[key] == command and len({"command", "entrypoint"} & set(kwargs)) == 1


@pytest.mark.parametrize("key, message", [
    ("no-such-option", "unknown docker parameter 'no-such-option'"),
    ("network", "docker parameter 'network' is set by the agent"),
    ("volume", "docker parameter 'volume' is set by the agent"),
])
def test_container_kwargs_rejects_parameters(tmp_path, key, message):
    launch = make_launch(tmp_path, "true", "img", docker_parameters=[(key, "x")])
    with pytest.raises(RunnerError, match=message):
        container_kwargs(launch)


def test_container_kwargs_rejects_bad_values(tmp_path):
    with pytest.raises(RunnerError, match="cpu-shares.*expected an integer"):
        container_kwargs(make_launch(tmp_path, "true", "img",
                                     docker_parameters=[("cpu-shares", "lots")]))
    with pytest.raises(RunnerError, match="mode 'XX'"):
        container_kwargs(make_launch(tmp_path, "true", "img", volumes=[("/a", "/b", "XX")]))
    with pytest.raises(RunnerError, match="must be absolute"):
        container_kwargs(make_launch(tmp_path, "true", "img", volumes=[("a", "/b", "RW")]))


def test_unreachable_engine_is_a_runner_error(tmp_path):
    import docker

    client = docker.DockerClient(base_url="unix:///nonexistent/docker.sock", version="1.41",
                                 timeout=5)
    runner = DockerRunner(client)
    with pytest.raises(RunnerError, match="^Docker is unavailable: "):
        runner.launch(make_launch(tmp_path, "true", "tfmesos/tfmesos"))


def engine_error_as(user, socket_path):
    """The DockerEngineError text connect() raises in a process of ``user``
    (a pwd entry) whose DOCKER_HOST is the unix socket ``socket_path``.
    connect() imports docker and requests, which ``user`` may not be able to
    read (this Python under /root): imported here, before the fork."""
    import requests

    import docker
    from mesos_local.containerizer import docker_engine

    def connect():
        os.environ["DOCKER_HOST"] = "unix://%s" % socket_path
        try:
            docker_engine.connect()
            return "connected"
        except docker_engine.DockerEngineError as exc:
            return str(exc)
    return as_user(user, connect)


def test_an_engine_the_user_may_not_use_names_the_docker_group(tmp_path):
    # Before: "Docker is unavailable: ... PermissionError(13, 'Permission denied'))
    # (start the engine as root: dockerd &, or install it: apt-get install docker.io)"
    # while the engine ran: the fix for no engine, not for a user outside the docker group.
    import socket
    import tempfile

    user = nobody("a socket root may open but another user may not needs root")
    shared = tempfile.mkdtemp(prefix="tfmesos-test-docker-sock-")
    try:
        os.chmod(shared, 0o755)
        path = os.path.join(shared, "docker.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(1)
        os.chmod(path, 0o660)   # root:root, as the engine's socket is root:docker
        try:
            text = engine_error_as(user, path)
        finally:
            server.close()
    finally:
        shutil.rmtree(shared)
    assert text == (
        "Docker is unavailable: you may not use the Docker engine at unix://%s (permission "
        "denied): add your user to the docker group (usermod -aG docker %s, then log in "
        "again) or use rootless Docker (DOCKER_HOST)" % (path, user.pw_name)), text


def test_a_permission_error_inside_the_clients_errors_is_found():
    # What docker-py raises for a socket the user may not open: the
    # PermissionError is an argument of urllib3's error inside requests'.
    import requests
    import urllib3

    from mesos_local.containerizer import docker_engine

    class Client:
        def ping(self):
            raise requests.exceptions.ConnectionError(urllib3.exceptions.ProtocolError(
                "Connection aborted.", PermissionError(13, "Permission denied")))

    with pytest.raises(docker_engine.DockerEngineError) as info:
        docker_engine.connect(Client())
    assert "you may not use the Docker engine (permission denied): add your user to the " \
           "docker group" in str(info.value), str(info.value)
    assert "dockerd" not in str(info.value)


def test_no_engine_at_the_socket_keeps_the_hint_to_start_one(tmp_path, monkeypatch):
    from mesos_local.containerizer import docker_engine

    monkeypatch.setenv("DOCKER_HOST", "unix://%s" % (tmp_path / "no-docker.sock"))
    with pytest.raises(docker_engine.DockerEngineError) as info:
        docker_engine.connect()
    assert str(info.value).endswith(
        "(start the engine as root: dockerd &, or install it: apt-get install docker.io)")


# -- against the engine ------------------------------------------------------


@pytest.mark.docker
@pytest.mark.timeout(1800)   # the first test may build the image (minutes when cold)
def test_task_runs_in_the_image(run, tfmesos_image, tmp_path):
    task = run("cat /etc/tfmesos-image; echo to-stderr >&2; pwd", tfmesos_image)
    assert task.wait(WAIT) == 0
    stdout = read(tmp_path / "sandbox" / "stdout").splitlines()
    assert stdout == [tfmesos_image, "/mnt/mesos/sandbox"]
    assert read(tmp_path / "sandbox" / "stderr") == "to-stderr\n"


@pytest.mark.docker
def test_exit_code_comes_back(run, tfmesos_image):
    assert run("exit 3", tfmesos_image).wait(WAIT) == 3


@pytest.mark.docker
def test_argv_without_shell(run, tfmesos_image, tmp_path):
    task = run("python", tfmesos_image, shell=False,
               arguments=["-c", "import sys; print(sys.prefix); sys.exit(4)"])
    assert task.wait(WAIT) == 4
    assert read(tmp_path / "sandbox" / "stdout") == "/opt/tfmesos\n"


@pytest.mark.docker
def test_output_reaches_the_sandbox_while_running_and_terminate_stops(
        run, tfmesos_image, tmp_path, docker_engine):
    import docker

    # The shell does not exec sleep: SIGTERM has to end the whole container.
    task = run("echo started; sleep 120; echo not reached", tfmesos_image)
    wait_for_text(tmp_path / "sandbox" / "stdout", "started\n", task)
    assert task.wait(0.5) is None
    task.terminate()
    assert task.wait(WAIT) == -signal.SIGTERM
    assert docker_engine.containers.get(task.id).status == "exited"
    task.cleanup()
    with pytest.raises(docker.errors.NotFound):
        docker_engine.containers.get(task.id)


@pytest.mark.docker
def test_kill_stops_a_task_that_ignores_sigterm(run, tfmesos_image, tmp_path):
    task = run("trap '' TERM; echo ready; while :; do sleep 0.2; done", tfmesos_image)
    wait_for_text(tmp_path / "sandbox" / "stdout", "ready", task)
    task.terminate()
    assert task.wait(2) is None
    task.kill()
    assert task.wait(WAIT) == -signal.SIGKILL


@pytest.mark.docker
def test_cleanup_of_a_running_task_removes_it(runner, tfmesos_image, tmp_path, docker_engine):
    import docker

    task = runner.launch(make_launch(tmp_path, "sleep 120", tfmesos_image))
    assert task.wait(0.2) is None
    task.cleanup()
    assert task.wait(WAIT) is not None
    with pytest.raises(docker.errors.NotFound):
        docker_engine.containers.get(task.id)


@pytest.mark.docker
def test_volumes_are_mounted_and_read_only_is_enforced(run, tfmesos_image, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "hello").write_text("from the host\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    task = run("cat /data/hello; echo written > /scratch/out; touch /data/forbidden",
               tfmesos_image,
               volumes=[(str(data), "/data", "RO"), (str(scratch), "/scratch", "RW")])
    assert task.wait(WAIT) != 0
    assert read(tmp_path / "sandbox" / "stdout") == "from the host\n"
    assert "Read-only file system" in read(tmp_path / "sandbox" / "stderr")
    assert (scratch / "out").read_text() == "written\n"
    assert not (data / "forbidden").exists()


@pytest.mark.docker
def test_environment_keeps_the_image_path(run, tfmesos_image, tmp_path):
    env = dict(os.environ, PATH="/host/only/bin", HOME="/host/home", VIRTUAL_ENV="/host/venv",
               PYTHONPATH="/host/src", TFMESOS_TASK_NAME="worker:0", TF_CONFIG='{"a": 1}',
               CUDA_VISIBLE_DEVICES="", MESOS_TASK_ID="t-1", MY_SETTING="kept")
    script = ('import os, shutil; e = os.environ; '
              'print(e["PATH"]); print(shutil.which("python")); '
              'print(e["VIRTUAL_ENV"], e.get("PYTHONPATH"), e["HOME"]); '
              'print(e["TFMESOS_TASK_NAME"], e["TF_CONFIG"], repr(e["CUDA_VISIBLE_DEVICES"]), '
              'e["MESOS_TASK_ID"], e["MY_SETTING"])')
    task = run("python", tfmesos_image, shell=False, arguments=["-c", script], env=env)
    assert task.wait(WAIT) == 0, read(tmp_path / "sandbox" / "stderr")
    path, python, venv, passed = read(tmp_path / "sandbox" / "stdout").splitlines()
    assert path.startswith("/opt/tfmesos/bin:") and "/host/only/bin" not in path
    assert python == "/opt/tfmesos/bin/python"
    assert venv == "/opt/tfmesos None /root"
    assert passed == "worker:0 {\"a\": 1} '' t-1 kept"


@pytest.mark.docker
def test_user_and_docker_parameters(run, tfmesos_image, tmp_path):
    task = run("id -u; id -g; df -k /dev/shm | tail -n 1", tfmesos_image, user="65534:65534",
               docker_parameters=[("shm-size", "64m")])
    assert task.wait(WAIT) == 0, read(tmp_path / "sandbox" / "stderr")
    uid, gid, shm = read(tmp_path / "sandbox" / "stdout").splitlines()
    assert (uid, gid) == ("65534", "65534")
    assert shm.split()[1] == "65536"


@pytest.mark.docker
def test_many_tasks_at_once(runner, tfmesos_image, tmp_path):
    # More tasks than the engine client's connection pool (10) holds.
    tasks = []
    try:
        for i in range(12):
            sandbox = tmp_path / str(i)
            sandbox.mkdir()
            tasks.append(runner.launch(TaskLaunch(
                task_id="many-%d" % i, framework_id="fw", agent_id="a", sandbox=str(sandbox),
                command="sleep 1; echo task %d" % i, image=tfmesos_image)))
        assert [task.wait(WAIT) for task in tasks] == [0] * 12
        for i in range(12):
            assert read(tmp_path / str(i) / "stdout") == "task %d\n" % i
    finally:
        for task in tasks:
            task.kill()
            task.cleanup()


@pytest.mark.docker
def test_missing_image_is_a_runner_error(runner, tmp_path):
    with pytest.raises(RunnerError, match="^image tfmesos/no-such-image:0 not found on the Docker "
                                          "engine; build it with docker/build.sh"):
        runner.launch(make_launch(tmp_path, "true", "tfmesos/no-such-image:0"))


@pytest.mark.docker
def test_failed_pull_is_a_runner_error(runner, tmp_path):
    with pytest.raises(RunnerError, match="^cannot pull image 'tfmesos/no-such-image:0'"):
        runner.launch(make_launch(tmp_path, "true", "tfmesos/no-such-image:0", force_pull=True))


@pytest.mark.docker
def test_start_failure_leaves_no_container(runner, tfmesos_image, tmp_path):
    # No such user in the image: the engine refuses to start the container.
    with pytest.raises(RunnerError, match="^cannot start task .* no-such-user"):
        runner.launch(make_launch(tmp_path, "true", tfmesos_image, user="no-such-user"))


@pytest.mark.docker
def test_gpu_request_without_gpus_fails_cleanly(runner, tfmesos_image, tmp_path, docker_engine):
    if any("nvidia" in name for name in docker_engine.info().get("Runtimes", {})):
        pytest.skip("this engine has GPUs: the request would succeed")
    with pytest.raises(RunnerError, match="^cannot start task .*gpu"):
        runner.launch(make_launch(tmp_path, "true", tfmesos_image, gpu_ids=["0"]))


# -- through the master: the container as Mesos' containerizers make it ------

# What a task prints about the container it runs in.
LOOK = ('echo "sandbox=$MESOS_SANDBOX"; echo "name=$MESOS_CONTAINER_NAME"; echo "pwd=$(pwd)"; '
        'echo "pid1=$(tr "\\0" " " </proc/1/cmdline)"; '
        'echo "mapped=$(cat /mnt/mesos/sandbox/planted 2>&1)"')


def container_of(containerizer, image):
    if containerizer == "DOCKER":
        return {"type": "DOCKER", "docker": {"image": image, "network": "HOST"}}
    return {"type": "MESOS", "mesos": {"image": {"type": "DOCKER", "docker": {"name": image}}}}


def wait_ended(client, task_id, timeout=120):
    """The task's terminal status (every update acknowledged)."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.next_update(task_id, timeout=max(0.01, deadline - time.monotonic()))
        if "uuid" in status:
            client.acknowledge(status)
        if status["state"] not in ("TASK_STAGING", "TASK_STARTING", "TASK_RUNNING",
                                    "TASK_KILLING"):
            return status


def planting_runner(docker_engine):
    """A DockerRunner that writes ``planted`` into each sandbox before the
    container starts (what a fetched URI would be)."""
    class Planting(DockerRunner):
        def launch(self, launch):
            with open(os.path.join(launch.sandbox, "planted"), "w") as f:
                f.write("from-the-host")
            return super().launch(launch)
    return Planting(docker_engine)


@pytest.mark.docker
@pytest.mark.parametrize("containerizer", ["DOCKER", "MESOS"])
def test_a_task_finds_its_sandbox_where_mesos_maps_it(
        containerizer, make_local_master, clients, docker_engine, tfmesos_image,
        no_leaked_containers):
    # Mesos maps the sandbox at the agent's --sandbox_directory, /mnt/mesos/sandbox
    # (src/slave/flags.cpp), and says so in MESOS_SANDBOX: the Docker containerizer
    # (src/docker/docker.cpp, RunOptions::create) with MESOS_CONTAINER_NAME, no
    # --init and no -w (the image's WORKDIR, / here); the Mesos containerizer
    # (src/slave/containerizer/mesos/containerizer.cpp, _launch) with the sandbox
    # as working directory. The host's sandbox path means nothing in there.
    master = make_local_master(container_runner=planting_runner(docker_engine), allow_root=True)
    client = clients(master)
    offer = client.next_offers()[0]
    info = task_info("look", offer, LOOK, container=container_of(containerizer, tfmesos_image))
    info["command"]["user"] = "root"   # (the MESOS containerizer's; this master runs as root)
    client.launch(offer, [info])
    ended = wait_ended(client, "look")
    sandbox = master.sandbox("look")
    assert ended["state"] == "TASK_FINISHED", (ended, read(os.path.join(sandbox, "stderr")))
    said = dict(line.split("=", 1) for line in read(os.path.join(sandbox, "stdout")).splitlines())
    assert said["sandbox"] == "/mnt/mesos/sandbox", said
    assert said["mapped"] == "from-the-host"
    if containerizer == "DOCKER":
        # Mesos' name: DOCKER_NAME_PREFIX + the container id, the run's directory
        # (src/slave/containerizer/docker.hpp, Container::name).
        assert said["name"] == "mesos-" + os.path.basename(sandbox)
        assert said["pwd"] == "/"
        assert said["pid1"].split()[:2] == ["/bin/sh", "-c"]   # not docker-init
    else:
        assert said["pwd"] == "/mnt/mesos/sandbox"


@pytest.mark.docker
def test_killing_a_docker_task_is_docker_stop_with_the_grace(
        make_local_master, clients, docker_engine, tfmesos_image, no_leaked_containers):
    # Mesos' docker executor kills with `docker stop -t GRACE` (src/docker/executor.cpp,
    # _killTask): the container's PID 1, a shell here, has no handler for SIGTERM,
    # so the kernel drops it and SIGKILL ends the container after the grace.
    grace = 3.0
    master = make_local_master(container_runner=DockerRunner(docker_engine), allow_root=True)
    client = clients(master)
    offer = client.next_offers()[0]
    info = task_info("stubborn", offer, "echo ready; sleep 600; echo not reached",
                     container=container_of("DOCKER", tfmesos_image),
                     kill_policy={"grace_period": {"nanoseconds": int(grace * 1e9)}})
    client.launch(offer, [info])
    client.wait_state("stubborn", "TASK_RUNNING", timeout=120)
    sandbox = master.sandbox("stubborn")
    deadline = time.monotonic() + WAIT
    while "ready" not in read(os.path.join(sandbox, "stdout")):
        assert time.monotonic() < deadline, "the task never said ready"
        time.sleep(0.1)
    [container] = docker_engine.containers.list(
        filters={"label": "mesos_local.task-id=stubborn"})
    started = time.monotonic()
    client.kill("stubborn")
    killed = wait_ended(client, "stubborn", timeout=WAIT)
    waited = time.monotonic() - started
    # Mesos' docker executor words it as `docker run` exits (_reaped): 128 + SIGKILL.
    assert (killed["state"], killed["message"]) == ("TASK_KILLED",
                                                    "Container exited with status 137")
    assert "reason" not in killed
    assert waited >= grace
    assert "not reached" not in read(os.path.join(sandbox, "stdout"))
    assert container.name == "mesos-" + os.path.basename(sandbox)


@pytest.mark.docker
@pytest.mark.parametrize("containerizer, words", [
    ("DOCKER", "Container exited with status %d"), ("MESOS", "Command exited with status %d")])
def test_an_image_task_s_end_is_worded_as_its_executor_words_it(
        containerizer, words, make_local_master, clients, docker_engine, tfmesos_image,
        no_leaked_containers):
    # Mesos' docker executor (src/docker/executor.cpp, _reaped): "Container " and
    # `docker run`'s wait status, no reason; the command executor's "Command ".
    master = make_local_master(container_runner=DockerRunner(docker_engine), allow_root=True)
    client = clients(master)
    offer = client.next_offers()[0]
    image = container_of(containerizer, tfmesos_image)
    client.launch(offer, [task_info("done", offer, "true", container=image),
                          task_info("failed", offer, "exit 3", container=image)])
    finished, failed = (wait_ended(client, task_id) for task_id in ("done", "failed"))
    assert (finished["state"], finished["message"]) == ("TASK_FINISHED", words % 0)
    assert (failed["state"], failed["message"]) == ("TASK_FAILED", words % 3)
    if containerizer == "DOCKER":
        assert "reason" not in failed and "reason" not in finished


class HeldStarts(EngineProxy):
    """A proxy to the Docker engine's socket that holds every container's
    start request until ``release()``: an engine slow to start containers."""

    def __init__(self, directory):
        self.held, self.released = threading.Event(), threading.Event()
        super().__init__(os.path.join(str(directory), "held.sock"))

    def before_request(self, data):
        if data.startswith(b"POST ") and b"/start " in data:
            self.held.set()
            self.released.wait(120)

    def release(self):
        self.cut()              # first: the held start never reaches the engine
        self.released.set()


@pytest.mark.docker
def test_a_container_whose_start_the_engine_holds_goes_when_its_master_stops(
        make_local_master, clients, docker_engine, tfmesos_image, tmp_path,
        no_leaked_containers):
    # The launch blocked in the engine's start past stop()'s wait: the master
    # exited and its container stayed (until the next master on the engine).
    import docker

    proxy = HeldStarts(tmp_path)
    try:
        runner = DockerRunner(client=docker.DockerClient(base_url="unix://" + proxy.path,
                                                         version="1.41", timeout=120))
        master = make_local_master(container_runner=runner, kill_grace_period=0.1)
        client = clients(master)
        offer = client.next_offers()[0]
        info = task_info("held", offer, "sleep 300")
        info["container"] = {"type": "DOCKER", "docker": {"image": tfmesos_image,
                                                          "network": "HOST"}}
        client.launch(offer, [info])
        assert proxy.held.wait(60), "the container's start never reached the engine"
        mine = {"label": ["mesos_local.master=%s" % this_master()]}
        assert docker_engine.containers.list(all=True, filters=mine)
        master.stop()
        assert docker_engine.containers.list(all=True, filters=mine) == []
    finally:
        proxy.release()
