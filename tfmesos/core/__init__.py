"""The run core: what a run is (``spec``), how its tasks are placed and
launched (``scheduler``), what happens to them (``reactions``, ``recovery``)
and the lifecycle that ties it together (``launch.ClusterRun``).

| module | holds |
| --- | --- |
| ``spec``, ``config``, ``volumes``, ``restarts`` | ``Job``, ``RunSpec`` (checked once when built), settings (argument > environment > default), volume strings, the restart policy |
| ``launch`` | ``ClusterRun``: the lifecycle (start, wait, publish roles, stop), the only owner of the run's phase; implements ``control.RunControl`` |
| ``fine_grained`` | ``cluster()`` and the ``Cluster`` handle |
| ``phase``, ``slots`` | the run's phases and the moves between them; ``TaskSlot`` and ``SlotTable`` |
| ``control`` | ``RunControl``: all the failure policy may ask of the run |
| ``events`` | what the rendezvous and the scheduler put on the run's queue |
| ``reactions``, ``recovery``, ``task_ends`` | the failure policy: each event's reaction, failures once the cluster is up, what a task's end means |
| ``scheduler``, ``placement``, ``taskinfo`` | Mesos callbacks to launches; offers to decisions (pure); FrameworkInfo and TaskInfo (pure) |
| ``clusterspec`` | the cluster spec, ``TF_CONFIG``, ``{placeholders}`` (pure) |
| ``rendezvous`` | the scheduler side of the tfmesos wire protocol (``protocol.wire``) |
| ``signals`` | SIGTERM/SIGINT as ``KeyboardInterrupt`` while a run goes |
"""
