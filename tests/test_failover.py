"""Runs that outlive their scheduler (``tfrun --failover``, ``tfmesos
attach``) on a master that outlives tfrun: a tfrun SIGKILLed mid-training
leaves its tasks running; ``tfmesos attach`` takes the run over, the tasks
register with it and carry on (same task ids, same processes, no restart in
the record), and the run ends as it would have."""

import json
import os
import re
import signal
import subprocess
import sys
import types

import pytest
from failover_helpers import (
    TRAIN,
    attached_to_the_end,
    framework_of,
    logged,
    steps,
    tfmesos,
    trained,
)
from fixtures_master import make_local_master
from fixtures_zk import registered_in_zookeeper, zk_client, zookeeper
from installed import require
from processes import scheduler_pids
from run_dirs import validate_run_json
from tfrun_helpers import REPO, SMALL, hung_up_once_ready, reaped, start_tfrun, tfrun_argv
from waiting import wait_until

from tfmesos.ship.bundle import file_sha256


def left_to_its_tasks(master, tmp_path, workers):
    """A ``tfrun --failover`` run of ``workers`` workers of ``master``
    training until ``finish`` exists, its tfrun SIGKILLed once the last
    worker made three steps, and the framework failing over: (its run
    directory, ``finish``, the environment it ran with)."""
    run_dir, finish = tmp_path / "run", tmp_path / "finish"
    (tmp_path / "train.py").write_text(TRAIN)
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"),
               TFMESOS_RUNS_DIR=str(tmp_path))
    last = run_dir / ("worker.%d.stdout" % (workers - 1))
    with start_tfrun("--failover", "--failover-timeout", "300", "-m", master.url, "-w",
                     str(workers), "-s", "0", *SMALL, "--run-dir", str(run_dir), "--",
                     sys.executable, str(tmp_path / "train.py"), str(finish), env=env) as tfrun:
        wait_until(lambda: len(steps(last)) >= 3, timeout=120,
                   message=lambda: "the workers never trained: %s" % tfrun.stderr.read())
        tfrun.send_signal(signal.SIGKILL)
        tfrun.wait(30)
    wait_until(lambda: not framework_of(master)[0]["connected"], timeout=60)
    return run_dir, finish, env


def test_attach_takes_over_a_killed_failover_tfrun_without_restarting_a_task(
        make_local_master, tmp_path):
    master = make_local_master()
    run_dir, finish, env = left_to_its_tasks(master, tmp_path, workers=2)
    before = {name: steps(run_dir / ("%s.stdout" % name)) for name in ("worker.0", "worker.1")}
    failover = json.loads((run_dir / "failover.json").read_text())
    run_id = failover["identity"]["run_id"]
    assert oct((run_dir / "failover.json").stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "keys" / run_id).stat().st_mode & 0o777) == "0o600"
    # The scheduler is gone; the framework fails over; its tasks run on.
    framework, _ = framework_of(master)
    assert [t["state"] for t in framework["tasks"]] == ["TASK_RUNNING"] * 2
    with subprocess.Popen([sys.executable, "-m", "tfmesos.cli.main", "attach", run_id],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as attach:
        try:
            # The same processes go on: their new steps reach the run directory again.
            wait_until(lambda: all(
                len(steps(run_dir / ("%s.stdout" % name))) > len(before[name]) + 2
                for name in before), timeout=120,
                message=lambda: "the tasks never came back to the new scheduler")
            assert framework_of(master)[0]["connected"]
            # Not erased as the cluster formed again (tfmesos show reads it).
            assert json.loads((run_dir / "run.json").read_text())["framework_id"] == \
                framework["id"]
            finish.write_text("")
            out, err = attach.communicate(timeout=120)
        finally:
            if attach.poll() is None:
                attach.kill()
                attach.wait()
    assert attach.returncode == 0, err
    assert "taking run %s over" % run_id in err
    for name in before:
        seen = steps(run_dir / ("%s.stdout" % name))
        assert {pid for _, pid in seen} == {before[name][0][1]}, "a task was restarted"
        assert [step for step, _ in seen] == sorted(step for step, _ in seen)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["outcome"]["status"] == "succeeded", record["outcome"]
    assert record["restarts"] == [] and record["relaunches"] == []
    # The takeover is marked: in run.json, and where tfmesos show shows the run.
    [takeover] = record["takeovers"]
    assert (takeover["scheduler_attempt"], takeover["how"]) == (2, "tfmesos attach")
    shown = tfmesos("show", str(run_dir), env=env)
    assert re.search(r"^takeover at \+[\d.]+ s: scheduler attempt 2 \(tfmesos attach\)$",
                     shown.stdout, re.M), shown.stdout
    reported = tfmesos("report", str(run_dir), "-o", str(tmp_path / "report.html"), env=env)
    assert reported.returncode == 0, reported.stderr
    assert re.search(r'<p class="takeover">takeover at \+[\d.]+ s: scheduler attempt 2 '
                     r'\(tfmesos attach\)</p>', (tmp_path / "report.html").read_text())
    for task in record["tasks"]:
        [attempt] = task["attempts"]
        assert attempt["task_id"].startswith("tfmesos.%s." % run_id)
        assert attempt["states"][-1]["state"] == "TASK_FINISHED"
        assert attempt["exit_code"] == 0
    _, state = framework_of(master)
    assert state["frameworks"] == []


def test_each_takeover_by_attach_is_the_next_scheduler_attempt(make_local_master, tmp_path):
    # Every attach read attempt 1 from failover.json and recorded itself as
    # scheduler attempt 2, the second as the first.
    master = make_local_master()
    run_dir, finish, env = left_to_its_tasks(master, tmp_path, workers=1)
    run_id = json.loads((run_dir / "failover.json").read_text())["identity"]["run_id"]
    with reaped(subprocess.Popen([sys.executable, "-m", "tfmesos.cli.main", "attach", run_id],
                                 cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)) as first:
        wait_until(lambda: json.loads((run_dir / "run.json").read_text())["takeovers"],
                   timeout=120, message="the first attach never took the run over")
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    wait_until(lambda: not framework_of(master)[0]["connected"], timeout=60)
    attach, _, err = attached_to_the_end(master, finish, [run_id], env)
    assert attach.returncode == 0, err
    record = json.loads((run_dir / "run.json").read_text())
    assert [(t["scheduler_attempt"], t["how"]) for t in record["takeovers"]] == [
        (2, "tfmesos attach"), (3, "tfmesos attach")]


@pytest.mark.zookeeper
def test_attach_takes_over_a_failover_run_of_a_zk_master_with_the_password_it_is_given(
        make_local_master, tmp_path, zookeeper):
    # tfrun writes failover.json with the ZooKeeper password masked; attach
    # reads it and takes the password from the master it is given: the two
    # sides, run here together (the master's znodes only the password reads).
    master = make_local_master()
    password = "pw-%s" % os.urandom(8).hex()
    zk_master = registered_in_zookeeper(master, zookeeper, password)
    run_dir, finish = tmp_path / "run", tmp_path / "finish"
    (tmp_path / "train.py").write_text(TRAIN)
    env = dict(os.environ, MESOS_MASTER=zk_master, TFMESOS_KEYS_DIR=str(tmp_path / "keys"),
               TFMESOS_RUNS_DIR=str(tmp_path))
    with start_tfrun("--failover", "--failover-timeout", "300", "-w", "1", "-s", "0", *SMALL,
                     "--advertise-address", "127.0.0.1", "--run-dir", str(run_dir), "--",
                     sys.executable, str(tmp_path / "train.py"), str(finish), env=env) as tfrun:
        trained(run_dir, tfrun)
        tfrun.send_signal(signal.SIGKILL)
        tfrun.wait(30)
    failover = json.loads((run_dir / "failover.json").read_text())
    run_id = failover["identity"]["run_id"]
    assert failover["spec"]["master"] == zk_master.replace(password, "***")
    for name in ("failover.json", "run.json"):
        assert password not in (run_dir / name).read_text(), name
    wait_until(lambda: not framework_of(master)[0]["connected"], timeout=60)
    # Without the password: one line, and the run left to its tasks.
    refused = tfmesos("attach", run_id, env=dict(env, MESOS_MASTER=""))
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.strip() == (
        "tfmesos: error: the Mesos master %s: tfmesos keeps the ZooKeeper password in no "
        "file: give this master with it in $MESOS_MASTER (or --master)"
        % zk_master.replace(password, "***")), refused.stderr
    assert [t["state"] for t in framework_of(master)[0]["tasks"]] == ["TASK_RUNNING"]
    attach, out, err = attached_to_the_end(master, finish, [run_id, "--master", zk_master],
                                           dict(env, MESOS_MASTER=""))
    assert attach.returncode == 0, err
    assert "taking run %s over" % run_id in err and password not in out + err
    assert json.loads((run_dir / "run.json").read_text())["outcome"]["status"] == "succeeded"
    assert password not in (run_dir / "run.json").read_text()


@pytest.mark.zookeeper
def test_a_run_through_a_zookeeper_of_two_servers_runs(make_local_master, tmp_path, zookeeper):
    # The README's form, zk://zk1:2181,zk2:2181/mesos: tfrun raised ValueError
    # ("Port could not be cast to integer value as '...,localhost:...'"),
    # deriving the tasks' address from the zk:// string.
    master = make_local_master()
    password = "pw-%s" % os.urandom(8).hex()
    zk_master = registered_in_zookeeper(master, zookeeper, password)
    port = zookeeper.rsplit(":", 1)[1]
    two_servers = zk_master.replace("@%s/" % zookeeper, "@%s,localhost:%s/" % (zookeeper, port))
    assert two_servers != zk_master
    result = subprocess.run(tfrun_argv("-w", "1", "-s", "0", *SMALL, "--", "echo", "ran"),
                            cwd=REPO, capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, MESOS_MASTER=two_servers,
                                     TFMESOS_RUNS_DIR=str(tmp_path)))
    assert result.returncode == 0, result.stderr
    assert "[worker:0] ran" in result.stdout and password not in result.stderr


# A shipped train.py that says which version of it runs, then steps as TRAIN.
VERSIONED = TRAIN.replace("step = 0\n", "print('version', %r, os.getpid(), flush=True)\n"
                                       "step = 0\n", 1)


def versions(path):
    """[(version, pid)] a shipped task's log shows."""
    return logged(path, "version")


def killed_shipped_failover_run(master, tmp_path, env, workers, *options):
    """A ``--failover --ship`` run of ``VERSIONED`` (version "original")
    whose tfrun was SIGKILLed once every worker stepped; (run directory,
    project directory, finish file, failover.json as a dict)."""
    project, run_dir, finish = tmp_path / "project", tmp_path / "run", tmp_path / "finish"
    project.mkdir()
    (project / "train.py").write_text(VERSIONED % "original")
    with start_tfrun("--failover", "--failover-timeout", "300", "--ship", str(project),
                     "--python", sys.executable, "-m", master.url, "-w", str(workers), "-s",
                     "0", *SMALL, *options, "--run-dir", str(run_dir), "--", "python",
                     "train.py", str(finish), env=env) as tfrun:
        wait_until(lambda: all(len(steps(run_dir / ("worker.%d.stdout" % i))) >= 3
                               for i in range(workers)) and (run_dir / "failover.json").exists(),
                   timeout=120, message=lambda: "the workers never trained: %s"
                   % tfrun.stderr.read())
        tfrun.send_signal(signal.SIGKILL)
        tfrun.wait(30)
        assert re.search(r"shipped \d+ files?", tfrun.stderr.read())
    # The scheduler is gone; the framework fails over; its tasks run on.
    wait_until(lambda: not framework_of(master)[0]["connected"], timeout=60)
    return run_dir, project, finish, json.loads((run_dir / "failover.json").read_text())


def test_attach_serves_the_code_the_run_started_with_not_the_edited_one(make_local_master,
                                                                          tmp_path):
    master = make_local_master()
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"),
               TFMESOS_RUNS_DIR=str(tmp_path), TMPDIR=str(tmp_path / "tmp"))
    run_dir, project, finish, failover = killed_shipped_failover_run(
        master, tmp_path, env, 2, "--max-restarts", "1", "--restart-on", "failure",
        "--restart-backoff", "0.5")
    run_id = failover["identity"]["run_id"]
    shipped = json.loads((run_dir / "run.json").read_text())["shipped"]
    # What was packed is kept in the run directory, not in a temporary one.
    kept = failover["packed"]
    assert kept["bundle"] and os.path.dirname(kept["bundle"]) == str(run_dir / "shipped")
    assert file_sha256(kept["bundle"]) == shipped["bundle"]["sha256"] \
        == failover["identity"]["bundle_sha256"]
    assert not [name for name in os.listdir(tmp_path / "tmp") if name.startswith("tfmesos")]
    # The code is edited before the run is taken over.
    (project / "train.py").write_text(VERSIONED % "edited")
    with subprocess.Popen([sys.executable, "-m", "tfmesos.cli.main", "attach", run_id],
                          cwd=str(project), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as attach:
        try:
            wait_until(lambda: framework_of(master)[0]["connected"] and len(
                steps(run_dir / "worker.1.stdout")) > 5, timeout=120,
                message=lambda: "the tasks never came back to the new scheduler")
            # A worker killed after the takeover: the cluster restarts, and
            # every task relaunched fetches the bundle the run started with.
            [(version, pid)] = versions(run_dir / "worker.1.stdout")
            assert version == "original"
            os.kill(pid, signal.SIGKILL)
            relaunched = [run_dir / ("worker.%d.attempt2.stdout" % i) for i in range(2)]
            wait_until(lambda: all(versions(path) for path in relaunched), timeout=120,
                       message=lambda: "the workers were not relaunched")
            assert [versions(path)[0][0] for path in relaunched] == ["original"] * 2
            finish.write_text("")
            out, err = attach.communicate(timeout=120)
        finally:
            if attach.poll() is None:
                attach.kill()
                attach.wait()
    assert attach.returncode == 0, err
    assert "taking run %s over" % run_id in err
    assert not re.search(r"shipped \d+ files?", err), err   # nothing packed again
    record = json.loads((run_dir / "run.json").read_text())
    assert record["shipped"] == shipped
    assert record["outcome"]["status"] == "succeeded", record["outcome"]
    assert len(record["restarts"]) == 1
    assert not any("edited" in path.read_text() for path in run_dir.glob("*.stdout"))
    # The run is over: what it kept for a takeover goes with it.
    assert not (run_dir / "shipped").exists()


def test_a_kept_bundle_that_changed_is_refused_and_the_run_left_as_it_was(make_local_master,
                                                                          tmp_path):
    master = make_local_master()
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"),
               TFMESOS_RUNS_DIR=str(tmp_path))
    run_dir, _, _, failover = killed_shipped_failover_run(master, tmp_path, env, 1)
    run_id = failover["identity"]["run_id"]
    bundle = failover["packed"]["bundle"]
    with open(bundle, "ab") as handle:
        handle.write(b"\0")
    before = {name: (run_dir / name).read_bytes() for name in ("run.json", "failover.json")}
    tasks = [(task["id"], task["state"]) for task in framework_of(master)[0]["tasks"]]
    attach = tfmesos("attach", run_id, env=env, timeout=120)
    assert attach.returncode == 1, attach.stderr
    [line] = attach.stderr.splitlines()
    assert failover["identity"]["bundle_sha256"] in line and file_sha256(bundle) in line, line
    framework, _ = framework_of(master)
    assert not framework["connected"]
    assert [(task["id"], task["state"]) for task in framework["tasks"]] == tasks
    assert {name: (run_dir / name).read_bytes() for name in before} == before
    assert os.path.isfile(bundle)


def test_without_failover_the_tasks_stop_with_tfrun(make_local_master, tmp_path):
    master = make_local_master()
    run_dir, finish = tmp_path / "run", tmp_path / "finish"
    (tmp_path / "train.py").write_text(TRAIN)
    env = dict(os.environ, MESOS_MASTER="")
    with start_tfrun("-m", master.url, "-w", "1", "-s", "0", *SMALL, "--run-dir", str(run_dir),
                     "--", sys.executable, str(tmp_path / "train.py"), str(finish),
                     env=env) as tfrun:
        wait_until(lambda: len(steps(run_dir / "worker.0.stdout")) >= 2, timeout=120)
        tfrun.send_signal(signal.SIGKILL)
        tfrun.wait(30)
    # The task sees its scheduler gone and stops: nothing waits for a takeover.
    wait_until(lambda: all(t["state"] != "TASK_RUNNING" for f in master.state()["frameworks"]
                           for t in f["tasks"]), timeout=120)
    assert not (run_dir / "failover.json").exists()
    attach = tfmesos("attach", str(run_dir), "--master", master.url, env=env)
    assert attach.returncode == 1 and attach.stderr.count("\n") == 1, attach.stderr
    # The run directory names its master (run.json): no --master needed.
    by_its_record = tfmesos("attach", str(run_dir), env=env)
    assert (by_its_record.returncode, by_its_record.stderr) == (1, attach.stderr)


def test_attach_carrying_on_a_run_that_fails_exits_1_as_its_help_says(make_local_master,
                                                                       tmp_path):
    # A task's exit code is tfrun's exit status, not attach's: attach says 0 or 1.
    master = make_local_master()
    run_dir, finish = tmp_path / "run", tmp_path / "finish"
    (tmp_path / "train.py").write_text(TRAIN + "sys.exit(4)\n")
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"),
               TFMESOS_RUNS_DIR=str(tmp_path))
    with start_tfrun("--failover", "--failover-timeout", "300", "-m", master.url, "-w", "1",
                     "-s", "0", *SMALL, "--run-dir", str(run_dir), "--", sys.executable,
                     str(tmp_path / "train.py"), str(finish), env=env) as tfrun:
        trained(run_dir, tfrun)
        tfrun.send_signal(signal.SIGKILL)
        tfrun.wait(30)
    wait_until(lambda: not framework_of(master)[0]["connected"], timeout=60)
    attach, out, err = attached_to_the_end(master, finish, [str(run_dir)], env)
    assert attach.returncode == 1, err
    assert "task worker:0 exited with code 4" in err, err
    assert json.loads((run_dir / "run.json").read_text())["outcome"]["exit_code"] == 4


def run_processes(run_id):
    """Pids of processes whose environment names the run (its tasks, their commands)."""
    token = ("TFMESOS_RUN_ID=%s" % run_id).encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as handle:
                if token in handle.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue
    return found


@pytest.mark.waits
def test_a_run_nobody_takes_over_is_gone_after_its_failover_timeout(make_local_master, tmp_path):
    master = make_local_master()
    run_dir = tmp_path / "run"
    (tmp_path / "train.py").write_text(TRAIN)
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"))
    with start_tfrun("--failover", "--failover-timeout", "3", "-m", master.url, "-w", "2", "-s",
                     "0", *SMALL, "--run-dir", str(run_dir), "--", sys.executable,
                     str(tmp_path / "train.py"), str(tmp_path / "never"), env=env) as tfrun:
        wait_until(lambda: len(steps(run_dir / "worker.1.stdout")) >= 2, timeout=120)
        tfrun.send_signal(signal.SIGKILL)
        tfrun.wait(30)
    run_id = json.loads((run_dir / "failover.json").read_text())["identity"]["run_id"]
    assert run_processes(run_id)      # the tasks outlive tfrun ...
    # ... for the failover timeout only: then the master removes the framework
    # and kills its tasks (and the tasks themselves give up).
    wait_until(lambda: master.state()["frameworks"] == [], timeout=60)
    [framework] = master.state()["completed_frameworks"]
    assert {task["state"] for task in framework["completed_tasks"]} <= {"TASK_KILLED",
                                                                       "TASK_FAILED"}
    wait_until(lambda: not run_processes(run_id), timeout=60,
               message=lambda: "left running: %s" % run_processes(run_id))
    attach = tfmesos("attach", str(run_dir), env=env)
    # It ended without saying how (nobody took it over): not a success.
    assert attach.returncode == 1 and "has finished" in attach.stdout, attach.stderr


def epochs(text, task):
    return [int(n) for n in re.findall(r"^\[%s\] epoch (\d+)/\d+ loss" % re.escape(task), text,
                                       re.M)]


@pytest.mark.tensorflow
def test_a_detached_keras_job_keeps_its_epochs_through_a_new_scheduler(make_local_master,
                                                                       tmp_path):
    # Keras' MultiWorkerMirroredStrategy on two workers, detached; its
    # scheduler task is SIGKILLed after the second epoch; tfmesos attach
    # launches a new one: the epochs go on where they were, in the same
    # attempts, and the run succeeds.
    require("tf_keras")
    master = make_local_master()
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"))
    examples = os.path.join(REPO, "examples")
    submitted = subprocess.run(
        [sys.executable, "-m", "tfmesos.cli.tfrun", "--detach", "--ship", "--python",
         sys.executable, "-m", master.url, "-w", "2", "-s", "0", "-Cw", "1", "-Mw", "1024", "--",
         "python", "keras_multiworker.py", "--epochs", "40"],
        cwd=examples, env=env, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    [run_id] = re.findall(r"^run (\w+) detached", submitted.stdout, re.M)
    wait_until(lambda: len(epochs(tfmesos("logs", run_id, "--master", master.url, env=env)
                                  .stdout, "worker:1")) >= 2, timeout=240)
    [pid] = scheduler_pids(run_id)
    os.kill(pid, signal.SIGKILL)
    attach = tfmesos("attach", run_id, "--master", master.url, env=env, timeout=300)
    assert attach.returncode == 0, attach.stderr
    assert "launching scheduler task 2" in attach.stderr, attach.stderr
    assert "ended: succeeded" in attach.stderr, attach.stderr
    logs = tfmesos("logs", run_id, "--master", master.url, env=env).stdout
    for task in ("worker:0", "worker:1"):
        assert epochs(logs, task) == list(range(1, 41)), (task, epochs(logs, task))
    # Each worker began once, at the first epoch: never again from a backup.
    assert re.findall(r"training from epoch (\d+)/", logs) == ["1", "1"]
    shown = tfmesos("show", run_id, "--master", master.url, env=env).stdout
    rows = [line.split() for line in shown.splitlines() if line.startswith("worker:")]
    assert [row[:4] for row in rows] == [["worker:%d" % i, "1", "0", "TASK_FINISHED"]
                                         for i in range(2)], shown
    assert "scheduler.0.2" in shown
    assert "scheduler attempt 2 (detached scheduler task 2)" in shown


def test_a_scheduler_task_that_cannot_start_is_one_line_and_leaves_nothing(make_local_master,
                                                                          tmp_path):
    master = make_local_master()
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"))
    (tmp_path / "train.py").write_text(TRAIN)
    result = subprocess.run(
        [sys.executable, "-m", "tfmesos.cli.tfrun", "--detach", "--ship", "--python",
         "/nonexistent/python3", "-m", master.url, "-w", "1", "-s", "0", *SMALL, "--", "python",
         "train.py", "x"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    [line] = [line for line in result.stderr.splitlines() if "error" in line]
    assert "the scheduler task ended before it took the run over: TASK_FAILED" in line
    assert "it said:" in line and "/nonexistent/python3" in line, line
    assert master.state()["frameworks"] == []          # torn down
    assert no_key_left(tmp_path / "keys")               # no key for a run that never was


def test_a_terminal_that_closes_leaves_a_failover_run_to_its_tasks(make_local_master, tmp_path):
    # --failover: the run outlives its scheduler. The ssh session gone, the
    # terminal closed: tfrun leaves it to its tasks (as tfmesos attach does
    # on Ctrl-C), for tfmesos attach to take over; it does not stop it.
    master = make_local_master()
    run_dir = tmp_path / "run"
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"),
               TFMESOS_RUNS_DIR=str(tmp_path))
    code = hung_up_once_ready(tfrun_argv("--failover", "--failover-timeout", "300", "-m",
                                         master.url, "-w", "2", "-s", "0", *SMALL, "--run-dir",
                                         str(run_dir), "--", "sleep", "600"), env=env)
    assert code == 0
    wait_until(lambda: not framework_of(master)[0]["connected"], timeout=60)
    framework, _ = framework_of(master)
    assert [t["state"] for t in framework["tasks"]] == ["TASK_RUNNING"] * 2
    run_id = json.loads((run_dir / "failover.json").read_text())["identity"]["run_id"]
    assert (tmp_path / "keys" / run_id).exists()   # kept for tfmesos attach
    # Its record says it goes on: it said 'interrupted' (exit 130), so
    # tfmesos runs --prune removed its key and its record while its tasks
    # ran, and attach took it for another machine's (found by a review
    # helper following the README).
    outcome = json.loads((run_dir / "run.json").read_text())["outcome"]
    assert outcome["status"] == "running" and outcome["exit_code"] is None, outcome
    pruned = tfmesos("runs", "--prune", "--keep", "0", env=env)
    assert pruned.returncode == 0 and "kept 1 still running: run" in pruned.stdout, pruned
    assert (tmp_path / "keys" / run_id).exists() and (run_dir / "run.json").exists()
    killed = tfmesos("kill", run_id, "--master", master.url, env=env)
    assert killed.returncode == 0, killed.stderr
    wait_until(lambda: not framework_of(master)[0], timeout=60)
    # With no scheduler to record it, the kill is in the run's record
    # itself: it said "running" ("gone" in tfmesos runs) for good (found by
    # a review helper).
    assert "its record %s says so" % run_dir in killed.stdout
    record = validate_run_json(run_dir / "run.json")
    assert (record["outcome"]["status"], record["outcome"]["exit_code"]) == ("killed", 143)
    assert record["outcome"]["by"] and record["timings"]["finished"]
    assert [task["state"] for task in record["tasks"]] == ["TASK_KILLED"] * 2
    listed = tfmesos("runs", env=env)
    assert re.search(r"^%s .* killed \(by " % run_id, listed.stdout, re.M), listed.stdout


def submit_env(tmp_path):
    return dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"))


def submit_waiting(master, tmp_path):
    """``tfrun --detach`` of a run on ``master`` whose scheduler task no
    offer fits (500 cpus): it waits, its framework subscribed."""
    (tmp_path / "train.py").write_text(TRAIN)
    return subprocess.Popen(
        [sys.executable, "-m", "tfmesos.cli.tfrun", "--detach", "--ship", "--scheduler-cpus",
         "500", "-m", master.url, "-w", "1", "-s", "0", *SMALL, "--", "python", "train.py",
         "x"], cwd=tmp_path, env=submit_env(tmp_path), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_detached_submit_stopped_before_the_takeover_leaves_nothing(make_local_master,
                                                                      tmp_path, signum):
    # No offer fits its scheduler task: the submit waits, its framework on the master.
    master = make_local_master()
    with reaped(submit_waiting(master, tmp_path)) as submit:
        wait_until(lambda: master.state()["frameworks"], timeout=60,
                   message=lambda: "the submit never subscribed")
        submit.send_signal(signum)
        _, said = submit.communicate(timeout=60)
    assert submit.returncode == 130, said
    assert said.splitlines()[-1] == ("tfrun: interrupted before the scheduler took over: nothing "
                                     "of the run is left")
    assert master.state()["frameworks"] == []   # torn down, not left for its failover timeout
    assert no_key_left(tmp_path / "keys")


# tfrun --detach whose driver's start() is interrupted (a SIGTERM or SIGHUP
# as KeyboardInterrupt) once the master has taken its subscription: as a
# signal lands while start() still starts the driver's threads (seen in CI
# on a loaded machine: the framework left registered after "nothing of the
# run is left").
INTERRUPTED_START = """
import runpy, sys, time
from tfmesos.mesos import driver
started = driver.MesosSchedulerDriver.start
def start(self):
    started(self)
    deadline = time.monotonic() + 60
    while self.framework_id is None and time.monotonic() < deadline:
        time.sleep(0.01)
    raise KeyboardInterrupt
driver.MesosSchedulerDriver.start = start
sys.argv[0] = "tfrun"
runpy.run_module("tfmesos.cli.tfrun", run_name="__main__")
"""


def test_a_detached_submit_interrupted_as_its_driver_starts_leaves_nothing(make_local_master,
                                                                           tmp_path):
    master = make_local_master()
    (tmp_path / "train.py").write_text(TRAIN)
    submit = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_START, "--detach", "--ship", "--scheduler-cpus",
         "500", "-m", master.url, "-w", "1", "-s", "0", *SMALL, "--", "python", "train.py",
         "x"], cwd=tmp_path, env=submit_env(tmp_path), capture_output=True, text=True,
        timeout=120)
    assert submit.returncode == 130, submit.stderr
    assert submit.stderr.splitlines()[-1] == ("tfrun: interrupted before the scheduler took "
                                              "over: nothing of the run is left")
    assert master.state()["frameworks"] == [], submit.stderr   # torn down
    assert no_key_left(tmp_path / "keys")


def test_a_detached_submit_killed_before_the_takeover_leaves_a_run_its_owner_kills(
        make_local_master, tmp_path):
    # SIGKILLed (a laptop that died) while its scheduler task waits for an
    # offer: the framework stays for its failover timeout. It carried no
    # proof label, so tfmesos kill, holding the run's key, took the owner's
    # own run for a look-alike ("carries its id but not its proof"): nothing
    # could stop it, and its key stayed.
    master = make_local_master()
    keys = tmp_path / "keys"
    with reaped(submit_waiting(master, tmp_path)) as submit:
        wait_until(lambda: any(label["key"] == "tfmesos.proof"
                               for framework in master.state()["frameworks"]
                               for label in framework.get("labels", [])), timeout=60,
                   message=lambda: "the submit's framework never carried its proof")
        submit.kill()
        submit.wait(30)
    [run_id] = os.listdir(keys)
    killed = tfmesos("kill", run_id, "--master", master.url, env=submit_env(tmp_path))
    assert killed.returncode == 0, killed.stderr
    wait_until(lambda: not master.state()["frameworks"], timeout=60)
    assert no_key_left(keys)


def no_key_left(keys):
    """No run's key in ``keys``: tfrun --detach makes the keys directory (and
    checks it can write there) before it launches, then removes the key of
    a run that never was."""
    return not keys.exists() or not any(keys.iterdir())


def zookeeper_failover_run(master, zookeeper, tmp_path):
    """A ``--failover`` run of ``master`` found through ZooKeeper (a digest
    ACL), training until ``finish`` exists: its tfrun arguments (``args``),
    ``env``, ``run_dir``, ``finish``, and the leader's ZooKeeper ``path``
    and ``password``."""
    password = "pw-%s" % os.urandom(8).hex()
    zk_master = registered_in_zookeeper(master, zookeeper, password)
    run_dir, finish = tmp_path / "run", tmp_path / "finish"
    (tmp_path / "train.py").write_text(TRAIN)
    return types.SimpleNamespace(
        path=zk_master.rsplit("@", 1)[1][len(zookeeper):], password=password,
        run_dir=run_dir, finish=finish,
        env=dict(os.environ, MESOS_MASTER=zk_master, TFMESOS_KEYS_DIR=str(tmp_path / "keys"),
                 TFMESOS_RUNS_DIR=str(tmp_path)),
        args=("--failover", "--failover-timeout", "3600", "-w", "1", "-s", "0", *SMALL,
              "--advertise-address", "127.0.0.1", "--run-dir", str(run_dir), "--",
              sys.executable, str(tmp_path / "train.py"), str(finish)))


def finished_after_a_junk_leader(zookeeper, run, master, scheduler):
    """The leader's entry of ``run`` (``zookeeper_failover_run``) turns to
    junk; once the framework lost its subscription, the task finishes: the
    (stdout, stderr) of ``scheduler`` (tfrun or attach), which then ends."""
    with zk_client(zookeeper) as client:
        client.add_auth("digest", "alice:%s" % run.password)
        [node] = client.get_children(run.path)
        client.create(run.path + "/json.info_", b"junk", acl=client.get_acls(run.path)[0],
                      sequence=True)
        client.delete("%s/%s" % (run.path, node))
    wait_until(lambda: not framework_of(master)[0]["connected"], timeout=60,
               message="the framework stayed subscribed")
    run.finish.write_text("")
    return scheduler.communicate(timeout=120)


@pytest.mark.zookeeper
@pytest.mark.waits
def test_a_run_that_ends_unsubscribed_still_tears_its_framework_down(make_local_master,
                                                                     tmp_path, zookeeper):
    # The leader's znode turns to junk mid-run: the driver cannot subscribe
    # again through ZooKeeper. When the task then finishes, tfrun exits 0 and
    # tears the framework down all the same (through the master it last
    # reached), rather than leaving it registered for its failover timeout.
    master = make_local_master()
    run = zookeeper_failover_run(master, zookeeper, tmp_path)
    with start_tfrun(*run.args, env=run.env) as tfrun:
        trained(run.run_dir, tfrun)
        out, err = finished_after_a_junk_leader(zookeeper, run, master, tfrun)
    assert tfrun.returncode == 0, err
    state = master.wait_until(lambda s: not s["frameworks"], 10)
    assert len(state["completed_frameworks"]) == 1
    assert "stays registered" not in err, err


@pytest.mark.zookeeper
@pytest.mark.waits
def test_attach_says_a_lost_leader_as_tfrun_does_and_tears_the_run_down_at_its_end(
        make_local_master, tmp_path, zookeeper):
    # The QA reproduction: a --failover run of a zk:// master, its tfrun
    # SIGKILLed, taken over by tfmesos attach; then the leader's znode turns
    # to junk. attach's lines about it carry the prefix its other lines have
    # (they had none), and when the task finishes the framework is torn down.
    master = make_local_master()
    run = zookeeper_failover_run(master, zookeeper, tmp_path)
    run_dir, env = run.run_dir, run.env
    with start_tfrun(*run.args, env=env) as tfrun:
        trained(run_dir, tfrun)
        tfrun.send_signal(signal.SIGKILL)
        tfrun.wait(30)
    run_id = json.loads((run_dir / "failover.json").read_text())["identity"]["run_id"]
    wait_until(lambda: not framework_of(master)[0]["connected"], timeout=60)
    with subprocess.Popen([sys.executable, "-m", "tfmesos.cli.main", "attach", run_id],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as attach:
        with reaped(attach):
            wait_until(lambda: framework_of(master)[0]["connected"], timeout=120,
                       message="attach never took the run over")
            out, err = finished_after_a_junk_leader(zookeeper, run, master, attach)
    assert attach.returncode == 0, err
    lines = err.splitlines()
    [changed] = [line for line in lines if "leader changed" in line]
    assert changed.startswith("tfrun: the Mesos leader changed (ZooKeeper names no leader "
                              "now: "), err
    assert changed.endswith("); re-subscribing"), err
    assert "tfrun: lost the connection to the Mesos master; reconnecting" in lines, err
    assert "closed the connection" not in err, err
    state = master.wait_until(lambda s: not s["frameworks"], 10)
    assert len(state["completed_frameworks"]) == 1


@pytest.mark.waits
def test_a_detached_scheduler_no_agent_can_hold_is_said_naming_its_flag(make_local_master,
                                                                        tmp_path):
    # It waited 300 s in silence, then "did not take the run over within
    # 300 s (no offer fits ...)" (found by a review helper); a job's task
    # that no agent holds is said within seconds, naming its flag.
    master = make_local_master()
    (tmp_path / "train.py").write_text(TRAIN)
    submit = subprocess.run(   # (its 300-s takeover timeout would raise TimeoutExpired)
        [sys.executable, "-m", "tfmesos.cli.tfrun", "--detach", "--ship", "--scheduler-mem",
         "100000000", "-m", master.url, "-w", "1", "-s", "0", *SMALL, "--", "python",
         "train.py", "x"], cwd=tmp_path, env=submit_env(tmp_path), capture_output=True,
        text=True, timeout=200)
    assert submit.returncode == 1, submit.stderr
    assert re.search(r"^tfrun: error: the scheduler task asks cpus=[\d.]+ mem=1e\+08 but no agent "
                     r"can hold it: the largest agent has cpus=\d+ mem=\d+ \(total, 1 agent\): "
                     r"lower --scheduler-mem or add a bigger agent$", submit.stderr, re.M), \
        submit.stderr
    assert master.state()["frameworks"] == []   # torn down: nothing of the run is left
    assert no_key_left(tmp_path / "keys")
