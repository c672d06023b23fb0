"""``tfrun --torch`` and ``tfrun --jax`` on the embedded master: what every
task is told (a plain Python command, no torch), PyTorch DDP over two tasks
training as one process does on the global batch, a command that runs
``torchrun`` itself through the placeholders, and two JAX processes that
``psum`` across processes and train in step (``examples/torch_ddp.py``,
``examples/jax_multiprocess.py``). The test command installs torch (CPU)
and JAX; ``require`` (tests/installed.py) only spares a developer machine
without them."""

import json
import os
import re
import subprocess
import sys

import pytest
from installed import require
from tfrun_helpers import REPO, SMALL, run_tfrun

PY = sys.executable
RESOURCES = ["-Cw", "0.5", "-Mw", "1024"]
EPOCHS = "3"
TIMEOUT = 600     # a loaded 2-core machine: two torch processes import for ~10 s of CPU each

# Prints the variables a task's command got, and its placeholders' values
# (argv), as one JSON line; worker 1's first attempt fails, so the run
# restarts once (--restart-on failure) and the second formation is told
# anew. (No braces: the command is a template.)
SHOW = r"""
import json, os, sys
names = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
         "GROUP_RANK", "GROUP_WORLD_SIZE", "NODE_RANK", "PET_NNODES", "PET_NODE_RANK",
         "PET_NPROC_PER_NODE", "PET_MASTER_ADDR", "PET_MASTER_PORT", "TF_CONFIG",
         "TFMESOS_RESTART", "TFMESOS_TASK_INDEX", "TFMESOS_PORT", "TFMESOS_COORDINATOR_PORT",
         "JAX_COORDINATOR_ADDRESS", "OMPI_MCA_orte_hnp_uri", "OMPI_COMM_WORLD_SIZE",
         "OMPI_COMM_WORLD_RANK", "KERAS_DISTRIBUTION_JOB_ADDRESSES")
env = dict((name, os.environ.get(name)) for name in names)
print(json.dumps(dict(env=env, argv=sys.argv[1:])), flush=True)
if os.environ["TFMESOS_RESTART"] == "0" and os.environ["TFMESOS_TASK_INDEX"] == "1":
    sys.exit(3)
"""
TOLD = re.compile(r"^\[worker:(\d)\] (\{.*\})$", re.M)


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "tfmesos-runs"))


def told(stdout, restart):
    """{worker index: what it printed} of the formation after ``restart`` restarts."""
    found = {}
    for index, line in TOLD.findall(stdout):
        data = json.loads(line)
        if data["env"]["TFMESOS_RESTART"] == str(restart):
            found[int(index)] = data
    return found


@pytest.mark.waits
def test_torch_workers_are_one_group_at_worker_0s_reserved_port_after_a_restart_too(tmp_path):
    run_dir = tmp_path / "run"
    result = run_tfrun("--torch", "-w", "2", "--nproc-per-task", "2", *SMALL, "--max-restarts",
                       "1", "--restart-on", "failure", "--restart-backoff", "0", "--run-dir",
                       str(run_dir), "--", PY, "-c", SHOW, "{master_addr}:{master_port}",
                       "{node_rank}", "{nnodes}", "{nproc_per_task}")
    assert result.returncode == 0, result.stderr[-3000:]
    seen = told(result.stdout, 1)
    assert sorted(seen) == [0, 1], result.stdout
    zero = seen[0]["env"]
    assert zero["TFMESOS_COORDINATOR_PORT"] and zero["MASTER_PORT"] == \
        zero["TFMESOS_COORDINATOR_PORT"] != zero["TFMESOS_PORT"]
    for index, data in seen.items():
        env = data["env"]
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == (zero["MASTER_ADDR"],
                                                            zero["MASTER_PORT"])
        assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"],
                env["GROUP_RANK"], env["GROUP_WORLD_SIZE"], env["NODE_RANK"]) == (
            str(2 * index), "4", "0", "2", str(index), "2", str(index))
        assert (env["PET_NNODES"], env["PET_NODE_RANK"], env["PET_NPROC_PER_NODE"],
                env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == (
            "2", str(index), "2", env["MASTER_ADDR"], env["MASTER_PORT"])
        assert env["TF_CONFIG"] is None and env["JAX_COORDINATOR_ADDRESS"] is None
        assert data["argv"] == ["%s:%s" % (env["MASTER_ADDR"], env["MASTER_PORT"]), str(index),
                                "2", "2"]
    first = told(result.stdout, 0)
    assert first and all(data["env"]["RANK"] == str(2 * index) for index, data in first.items())
    with open(run_dir / "run.json", encoding="utf-8") as handle:
        record = json.load(handle)
    assert record["framework"] == "torch" and [job["name"] for job in record["jobs"]] == \
        ["worker"]
    assert len(record["restarts"]) == 1


def test_jax_workers_get_the_coordinator_and_their_process_ids():
    result = run_tfrun("--jax", "-w", "2", *SMALL, "--", PY, "-c", SHOW.replace(
        "sys.exit(3)", "pass"))
    assert result.returncode == 0, result.stderr[-3000:]
    seen = told(result.stdout, 0)
    zero = seen[0]["env"]
    coordinator = zero["JAX_COORDINATOR_ADDRESS"]
    assert coordinator.endswith(":" + zero["TFMESOS_COORDINATOR_PORT"])
    for index, data in seen.items():
        env = data["env"]
        assert (env["JAX_COORDINATOR_ADDRESS"], env["KERAS_DISTRIBUTION_JOB_ADDRESSES"],
                env["OMPI_COMM_WORLD_SIZE"], env["OMPI_COMM_WORLD_RANK"]) == (
            coordinator, coordinator, "2", str(index))
        assert env["OMPI_MCA_orte_hnp_uri"] == "0.0;tcp://" + coordinator
        assert env["TF_CONFIG"] is None and env["MASTER_ADDR"] is None


def test_torch_with_ps_tasks_is_a_usage_error():
    result = run_tfrun("--torch", "-w", "2", "-s", "1", "--", "true", timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == \
        "tfrun: error: --torch runs workers only, one process group: drop -s 1 (tfrun --help " \
        "explains every option)"


# -- training ---------------------------------------------------------------------

LOSS = re.compile(r"^\[worker:(\d)\] ((?:epoch \d+/\d+ loss|final loss:) ([0-9.]+))$", re.M)


def losses(stdout):
    """{rank: [(line, loss), ...]} of the epochs' and the final losses."""
    found = {}
    for rank, line, value in LOSS.findall(stdout):
        found.setdefault(int(rank), []).append((line.rsplit(" ", 1)[0], float(value)))
    return found


@pytest.fixture(scope="module")
def one_process():
    """examples/torch_ddp.py alone, on the global batch of two processes:
    [(line, loss), ...]."""
    require("torch")
    require("sklearn")
    result = subprocess.run([PY, "examples/torch_ddp.py", "--processes", "2", "--epochs", EPOCHS],
                            cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert result.returncode == 0, result.stderr[-3000:]
    found = [(line.rsplit(" ", 1)[0], float(value)) for line, value in
             re.findall(r"^((?:epoch \d+/\d+ loss|final loss:) ([0-9.]+))$", result.stdout, re.M)]
    assert len(found) == int(EPOCHS) + 1, result.stdout
    return found


def assert_trained_as_one_process(result, expected):
    assert result.returncode == 0, result.stderr[-4000:]
    found = losses(result.stdout)
    assert sorted(found) == [0, 1], result.stdout
    assert found[1] == found[0], result.stdout            # every rank alike
    assert [line for line, _ in found[0]] == [line for line, _ in expected]
    assert [value for _, value in found[0]] == \
        pytest.approx([value for _, value in expected], abs=1e-4)
    assert re.search(r"^\[worker:0\] final accuracy: 0\.\d+$", result.stdout, re.M)
    assert "[worker:1] final accuracy" not in result.stdout


def test_ddp_over_two_tasks_trains_as_one_process_on_the_global_batch(one_process, tmp_path):
    run_dir = tmp_path / "run"
    result = run_tfrun("--torch", "-w", "2", *RESOURCES, "--run-dir", str(run_dir), "--", PY,
                       "examples/torch_ddp.py", "--epochs", EPOCHS, timeout=TIMEOUT)
    assert_trained_as_one_process(result, one_process)
    assert "(gloo)" in result.stdout
    # rank 0 logs each epoch's loss (tfmesos.log_metrics): the losses it printed
    with open(run_dir / "run.json", encoding="utf-8") as handle:
        series = [(s["task"], s["name"], s["steps"], s["values"])
                  for s in json.load(handle)["metrics"]]
    epochs = [value for line, value in losses(result.stdout)[0] if line.startswith("epoch")]
    assert [entry[:3] for entry in series] == [("worker:0", "loss", [1, 2, 3])]
    assert series[0][3] == pytest.approx(epochs, abs=1e-5)


def test_a_command_that_runs_torchrun_through_the_placeholders(one_process, tmp_path):
    # torchrun: the one of tfrun's Python, first on a plain task's PATH (--python).
    # Its log folder is in each task's sandbox (PET_LOG_DIR), not a torchelastic_*
    # folder in the tasks' temporary folder that nobody removes.
    tasks_tmp = tmp_path / "tasks-tmp"
    tasks_tmp.mkdir()
    result = run_tfrun("--torch", "-w", "2", *RESOURCES, "-E", "TMPDIR=%s" % tasks_tmp,
                       "-E", "LOGLEVEL=INFO", "--", "torchrun", "--nnodes",
                       "{nnodes}", "--node-rank",
                       "{node_rank}", "--nproc-per-node", "{nproc_per_task}", "--master-addr",
                       "{master_addr}", "--master-port", "{master_port}",
                       "examples/torch_ddp.py", "--epochs", EPOCHS, timeout=TIMEOUT)
    assert_trained_as_one_process(result, one_process)
    # (torch's inductor keeps its cache there, torchinductor_USER, shared by runs)
    assert [name for name in os.listdir(tasks_tmp) if name.startswith("torchelastic")] == []
    # torchrun's launch configuration, at LOGLEVEL=INFO: "  log_dir    : PATH"
    logs = re.findall(r"^\[worker:(\d)\] .*\blog_dir +: (\S+)$", result.stderr, re.M)
    assert sorted(index for index, _ in logs) == ["0", "1"], result.stderr
    for index, folder in logs:
        assert re.search(r"/executors/tfmesos\.\w+\.worker\.%s\.\d+/runs/[^/]+/torchelastic$"
                         % index, folder), folder


@pytest.mark.jax   # its tasks import JAX (hidden from the others' by tests/process_site)
def test_two_jax_processes_psum_across_processes_and_train_in_step():
    require("jax")
    require("sklearn")
    result = run_tfrun("--jax", "-w", "2", *RESOURCES, "--", PY, "examples/jax_multiprocess.py",
                       "--epochs", EPOCHS, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr[-4000:]
    out = result.stdout
    for rank in (0, 1):
        assert "[worker:%d] psum: 3 of 2 processes" % rank in out
        assert "[worker:%d] training as process %d of 2" % (rank, rank) in out
    found = losses(out)
    assert len(found[0]) == int(EPOCHS) + 1 and found[1] == found[0], out
    match = re.search(r"^\[worker:0\] final accuracy: ([0-9.]+)$", out, re.M)
    assert match and float(match.group(1)) >= 0.85, out[-3000:]
