"""Whole restarts (tfrun --max-restarts) on the embedded master, with plain
shell commands: what restarts, the back-off, the limit, TFMESOS_RESTART,
run.json, and a ps killed as a lost machine would kill it."""

import json
import re

import pytest
from recovery_helpers import kill_task
from tfrun_helpers import SMALL, assert_no_task_processes, run_tfrun, start_tfrun, wait_for_line

FAIL_WORKER_1 = ("echo \"$TFMESOS_RESTART $(date +%s.%N)\" >> {log}/{{job_name}}.{{task_index}}; "
                 "if [ {{task_index}} = 1 ]; then echo failing >&2; exit 3; fi; sleep 600")


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "tfmesos-runs"))


def run_json(run_dir):
    with open(run_dir / "run.json", encoding="utf-8") as handle:
        return json.load(handle)


def starts(path):
    """[(TFMESOS_RESTART, time)] of each start of a task's command."""
    return [(int(restart), float(at)) for restart, at in
            (line.split() for line in path.read_text().splitlines())]


def test_restart_on_lost_does_not_restart_a_worker_that_exits_3(tmp_path):
    run_dir = tmp_path / "run"
    result = run_tfrun("-w", "2", "-s", "0", *SMALL, "--max-restarts", "2", "--run-dir",
                       str(run_dir), "--", FAIL_WORKER_1.format(log=tmp_path), timeout=90)
    assert result.returncode == 3, result.stderr
    assert "restarting" not in result.stderr
    assert "tfrun: task worker:1 exited with code 3" in result.stderr
    # and why the restart asked for did not come
    assert "tfrun: worker:1 exited with code 3: not restarted: restarts are for lost tasks " \
        "(--restart-on lost, the default)" in result.stderr, result.stderr
    assert [restart for restart, _ in starts(tmp_path / "worker.1")] == [0]
    data = run_json(run_dir)
    assert data["restarts"] == [] and data["outcome"]["exit_code"] == 3
    assert_no_task_processes()


@pytest.mark.waits
def test_restart_on_failure_restarts_with_backoff_until_the_limit(tmp_path):
    run_dir = tmp_path / "run"
    result = run_tfrun("-w", "2", "-s", "0", *SMALL, "--max-restarts", "2", "--restart-on",
                       "failure", "--restart-backoff", "1", "--run-dir", str(run_dir), "--",
                       FAIL_WORKER_1.format(log=tmp_path), timeout=120)
    assert result.returncode == 3, result.stderr   # the final attempt's exit code
    lines = [line for line in result.stderr.splitlines() if "restarting" in line]
    # The same words whether the task's own report of its exit or Mesos'
    # TASK_FAILED came first (a loaded agent's update may).
    assert lines == [
        "tfrun: worker:1 exited with code 3; restarting the cluster (restart 1 of 2) in 1 s",
        "tfrun: worker:1 exited with code 3; restarting the cluster (restart 2 of 2) in 2 s"]
    assert re.search(r"^tfrun: cluster ready \(restart 2\): \{", result.stderr, re.M)
    assert "tfrun: task worker:1 exited with code 3" in result.stderr   # no 3rd restart
    worker_1 = starts(tmp_path / "worker.1")
    assert [restart for restart, _ in worker_1] == [0, 1, 2]   # TFMESOS_RESTART
    gaps = [later - earlier for (_, earlier), (_, later) in zip(worker_1, worker_1[1:])]
    assert gaps[0] >= 1.0 and gaps[1] >= 2.0, gaps             # the back-off, doubled
    data = run_json(run_dir)
    assert [(r["restart"], r["cause"], r["task"], r["delay"]) for r in data["restarts"]] == \
        [(1, "failure", "worker:1", 1.0), (2, "failure", "worker:1", 2.0)]
    assert data["restarts"][0]["message"] == "worker:1 exited with code 3"
    attempts = [task["attempts"] for task in data["tasks"] if task["name"] == "worker:1"][0]
    assert [(a["attempt"], a["restart"]) for a in attempts] == [(1, 0), (2, 1), (3, 2)]
    assert data["outcome"]["status"] == "failed" and data["outcome"]["exit_code"] == 3
    assert (run_dir / "worker.1.attempt3.stderr").read_text() == "failing\n"
    assert_no_task_processes()


PS_LOST = ("if [ {job_name} = ps ]; then sleep 600; "
           "elif [ \"$TFMESOS_RESTART\" = 1 ]; then echo done after a restart; "
           "else sleep 600; fi")


def run_and_kill_the_ps(*options):
    with start_tfrun("-w", "1", "-s", "1", *SMALL, *options, "--", PS_LOST) as proc:
        seen = wait_for_line(proc.stderr, "cluster ready", timeout=60)
        kill_task("ps", 0)
        out, err = proc.communicate(timeout=90)
    return proc.returncode, out, "".join(seen) + err


def test_a_lost_ps_fails_the_run_without_restarts():
    code, _, err = run_and_kill_the_ps()
    # Mesos' "terminated with signal Killed" is a shell's 137 (75fee30).
    assert code == 137, err
    assert "tfrun: task ps:0 exited with code 137 (TASK_FAILED: Command terminated with " \
        "signal Killed)" in err
    assert "restarting" not in err
    assert_no_task_processes()


def test_a_lost_ps_restarts_the_cluster_once(tmp_path):
    code, out, err = run_and_kill_the_ps("--max-restarts", "1", "--restart-backoff", "0.5",
                                         "--run-dir", str(tmp_path / "run"))
    assert code == 0, err
    assert "tfrun: ps:0 was lost (TASK_FAILED: Command terminated with signal Killed); " \
           "restarting the cluster (restart 1 of 1) in 0.5 s" in err
    assert "[worker:0] done after a restart" in out
    data = run_json(tmp_path / "run")
    [restart] = data["restarts"]
    assert restart["cause"] == "lost" and restart["task"] == "ps:0"
    ps = [task for task in data["tasks"] if task["name"] == "ps:0"][0]
    assert [a["restart"] for a in ps["attempts"]] == [0, 1]
    assert data["outcome"]["status"] == "succeeded"
    assert_no_task_processes()


@pytest.mark.parametrize("options, error", [
    (["--max-restarts", "-1"], "--max-restarts: must be a whole number from 0 to 1000, got -1"),
    (["--restart-backoff", "-1"], "--restart-backoff: must be a number from 0 to 2592000, got -1"),
    (["--sticky-workers"], "--sticky-workers needs a chief and workers "
     "(ParameterServerStrategy): add -c, or drop --sticky-workers"),
    # "add -c" to a run that had -c (found by a review helper)
    (["-c", "-w", "0", "--sticky-workers"], "--sticky-workers needs a chief and workers "
     "(ParameterServerStrategy): add workers, or drop --sticky-workers"),
    (["-c", "--sticky-workers", "--sticky-timeout", "0"],
     "--sticky-timeout: must be a number above 0, at most 2592000, got 0"),
])
def test_recovery_usage_errors(options, error):
    result = run_tfrun("-w", "1", *options, "--", "true", timeout=30)
    assert result.returncode == 2 and error in result.stderr, result.stderr
