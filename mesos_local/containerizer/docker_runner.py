"""Run the local master's tasks in Docker containers (the runner seam of
``runner.py``), through the Docker engine's API (the ``docker`` package,
``pip install docker``, imported only when a runner is used; the
engine plumbing is ``mesos_local/containerizer/docker_engine.py``, whose errors become
``RunnerError`` here).

A task's container gets its options from ``container_options`` (what
Mesos' containerizers give it: the image, the sandbox's mapping, its
environment, user, GPUs, limits and docker parameters), and:

* is named ``mesos-<container id>`` under both containerizers;
* when the kernel's OOM killer stopped it, is reported as Mesos' memory
  limitation;
* has its stdout/stderr copied, while it runs, into the sandbox files
  ``stdout`` and ``stderr`` by a thread of this process.

``terminate`` sends a DOCKER task's container its stop signal (the image's
``STOPSIGNAL``, SIGTERM by default) and ``kill``, a grace later, SIGKILL:
``docker stop -t GRACE``, Mesos' docker executor's kill (src/docker/executor.cpp,
``_killTask``). A shell as PID 1 has no handler for SIGTERM, so the kernel
drops it and the task ends at the grace, from SIGKILL, as it does on Mesos.
"""

import contextlib
import logging
import re
import signal
import threading

from mesos_local.cleanup import boot_id, master_gone
from mesos_local.containerizer.cgroup_limits import memory_limit_message
from mesos_local.containerizer.container_options import (
    HOST_LABEL,
    MASTER_LABEL,
    container_kwargs,
    owner_labels,
)
from mesos_local.containerizer.docker_engine import (
    MANAGED_LABEL,
    DockerEngineError,
    attach,
    connect,
    ensure_image,
    one_line,
    pump_output,
    remove_container,
)
from mesos_local.containerizer.runner import RunnerError, RunningTask
from mesos_local.ids import uuid4_text

__all__ = ["DockerRunner", "DockerTask", "remove_orphans", "owner_labels"]

log = logging.getLogger(__name__)

# Mesos' Docker containerizer names a container DOCKER_NAME_PREFIX + its
# container id (src/slave/containerizer/docker.cpp and docker.hpp).
DOCKER_NAME_PREFIX = "mesos-"


def remove_orphans(client):
    """Remove the containers of masters that are gone (``MASTER_LABEL``,
    ``cleanup.master_gone``): a master's container that it could not remove
    (its engine stopped answering, the master killed) is removed by the next
    master that uses the engine, as a Mesos agent's recovery removes the
    containers it does not know (``--docker_kill_orphans``, true by
    default). Containers of live masters, of other pid namespaces, of
    other hosts (``HOST_LABEL``: an engine they share) and without the
    label are left alone. Returns their names."""
    import requests

    import docker

    removed: list[str] = []
    try:
        found = client.containers.list(all=True, ignore_removed=True,
                                       filters={"label": [MANAGED_LABEL + "=1", MASTER_LABEL]})
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        log.debug("cannot list the containers of stopped masters: %s", one_line(exc))
        return removed
    boot = boot_id()
    for container in found:
        made_on = container.labels.get(HOST_LABEL)
        if made_on is not None and made_on != boot:
            continue   # another host's, on an engine they share: not ours to judge
        if not master_gone(container.labels.get(MASTER_LABEL)):
            continue
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            log.debug("cannot remove container %s: %s", container.name, one_line(exc))
            continue
        removed.append(container.name)
    if removed:
        log.info("removed the containers of stopped masters: %s", ", ".join(removed))
    return removed


@contextlib.contextmanager
def _runner_errors():
    """The shared engine plumbing's errors become this runner's."""
    try:
        yield
    except DockerEngineError as exc:
        raise RunnerError(str(exc)) from exc


def _container_name(launch):
    """``mesos-<container id>``, Mesos' Docker containerizer's name
    (src/slave/containerizer/docker.hpp, ``Container::name``). A launch
    without a container id (a runner used on its own) gets a random one."""
    container_id = launch.container_id or uuid4_text()
    safe = re.sub(r"[^a-zA-Z0-9_.-]+", "-", container_id).strip("-.")[:200]
    return DOCKER_NAME_PREFIX + (safe or uuid4_text())


class DockerRunner:
    """Runs each ``TaskLaunch`` in a container of ``launch.image``.

    ``client`` is a ``docker.DockerClient`` (default: ``docker.from_env()``
    on first use). Every failure to start raises ``RunnerError`` with a
    one-line message: no engine ("Docker is unavailable: ..."), a missing
    image, a failed pull, a bad docker parameter or volume."""

    def __init__(self, client=None):
        self._client = client
        self._lock = threading.Lock()
        self._swept = False
        self._in_flight: set[str] = set()   # names of the containers being launched

    @property
    def client(self):
        with self._lock:
            with _runner_errors():
                self._client = connect(self._client)
            if not self._swept:   # once: what masters that are gone left on the engine
                self._swept = True
                remove_orphans(self._client)
            return self._client

    def remove_own(self):
        """Remove the containers of launches still under way (``stop()``'s
        last word for launches whose engine answered too late for the task
        to end: a container created, its start still pending), by their
        names: this runner's alone, not another master's of this process;
        their names. Nothing when it never used the engine."""
        import requests

        import docker

        with self._lock:
            client, names = self._client, sorted(self._in_flight)
        removed: list[str] = []
        for name in names if client is not None else ():
            try:
                client.containers.get(name).remove(force=True)
            except docker.errors.NotFound:
                continue
            except (docker.errors.DockerException,
                    requests.exceptions.RequestException) as exc:
                log.warning("cannot remove container %s: %s", name, one_line(exc))
                continue
            removed.append(name)
        return removed

    def launch(self, launch):
        if not launch.image:
            raise RunnerError("task %s names no image; the Docker runner only runs containers"
                              % launch.task_id)
        if launch.netns is not None:
            raise RunnerError("image tasks cannot run in an agent's network namespace: run "
                              "the task without an image, or the master without --netns")
        client = self.client    # first: without the docker package, a RunnerError
        import requests

        import docker

        with _runner_errors():
            ensure_image(client, launch.image, pull=launch.force_pull)
        name = _container_name(launch)
        kwargs = container_kwargs(launch, name=name)
        files = []
        container = None
        with self._lock:
            self._in_flight.add(name)
        try:
            try:
                files.append(open(launch.stdout_path, "ab"))
                files.append(open(launch.stderr_path, "ab"))
            except OSError as exc:
                raise RunnerError("cannot open the sandbox of task %s: %s"
                                  % (launch.task_id, exc)) from exc
            try:
                container = client.containers.create(**kwargs)
                frames = attach(client, container.id)
                container.start()
            except (docker.errors.DockerException, requests.exceptions.RequestException,
                    OSError) as exc:
                raise RunnerError("cannot start task %s in image %s: %s"
                                  % (launch.task_id, launch.image, one_line(exc))) from exc
            return DockerTask(client, container, frames, files[0], files[1],
                              memory_limit=kwargs.get("mem_limit"),
                              stop_signal=_stop_signal(container, launch))
        except BaseException:
            for f in files:
                f.close()
            if container is not None:
                _remove(container)
            raise
        finally:
            with self._lock:
                self._in_flight.discard(name)


def _stop_signal(container, launch):
    """What ``terminate`` sends: for a DOCKER task, the signal ``docker stop``
    sends (the container's StopSignal: a ``stop-signal`` parameter, else the
    image's STOPSIGNAL, else SIGTERM), Mesos' docker executor's kill being
    ``docker stop -t GRACE`` (src/docker/executor.cpp, ``_killTask``); else
    SIGTERM, what Mesos' command executor sends its task."""
    if launch.containerizer == "DOCKER":
        configured = (container.attrs.get("Config") or {}).get("StopSignal")
        if configured:
            return configured
    return int(signal.SIGTERM)


def _remove(container):
    try:
        remove_container(container)
    except DockerEngineError as exc:
        log.warning("%s (the next run on this engine removes it)", exc)


class DockerTask(RunningTask):
    """A running container. ``wait`` returns its exit code, or ``-signum``
    when it ended from the SIGTERM/SIGKILL that ``terminate``/``kill`` sent
    (or the kernel's OOM killer)."""

    def __init__(self, client, container, frames, out, err, memory_limit=None,
                 stop_signal=int(signal.SIGTERM)):
        self.client = client
        self.stop_signal = stop_signal   # what terminate sends (a number or a name)
        self.container = container
        self.id = container.id
        self.memory_limit = memory_limit   # bytes (or docker's "2g"), when limited
        self.oom_killed = False
        self._signalled = False
        self._lost = None      # why the engine lost the container mid-run (lost())
        self._status = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._follow, args=(frames, out, err),
                                        name="docker-task-%s" % container.short_id, daemon=True)
        self._thread.start()

    def _follow(self, frames, out, err):
        import requests

        import docker

        try:
            try:
                pump_output(frames, out, err)
            except Exception as exc:
                log.warning("output of container %s stopped: %s", self.container.short_id, exc)
            finally:
                out.close()
                err.close()
            try:
                result = self.client.api.wait(self.id)
                code = result.get("StatusCode", -1)
                oom = False
                if code > 128:
                    try:
                        oom = self.client.api.inspect_container(self.id)["State"].get("OOMKilled")
                    except docker.errors.DockerException:
                        pass
                if 128 < code <= 128 + 64 and (self._signalled or oom):
                    code = -(code - 128)
                self.oom_killed = bool(oom)
                self._status = code
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                # Removed under us (cleanup while running): it was killed.
                # Else the engine went away (stopped, restarted) with it.
                log.debug("wait on container %s: %s", self.container.short_id, exc)
                self._status = -signal.SIGKILL
                if not self._signalled:
                    # Mesos' docker executor's words (src/docker/executor.cpp, reaped).
                    self._lost = "Docker container run error: %s" % one_line(exc)
        finally:
            self._done.set()

    def wait(self, timeout=None):
        if self._done.wait(timeout):
            return self._status
        return None

    def lost(self):
        """What the engine said when it stopped answering while the container
        ran (it was stopped, or restarted): the container's end is unknown."""
        return self._lost

    def limitation(self):
        """Mesos' memory limitation message when the kernel's OOM killer
        stopped a memory-limited container, else None (the engine keeps no
        peak: a container killed at its limit used all of it)."""
        if not self.oom_killed or not isinstance(self.memory_limit, int):
            return None
        return memory_limit_message(self.memory_limit, self.memory_limit)

    def _signal(self, signum):
        import requests

        import docker

        self._signalled = True
        try:
            self.container.kill(signal=signum)
        except docker.errors.NotFound:
            pass
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            if "is not running" not in str(exc):
                log.warning("cannot signal container %s: %s",
                            self.container.short_id, one_line(exc))

    def terminate(self):
        """The first half of ``docker stop -t GRACE``: the stop signal (the
        executor's kill sends SIGKILL, ``kill``, once the grace is over)."""
        self._signal(self.stop_signal)

    def kill(self):
        self._signal(int(signal.SIGKILL))

    def cleanup(self):
        if not self._done.is_set():
            self._signalled = True
        _remove(self.container)
        self._done.wait(10)
        self._thread.join(1)
