"""The runs a Mesos master knows, read from outside them (issue 24, items 3
and 4, in part): ``tfmesos runs --master`` and ``tfmesos kill``, through the
master's ``/master/state`` and ``/master/teardown`` as a Mesos cluster
serves them."""

import io
import os
import subprocess
import sys

import pytest
from fixtures_master import make_local_master
from tfrun_helpers import REPO, SMALL, start_tfrun
from waiting import wait_until

from tfmesos.cli.cluster_runs import cluster_runs, print_cluster_runs
from tfmesos.core.identity import RunIdentity
from tfmesos.core.jobs import Job
from tfmesos.core.runtime import reason_line
from tfmesos.core.spec import RunSpec
from tfmesos.core.taskinfo import framework_info
from tfmesos.record.schema import Outcome, RunFile, SandboxTail

pytestmark = pytest.mark.timeout(180)


def labels(run_id, **more):
    values = {"tfmesos.run_id": run_id, **more}
    return [{"key": key, "value": value} for key, value in values.items()]


STATE = {
    "frameworks": [
        {"id": "F1", "name": "train", "connected": True, "registered_time": 200.0,
         "labels": labels("aaaa1111", **{"tfmesos.jobs": "worker:2,ps:1",
                                         "tfmesos.command": "python train.py"}),
         "tasks": [{"state": "TASK_RUNNING"}, {"state": "TASK_RUNNING"},
                   {"state": "TASK_STAGING"}]},
        {"id": "F2", "name": "other", "connected": True, "registered_time": 300.0},
        {"id": "F3", "name": "away", "connected": False, "registered_time": 100.0,
         "labels": labels("aaaa2222")},
    ],
    "completed_frameworks": [
        {"id": "F0", "name": "old", "registered_time": 50.0, "unregistered_time": 90.0,
         "labels": labels("bbbb0000")},
    ],
}


def test_the_runs_of_a_master_are_its_frameworks_with_a_run_id():
    runs = cluster_runs(STATE)
    assert [(r.run_id, r.state, r.tasks_running) for r in runs] == [
        ("aaaa1111", "running", 2), ("aaaa2222", "disconnected", 0), ("bbbb0000", "finished", 0)]
    assert runs[0].jobs == "worker:2,ps:1" and runs[0].command == "python train.py"


def test_the_listing_shows_state_age_jobs_and_command():
    out = io.StringIO()
    print_cluster_runs(cluster_runs(STATE), out, width=120, now=260.0)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["ID", "NAME", "STATE", "STARTED", "JOBS", "RUNNING", "COMMAND"]
    assert lines[1].split()[:3] == ["aaaa1111", "train", "running"]
    assert "1.0 min ago" in lines[1] or "1m00s ago" in lines[1]
    assert lines[1].rstrip().endswith("python train.py")


def test_notes_go_to_stderr_the_table_alone_to_stdout():
    # `tfmesos runs --master M | awk 'NR>1{print $1}'` read "(2" as a run id.
    out, notes = io.StringIO(), io.StringIO()
    print_cluster_runs(cluster_runs(STATE), out, width=120, limit=1, now=260.0, notes=notes)
    assert [line.split()[0] for line in out.getvalue().splitlines()] == ["ID", "aaaa1111"]
    assert notes.getvalue() == "(2 older runs: --all shows them)\n"
    out, notes = io.StringIO(), io.StringIO()
    print_cluster_runs([], out, width=120, now=260.0, notes=notes)
    assert out.getvalue() == "" and notes.getvalue() == "the master knows no tfmesos runs\n"


def test_a_failed_run_says_why_in_a_line_under_the_table():
    state = {"frameworks": [], "completed_frameworks": [
        {"id": "F5", "name": "train", "registered_time": 100.0, "unregistered_time": 110.0,
         "labels": labels("cccc5555", **{"tfmesos.outcome": "failed (exit 127, worker:0)",
                                         "tfmesos.reason": "worker:0: /bin/sh: 1: python:  "
                                                           "not found\n"})},
        {"id": "F6", "name": "train", "registered_time": 90.0, "unregistered_time": 95.0,
         "labels": labels("cccc6666", **{"tfmesos.outcome": "succeeded"})}]}
    out = io.StringIO()
    print_cluster_runs(cluster_runs(state), out, width=120, now=260.0)
    lines = out.getvalue().splitlines()
    assert lines[1].split()[:5] == ["cccc5555", "train", "failed", "(exit", "127,"]
    assert lines[3:] == ["cccc5555: worker:0: /bin/sh: 1: python: not found"]
    out = io.StringIO()   # cut to the terminal's width, as the table's last column
    print_cluster_runs(cluster_runs(state), out, width=30, now=260.0)
    assert out.getvalue().splitlines()[3] == "cccc5555: worker:0: /bin/sh..."


class Record:
    """What ``runtime.reason_line`` reads of a run's record."""

    def __init__(self, status, task=None, hint=None, stderr=(), sandbox=None):
        self.outcome = Outcome(status=status, task=task, hint=hint)
        self.stderr, self.sandbox = list(stderr), sandbox

    def recorded_outcome(self):
        return self.outcome

    def run_file(self):   # the whole record, through JSON: too much at every run's end
        raise AssertionError("reason_line reads the outcome alone")

    def tail(self, task, stream, lines):
        return self.stderr[-lines:]

    def last_sandbox_tail(self, task):
        return (1, SandboxTail(stderr=self.sandbox)) if self.sandbox is not None else None


def test_the_reason_of_a_failure_is_the_last_line_its_task_wrote_else_the_hint():
    python = "/bin/sh: 1: python: not found"
    assert reason_line(Record("failed", "worker:0", "write python3", ["a", python, " "])) \
        == "worker:0: " + python
    # Nothing relayed (it never reached tfrun): its sandbox's last words.
    assert reason_line(Record("aborted", "worker:1", None, [], ["x", "exec: /p: not found"])) \
        == "worker:1: exec: /p: not found"
    assert reason_line(Record("failed", "worker:0", "the  hint\n", [])) == "the hint"
    assert reason_line(Record("failed")) is None
    assert reason_line(Record("succeeded", "worker:0", None, [python])) is None
    assert reason_line(Record("killed", "worker:0", None, [python])) is None


def test_a_run_subscribes_with_labels_that_name_it():
    run = RunSpec(mode="replica", command="python train.py " + "x" * 3000)
    info = framework_info(run, [Job("worker", num=2), Job("ps")],
                          RunIdentity(run_id="cafe0123", key=b"k" * 32, user="alice"))
    found = {label["key"]: label["value"] for label in info["labels"]["labels"]}
    assert found["tfmesos.run_id"] == "cafe0123"
    assert found["tfmesos.jobs"] == "worker:2,ps:1"
    assert found["tfmesos.command"].startswith("python train.py")
    assert all(len(value) <= 1000 for value in found.values())   # well inside what masters keep


def tfmesos(*args, env=None):
    return subprocess.run([sys.executable, "-m", "tfmesos.cli.main", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **(env or {})))


def test_runs_and_kill_on_a_master_from_another_shell(make_local_master, tmp_path):
    master = make_local_master()
    with start_tfrun("--master", master.url, "-w", "1", "-s", "0", *SMALL, "--",
                     "sleep", "600", env=dict(os.environ, TFMESOS_RUNS_DIR=str(tmp_path))) as tfrun:
        listed = wait_until(lambda: (lambda r: r if "running" in r.stdout else None)(
            tfmesos("runs", "--master", master.url)), timeout=90,
            message=lambda: "the run never showed as running")
        row = listed.stdout.splitlines()[1].split()
        run_id = row[0]
        assert row[2] == "running" and "sleep 600" in listed.stdout
        wait_until(lambda: any(t["state"] == "TASK_RUNNING" for f in master.state()["frameworks"]
                               for t in f["tasks"]), timeout=90)
        killed = tfmesos("kill", run_id[:6], "--master", master.url)
        assert killed.returncode == 0, killed.stderr
        assert "killed run %s" % run_id in killed.stdout
        tfrun.wait(60)
        assert tfrun.returncode == 143
    after = tfmesos("runs", "--master", master.url)
    assert after.stdout.splitlines()[1].split()[:4] == [run_id, "sleep", "killed", "(by"]
    assert master.state()["frameworks"] == []
    gone = tfmesos("kill", run_id, "--master", master.url)
    assert gone.returncode == 1 and "finished already" in gone.stderr


def test_kill_with_credentials_the_master_refuses_says_so_and_removes_nothing(
        make_local_master, tmp_path):
    # It said "removing run X without saying who killed it", then "wants
    # credentials: set MESOS_PRINCIPAL and MESOS_SECRET", both set, and the
    # run was not removed.
    master = make_local_master(credentials={"ops": "right"})
    creds = dict(os.environ, TFMESOS_RUNS_DIR=str(tmp_path), MESOS_PRINCIPAL="ops",
                 MESOS_SECRET="right")
    with start_tfrun("--master", master.url, "-w", "1", "-s", "0", *SMALL, "--",
                     "sleep", "600", env=creds) as tfrun:
        wait_until(lambda: any(t["state"] == "TASK_RUNNING" for f in master.state()["frameworks"]
                               for t in f["tasks"]), timeout=90,
                   message="the run's task never ran")
        [framework] = master.state()["frameworks"]
        run_id = tfmesos("runs", "--master", master.url).stdout.splitlines()[1].split()[0]
        killed = tfmesos("kill", run_id, "--master", master.url,
                         env={"MESOS_PRINCIPAL": "ops", "MESOS_SECRET": "wrong"})
        assert killed.returncode == 1 and killed.stdout == "", killed
        assert killed.stderr.count("\n") == 1, killed.stderr
        assert "refused the credentials of principal 'ops'" in killed.stderr, killed.stderr
        assert [f["id"] for f in master.state()["frameworks"]] == [framework["id"]]
        assert tfrun.poll() is None   # the run goes on
        assert tfmesos("kill", run_id, "--master", master.url, env=creds).returncode == 0
        tfrun.wait(60)


def test_kill_without_a_master_or_with_a_local_one_is_one_line():
    nothing = tfmesos("kill", "abcd", env={"MESOS_MASTER": ""})
    assert nothing.returncode == 2 and "--master" in nothing.stderr
    local = tfmesos("runs", "--master", "local")
    assert local.returncode == 1
    assert local.stderr.count("\n") == 1 and "local-master" in local.stderr


def test_logs_from_the_agents_sandboxes_of_any_run_the_master_knows(make_local_master, tmp_path):
    master = make_local_master()
    with start_tfrun("--master", master.url, "-w", "2", "-s", "0", *SMALL, "--", "sh", "-c",
                     "echo hello from {job_name}:{task_index}; echo oops >&2",
                     env=dict(os.environ, TFMESOS_RUNS_DIR=str(tmp_path))) as tfrun:
        tfrun.communicate(timeout=120)
        assert tfrun.returncode == 0
    run_id = tfmesos("runs", "--master", master.url).stdout.splitlines()[1].split()[0]
    every = tfmesos("logs", run_id, "--master", master.url)
    assert every.returncode == 0, every.stderr
    assert "[worker:0] hello from worker:0" in every.stdout.splitlines()
    assert "[worker:1] hello from worker:1" in every.stdout.splitlines()
    one = tfmesos("logs", run_id, "worker:1", "--stderr", "--follow", "--master", master.url)
    assert one.returncode == 0 and "oops" in one.stdout.splitlines(), one.stdout + one.stderr
    wrong = tfmesos("logs", run_id, "worker:7", "--master", master.url)
    assert wrong.returncode == 1 and "worker:0, worker:1" in wrong.stderr
