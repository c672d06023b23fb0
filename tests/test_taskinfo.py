"""TaskInfo JSON for plain, MESOS and DOCKER containerizer tasks, field by
field, and the same TaskInfos through the local master's strict schema, its
task planner and the Docker runner's container arguments (no Docker, no
network)."""

import copy
import getpass
import os
import shlex
import sys

import pytest
from offers import offer
from processes import TASK_ENTRY
from taskinfo_helpers import PS_AND_WORKERS, SECRET, launch_all, variables

import tfmesos
from mesos_local.api.validation import SchemaError, validate, validate_message
from mesos_local.containerizer.container_options import check_gpus_parameter, container_kwargs
from mesos_local.containerizer.planning import build_launch, plan_task
from mesos_local.containerizer.runner import RunnerError
from tfmesos.core.jobs import Job
from tfmesos.core.spec import RunSpec, check_run
from tfmesos.core.taskinfo import (
    PASSWD_VOLUMES,
    build_task_info,
    container_info,
    framework_info,
    package_on_path,
    python_first,
    submitter_pythonpath,
    task_command,
)
from tfmesos.exceptions import SpecError

IMAGE = "registry.example.com/ml/tfmesos:2.21"
PASSWD = [{"container_path": "/etc/passwd", "host_path": "/etc/passwd", "mode": "RO"},
          {"container_path": "/etc/group", "host_path": "/etc/group", "mode": "RO"}]


def labels(info):
    return {label["key"]: label["value"] for label in info["labels"]["labels"]}


def resources_named(info, name):
    return [r for r in info["resources"] if r["name"] == name]


# -- the command ----------------------------------------------------------------

def test_plain_task_command_runs_this_interpreter():
    assert task_command(None) == "%sexec %s -m %s" % (
        python_first(sys.executable), shlex.quote(sys.executable), TASK_ENTRY)
    # --python: its directory first on PATH too (test_task_python.py)
    assert task_command(None, "/opt/my python/bin/python3") == \
        "PATH='/opt/my python/bin'\"${PATH:+:$PATH}\" exec '/opt/my python/bin/python3' -m " \
        + TASK_ENTRY


def test_a_replica_task_entry_skips_site_when_its_pythonpath_finds_tfmesos(tmp_path):
    assert task_command(None, no_site=True) == "%sexec %s -S -m %s" % (
        python_first(sys.executable), shlex.quote(sys.executable), TASK_ENTRY)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(tfmesos.__file__)))
    assert package_on_path(os.pathsep.join([str(tmp_path), repo]))
    assert not package_on_path(str(tmp_path))   # an editable install's finder: keep site


def test_image_task_command_uses_the_images_python():
    # No absolute interpreter path from the submitting host (tfmesos2 had
    # /usr/bin/python3): the image's PATH decides, and --python is for plain tasks.
    assert task_command(IMAGE) == "exec python3 -m " + TASK_ENTRY
    assert task_command(IMAGE, "/home/me/venv/bin/python") == "exec python3 -m " + TASK_ENTRY


def test_submitter_pythonpath_keeps_existing_directories_once(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    path = [str(a), str(tmp_path / "missing"), str(b), str(a) + "/", str(tmp_path / "x.zip")]
    assert submitter_pythonpath(path) == os.pathsep.join([str(a), str(b)])
    assert submitter_pythonpath([""]) == os.getcwd()


# -- container_info ---------------------------------------------------------------

def test_no_image_means_no_container():
    assert container_info(RunSpec()) is None
    assert container_info(RunSpec(volumes=("/data:/data",), containerizer="DOCKER")) is None


def test_mesos_container_field_by_field():
    run = RunSpec(image=IMAGE, volumes=("/nfs/data:/data:ro", "/scratch/:/scratch"))
    assert run.containerizer == "MESOS"   # the default, as in the original TFMesos
    container = container_info(run)
    assert container == {
        "type": "MESOS",
        "volumes": PASSWD + [
            {"container_path": "/data", "host_path": "/nfs/data", "mode": "RO"},
            {"container_path": "/scratch", "host_path": "/scratch", "mode": "RW"}],
        "mesos": {"image": {"type": "DOCKER", "docker": {"name": IMAGE}, "cached": True}},
    }
    validate_message("ContainerInfo", container)


def test_mesos_container_force_pull_is_not_cached():
    container = container_info(RunSpec(image=IMAGE, force_pull=True))
    assert container["mesos"]["image"]["cached"] is False
    assert container["volumes"] == PASSWD


def test_docker_container_field_by_field():
    run = RunSpec(image=IMAGE, volumes=("/nfs/data:/data:ro",), containerizer="DOCKER",
                  docker_parameters=("memory-swap=-1", ("shm-size", "1g")), user="alice")
    container = container_info(run)
    assert container == {
        "type": "DOCKER",
        "volumes": PASSWD + [{"container_path": "/data", "host_path": "/nfs/data",
                              "mode": "RO"}],
        "docker": {"image": IMAGE, "network": "HOST", "force_pull_image": False,
                   "parameters": [{"key": "memory-swap", "value": "-1"},
                                  {"key": "shm-size", "value": "1g"},
                                  # Mesos' Docker containerizer ignores the
                                  # framework's user: Docker is told.
                                  {"key": "user", "value": "alice"}]},
    }
    validate_message("ContainerInfo", container)


def test_docker_container_force_pull():
    container = container_info(RunSpec(image=IMAGE, force_pull=True, containerizer="DOCKER"))
    assert container["docker"]["force_pull_image"] is True
    assert container["docker"]["parameters"] == [{"key": "user", "value": getpass.getuser()}]


def test_docker_user_parameter_given_by_the_user_wins():
    run = RunSpec(image=IMAGE, containerizer="DOCKER", docker_parameters=("user=1000",))
    assert container_info(run)["docker"]["parameters"] == [{"key": "user", "value": "1000"}]


def test_passwd_and_group_are_mounted_read_only_first():
    assert PASSWD_VOLUMES == (("/etc/passwd", "/etc/passwd", "RO"),
                              ("/etc/group", "/etc/group", "RO"))
    for kind in ("MESOS", "DOCKER"):
        assert container_info(RunSpec(image=IMAGE, containerizer=kind))["volumes"][:2] == PASSWD


def test_a_volume_of_the_user_s_at_etc_passwd_takes_the_place_of_tfmesos_one():
    # Both went to Docker: "Duplicate mount point: /etc/passwd", three launches.
    for kind in ("MESOS", "DOCKER"):
        volumes = container_info(RunSpec(image=IMAGE, containerizer=kind,
                                         volumes=("/srv/passwd:/etc/passwd:ro",)))["volumes"]
        assert volumes == [PASSWD[1], {"container_path": "/etc/passwd",
                                       "host_path": "/srv/passwd", "mode": "RO"}]


@pytest.mark.parametrize("volumes, why", [
    (("/data:/mnt/mesos/sandbox",), "/mnt/mesos/sandbox is where Mesos mounts the task's "
                                    "sandbox: mount elsewhere"),
    (("/a:/data", "/b:/data/"), "two volumes at /data: Docker refuses a duplicate mount point"),
])
def test_volumes_docker_would_refuse_at_launch_are_refused_at_once(volumes, why):
    with pytest.raises(SpecError, match=why):
        RunSpec(image=IMAGE, volumes=volumes)
    # One below the sandbox's mount point Docker takes (a mount in a mount).
    assert RunSpec(image=IMAGE, volumes=("/data:/mnt/mesos/sandbox/data",)).volumes


def test_gpus_under_the_docker_containerizer_are_refused_naming_mesos():
    jobs = [Job("ps"), Job("worker", gpus=1)]
    with pytest.raises(SpecError, match="GPUs need the Mesos containerizer: use containerizer=MESOS"):
        check_run(RunSpec(image=IMAGE, containerizer="DOCKER"), jobs)
    check_run(RunSpec(image=IMAGE), jobs)                       # MESOS: fine
    check_run(RunSpec(containerizer="DOCKER"), jobs)            # no image: plain tasks
    check_run(RunSpec(image=IMAGE, containerizer="DOCKER"), [Job("worker")])


# -- build_task_info ---------------------------------------------------------------

def test_build_task_info_field_by_field():
    resources = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.5}}]
    container = container_info(RunSpec(image=IMAGE))
    info = build_task_info("t-1", "tfrun worker:0", "agent-1", resources, "exec true",
                           {"B": 2, "A": "x y"}, container,
                           labels={"tfmesos.job": "worker", "tfmesos.index": 0})
    assert info == {
        "name": "tfrun worker:0",
        "task_id": {"value": "t-1"},
        "agent_id": {"value": "agent-1"},
        "resources": resources,
        "command": {"value": "exec true", "shell": True,
                    "environment": {"variables": [{"name": "A", "value": "x y"},
                                                  {"name": "B", "value": "2"}]}},
        "container": container,
        "labels": {"labels": [{"key": "tfmesos.index", "value": "0"},
                              {"key": "tfmesos.job", "value": "worker"}]},
    }
    assert info["resources"] is not resources
    validate_message("TaskInfo", info)


def test_build_task_info_without_container_or_labels():
    info = build_task_info("t-1", "n", "a", [], "exec true", {})
    assert "container" not in info and "labels" not in info
    assert info["command"]["environment"] == {"variables": []}
    validate_message("TaskInfo", info)


# -- the whole path: offers -> scheduler -> build_task -> ACCEPT -------------------------

def test_plain_tasks_run_this_python_with_pythonpath_and_no_container():
    run = RunSpec(name="tfrun", env=("FOO=bar", "EMPTY="))
    _, infos, _ = launch_all(PS_AND_WORKERS, run, [offer("o1")])
    assert sorted(infos) == ["ps:0", "worker:0", "worker:1"]
    ports = set()
    for name, info in infos.items():
        job, index = name.split(":")
        assert "container" not in info
        assert info["name"] == "tfrun %s" % name
        assert info["agent_id"] == {"value": "agent-o1"}
        assert info["command"]["value"] == task_command(None)
        assert info["command"]["shell"] is True
        env = variables(info)
        assert env["PYTHONPATH"] == submitter_pythonpath()
        assert env["PYTHONUNBUFFERED"] == "1"
        assert env["FOO"] == "bar" and env["EMPTY"] == ""
        assert env["TFMESOS_RENDEZVOUS"] == "127.0.0.1:40123"
        assert env["TFMESOS_TASK_ID"] == info["task_id"]["value"]
        assert env["TFMESOS_OFFER_HOST"] == "host-o1"
        assert bytes.fromhex(env["TFMESOS_SECRET"]) == SECRET
        ports.add(int(env["TFMESOS_PORT"]))
        [port] = resources_named(info, "ports")
        assert port["ranges"]["range"] == [{"begin": int(env["TFMESOS_PORT"]),
                                            "end": int(env["TFMESOS_PORT"])}]
        assert labels(info) == {"tfmesos.job": job, "tfmesos.index": index}
        assert not resources_named(info, "gpus")
    assert len(ports) == 3


def test_worker_0_reserves_the_coordinators_port_beside_its_own():
    def extra_ports(slot):
        return 1 if slot.name == "worker:0" else 0
    _, infos, _ = launch_all(PS_AND_WORKERS, RunSpec(), [offer("o1")], extra_ports=extra_ports)
    worker0 = variables(infos["worker:0"])
    own, coordinator = int(worker0["TFMESOS_PORT"]), int(worker0["TFMESOS_COORDINATOR_PORT"])
    assert coordinator == own + 1
    # Both reserved by Mesos, in the task's one ports resource.
    [ports] = resources_named(infos["worker:0"], "ports")
    assert ports["ranges"]["range"] == [{"begin": own, "end": coordinator}]
    for name in ("ps:0", "worker:1"):
        assert "TFMESOS_COORDINATOR_PORT" not in variables(infos[name])
        assert len(resources_named(infos[name], "ports")) == 1
    taken = [int(variables(info)["TFMESOS_PORT"]) for info in infos.values()]
    assert coordinator not in taken


def test_tasks_carry_the_run_id():
    _, infos, _ = launch_all(PS_AND_WORKERS, RunSpec(), [offer("o1")])
    ids = {variables(info)["TFMESOS_RUN_ID"] for info in infos.values()}
    assert ids == {"0000abcd"}   # the run's id, as in the task ids
    _, infos, _ = launch_all(PS_AND_WORKERS, RunSpec(), [offer("o1")], run_id="abc12345")
    assert {variables(info)["TFMESOS_RUN_ID"] for info in infos.values()} == {"abc12345"}
    assert all(info["task_id"]["value"].startswith("tfmesos.abc12345.")
               for info in infos.values())


def test_tensorflow_is_quiet_and_cpu_tasks_do_not_probe_cuda():
    jobs = [{"name": "ps", "num": 1, "cpus": 0.5, "mem": 256},
            {"name": "worker", "num": 1, "cpus": 1, "mem": 512, "gpus": 1}]
    _, infos, _ = launch_all(jobs, RunSpec(), [offer("gpu", gpus=4)])
    ps, worker = variables(infos["ps:0"]), variables(infos["worker:0"])
    assert ps["TF_CPP_MIN_LOG_LEVEL"] == worker["TF_CPP_MIN_LOG_LEVEL"] == "2"
    # No GPU device factory: no cuInit, and no GPU Mesos did not give.
    assert ps["TF_ENABLED_DEVICE_TYPES"] == "CPU"
    assert "TF_ENABLED_DEVICE_TYPES" not in worker


def test_verbose_leaves_tensorflow_logging_alone():
    _, infos, _ = launch_all(PS_AND_WORKERS, RunSpec(), [offer("o1")], quiet_tensorflow=False)
    for info in infos.values():
        env = variables(info)
        assert "TF_CPP_MIN_LOG_LEVEL" not in env and env["TF_ENABLED_DEVICE_TYPES"] == "CPU"


def test_the_users_tensorflow_settings_win():
    jobs = [{"name": "ps", "num": 1, "cpus": 0.5, "mem": 256},
            {"name": "worker", "num": 1, "cpus": 1, "mem": 512,
             "env": {"TF_ENABLED_DEVICE_TYPES": "CPU,GPU"}}]
    run = RunSpec(env=("TF_CPP_MIN_LOG_LEVEL=0",))
    _, infos, _ = launch_all(jobs, run, [offer("o1")])
    assert variables(infos["ps:0"])["TF_CPP_MIN_LOG_LEVEL"] == "0"
    assert variables(infos["worker:0"])["TF_ENABLED_DEVICE_TYPES"] == "CPU,GPU"
    assert variables(infos["ps:0"])["TF_ENABLED_DEVICE_TYPES"] == "CPU"


def test_python_option_sets_the_plain_interpreter():
    _, infos, _ = launch_all(PS_AND_WORKERS, RunSpec(python="/opt/py/bin/python3"),
                             [offer("o1")])
    assert {i["command"]["value"] for i in infos.values()} == \
        {'PATH=/opt/py/bin"${PATH:+:$PATH}" exec /opt/py/bin/python3 -m ' + TASK_ENTRY}


@pytest.mark.parametrize("kind", ["MESOS", "DOCKER"])
def test_image_tasks_have_the_container_and_no_host_paths(kind):
    run = RunSpec(image=IMAGE, containerizer=kind, volumes=("/nfs/data:/data:ro",),
                  env=("FOO=bar",), python="/home/me/venv/bin/python")
    _, infos, _ = launch_all(PS_AND_WORKERS, run, [offer("o1")])
    assert len(infos) == 3
    for info in infos.values():
        assert info["container"] == container_info(run)
        assert info["command"]["value"] == "exec python3 -m " + TASK_ENTRY
        env = variables(info)
        assert "PYTHONPATH" not in env
        assert env["FOO"] == "bar" and env["PYTHONUNBUFFERED"] == "1"
        assert env["TFMESOS_RENDEZVOUS"] == "127.0.0.1:40123"


def test_gpu_tasks_from_a_scalar_offer_carry_only_the_resource():
    jobs = [{"name": "ps", "num": 1, "cpus": 0.5, "mem": 256},
            {"name": "worker", "num": 2, "cpus": 1, "mem": 512, "gpus": 1}]
    run = RunSpec(image=IMAGE)
    jobs, infos, _ = launch_all(jobs, run, [offer("gpu", gpus=4), offer("cpu")])
    for name in ("worker:0", "worker:1"):
        info = infos[name]
        [gpus] = resources_named(info, "gpus")
        assert gpus["type"] == "SCALAR" and gpus["scalar"] == {"value": 1}
        assert info["agent_id"] == {"value": "agent-gpu"}
        # Mesos' nvidia isolator gives the task the GPUs of its resource.
        assert info["container"] == container_info(run)
    # The GPU-less ps stays off the GPU agent when another agent can take it.
    assert infos["ps:0"]["agent_id"] == {"value": "agent-cpu"}
    assert not resources_named(infos["ps:0"], "gpus")


def test_gpu_tasks_from_a_set_offer_get_distinct_devices():
    jobs = [{"name": "worker", "num": 2, "cpus": 1, "mem": 512, "gpus": 2}]
    run = RunSpec(image=IMAGE)
    _, infos, _ = launch_all(jobs, run, [offer("o1", gpu_set=["7", "3", "0", "1"])])
    seen = []
    for info in infos.values():
        [gpus] = resources_named(info, "gpus")
        assert gpus["type"] == "SET"
        seen += gpus["set"]["item"]
        assert info["container"] == container_info(run)
    assert sorted(seen) == ["0", "1", "3", "7"]


def test_gpu_capability_is_always_declared():
    # Mesos' --filter_gpu_resources=true (the default) hides GPU agents from
    # frameworks without it, even for CPU-only runs.
    for jobs in ([Job("worker")], [Job("worker", gpus=1)]):
        capabilities = framework_info(RunSpec(), jobs)["capabilities"]
        assert {"type": "GPU_RESOURCES"} in capabilities
    capabilities = framework_info(RunSpec(role="ml/team"), [Job("worker")])["capabilities"]
    assert {"type": "MULTI_ROLE"} in capabilities


def test_a_run_in_a_role_is_offered_reservations_refined_to_it():
    # Mesos' allocator drops every resource whose reservations were refined
    # (a parent's reservation handed on to ml/team) from the offers of a
    # framework without RESERVATION_REFINEMENT (stripIncapableResources,
    # src/master/allocator/mesos/hierarchical.cpp; docs/reservation.md).
    capabilities = framework_info(RunSpec(role="ml/team"), [Job("worker")])["capabilities"]
    assert {"type": "RESERVATION_REFINEMENT"} in capabilities
    # Without a role tfmesos takes unreserved ("*") resources only.
    assert {"type": "RESERVATION_REFINEMENT"} not in framework_info(
        RunSpec(), [Job("worker")])["capabilities"]


def test_the_schema_catches_a_misspelt_field():
    run = RunSpec(image=IMAGE, containerizer="DOCKER")
    _, infos, driver = launch_all(PS_AND_WORKERS, run, [offer("o1")])
    call = copy.deepcopy(driver.accepts()[0])
    info = call["accept"]["operations"][0]["launch"]["task_infos"][0]
    info["container"]["docker"]["force_pull"] = True     # the field is force_pull_image
    with pytest.raises(SchemaError, match=r"task_infos\[0\]\.container\.docker\.force_pull: "
                                          r"unknown field"):
        validate(call)
    call = copy.deepcopy(driver.accepts()[0])
    call["accept"]["operations"][0]["launch"]["task_infos"][0]["container"]["volumes"][0][
        "mode"] = "ro"
    with pytest.raises(SchemaError, match=r"volumes\[0\]\.mode"):
        validate(call)


# -- what the local master makes of them ------------------------------------------

def local_launch(info, gpu_ids=()):
    plan = plan_task(info)
    return build_launch(plan, info["task_id"]["value"], "fw-1", info["agent_id"]["value"],
                        "/tmp/sandbox", list(gpu_ids), bool(gpu_ids), {"PATH": "/host/bin"})


@pytest.mark.parametrize("kind", ["MESOS", "DOCKER"])
def test_local_master_runs_them_as_containers(kind):
    run = RunSpec(image=IMAGE, containerizer=kind, force_pull=True,
                  volumes=("/nfs/data:/data:ro",), env=("FOO=bar",))
    _, infos, _ = launch_all(PS_AND_WORKERS, run, [offer("o1")])
    launch = local_launch(infos["worker:0"])
    assert (launch.image, launch.containerizer, launch.force_pull) == (IMAGE, kind, True)
    assert launch.volumes == [("/etc/passwd", "/etc/passwd", "RO"),
                              ("/etc/group", "/etc/group", "RO"), ("/nfs/data", "/data", "RO")]
    assert launch.argv() == ["/bin/sh", "-c", "exec python3 -m " + TASK_ENTRY]
    kwargs = container_kwargs(launch)
    assert kwargs["image"] == IMAGE and kwargs["network_mode"] == "host"
    # The sandbox where a Mesos agent maps it (--sandbox_directory), last as
    # src/docker/docker.cpp's RunOptions::create adds it.
    assert kwargs["volumes"] == ["/etc/passwd:/etc/passwd:ro", "/etc/group:/etc/group:ro",
                                 "/nfs/data:/data:ro", "/tmp/sandbox:/mnt/mesos/sandbox:rw"]
    env = kwargs["environment"]
    assert env["MESOS_SANDBOX"] == "/mnt/mesos/sandbox"
    assert env["FOO"] == "bar" and env["TFMESOS_RENDEZVOUS"] == "127.0.0.1:40123"
    assert "PATH" not in env and "PYTHONPATH" not in env   # the image's own PATH rules


def test_local_master_gpu_task_gets_the_agents_gpus():
    jobs = [{"name": "worker", "num": 1, "cpus": 1, "mem": 512, "gpus": 2}]
    _, infos, _ = launch_all(jobs, RunSpec(image=IMAGE), [offer("o1", gpus=2)])
    launch = local_launch(infos["worker:0"], gpu_ids=["0", "1"])
    assert launch.docker_parameters == []
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "0,1"
    kwargs = container_kwargs(launch)
    [request] = kwargs["device_requests"]
    assert request["DeviceIDs"] == ["0", "1"] and request["Capabilities"] == [["gpu"]]
    assert kwargs["environment"]["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_gpus_parameter_must_agree_with_the_assigned_gpus():
    for value in ("2", "all", "device=1,0", '"device=0,1"'):
        check_gpus_parameter(value, ["0", "1"])
    with pytest.raises(RunnerError, match="names other GPUs than the 0,1"):
        check_gpus_parameter("device=0,2", ["0", "1"])
    with pytest.raises(RunnerError, match="the task's GPU count 2"):
        check_gpus_parameter("3", ["0", "1"])
    with pytest.raises(RunnerError, match="the task holds no GPUs"):
        check_gpus_parameter("1", [])


def test_the_task_side_reads_what_the_taskinfo_sets():
    """The task environment's contract (``protocol.task_env``) across the seam:
    the task side's ``TaskEnv`` built from a TaskInfo's own variables."""
    from tfmesos.task.task_environ import TaskEnv

    _, infos, _ = launch_all(PS_AND_WORKERS, RunSpec(name="tfrun"), [offer("o1")])
    for info in infos.values():
        env = TaskEnv.from_environ(variables(info))
        assert env.rendezvous == ("127.0.0.1", 40123) and env.secret == SECRET
        assert env.task_id == info["task_id"]["value"] and env.host == "host-o1"
        [ports] = resources_named(info, "ports")
        assert env.port == ports["ranges"]["range"][0]["begin"]
