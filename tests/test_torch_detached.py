"""A PyTorch run keeps the guarantees of a detached run (issue 36, item 5):
``tfrun --torch --detach --ship`` against a background ``tfmesos
local-master``, two gloo ranks all-reducing every step; the run's
scheduler task is SIGKILLed mid-training and ``tfmesos attach`` launches
a new one. The ranks go on in the same processes, in the same process
group (the sums of every step stay right, the steps continuous), end
together when the test says so, and the run succeeds; ``show`` says it
was torch's, ``runs`` that it succeeded. What ran was the shipped
bundle, in the tasks' sandboxes.

One run, plain Python and torch (no TensorFlow): about 30 s on a quiet
machine, most of it two torch imports."""

import os
import re
import signal
import subprocess
import sys

import pytest
from installed import require
from processes import scheduler_pids
from tfrun_helpers import background_master, free_port, reaped, release, tfrun_argv
from waiting import wait_until

pytestmark = pytest.mark.timeout(300)

# Both ranks all-reduce [step, rank, flag seen] every ~0.2 s and print the
# step's sum of step + rank (2 * step + 1 when both are at the same step
# of one group), until either saw the flag: they stop at the same step,
# so neither waits in an all_reduce the other never joins.
TRAIN = """\
import os, sys, time
import torch
import torch.distributed as dist

print("where", os.getcwd(), os.environ.get("MESOS_SANDBOX"),
      os.path.realpath(__file__), flush=True)
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
step = 0
while True:
    values = torch.tensor([step, rank, int(os.path.exists(sys.argv[1]))])
    dist.all_reduce(values)
    if values[2]:
        break
    print("step", step, os.getpid(), int(values[0] + values[1]), flush=True)
    step += 1
    time.sleep(0.2)
dist.destroy_process_group()
print("done", os.getpid(), step, flush=True)
"""

TASKS = ("worker:0", "worker:1")


def steps(text, task):
    """[(step, pid, sum)] of ``[task] step N PID SUM`` lines."""
    return [tuple(map(int, m.groups())) for m in re.finditer(
        r"^\[%s\] step (\d+) (\d+) (\d+)$" % re.escape(task), text, re.M)]


@pytest.fixture
def master(tmp_path):
    """A ``tfmesos local-master`` in the background at a free port (as
    tests/test_readme_detach.py starts the README's; its tasks marked as
    this session's); its address. SIGTERMed at the end, which stops every
    task it runs: the ranks and the run's scheduler task."""
    address = "127.0.0.1:%d" % free_port()
    argv = [sys.executable, "-m", "tfmesos.cli.main", "local-master", "--port",
            address.rsplit(":", 1)[1]]
    with background_master(argv, tmp_path / "master.log", tmp_path):
        yield address


def test_a_detached_torch_run_survives_its_scheduler_in_one_process_group(master, tmp_path):
    require("torch")
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    flag = tmp_path / "finish"
    env = dict(os.environ, MESOS_MASTER="", OMP_NUM_THREADS="1")

    def run(*words, timeout=120):
        return subprocess.run(words, cwd=project, env=env, capture_output=True, text=True,
                              timeout=timeout)

    def tfmesos(*args):
        return run(sys.executable, "-m", "tfmesos.cli.main", *args, "--master", master)

    # --python: tfrun's interpreter by default on this host's master, torch and all.
    submitted = run(*tfrun_argv("--torch", "--detach", "--ship", "-m", master, "-w", "2",
                                "-Cw", "0.3", "-Mw", "512", "--", "python", "train.py",
                                str(flag)), timeout=150)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    [run_id] = re.findall(r"^run (\w+) detached", submitted.stdout, re.M)

    def logs():
        return tfmesos("logs", run_id).stdout

    def stepped(more):
        """The logs once every rank logged ``more`` steps past ``seen``."""
        text = logs()
        return text if all(len(steps(text, task)) >= len(seen[task]) + more
                           for task in TASKS) else None

    seen = {task: [] for task in TASKS}
    before = wait_until(lambda: stepped(3), timeout=180,
                        message=lambda: "the ranks never stepped:\n" + logs()[-3000:])
    seen = {task: steps(before, task) for task in TASKS}
    # The scheduler task dies mid-training; attach launches a new one.
    [scheduler] = scheduler_pids(run_id)
    os.kill(scheduler, signal.SIGKILL)
    wait_until(lambda: not scheduler_pids(run_id), timeout=60)
    attach = subprocess.Popen(
        [sys.executable, "-m", "tfmesos.cli.main", "attach", run_id, "--master", master],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with reaped(attach):
        wait_until(lambda: stepped(5) or attach.poll() is not None, timeout=120,
                   message=lambda: "the ranks stopped stepping:\n" + logs()[-3000:])
        assert attach.poll() is None, attach.communicate()
        out, err = release(flag, attach)
    assert attach.returncode == 0, out + err
    assert "launching scheduler task 2" in err, err
    assert "run %s ended: succeeded" % run_id in err, err

    text = logs()
    for task in TASKS:
        seen = steps(text, task)
        # One process all along, every step once, each all_reduce summed
        # over both ranks at that step: the group was never rebuilt.
        assert {pid for _, pid, _ in seen} == {steps(before, task)[0][1]}, \
            "%s was restarted:\n%s" % (task, text)
        assert [step for step, _, _ in seen] == list(range(len(seen))), text
        assert all(total == 2 * step + 1 for step, _, total in seen), text
        assert re.search(r"^\[%s\] done %d %d$" % (re.escape(task), seen[0][1], len(seen)),
                         text, re.M), text
    assert len(steps(text, "worker:0")) == len(steps(text, "worker:1")), text

    # What ran was the shipped train.py, unpacked in each task's own
    # sandbox (the bundle's tree, named after the project directory, is
    # the working directory): the script exists only in the project here.
    places = re.findall(r"^\[(worker:\d)\] where (\S+) (\S+) (\S+)$", text, re.M)
    assert sorted(task for task, *_ in places) == list(TASKS), text
    for task, cwd, sandbox, script in places:
        # .../executors/<task id>/runs/<container id> (src/slave/paths.cpp)
        executor = os.path.dirname(os.path.dirname(sandbox))
        assert os.path.basename(executor) == "tfmesos.%s.%s.1" % (run_id, task.replace(":", "."))
        assert cwd == os.path.join(sandbox, project.name), (task, cwd, sandbox)
        assert script == os.path.join(os.path.realpath(cwd), "train.py"), (task, script)

    shown = tfmesos("show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^run %s +train\.py \(replica\) +succeeded, exit code 0$" % run_id,
                     shown.stdout, re.M), shown.stdout
    assert "\n  training   torch (tfrun --torch)\n" in shown.stdout, shown.stdout
    assert "scheduler attempt 2 (detached scheduler task 2)" in shown.stdout, shown.stdout
    listed = tfmesos("runs")
    assert re.search(r"^%s +train\.py +succeeded " % run_id, listed.stdout, re.M), \
        listed.stdout
