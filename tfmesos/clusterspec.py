"""What a task is told about the cluster: the cluster spec, ``TF_CONFIG``,
the ``{placeholders}`` of replica commands and the original's ``TFMESOS_*``
variables. Pure functions of the addresses, testable without TensorFlow."""

import json

# TensorFlow's order of task types in a cluster spec.
_JOB_ORDER = ("chief", "worker", "ps")


def cluster_spec(addresses):
    """``{(job, index): "host:port"}`` -> ``{job: [addresses by index]}``,
    every job's list ordered by task index (the original hung when it was not)."""
    jobs = {}
    for (job, index), address in addresses.items():
        jobs.setdefault(job, []).append((index, address))
    return {job: [address for _, address in sorted(entries)] for job, entries in
            sorted(jobs.items(), key=lambda item: _job_rank(item[0]))}


def _job_rank(job):
    return (_JOB_ORDER.index(job) if job in _JOB_ORDER else len(_JOB_ORDER), job)


# Jobs of a run that are not part of TensorFlow's cluster.
OUTSIDE_TF_CLUSTER = ("evaluator", "tensorboard")


def tf_config(spec, job, index):
    """``TF_CONFIG`` as TensorFlow reads it: the evaluator (and TensorBoard) are
    not part of the ``cluster``, though the evaluator gets ``task.type ==
    "evaluator"``; empty jobs are left out."""
    cluster = {name: list(addresses) for name, addresses in spec.items()
               if name not in OUTSIDE_TF_CLUSTER and addresses}
    return {"cluster": cluster, "task": {"type": job, "index": index}}


def placeholders(spec, job, index):
    """Values for ``{ps_hosts}``, ``{worker_hosts}``, ``{<job>_hosts}``,
    ``{job_name}`` and ``{task_index}`` in replica commands."""
    values = {"ps_hosts": "", "worker_hosts": "", "chief_hosts": ""}
    values.update({"%s_hosts" % name: ",".join(addresses) for name, addresses in spec.items()})
    values.update(job_name=job, task_index=index)
    return values


def task_environment(spec, job, index):
    """Variables a replica task's command runs with."""
    values = placeholders(spec, job, index)
    return {
        "TF_CONFIG": json.dumps(tf_config(spec, job, index)),
        "TFMESOS_DISTRIBUTED": "1",
        "TFMESOS_PS_HOSTS": values["ps_hosts"],
        "TFMESOS_WORKER_HOSTS": values["worker_hosts"],
        "TFMESOS_CHIEF_HOSTS": values["chief_hosts"],
        "TFMESOS_JOB_NAME": job,
        "TFMESOS_TASK_INDEX": str(index),
    }


def render_command(template, spec, job, index):
    return template.format(**placeholders(spec, job, index))
