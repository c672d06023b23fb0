"""The training examples survive a lost worker, with real TensorFlow on the
embedded master: Keras MultiWorkerMirroredStrategy through a whole restart
(BackupAndRestore), ParameterServerStrategy through a sticky relaunch."""

import json
import os
import re
import subprocess
import sys

import pytest
from recovery_helpers import kill_task
from tfrun_helpers import REPO, finish_reading, start_tfrun, wait_for_line
from training_helpers import RESOURCES, THRESHOLD, accuracy, assert_nothing_left

pytestmark = pytest.mark.tensorflow
PY = sys.executable


def epochs_of(out, task):
    """[(kind, epoch)]: ("start", N) for 'training from epoch N/M', ("end", N)
    for 'epoch N/M loss ...', in the order ``task`` printed them."""
    found = re.findall(r"^\[%s\] (training from epoch|epoch) (\d+)/\d+" % re.escape(task),
                       out, re.M)
    return [("start" if kind != "epoch" else "end", int(n)) for kind, n in found]


def last_end_before_restart(events):
    starts = [i for i, (kind, _) in enumerate(events) if kind == "start"]
    return max(n for kind, n in events[:starts[1]] if kind == "end")


def test_keras_resumes_after_a_whole_restart_from_its_last_backup(tmp_path):
    model_dir, run_dir = tmp_path / "model", tmp_path / "run"
    with start_tfrun("-w", "2", "-s", "0", *RESOURCES, "--max-restarts", "1",
                     "--restart-backoff", "0.5", "--run-dir", str(run_dir), "--", PY,
                     "examples/keras_multiworker.py", "--model-dir", str(model_dir),
                     "--epochs", "8") as proc:
        seen = wait_for_line(proc.stdout, "[worker:1] epoch 2/8", timeout=120)
        kill_task("worker", 1, command="keras_multiworker.py")
        out, err = finish_reading(proc, 240)
    out = "".join(seen) + out
    assert proc.returncode == 0, err[-4000:]
    assert len(re.findall(r"restarting the cluster \(restart 1 of 1\)", err)) == 1, err
    assert re.search(r"^tfrun: worker:1 was lost \(its command was killed by SIGKILL, "
                     r"exit code 137\); restarting", err, re.M), err
    events = epochs_of(out, "worker:0")
    starts = [i for i, (kind, _) in enumerate(events) if kind == "start"]
    assert len(starts) == 2 and events[0] == ("start", 1), events
    resumed = events[starts[1]][1]
    # The last epoch any worker ended before the restart (the workers end each
    # epoch together; the chief may be stopped after writing its backup but
    # before printing its line, while worker 1's line was seen).
    last_before = max(last_end_before_restart(events),
                      last_end_before_restart(epochs_of(out, "worker:1")))
    assert 1 < resumed <= last_before + 1, events    # the epoch after the last backup
    assert events[-1] == ("end", 8)
    assert accuracy(out, "[worker:0] ") >= THRESHOLD
    assert sorted(os.listdir(model_dir)) == ["checkpoints", "model"]   # backup removed
    with open(run_dir / "run.json", encoding="utf-8") as handle:
        restarts = json.load(handle)["restarts"]
    assert [(r["restart"], r["cause"], r["task"]) for r in restarts] == [(1, "lost", "worker:1")]
    assert_nothing_left()


def test_ps_coordinator_keeps_training_through_a_worker_relaunch(tmp_path):
    runs = tmp_path / "runs"
    proc = subprocess.Popen([PY, "examples/ps_coordinator.py", "--steps", "4000"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MESOS_MASTER="", TFMESOS_RUNS_DIR=str(runs)))
    try:
        seen = wait_for_line(proc.stdout, "step 100 loss", timeout=120)
        kill_task("worker", 0)
        out, err = finish_reading(proc, 240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(seen) + out
    assert proc.returncode == 0, err[-4000:]
    # The example as the README runs it, its fault aside: the cluster
    # resolver's spec has the chief (this process), the training learns.
    assert "'chief': ['127.0.0.1:" in out
    assert "coordinator: Worker /job:worker/replica:0/task:0 has been recovered." in out, err
    assert "step 4000 loss" in out and accuracy(out) >= THRESHOLD
    [run_dir] = list(runs.iterdir())
    with open(run_dir / "run.json", encoding="utf-8") as handle:
        data = json.load(handle)
    assert data["restarts"] == []
    [relaunch] = data["relaunches"]
    assert relaunch["task"] == "worker:0" and relaunch["back"]
    tasks = {task["name"]: task["attempts"] for task in data["tasks"]}
    assert len(tasks["ps:0"]) == 1 and len(tasks["worker:1"]) == 1     # kept running
    assert [a["address"] for a in tasks["worker:0"]] == [relaunch["address"]] * 2
    assert_nothing_left()
