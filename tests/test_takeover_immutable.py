"""A run started by an older tfmesos, taken over by today's: Mesos keeps a
framework's ``checkpoint``, ``user`` and ``principal`` as it registered
them (``preserveImmutableFields``) and refuses an UPDATE_FRAMEWORK that
changes one (``validateUpdate``, src/master/validation.cpp). Runs started
with ``--failover`` before ``checkpoint`` was set subscribed without it:
the scheduler that takes one over must label the framework with what the
master holds, or its outcome never reaches the master."""

import os
import re
import signal
import subprocess
import sys

from failover_helpers import TRAIN, attached_to_the_end, framework_of, tfmesos, trained
from fixtures_master import make_local_master
from processes import scheduler_pids
from tfrun_helpers import REPO, SMALL, reaped, release
from waiting import wait_until

from tfmesos.protocol import labels

__all__ = ["make_local_master"]

# tfrun as a tfmesos of before checkpoint was set (commit 050ac83) started runs.
# It registers the run's framework (runtime's; a detached run's: scheduler_task's).
OLD_TFRUN = (
    "import sys\n"
    "sys.path.insert(0, %r)\n"
    "from tfmesos.core import runtime, scheduler_task, taskinfo\n"
    "def framework_info(*args, **kwargs):\n"
    "    info = taskinfo.framework_info(*args, **kwargs)\n"
    "    info.pop('checkpoint', None)\n"
    "    return info\n"
    "runtime.framework_info = scheduler_task.framework_info = framework_info\n"
    "from tfmesos.cli.tfrun import run\n"
    "run()\n" % REPO)


def old_tfrun(tmp_path):
    """The command line of a tfrun of an older tfmesos."""
    path = tmp_path / "old_tfrun.py"
    path.write_text(OLD_TFRUN)
    return [sys.executable, str(path)]


def outcome_on_master(master, framework_id):
    """The ended framework's labels as the master keeps them ({key: value})."""
    [ended] = [framework for framework in master.state()["completed_frameworks"]
               if framework["id"] == framework_id]
    assert ended["checkpoint"] is False   # kept as it registered
    return {label["key"]: label["value"] for label in ended["labels"]}


def shown_failed(master, run_id, env):
    """Whether ``tfmesos runs --master`` shows run ``run_id`` failed."""
    shown = tfmesos("runs", "--master", master.url, env=env)
    [line] = [line for line in shown.stdout.splitlines() if line.split()[:1] == [run_id]]
    assert line.split()[2] == "failed" and "finished" not in line, shown.stdout


def test_a_run_of_an_older_tfmesos_taken_over_by_attach_ends_failed_on_the_master(
        make_local_master, tmp_path):
    master = make_local_master()
    run_dir, finish = tmp_path / "run", tmp_path / "finish"
    (tmp_path / "train.py").write_text(TRAIN + "sys.exit(5)\n")
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"),
               TFMESOS_RUNS_DIR=str(tmp_path))
    with subprocess.Popen(
            [*old_tfrun(tmp_path), "--failover",
             "--failover-timeout", "300", "-m", master.url, "-w", "1", "-s", "0", *SMALL,
             "--run-dir", str(run_dir), "--", sys.executable, str(tmp_path / "train.py"),
             str(finish)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True) as tfrun:
        with reaped(tfrun):
            trained(run_dir, tfrun)
            tfrun.send_signal(signal.SIGKILL)
            tfrun.wait(30)
    wait_until(lambda: not framework_of(master)[0]["connected"], timeout=60)
    framework, _ = framework_of(master)
    assert framework["checkpoint"] is False   # as an older tfmesos registered it
    attach, _, err = attached_to_the_end(master, finish, [str(run_dir)], env)
    assert attach.returncode == 1, err
    assert "task worker:0 exited with code 5" in err, err
    assert "could not label" not in err, err
    found = outcome_on_master(master, framework["id"])
    assert found.get(labels.OUTCOME, "").startswith("failed"), found
    shown_failed(master, found[labels.RUN_ID], env)


def test_a_detached_run_of_an_older_tfmesos_relaunched_by_attach_ends_failed_on_the_master(
        make_local_master, tmp_path):
    # Its scheduler tasks (this tfmesos's, as attach ships them) take over a
    # framework that registered without checkpoint.
    master = make_local_master()
    project, finish = tmp_path / "proj", tmp_path / "finish"
    project.mkdir()
    (project / "train.py").write_text(TRAIN + "sys.exit(5)\n")
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"))
    submitted = subprocess.run(
        [*old_tfrun(tmp_path), "--detach", "--ship", "--python", sys.executable, "-m",
         master.url, "-w", "1", "-s", "0", *SMALL, "--", "python", "train.py", str(finish)],
        cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    assert "could not label" not in submitted.stderr, submitted.stderr
    [run_id] = re.findall(r"^run (\w+) detached", submitted.stdout, re.M)
    framework, _ = framework_of(master)
    assert framework["checkpoint"] is False
    wait_until(lambda: "step 2 " in tfmesos("logs", run_id, "--master", master.url,
                                            env=env).stdout, timeout=120)
    [pid] = scheduler_pids(run_id)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not framework_of(master)[0]["connected"], timeout=60)
    attach = subprocess.Popen([sys.executable, "-m", "tfmesos.cli.main", "attach", run_id,
                               "--master", master.url], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with reaped(attach):
        _, err = release(finish, attach)
    assert attach.returncode == 1, err
    assert "launching scheduler task 2" in err and "could not label" not in err, err
    found = outcome_on_master(master, framework["id"])
    assert found.get(labels.OUTCOME, "").startswith("failed"), found
    shown_failed(master, run_id, env)
