"""The task side of a tfmesos run: what every Mesos task executes,
``python -m tfmesos.task`` (``entry``).

It imports only its own modules, ``tfmesos.protocol`` (wire, task_env, hostport) and
the standard library (TensorFlow only in fine-grained mode, once it has its
role): the scheduler side is never loaded into a task.

| module | holds |
| --- | --- |
| ``entry`` | ``main``: register, get the role, serve TensorFlow or run the command |
| ``connection`` | the task's environment (``TaskEnv``) and its rendezvous connection |
| ``replica`` | replica mode: hooks, the command, output forwarding |
| ``replica_guard`` | the leader of a hook's or command's process group, a fork of the task entry |
| ``usage`` | what the command used: cpu, peak memory, GPU memory, samples |
| ``tensorflow_server`` | fine-grained mode: the TensorFlow gRPC server |
| ``bundle_dir`` | ``tfrun --ship``: the bundle's tree (the command checked it) the working directory |
| ``function_runner`` | ``tfmesos.run``'s command: the shipped function called, its outcome written |
| ``result_file`` | that outcome, sent by the entry before the exit frame |
| ``outcome_channel`` | a failure's outcome sent before its runner exits, which fails its peers |
| ``quiet`` | TensorFlow's start-up log lines held to ``TF_CPP_MIN_LOG_LEVEL`` |
| ``warm`` | an interpreter the embedded master started ahead, which becomes one task |
"""
