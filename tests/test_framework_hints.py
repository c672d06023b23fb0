"""The hints for PyTorch's and JAX's usual failures (issue 36, item 5), on
the lines PyTorch 2.13 and JAX 0.10 print (``tfmesos/record/hints.py``):
a script for torchrun or Slurm run as a plain command, NCCL without GPUs,
a rank that never joined the process group."""

import pytest

from tfmesos.record.hints import hint_for, matching_rule

TRACE = ["Traceback (most recent call last):", '  File "train.py", line 12, in <module>',
         "    dist.init_process_group(\"nccl\")"]

CASES = [
    # (the task's last stderr lines, its GPUs) -> the rule that answers
    (TRACE + ["ValueError: Error initializing torch.distributed using env:// rendezvous: "
              "environment variable MASTER_ADDR expected, but not set"], 0,
     "torch-not-launched"),
    (TRACE + ["ValueError: Error initializing torch.distributed using env:// rendezvous: "
              "environment variable RANK expected, but not set"], None, "torch-not-launched"),
    (TRACE + ["RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!"],
     0, "nccl-without-gpus"),
    (TRACE + ["RuntimeError: Distributed package doesn't have NCCL built in"], None,
     "nccl-without-gpus"),
    (TRACE + ["torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/"
              "c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with "
              "NCCL_DEBUG=INFO for details), NCCL version 2.21.5"], 0,
     "nccl-error-without-gpus"),
    (["ValueError: coordinator_address should be defined."], 0, "jax-not-launched"),
    (["ValueError: Number of processes must be defined."], None, "jax-not-launched"),
    (["torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. "
      "1/2 clients joined."], 0, "torch-ranks-missing"),
    (["torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms "
      "while trying to connect to (10.0.0.5, 29500)."], 0, "torch-store-unreachable"),
    (["torch.distributed.DistStoreError: wait timeout after 2000ms, keys: /default_pg/0//"
      "cuda//0"], 0, "torch-store-timeout"),
    (["torch.distributed.DistStoreError: Socket Timeout"], 0, "torch-store-timeout"),
]


@pytest.mark.parametrize("lines, gpus, rule", CASES)
def test_each_failure_gets_its_hint(lines, gpus, rule):
    found, _ = matching_rule(lines, 1, "", gpus=gpus)
    assert found is not None and found.name == rule
    assert hint_for(lines, 1, "", "worker", gpus)


def test_an_nccl_error_of_a_task_with_gpus_or_of_unknown_gpus_is_not_blamed_on_gpus():
    lines = ["torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
             "unhandled cuda error"]
    for gpus in (1, None):
        rule, _ = matching_rule(lines, 1, "", gpus=gpus)
        assert rule is None or not rule.name.startswith("nccl")


def test_the_hints_say_what_to_do():
    def hint(line, gpus=0, job="worker"):
        return hint_for(["Traceback (most recent call last):", line], 1, "", job, gpus)

    assert hint("ValueError: Error initializing torch.distributed using env:// rendezvous: "
                "environment variable MASTER_ADDR expected, but not set") == (
        "the script expects torchrun's variables (MASTER_ADDR and the rest: "
        "init_process_group's env://): run it with tfrun --torch (tfmesos.run: "
        "framework=\"torch\"), which gives every worker MASTER_ADDR, MASTER_PORT, RANK and "
        "WORLD_SIZE")
    assert hint("RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs "
                "found!") == (
        "NCCL runs on GPUs only and this task has none: use backend gloo "
        "(init_process_group(\"gloo\")), or give the workers GPUs with -Gw (and a CUDA "
        "build of PyTorch)")
    assert "with --job trainer:COUNT:CPUS:MEM:GPUS" in hint(
        "torch.distributed.DistBackendError: NCCL error in: x.cpp:1, unhandled system error",
        job="trainer")
    assert hint("ValueError: coordinator_address should be defined.").startswith(
        "jax.distributed.initialize() was not told its coordinator, process count and id: run "
        "with tfrun --jax (tfmesos.run: framework=\"jax\")")
    assert hint("torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for "
                "clients. 3/4 clients joined.").startswith(
        "only 3 of the 4 ranks joined the process group at worker 0's store before its "
        "timeout: a worker failed or hangs before init_process_group")
    # the missing one is worker 0, whose host runs the store
    assert hint("torch.distributed.DistNetworkError: The client socket has timed out after "
                "1800000ms while trying to connect to (10.0.0.5, 29500).").startswith(
        "this rank could not reach the process group's store at 10.0.0.5:29500 "
        "(MASTER_ADDR:MASTER_PORT, on worker:0 under tfrun --torch): worker:0 failed or hangs")


# Lightning's Trainer without num_nodes (tfrun --torch -w 2): its world is
# 1 a task, and worker 1 asks gloo for rank 1 of 1.
LIGHTNING_NO_NODES = [
    "  File \"/usr/lib/python3/torch/distributed/distributed_c10d.py\", line 2169, in "
    "_new_process_group_helper",
    "    backend_class = ProcessGroupGloo(",
    "                    ^^^^^^^^^^^^^^^^^",
    "RuntimeError: [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/context.cc:23] "
    "rank < size. 1 vs 1"]

# torchrun in the task (tfrun --torch -- torchrun ... train.py): its rank's
# process failed; torchrun exits 1 whatever the rank's code.
TORCHRUN_CHILD_FAILED = [
    "[rank1]: RuntimeError: rank1 boom after init",
    "E1201 02:26:55.800000 13811 site-packages/torch/distributed/elastic/multiprocessing/"
    "api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: 13990) of binary: /usr/bin/python3",
    "Traceback (most recent call last):",
    "  File \"/usr/lib/python3/torch/distributed/launcher/api.py\", line 383, in launch_agent",
    "    raise ChildFailedError(",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "/tmp/train.py FAILED",
    "------------------------------------------------------------",
    "Failures:",
    "[1]:",
    "  time      : 2026-12-01_02:26:55",
    "  host      : localhost",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : 2 (pid: 13991)",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2026-12-01_02:26:55",
    "  host      : localhost",
    "  rank      : 1 (local_rank: 0)",
    "  exitcode  : -9 (pid: 13990) ",
    "  error_file: <N/A>",
    "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    "============================================================"]


def test_lightning_without_num_nodes_is_told_the_world_size_to_give():
    assert matching_rule(LIGHTNING_NO_NODES, 1, "")[0].name == "lightning-world-size"
    assert hint_for(LIGHTNING_NO_NODES, 1, "", "worker", 0) == (
        "the script's world size differs from tfrun's WORLD_SIZE (rank 1 in a group of 1); "
        "under Lightning give Trainer(num_nodes=int(os.environ['GROUP_WORLD_SIZE']), "
        "devices=int(os.environ['LOCAL_WORLD_SIZE']))")


def test_torchrun_s_failed_child_is_named_with_its_own_exit_code():
    assert matching_rule(TORCHRUN_CHILD_FAILED, 1, "")[0].name == "torchrun-child-failed"
    assert hint_for(TORCHRUN_CHILD_FAILED, 1, "", "worker", 0) == (
        "the training process (rank 1) exited with code -9; torchrun's own exit code is 1 "
        "(the rank's own error is in its lines above torchrun's)")
    # What the rank said first wins: a more specific rule's hint.
    assert matching_rule(["ModuleNotFoundError: No module named 'numpy'"]
                         + TORCHRUN_CHILD_FAILED, 1, "")[0].name == "missing-module"
    assert matching_rule(["[rank0]: RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection "
                          "closed by peer [127.0.0.1]:30125."] + TORCHRUN_CHILD_FAILED,
                         1, "")[0].name == "peer-gone"
