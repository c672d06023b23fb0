"""The run core: what a run is (``spec``), how its tasks are placed and
launched (``scheduler``), what happens to them (``reactions``, ``recovery``)
and the lifecycle that ties it together (``launch.ClusterRun``).

* ``spec``, ``config``, ``volumes``, ``restarts``: ``Job``, ``RunSpec``
  (checked once when built), settings (argument > environment > default),
  volume strings, the restart policy;
* ``launch``: ``ClusterRun``, the composition root and lifecycle (start,
  wait, publish roles, stop); ``framework_notice``: what a run does once
  its framework has an id (a takeover's reconciliation, a new framework's
  proof label); ``last_updates``: what the stop records (the
  queued events, Mesos' last updates waited for); ``fine_grained``:
  ``cluster()``, ``Cluster`` and its watcher thread; ``function_run``:
  ``tfmesos.run(fn, *args)``, with ``result_inbox``, the outcomes the
  tasks send;
* ``state``, ``phase``, ``slots``: the run's one state (phase, slots, tasks
  away, outcome), its phases and the moves between them, ``TaskSlot`` and
  ``SlotTable``;
* ``control``: ``RunControl``, all the failure policy may ask of the run,
  and ``Control``, its one implementation;
* ``events``: what the rendezvous and the scheduler put on the run's queue;
* ``reactions``, ``recovery``, ``task_ends``: the failure policy, each
  event's reaction, failures once the cluster is up, what a task's end
  means;
* ``scheduler``, ``placement``, ``taskinfo``: Mesos callbacks to launches,
  offers to decisions (pure), FrameworkInfo and TaskInfo (pure); ``fit``:
  whether the tasks waiting for offers can ever be placed (agents' totals);
* ``clusterspec``: the cluster spec, ``TF_CONFIG``, ``{placeholders}`` (pure);
* ``rendezvous``: the scheduler side of the tfmesos wire protocol
  (``protocol.wire``); ``signals``: SIGTERM/SIGINT while a run goes.
"""
