"""What a replica task is told for its training framework
(``RunSpec.framework``): TensorFlow's ``TF_CONFIG`` (``clusterspec``),
PyTorch's ``torch.distributed`` and ``torchrun`` variables, JAX's
coordinator. Pure functions of the cluster spec, testable without any of
the three installed.

A torch or jax run is one process group: its workers (tfrun ``-w N``),
numbered from 0; worker 0's host runs the group's coordinator (PyTorch's
TCPStore, JAX's coordination service) at a port Mesos reserved for it in
worker 0's offer (the second port that every replica run's worker 0 takes,
``launch.ClusterRun._extra_ports``; an offer without ports: the port worker
0 registered, which nothing else of a torch or jax run binds). Every
address is known to every task before any command starts: the tasks get
their start message once all of them registered."""

import dataclasses
from typing import TYPE_CHECKING, Optional

from ..field_methods import FrozenFieldMethods

if TYPE_CHECKING:   # tfrun's start-up reads this module's names only (test_startup)
    from .clusterspec import ClusterSpec

TENSORFLOW = "tensorflow"
TORCH = "torch"
JAX = "jax"
FRAMEWORKS = (TENSORFLOW, TORCH, JAX)
GROUP_JOB = "worker"              # the one job of a torch or jax process group
OUTSIDE_GROUP = ("tensorboard",)  # jobs a torch or jax run may have besides (tfrun --tensorboard)
MAX_NPROC_PER_TASK = 1024
# tfrun --torch: for a command that runs torchrun itself (static rendezvous).
TORCH_PLACEHOLDERS = ("master_addr", "master_port", "node_rank", "nnodes", "nproc_per_task",
                      "rdzv_endpoint", "rdzv_id")
# torchrun's variables that a static rendezvous sets and an elastic one must not: with
# --rdzv-backend c10d, torchrun ignores --master-addr/--master-port/--node-rank, and its
# workers get MASTER_*, RANK, WORLD_SIZE, ... from the rendezvous round they joined.
STATIC_ONLY = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
               "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "NODE_RANK", "ROLE_RANK",
               "ROLE_WORLD_SIZE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Coordinator(FrozenFieldMethods):
    """Where a torch or jax run's group meets: worker 0's ``host`` at ``port``."""

    host: str
    port: int

    @property
    def address(self) -> str:
        """``host:port``, brackets around an IPv6 host (JAX's form)."""
        from ..protocol.hostport import format_address
        return format_address(self.host, self.port)


def coordinator(spec: "ClusterSpec", port: Optional[int]) -> Optional[Coordinator]:
    """The group's coordinator: worker 0's host at ``port`` (the second port
    of worker 0's offer), else at worker 0's own port (an offer without
    ports); None without workers."""
    workers = spec.get(GROUP_JOB) or []
    if not workers:
        return None
    host, _, own = workers[0].rpartition(":")
    host = host[1:-1] if host.startswith("[") else host
    return Coordinator(host, int(port or own))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Member(FrozenFieldMethods):
    """One task's place in a torch or jax group: ``rank`` (0 for worker 0,
    its ``node_rank``) of ``nodes`` tasks, each starting ``nproc``
    processes (``--nproc-per-task``) and holding ``gpus`` GPUs."""

    rank: int
    nodes: int
    nproc: int = 1
    gpus: int = 0


def torch_environment(where: Coordinator, member: Member) -> dict[str, str]:
    """What ``torch.distributed.init_process_group(init_method="env://")``
    reads (``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``) and
    the rest of what ``torchrun`` gives each process it starts
    (torch/distributed/elastic/agent/server/api.py), for the task's first
    process: ``LOCAL_RANK`` 0 of ``LOCAL_WORLD_SIZE`` (``nproc``), its
    ``GROUP_RANK`` (``NODE_RANK``, Lightning's name) of ``GROUP_WORLD_SIZE``
    tasks. A command that starts ``nproc`` processes itself gives process
    ``i`` the ``RANK`` ``GROUP_RANK * LOCAL_WORLD_SIZE + i``: ``torchrun``
    does, and reads its own options from the ``PET_*`` variables
    (torch/distributed/argparse_util.py ``env``), so a plain ``torchrun
    train.py`` joins the group as ``--nnodes``, ``--node-rank``,
    ``--nproc-per-node``, ``--master-addr`` and ``--master-port`` would
    have it."""
    first, world = member.rank * member.nproc, member.nodes * member.nproc
    return {
        "MASTER_ADDR": where.host, "MASTER_PORT": str(where.port),
        "WORLD_SIZE": str(world), "RANK": str(first),
        "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": str(member.nproc),
        "GROUP_RANK": str(member.rank), "GROUP_WORLD_SIZE": str(member.nodes),
        "NODE_RANK": str(member.rank),
        "ROLE_RANK": str(first), "ROLE_WORLD_SIZE": str(world),
        "PET_NNODES": str(member.nodes), "PET_NODE_RANK": str(member.rank),
        "PET_NPROC_PER_NODE": str(member.nproc),
        "PET_MASTER_ADDR": where.host, "PET_MASTER_PORT": str(where.port),
    }


def torch_placeholders(where: Coordinator, member: Member) -> dict[str, object]:
    """``{master_addr}`` ``{master_port}`` ``{node_rank}`` ``{nnodes}``
    ``{nproc_per_task}``: ``torchrun``'s options of a static rendezvous."""
    return {"master_addr": where.host, "master_port": where.port, "node_rank": member.rank,
            "nnodes": member.nodes, "nproc_per_task": member.nproc}


def elastic_environment(where: Coordinator, member: Member, nodes: "tuple[int, int]",
                        run_id: str) -> dict[str, str]:
    """``tfrun --torch-elastic MIN:MAX``: what makes a plain ``torchrun
    train.py`` in the task an elastic agent of the run's c10d rendezvous
    (torchrun reads each option's default from ``PET_<OPTION>``,
    torch/distributed/argparse_util.py ``env``): ``--nnodes MIN:MAX``,
    ``--rdzv-backend c10d``, ``--rdzv-endpoint`` worker 0's host at the
    group's reserved port, ``--rdzv-id`` the run's id, and ``--rdzv-conf
    is_host=`` true for worker 0 only: it hosts the rendezvous' TCPStore
    (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py
    ``_create_tcp_store``, whose guess from the host name would make every
    task on worker 0's host try to host it; an explicit ``is_host`` is
    respected as it is). ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: each
    round's workers bootstrap from a store of that round (rank 0 hosts it)
    instead of the rendezvous' own store, which torch shares with every
    round's workers under the same keys (dynamic_rendezvous.py
    ``next_rendezvous`` builds the shared store's info once): after an
    in-place restart a worker read the previous round's addresses (gloo
    "Connection refused") or waited under other keys for good (the agents'
    restart counts differ), pytorch/pytorch#135712. ``--max-restarts`` is
    left to the command (torchrun's default 0: README "Elastic" says who
    restarts what)."""
    return {
        "PET_NNODES": "%d:%d" % nodes, "PET_NPROC_PER_NODE": str(member.nproc),
        "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": where.address,
        "PET_RDZV_ID": run_id,
        "PET_RDZV_CONF": "is_host=%s" % ("true" if member.rank == 0 else "false"),
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "TFMESOS_ELASTIC_NNODES": "%d:%d" % nodes,
    }


def jax_environment(where: Coordinator, member: Member) -> dict[str, str]:
    """What makes ``jax.distributed.initialize()`` work with no arguments:
    it reads ``JAX_COORDINATOR_ADDRESS`` itself, and the process count and
    id from the first cluster environment it detects
    (jax/_src/clusters/cluster.py ``auto_detect_unset_distributed_params``);
    JAX has no variables of its own for those two, so the task gets those
    of Open MPI's ``mpirun``, which its ``OmpiCluster`` reads
    (jax/_src/clusters/ompi_cluster.py: present when
    ``OMPI_MCA_orte_hnp_uri`` is set; ``OMPI_COMM_WORLD_SIZE``,
    ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_LOCAL_RANK``). JAX then
    restricts the process to local device ``OMPI_COMM_WORLD_LOCAL_RANK``
    (one process per GPU), so a task with GPUs also gets
    ``JAX_LOCAL_DEVICE_IDS`` (jax/_src/distributed.py): all of its own."""
    scheme = "tcp6" if ":" in where.host else "tcp"
    env = {
        "JAX_COORDINATOR_ADDRESS": where.address,
        "OMPI_MCA_orte_hnp_uri": "0.0;%s://%s" % (scheme, where.address),
        "OMPI_COMM_WORLD_SIZE": str(member.nodes),
        "OMPI_COMM_WORLD_RANK": str(member.rank),
        "OMPI_COMM_WORLD_LOCAL_RANK": "0",
    }
    if member.gpus:
        env["JAX_LOCAL_DEVICE_IDS"] = ",".join(str(i) for i in range(member.gpus))
    return env


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Told(FrozenFieldMethods):
    """What one replica task is told: ``env`` (with the command) and the
    values of the ``{placeholders}`` of its command."""

    env: dict[str, str]
    placeholders: dict[str, object]


def task_told(framework: str, spec: "ClusterSpec", job: str, index: int, *,
              keras: Optional[str] = None, group: Optional[Coordinator] = None,
              start: int = 0, nproc: int = 1, gpus: int = 0,
              elastic: "Optional[tuple[int, int]]" = None, run_id: str = "") -> Told:
    """What task ``index`` of ``job`` (whose first index is ``start``) of a
    ``framework`` run is told. Every run: the ``TFMESOS_*`` variables and
    ``{ps_hosts}``-like placeholders (``clusterspec``). TensorFlow: also
    ``TF_CONFIG``, and the workers Keras' ``keras_environment`` at
    ``keras`` (the coordinator's address, or None). torch and jax: no
    ``TF_CONFIG``; the workers join the ``group`` (``coordinator``) with
    ``torch_environment`` and ``torch_placeholders``, or
    ``jax_environment`` (and Keras' variables: Keras 3 on JAX is a JAX
    program). ``elastic`` (``--torch-elastic MIN:MAX``): torch's workers get
    ``elastic_environment`` (with the run's ``run_id``) instead of a static
    rendezvous' ranks, ``{nnodes}`` is ``MIN:MAX``, and ``{rdzv_endpoint}``
    ``{rdzv_id}`` are set (``{node_rank}`` too: the task's index, which an
    elastic torchrun does not use)."""
    from .clusterspec import keras_environment, placeholders, task_environment
    env = task_environment(spec, job, index, keras if framework == TENSORFLOW else None)
    values = placeholders(spec, job, index)
    if framework == TENSORFLOW:
        return Told(env, values)
    del env["TF_CONFIG"]
    if job != GROUP_JOB or group is None:
        return Told(env, values)
    member = Member(index - start, len(spec[GROUP_JOB]), nproc, gpus)
    if framework == TORCH:
        env.update(torch_environment(group, member))
        values.update(torch_placeholders(group, member))
        values.update(rdzv_endpoint=group.address, rdzv_id=run_id)
        if elastic is not None:
            for name in STATIC_ONLY:
                env.pop(name, None)
            env.update(elastic_environment(group, member, elastic, run_id))
            values["nnodes"] = "%d:%d" % elastic
    else:
        env.update(keras_environment(spec, job, member.rank, group.address))
        env.update(jax_environment(group, member))
    return Told(env, values)


def framework_placeholders(framework: str) -> tuple[str, ...]:
    """The placeholders a ``framework`` run's command may use besides
    ``clusterspec``'s."""
    return TORCH_PLACEHOLDERS if framework == TORCH else ()
