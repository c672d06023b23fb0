"""Run a command inside the tfmesos image, as the original README does by
hand with ``docker run``::

    docker run --rm -e MESOS_MASTER=... --net=host \\
        -v $PWD:$PWD -w $PWD -v /etc/passwd:/etc/passwd:ro \\
        -v /etc/group:/etc/group:ro -u $(id -u):$(id -g) \\
        tfmesos/tfmesos tfrun -w 1 -s 1 -- python train.py ...

``run_in_image(["tfrun", "-w", "1", "-s", "1", "--", ...])`` does the same
through the Docker engine's API and returns the command's exit code.
"""

import os
import sys
import threading
import uuid

from mesos_local import DockerEngineError, docker_engine, owner_labels, remove_orphans

from ..core.config import resolve, working_directory
from ..core.image_names import image_name_error
from ..core.inputs import ENV_NAME
from ..core.signals import INTERRUPTING, interrupt_on_signals
from ..core.volumes import parse_volume
from ..exceptions import DockerError, SpecError
from ..record.run_dirs import RUNS_DIR_ENV
from ..terminal_text import printable

__all__ = ["run_in_image", "resolve_image", "passthrough_env", "DEFAULT_IMAGE",
           "PASSTHROUGH_ENV", "PASSTHROUGH_PREFIXES"]

DEFAULT_IMAGE = "tfmesos/tfmesos"
# The wrapper's containers (the embedded master labels its own ``mesos_local.managed``).
MANAGED_LABEL = "tfmesos.managed"
PASSTHROUGH_ENV = ("MESOS_MASTER", "DOCKER_IMAGE")
PASSTHROUGH_PREFIXES = ("TFMESOS_",)
_STOP_TIMEOUT = 5


def resolve_image(image=None, environ=None):
    """The image to run: ``image``, else ``$DOCKER_IMAGE``, else the default."""
    environ = os.environ if environ is None else environ
    found = resolve(image or None, environ, "DOCKER_IMAGE", DEFAULT_IMAGE)
    why = image_name_error(found)
    if why:
        raise SpecError(why)
    return found


def passthrough_env(env=None, environ=None):
    """The container's environment: ``MESOS_MASTER``, ``DOCKER_IMAGE`` and
    ``TFMESOS_*`` from ``environ`` (default ``os.environ``) when set, then
    each entry of ``env``: ``"K=V"`` sets K, a bare ``"K"`` passes K through
    when it is set (like ``docker run -e K``)."""
    environ = os.environ if environ is None else environ
    out = {k: v for k, v in environ.items()
           if k in PASSTHROUGH_ENV or k.startswith(PASSTHROUGH_PREFIXES)}
    for item in env or ():
        name, has_value, value = str(item).partition("=")
        if not ENV_NAME.match(name):
            raise SpecError("invalid environment entry %r: expected NAME=VALUE or NAME, NAME "
                            "of letters, digits and _ (not first a digit)" % item)
        if has_value:
            out[name] = value
        elif name in environ:
            out[name] = environ[name]
    return out


def _environment(env, image):
    """``passthrough_env(env)``, with ``DOCKER_IMAGE`` defaulting to the image
    the command runs in: a ``tfrun`` in the container launches its tasks in
    that same image (its own interpreter and tfmesos do not exist on the
    agents' hosts), even when the image was renamed or ``$DOCKER_IMAGE`` is
    set but empty here."""
    environment = passthrough_env(env)
    if not environment.get("DOCKER_IMAGE"):
        environment["DOCKER_IMAGE"] = image
    return environment


def _volumes(workdir, volumes, environment):
    """Bind mounts as ``docker`` SDK ``volumes`` strings: the user's first,
    then the working directory, the runs directory ``environment`` names
    (``$TFMESOS_RUNS_DIR``: a tfrun inside writes its records there, which
    went with the container) and the account files, unless a user volume
    already targets the same container path. SpecError for a working
    directory that cannot be mounted at its own path."""
    if workdir == "/" or ":" in workdir:
        raise SpecError("tfmesos docker mounts the working directory %s at its own path: run it "
                        "from a directory other than / whose path holds no ':' (your project's)"
                        % printable(workdir))
    specs = []
    targets = set()
    for text in volumes or ():
        host, container, mode = parse_volume(text)
        specs.append("%s:%s:%s" % (host, container, mode.lower()))
        targets.add(container)
    runs = environment.get(RUNS_DIR_ENV, "")
    mounted = []
    if os.path.isabs(runs) and ":" not in runs and runs != "/":
        os.makedirs(runs, mode=0o700, exist_ok=True)   # the caller's, not the engine's (root)
        mounted = [(runs, runs, "rw")]
    for host, container, mode in [(workdir, workdir, "rw")] + mounted + [
            ("/etc/passwd", "/etc/passwd", "ro"), ("/etc/group", "/etc/group", "ro")]:
        if container not in targets and os.path.exists(host):
            specs.append("%s:%s:%s" % (host, container, mode))
            targets.add(container)
    return specs


def run_in_image(command, image=None, env=None, volumes=None, workdir=None, client=None,
                 stdout=None, stderr=None):
    """Run ``command`` (a list of strings) in the tfmesos image and return its
    exit code.

    The container runs on the host network, as this process's uid:gid, with
    the working directory (default: the current one) mounted at the same path
    and used as its cwd, ``/etc/passwd`` and ``/etc/group`` read-only,
    ``volumes`` (``"HOST:CONTAINER[:ro|rw]"``) and the environment of
    ``passthrough_env(env)`` (``DOCKER_IMAGE`` defaulting to ``image``, so
    that a ``tfrun`` inside runs its tasks in the same image). Its output is
    streamed to ``stdout``/``stderr`` (default: this process's) while it
    runs. Ctrl-C, SIGTERM or SIGHUP stops and removes the container, then raises
    ``KeyboardInterrupt``; the container is removed in every case.

    Raises ``SpecError`` for a malformed command, volume or environment
    entry (before the engine is asked anything), ``DockerError`` when the
    engine or the image is missing or the container cannot start.
    """
    if isinstance(command, str) or not command:
        raise SpecError("command must be a non-empty list of strings, got %r" % (command,))
    command = [str(arg) for arg in command]
    workdir = os.path.abspath(workdir or working_directory())
    image = resolve_image(image)
    kwargs = {
        "command": command,
        "network_mode": "host",
        "working_dir": workdir,
        "environment": _environment(env, image),
        "user": "%d:%d" % (os.getuid(), os.getgid()),
        # Its owner, this process: a container it could not remove (killed
        # with SIGKILL, interrupted while the engine was creating it) is removed
        # by the next wrapper or embedded master (``docker_runner.remove_orphans``).
        "labels": {MANAGED_LABEL: "1", "tfmesos.role": "docker-wrapper", **owner_labels()},
        "name": "tfmesos-docker-%s" % uuid.uuid4().hex[:16],
        "init": True,
        "stdin_open": False,
        "tty": False,
    }
    kwargs["volumes"] = _volumes(workdir, volumes, kwargs["environment"])
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    try:
        client = docker_engine.connect(client)
        docker_engine.ensure_image(client, image)
    except DockerEngineError as exc:
        raise DockerError(str(exc)) from exc
    return _run(client, image, kwargs, stdout, stderr)


def _run(client, image, kwargs, stdout, stderr):
    """Create, attach and start the container, copy its output and return
    its exit code. Inside, SIGTERM and SIGHUP (the terminal closed) act as
    Ctrl-C (in the main thread, the only one Python delivers signals to):
    each stops the container and raises ``KeyboardInterrupt``. The previous
    handlers are back before the container is removed, which it is in every
    case: by its name when the interrupt came while the engine created it.
    An engine lost meanwhile is a ``DockerError``."""
    import requests

    import docker

    remove_orphans(client)
    signals = INTERRUPTING if threading.current_thread() is threading.main_thread() else ()
    container = None
    command = kwargs["command"][0]
    try:
        with interrupt_on_signals(signals):
            try:
                try:
                    container = client.containers.create(image, **kwargs)
                    frames = docker_engine.attach(client, container.id)
                    container.start()
                except docker.errors.APIError as exc:
                    raise DockerError("cannot run %s in image %s: %s"
                                      % (command, image, docker_engine.one_line(exc))) from exc
                docker_engine.pump_output(frames, stdout, stderr)
                return client.api.wait(container.id).get("StatusCode", -1)
            except KeyboardInterrupt:
                if container is not None:
                    _stop_showing_its_end(client, container, stdout, stderr)
                raise KeyboardInterrupt() from None
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                raise DockerError("lost the Docker engine while %s ran in image %s: %s"
                                  % (command, image, docker_engine.one_line(exc))) from exc
    finally:
        if container is None:
            container = _created(client, kwargs["name"])
        if container is not None:
            _remove(container)


def _created(client, name):
    """The container ``name`` if the engine made it (None: not, or unknown)."""
    import requests

    import docker

    try:
        return client.containers.get(name)
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        return None


def _stop_showing_its_end(client, container, stdout, stderr):
    """Stop ``container``, copying what it prints meanwhile (a tfrun inside
    says how its run ended): the interrupted stream is gone, a new one
    copies only what comes after it. Another interrupt ends the copy."""
    import requests

    import docker

    try:
        rest = client.api.attach(container.id, stdout=True, stderr=True, stream=True,
                                 logs=False, demux=True)
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        rest = None
    stopper = threading.Thread(target=_stop, args=(container,), name="docker-stop",
                               daemon=True)
    stopper.start()
    if rest is not None:
        try:
            docker_engine.pump_output(rest, stdout, stderr)
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
            pass
    stopper.join(_STOP_TIMEOUT + 10)


def _stop(container):
    import docker

    try:
        container.stop(timeout=_STOP_TIMEOUT)
    except docker.errors.DockerException:
        pass


def _remove(container):
    try:
        docker_engine.remove_container(container)
    except DockerEngineError as exc:
        print("tfmesos: %s" % exc, file=sys.stderr)
