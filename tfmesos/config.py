"""Run settings resolved in one place: argument, else environment variable,
else default. The CLI, ``cluster()``, the launcher and the Docker wrapper
read their settings through here. Two readers of the environment stay on
their own, on purpose: the Mesos driver takes ``MESOS_PRINCIPAL`` /
``MESOS_SECRET`` as a standalone pymesos-style driver does, and the task
entry (``task_connection.TaskEnv``) reads what the scheduler put in its TaskInfo."""

import socket
import urllib.parse

from .exceptions import TFMesosError

LOCAL = "local"


def resolve(value, environ, name, default=None):
    """``value`` if given, else ``environ[name]`` if set and non-empty, else ``default``."""
    if value is not None:
        return value
    return environ.get(name) or default


def resolve_master(value, environ):
    return resolve(value, environ, "MESOS_MASTER", LOCAL).strip()


def advertise_address(explicit, master_url, environ):
    """The address tasks use to reach this process's rendezvous: the explicit
    setting, else the local address of the route towards the Mesos master."""
    chosen = resolve(explicit, environ, "TFMESOS_ADVERTISE_ADDRESS")
    if chosen:
        return chosen
    parts = urllib.parse.urlsplit(master_url)
    host = parts.hostname or "127.0.0.1"
    try:
        with socket.socket(_family(host), socket.SOCK_DGRAM) as probe:
            probe.connect((host, parts.port or 5050))  # UDP: no packet is sent
            return probe.getsockname()[0]
    except OSError as exc:
        raise TFMesosError("cannot tell which local address tasks can reach (no route to the "
                           "Mesos master %s: %s); pass --advertise-address or set "
                           "TFMESOS_ADVERTISE_ADDRESS" % (host, exc)) from None


def _family(host):
    try:
        return socket.getaddrinfo(host, None)[0][0]
    except socket.gaierror:
        return socket.AF_INET
