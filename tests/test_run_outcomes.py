"""One truth in every reader (issue 32, item 7): every run, foreground or
detached, labels its framework with its outcome before the teardown, so
``tfmesos runs --master`` says how it ended in the words run.json, ``show``
and the report use: ``succeeded``, ``failed (exit 5, worker:0)``,
``interrupted``, ``killed (by NAME)``. ``tfmesos kill`` records who killed
the run, on the framework and in the run's record, and the run's scheduler
ends cleanly (tfrun exits 143).

Every case runs against one ``LocalMaster`` (a standalone master, as
``tfmesos local-master`` is) started once for the module."""

import contextlib
import json
import os
import pwd
import re
import signal
import subprocess
import sys
import urllib.request

import pytest
from fixtures_master import FAST, leftover_processes, marked_environment, small_agent
from processes import scheduler_pids
from tfrun_helpers import (
    REPO,
    SMALL,
    assert_no_task_processes,
    finish_reading,
    start_tfrun,
)
from waiting import wait_until

from mesos_local import LocalMaster
from tfmesos.protocol import labels
from tfmesos.record.outcomes import killed_by, outcome_text
from tfmesos.record.schema import Outcome, Task

pytestmark = pytest.mark.timeout(240)

USER = pwd.getpwuid(os.getuid()).pw_name     # who kills, without MESOS_PRINCIPAL
KILLED = "killed (by %s)" % USER


# -- the words ----------------------------------------------------------------------

@pytest.mark.parametrize("outcome, code, text, short", [
    (Outcome(status="succeeded"), None, "succeeded", "succeeded"),
    (Outcome(status="failed", task="worker:0", message="task worker:0 exited with code 5"), 5,
     "failed (exit 5, worker:0)", "failed (exit 5, worker:0)"),
    (Outcome(status="failed", task="worker:1", message="worker:1 was lost"), None,
     "failed (worker:1): worker:1 was lost", "failed (worker:1)"),
    (Outcome(status="aborted", message="no offer fits\n job 'worker'"), None,
     "aborted: no offer fits job 'worker'", "aborted"),
    (Outcome(status="interrupted", message="interrupted (Ctrl-C, SIGTERM or SIGHUP)"), None,
     "interrupted", "interrupted"),
    (Outcome(status="killed", message="the run was killed (by ops)", by="ops"), None,
     "killed (by ops)", "killed (by ops)"),
    (Outcome(status="running"), None, "running", "running"),
])
def test_one_line_says_how_a_run_ended(outcome, code, text, short):
    tasks = [Task(name="worker:0", exit_code=code), Task(name="worker:1", exit_code=code)]
    assert outcome_text(outcome, tasks) == text
    assert outcome_text(outcome, tasks, message=False) == short
    # What the framework's label says, tfmesos runs --master shows as it is.
    assert killed_by(text) == (outcome.by if outcome.status == "killed" else None)


@pytest.fixture(scope="module")
def master():
    started = LocalMaster(agents=[small_agent()], **dict(
        FAST, executor_environment=marked_environment()))
    started.start()
    try:
        yield started
    finally:
        started.stop()
        wait_until(lambda: not leftover_processes(started), timeout=30,
                   message="tasks outlived LocalMaster.stop()")


@pytest.fixture
def env(tmp_path):
    return dict(os.environ, MESOS_MASTER="", MESOS_PRINCIPAL="", MESOS_SECRET="",
                TFMESOS_KEYS_DIR=str(tmp_path / "keys"), TFMESOS_RUNS_DIR=str(tmp_path / "runs"))


def tear_down(master, run_id):
    """An operator's teardown of ``run_id``'s framework; returns once its
    scheduler task is gone."""
    [framework] = [f for f in master.state()["frameworks"]
                   if labels.label_map(f.get("labels")).get(labels.RUN_ID) == run_id]
    assert master.teardown(framework["id"])
    wait_until(lambda: not scheduler_pids(run_id), timeout=60,
               message=lambda: "the scheduler task outlived the teardown: %s"
               % scheduler_pids(run_id))


def tfmesos(env, *args, cwd=REPO, timeout=60):
    return subprocess.run([sys.executable, "-m", "tfmesos.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def state_on_master(master, env, run_id):
    """The STATE ``tfmesos runs --master`` shows for ``run_id`` (None: not listed)."""
    listed = tfmesos(env, "runs", "--master", master.url)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    start, end = header.index("STATE"), header.index("STARTED")
    for row in rows:
        if row.startswith(run_id + " "):
            return row[start:end].strip()
    return None


def finished_state(master, env, run_id, timeout=120):
    """The STATE of ``run_id`` once its framework has finished."""
    return wait_until(lambda: (lambda state: state if state and not state.startswith(
        ("running", "failing over")) else None)(state_on_master(master, env, run_id)),
        timeout=timeout, message="run %s never finished" % run_id)


def record(directory):
    with open(os.path.join(directory, "run.json"), encoding="utf-8") as handle:
        return json.load(handle)


def job_task_running(master, run_id):
    """Whether a job task (not a scheduler task) of ``run_id`` runs."""
    return any(task["state"] == "TASK_RUNNING" and not labels.is_scheduler_task(task["id"])
               for framework in master.state()["frameworks"]
               if labels.label_map(framework.get("labels")).get(labels.RUN_ID) == run_id
               for task in framework["tasks"])


# -- foreground runs ----------------------------------------------------------------

def foreground(master, tmp_path, env, *command):
    run_dir = tmp_path / "run"
    with start_tfrun("-m", master.url, "-w", "1", "-s", "0", *SMALL, "--run-dir", str(run_dir),
                     "--", *command, env=env) as proc:
        _, err = finish_reading(proc, 120)
    return proc.returncode, err, record(run_dir)


def test_a_foreground_run_that_succeeds(master, tmp_path, env):
    code, err, run = foreground(master, tmp_path, env, "true")
    assert code == 0, err
    assert run["outcome"]["status"] == "succeeded"
    assert state_on_master(master, env, run["run_id"]) == "succeeded"


def test_a_foreground_run_whose_worker_exits_5(master, tmp_path, env):
    code, err, run = foreground(master, tmp_path, env, "sh", "-c", "exit 5")
    assert code == 5, err
    assert (run["outcome"]["status"], run["outcome"]["task"]) == ("failed", "worker:0")
    assert state_on_master(master, env, run["run_id"]) == "failed (exit 5, worker:0)"
    shown = tfmesos(env, "show", str(tmp_path / "run"))
    assert shown.stdout.splitlines()[0].endswith("failed (exit 5, worker:0), exit code 5")


@contextlib.contextmanager
def sleeping(master, tmp_path, env, *options):
    """A foreground tfrun (with ``options``) whose worker sleeps: (its
    process, the run id) once it runs."""
    run_dir = tmp_path / "run"
    with start_tfrun("-m", master.url, "-w", "1", "-s", "0", *SMALL, *options, "--run-dir",
                     str(run_dir), "--", "sleep", "600", env=env) as proc:
        run_id = wait_until(lambda: (run_dir / "run.json").exists()
                            and record(run_dir)["run_id"], timeout=60)
        wait_until(lambda: job_task_running(master, run_id), timeout=90,
                   message=lambda: "the worker never ran")
        yield proc, run_id


def test_a_foreground_run_interrupted_with_ctrl_c(master, tmp_path, env):
    with sleeping(master, tmp_path, env) as (proc, run_id):
        proc.send_signal(signal.SIGINT)
        _, err = finish_reading(proc, 60)
    assert proc.returncode == 130, err
    assert record(tmp_path / "run")["outcome"]["status"] == "interrupted"
    assert state_on_master(master, env, run_id) == "interrupted"


def test_kill_records_who_killed_a_foreground_run(master, tmp_path, env):
    with sleeping(master, tmp_path, env) as (proc, run_id):
        killed = tfmesos(env, "kill", run_id, "--master", master.url)
        assert killed.returncode == 0, killed.stderr
        assert "killed run %s" % run_id in killed.stdout and "by %s" % USER in killed.stdout
        _, err = finish_reading(proc, 60)
    # tfrun learns it was killed (Mesos: "Framework failed over"), says by whom, exits 143.
    assert proc.returncode == 143, err
    assert "the run was %s" % KILLED in err, err
    assert "Traceback" not in err
    assert state_on_master(master, env, run_id) == KILLED
    run = record(tmp_path / "run")
    assert (run["outcome"]["status"], run["outcome"]["by"], run["outcome"]["exit_code"]) == (
        "killed", USER, 143)
    [attempt] = run["tasks"][0]["attempts"]
    assert (attempt["states"][-1]["state"], attempt["states"][-1]["source"]) == (
        "TASK_KILLED", "tfmesos kill")
    shown = tfmesos(env, "show", str(tmp_path / "run"))
    assert shown.stdout.splitlines()[0].endswith("%s, exit code 143" % KILLED), shown.stdout
    assert master.state()["frameworks"] == []
    assert_no_task_processes()


def test_a_killed_failover_run_leaves_nothing_it_shipped(master, tmp_path, env):
    # A --failover run keeps its bundle (shipped/) for the scheduler that
    # carries it on; one that tfmesos kill ended kept it too, for ever.
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print(1)\n")
    with sleeping(master, tmp_path, env, "--failover", "--ship", str(project)) as (proc, run_id):
        assert os.listdir(tmp_path / "run" / "shipped")
        killed = tfmesos(env, "kill", run_id, "--master", master.url)
        assert killed.returncode == 0, killed.stderr
        _, err = finish_reading(proc, 60)
    assert proc.returncode == 143, err
    assert not (tmp_path / "run" / "shipped").exists()


def test_an_operator_teardown_of_a_foreground_run_is_a_kill(master, tmp_path, env):
    # /master/teardown (an operator, or tfmesos kill by a principal that may
    # not subscribe as the framework): tfrun said it lost the subscription,
    # then "task worker:0 exited with code 143", and recorded a failure.
    with sleeping(master, tmp_path, env) as (proc, run_id):
        [framework] = [f for f in master.state()["frameworks"]
                       if labels.label_map(f.get("labels")).get(labels.RUN_ID) == run_id]
        answer = urllib.request.urlopen(urllib.request.Request(
            master.url + "/master/teardown", data=("frameworkId=%s" % framework["id"]).encode(),
            method="POST"), timeout=30)
        assert answer.status == 200
        _, err = finish_reading(proc, 60)
    assert proc.returncode == 143, err
    assert "tfrun: the run was killed: the Mesos master tore its framework down (an operator, " \
        "or tfmesos kill), which kills every task" in err.splitlines(), err
    assert "exited with code" not in err, err
    assert "Traceback" not in err
    run = record(tmp_path / "run")
    assert (run["outcome"]["status"], run["outcome"]["exit_code"]) == ("killed", 143), \
        run["outcome"]
    shown = tfmesos(env, "show", str(tmp_path / "run"))
    assert shown.stdout.splitlines()[0].endswith("killed, exit code 143"), shown.stdout
    assert_no_task_processes()


# -- detached runs --------------------------------------------------------------------

def submit(master, tmp_path, env, *command):
    """``tfrun --detach`` of ``command`` (shipping a small project); the run id."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('training')\n")
    submitted = subprocess.run(
        [sys.executable, "-m", "tfmesos.cli.tfrun", "--detach", "--ship", "--python",
         sys.executable, "-m", master.url, "-w", "1", "-s", "0", *SMALL, "--", *command],
        cwd=project, env=env, capture_output=True, text=True, timeout=150)
    assert submitted.returncode == 0, submitted.stderr
    [run_id] = re.findall(r"^run (\w+) detached", submitted.stdout, re.M)
    return run_id


def test_a_detached_run_that_succeeds(master, tmp_path, env):
    run_id = submit(master, tmp_path, env, "python", "train.py")
    assert finished_state(master, env, run_id) == "succeeded"


def test_a_detached_run_whose_worker_exits_5(master, tmp_path, env):
    run_id = submit(master, tmp_path, env, "sh", "-c", "exit 5")
    assert finished_state(master, env, run_id) == "failed (exit 5, worker:0)"
    shown = tfmesos(env, "show", run_id, "--master", master.url)
    assert "failed (exit 5, worker:0), exit code 5" in shown.stdout, shown.stdout


def test_logs_of_a_detached_run_print_each_line_once(master, tmp_path, env):
    # Issue 35, item 2: the scheduler task relays its tasks' output, so
    # "logs RUN --master M" printed "[worker:0] hello" and "[scheduler] [worker:0] hello".
    run_id = submit(master, tmp_path, env, "sh", "-c", "echo hello; echo oops >&2")
    assert finished_state(master, env, run_id) == "succeeded"
    every = tfmesos(env, "logs", run_id, "--master", master.url)
    assert every.returncode == 0, every.stderr
    lines = every.stdout.splitlines()
    assert [line for line in lines if line.endswith("hello")] == ["[worker:0] hello"], lines
    assert not [line for line in lines if line.startswith("[scheduler] [")], lines
    errors = tfmesos(env, "logs", "--stderr", run_id, "--master", master.url).stdout.splitlines()
    assert [line for line in errors if line.endswith("oops")] == ["[worker:0] oops"], errors
    assert "[scheduler] tfrun: the scheduler of run %s (attempt 1) takes framework" % run_id \
        in "\n".join(errors), errors
    # One task, in any order of the words: its output, unprefixed; the scheduler's
    # alone is what a foreground tfrun would have printed, relayed lines included.
    for argv in ([run_id, "--master", master.url, "worker:0"],
                 ["--master", master.url, run_id, "worker:0"],
                 [run_id, "worker:0", "--master", master.url]):
        one = tfmesos(env, "logs", *argv)
        assert (one.returncode, one.stdout.splitlines()[-1:]) == (0, ["hello"]), one.stderr
    scheduler = tfmesos(env, "logs", run_id, "--master", master.url, "scheduler")
    assert scheduler.stdout.splitlines() == ["[worker:0] hello"], scheduler.stderr


def test_kill_records_who_killed_a_detached_run(master, tmp_path, env):
    run_id = submit(master, tmp_path, env, "sleep", "600")
    wait_until(lambda: job_task_running(master, run_id), timeout=90,
               message=lambda: "the worker never ran")
    killed = tfmesos(env, "kill", run_id, "--master", master.url)
    assert killed.returncode == 0, killed.stderr
    assert finished_state(master, env, run_id) == KILLED
    # Its scheduler task recorded the kill before the teardown, and ended.
    shown = tfmesos(env, "show", run_id, "--master", master.url)
    assert shown.returncode == 0, shown.stderr
    assert "%s, exit code 143" % KILLED in shown.stdout.splitlines()[0], shown.stdout
    rows = [line.split() for line in shown.stdout.splitlines() if line.startswith("worker:0")]
    assert [row[3] for row in rows] == ["TASK_KILLED"], shown.stdout
    wait_until(lambda: not scheduler_pids(run_id), timeout=60,
               message=lambda: "the scheduler task outlived the kill: %s" % scheduler_pids(run_id))
    assert_no_task_processes()


def test_an_operator_teardown_of_a_detached_run_is_recorded_as_a_kill(master, tmp_path, env):
    # /master/teardown of a detached run (tfmesos kill where the master does
    # not let it subscribe as the framework): its scheduler task learns the
    # teardown as its own SIGTERM comes, and Mesos' command executor gives
    # it 3 s then, not its 30 s KillPolicy (CommandExecutor::shutdown,
    # src/launcher/executor.cpp): the record says killed all the same.
    run_id = submit(master, tmp_path, env, "sleep", "600")
    wait_until(lambda: job_task_running(master, run_id), timeout=90,
               message=lambda: "the worker never ran")
    tear_down(master, run_id)
    shown = tfmesos(env, "show", run_id, "--master", master.url)
    assert shown.returncode == 0, shown.stderr
    assert "killed, exit code 143" in shown.stdout.splitlines()[0], shown.stdout
    assert_no_task_processes()


# Put before the scheduler task's own path by a --python wrapper: its
# RemoteMaster's method HOLD_AT says the task's pid and run id in HELD, then
# waits for Mesos' SIGTERM.
HOLDING_SITE = '''
import importlib.abc, importlib.machinery, os, sys, time

def _held(*args):
    with open(HELD + ".partial", "w") as handle:
        handle.write("%d %s" % (os.getpid(), os.environ.get("TFMESOS_RUN_ID", "")))
    os.rename(HELD + ".partial", HELD)
    while True:
        time.sleep(1)

class _Loader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader
    def create_module(self, spec):
        return self.loader.create_module(spec)
    def exec_module(self, module):
        self.loader.exec_module(module)
        setattr(module.RemoteMaster, HOLD_AT, _held)

class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "tfmesos.backends.remote":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = _Loader(spec.loader)
        return spec

with open("/proc/self/cmdline", "rb") as _handle:
    if b"tfmesos.cli.detached_scheduler" in _handle.read():
        sys.meta_path.insert(0, _Finder())
'''


@pytest.mark.parametrize("hold_at", ["__init__", "start"],
                         ids=["before_its_run_is_made", "as_its_run_starts"])
def test_a_teardown_before_a_detached_scheduler_waits_for_events_is_recorded_as_a_kill(
        master, tmp_path, env, hold_at):
    # Mesos' SIGTERM before the scheduler task's loop waits for events
    # (where test_an_operator_teardown_... sends it): as it starts its run
    # (RemoteMaster.start) it was recorded 'interrupted, exit code 130', as
    # a Ctrl-C; before its run was made (RemoteMaster(), its spec read) it
    # died of the signal, its record never written.
    site, held = tmp_path / "site", tmp_path / "held"
    site.mkdir()
    (site / "sitecustomize.py").write_text("HELD, HOLD_AT = %r, %r\n%s"
                                           % (str(held), hold_at, HOLDING_SITE))
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\nPYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n'
                      % (site, sys.executable))
    python.chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    submitter = subprocess.Popen(
        [sys.executable, "-m", "tfmesos.cli.tfrun", "--detach", "--ship", "--python",
         str(python), "-m", master.url, "-w", "1", "-s", "0", *SMALL, "--", "sleep", "600"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(held.exists, timeout=120, message="the scheduler task never started its run")
        pid, run_id = held.read_text().split()
        tear_down(master, run_id)
        submitter.communicate(timeout=60)
    finally:
        if submitter.poll() is None:
            submitter.kill()
            submitter.communicate()
    shown = tfmesos(env, "show", run_id, "--master", master.url)
    assert shown.returncode == 0, shown.stderr
    assert "killed, exit code 143" in shown.stdout.splitlines()[0], shown.stdout
    assert_no_task_processes()


def test_a_sigterm_after_a_detached_runs_end_leaves_its_outcome_alone(tmp_path, monkeypatch,
                                                                     capsys):
    """Mesos' SIGTERM that comes once the scheduler task's run ended (a kill
    racing its end) said 'the run was killed', saved the record again and
    exited 143 whatever the run's own code (review rv1): the record is
    final, and so is its exit code."""
    from policy_helpers import FakeBackend

    from tfmesos.cli import detached_scheduler, tfrun
    from tfmesos.core.jobs import Job
    from tfmesos.core.launch import ClusterRun
    from tfmesos.core.signals import interrupt_on_signals
    from tfmesos.core.spec import RunSpec
    from tfmesos.exceptions import TFMesosError
    from tfmesos.mesos.mock_transport import MockTransport

    class Refused(FakeBackend):
        def start(self):
            raise TFMesosError("the master refused the run")

    spec = RunSpec(jobs=(Job("worker", num=1),), mode="replica", command="true",
                   master="mock-master:5050", run_dir=str(tmp_path / "run"))
    run = ClusterRun(spec, environ={}, backend=Refused(), transport=MockTransport(),
                     detached=True)
    monkeypatch.setattr(detached_scheduler, "_setup", lambda path, known: (run, None))
    inner = tfrun._execute

    def then_sigterm(*args):
        code = inner(*args)
        signal.raise_signal(signal.SIGTERM)
        return code

    monkeypatch.setattr(tfrun, "_execute", then_sigterm)
    with interrupt_on_signals():
        code = detached_scheduler.main("detached.json")
    with open(tmp_path / "run" / "run.json") as handle:
        outcome = json.load(handle)["outcome"]
    assert (code, outcome["status"], outcome["exit_code"]) == (1, "aborted", 1)
    assert "killed" not in capsys.readouterr().err
