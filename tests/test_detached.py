"""``tfrun --detach`` on agents that share nothing with the submitter (a
``tfmesos local-master --netns`` whose tasks see neither the project, nor
this checkout, nor the home directory, and run a Python without tfmesos):
tfrun returns at once; the run lives on the cluster; its scheduler task is
SIGKILLed mid-training and ``tfmesos attach`` launches a new one, which the
tasks register with and carry on (same processes, same task ids); ``runs``,
``logs`` and ``show`` read it all from the master; ``kill`` stops a run."""

import json
import os
import re
import signal
import subprocess
import sys

import pytest
from fixtures_netns import namespaces, netns_master, root_only
from processes import scheduler_pids
from tfrun_helpers import REPO, reaped, release
from waiting import wait_until

from tfmesos.protocol import labels

# A step every 0.2 s, with the process's id, until the flag file appears.
TRAIN = (
    "import os, sys, time\n"
    "import tfmesos\n"
    "step = 0\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    print('step', step, os.getpid(), flush=True)\n"
    "    tfmesos.log_metrics(step=step, loss=1.0 / (step + 1))\n"
    "    step += 1\n"
    "    time.sleep(0.2)\n"
    "print('done', os.getpid(), flush=True)\n")

pytestmark = [root_only, pytest.mark.skipif(
    not os.path.exists("/usr/bin/python3"),
    reason="needs a Python outside the home directory: /usr/bin/python3")]


def steps(text, task):
    """[(step, pid)] of ``[task] step N PID`` lines."""
    return [(int(m.group(1)), int(m.group(2))) for m in re.finditer(
        r"^\[%s\] step (\d+) (\d+)$" % re.escape(task), text, re.M)]


class Cluster:
    """A ``tfmesos local-master --netns`` with two agents whose tasks see
    neither the project, nor this checkout, nor the home directory;
    commands run in its hub."""

    def __init__(self, tmp_path, master):
        self.tmp, self.master = tmp_path, master
        self.project, self.venv = tmp_path / "proj", tmp_path / "venv"
        self.hub, self.address = master.hub, master.address
        self.env = dict(os.environ, MESOS_MASTER="", PYTHONPATH=REPO,
                        TFMESOS_KEYS_DIR=str(tmp_path / "keys"),
                        TFMESOS_RUNS_DIR=str(tmp_path / "runs"))

    def argv(self, *args):
        return ["ip", "netns", "exec", self.hub, sys.executable, *args]

    def tfmesos(self, *args, timeout=60):
        return subprocess.run(self.argv("-m", "tfmesos.cli.main", *args, "--master",
                                        self.address),
                              cwd=self.project, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def popen(self, *args):
        return subprocess.Popen(self.argv(*args), cwd=self.project, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def master_log(self):
        return (self.tmp / "master.log").read_text()[-3000:]


@pytest.fixture
def cluster(tmp_path, namespaces):
    project, venv = tmp_path / "proj", tmp_path / "venv"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    agent = "cpus=2,mem=2000,gpus=0,isolate=fs"
    with netns_master(namespaces, tmp_path / "master.log", [agent] * 2,
                      hidden=[project, REPO, os.path.expanduser("~")]) as master:
        yield Cluster(tmp_path, master)


def submit(cluster, flag, *more):
    submitted = subprocess.run(
        cluster.argv("-m", "tfmesos.cli.tfrun", "--detach", "--ship", "--python",
                     str(cluster.venv / "bin" / "python"), "-m", cluster.address, "-w", "2",
                     "-s", "0", "-Cw", "0.2", "-Mw", "192", *more, "--", "python", "train.py",
                     str(flag)),
        cwd=cluster.project, env=cluster.env, capture_output=True, text=True, timeout=150)
    assert submitted.returncode == 0, submitted.stderr + cluster.master_log()
    [run_id] = re.findall(r"^run (\w+) detached", submitted.stdout, re.M)
    return run_id


def test_a_detached_run_survives_its_scheduler_and_is_read_from_the_master(cluster):
    flag = cluster.tmp / "finish"
    run_id = submit(cluster, flag)
    assert oct(os.stat(cluster.tmp / "keys" / run_id).st_mode & 0o777) == "0o600"
    listed = cluster.tfmesos("runs")
    assert re.search(r"^%s +train.py +running \(detached\)" % run_id, listed.stdout, re.M), \
        listed.stdout
    output = wait_until(lambda: (lambda r: r.stdout if len(steps(r.stdout, "worker:1")) >= 3
                                 else None)(cluster.tfmesos("logs", run_id)), timeout=120,
                        message=cluster.master_log)
    before = {task: steps(output, task) for task in ("worker:0", "worker:1")}
    # The scheduler task dies mid-training: the tasks go on, the run fails over.
    [pid] = scheduler_pids(run_id)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: "failing over" in cluster.tfmesos("runs").stdout, timeout=60)
    attach = cluster.popen("-m", "tfmesos.cli.main", "attach", run_id, "--master",
                           cluster.address)
    with reaped(attach):
        wait_until(lambda: all(len(steps(cluster.tfmesos("logs", run_id).stdout, task))
                               > len(before[task]) + 5 for task in before), timeout=120,
                   message=cluster.master_log)
        # The new scheduler task dies while attach follows it: attach sat
        # silent for the failover timeout; it launches another. Once it
        # took the run over (the tasks' steps go on without it; killed
        # before, it is a scheduler that never started, and attach says so).
        # Not "running (detached)" in tfmesos runs: attach's own subscription,
        # as it launches the task, shows so too (CI killed the task then).
        early = []
        for line in iter(attach.stderr.readline, ""):   # its end: pytest-timeout's
            early.append(line)
            if "the new scheduler took run %s over" % run_id in line:
                break
        [pid] = wait_until(lambda: (lambda found: found if len(found) == 1 else None)(
            [p for p in scheduler_pids(run_id) if p != pid]), timeout=60)
        os.kill(pid, signal.SIGKILL)
        middle = {task: len(steps(cluster.tfmesos("logs", run_id).stdout, task))
                  for task in before}
        wait_until(lambda: all(len(steps(cluster.tfmesos("logs", run_id).stdout, task))
                               > middle[task] + 5 for task in before), timeout=120,
                   message=cluster.master_log)
        out, err = release(flag, attach)
        err = "".join(early) + err
    assert attach.returncode == 0, err
    assert "launching scheduler task 2" in err and "ended: succeeded" in err, err
    assert "scheduler task ended\n" in err and "launching scheduler task 3" in err, err
    logs = cluster.tfmesos("logs", run_id)
    for task in before:
        seen = steps(logs.stdout, task)
        assert {pid for _, pid in seen} == {before[task][0][1]}, "%s was restarted" % task
        assert [step for step, _ in seen] == list(range(len(seen)))
    runs = cluster.tfmesos("runs")
    assert re.search(r"^%s +train.py +succeeded " % run_id, runs.stdout, re.M), runs.stdout
    shown = cluster.tfmesos("show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert "scheduler.0.3" in shown.stdout and "succeeded, exit code 0" in shown.stdout
    assert "scheduler attempt 3 (detached scheduler task 3)" in shown.stdout
    rows = [line.split() for line in shown.stdout.splitlines() if line.startswith("worker:")]
    assert [row[:4] for row in rows] == [["worker:%d" % i, "1", "0", "TASK_FINISHED"]
                                         for i in range(2)]
    assert "metrics" in shown.stdout and "worker:1 step" in shown.stdout


def test_kill_stops_a_detached_run_and_its_scheduler(cluster):
    run_id = submit(cluster, cluster.tmp / "never", "--failover-timeout", "60")
    wait_until(lambda: "[worker:1] step 1 " in cluster.tfmesos("logs", run_id).stdout,
               timeout=120, message=cluster.master_log)
    killed = cluster.tfmesos("kill", run_id)
    assert killed.returncode == 0, killed.stderr
    wait_until(lambda: not scheduler_pids(run_id), timeout=60)
    runs = cluster.tfmesos("runs")
    assert re.search(r"^%s +train.py +killed \(by \w+\)" % run_id, runs.stdout, re.M), \
        runs.stdout
    state = json.loads(subprocess.run(
        ["ip", "netns", "exec", cluster.hub, "curl", "-s",
         "http://%s/master/state" % cluster.address], capture_output=True, text=True).stdout)
    assert state["frameworks"] == []
    [framework] = [f for f in state["completed_frameworks"]
                   if labels.label_map(f.get("labels")).get(labels.RUN_ID) == run_id]
    assert all(task["state"] in ("TASK_KILLED", "TASK_FINISHED", "TASK_FAILED")
               for task in framework["completed_tasks"])
