"""An embedded single-machine Mesos master, for testing Mesos frameworks
without a cluster (tfmesos' ``--master local`` is one of its users; it
imports nothing of them).

``LocalMaster`` serves the Mesos v1 scheduler HTTP API on 127.0.0.1 and runs
each task as a local process (or, given a container runner, a container) in
its own sandbox; ``AgentSpec`` says what each of its agents offers::

    from mesos_local import AgentSpec, LocalMaster

    with LocalMaster(agents=[AgentSpec(cpus=4, mem=8192, gpus=2)]) as master:
        print(master.url)     # http://127.0.0.1:PORT, give it to the driver

or, standalone, ``mesos-local --port 5050`` (``python -m mesos_local``).

It reads calls as real Mesos does (unknown fields skipped, ``null``
unset, ...: each deviation a WARNING once per framework) or, with
``strict=True`` (``$MESOS_LOCAL_STRICT``), refuses them with 400 naming the
field; it serves the read endpoints tools use (``/master/state``,
``/master/tasks``, ``/metrics/snapshot``, ...), the v1 operator API (``POST
/api/v1``: its event stream ``SUBSCRIBE``, ``GET_STATE``, ``GET_TASKS``,
``GET_METRICS``, ``LIST_FILES``, ``READ_FILE``, ``TEARDOWN``, ...)
and ``/master/teardown``, each at any path under it as libprocess routes
it (``/api/v1/operator``), authenticates frameworks and operators
when given ``credentials``, and offers fault injection (``remove_agent``,
``drop_subscription``, ``stall_subscription``, ``set_leader``) for
reliability tests.

The master, each module one job:

* ``master``: ``LocalMaster``, start/stop, agents; ``faults``: its fault
  injection;
* ``records``: all the master's state behind its one lock (and which task
  states are terminal);
* ``allocator``: allocation rounds, offers, filters, rescinds;
* ``updates``: status updates, reliable ones re-sent until acknowledged;
* ``frameworks``: SUBSCRIBE (role names checked as Mesos does), failover,
  framework removal;
* ``subscribers``: the operator API's event stream subscribers, and their
  bounds;
* ``call_handlers``: every other scheduler call;
* ``tasks``: launching tasks of accepted offers, their exit updates;
* ``executors``: custom executors and the v1 executor API's calls;
  ``task_groups``: the default executor's task groups (``LAUNCH_GROUP``);
* ``loop``: the thread that runs timers and allocation rounds;
* ``agent``: ``AgentSpec`` and an agent's bookkeeping; ``resources``:
  resource arithmetic and parsing;
* ``errors``: its exceptions; ``command_line``, ``__main__``: the command line;
  ``docker_host``: ``$DOCKER_HOST`` read before anything starts;
* ``cleanup``: what a stopped master leaves (cgroups, sandboxes) removed,
  a killed master's at the next start; ``watchdog``: a killed master's
  tasks ended, as a dead Mesos agent's executors end theirs.

``api/``: the HTTP side (the server and its ``routes``, SUBSCRIBE streams,
strict and tolerant call parsing, authentication, the read endpoints, the
agents' ``/files``, the operator API: ``operator`` and its documents and
events, ``operator_json``; ``shown_secrets``: what an ExecutorInfo served
shows of its secrets);
``containerizer/``: the agent side (planning a launch, the fetcher, process
and Docker runners, cgroups, network namespaces, hidden filesystems).

The public API is what this module exports (``__all__``); everything else
is internal and may change. A framework's tests, and tfmesos, import only
these names (tests/test_import_graph.py holds tfmesos to it):

* the master: ``LocalMaster``, ``AgentSpec``; ``main(argv=None, prog=None)``,
  the ``mesos-local`` command line, for a framework's own command to reuse;
* its errors (``errors``' tree): ``LocalMasterError``, ``AgentSpecError``,
  ``CredentialsError``, ``DockerEngineError``, ``IsolationError``,
  ``NetnsError``;
* task runners, for ``LocalMaster(runner=..., container_runner=...)``: the
  seam ``TaskLaunch`` -> ``RunningTask``, ``ProcessRunner`` and its
  ``ProcessTask``, ``DockerRunner``, ``RunnerError``;
* checks and helpers made before a master starts: ``ISOLATORS`` (Mesos'
  ``--isolation=cgroups/cpu,cgroups/mem``) and ``isolation_problem(isolators)``
  (why this machine cannot, or None), ``docker_host_error(environ)`` (a
  ``$DOCKER_HOST`` that names no engine), ``generate_credentials()`` (a
  one-time (principal, secret) for ``credentials``), ``stop_serving(server,
  thread)`` (a ``socketserver`` server's loop ended at once, not at its next
  poll: the master's, tfmesos' bundle server), ``parse_request_within(handler,
  parse, budget)`` (a request's headers read within a byte budget: 431
  past it; the master's, tfmesos' bundle server);
* ``docker_engine``: the small Docker engine client the Docker runner uses
  (``connect``, ``ensure_image``, ``attach``, ``pump_output``,
  ``remove_container``, ``one_line``), a public submodule; for a
  container of another maker (``tfmesos docker``): ``owner_labels()`` (the
  labels that make it this process's) and ``remove_orphans(client)`` (the
  containers of makers that are gone, and of masters, removed).
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # what the names are, for type checkers (``X as X``: re-exported)
    from .agent import AgentSpec as AgentSpec
    from .api.auth import generate_credentials as generate_credentials
    from .api.header_budget import parse_request_within as parse_request_within
    from .api.serve_stop import stop_serving as stop_serving
    from .command_line import main as main
    from .containerizer import docker_engine as docker_engine
    from .containerizer.cgroup_limits import ISOLATORS as ISOLATORS
    from .containerizer.cgroups import IsolationError as IsolationError
    from .containerizer.cgroups import isolation_problem as isolation_problem
    from .containerizer.docker_runner import DockerRunner as DockerRunner
    from .containerizer.docker_runner import owner_labels as owner_labels
    from .containerizer.docker_runner import remove_orphans as remove_orphans
    from .containerizer.netns import NetnsError as NetnsError
    from .containerizer.runner import ProcessRunner as ProcessRunner
    from .containerizer.runner import ProcessTask as ProcessTask
    from .containerizer.runner import RunnerError as RunnerError
    from .containerizer.runner import RunningTask as RunningTask
    from .containerizer.runner import TaskLaunch as TaskLaunch
    from .docker_host import docker_host_error as docker_host_error
    from .errors import AgentSpecError as AgentSpecError
    from .errors import CredentialsError as CredentialsError
    from .errors import DockerEngineError as DockerEngineError
    from .errors import LocalMasterError as LocalMasterError
    from .master import LocalMaster as LocalMaster

# Imported on first use (PEP 562): a user that needs one module (a runner, the
# errors) does not pay for the whole master. A name mapped to a module and
# no attribute is that module (a public submodule).
_EXPORTS = {
    "LocalMaster": (".master", "LocalMaster"),
    "AgentSpec": (".agent", "AgentSpec"),
    "main": (".command_line", "main"),
    "LocalMasterError": (".errors", "LocalMasterError"),
    "AgentSpecError": (".errors", "AgentSpecError"),
    "CredentialsError": (".errors", "CredentialsError"),
    "DockerEngineError": (".errors", "DockerEngineError"),
    "IsolationError": (".containerizer.cgroups", "IsolationError"),
    "NetnsError": (".containerizer.netns", "NetnsError"),
    "TaskLaunch": (".containerizer.runner", "TaskLaunch"),
    "RunningTask": (".containerizer.runner", "RunningTask"),
    "ProcessRunner": (".containerizer.runner", "ProcessRunner"),
    "ProcessTask": (".containerizer.runner", "ProcessTask"),
    "RunnerError": (".containerizer.runner", "RunnerError"),
    "DockerRunner": (".containerizer.docker_runner", "DockerRunner"),
    "ISOLATORS": (".containerizer.cgroup_limits", "ISOLATORS"),
    "isolation_problem": (".containerizer.cgroups", "isolation_problem"),
    "docker_host_error": (".docker_host", "docker_host_error"),
    "generate_credentials": (".api.auth", "generate_credentials"),
    "stop_serving": (".api.serve_stop", "stop_serving"),
    "parse_request_within": (".api.header_budget", "parse_request_within"),
    "docker_engine": (".containerizer.docker_engine", None),
    "owner_labels": (".containerizer.docker_runner", "owner_labels"),
    "remove_orphans": (".containerizer.docker_runner", "remove_orphans"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    module, attribute = _EXPORTS[name]
    value = importlib.import_module(module, __name__)
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__():
    return __all__
