"""``$DOCKER_HOST``, read before anything starts: the Docker runner connects
to the engine it names on the first image task, and a value the ``docker``
package cannot read (``DOCKER_HOST=::::``) would fail there, task after
task. ``docker_host_error`` says what is wrong in one line instead, for
``mesos-local`` and for tfmesos' runs with an image on the embedded master
(usage errors both)."""

import re

_UNSAFE = re.compile(r"[\x00-\x20\x7f]")   # control characters and spaces


def docker_host_error(environ):
    """Why ``environ``'s ``DOCKER_HOST`` names no Docker engine (one line
    naming the fix), or None: unset, empty, or read by the ``docker``
    package as it will be read (None too without the package: the runner
    says it is missing)."""
    value = environ.get("DOCKER_HOST")
    if not value:
        return None
    fix = ("DOCKER_HOST=%r is not a Docker engine's address%s: give one like "
           "unix:///var/run/docker.sock or tcp://HOST:2375, or unset it")
    if _UNSAFE.search(value):
        return fix % (value, " (it holds a space or a control character)")
    try:
        from docker.errors import DockerException
        from docker.utils import parse_host
    except ImportError:
        return None
    try:
        parse_host(value, False, False)
    except (DockerException, ValueError) as exc:
        return fix % (value, " (%s)" % str(exc).splitlines()[0] if str(exc) else "")
    return None


__all__ = ["docker_host_error"]
