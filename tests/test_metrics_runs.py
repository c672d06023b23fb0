"""Metrics in real runs: ``tfmesos.log_metrics`` from replica tasks under
tfrun (run.json, the status line, ``tfmesos show``, report.html), a flood
that stays bounded, the process that runs ``cluster()``, and Keras'
``tfmesos.keras.MetricsCallback`` (tf_keras across two workers under
tfrun; Keras 3 on JAX and on TensorFlow)."""

import json
import os
import re
import subprocess
import sys
import time

import pytest
from run_dirs import validate_run_json
from tfrun_helpers import REPO, SMALL, assert_no_task_processes, run_tfrun
from training_helpers import RESOURCES

from tfmesos.record.history import Run
from tfmesos.record.report import render

PY = sys.executable
TFMESOS = [PY, "-m", "tfmesos.cli.main"]
LOG_50 = ("import time, tfmesos\n"
          "for i in range(50):\n"
          "    tfmesos.log_metrics(step=i, loss=1.0 / (i + 1), acc=i / 50)\n"
          "    time.sleep(0.02)\n")
FLOOD = ("import time, tfmesos\n"
         "started = time.monotonic()\n"
         "for i in range(100000):\n"
         "    tfmesos.log_metrics(loss=1.0 / (i + 1), acc=i / 1e5)\n"
         "print('logged in %.1f s' % (time.monotonic() - started))\n")


def series_of(data):
    return {(s["task"], s["name"]): s for s in data["metrics"]}


def test_replica_tasks_log_metrics_to_run_json_the_status_line_show_and_the_report(tmp_path):
    run_dir = tmp_path / "run"
    result = run_tfrun("-w", "2", "-s", "0", *SMALL, "--run-dir", str(run_dir), "--",
                       PY, "-c", LOG_50, env={"TFMESOS_PROGRESS_INTERVAL": "0.2"})
    assert result.returncode == 0, result.stderr
    data = validate_run_json(run_dir / "run.json")
    found = series_of(data)
    assert set(found) == {(w, m) for w in ("worker:0", "worker:1") for m in ("loss", "acc")}
    for worker in ("worker:0", "worker:1"):
        loss = found[(worker, "loss")]
        assert loss["steps"] == list(range(50)) and loss["count"] == 50
        assert loss["values"][:2] == [1.0, 0.5] and loss["last"] == 0.02
        assert loss["last_step"] == 49 and loss["times"] == sorted(loss["times"])
        assert 0 < loss["times"][0] < 60
    assert data["metrics_dropped"] == 0
    # While it ran, the status line (a line every 0.2 s, not on a terminal).
    assert re.search(r"^tfrun: worker:0 step \d+ · loss [0-9.]+ acc [0-9.]+", result.stderr,
                     re.M), result.stderr
    # At its end, each task's latest.
    assert re.search(r"^tfrun: metrics: worker:0 step 49 · loss 0\.02 acc 0\.98 · [0-9.]+ "
                     r"steps/s$", result.stderr, re.M), result.stderr
    assert "tfrun: metrics: worker:1 step 49 · loss 0.02 acc 0.98" in result.stderr
    shown = subprocess.run(TFMESOS + ["show", str(run_dir)], cwd=REPO, capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^  worker:0 step 49 · loss 0\.02 acc 0\.98 · [0-9.]+ steps/s$",
                     shown.stdout, re.M), shown.stdout
    page = render(Run.load(str(run_dir)))
    for metric in ("loss", "acc"):
        chart = re.search(r'aria-label="metric %s per task">(.*?)</svg>' % metric, page).group(1)
        assert re.findall(r'<polyline class="metric" data-task="([^"]*)"', chart) == [
            "worker:0", "worker:1"]
    assert_no_task_processes()


def test_a_flood_of_metrics_stays_bounded_and_never_slows_the_command(tmp_path):
    run_dir = tmp_path / "run"
    started = time.monotonic()
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "--run-dir", str(run_dir), "--",
                       PY, "-c", FLOOD, timeout=120)
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert took < 60, took
    data = validate_run_json(run_dir / "run.json")
    assert os.path.getsize(run_dir / "run.json") < 200 * 1000
    found = series_of(data)
    assert set(found) == {("worker:0", "loss"), ("worker:0", "acc")}
    for series in found.values():
        assert len(series["steps"]) <= 500
        assert series["last_step"] == 99999          # the latest always arrives
        assert series["steps"][0] == 0 and series["steps"] == sorted(series["steps"])
    assert found[("worker:0", "loss")]["last"] == 1e-5
    assert data["metrics_dropped"] > 0 and found[("worker:0", "loss")]["count"] < 100000
    assert "tfrun: metrics: worker:0 step 99999 · loss 1e-05 acc 1" in result.stderr
    assert_no_task_processes()


@pytest.mark.tensorflow
def test_the_process_that_runs_cluster_logs_as_the_client(tmp_path):
    import threading

    from tfmesos import MetricsWarning, cluster, log_metrics

    run_dir = tmp_path / "run"
    with cluster([dict(name="worker", num=1, cpus=0.2, mem=1024)], master="local",
                 run_dir=str(run_dir)):
        helper = threading.Thread(target=lambda: [log_metrics(step=i, other=i)
                                                  for i in range(1000)])
        helper.start()
        for step in range(2000):
            assert log_metrics(step=step, loss=1.0 / (step + 1))
        helper.join()
    with pytest.warns(MetricsWarning, match="not in a tfmesos run"):
        assert log_metrics(loss=1.0) is False    # the run is over: said, not recorded
    data = validate_run_json(run_dir / "run.json")
    found = series_of(data)
    assert set(found) == {("client", "loss"), ("client", "other")}
    loss = found[("client", "loss")]
    assert loss["last_step"] == 1999 and loss["last"] == 1.0 / 2000
    assert len(loss["steps"]) <= 500 and found[("client", "other")]["last_step"] == 999


KERAS_3 = r"""
import json, os, sys
import numpy as np
import keras
import tfmesos.keras
from tfmesos.task import user_metrics as metrics

points = []
metrics.record_locally(points.append)
x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int32")
model = keras.Sequential([keras.layers.Input(shape=(4,)), keras.layers.Dense(2)])
model.compile(optimizer="adam", metrics=["accuracy"],
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
callback = tfmesos.keras.MetricsCallback(every_n_batches=2)
assert isinstance(callback, keras.callbacks.Callback)
model.fit(x, y, batch_size=16, epochs=2, validation_split=0.25, verbose=0,
          callbacks=[callback, tfmesos.keras.MetricsCallback()])
print(json.dumps([keras.backend.backend(), points]))
"""


@pytest.mark.tensorflow
@pytest.mark.parametrize("backend", [pytest.param("jax", marks=pytest.mark.jax), "tensorflow"])
def test_the_keras_callback_logs_with_keras_3(backend):
    result = subprocess.run([PY, "-c", KERAS_3], cwd=REPO, capture_output=True, text=True,
                            timeout=180, env=dict(os.environ, KERAS_BACKEND=backend,
                                                  TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    used, points = json.loads(result.stdout.splitlines()[-1])
    assert used == backend
    # 48 training samples, batches of 16: 3 steps an epoch; every 2nd batch, then each
    # epoch's end (from both callbacks) at steps 3 and 6.
    steps = [(step, sorted(values)) for step, _, values in points]
    batch = ["accuracy", "loss"]
    epoch = ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert steps == [(2, batch), (3, epoch), (3, epoch), (4, batch), (6, batch), (6, epoch),
                     (6, epoch)], steps
    assert all(isinstance(v, float) for _, _, values in points for v in values.values())


@pytest.mark.tensorflow
def test_the_keras_example_logs_loss_and_accuracy_per_worker(keras_example):
    result, run_dir, epochs = keras_example.result, keras_example.run_dir, keras_example.epochs
    data = validate_run_json(run_dir / "run.json")
    found = series_of(data)
    assert set(found) == {(w, m) for w in ("worker:0", "worker:1") for m in ("loss", "accuracy")}
    for series in found.values():
        assert series["count"] == epochs and len(series["steps"]) == epochs, series
        steps = series["steps"]
        assert steps[0] > 0 and steps == [n * steps[0] for n in range(1, epochs + 1)]
    loss = found[("worker:0", "loss")]["values"]
    assert loss[-1] < loss[0]   # it learns
    assert re.search(r"^tfrun: worker:0 step \d+ · loss [0-9.]+ accuracy [0-9.]+",
                     result.stderr, re.M), result.stderr[-3000:]
    assert re.search(r"^tfrun: metrics: worker:1 step \d+ · loss [0-9.]+ accuracy",
                     result.stderr, re.M)
    page = render(Run.load(str(run_dir)))
    for metric in ("loss", "accuracy"):
        chart = re.search(r'aria-label="metric %s per task">(.*?)</svg>' % metric, page).group(1)
        assert len(re.findall(r'data-task="worker:[01]" points="[^"]+"', chart)) == 2
