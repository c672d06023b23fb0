"""What a ``TaskLaunch`` becomes as a Docker container's options
(``container_kwargs``: the ``docker`` SDK's ``containers.create``
arguments), for the Docker runner (``docker_runner``). Pure: no engine.

A task's container:

* runs ``launch.argv()`` in ``launch.image`` on the host network, with
  ``launch.volumes`` and the sandbox bind-mounted at ``/mnt/mesos/sandbox``
  (``SANDBOX_DIRECTORY``), never at its host path, as a Mesos agent maps it
  (its ``--sandbox_directory``, src/slave/flags.cpp);
* under the DOCKER containerizer, as Mesos' Docker containerizer runs it
  (src/docker/docker.cpp, ``RunOptions::create`` and ``Docker::run``): named
  ``mesos-<container id>`` (src/slave/containerizer/docker.hpp,
  ``Container::name``), with ``MESOS_SANDBOX=/mnt/mesos/sandbox`` and
  ``MESOS_CONTAINER_NAME`` set, no ``--init`` (the command is PID 1) and no
  ``-w`` (the image's ``WORKDIR``, ``/`` when it sets none); without a
  shell, the image's entrypoint runs with ``launch.argv()`` as its command;
* under the MESOS containerizer (an image in ``mesos.image``), as its
  launch does for a container with a root filesystem
  (src/slave/containerizer/mesos/containerizer.cpp, ``_launch``):
  ``MESOS_SANDBOX=/mnt/mesos/sandbox`` and the sandbox as working
  directory; Docker's ``--init`` (tini) is PID 1 and passes ``terminate``'s
  SIGTERM on to the command, as Mesos' command executor signals the task;
  the image's entrypoint never runs (the docker/runtime isolator's
  ``getLaunchCommand``: the command has a value);
* gets ``launch.env`` minus the variables that only describe the host
  (``PATH``, ``HOME``, ``PYTHONPATH``, ``VIRTUAL_ENV``, ...), so the image's
  own ``PATH`` stays in force; a DOCKER container only the task's own
  variables (``launch.task_env``), its GPUs' and ``MESOS_ALLOCATION_ROLE``,
  as Mesos' (the executor's variables stay with its executor);
* runs as ``launch.user``: a name known on this host becomes its
  ``uid:gid`` (the sandbox belongs to this host), anything else goes to
  Docker as given;
* gets the GPUs the agent assigned (``launch.gpu_ids``) as a device
  request; a ``gpus`` docker parameter (tfmesos' DOCKER containerizer tasks
  carry one for real Mesos) must agree with them;
* under an isolating master (``launch.limits``), is held to the task's
  resources by the engine as Mesos' Docker containerizer does it
  (src/docker/docker.cpp, ``RunOptions::create``): ``--memory`` =
  max(mem, 32 MB), ``--cpu-shares`` = 1024 x cpus, and with
  ``--cgroups_enable_cfs`` a CFS cap (here ``nano_cpus``, the engine's
  ``--cpus``); the task's own docker parameters win;
* is labelled ``mesos_local.managed=1`` and ``mesos_local.task-id=<task id>``
  (and ``mesos_local.master``: whose orphan it would be).
"""

from mesos_local.cleanup import boot_id, this_master
from mesos_local.containerizer.docker_engine import MANAGED_LABEL
from mesos_local.containerizer.runner import RunnerError

__all__ = ["HOST_ONLY_ENV", "container_env", "container_user", "container_kwargs",
           "check_gpus_parameter", "TASK_LABEL", "MASTER_LABEL", "SANDBOX_DIRECTORY",
           "owner_labels"]

TASK_LABEL = "mesos_local.task-id"
# Where a container finds its sandbox: a Mesos agent's --sandbox_directory
# default (src/slave/flags.cpp), for both containerizers.
SANDBOX_DIRECTORY = "/mnt/mesos/sandbox"
# The master that made a container (cleanup.this_master): its orphans are removed;
# and the boot of its host (cleanup.boot_id): another host's are never judged.
MASTER_LABEL = "mesos_local.master"
HOST_LABEL = "mesos_local.boot"

# Variables that describe the host, not the task: they would override the
# image's own settings (PATH, LANG), point at host paths that do not exist in
# the container (HOME, VIRTUAL_ENV, PYTHONPATH, TMPDIR) or configure host tools.
HOST_ONLY_ENV = frozenset("""
    PATH HOME USER LOGNAME SHELL PWD OLDPWD SHLVL HOSTNAME MAIL TERM _
    PYTHONPATH PYTHONHOME PYTHONSTARTUP PYTHONUSERBASE PYTHONEXECUTABLE
    LD_LIBRARY_PATH LD_PRELOAD VIRTUAL_ENV VIRTUAL_ENV_PROMPT
    TMPDIR TMP TEMP LANG LANGUAGE DISPLAY
""".split())
HOST_ONLY_ENV_PREFIXES = ("LC_", "CONDA_", "PYENV_", "PIP_", "XDG_", "SSH_")

# `docker run --<key>` options (Mesos' DockerInfo.parameters) -> SDK kwargs.
_BOOL = {"": True, "1": True, "true": True, "yes": True,
         "0": False, "false": False, "no": False}


def _bool(key, value):
    try:
        return _BOOL[value.strip().lower()]
    except KeyError:
        raise RunnerError("docker parameter %s=%r: expected true or false" % (key, value)) from None


def _int(key, value):
    try:
        return int(value)
    except ValueError:
        raise RunnerError("docker parameter %s=%r: expected an integer" % (key, value)) from None


def _key_value(key, value, sep="="):
    name, found, val = value.partition(sep)
    if not found or not name:
        raise RunnerError("docker parameter %s=%r: expected NAME%sVALUE" % (key, value, sep))
    return name, val


def _ulimit(key, value):
    import docker.types
    name, limits = _key_value(key, value)
    soft, _, hard = limits.partition(":")
    return docker.types.Ulimit(name=name, soft=_int(key, soft), hard=_int(key, hard or soft))


def _text(key, value):
    return value


def _cpus(key, value):
    try:
        return int(float(value) * 1e9)
    except ValueError:
        raise RunnerError("docker parameter %s=%r: expected a number of CPUs" % (key, value)) from None


# key -> (SDK kwarg, kind, converter); kind: "set" (last wins), "list"
# (repeatable), "dict" (repeatable NAME=VALUE).
_PARAMETERS = {
    "memory": ("mem_limit", "set", _text),
    "memory-swap": ("memswap_limit", "set", _text),
    "memory-reservation": ("mem_reservation", "set", _text),
    "memory-swappiness": ("mem_swappiness", "set", _int),
    "shm-size": ("shm_size", "set", _text),
    "cpus": ("nano_cpus", "set", _cpus),
    "cpu-shares": ("cpu_shares", "set", _int),
    "cpu-period": ("cpu_period", "set", _int),
    "cpu-quota": ("cpu_quota", "set", _int),
    "cpuset-cpus": ("cpuset_cpus", "set", _text),
    "cpuset-mems": ("cpuset_mems", "set", _text),
    "pids-limit": ("pids_limit", "set", _int),
    "oom-kill-disable": ("oom_kill_disable", "set", _bool),
    "oom-score-adj": ("oom_score_adj", "set", _int),
    "privileged": ("privileged", "set", _bool),
    "read-only": ("read_only", "set", _bool),
    "init": ("init", "set", _bool),
    "ipc": ("ipc_mode", "set", _text),
    "pid": ("pid_mode", "set", _text),
    "uts": ("uts_mode", "set", _text),
    "userns": ("userns_mode", "set", _text),
    "runtime": ("runtime", "set", _text),
    "hostname": ("hostname", "set", _text),
    "stop-signal": ("stop_signal", "set", _text),
    "cap-add": ("cap_add", "list", _text),
    "cap-drop": ("cap_drop", "list", _text),
    "device": ("devices", "list", _text),
    "group-add": ("group_add", "list", _text),
    "security-opt": ("security_opt", "list", _text),
    "dns": ("dns", "list", _text),
    "ulimit": ("ulimits", "list", _ulimit),
    "label": ("labels", "dict", _key_value),
    "sysctl": ("sysctls", "dict", _key_value),
    "add-host": ("extra_hosts", "dict", lambda k, v: _key_value(k, v, ":")),
    "tmpfs": ("tmpfs", "dict", lambda k, v: (v.partition(":")[0], v.partition(":")[2])),
    "env": ("environment", "dict", _key_value),
    "e": ("environment", "dict", _key_value),
    "user": ("user", "set", lambda k, v: container_user(v)),
    "u": ("user", "set", lambda k, v: container_user(v)),
}
# What the agent itself decides (as Mesos' Docker containerizer does): a
# parameter may not change it.
_MANAGED_PARAMETERS = {"net", "network", "name", "workdir", "w",
                       "volume", "v", "mount", "entrypoint", "gpus", "rm", "detach", "d"}


def container_env(env, gpu_ids=()):
    """The task's environment as the container gets it: ``env`` minus the
    host-only variables (``HOST_ONLY_ENV`` and prefixes). With GPUs, the
    container sees only its own devices, numbered from 0, so a
    ``CUDA_VISIBLE_DEVICES`` naming host indices is renumbered."""
    out = {k: v for k, v in env.items()
           if k not in HOST_ONLY_ENV and not k.startswith(HOST_ONLY_ENV_PREFIXES)}
    if gpu_ids and "CUDA_VISIBLE_DEVICES" in out:
        out["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(gpu_ids)))
    # An image may declare NVIDIA_VISIBLE_DEVICES=all (the tfmesos image does,
    # for Mesos' GPU volume): under an NVIDIA runtime that would hand the task
    # every GPU. It gets its own, or none.
    out.setdefault("NVIDIA_VISIBLE_DEVICES", ",".join(str(i) for i in gpu_ids) or "void")
    return out


# What the agent sets in a task's environment that a DOCKER container gets
# too: its GPUs (as Mesos' Nvidia support does) and its allocation role
# (RunOptions::create, src/docker/docker.cpp).
_AGENT_SET = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "MESOS_ALLOCATION_ROLE")


def _given_env(launch):
    """A DOCKER container's variables: the task's own
    (CommandInfo.environment) and ``_AGENT_SET``, not its executor's
    (executorEnvironment's MESOS_DIRECTORY, a host path, MESOS_SLAVE_ID,
    LIBPROCESS_*: the mesos-docker-executor's) nor the agent's environment."""
    if launch.task_env is None:
        return launch.env
    given = dict(launch.task_env)
    given.update((name, launch.env[name]) for name in _AGENT_SET if name in launch.env)
    return given


def container_user(user):
    """``uid:gid`` for a user named on this host (the sandbox and volumes are
    this host's files, and the image need not know the name); a numeric
    user, or a name this host does not know, is passed on as given."""
    import grp
    import pwd

    user = str(user)
    name, _, group = user.partition(":")
    if name.isdigit() and (not group or group.isdigit()):
        return user
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, ValueError):
        return user
    if not group:
        gid = entry.pw_gid
    elif group.isdigit():
        gid = int(group)
    else:
        try:
            gid = grp.getgrnam(group).gr_gid
        except KeyError:
            return user
    return "%d:%d" % (entry.pw_uid, gid)


def check_gpus_parameter(value, gpu_ids):
    """A ``gpus`` docker parameter (what tfmesos' DOCKER containerizer tasks
    carry for real Mesos: ``N``, ``all`` or ``device=0,1``) must agree with
    the GPUs the agent assigned to the task (``gpu_ids``); the container then
    gets exactly those through a device request, as the agent decides which
    GPUs a task holds. Raises ``RunnerError`` when they disagree."""
    text = value.strip().strip("\"'")
    if not gpu_ids:
        raise RunnerError("docker parameter gpus=%r, but the task holds no GPUs: ask for them "
                          "as the task's gpus resource (TaskInfo.resources)" % value)
    if text == "all":
        return
    if text.startswith("device="):
        ids = [i.strip() for i in text[len("device="):].split(",") if i.strip()]
        if sorted(ids) != sorted(str(i) for i in gpu_ids):
            raise RunnerError("docker parameter gpus=%r names other GPUs than the %s the agent "
                              "assigned to the task" % (value, ",".join(map(str, gpu_ids))))
        return
    if not text.isdigit() or int(text) != len(gpu_ids):
        raise RunnerError("docker parameter gpus=%r: expected all, device=IDS or the task's "
                          "GPU count %d" % (value, len(gpu_ids)))


def _volume_spec(host, container, mode):
    mode_flag = {"RW": "rw", "RO": "ro"}.get(str(mode).upper())
    if mode_flag is None:
        raise RunnerError("volume %s:%s has mode %r; expected RW or RO" % (host, container, mode))
    for path in (host, container):
        # The engine takes a ',' in a bind's path (its --mount syntax would
        # not); a ':' would split the bind.
        if not path.startswith("/") or ":" in path:
            raise RunnerError("volume path %r must be absolute and contain no ':'" % path)
    return "%s:%s:%s" % (host, container, mode_flag)


def container_kwargs(launch, name=None):
    """The ``docker`` SDK ``containers.create`` keyword arguments for a
    ``TaskLaunch`` (pure; raises ``RunnerError`` for an unknown or managed
    docker parameter or a bad volume)."""
    import docker.types

    labels = {MANAGED_LABEL: "1", TASK_LABEL: launch.task_id,
              "mesos_local.framework-id": launch.framework_id,
              "mesos_local.agent-id": launch.agent_id}
    docker_containerizer = launch.containerizer == "DOCKER"
    environment = container_env(_given_env(launch) if docker_containerizer else launch.env,
                                launch.gpu_ids)
    # Both containerizers map the sandbox at the agent's --sandbox_directory
    # and say so in MESOS_SANDBOX: src/docker/docker.cpp (RunOptions::create:
    # the task's variables, then MESOS_SANDBOX = the mapped directory and
    # MESOS_CONTAINER_NAME; the sandbox's volume last) and
    # src/slave/containerizer/mesos/containerizer.cpp (_launch: MESOS_SANDBOX
    # is flags.sandbox_directory for a container with a root filesystem).
    environment["MESOS_SANDBOX"] = SANDBOX_DIRECTORY
    if docker_containerizer and name is not None:
        environment["MESOS_CONTAINER_NAME"] = name
    kwargs = {
        "image": launch.image,
        "name": name,
        "network_mode": "host",
        "volumes": [_volume_spec(*v) for v in launch.volumes]
                   + [_volume_spec(launch.sandbox, SANDBOX_DIRECTORY, "RW")],
        "environment": environment,
        "labels": labels,
        # Docker::run (src/docker/docker.cpp) passes no --init: a DOCKER task's
        # command is PID 1. The Mesos containerizer's task is no PID 1 (its
        # command executor runs it and signals it): tini stands in.
        "init": not docker_containerizer,
        # No setuid way back to root inside the container (planning refuses
        # root users; a setuid binary in the image would undo that).
        "security_opt": ["no-new-privileges"],
        "stdin_open": False,
        "tty": False,
    }
    if not docker_containerizer:
        # The Mesos containerizer makes the sandbox a container's working
        # directory (containerizer.cpp, _launch: flags.sandbox_directory when
        # the container has a root filesystem). Docker::run passes no -w: a
        # DOCKER task starts in the image's WORKDIR.
        kwargs["working_dir"] = SANDBOX_DIRECTORY
    argv = launch.argv()
    if launch.shell or not docker_containerizer:
        # The image's entrypoint is replaced for a shell command, and by the
        # Mesos containerizer for any command with a value (which planning
        # asks for): the docker/runtime isolator's getLaunchCommand. The
        # Docker containerizer keeps it: `docker run IMAGE value arguments...`.
        kwargs["entrypoint"] = argv
    else:
        kwargs["command"] = argv
    if launch.user and launch.containerizer != "DOCKER":
        # Mesos' Docker containerizer runs `docker run` without --user
        # (src/docker/docker.cpp): a DOCKER task runs as the image's user
        # unless a `user` docker parameter says otherwise.
        kwargs["user"] = container_user(launch.user)
    if launch.limits is not None:
        limits = launch.limits
        if "cgroups/mem" in limits.isolators:
            kwargs["mem_limit"] = limits.memory_bytes
        if "cgroups/cpu" in limits.isolators:
            kwargs["cpu_shares"] = limits.cpu_shares
            if limits.cfs:
                kwargs["nano_cpus"] = int(limits.cpus * 1e9)
    if launch.gpu_ids:
        kwargs["device_requests"] = [docker.types.DeviceRequest(
            device_ids=[str(i) for i in launch.gpu_ids], capabilities=[["gpu"]])]
    for key, value in launch.docker_parameters:
        key = str(key).lstrip("-")
        value = "" if value is None else str(value)
        if key == "gpus":
            check_gpus_parameter(value, launch.gpu_ids)
            continue
        if key in _MANAGED_PARAMETERS:
            raise RunnerError("docker parameter %r is set by the agent and cannot be changed" % key)
        if key not in _PARAMETERS:
            raise RunnerError("unknown docker parameter %r (supported: %s)"
                              % (key, ", ".join(sorted(_PARAMETERS))))
        kwarg, kind, convert = _PARAMETERS[key]
        converted = convert(key, value)
        if kind == "set":
            kwargs[kwarg] = converted
        elif kind == "list":
            kwargs.setdefault(kwarg, []).append(converted)
        else:
            k, v = converted
            kwargs.setdefault(kwarg, {})[k] = v
    labels.update({MANAGED_LABEL: "1", TASK_LABEL: launch.task_id})   # never overridden
    labels.update(owner_labels())
    return kwargs


def owner_labels():
    """The labels that make a container this process's (``MASTER_LABEL``:
    ``cleanup.this_master()``) and its host's (``HOST_LABEL``: ``boot_id``;
    none without /proc): once the process is gone, ``docker_runner.
    remove_orphans`` removes the container, on its host only."""
    owner, boot = this_master(), boot_id()
    return {**({MASTER_LABEL: owner} if owner else {}), **({HOST_LABEL: boot} if boot else {})}
