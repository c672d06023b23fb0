"""tfrun gives every worker the variables of Keras 3's multi-process
``keras.distribution`` (the coordinator on worker 0's host, at a second port
Mesos reserved in worker 0's offer), and the two Keras 3 examples train
across two workers with them: JAX's ``keras.distribution`` and a TensorFlow
custom loop under ``MultiWorkerMirroredStrategy``."""

import re
import sys
import time

import pytest
from conftest import marked_processes
from tfrun_helpers import SMALL, run_tfrun

# Every task writes what it got to a file of its own; the workers wait (at
# most a minute) for the ps's file, so the run cannot end before the ps ran.
SHOW = ('echo "keras=[$KERAS_DISTRIBUTION_JOB_ADDRESSES|$KERAS_DISTRIBUTION_NUM_PROCESSES|'
        '$KERAS_DISTRIBUTION_PROCESS_ID] own=[$TFMESOS_PORT] '
        'coordinator=[$TFMESOS_COORDINATOR_PORT] workers=[{worker_hosts}]" '
        '> %(dir)s/tmp.{job_name}{task_index} && '
        'mv %(dir)s/tmp.{job_name}{task_index} %(dir)s/{job_name}:{task_index}; '
        'n=0; while [ {job_name} = worker ] && [ ! -e %(dir)s/ps:0 ] && [ $n -lt 600 ]; '
        'do sleep 0.1; n=$((n + 1)); done')
LINE = re.compile(r"^keras=\[(.*)\|(.*)\|(.*)\] own=\[(\d*)\] coordinator=\[(\d*)\] "
                  r"workers=\[(.*)\]$")


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "tfmesos-runs"))


def test_workers_get_the_keras_distribution_variables_and_other_jobs_do_not(tmp_path):
    result = run_tfrun("-w", "2", "-s", "1", *SMALL, "--", SHOW % {"dir": tmp_path})
    assert result.returncode == 0, result.stderr
    seen = {name: LINE.match((tmp_path / name).read_text()).groups()
            for name in ("worker:0", "worker:1", "ps:0")}
    address, processes, process_id, own, port, workers = seen["worker:0"]
    worker0 = workers.split(",")[0]
    host = worker0.rpartition(":")[0]
    assert address == "%s:%s" % (host, port)          # worker 0's host, its second port
    assert port and port != own and worker0 == "%s:%s" % (host, own)
    assert (processes, process_id) == ("2", "0")
    assert seen["worker:1"][:3] == (address, "2", "1")
    assert seen["worker:1"][4] == ""                  # only worker 0 reserves a second port
    assert seen["ps:0"][:3] == ("", "", "")


# -- the Keras 3 examples, trained across two workers ------------------------------

PY = sys.executable
RESOURCES = ["-Cw", "0.5", "-Mw", "1024"]
THRESHOLD = 0.85
EPOCH = re.compile(r"^\[worker:(\d)\] (epoch \d+/\d+ loss \S+ accuracy \S+)$", re.M)


def assert_no_example_left():
    deadline = time.monotonic() + 15
    while True:
        left = [p for p in marked_processes() if "tfmesos.server" in p[1] or "examples/" in p[1]]
        if not left:
            return
        if time.monotonic() > deadline:
            raise AssertionError("processes survived the run: %s" % left)
        time.sleep(0.2)


def trained_as_one_job(result, epochs):
    """Both workers printed the same loss and accuracy every epoch (the
    global batch's), and worker 0 the test accuracy; returns it."""
    assert result.returncode == 0, result.stderr[-4000:]
    out = result.stdout
    lines = {0: [], 1: []}
    for index, line in EPOCH.findall(out):
        lines[int(index)].append(line)
    assert len(lines[0]) == epochs and lines[0] == lines[1], out
    assert "[worker:1] final accuracy" not in out
    match = re.search(r"^\[worker:0\] final accuracy: ([0-9.]+)$", out, re.M)
    assert match, out[-3000:]
    return float(match.group(1))


@pytest.mark.tensorflow
@pytest.mark.jax
def test_keras_3_on_jax_trains_across_two_workers_with_keras_distribution():
    result = run_tfrun("-w", "2", "-s", "0", *RESOURCES, "--", PY, "examples/keras_jax.py",
                       timeout=300)
    assert "[worker:0] training as process 0 of 2: 2 devices, global batch 64" in result.stdout
    assert "[worker:1] training as process 1 of 2" in result.stdout
    assert trained_as_one_job(result, 10) >= THRESHOLD
    assert_no_example_left()


@pytest.mark.tensorflow
def test_keras_3_on_tensorflow_trains_across_two_workers_in_a_custom_loop():
    result = run_tfrun("-w", "2", "-s", "0", *RESOURCES, "--", PY,
                       "examples/keras_custom_loop.py", timeout=300)
    assert "[worker:0] training as chief: 2 worker(s), global batch 64" in result.stdout
    assert trained_as_one_job(result, 10) >= THRESHOLD
    assert_no_example_left()
