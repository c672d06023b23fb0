"""``tfrun --torch-elastic MIN:MAX`` on the embedded master: two tasks run
``torchrun`` (c10d rendezvous at worker 0's reserved port, options from
tfrun's ``PET_*`` variables) on examples/torch_ddp.py, which saves a
checkpoint per epoch and resumes from it. Worker 1's training process
holds mid-epoch (tests/elastic_train.py) until the test SIGKILLs it:
torchrun restarts the workers of both tasks in place (its --max-restarts).
Then it holds again, and the test SIGKILLs its torchrun too: tfmesos
relaunches the task alone. Every epoch is saved once and tfrun exits 0,
the run never restarted whole."""

import json
import os
import re
import signal
import subprocess
import sys

import pytest
from installed import require
from tfrun_helpers import start_tfrun
from waiting import wait_until

PY = sys.executable
EPOCHS = 4
# A loaded 2-core machine: torch imports for ~10 s of CPU a process. Both
# waits together stay under pytest-timeout's 300 s, so that a hang fails
# with the run's own output.
TO_FIRST, TO_SECOND, TO_END = 120, 60, 100


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "tfmesos-runs"))


def held_pid(path, proc, timeout):
    """The pid the held process wrote to ``path`` (while tfrun runs)."""
    wait_until(lambda: path.exists() and path.read_text().endswith("\n")
               or proc.poll() is not None, timeout=timeout)
    assert proc.poll() is None, proc.communicate()
    return int(path.read_text())


def torchrun_of(pid):
    with open("/proc/%d/stat" % pid, encoding="utf-8") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def test_a_killed_rank_restarts_in_place_a_killed_torchrun_is_relaunched_alone(tmp_path):
    """One run, two faults in worker 1, each once it holds mid-epoch: its
    training process SIGKILLed in epoch 2 (torchrun restarts the workers of
    both tasks in place), then its torchrun and training process SIGKILLed
    in epoch 3 (the task is lost: tfmesos relaunches it alone where it ran,
    its torchrun rejoins the rendezvous, and both resume from epoch 2's
    checkpoint). Every epoch is saved once, the run succeeds, never a whole
    restart."""
    require("torch")
    require("sklearn")
    run_dir = tmp_path / "run"
    # 2:2: each rendezvous round closes once both nodes joined (with 1:2,
    # torchrun waits its last-call timeout, 30 s, for a node more at every
    # round).
    args = ("--torch-elastic", "2:2", "-w", "2", "-Cw", "0.5", "-Mw", "1024", "--run-dir",
            str(run_dir), "--", "torchrun", "--max-restarts", "3", "tests/elastic_train.py",
            "--hold-at", "1:5", "--hold-at", "2:5", "--pid-file", str(tmp_path / "held.pid"),
            "--checkpoint-dir", str(tmp_path / "ckpt"), "--epochs", str(EPOCHS))
    env = dict(os.environ, MESOS_MASTER="", OMP_NUM_THREADS="1")
    with start_tfrun(*args, env=env) as proc:
        os.kill(held_pid(tmp_path / "held.pid.1", proc, TO_FIRST), signal.SIGKILL)
        second = held_pid(tmp_path / "held.pid.2", proc, TO_SECOND)
        os.kill(torchrun_of(second), signal.SIGKILL)   # first: nothing left to restart it
        os.kill(second, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=TO_END)
        except subprocess.TimeoutExpired:
            proc.terminate()       # tfrun stops its tasks
            out, err = proc.communicate(timeout=60)
            pytest.fail("the run did not end within %d s of the kills:\n%s\n%s"
                        % (TO_END, out[-3000:], err[-6000:]))
    with open(run_dir / "run.json", encoding="utf-8") as handle:
        record = json.load(handle)
    assert proc.returncode == 0, err[-4000:]

    saved = [int(n) for n in re.findall(r"^\[worker:\d\] saved epoch (\d+)$", out, re.M)]
    assert saved == list(range(1, EPOCHS + 1)), out
    for epoch, resumed in ((2, 1), (3, 2)):
        assert re.search(r"^\[worker:1\] holding at epoch %d step 5$" % epoch, out, re.M), out
        both = re.findall(r"^\[worker:(\d)\] resumed after epoch %d$" % resumed, out, re.M)
        assert sorted(both) == ["0", "1"], out
    losses = re.findall(r"^\[worker:\d\] final loss: ([0-9.]+)$", out, re.M)
    assert len(losses) == 2 and losses[0] == losses[1], out
    assert len(re.findall(r"^\[worker:\d\] final accuracy: 0\.\d+$", out, re.M)) == 1, out

    # The first kill: torchrun saw its worker killed and restarted in place
    # (before TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, a restarted round could
    # read the last round's keys: gloo "Connection refused", then both
    # rounds' workers waited for each other for good, 1 run in 5 on a
    # loaded machine). The second: the task relaunched alone (README
    # "Elastic", who restarts what).
    assert "exitcode: -9" in err, err[-4000:]
    assert "worker:1 was lost (its command was killed by SIGKILL" in err, err[-4000:]
    assert "worker:1 is back at" in err, err[-4000:]
    assert record["framework"] == "torch" and record["elastic"] == "2:2"
    assert record["outcome"]["status"] == "succeeded"
    assert record["restarts"] == []
    assert [(r["task"], r["cause"], r["back"] is not None) for r in record["relaunches"]] \
        == [("worker:1", "lost", True)], \
        record["relaunches"]
