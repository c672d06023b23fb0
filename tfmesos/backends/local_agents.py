"""Whether a Mesos master's agents run on this machine, for this user:
what ``tfrun --python`` defaults to then (``cli.tfrun_options``).

A ``tfmesos local-master`` in the background (README, "Long runs: detach
and attach") runs every task as a process of this machine, where tfrun's
own interpreter is, packages and all; ``python3`` on the agents' ``PATH``
(the default elsewhere, since a path of this machine means nothing on
another) is the system's, often without them, and ``python`` is often not
there at all. So the agents are taken to be here only when all of these
hold, each read without starting anything:

* every address of the master's host is one of this machine's (a socket
  here can bind it, ``advertise.on_this_host``);
* where ``/proc/net/tcp`` says who listens on the master's port: this user
  or root (a master of another user runs its tasks as that user, who may
  not read this user's interpreter);
* the master's ``/master/slaves`` (docs/endpoints/master/slaves.md) lists
  at least one agent, and every agent's ``hostname`` is on this host (a
  ``local-master --netns`` agent has an address of its own namespace: it
  counts as another host, as its tasks see none of this host's files).

Anything that cannot be told (no answer within the timeout, a ``zk://``
master, a host name that does not resolve) is "not here": the default
stays ``python3``. Agents that hide directories (``local-master --agent
...,isolate=fs`` on loopback) cannot be told from the master's answer:
their runs give ``--python``.
"""

import logging
import os
import urllib.parse
from collections.abc import Mapping
from typing import Optional

from ..exceptions import TFMesosError
from ..mesos.master_address import parse_master
from .advertise import on_this_host

logger = logging.getLogger(__name__)

TIMEOUT = 5.0          # seconds the master has to answer /master/slaves
LISTEN = "0A"          # TCP_LISTEN in /proc/net/tcp's "st" column (include/net/tcp_states.h)


def agents_here(master: str, environ: Optional[Mapping[str, str]] = None, verify: bool = True,
                ca_bundle: Optional[str] = None, scheme: str = "http",
                timeout: float = TIMEOUT) -> bool:
    """Whether the tasks of the master ``master`` (a ``--master`` string)
    run on this machine as this user could run them (see the module's
    docstring); False whenever that cannot be told."""
    try:
        spec = parse_master(master)
    except TFMesosError:
        return False
    if spec.kind != "http" or len(spec.urls) != 1:
        return False      # zk:// or several masters: other hosts, or cannot be told
    parts = urllib.parse.urlsplit(spec.urls[0])
    host, port = parts.hostname, parts.port or 5050
    if not host or not on_this_host(host):
        return False
    owners = listener_uids(port)
    if owners is not None and not (owners and owners <= {os.geteuid(), 0}):
        return False
    from ..mesos.master_reads import MasterReader
    try:
        reader = MasterReader(master, timeout=timeout, environ=environ, verify=verify,
                              ca_bundle=ca_bundle, scheme=scheme)
        agents = reader.agents().get("slaves")
    except (TFMesosError, OSError, ValueError) as exc:
        logger.debug("cannot tell where the agents of %s run: %s", master, exc)
        return False
    if not isinstance(agents, list) or not agents:
        return False
    return all(isinstance(agent, dict) and isinstance(agent.get("hostname"), str)
               and agent["hostname"] and on_this_host(agent["hostname"]) for agent in agents)


def listener_uids(port: int, tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")
                  ) -> Optional[set[int]]:
    """The uids of the sockets listening on TCP ``port`` in this network
    namespace (Linux' ``/proc/net/tcp``, proc(5): ``local_address`` as
    ``HEX_IP:HEX_PORT``, ``st``, ..., ``uid`` the 8th column); None where
    no table can be read (not Linux)."""
    found: set[int] = set()
    read = False
    for table in tables:
        try:
            with open(table, encoding="ascii", errors="replace") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        read = True
        for line in lines:
            fields = line.split()
            if len(fields) < 8 or fields[3] != LISTEN:
                continue
            try:
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(int(fields[7]))
            except (IndexError, ValueError):
                continue
    return found if read else None


__all__ = ["agents_here", "listener_uids"]
