"""The embedded single-machine master (``--master local``).

``LocalMaster`` serves the Mesos v1 scheduler HTTP API on 127.0.0.1 and runs
each task as a local process (or, given a container runner, a container) in
its own sandbox; ``AgentSpec`` says what each of its agents offers::

    from tfmesos.mesos.local import AgentSpec, LocalMaster

    with LocalMaster(agents=[AgentSpec(cpus=4, mem=8192, gpus=2)]) as master:
        print(master.url)     # http://127.0.0.1:PORT, give it to the driver

It checks calls strictly (unknown fields are a 400, unlike real Mesos) and
offers fault injection (``remove_agent``, ``drop_subscription``,
``stall_subscription``, ``set_leader``) for reliability tests.
"""

from .agent import AgentSpec, AgentSpecError
from .master import LocalMaster, LocalMasterError

__all__ = ["LocalMaster", "AgentSpec", "AgentSpecError", "LocalMasterError"]
