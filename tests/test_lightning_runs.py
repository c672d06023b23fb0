"""Metrics from PyTorch in real ``tfrun --torch -w 2`` runs on the embedded
master (issue 36, item 5): ``examples/torch_lightning.py`` (Lightning's
Trainer, DDP over gloo, ``tfmesos.lightning.MetricsLogger``) logs every
step from both ranks into run.json, and ``tfmesos.torch.log_metrics``
reduces across the two ranks. The test command installs torch (CPU) and
Lightning; ``require`` (tests/installed.py) only spares a developer machine
without them."""

import json
import re
import sys

import pytest
from installed import require
from tfrun_helpers import run_tfrun

PY = sys.executable
RESOURCES = ["-Cw", "0.5", "-Mw", "1024"]
TIMEOUT = 600     # a loaded 2-core machine: torch + Lightning import for ~7 s of CPU a task


def series(run_dir):
    """{(task, name): (steps, values)} of the run's metrics."""
    with open(run_dir / "run.json", encoding="utf-8") as handle:
        return {(s["task"], s["name"]): (s["steps"], s["values"])
                for s in json.load(handle)["metrics"]}


def test_the_lightning_example_logs_every_step_of_both_ranks(tmp_path):
    require("lightning")
    run_dir = tmp_path / "run"
    result = run_tfrun("--torch", "-w", "2", *RESOURCES, "--run-dir", str(run_dir), "--", PY,
                       "examples/torch_lightning.py", "--epochs", "2", timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    accuracy = re.findall(r"^\[worker:(\d)\] final accuracy: (0\.\d+)$", result.stdout, re.M)
    assert [task for task, _ in accuracy] == ["0"], result.stdout     # rank 0 prints it
    trained = re.findall(r"^\[worker:(\d)\] rank (\d) of 2: trained (\d+) steps$",
                         result.stdout, re.M)
    assert sorted(task for task, _, _ in trained) == ["0", "1"], result.stdout
    steps = int(trained[0][2])
    assert steps > 0 and all(int(count) == steps for _, _, count in trained)
    found = series(run_dir)
    for task in ("worker:0", "worker:1"):   # every rank logs, every step (--log-every 1)
        for name in ("loss", "accuracy"):
            assert found[(task, name)][0] == list(range(steps)), (task, name)
            assert all(0 <= value for value in found[(task, name)][1])
        # the epochs' validation, synced: the same in both tasks, the last one printed
        assert len(found[(task, "val_accuracy")][0]) == 2
        assert found[(task, "val_accuracy")] == found[("worker:0", "val_accuracy")]
    assert found[("worker:0", "val_accuracy")][1][-1] == pytest.approx(float(accuracy[0][1]),
                                                                      abs=1e-4)
    # each rank trained on its own share: its losses are its own
    assert found[("worker:0", "loss")][1] != found[("worker:1", "loss")][1]
    assert re.search(r"^tfrun: metrics: worker:1 step %d · loss " % (steps - 1), result.stderr,
                     re.M), result.stderr[-3000:]


# Every rank logs its rank + step: once reduced to the ranks' mean, once as
# its own tensor. (No braces: the command is a template.)
REDUCE = r"""
import torch, torch.distributed as dist, tfmesos.torch
dist.init_process_group("gloo")
rank = dist.get_rank()
for step in range(3):
    logged = tfmesos.torch.log_metrics(step=step, reduce="mean", mean_x=float(rank + step))
    tfmesos.torch.log_metrics(step=step, own_x=torch.tensor([rank + step]))
    print("rank", rank, "step", step, "mean_x", logged["mean_x"], flush=True)
dist.destroy_process_group()
"""


def test_tfmesos_torch_reduces_across_the_ranks_before_each_logs(tmp_path):
    require("torch")
    run_dir = tmp_path / "run"
    result = run_tfrun("--torch", "-w", "2", *RESOURCES, "--run-dir", str(run_dir), "--", PY,
                       "-c", REDUCE, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "[worker:1] rank 1 step 2 mean_x 2.5" in result.stdout, result.stdout
    found = series(run_dir)
    for task in ("worker:0", "worker:1"):
        assert found[(task, "mean_x")] == ([0, 1, 2], [0.5, 1.5, 2.5])
    assert found[("worker:0", "own_x")] == ([0, 1, 2], [0.0, 1.0, 2.0])
    assert found[("worker:1", "own_x")] == ([0, 1, 2], [1.0, 2.0, 3.0])
