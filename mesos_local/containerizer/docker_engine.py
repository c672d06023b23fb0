"""The Docker engine plumbing of the master's container runner
(``docker_runner``), usable by anyone who starts containers beside it:
connecting, making sure an image is there, attaching to a container and
copying its output.

The ``docker`` package (``pip install docker``) is imported only when a
function needs it. Failures raise ``DockerEngineError`` with a one-line
message that states the fix; the master's runner turns it into a failed
launch.
"""

import codecs
import io
import os
import pwd

from ..errors import DockerEngineError

__all__ = ["DockerEngineError", "MANAGED_LABEL", "connect", "ensure_image", "attach",
           "pump_output", "one_line"]

MANAGED_LABEL = "mesos_local.managed"


def one_line(exc):
    """An exception's message (the engine's explanation when it has one) on one line."""
    text = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return " ".join(str(text).split())


def connect(client=None):
    """Return a working ``docker.DockerClient`` (``client`` or one from the
    environment), or raise ``DockerEngineError("Docker is unavailable: ...")``."""
    try:
        import docker
    except ImportError:
        raise DockerEngineError(
            "Docker is unavailable: the docker Python package is not installed "
            "(pip install docker)") from None
    import requests

    try:
        if client is None:
            client = docker.from_env()
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        if _denied(exc):
            where = " at %s" % (os.environ.get("DOCKER_HOST") or DEFAULT_HOST) \
                if client is None else ""
            raise DockerEngineError(
                "Docker is unavailable: you may not use the Docker engine%s (permission "
                "denied): add your user to the docker group (usermod -aG docker %s, then log "
                "in again) or use rootless Docker (DOCKER_HOST)" % (where, _user())) from exc
        raise DockerEngineError("Docker is unavailable: %s (start the engine as root: dockerd &, "
                                "or install it: apt-get install docker.io)"
                                % one_line(exc)) from exc
    return client


DEFAULT_HOST = "unix:///var/run/docker.sock"   # the engine the docker package finds unset


def _denied(exc):
    """Whether a PermissionError (the engine's socket refused this user) is
    among ``exc``'s causes, or the errors it holds as arguments (requests'
    ConnectionError holds urllib3's, which holds the socket's)."""
    pending, seen = [exc], set()
    while pending:
        error = pending.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, PermissionError):
            return True
        pending.extend(found for found in (error.__cause__, error.__context__, *error.args)
                       if isinstance(found, BaseException))
    return False


def _user():
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:   # a uid without a name (a container's)
        return "USER"


def ensure_image(client, image, pull=False):
    """Make sure ``image`` is on the engine of ``client`` (a connected
    client): pull it when ``pull`` is true, else look it up. Raises
    ``DockerEngineError`` when the pull fails or the image is missing."""
    import requests

    import docker

    if pull:
        try:
            client.images.pull(image)
        except (docker.errors.DockerException, requests.exceptions.RequestException,
                OSError) as exc:
            raise DockerEngineError("cannot pull image %r: %s" % (image, one_line(exc))) from exc
        return
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        raise DockerEngineError("image %s not found on the Docker engine; build it with "
                                "docker/build.sh (or pull it: docker pull %s)"
                                % (image, image)) from None
    except docker.errors.APIError as exc:
        if not exc.is_client_error():
            raise DockerEngineError("Docker is unavailable: %s" % one_line(exc)) from exc
        # The engine answered: the name is wrong (invalid reference format).
        raise DockerEngineError("invalid image name %r: %s" % (image, one_line(exc))) from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise DockerEngineError("Docker is unavailable: %s" % one_line(exc)) from exc


def attach(client, container_id):
    """Open a demultiplexed output stream of a container (before starting
    it, so that nothing it prints is missed)."""
    return client.api.attach(container_id, stdout=True, stderr=True, stream=True,
                             logs=True, demux=True)


class _Sink:
    """Writes bytes to a file descriptor, a binary file or a text file (a
    text file with a ``buffer`` gets the bytes, others decoded text)."""

    def __init__(self, stream):
        self.stream = stream
        # Used by _to_text only: text split across chunks decodes whole.
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        if isinstance(stream, int):
            self.write = self._to_fd
        elif isinstance(stream, io.TextIOBase) or hasattr(stream, "encoding"):
            if getattr(stream, "buffer", None) is not None:
                self.write = self._to_text_buffer
            else:
                self.write = self._to_text
        else:
            self.write = self._to_binary

    def _to_fd(self, data):
        while data:
            data = data[os.write(self.stream, data):]

    def _to_text_buffer(self, data):
        self.stream.flush()
        self.stream.buffer.write(data)
        self.stream.buffer.flush()

    def _to_text(self, data):
        self.stream.write(self.decoder.decode(data))
        self.stream.flush()

    def _to_binary(self, data):
        self.stream.write(data)
        self.stream.flush()


def pump_output(frames, out, err):
    """Copy demultiplexed ``(stdout, stderr)`` frames of an attach stream to
    ``out`` and ``err`` (file descriptors, binary or text files), flushing
    each chunk as it comes."""
    out, err = _Sink(out), _Sink(err)
    for stdout, stderr in frames:
        if stdout:
            out.write(stdout)
        if stderr:
            err.write(stderr)


def remove_container(container):
    """Remove ``container`` (force: a running one is killed). Gone already, or
    being removed by someone else, is fine; any other failure raises
    ``DockerEngineError``."""
    import requests

    import docker

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        if "already in progress" not in str(exc):
            raise DockerEngineError("cannot remove container %s: %s"
                                    % (container.short_id, one_line(exc))) from exc
