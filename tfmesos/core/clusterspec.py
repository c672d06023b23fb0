"""What a task is told about the cluster: the cluster spec, ``TF_CONFIG``,
the ``{placeholders}`` of replica commands and the original's ``TFMESOS_*``
variables. Pure functions of the addresses, testable without TensorFlow."""

import json
from collections.abc import Mapping, Sequence
from typing import Optional, TypedDict

from ..protocol import task_env
from ..protocol.hostport import format_address

# TensorFlow's order of task types in a cluster spec.
_JOB_ORDER = ("chief", "worker", "ps")

# ``{job: ["host:port" by task index]}``, as ``cluster_spec`` makes it.
ClusterSpec = Mapping[str, Sequence[str]]


class TFTask(TypedDict):
    type: str
    index: int


class TFConfig(TypedDict):
    """``TF_CONFIG``, as TensorFlow reads it."""

    cluster: dict[str, list[str]]
    task: TFTask


def cluster_spec(addresses: Mapping[tuple[str, int], str]) -> dict[str, list[str]]:
    """``{(job, index): "host:port"}`` -> ``{job: [addresses by index]}``,
    every job's list ordered by task index (the original hung when it was not)."""
    jobs: dict[str, list[tuple[int, str]]] = {}
    for (job, index), address in addresses.items():
        jobs.setdefault(job, []).append((index, address))
    return {job: [address for _, address in sorted(entries)] for job, entries in
            sorted(jobs.items(), key=lambda item: _job_rank(item[0]))}


def _job_rank(job: str) -> tuple[int, str]:
    return (_JOB_ORDER.index(job) if job in _JOB_ORDER else len(_JOB_ORDER), job)


# Jobs of a run that are not part of TensorFlow's cluster.
OUTSIDE_TF_CLUSTER = ("evaluator", "tensorboard")


def tf_config(spec: ClusterSpec, job: str, index: int) -> TFConfig:
    """``TF_CONFIG`` as TensorFlow reads it: the evaluator (and TensorBoard) are
    not part of the ``cluster``, though the evaluator gets ``task.type ==
    "evaluator"``; empty jobs are left out."""
    cluster = {name: list(addresses) for name, addresses in spec.items()
               if name not in OUTSIDE_TF_CLUSTER and addresses}
    return {"cluster": cluster, "task": {"type": job, "index": index}}


def _hosts(spec: ClusterSpec) -> dict[str, str]:
    """``{<job>_hosts}`` of every job of ``spec``, comma-separated; ``ps``,
    ``worker`` and ``chief`` always (empty when the run has none)."""
    hosts = {"ps_hosts": "", "worker_hosts": "", "chief_hosts": ""}
    hosts.update({"%s_hosts" % name: ",".join(addresses) for name, addresses in spec.items()})
    return hosts


def placeholders(spec: ClusterSpec, job: str, index: int) -> dict[str, object]:
    """Values for ``{ps_hosts}``, ``{worker_hosts}``, ``{<job>_hosts}``,
    ``{job_name}`` and ``{task_index}`` in replica commands."""
    values: dict[str, object] = dict(_hosts(spec))
    values.update(job_name=job, task_index=index)
    return values


def task_environment(spec: ClusterSpec, job: str, index: int,
                     keras_coordinator: Optional[str] = None) -> dict[str, str]:
    """Variables a replica task's command runs with; the workers also get
    ``keras_environment`` when there is a ``keras_coordinator``."""
    hosts = _hosts(spec)
    env = {
        "TF_CONFIG": json.dumps(tf_config(spec, job, index)),
        task_env.DISTRIBUTED: "1",
        task_env.PS_HOSTS: hosts["ps_hosts"],
        task_env.WORKER_HOSTS: hosts["worker_hosts"],
        task_env.CHIEF_HOSTS: hosts["chief_hosts"],
        task_env.JOB_NAME: job,
        task_env.TASK_INDEX: str(index),
    }
    env.update(keras_environment(spec, job, index, keras_coordinator))
    return env


# Keras 3's multi-process training (keras.distribution, JAX backend): every
# worker is one process of one job; worker 0's host runs the coordinator.
KERAS_JOB = "worker"


def keras_coordinator(spec: ClusterSpec, port: Optional[int]) -> Optional[str]:
    """``host:port`` of the coordinator of ``keras.distribution.initialize()``:
    worker 0's host at ``port`` (a second port of worker 0's offer, reserved
    by Mesos for it); None without workers or without that port."""
    workers = spec.get(KERAS_JOB) or []
    if not workers or not port:
        return None
    host = workers[0].rpartition(":")[0]
    return format_address(host[1:-1] if host.startswith("[") else host, int(port))


def keras_environment(spec: ClusterSpec, job: str, index: int,
                      coordinator: Optional[str]) -> dict[str, str]:
    """The variables ``keras.distribution.initialize()`` reads, for worker
    ``index`` (replica mode numbers workers from 0): the coordinator's
    address, how many processes the job has (the workers) and which one this
    is. Other jobs, and runs without a coordinator, get none."""
    if job != KERAS_JOB or not coordinator:
        return {}
    return {
        "KERAS_DISTRIBUTION_JOB_ADDRESSES": coordinator,
        "KERAS_DISTRIBUTION_NUM_PROCESSES": str(len(spec[KERAS_JOB])),
        "KERAS_DISTRIBUTION_PROCESS_ID": str(index),
    }


def render_command(template: str, spec: ClusterSpec, job: str, index: int) -> str:
    return template.format(**placeholders(spec, job, index))
