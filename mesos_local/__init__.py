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
``/master/tasks``, ``/metrics/snapshot``, ...), the agents' sandboxes
(``/files/read``, ``/files/browse``), the v1 operator API (``POST
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
* ``loop``: the thread that runs timers and allocation rounds;
* ``agent``: ``AgentSpec`` and an agent's bookkeeping; ``resources``:
  resource arithmetic and parsing;
* ``errors``: its exceptions; ``command_line``, ``__main__``: the command line;
  ``docker_host``: ``$DOCKER_HOST`` read before anything starts.

``api/``: the HTTP side (the server and its ``routes``, SUBSCRIBE streams,
strict and tolerant call parsing, authentication, the read endpoints, the
agents' ``/files``, the operator API: ``operator`` and its documents and
events, ``operator_json``);
``containerizer/``: the agent side (planning a launch, the fetcher, process
and Docker runners, cgroups, network namespaces, hidden filesystems).
"""

import importlib

# Imported on first use (PEP 562): a user that needs one module (a runner, the
# errors) does not pay for the whole master.
_EXPORTS = {"LocalMaster": ".master", "AgentSpec": ".agent", "AgentSpecError": ".errors",
            "LocalMasterError": ".errors"}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    value = globals()[name] = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    return value


def __dir__():
    return __all__
