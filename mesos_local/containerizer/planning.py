"""From a TaskInfo to what a local agent runs: ``plan_task`` checks a
(schema-valid) TaskInfo and turns it into a ``TaskPlan``;
``check_container_user`` refuses root containers where root is not
allowed; ``build_launch`` makes the plan, placed on an agent, into the
runner's ``TaskLaunch``.

What a container may do: never privileged, never the host's ``/`` as a
volume; unless root is allowed (see ``LocalMaster(allow_root=...)``), not
root and none of the docker parameters that lift the user boundary. Mesos
itself leaves this to authorization (the ``run_tasks`` ACL that keeps
principals from running tasks as ``root``, docs/authorization.md).

Pure functions: the master calls them with its lock held.
"""

import base64
import dataclasses
import logging
import posixpath
import pwd
from typing import Optional

from ..ids import id_error
from .runner import TaskLaunch

log = logging.getLogger(__name__)

NO_DOCKER_MESSAGE = ("the local master cannot run container images: "
                     "no Docker engine configured")


PRIVILEGED_MESSAGE = ("privileged containers are refused by the local master (a privileged "
                      "container is root on this host): drop docker.privileged and the "
                      "'privileged' docker parameter")
ROOT_HINT = ("use a non-root FrameworkInfo.user or CommandInfo.user, or let the master "
             "run root containers (mesos-local --allow-root, "
             "LocalMaster(allow_root=True))")

# Docker parameters that lift the user boundary of a container (capabilities,
# host devices, extra groups such as docker or disk, security profiles, the
# host's user namespace): refused where root is.
_ROOT_PARAMETERS = ("cap-add", "device", "group-add", "security-opt", "userns")
_NO_NEW_PRIVILEGES = ("no-new-privileges", "no-new-privileges:true", "no-new-privileges=true")


class TaskInvalid(ValueError):
    """A TaskInfo the local master refuses: TASK_ERROR with this message."""


def check_id(kind, value):
    """Mesos' ID rules (``validateTaskID``, ``validateExecutorID``:
    ``ids.id_error``); ``kind``: which id, for the message."""
    error = id_error(value)
    if error is not None:
        raise TaskInvalid("%s: %s" % (kind, error))


@dataclasses.dataclass
class TaskPlan:
    command: str
    shell: bool = True
    arguments: list = dataclasses.field(default_factory=list)   # after argv[0]
    # Without a shell, CommandInfo.arguments[0] ("" without arguments): argv[0];
    # None under the DOCKER containerizer, whose argv[0] is the value.
    argv0: Optional[str] = None
    env: dict = dataclasses.field(default_factory=dict)
    user: Optional[str] = None
    image: Optional[str] = None
    containerizer: Optional[str] = None
    force_pull: bool = False
    volumes: list = dataclasses.field(default_factory=list)
    docker_parameters: list = dataclasses.field(default_factory=list)
    uris: list = dataclasses.field(default_factory=list)
    kill_grace: Optional[float] = None
    max_completion: Optional[float] = None
    # SANDBOX_PATH volumes: (PARENT or SELF, path, container_path)
    sandbox_volumes: list = dataclasses.field(default_factory=list)


def duration_seconds(duration):
    # float: a strict master keeps numbers given as JSON strings ("1e9") as they came.
    return float(duration["nanoseconds"]) / 1e9


def plan_custom_task(info):
    """The plan of a task a custom executor runs: no command of the
    master's, only its KillPolicy's grace period."""
    return TaskPlan(command="", kill_grace=_duration_field(info.get("kill_policy", {}),
                                                           "grace_period"))


def plan_task(info):
    """What the command executor would run for this (schema-valid) TaskInfo.
    Raises TaskInvalid for what the local master cannot or will not run."""
    check_id("TaskID", info["task_id"]["value"])
    if "executor" in info:   # a custom executor's task: check_executor, plan_executor
        raise TaskInvalid(BOTH_MESSAGE)
    command = info.get("command")
    if command is None:
        raise TaskInvalid("TaskInfo needs 'command' (with 'container' for an image): "
                          "the local master runs command tasks only")
    container = info.get("container")
    fields = _plan_container(container) if container is not None else {}
    fields.update(_plan_command(command, fields.get("containerizer")))
    fields["env"] = _plan_environment(command, fields.get("containerizer"))
    fields["kill_grace"] = _duration_field(info.get("kill_policy", {}), "grace_period")
    fields["max_completion"] = _duration_field(info, "max_completion_time")
    if info.get("health_check") or info.get("check"):
        log.warning("task %s: health checks and checks are not run by the local master",
                    info["task_id"]["value"])
    return TaskPlan(**fields)


# validateTask (src/master/validation.cpp)
BOTH_MESSAGE = ("Task should have at least one (but not both) of CommandInfo or ExecutorInfo "
                "present")


def check_executor(info, framework_id):
    """The ExecutorInfo of a (schema-valid) TaskInfo that names one, checked
    as Mesos' master checks it (``task::internal::validateTask`` and
    ``executor::internal::validate``, src/master/validation.cpp, in their
    order and wording) and with its ``framework_id`` filled in, as the
    master fills it in; TaskInvalid otherwise."""
    if "command" in info:
        raise TaskInvalid(BOTH_MESSAGE)
    executor = dict(info["executor"])
    kind = _check_executor_info(executor, framework_id)
    if kind is not None and kind != "CUSTOM":
        raise TaskInvalid("'ExecutorInfo.type' must be 'CUSTOM'")
    if "command" not in executor:
        raise TaskInvalid("'ExecutorInfo.command' must be set")
    return executor


def _check_executor_info(executor, framework_id):
    """``executor::internal::validate``'s checks (src/master/validation.cpp:
    the id, the type's command and container, the FrameworkID, the shutdown
    grace period) in its order and wording, ``executor``'s ``framework_id``
    filled in; its type (None when unset). TaskInvalid otherwise."""
    check_id("ExecutorID", executor["executor_id"]["value"])
    kind = executor.get("type")
    if kind == "DEFAULT" and "command" in executor:
        raise TaskInvalid("'ExecutorInfo.command' must not be set for 'DEFAULT' executor")
    container = executor.get("container", {})
    if kind == "DEFAULT" and container and container["type"] != "MESOS":
        raise TaskInvalid("'ExecutorInfo.container.type' must be 'MESOS' for 'DEFAULT' executor")
    if kind == "DEFAULT" and container.get("mesos", {}).get("image") is not None:
        raise TaskInvalid("'ExecutorInfo.container.mesos.image' must not be set for 'DEFAULT' "
                          "executor")
    if kind == "CUSTOM" and "command" not in executor:
        raise TaskInvalid("'ExecutorInfo.command' must be set for 'CUSTOM' executor")
    actual = executor.get("framework_id", {}).get("value")
    if actual is not None and actual != framework_id:
        raise TaskInvalid("ExecutorInfo has an invalid FrameworkID (Actual: %s vs Expected: %s)"
                          % (actual, framework_id))
    executor["framework_id"] = {"value": framework_id}
    if duration_seconds(executor.get("shutdown_grace_period", {"nanoseconds": 0})) < 0:
        raise TaskInvalid("ExecutorInfo's 'shutdown_grace_period' must be non-negative")
    return kind


MIN_CPUS = 0.01     # src/master/constants.hpp
MIN_MEM = 32.0      # MB


def check_group_executor(executor, framework_id, resources):
    """The ExecutorInfo of a LAUNCH_GROUP, checked as Mesos' master checks
    it (``group::internal::validateExecutor``, src/master/validation.cpp:
    ``executor::internal::validate`` first, then a type, no Docker, at
    least MIN_CPUS, MIN_MEM and some disk), its ``framework_id`` filled in;
    ``resources``: its parsed resources. TaskInvalid otherwise."""
    executor = dict(executor)
    executor_id = executor["executor_id"]["value"]
    kind = _check_executor_info(executor, framework_id)
    container = executor.get("container", {})
    if kind is None:
        raise TaskInvalid("'ExecutorInfo.type' must be set")
    if kind == "UNKNOWN":
        raise TaskInvalid("Unknown executor type")
    if container and container["type"] == "DOCKER":
        raise TaskInvalid("Docker ContainerInfo is not supported on the executor")
    cpus, mem = resources.get("cpus"), resources.get("mem")
    if cpus < MIN_CPUS:
        raise TaskInvalid("Executor '%s' uses less CPUs (%s) than the minimum required (%s)"
                          % (executor_id, "%g" % cpus if cpus else "None", MIN_CPUS))
    if mem < MIN_MEM:
        raise TaskInvalid("Executor '%s' uses less memory (%s) than the minimum required "
                          "(32MB)" % (executor_id, "%gMB" % mem if mem else "None"))
    if "disk" not in resources.scalars:
        raise TaskInvalid("Executor '%s' uses no disk" % executor_id)
    return executor


def plan_executor(executor):
    """What the agent runs for a (checked) custom ExecutorInfo: its
    ``command`` (in its ``container``), as a task's command is run."""
    command = executor["command"]
    container = executor.get("container")
    fields = _plan_container(container) if container is not None else {}
    fields.update(_plan_command(command, fields.get("containerizer")))
    fields["env"] = _plan_environment(command, fields.get("containerizer"))
    return TaskPlan(**fields)


def _plan_container(container):
    """The TaskPlan fields a ContainerInfo sets: image, containerizer,
    force_pull, volumes, docker_parameters."""
    fields = {"containerizer": container["type"]}
    if container["type"] == "MESOS":
        fields.update(_plan_mesos_image(container))
    else:
        fields.update(_plan_docker_image(container))
    volumes, sandbox_volumes = [], []
    for index, volume in enumerate(container.get("volumes", [])):
        if sum(key in volume for key in ("host_path", "image", "source")) != 1:
            # validateVolume (src/common/validation.cpp:213-229)
            raise TaskInvalid("Task's `ContainerInfo` is invalid: Invalid volume: Only one of "
                              "them should be set: 'host_path', 'image' and 'source'")
        source = volume.get("source", {})
        if source.get("type") == "SANDBOX_PATH":
            sandbox_volumes.append(_sandbox_volume(index, volume, source))
            continue
        if "host_path" not in volume:
            raise TaskInvalid("volumes[%d]: only host_path volumes are supported by the "
                              "local master" % index)
        _check_host_path(index, volume["host_path"])
        volumes.append((volume["host_path"], volume["container_path"], volume["mode"]))
    if volumes and fields.get("image") is None:
        raise TaskInvalid("volumes need a container image on the local master (a plain "
                          "process sees the host file system anyway)")
    fields["volumes"] = volumes
    if sandbox_volumes and fields.get("image") is not None:
        raise TaskInvalid("SANDBOX_PATH volumes are supported by the local master for tasks "
                          "without an image only")
    fields["sandbox_volumes"] = sandbox_volumes
    return fields


def _relative(path):
    """Whether ``path`` is relative and stays below where it starts."""
    normal = posixpath.normpath(path)
    return bool(path) and not posixpath.isabs(path) and normal != ".." \
        and not normal.startswith("../")


def _sandbox_volume(index, volume, source):
    """(PARENT or SELF, path, container_path) of a SANDBOX_PATH volume, as
    the ``volume/sandbox_path`` isolator takes it
    (src/slave/containerizer/mesos/isolators/volume/sandbox_path.cpp): a
    relative ``path`` in the parent's (the task group's executor's) or the
    task's own sandbox; here the ``container_path`` is a link to it in the
    task's sandbox, so it must be relative too (a plain process has no
    mount namespace to put it elsewhere)."""
    sandbox_path = source.get("sandbox_path")
    if sandbox_path is None:
        raise TaskInvalid("volumes[%d]: a SANDBOX_PATH volume needs 'source.sandbox_path'"
                          % index)
    kind = sandbox_path.get("type", "UNKNOWN")
    if kind not in ("PARENT", "SELF"):
        raise TaskInvalid("volumes[%d]: unknown SANDBOX_PATH volume type %s" % (index, kind))
    if not _relative(sandbox_path["path"]):
        raise TaskInvalid("volumes[%d]: the SANDBOX_PATH volume's path %r must be relative "
                          "and inside the sandbox" % (index, sandbox_path["path"]))
    if not _relative(volume["container_path"]) or "/" in volume["container_path"].strip("/"):
        raise TaskInvalid("volumes[%d]: container_path %r must be a name in the task's "
                          "sandbox for a task without an image on the local master"
                          % (index, volume["container_path"]))
    return kind, sandbox_path["path"], volume["container_path"].strip("/")


def _plan_mesos_image(container):
    if "docker" in container:
        raise TaskInvalid("ContainerInfo of type MESOS must not set 'docker' "
                          "(use mesos.image)")
    img = container.get("mesos", {}).get("image")
    if img is None:
        return {}
    if img["type"] != "DOCKER" or "docker" not in img:
        raise TaskInvalid("only DOCKER images (mesos.image.docker.name) are "
                          "supported by the local master")
    return {"image": img["docker"]["name"], "force_pull": not img.get("cached", True)}


def _plan_docker_image(container):
    docker = container.get("docker")
    if docker is None:
        raise TaskInvalid("ContainerInfo of type DOCKER needs 'docker'")
    if "mesos" in container:
        raise TaskInvalid("ContainerInfo of type DOCKER must not set 'mesos'")
    if docker.get("network", "HOST") != "HOST":
        raise TaskInvalid("docker network %s is not supported by the local master "
                          "(only HOST)" % docker["network"])
    if docker.get("port_mappings"):
        raise TaskInvalid("docker port_mappings are not supported by the local "
                          "master (HOST networking only)")
    parameters = [(p["key"], p["value"]) for p in docker.get("parameters", [])]
    if any(key == "name" for key, _ in parameters):
        # src/common/validation.cpp, validateContainerInfo (MESOS-8497: the
        # Docker containerizer names its containers), from the master's
        # validateContainerInfo (src/master/validation.cpp).
        raise TaskInvalid("Task's `ContainerInfo` is invalid: Parameter in DockerInfo must "
                          "not be 'name'")
    if docker.get("privileged") or any(_parameter_key(key) == "privileged"
                                       and value.strip().lower() not in ("0", "false", "no")
                                       for key, value in parameters):
        raise TaskInvalid(PRIVILEGED_MESSAGE)
    return {"image": docker["image"], "force_pull": docker.get("force_pull_image", False),
            "docker_parameters": parameters}


def _parameter_key(key):
    """A docker parameter's option name (``--cap-add`` -> ``cap-add``)."""
    return str(key).strip().lstrip("-")


def _check_host_path(index, host_path):
    """Refuse the host's root directory as a volume, however it is spelt
    (``//``, ``/./``, ``/..``, a symbolic link to it)."""
    normal = posixpath.normpath("/" + host_path.lstrip("/")) if host_path.startswith("/") \
        else host_path
    if normal == "/" or posixpath.realpath(normal) == "/":
        raise TaskInvalid("volumes[%d]: host_path %r is the host's root directory, which the "
                          "local master never mounts into a container: mount the directory "
                          "the task needs" % (index, host_path))


def container_uid(user):
    """The uid a container task runs as (``name``, ``uid`` or ``x:group``),
    or None when this host cannot tell (no user, or a name it does not know,
    which the image may map to root)."""
    name = str(user or "").partition(":")[0]
    if name.isdigit():
        return int(name)
    try:
        return pwd.getpwnam(name).pw_uid if name else None
    except KeyError:
        return None


def check_container_user(plan, framework_user, root_allowed):
    """The user a container task runs as (CommandInfo.user, else the
    framework's, as in Mesos); TaskInvalid when it is root, or may be, or
    the task asks for a parameter that lifts the user boundary, and
    ``root_allowed`` is false."""
    user = plan.user if plan.user is not None else framework_user
    if root_allowed:
        return user
    uid = container_uid(user)
    if uid is None:
        raise TaskInvalid("container user %r is not a user of this host, so the image could "
                          "make it root, and this master runs no root containers: %s"
                          % (user or "", ROOT_HINT))
    if uid == 0:
        raise TaskInvalid("container tasks may not run as root (user %r) on this master: %s"
                          % (user, ROOT_HINT))
    for key, value in plan.docker_parameters:
        key = _parameter_key(key)
        if key in _ROOT_PARAMETERS and not (key == "security-opt"
                                            and value.strip() in _NO_NEW_PRIVILEGES):
            raise TaskInvalid("docker parameter %s=%s lifts the container's user boundary, "
                              "which this master does not allow: %s" % (key, value, ROOT_HINT))
    return user


def _plan_command(command, containerizer=None):
    """The TaskPlan fields a CommandInfo sets, but the environment."""
    shell = command.get("shell", True)
    value = command.get("value")
    if shell and not value:
        raise TaskInvalid("CommandInfo.value (the shell command) must be set when shell "
                          "is true")
    arguments = list(command.get("arguments", []))
    if not shell:
        if not value:
            raise TaskInvalid("CommandInfo.value (the executable) must be set: the local "
                              "master does not run an image's default entrypoint")
        if containerizer == "DOCKER":
            # Mesos' Docker containerizer runs `docker run IMAGE value
            # arguments...` (src/docker/docker.cpp, Docker::RunOptions::create):
            # every argument follows the value, which is argv[0].
            return {"command": value, "shell": False, "arguments": arguments,
                    "user": command.get("user"), "uris": list(command.get("uris", []))}
        # Mesos execs 'value' with argv = arguments, arguments[0] being argv[0]
        # (src/slave/containerizer/mesos/launch.cpp, MesosContainerizerLaunch::
        # execute): TaskLaunch.exec_args gives the process runner both.
        return {"command": value, "shell": False, "arguments": arguments[1:],
                "argv0": arguments[0] if arguments else "", "user": command.get("user"),
                "uris": list(command.get("uris", []))}
    return {"command": value or "", "shell": shell, "arguments": arguments,
            "user": command.get("user"), "uris": list(command.get("uris", []))}


def _plan_environment(command, containerizer=None):
    """The task's variables, checked as Mesos' ``validateEnvironment``
    (src/common/validation.cpp) checks them. A VALUE secret is resolved
    as the ``environment_secret`` isolator's default resolver does, except
    under the Docker containerizer, which supports no secrets (docs/secrets.md):
    src/docker/docker.cpp copies each variable's ``value()``, empty for a
    SECRET variable, and so does this master."""
    env = {}
    for variable in command.get("environment", {}).get("variables", []):
        name = variable["name"]
        kind = variable.get("type", "VALUE")
        if kind == "VALUE":
            if "value" not in variable:
                raise TaskInvalid("Environment variable '%s' of type 'VALUE' must have a value "
                                  "set" % name)
            if "secret" in variable:
                raise TaskInvalid("Environment variable '%s' of type 'VALUE' must not have a "
                                  "secret set" % name)
            env[name] = variable["value"]
        elif kind == "SECRET":
            value = _secret_value(name, variable)
            env[name] = "" if containerizer == "DOCKER" else value
        else:
            raise TaskInvalid("Environment variable of type 'UNKNOWN' is not allowed")
    return env


def _secret_value(name, variable):
    """The value of a SECRET variable (``validateEnvironment`` and
    ``validateSecret``, src/common/validation.cpp)."""
    if "secret" not in variable:
        raise TaskInvalid("Environment variable '%s' of type 'SECRET' must have a secret set"
                          % name)
    if "value" in variable:
        raise TaskInvalid("Environment variable '%s' of type 'SECRET' must not have a value "
                          "set" % name)
    secret = variable["secret"]
    kind = secret.get("type", "UNKNOWN")
    invalid = "Environment variable '%s' specifies an invalid secret: " % name
    if kind == "VALUE" and "value" not in secret:
        raise TaskInvalid(invalid + "Secret of type VALUE must have the 'value' field set")
    if kind == "VALUE" and "reference" in secret:
        raise TaskInvalid(invalid + "Secret of type VALUE must not have the 'reference' "
                          "field set")
    if kind != "VALUE" or "value" not in secret:
        # A REFERENCE needs a secret resolver module (docs/secrets.md), which
        # this master has not; Mesos' default resolver fails it on the agent.
        raise TaskInvalid("environment variable %r: only secrets given by value are "
                          "supported by the local master" % name)
    data = base64.b64decode(secret["value"]["data"])
    if b"\0" in data:
        raise TaskInvalid("Environment variable '%s' specifies a secret containing null bytes, "
                          "which is not allowed in the environment" % name)
    return data.decode("utf-8", "surrogateescape")


def _duration_field(message, name):
    """Seconds of the DurationInfo ``message[name]`` (``task_checks``
    refused negative ones), None if unset."""
    if name not in message:
        return None
    return duration_seconds(message[name])


def gpu_count(resources):
    milli = resources.scalars.get("gpus", 0)
    if milli % 1000:
        raise TaskInvalid("gpus must be a whole number, got %s" % (milli / 1000.0))
    return milli // 1000


def build_launch(plan, task_id, framework_id, agent_id, sandbox, gpu_ids, agent_has_gpus,
                 base_env, netns=None, hidden_paths=(), nested=False):
    """The TaskLaunch of a task's (or an executor's) process: ``base_env``
    (``Executors.environment``), the ids and directory
    ``executorEnvironment`` (src/slave/slave.cpp) adds, ``MESOS_SANDBOX``
    (``MesosContainerizerProcess::_launch``,
    src/slave/containerizer/mesos/containerizer.cpp), then the plan's own
    variables. ``task_id`` is the executor id (a command task's is its task
    id). Nothing Mesos does not set: no ``MESOS_TASK_ID`` (Marathon's), no
    ``MESOS_AGENT_ID``. A ``nested`` container (a DEFAULT executor's task)
    gets ``MESOS_SANDBOX`` only: the agent launches it with no environment
    of its own (``Http::_launchContainer``, src/slave/http.cpp)."""
    env = dict(base_env)
    env["MESOS_SANDBOX"] = sandbox
    if not nested:
        env.update({
            "MESOS_DIRECTORY": sandbox, "MESOS_FRAMEWORK_ID": framework_id,
            "MESOS_SLAVE_ID": agent_id, "MESOS_EXECUTOR_ID": task_id,
        })
    # A task sees the GPUs it holds and no others. An agent without GPUs
    # hides the machine's, as a separate GPU-less host would have none; the
    # base environment (the submitter's, for a run's master) may name some.
    env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_ids)
    if not gpu_ids:
        env["NVIDIA_VISIBLE_DEVICES"] = "void"
    env.update(plan.env)
    return TaskLaunch(
        task_id=task_id, framework_id=framework_id, agent_id=agent_id, sandbox=sandbox,
        command=plan.command, arguments=list(plan.arguments), argv0=plan.argv0,
        shell=plan.shell, env=env, task_env=dict(plan.env),
        user=plan.user, image=plan.image,
        containerizer=plan.containerizer if plan.image else None,
        force_pull=plan.force_pull, volumes=list(plan.volumes),
        docker_parameters=list(plan.docker_parameters), gpu_ids=list(gpu_ids), netns=netns,
        hidden_paths=list(hidden_paths))


__all__ = ["NO_DOCKER_MESSAGE", "PRIVILEGED_MESSAGE", "BOTH_MESSAGE", "TaskInvalid", "check_id",
           "check_executor", "check_group_executor", "plan_executor", "TaskPlan",
           "duration_seconds", "plan_task", "plan_custom_task", "container_uid", "check_container_user",
           "gpu_count", "build_launch"]
