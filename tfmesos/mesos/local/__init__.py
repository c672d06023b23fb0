"""The embedded single-machine master (``--master local``).

``LocalMaster`` serves the Mesos v1 scheduler HTTP API on 127.0.0.1 and runs
each task as a local process (or, given a container runner, a container) in
its own sandbox; ``AgentSpec`` says what each of its agents offers::

    from tfmesos.mesos.local import AgentSpec, LocalMaster

    with LocalMaster(agents=[AgentSpec(cpus=4, mem=8192, gpus=2)]) as master:
        print(master.url)     # http://127.0.0.1:PORT, give it to the driver

It reads calls as real Mesos does (unknown fields skipped, ``null``
unset, ...: each deviation a WARNING once per framework) or, with
``strict=True`` (``$TFMESOS_LOCAL_MASTER_STRICT``, which tfmesos' tests
set), refuses them with 400 naming the field; it serves the read endpoints
tools use (``/master/state``, ``/master/tasks``, ``/metrics/snapshot``,
...), authenticates frameworks when given ``credentials``, and offers fault
injection (``remove_agent``, ``drop_subscription``,
``stall_subscription``, ``set_leader``) for reliability tests.

The modules, each one job:

* ``master``: ``LocalMaster``, start/stop, agents; ``faults``: its fault
  injection;
* ``records``: all the master's state behind its one lock;
* ``allocator``: allocation rounds, offers, filters, rescinds;
* ``updates``: status updates, reliable ones re-sent until acknowledged;
* ``frameworks``: SUBSCRIBE, failover, framework removal;
* ``calls``: every other scheduler call;
* ``tasks``: launching tasks of accepted offers, their exit updates;
* ``loop``: the thread that runs timers and allocation rounds;
* ``errors``: ``LocalMasterError``, ``CallError``;
* ``http``, ``stream``, ``state``: the HTTP server, SUBSCRIBE streams,
  the ``/master/state`` and ``/version`` documents; ``endpoints``,
  ``metrics``: the other read endpoints and ``/metrics/snapshot``;
* ``schema``, ``messages``: checking calls strictly against the Mesos v1
  messages; ``stout``: reading them as Mesos' own parser does (default);
* ``resources``: resource arithmetic and parsing;
* ``agent``: ``AgentSpec`` and an agent's bookkeeping; ``sizing``: the
  one agent of an embedded run; ``netns``: each agent in its own network
  namespace (``network_namespaces=True``, root only);
* ``auth``: framework authentication (credentials, HTTP basic);
  ``environment``: the environment every task starts with;
* ``planning``: TaskInfo -> what to run (and what a container may not
  do); ``fetcher``: URIs into the
  sandbox; ``executor``: a task's thread, process tree and exit;
  ``runner``, ``docker_runner``: running it as a process or a container;
* ``warm_tasks``: a run's replica tasks forked from a warm interpreter;
* ``cli``, ``__main__``: ``python -m tfmesos.mesos.local``.
"""

from ...lazy_exports import lazy_exports

# Imported on first use: tfrun starts the warm task interpreter
# (``warm_tasks``) before it pays for the master's imports.
__all__ = ["LocalMaster", "AgentSpec", "AgentSpecError", "LocalMasterError"]
__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    "LocalMaster": ".master", "AgentSpec": ".agent", "AgentSpecError": ".agent",
    "LocalMasterError": ".errors"})
