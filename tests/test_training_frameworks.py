"""What a task of a torch or jax run is told (``core.training_frameworks``), and the
options and specs that ask for one (``tfrun --torch``, ``--jax``,
``--nproc-per-task``), without any task: pure functions."""

import json

import pytest

from tfmesos.cli import tfrun_options
from tfmesos.cli.tfrun_flags import in_flags
from tfmesos.core.clusterspec import task_environment
from tfmesos.core.jobs import Job
from tfmesos.core.spec import RunSpec
from tfmesos.core.spec_codec import spec_from_dict, spec_to_dict
from tfmesos.core.training_frameworks import (
    Coordinator,
    Member,
    coordinator,
    jax_environment,
    task_told,
    torch_environment,
    torch_placeholders,
)
from tfmesos.exceptions import SpecError

SPEC = {"worker": ["10.0.0.7:31000", "10.0.0.8:31004", "10.0.0.9:31008"]}
GROUP = Coordinator("10.0.0.7", 31001)


def test_the_coordinator_is_worker_0s_host_at_its_second_port_else_at_its_own():
    assert coordinator(SPEC, 31001) == GROUP and GROUP.address == "10.0.0.7:31001"
    assert coordinator(SPEC, None) == Coordinator("10.0.0.7", 31000)   # an offer without ports
    ipv6 = coordinator({"worker": ["[fe80::1]:31000"]}, 31001)
    assert ipv6 == Coordinator("fe80::1", 31001) and ipv6.address == "[fe80::1]:31001"
    assert coordinator({"tensorboard": ["t:1"]}, 31001) is None


def test_torch_variables_are_torchruns_for_the_tasks_first_process():
    assert torch_environment(GROUP, Member(rank=2, nodes=3)) == {
        "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "31001", "WORLD_SIZE": "3", "RANK": "2",
        "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "2", "GROUP_WORLD_SIZE": "3",
        "NODE_RANK": "2", "ROLE_RANK": "2", "ROLE_WORLD_SIZE": "3",
        "PET_NNODES": "3", "PET_NODE_RANK": "2", "PET_NPROC_PER_NODE": "1",
        "PET_MASTER_ADDR": "10.0.0.7", "PET_MASTER_PORT": "31001"}
    # 4 processes a task: this task's first is rank 8 of 12
    env = torch_environment(GROUP, Member(rank=2, nodes=3, nproc=4))
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"],
            env["GROUP_RANK"], env["PET_NPROC_PER_NODE"]) == ("8", "12", "0", "4", "2", "4")
    assert "CUDA_VISIBLE_DEVICES" not in env   # the agent's, from the task's GPUs
    values = torch_placeholders(GROUP, Member(rank=1, nodes=3, nproc=2))
    command = ("torchrun --nnodes {nnodes} --node-rank {node_rank} --nproc-per-node "
               "{nproc_per_task} --master-addr {master_addr} --master-port {master_port} t.py")
    assert command.format(**values) == ("torchrun --nnodes 3 --node-rank 1 --nproc-per-node 2 "
                                        "--master-addr 10.0.0.7 --master-port 31001 t.py")


def test_jax_variables_are_the_coordinators_and_open_mpis_which_jax_detects():
    assert jax_environment(GROUP, Member(rank=1, nodes=3)) == {
        "JAX_COORDINATOR_ADDRESS": "10.0.0.7:31001",
        "OMPI_MCA_orte_hnp_uri": "0.0;tcp://10.0.0.7:31001",
        "OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_RANK": "0"}
    # JAX would take local device 0 only (OMPI_COMM_WORLD_LOCAL_RANK): a task's GPUs are all its
    env = jax_environment(Coordinator("fe80::1", 9), Member(rank=0, nodes=2, gpus=3))
    assert env["JAX_LOCAL_DEVICE_IDS"] == "0,1,2"
    assert env["OMPI_MCA_orte_hnp_uri"] == "0.0;tcp6://[fe80::1]:9"


def test_a_tensorflow_task_is_told_what_it_was_told_before():
    spec = dict(SPEC, ps=["p:1"])
    for job, index in (("worker", 1), ("ps", 0)):
        told = task_told("tensorflow", spec, job, index, keras="10.0.0.7:31001", group=GROUP)
        assert told.env == task_environment(spec, job, index, "10.0.0.7:31001")
        assert told.placeholders["ps_hosts"] == "p:1" and "master_addr" not in told.placeholders


def test_torch_workers_join_the_group_and_get_no_tf_config():
    told = task_told("torch", SPEC, "worker", 1, keras="10.0.0.7:31001", group=GROUP, nproc=2)
    assert "TF_CONFIG" not in told.env and "KERAS_DISTRIBUTION_JOB_ADDRESSES" not in told.env
    assert (told.env["RANK"], told.env["WORLD_SIZE"], told.env["MASTER_PORT"]) == ("2", "6", "31001")
    assert told.env["TFMESOS_TASK_INDEX"] == "1" and told.env["TFMESOS_JOB_NAME"] == "worker"
    assert told.placeholders["node_rank"] == 1 and told.placeholders["worker_hosts"]
    # a job numbered from 3 (the API's Job.start): its first task is node 0
    assert task_told("torch", SPEC, "worker", 3, group=GROUP, start=3).env["RANK"] == "0"
    board = task_told("torch", dict(SPEC, tensorboard=["t:1"]), "tensorboard", 0, group=GROUP)
    assert "MASTER_ADDR" not in board.env and "TF_CONFIG" not in board.env


def test_jax_workers_get_keras_variables_at_the_same_coordinator():
    told = task_told("jax", SPEC, "worker", 2, keras=None, group=GROUP, gpus=1)
    assert "TF_CONFIG" not in told.env and "MASTER_ADDR" not in told.env
    assert told.env["JAX_COORDINATOR_ADDRESS"] == "10.0.0.7:31001"
    assert told.env["KERAS_DISTRIBUTION_JOB_ADDRESSES"] == "10.0.0.7:31001"
    assert (told.env["KERAS_DISTRIBUTION_PROCESS_ID"], told.env["OMPI_COMM_WORLD_RANK"],
            told.env["JAX_LOCAL_DEVICE_IDS"]) == ("2", "2", "0")


# -- the specs ----------------------------------------------------------------------

def replica(framework, jobs=({"name": "worker", "num": 2},), command="python t.py", **more):
    return RunSpec(jobs=jobs, mode="replica", command=command, framework=framework, **more)


def test_a_torch_or_jax_run_is_one_group_of_workers():
    for framework in ("torch", "jax"):
        replica(framework, jobs=({"name": "worker", "num": 2}, {"name": "tensorboard"}))
        with pytest.raises(SpecError, match="^framework=%s runs workers only, one process "
                           "group: drop the ps, chief task\\(s\\)$" % framework):
            replica(framework, jobs=({"name": "ps"}, {"name": "worker"}, {"name": "chief"}))
        with pytest.raises(SpecError, match="needs workers"):
            replica(framework, jobs=({"name": "tensorboard"},))
        with pytest.raises(SpecError, match="fine mode runs TensorFlow servers"):
            RunSpec(jobs=(Job("worker"),), framework=framework)
    with pytest.raises(SpecError, match="^unknown framework 'mxnet': use one of tensorflow, "
                       "torch, jax$"):
        replica("mxnet")
    with pytest.raises(SpecError, match="^nproc_per_task is for framework=torch"):
        replica("jax", nproc_per_task=2)
    with pytest.raises(SpecError, match="nproc_per_task must be a whole number from 1 to 1024"):
        replica("torch", nproc_per_task=0)


def test_torchs_placeholders_are_known_in_a_torch_run_only():
    replica("torch", command="torchrun --nnodes {nnodes} --node-rank {node_rank} "
            "--nproc-per-node {nproc_per_task} --master-addr {master_addr} "
            "--master-port {master_port} t.py")
    with pytest.raises(SpecError) as error:
        replica("tensorflow", command="torchrun --master-port {master_port} t.py")
    assert str(in_flags(error.value)) == ("the placeholder {master_port} in the command is for "
                                          "--torch runs: add it (or write {{ and }} for "
                                          "literal braces)")
    with pytest.raises(SpecError, match="unknown placeholder {rank}"):
        replica("torch", command="python t.py {rank}")


def test_the_framework_is_in_the_saved_spec():
    spec = replica("torch", nproc_per_task=4)
    again = spec_from_dict(json.loads(json.dumps(spec_to_dict(spec))))
    assert again == spec and (again.framework, again.nproc_per_task) == ("torch", 4)
    older = spec_to_dict(replica("tensorflow"))   # a spec saved before frameworks
    del older["framework"], older["nproc_per_task"]
    assert spec_from_dict(older) == replica("tensorflow")


# -- tfrun's options ---------------------------------------------------------------

def tfrun_spec(*argv):
    args = tfrun_options.build_parser().parse_options(list(argv))
    return tfrun_options.read_options(args, "python t.py")


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_tfrun_torch_and_jax_run_workers_only(framework):
    spec = tfrun_spec("--%s" % framework, "-w", "3")
    assert spec.framework == framework and [job.name for job in spec.jobs] == ["worker"]
    assert [job.name for job in tfrun_spec("-w", "3").jobs] == ["ps", "worker"]  # -s: 1
    assert tfrun_spec("--%s" % framework, "-s", "0").jobs[0].num == 1
    for argv, asked in ((["-s", "2"], "-s 2"), (["--chief"], "--chief"),
                        (["-s", "1", "--evaluator"], "-s 1 and --evaluator")):
        with pytest.raises(SpecError) as error:
            tfrun_spec("--%s" % framework, *argv)
        assert str(error.value) == "--%s runs workers only, one process group: drop %s" % (
            framework, asked)
    with pytest.raises(SpecError) as error:
        tfrun_spec("--%s" % framework, "--job", "ps:1")
    assert str(in_flags(error.value)) == ("--%s runs workers only, one process group: drop the "
                                          "ps task(s)" % framework)


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_tfrun_torch_and_jax_without_workers_ask_for_workers_not_a_chief(framework):
    with pytest.raises(SpecError) as error:
        tfrun_spec("--%s" % framework, "-w", "0")
    assert str(in_flags(error.value)) == "nothing to run: ask for at least one worker (-w N)"
    with pytest.raises(SpecError) as error:
        tfrun_spec("-w", "0")
    assert str(in_flags(error.value)).endswith("ask for at least one worker (-w N) or a chief (-c)")


def test_tfrun_nproc_per_task_is_torchs():
    assert tfrun_spec("--torch", "--nproc-per-task", "4").nproc_per_task == 4
    assert tfrun_spec("--torch").nproc_per_task == 1
    with pytest.raises(SpecError) as error:
        tfrun_spec("--jax", "--nproc-per-task", "2")
    assert str(in_flags(error.value)) == ("--nproc-per-task is for --torch: the processes "
                                          "torchrun (or the command) starts in each task")
    with pytest.raises(SystemExit) as stop:
        tfrun_options.build_parser().parse_options(["--torch", "--jax"])
    assert stop.value.code == 2


# -- elastic (tfrun --torch-elastic) ---------------------------------------------------

def test_elastic_workers_get_torchruns_c10d_options_and_no_static_ranks():
    zero = task_told("torch", SPEC, "worker", 0, group=GROUP, elastic=(1, 3), run_id="r1")
    two = task_told("torch", SPEC, "worker", 2, group=GROUP, elastic=(1, 3), run_id="r1",
                    nproc=2)
    for told, host in ((zero, "true"), (two, "false")):
        env = told.env
        assert {name: value for name, value in env.items() if name.startswith("PET_")} == {
            "PET_NNODES": "1:3", "PET_NPROC_PER_NODE": "2" if told is two else "1",
            "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "10.0.0.7:31001",
            "PET_RDZV_ID": "r1", "PET_RDZV_CONF": "is_host=" + host}
        # each round's workers bootstrap from a store of their own round
        # (pytorch/pytorch#135712: the shared one kept the last round's keys)
        assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
        # torchrun gives its workers these from the rendezvous round they joined
        for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "GROUP_RANK",
                     "NODE_RANK", "TF_CONFIG"):
            assert name not in env
        assert env["TFMESOS_TASK_INDEX"] == str(told.placeholders["node_rank"])
    command = "torchrun --nnodes {nnodes} --rdzv-endpoint {rdzv_endpoint} --rdzv-id {rdzv_id} t"
    assert command.format(**two.placeholders) == \
        "torchrun --nnodes 1:3 --rdzv-endpoint 10.0.0.7:31001 --rdzv-id r1 t"
    static = task_told("torch", SPEC, "worker", 1, group=GROUP, run_id="r1")
    assert "PET_RDZV_BACKEND" not in static.env and static.placeholders["nnodes"] == 3
    assert static.placeholders["rdzv_endpoint"] == "10.0.0.7:31001"


def test_an_elastic_spec_makes_its_workers_sticky_and_is_saved():
    spec = replica("torch", elastic=(1, 2))
    assert spec.elastic == (1, 2) and spec.sticky_jobs == ("worker",)
    assert spec_from_dict(json.loads(json.dumps(spec_to_dict(spec)))) == spec
    for nodes, match in (((3, 4), "elastic 3:4 needs between 3 and 4 workers, got 2: ask for 4"),
                         ((2, 1), "elastic is MIN:MAX nodes, 1 <= MIN <= MAX <= 10000, got 2:1"),
                         ((0, 2), "got 0:2")):
        with pytest.raises(SpecError, match=match):
            replica("torch", elastic=nodes)
    with pytest.raises(SpecError, match="^elastic is for framework=torch"):
        replica("jax", elastic=(1, 2))


def test_tfrun_torch_elastic_implies_torch():
    spec = tfrun_spec("--torch-elastic", "1:2", "-w", "2")
    assert (spec.framework, spec.elastic, spec.sticky_jobs) == ("torch", (1, 2), ("worker",))
    assert tfrun_spec("--torch", "--torch-elastic", "2", "-w", "2").elastic == (2, 2)
    with pytest.raises(SpecError) as error:
        tfrun_spec("--torch-elastic", "1:2", "-w", "3")
    assert str(in_flags(error.value)) == ("--torch-elastic 1:2 needs between 1 and 2 workers, "
                                          "got 3: ask for 2")
    with pytest.raises(SpecError, match="^--torch-elastic runs torchrun: drop --jax$"):
        tfrun_spec("--jax", "--torch-elastic", "1:2")
    for bad in ("x", "2:1", "0:3"):
        with pytest.raises(SystemExit) as stop:
            tfrun_options.build_parser().parse_options(["--torch-elastic", bad])
        assert stop.value.code == 2
