"""The training examples, run as the README says, on the embedded master with
real TensorFlow: each must learn scikit-learn's digits (10 classes, so an
untrained model scores about 0.1) to at least THRESHOLD on the test split,
and leave no process behind."""

import os
import re
import subprocess
import sys

import pytest
from tfrun_helpers import REPO, SMALL, run_tfrun
from training_helpers import RESOURCES, THRESHOLD, accuracy, assert_nothing_left

PY = sys.executable


def run_script(*args, timeout=240):
    result = subprocess.run([PY, *args], cwd=REPO, capture_output=True, text=True,
                            timeout=timeout, env=dict(os.environ, MESOS_MASTER=""))
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def test_replica_commands_run_in_the_submitters_directory():
    # The README's commands name examples/... relative to where tfrun runs,
    # as the original TFMesos allowed; Mesos starts tasks in their sandbox.
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "--", "pwd")
    assert result.returncode == 0, result.stderr
    assert "[worker:0] %s\n" % REPO in result.stdout


def test_missing_submitter_directory_falls_back_to_the_sandbox(tmp_path, capsys):
    from tfmesos.task.replica import working_directory
    assert working_directory(str(tmp_path)) == str(tmp_path)
    assert working_directory(None) is None
    assert working_directory(str(tmp_path / "elsewhere")) is None
    assert "does not exist here; running the command in the sandbox" in capsys.readouterr().err


@pytest.mark.tensorflow
def test_keras_multiworker_trains_in_step_and_the_chief_saves(keras_example):
    model_dir, epochs = keras_example.model_dir, keras_example.epochs
    out = keras_example.result.stdout
    for index in (0, 1):
        assert "[worker:%d] training as worker:%d" % (index, index) in out
        for epoch in range(1, epochs + 1):
            assert "[worker:%d] epoch %d/%d loss" % (index, epoch, epochs) in out
        assert re.search(r"^\[worker:%d\] steps/s: [0-9.]+$" % index, out, re.M)
    assert "[worker:0] training as worker:0 (chief)" in out
    assert accuracy(out, "[worker:0] ") >= THRESHOLD
    assert "final accuracy" not in out.replace("[worker:0] final accuracy", "")
    assert (model_dir / "model" / "saved_model.pb").is_file()
    assert (model_dir / "checkpoints" / "checkpoint").is_file()
    assert sorted(os.listdir(model_dir)) == ["checkpoints", "model"]  # worker 1 cleaned up


def run_keras_example(model_dir, epochs, *jobs):
    result = run_tfrun(*jobs, *RESOURCES, "--", PY, "examples/keras_multiworker.py",
                       "--model-dir", str(model_dir), "--epochs", str(epochs), timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


def evaluations(out):
    return [(int(epoch), float(value)) for epoch, value in re.findall(
        r"^\[evaluator:0\] evaluation: epoch (\d+) accuracy ([0-9.]+)$", out, re.M)]


@pytest.mark.tensorflow
def test_evaluator_evaluates_every_checkpoint_of_this_run_only(tmp_path):
    model_dir = tmp_path / "model"
    # An earlier run (its chief alone) left the checkpoints of 4 epochs.
    first = run_keras_example(model_dir, 4, "-c", "-w", "0", "-s", "0")
    assert "[chief:0] epoch 4/4" in first
    assert len([n for n in os.listdir(model_dir / "checkpoints") if n.endswith(".index")]) == 4
    # Again in the same directory, with fewer epochs and an evaluator: the
    # checkpoints of epochs 3 and 4 of the first run are never evaluated
    # (nor those of epochs 1 and 2 in place of this run's).
    out = run_keras_example(model_dir, 2, "-c", "-w", "1", "-s", "0", "--evaluator")
    assert "[chief:0] epoch 2/2" in out and "[worker:0] epoch 2/2" in out
    assert accuracy(out, "[chief:0] ") >= THRESHOLD
    seen = evaluations(out)
    assert [epoch for epoch, _ in seen] == [1, 2], out
    assert all(0.5 <= value <= 1 for _, value in seen), out
    assert "[evaluator:0] evaluator: evaluated epochs 1, 2\n" in out
    run = re.search(r"^\[evaluator:0\] evaluator: following the checkpoints of run (\w+) ",
                    out, re.M).group(1)
    checkpoints = model_dir / "checkpoints"
    assert (checkpoints / "RUN").read_text() == run
    assert (checkpoints / ("evaluated-" + run)).read_text() == "done"
    assert sorted(name for name in os.listdir(checkpoints) if name.endswith(".index")) == \
        ["ckpt-1.index", "ckpt-2.index"]
    assert (model_dir / "model" / "saved_model.pb").is_file()
    assert_nothing_left()


@pytest.mark.tensorflow
def test_mnist_replica_between_graph_with_a_ps():
    result = run_tfrun("-w", "2", "-s", "1", *RESOURCES, "--", PY, "examples/mnist_replica.py",
                       "--ps_hosts", "{ps_hosts}", "--worker_hosts", "{worker_hosts}",
                       "--job_name", "{job_name}", "--task_index", "{task_index}",
                       timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]
    out = result.stdout
    steps = {int(index): int(count) for index, count in re.findall(
        r"^\[worker:(\d)\] worker \d: done after (\d+) local steps", out, re.M)}
    assert sorted(steps) == [0, 1] and sum(steps.values()) >= 400, out
    assert accuracy(out, "[worker:0] ") >= THRESHOLD
    assert_nothing_left()


@pytest.mark.tensorflow
def test_mnist_in_graph_threads_drive_every_worker():
    result = run_script("examples/mnist.py")
    steps = {int(index): int(count) for index, count in
             re.findall(r"^worker (\d): (\d+) steps$", result.stdout, re.M)}
    assert sorted(steps) == [0, 1] and all(steps.values()), result.stdout
    assert accuracy(result.stdout) >= THRESHOLD
    assert_nothing_left()
