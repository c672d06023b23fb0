"""The agent side of the local master: what an agent offers, how a TaskInfo
becomes a ``TaskLaunch``, and the thread that runs, kills and reaps one task.

Nothing here touches the master's state; the master calls in with its lock
held only for the pure functions (``plan_task``), and a ``TaskProcess``
reports back through callbacks from its own thread.
"""

import base64
import dataclasses
import logging
import os
import re
import shutil
import signal
import subprocess
import tarfile
import threading
import time
import urllib.parse
import urllib.request
import zipfile
from typing import Optional

from .resources import Resources, to_milli
from .runner import ProcessRunner, RunnerError, TaskLaunch

log = logging.getLogger(__name__)

NO_DOCKER_MESSAGE = ("the local master cannot run container images: "
                     "no Docker engine configured")
_MEM_MARGIN_MB = 1024


class AgentSpecError(ValueError):
    """An AgentSpec with impossible values."""


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """What one local agent offers. ``None`` sizes it to this machine:
    cpus = ``os.cpu_count()``, mem = physical memory minus 1 GiB (half of it
    below 2 GiB, as a Mesos agent does), disk = free space of the work dir;
    gpus = the NVIDIA GPUs ``nvidia-smi -L`` lists (ids "0", "1", ...), an int
    n = n fake GPUs, a list = those ids. ``attributes``: name -> str (TEXT)
    or number (SCALAR)."""

    hostname: str = "127.0.0.1"
    cpus: Optional[float] = None
    mem: Optional[float] = None
    disk: Optional[float] = None
    ports: tuple = ((31000, 32000),)
    gpus: object = None
    attributes: Optional[dict] = None

    def __post_init__(self):
        if not isinstance(self.hostname, str) or not self.hostname:
            raise AgentSpecError("AgentSpec.hostname must be a non-empty string, got %r"
                                 % (self.hostname,))
        for name in ("cpus", "mem", "disk"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, (int, float)) or value < 0):
                raise AgentSpecError("AgentSpec.%s must be a number >= 0 or None, got %r"
                                     % (name, value))
        ports = []
        for item in self.ports or ():
            try:
                begin, end = (int(x) for x in item)
            except (TypeError, ValueError):
                raise AgentSpecError("AgentSpec.ports must be (begin, end) pairs, got %r"
                                     % (item,)) from None
            if not 0 < begin <= end <= 65535:
                raise AgentSpecError("AgentSpec.ports range %d-%d is not within 1-65535 "
                                     "with begin <= end" % (begin, end))
            ports.append((begin, end))
        object.__setattr__(self, "ports", tuple(ports))
        gpus = self.gpus
        if gpus is not None and not isinstance(gpus, bool) and isinstance(gpus, int):
            if gpus < 0:
                raise AgentSpecError("AgentSpec.gpus must be >= 0, got %d" % gpus)
        elif gpus is not None:
            if isinstance(gpus, (str, bytes, bool)) or not hasattr(gpus, "__iter__"):
                raise AgentSpecError("AgentSpec.gpus must be None, an int or a list of ids, "
                                     "got %r" % (gpus,))
            ids = tuple(str(g) for g in gpus)
            if len(set(ids)) != len(ids):
                raise AgentSpecError("AgentSpec.gpus lists an id twice: %r" % (ids,))
            object.__setattr__(self, "gpus", ids)
        attributes = dict(self.attributes or {})
        for key, value in attributes.items():
            if not isinstance(key, str) or not (
                    isinstance(value, str) or (isinstance(value, (int, float))
                                               and not isinstance(value, bool))):
                raise AgentSpecError("AgentSpec.attributes maps names to str or numbers, "
                                     "got %r: %r" % (key, value))
        object.__setattr__(self, "attributes", attributes)

    def resolve(self, work_dir):
        """Concrete (cpus, mem, disk, ports, gpu_ids) for this machine."""
        cpus = self.cpus if self.cpus is not None else float(os.cpu_count() or 1)
        mem = self.mem if self.mem is not None else _default_mem()
        disk = self.disk if self.disk is not None else float(
            shutil.disk_usage(work_dir).free // (1 << 20))
        if self.gpus is None:
            gpu_ids = detect_gpus()
        elif isinstance(self.gpus, int):
            gpu_ids = tuple(str(i) for i in range(self.gpus))
        else:
            gpu_ids = tuple(self.gpus)
        return cpus, mem, disk, self.ports, gpu_ids


def _default_mem():
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError, AttributeError):
        return 1024.0
    return float(total - _MEM_MARGIN_MB if total >= 2 * _MEM_MARGIN_MB else total // 2)


def detect_gpus(timeout=10):
    """Ids ("0", "1", ...) of the NVIDIA GPUs ``nvidia-smi -L`` lists; () if none."""
    if shutil.which("nvidia-smi") is None:
        return ()
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                             timeout=timeout, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    ids = []
    for line in out.splitlines():
        match = re.match(r"\s*GPU (\d+):", line)
        if match:
            ids.append(match.group(1))
    return tuple(ids)


class Agent:
    """One agent's bookkeeping: its resources and free GPU ids."""

    def __init__(self, agent_id, spec, work_dir, index):
        self.id = agent_id
        self.spec = spec
        self.index = index
        cpus, mem, disk, ports, gpu_ids = spec.resolve(work_dir)
        self.total = Resources.of(cpus=cpus, mem=mem, disk=disk, gpus=len(gpu_ids),
                                  ports=ports)
        self.gpu_ids = tuple(gpu_ids)
        self.free_gpus = list(gpu_ids)
        self.available = self.total.copy()   # neither offered nor used
        self.offered = Resources()
        self.used = Resources()
        self.registered_time = time.time()
        self.active = True
        self.tasks = {}                      # (framework_id, task_id) -> master Task
        self.offers = {}                     # offer_id -> master Offer
        self.directory = os.path.join(work_dir, "agents", agent_id)

    def take_gpus(self, count):
        ids, self.free_gpus = self.free_gpus[:count], self.free_gpus[count:]
        return ids

    def give_gpus(self, ids):
        order = {gpu: i for i, gpu in enumerate(self.gpu_ids)}
        self.free_gpus = sorted(set(self.free_gpus) | set(ids), key=order.get)

    def attributes_json(self):
        out = []
        for name, value in sorted(self.spec.attributes.items()):
            if isinstance(value, str):
                out.append({"name": name, "type": "TEXT", "text": {"value": value}})
            else:
                out.append({"name": name, "type": "SCALAR", "scalar": {"value": value}})
        return out

    def sandbox_path(self, framework_id, task_id):
        base = os.path.join(self.directory, "frameworks", framework_id, "tasks", task_id)
        path, run = base, 0
        while os.path.exists(path):  # a task id reused after the first one ended
            run += 1
            path = "%s.run%d" % (base, run)
        return path


# --- TaskInfo -> what to run ----------------------------------------------------

class TaskInvalid(ValueError):
    """A TaskInfo the local master refuses: TASK_ERROR with this message."""


_BAD_ID = re.compile(r"[/\\\x00-\x1f\x7f]")


def check_id(kind, value):
    """Mesos' ID rules (the id also names the sandbox directory)."""
    if not value:
        raise TaskInvalid("%s must not be empty" % kind)
    if value in (".", ".."):
        raise TaskInvalid("%s %r is not allowed ('.' and '..' are reserved)" % (kind, value))
    if _BAD_ID.search(value):
        raise TaskInvalid("%s %r contains '/', '\\' or control characters, which are "
                          "not allowed" % (kind, value))


@dataclasses.dataclass
class TaskPlan:
    command: str
    shell: bool = True
    arguments: list = dataclasses.field(default_factory=list)
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


def duration_seconds(duration):
    return int(duration["nanoseconds"]) / 1e9


def plan_task(info):
    """What the command executor would run for this (schema-valid) TaskInfo.
    Raises TaskInvalid for what the local master cannot or will not run."""
    check_id("TaskID", info["task_id"]["value"])
    if "executor" in info:
        raise TaskInvalid("custom executors (TaskInfo.executor) are not supported by the "
                          "local master; give the task a 'command' instead")
    command = info.get("command")
    if command is None:
        raise TaskInvalid("TaskInfo needs 'command' (with 'container' for an image): "
                          "the local master runs command tasks only")
    shell = command.get("shell", True)
    value = command.get("value")
    container = info.get("container")
    image = containerizer = None
    force_pull = False
    volumes, parameters = [], []
    if container is not None:
        containerizer = container["type"]
        if containerizer == "MESOS":
            if "docker" in container:
                raise TaskInvalid("ContainerInfo of type MESOS must not set 'docker' "
                                  "(use mesos.image)")
            img = container.get("mesos", {}).get("image")
            if img is not None:
                if img["type"] != "DOCKER" or "docker" not in img:
                    raise TaskInvalid("only DOCKER images (mesos.image.docker.name) are "
                                      "supported by the local master")
                image = img["docker"]["name"]
                force_pull = not img.get("cached", True)
        else:
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
            image = docker["image"]
            force_pull = docker.get("force_pull_image", False)
            parameters = [(p["key"], p["value"]) for p in docker.get("parameters", [])]
            if docker.get("privileged"):
                parameters.append(("privileged", "true"))
        for index, volume in enumerate(container.get("volumes", [])):
            if "host_path" not in volume:
                raise TaskInvalid("volumes[%d]: only host_path volumes are supported by the "
                                  "local master" % index)
            volumes.append((volume["host_path"], volume["container_path"], volume["mode"]))
        if volumes and image is None:
            raise TaskInvalid("volumes need a container image on the local master (a plain "
                              "process sees the host file system anyway)")
    if shell and not value:
        raise TaskInvalid("CommandInfo.value (the shell command) must be set when shell "
                          "is true")
    arguments = list(command.get("arguments", []))
    if not shell:
        if not value:
            raise TaskInvalid("CommandInfo.value (the executable) must be set: the local "
                              "master does not run an image's default entrypoint")
        # Mesos execs 'value' with argv = arguments, arguments[0] being argv[0]:
        # the runner builds argv as [command] + arguments, so drop argv[0].
        arguments = arguments[1:]
    env = {}
    for variable in command.get("environment", {}).get("variables", []):
        name = variable["name"]
        kind = variable.get("type", "VALUE")
        if kind == "VALUE":
            if "value" not in variable:
                raise TaskInvalid("environment variable %r of type VALUE needs 'value'" % name)
            env[name] = variable["value"]
        elif kind == "SECRET":
            secret = variable.get("secret")
            if secret is None or "value" not in secret:
                raise TaskInvalid("environment variable %r: only secrets given by value are "
                                  "supported by the local master" % name)
            env[name] = base64.b64decode(secret["value"]["data"]).decode("utf-8", "replace")
        else:
            raise TaskInvalid("environment variable %r has type UNKNOWN" % name)
    kill_grace = None
    if "grace_period" in info.get("kill_policy", {}):
        kill_grace = max(0.0, duration_seconds(info["kill_policy"]["grace_period"]))
    max_completion = None
    if "max_completion_time" in info:
        max_completion = max(0.0, duration_seconds(info["max_completion_time"]))
    if info.get("health_check") or info.get("check"):
        log.warning("task %s: health checks and checks are not run by the local master",
                    info["task_id"]["value"])
    return TaskPlan(command=value or "", shell=shell, arguments=arguments, env=env,
                    user=command.get("user"), image=image, containerizer=containerizer,
                    force_pull=force_pull, volumes=volumes, docker_parameters=parameters,
                    uris=list(command.get("uris", [])), kill_grace=kill_grace,
                    max_completion=max_completion)


def gpu_count(resources):
    milli = resources.scalars.get("gpus", 0)
    if milli % 1000:
        raise TaskInvalid("gpus must be a whole number, got %s" % (milli / 1000.0))
    return milli // 1000


def build_launch(plan, task_id, framework_id, agent_id, sandbox, gpu_ids, agent_has_gpus,
                 base_env):
    env = dict(base_env)
    env.update({
        "MESOS_SANDBOX": sandbox, "MESOS_DIRECTORY": sandbox, "MESOS_TASK_ID": task_id,
        "MESOS_FRAMEWORK_ID": framework_id, "MESOS_AGENT_ID": agent_id,
        "MESOS_SLAVE_ID": agent_id, "MESOS_EXECUTOR_ID": task_id,
    })
    if agent_has_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_ids)
    env.update(plan.env)
    return TaskLaunch(
        task_id=task_id, framework_id=framework_id, agent_id=agent_id, sandbox=sandbox,
        command=plan.command, arguments=list(plan.arguments), shell=plan.shell, env=env,
        user=plan.user, image=plan.image,
        containerizer=plan.containerizer if plan.image else None,
        force_pull=plan.force_pull, volumes=list(plan.volumes),
        docker_parameters=list(plan.docker_parameters), gpu_ids=list(gpu_ids))


# --- the fetcher ------------------------------------------------------------------

_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")


class FetchError(Exception):
    pass


def fetch_uris(uris, sandbox, timeout=60):
    """Mesos' fetcher, minus its cache: download or copy each URI into the
    sandbox, extract archives unless ``extract`` is false, chmod ``executable``."""
    for uri in uris:
        value = uri["value"]
        parsed = urllib.parse.urlparse(value)
        name = uri.get("output_file") or os.path.basename(parsed.path) or "download"
        target = os.path.normpath(os.path.join(sandbox, name))
        if not target.startswith(os.path.normpath(sandbox) + os.sep):
            raise FetchError("output_file %r leaves the sandbox" % name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            if parsed.scheme in ("http", "https", "ftp"):
                with urllib.request.urlopen(value, timeout=timeout) as response, \
                        open(target, "wb") as out:
                    shutil.copyfileobj(response, out)
            else:
                path = parsed.path if parsed.scheme == "file" else value
                shutil.copyfile(path, target)
            if uri.get("executable"):
                os.chmod(target, 0o755)
            elif uri.get("extract", True) and target.endswith(_ARCHIVES):
                if target.endswith(".zip"):
                    with zipfile.ZipFile(target) as archive:
                        archive.extractall(sandbox)
                else:
                    with tarfile.open(target) as archive:
                        archive.extractall(sandbox, filter="data")
        except (OSError, ValueError, tarfile.TarError, zipfile.BadZipFile) as exc:
            raise FetchError("Failed to fetch '%s': %s" % (value, exc)) from exc


# --- running one task ----------------------------------------------------------------

class TaskProcess:
    """Runs one task on its own thread: sandbox, fetch, ``runner.launch``,
    wait, cleanup. ``kill`` may be called from any thread at any time.

    Callbacks (from the task's thread): ``on_running(proc)`` once launched,
    ``on_exit(proc, status, error)`` exactly once at the end: ``status`` is the
    runner's exit status (>= 0 exit code, < 0 signal) or None when the task
    never started, ``error`` the reason it did not.
    """

    def __init__(self, launch, runner, uris, on_running, on_exit, make_sandbox=True):
        self.launch = launch
        self.runner = runner
        self.uris = uris
        self.on_running = on_running
        self.on_exit = on_exit
        self.make_sandbox = make_sandbox
        self.handle = None
        self._lock = threading.Lock()
        self._launched = threading.Event()
        self._exited = threading.Event()
        self._kill_deadline = None
        self._killer = None
        self._local_group = None   # process group of a ProcessRunner task
        self._marker = ("MESOS_SANDBOX=%s" % launch.env["MESOS_SANDBOX"]).encode() \
            if launch.env.get("MESOS_SANDBOX") else None
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="task-%s" % launch.task_id)

    @property
    def killing(self):
        return self._kill_deadline is not None

    def start(self):
        self._thread.start()

    def join(self, timeout=None):
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self):
        status, error = None, None
        try:
            if self.make_sandbox:
                os.makedirs(self.launch.sandbox, exist_ok=True)
                for path in (self.launch.stdout_path, self.launch.stderr_path):
                    open(path, "ab").close()
            if self.uris:
                fetch_uris(self.uris, self.launch.sandbox)
            if self.killing:
                error = "killed before it was launched"
            else:
                self.handle = self.runner.launch(self.launch)
                if isinstance(self.runner, ProcessRunner):
                    self._local_group = getattr(self.handle, "pid", None)
        except (RunnerError, FetchError) as exc:
            error = str(exc)
        except OSError as exc:
            error = "cannot prepare the sandbox %s: %s" % (self.launch.sandbox, exc)
        except Exception as exc:  # a runner bug must not leave the task hanging
            log.exception("task %s: the runner failed", self.launch.task_id)
            error = "the local master's runner failed: %s: %s" % (type(exc).__name__, exc)
        self._launched.set()
        if self.handle is not None:
            if self.killing:
                self._ensure_killer()
            else:
                self.on_running(self)
            status = self.handle.wait()
            self._exited.set()
            try:
                self.handle.cleanup()
            except Exception:  # cleanup is best effort
                log.exception("task %s: cleanup failed", self.launch.task_id)
            if self._local_group is not None:
                # As Mesos destroys a container before its terminal update: the
                # task's ports and files are free once the scheduler hears of it.
                destroy_task(self._local_group, self._marker)
        self._exited.set()
        self.on_exit(self, status, error)

    def kill(self, grace):
        """SIGTERM now, SIGKILL after ``grace`` seconds (a shorter grace given
        later wins). Never blocks."""
        with self._lock:
            deadline = time.monotonic() + max(0.0, grace)
            if self._kill_deadline is not None and deadline >= self._kill_deadline:
                return
            self._kill_deadline = deadline
        self._ensure_killer()

    def _ensure_killer(self):
        with self._lock:
            if self._killer is not None:
                return
            self._killer = threading.Thread(target=self._kill_loop, daemon=True,
                                            name="kill-%s" % self.launch.task_id)
        self._killer.start()

    def _kill_loop(self):
        self._launched.wait()
        handle = self.handle
        if handle is None or self._exited.is_set():
            return
        try:
            handle.terminate()
            if self._local_group is not None:
                signal_task(self._local_group, self._marker, signal.SIGTERM)
        except Exception:
            log.exception("task %s: terminate failed", self.launch.task_id)
        while not self._exited.is_set():
            remaining = self._kill_deadline - time.monotonic()
            if remaining <= 0:
                try:
                    handle.kill()
                    if self._local_group is not None:
                        signal_task(self._local_group, self._marker, signal.SIGKILL)
                except Exception:
                    log.exception("task %s: kill failed", self.launch.task_id)
                return
            self._exited.wait(min(remaining, 0.05))


def task_processes(pgid, marker):
    """Live (non-zombie) pids that belong to a task: its process group
    ``pgid``, plus any process whose environment holds ``marker`` (the task's
    ``MESOS_SANDBOX=...``) -- those left the group with setsid() but are
    still the task's, as they would be in a Mesos container's cgroup."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z":
                continue
            if int(fields[2]) == pgid:
                found.append(int(name))
                continue
            if marker is not None:
                with open("/proc/%s/environ" % name, "rb") as f:
                    if marker in f.read().split(b"\0"):
                        found.append(int(name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def signal_task(pgid, marker, signum):
    """Send ``signum`` to the task's group and to its escaped processes."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in task_processes(None, marker) if marker is not None else ():
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def destroy_task(pgid, marker, timeout=2.0):
    """What destroying a Mesos container does: SIGKILL every process of the
    task, and wait (bounded) until none is left."""
    deadline = time.monotonic() + timeout
    clean = 0
    while True:
        left = task_processes(pgid, marker)
        if not left:
            # Twice: a process forked while the previous scan listed /proc
            # (by a parent that died before the scan read it) shows now.
            clean += 1
            if clean == 2:
                return True
            time.sleep(0.005)
            continue
        clean = 0
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if time.monotonic() >= deadline:
            log.warning("task processes %s still alive after SIGKILL", left)
            return False
        time.sleep(0.01)


def describe_exit(status):
    """Mesos' command executor wording: 'Command exited with status 3',
    'Command terminated with signal Killed'."""
    if status is None:
        return "Command never started"
    if status >= 0:
        return "Command exited with status %d" % status
    try:
        name = signal.strsignal(-status) or "Unknown signal %d" % -status
    except ValueError:
        name = "Unknown signal %d" % -status
    return "Command terminated with signal %s" % name


__all__ = ["AgentSpec", "AgentSpecError", "Agent", "TaskInvalid", "TaskPlan", "TaskProcess",
           "plan_task", "build_launch", "check_id", "gpu_count", "describe_exit",
           "NO_DOCKER_MESSAGE", "detect_gpus", "to_milli"]
