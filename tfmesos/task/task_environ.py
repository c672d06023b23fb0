"""The task's side of the environment the scheduler gave it (``TaskEnv``:
where the rendezvous is, the run's secret, the task's id, host and port,
its failover settings) and the errors a task ends with (``TaskError``)."""

import collections
import math
import socket

from ..protocol import task_env, wire
from ..protocol.hostport import host_name


class TaskError(Exception):
    """The task cannot do its job; the message is printed, exit status ``exit_code``."""

    exit_code = 1


class ProtocolMismatchError(TaskError):
    """The run's scheduler speaks another rendezvous protocol: tfrun does
    not relaunch a task that exits so (``core.task_ends.protocol_mismatch``)."""

    exit_code = wire.MISMATCH_EXIT


class TaskEnv(collections.namedtuple(
        "TaskEnv", "rendezvous secret task_id host port failover_timeout master framework_id "
        "failover_tasks", defaults=(0.0, "", "", 1))):
    """What the scheduler put in the task's environment: ``rendezvous``
    (host, port), ``secret`` (bytes), ``task_id``, ``host`` (the address other
    tasks reach this one at) and ``port`` (0: pick a free one); in a run that
    survives its scheduler, ``failover_timeout`` (seconds; 0: it does not),
    ``master`` (the leading master's URL), ``framework_id`` and
    ``failover_tasks`` (how many tasks the run has)."""

    __slots__ = ()

    @classmethod
    def from_environ(cls, environ):
        missing = [name for name in task_env.REQUIRED if not environ.get(name)]
        if missing:
            raise TaskError("%s not set: this entry point is started by the tfmesos scheduler, "
                            "not by hand" % ", ".join(missing))
        host, _, port = environ[task_env.RENDEZVOUS].rpartition(":")
        try:
            secret = bytes.fromhex(environ[task_env.SECRET])
            rendezvous = (host.strip("[]"), int(port))
            task_port = int(environ.get(task_env.PORT) or 0)
            failover = float(environ.get(task_env.FAILOVER_TIMEOUT) or 0)
            if not math.isfinite(failover) or failover < 0:
                raise ValueError("%s=%s" % (task_env.FAILOVER_TIMEOUT, failover))
            tasks = int(environ.get(task_env.FAILOVER_TASKS) or 1)
            if tasks < 1:
                raise ValueError("%s=%s" % (task_env.FAILOVER_TASKS, tasks))
        except ValueError as exc:
            raise TaskError("malformed tfmesos task environment: %s" % exc) from None
        task_host = environ.get(task_env.OFFER_HOST) or socket.getfqdn()
        given = environ.get(task_env.TASK_HOST)
        if given:
            # The user's (-E, env=): what every peer's TF_CONFIG gets, bracketed
            # for an IPv6 address ("[[::1]]:P", "[h:9999]:P" reached no one).
            task_host = host_name(given) or ""
            if not task_host:
                raise TaskError("%s=%s %s" % (task_env.TASK_HOST, given, task_env.NOT_A_HOST))
        return cls(rendezvous, secret, environ[task_env.TASK_ID], task_host, task_port,
                   failover, environ.get(task_env.MASTER) or "",
                   environ.get(task_env.FRAMEWORK_ID) or "", tasks)
