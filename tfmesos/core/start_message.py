"""The start message a task gets once the cluster is formed (or when it is
back): its role and the cluster spec; in replica mode also its command,
environment (``training_frameworks.task_told``) and working directory."""

from typing import Any, Optional

from ..protocol import task_env
from .clusterspec import ClusterSpec
from .jobs import check_command_length
from .slots import TaskSlot
from .spec import RunSpec
from .training_frameworks import Coordinator, task_told


def start_message(spec: RunSpec, slot: TaskSlot, cluster: Optional[ClusterSpec], *,
                  forward_logs: bool, keras: Optional[str], group: Optional[Coordinator],
                  run_id: str, restarts: int, cwd: Optional[str]) -> dict[str, Any]:
    """What ``slot`` of the run of ``spec`` is told; ``cwd``: its working
    directory in replica mode (None: where it starts)."""
    message: dict[str, Any] = {"type": "start", "mode": spec.mode, "job": slot.job.name,
                               "index": slot.index, "cluster": cluster,
                               "forward_logs": forward_logs}
    if spec.mode == "replica":
        template = slot.job.cmd or spec.command
        # (a replica run has a command, RunSpec checks; tasks start once formed)
        assert template is not None and cluster is not None
        told = task_told(spec.framework, cluster, slot.job.name, slot.index,
                         keras=keras, group=group, start=slot.job.start,
                         nproc=spec.nproc_per_task, gpus=slot.job.gpus, elastic=spec.elastic,
                         run_id=run_id)
        env = told.env
        env[task_env.RESTART] = str(restarts)
        # PYTHONUNBUFFERED comes with the TaskInfo's environment.
        # ``result_receipt``: this scheduler acknowledges a ``tfmesos.run``
        # result once it came whole (``rendezvous``); the task waits for that.
        command = template.format(**told.placeholders)
        check_command_length(command, "for this cluster")
        message.update(cmd=command, env=env,
                       hooks=spec.hook_commands, cwd=cwd, result_receipt=True)
    return message
