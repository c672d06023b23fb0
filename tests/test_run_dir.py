"""tfrun's run directory (a log file per task and attempt, run.json), what
it shows live (--logs), and its status line while the cluster forms."""

import dataclasses
import fcntl
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time

import pytest
from run_dirs import validate_run_json
from tfrun_helpers import (
    REPO,
    assert_no_task_processes,
    dumping_env,
    exited_or_dumped,
    free_port,
    hung_up_once_ready,
    marked_tasks,
    run_tfrun,
    start_tfrun,
    terminated,
    tfrun_argv,
    wait_for_line,
)
from tmpfs_mounts import mounted_tmpfs

from tfmesos.mesos.task_states import TERMINAL_STATES
from tfmesos.record import schema
from tfmesos.record.history import Run
from tfmesos.record.report import STATE_COLORS, render

TINY = ["-Cw", "0.1", "-Mw", "64", "-Cs", "0.1", "-Ms", "64"]
ONE_CPU_EACH = ["-Cw", "1", "-Mw", "64", "-Cs", "1", "-Ms", "64"]


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "tfmesos-runs"))
    return tmp_path / "tfmesos-runs"


@pytest.fixture(scope="module")
def one_cpu_master():
    """A standalone embedded master with one cpu: a second 1-cpu task never fits."""
    port = free_port()
    master = subprocess.Popen(["tfmesos", "local-master", "--port", str(port), "--cpus", "1",
                               *marked_tasks()], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_line(master.stdout, "listening on", timeout=30)
        yield "127.0.0.1:%d" % port
    finally:
        master.terminate()
        master.wait(30)


def load_run_json(directory):
    """run.json, checked against docs/run.schema.json and for the order of its times."""
    data = validate_run_json(os.path.join(directory, "run.json"))
    assert data["schema_version"] == 8
    assert data["outcome"]["status"] in ("succeeded", "failed", "aborted", "interrupted",
                                         "killed")
    assert data["timings"]["submitted"] and data["timings"]["finished"]
    times = [t for t in data["timings"].values() if t]
    assert times == sorted(times)
    return data


MESOS_SOURCES = {"SOURCE_EXECUTOR", "SOURCE_AGENT", "SOURCE_MASTER"}


def assert_every_attempt_ended(data, returncode):
    """Each attempt's last state is terminal, from Mesos, the task's exit
    frame or tfrun's stop; the outcome holds the code tfrun exited with."""
    assert data["outcome"]["exit_code"] == returncode, data["outcome"]
    for task in data["tasks"]:
        for attempt in task["attempts"]:
            last = attempt["states"][-1]
            assert last["state"] in TERMINAL_STATES, (task["name"], attempt["states"])
            assert last["source"] in MESOS_SOURCES | {"exit frame", "stopped by tfrun"}, last
            if last["source"] == "exit frame":
                assert last["state"] == ("TASK_FINISHED" if attempt["exit_code"] == 0
                                         else "TASK_FAILED")
        if task["attempts"]:
            assert task["state"] == task["attempts"][-1]["states"][-1]["state"]


def test_readme_documents_every_run_json_field():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    section = readme[readme.index("### Where the logs are"):readme.index("### Run history")]
    classes = [cls for cls in vars(schema).values()
               if isinstance(cls, type) and issubclass(cls, schema.Record) and cls is not
               schema.Record]
    for field in {field.name for cls in classes for field in dataclasses.fields(cls)}:
        assert "`%s`" % field in section, field


def test_failing_ps_leaves_its_stderr_in_the_run_directory_and_tfrun_prints_its_tail(tmp_path):
    run_dir = tmp_path / "run"
    cmd = "if [ {job_name} = ps ]; then echo ps out; echo ps broke >&2; exit 3; fi; sleep 600"
    result = run_tfrun("-w", "1", "-s", "1", *TINY, "--run-dir", str(run_dir), "--", cmd,
                       timeout=90)
    assert result.returncode == 3, result.stderr
    lines = result.stderr.splitlines()
    at = lines.index("tfrun: task ps:0 exited with code 3")
    assert lines[at + 1:at + 4] == ["tfrun: the last lines ps:0 wrote to stderr:",
                                    "[ps:0] ps broke",
                                    "tfrun: logs and run record: %s" % run_dir]
    assert (run_dir / "ps.0.stderr").read_text() == "ps broke\n"
    assert (run_dir / "ps.0.stdout").read_text() == "ps out\n"
    assert (run_dir / "worker.0.stdout").exists()
    data = load_run_json(run_dir)
    assert data["outcome"] == {"status": "failed", "message": "task ps:0 exited with code 3",
                               "task": "ps:0", "exit_code": 3, "hint": None, "by": None}
    ps = [task for task in data["tasks"] if task["name"] == "ps:0"][0]
    assert ps["exit_code"] == 3 and ps["attempts"][0]["logs"]["stderr"] == "ps.0.stderr"
    assert ps["state"] == "TASK_FAILED"
    assert_every_attempt_ended(data, 3)
    assert_no_task_processes()


def test_run_json_of_a_good_run(runs_dir):
    cmd = "echo {job_name}:{task_index} out; echo {job_name} err >&2; " \
          "if [ {job_name} = ps ]; then sleep 600; else sleep 1; fi"
    result = run_tfrun("-w", "2", "-s", "1", *TINY, "--", cmd)
    assert result.returncode == 0, result.stderr
    assert "logs and run record" not in result.stderr   # said only with -v or on failure
    [run_dir] = list(runs_dir.iterdir())
    assert re.match(r"^echo-[0-9a-f]{8}$", run_dir.name)   # named after the command
    data = load_run_json(run_dir)
    assert data["outcome"]["status"] == "succeeded" and data["mode"] == "replica"
    assert data["run_id"] == run_dir.name[len("echo-"):] and data["framework_id"]
    assert data["name"] == "echo" and data["command"] == cmd
    assert all(data["timings"].values())
    assert [job["name"] for job in data["jobs"]] == ["ps", "worker"]
    for task in data["tasks"]:
        [attempt] = task["attempts"]
        assert attempt["task_id"] == "tfmesos.%s.%s.%d.1" % (data["run_id"], task["job"],
                                                            task["index"])
        assert attempt["agent_id"] and re.match(r"^127\.0\.0\.1:\d+$", attempt["address"])
        assert attempt["launched"] <= attempt["registered"] <= data["timings"]["all_registered"]
        assert [s["state"] for s in attempt["states"]][:2] == ["TASK_STARTING", "TASK_RUNNING"]
    workers = [task for task in data["tasks"] if task["job"] == "worker"]
    assert [(task["state"], task["exit_code"]) for task in workers] == [("TASK_FINISHED", 0)] * 2
    # The ps never ends by itself: tfrun stopped it once the workers were done.
    [ps] = [task for task in data["tasks"] if task["job"] == "ps"]
    assert (ps["state"], ps["attempts"][0]["states"][-1]["source"]) == ("TASK_KILLED",
                                                                        "stopped by tfrun")
    assert_every_attempt_ended(data, 0)
    page = render(Run.load(str(run_dir)))
    assert "finished (0)" in page and re.findall(
        r'fill="(#[0-9a-f]+)" rx="2"><title>ps:0 #1 running from', page) == [
            STATE_COLORS["TASK_KILLED"]]
    assert (run_dir / "ps.0.stdout").read_text() == "ps:0 out\n"     # not shown, kept
    assert (run_dir / "worker.1.stderr").read_text() == "worker err\n"
    assert "[ps:0]" not in result.stdout and "[worker:1] worker:1 out" in result.stdout


def timed_lines(stream, timeout):
    """(seconds since the call, line) for each line until EOF."""
    started, lines = time.monotonic(), []
    for line in iter(stream.readline, ""):
        lines.append((time.monotonic() - started, line.rstrip("\n")))
        assert time.monotonic() - started < timeout
    return lines


@pytest.mark.waits
def test_aborted_launch_progress_lines_totals_and_run_json(one_cpu_master, tmp_path):
    run_dir = tmp_path / "run"
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_PROGRESS_INTERVAL="0.5")
    with start_tfrun("-m", one_cpu_master, "-w", "1", "-s", "1", *ONE_CPU_EACH,
                     "--launch-timeout", "3", "--run-dir", str(run_dir), "--", "true",
                     env=env) as proc:
        lines = timed_lines(proc.stderr, timeout=60)
        assert proc.wait(30) == 1
    progress = [(at, line) for at, line in lines if line.startswith("tfrun: placed ")]
    # Every 0.5 s as asked (the default is 10 s), with seconds of slack for a loaded machine.
    assert progress and progress[0][0] < 8, lines
    assert all(later - earlier < 5 for (earlier, _), (later, _) in zip(progress, progress[1:]))
    assert re.match(r"^tfrun: placed 1/2, registered [01]/2, waiting for cpus=1 mem=64 "
                    r"\(\d+ s\)$", progress[-1][1])
    error = [index for index, (_, line) in enumerate(lines) if "tfrun: error:" in line]
    assert error and all(not line.startswith("tfrun: placed")
                         for _, line in lines[error[0]:])   # stopped at the end
    assert "the cluster needs cpus=2 mem=128 gpus=0 in total; offers held at most cpus=1 " \
           in lines[error[0]][1]
    data = load_run_json(run_dir)
    assert data["outcome"]["status"] == "aborted"
    assert data["outcome"]["message"].startswith("the cluster was not complete after 3 s")
    assert data["timings"]["first_offer"] and data["timings"]["all_registered"] is None
    assert sorted(len(task["attempts"]) for task in data["tasks"]) == [0, 1]
    assert_every_attempt_ended(data, 1)
    assert_no_task_processes()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_interrupted_run_ends_every_attempt_and_records_130(tmp_path, signum):
    run_dir = tmp_path / "run"
    with start_tfrun("-w", "2", "-s", "1", *TINY, "--run-dir", str(run_dir), "--",
                     "sleep 600", env=dumping_env()) as proc:
        wait_for_line(proc.stderr, "cluster ready", timeout=60)
        proc.send_signal(signum)
        exited_or_dumped(proc, 30)   # (a hang shows its threads: CI saw one once)
        assert proc.returncode == 130
    assert_stopped_as_interrupted(run_dir)


def assert_stopped_as_interrupted(run_dir):
    """The run of ``run_dir`` recorded as interrupted (130), every attempt
    ended, every task stopped by tfrun, none left running."""
    data = load_run_json(run_dir)
    assert data["outcome"]["status"] == "interrupted"
    assert_every_attempt_ended(data, 130)
    # Stopped by tfrun (told so by their exit frames), or killed by Mesos: not
    # finished; nor killed by a signal meant for tfrun (a hang-up's).
    assert {task["state"] for task in data["tasks"]} == {"TASK_KILLED"}, data["tasks"]
    assert_no_task_processes()


def run_on_a_terminal(*args, timeout=60):
    """tfrun with stderr on a pseudo-terminal; returns (exit code, what stderr got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(tfrun_argv(*args), cwd=REPO, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=slave,
                            env=dict(os.environ, MESOS_MASTER=""))
    os.close(slave)
    output, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 1)[0]:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 4096)
            except OSError:   # EIO: tfrun closed the terminal
                break
            if not data:
                break
            output += data
        return proc.wait(30), output.decode()
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.waits
def test_terminal_status_line_is_redrawn_then_cleared_and_quiet_turns_it_off(one_cpu_master):
    args = ("-m", one_cpu_master, "-w", "1", "-s", "1", *ONE_CPU_EACH, "--launch-timeout", "2",
            "--", "true")
    code, output = run_on_a_terminal(*args)
    assert code == 1
    assert re.search(r"\rtfrun: placed 1/2, registered [01]/2, waiting for cpus=1 mem=64 "
                     r"\(\d s\)\x1b\[K", output), output
    assert "\x1b[K\r\x1b[Ktfrun: error: the cluster was not complete" in output
    code, output = run_on_a_terminal("--quiet", *args)
    assert code == 1 and "placed" not in output and "\r" not in output.replace("\r\n", "")
    assert "tfrun: error: the cluster was not complete" in output


@pytest.mark.waits
def test_connecting_line_without_a_terminal_and_quiet():
    env = {"TFMESOS_PROGRESS_INTERVAL": "0.5"}
    args = ("-m", "127.0.0.1:1", "--connect-timeout", "2", "--", "true")
    result = run_tfrun(*args, env=env, timeout=60)
    assert result.returncode == 1
    assert re.search(r"^tfrun: connecting to 127\.0\.0\.1:1 \(\d s\)$", result.stderr, re.M)
    quiet = run_tfrun("-q", *args, env=env, timeout=60)
    assert quiet.returncode == 1 and "connecting to" not in quiet.stderr


def test_quiet_leaves_the_commands_output_and_nothing_of_a_run_that_went_well(runs_dir):
    result = run_tfrun("-q", "-w", "1", "-s", "0", *TINY, "--", "echo hi from {job_name}")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[worker:0] hi from worker\n"
    for said in ("cluster ready", "resources asked and used", "metrics:"):
        assert said not in result.stderr, result.stderr
    [run_dir] = list(runs_dir.iterdir())          # all of it is in the record
    assert (run_dir / "run.json").exists()
    failed = run_tfrun("-q", "-w", "1", "-s", "0", *TINY, "--", "echo broke >&2; exit 3")
    assert failed.returncode == 3
    assert "tfrun: task worker:0 exited with code 3" in failed.stderr, failed.stderr


def test_logs_selects_what_is_shown_while_every_task_is_recorded(runs_dir):
    cmd = "echo I am {job_name}:{task_index}; if [ {job_name} = ps ]; then sleep 600; " \
          "else sleep 1; fi"
    result = run_tfrun("-w", "2", "-s", "1", *TINY, "--logs", "worker:1", "--logs", "ps",
                       "--", cmd)
    assert result.returncode == 0, result.stderr
    assert "[worker:1] I am worker:1" in result.stdout and "[ps:0] I am ps:0" in result.stdout
    assert "worker:0" not in result.stdout
    [run_dir] = list(runs_dir.iterdir())
    assert (run_dir / "worker.0.stdout").read_text() == "I am worker:0\n"
    result = run_tfrun("-w", "1", "-s", "0", *TINY, "--logs", "none", "--", cmd)
    assert result.returncode == 0 and result.stdout == ""


@pytest.mark.parametrize("option, error", [
    (["--logs", "chief"], "--logs chief: no job 'chief' in this run; jobs: ps, worker"),
    (["--logs", "worker:5"], "--logs worker:5: worker has no task 5"),
    (["--logs", "worker:x"], "--logs worker:x: use JOB or JOB:INDEX,... like worker:0,2"),
    (["--logs", "ps", "--worker-logs", "1"], "--logs and --worker-logs both choose"),
])
def test_logs_usage_errors(option, error):
    result = run_tfrun("-w", "2", "-s", "1", *option, "--", "true", timeout=30)
    assert result.returncode == 2 and error in result.stderr and "Traceback" not in result.stderr


def test_a_run_directory_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    result = run_tfrun("--run-dir", str(tmp_path / "file" / "run"), "--", "true", timeout=30)
    # a usage error, found before anything starts (tests/test_bad_input.py has its row)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        "tfrun: error: --run-dir %s: cannot create it (Not a directory)"
        % (tmp_path / "file" / "run"))


def test_a_run_refused_before_anything_ran_leaves_no_run_dir_it_was_given_to_make(tmp_path):
    # tfrun made a new --run-dir as it checked it could, then took it for one
    # that was there: a --ship refused for its secrets left it behind.
    shipped = tmp_path / "project"
    shipped.mkdir()
    (shipped / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    run_dir = tmp_path / "runs" / "r1"
    result = run_tfrun("-w", "1", "-s", "0", "--ship", str(shipped), "--run-dir", str(run_dir),
                       "--", "true", timeout=60)
    assert result.returncode == 1 and "likely secrets" in result.stderr, result.stderr
    assert not run_dir.exists()
    # A --run-dir that was there stays, as it was.
    run_dir.mkdir()
    result = run_tfrun("-w", "1", "-s", "0", "--ship", str(shipped), "--run-dir", str(run_dir),
                       "--", "true", timeout=60)
    assert result.returncode == 1 and os.listdir(run_dir) == []


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 64 KiB tmpfs (root: mount), unmounted after."""
    with mounted_tmpfs(tmp_path / "mounted", "size=64k,mode=0700") as place:
        yield place


@pytest.fixture
def full_disk(small_tmpfs):
    """A 64 KiB tmpfs with no byte left."""
    descriptor = os.open(small_tmpfs / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(descriptor, b"\0" * 4096):
            pass
    except OSError:   # ENOSPC
        pass
    finally:
        os.close(descriptor)
    return small_tmpfs


def test_a_full_disk_under_the_run_directory_is_one_warning_and_the_run_goes_on(full_disk):
    runs = full_disk / "runs"
    result = run_tfrun("-w", "2", "-s", "0", *TINY, "--", "echo {job_name}:{task_index} out",
                       env={"TFMESOS_RUNS_DIR": str(runs)}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["[worker:0] worker:0 out",
                                                  "[worker:1] worker:1 out"]
    [run_dir] = list(runs.iterdir())
    warned = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warned) == 2, result.stderr
    # ... and at the end, that run.json does not hold the run's end (it said
    # "running" with nothing to tell tfmesos runs otherwise).
    assert warned == ["tfrun: warning: cannot write %s in %s: No space left on device; the run "
                      "goes on, but its record and task logs there may stay incomplete"
                      % (warned[0].split()[4], run_dir),
                      "tfrun: warning: run.json in %s could not be written (No space left on "
                      "device): it does not hold this run's end" % run_dir], result.stderr
    assert result.stderr.splitlines()[-1] == warned[1]
    assert "Traceback" not in result.stderr
    assert ".run.json.tmp" not in os.listdir(run_dir)   # no half-written record left
    assert_no_task_processes()


def test_output_redirected_to_a_full_disk_is_one_warning_and_the_run_goes_on(full_disk,
                                                                             runs_dir):
    many = "for i in $(seq 1 2000); do echo line $i of a task that writes a lot; done"
    with open(full_disk / "out.txt", "wb", buffering=0) as out:
        result = subprocess.run(tfrun_argv("-w", "1", "-s", "0", *TINY, "--", many),
                                stdout=out, stderr=subprocess.PIPE, text=True, timeout=60,
                                cwd=REPO, env=dict(os.environ, MESOS_MASTER=""))
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warned == ["tfrun: warning: cannot write the tasks' output to stdout (No space left "
                      "on device): the run goes on; their output is kept in its run directory"]
    [run_dir] = list(runs_dir.iterdir())
    assert (run_dir / "worker.0.stdout").read_text().splitlines()[-1] == \
        "line 2000 of a task that writes a lot"   # nothing of it lost
    assert load_run_json(run_dir)["outcome"]["status"] == "succeeded"


def test_output_whose_only_write_fails_is_warned_of_too(runs_dir):
    # tfrun writes through its console: a write refused is raised by the
    # next one, and the refusal of the last (here, the only) one was said by
    # nobody: the output was lost without a word, exit 0.
    with open("/dev/full", "w") as out:
        result = subprocess.run(tfrun_argv("-q", "-w", "1", "-s", "0", *TINY, "--", "echo",
                                           "lost"),
                                stdout=out, stderr=subprocess.PIPE, text=True, timeout=60,
                                cwd=REPO, env=dict(os.environ, MESOS_MASTER=""))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "tfrun: warning: cannot write the tasks' output to stdout (No space left on device): "
        "the run goes on; their output is kept in its run directory"], result.stderr


@pytest.mark.parametrize("closed", ["1", "2"])
@pytest.mark.parametrize("command", [["tfmesos.cli.tfrun", "-w", "1", "-s", "0", "--", "echo", "hi"],
                                     ["tfmesos.cli.main", "runs"]])
def test_a_standard_stream_closed_at_the_start_is_no_traceback(closed, command, runs_dir):
    # sh closes descriptor 1 (tfrun ... >&-) or 2, then runs the command there.
    result = subprocess.run(["sh", "-c", 'exec %s>&-; exec "$@"' % closed, "sh",
                             sys.executable, "-m", *command], capture_output=True, text=True,
                            timeout=60, cwd=REPO, env=dict(os.environ, MESOS_MASTER=""))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert ("[worker:0] hi" in result.stdout) == (command[0].endswith("tfrun") and closed == "2")


def test_a_terminal_that_closes_stops_the_run_as_ctrl_c_does(tmp_path):
    # The ssh session gone, the terminal window closed: the kernel hangs up
    # (SIGHUP to the terminal's session), and writes to it fail (EIO).
    run_dir = tmp_path / "run"
    code = hung_up_once_ready(tfrun_argv("-w", "2", "-s", "1", *TINY, "--run-dir",
                                         str(run_dir), "--", "sleep 600"),
                              env=dict(os.environ, MESOS_MASTER=""))
    assert code == 130
    assert_stopped_as_interrupted(run_dir)   # the hang-up reached tfrun, not its tasks


@pytest.mark.waits
def test_under_nohup_a_hangup_leaves_the_run_alone(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(["nohup"] + tfrun_argv("-w", "1", "-s", "0", *TINY, "--run-dir",
                                                   str(run_dir), "--", "sleep 600"),
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MESOS_MASTER=""))
    try:
        wait_for_line(proc.stderr, "cluster ready", timeout=60)
        proc.send_signal(signal.SIGHUP)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(2)   # what nohup asked for: the run goes on
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            terminated(proc, 30)
    assert proc.returncode == 130
    assert load_run_json(run_dir)["outcome"]["status"] == "interrupted"
    assert_no_task_processes()


@pytest.mark.parametrize("kept", [True, False], ids=["--failover's run dir", "the temp dir"])
def test_a_full_disk_where_the_run_packs_what_it_ships_is_one_line(full_disk, tmp_path,
                                                                   monkeypatch, kept):
    # `tfrun --failover --ship` with its run directory on a full disk, or
    # any --ship with a full $TMPDIR, ended in a traceback (OSError ENOSPC
    # from the packing; found by a review helper).
    import tempfile

    from tfmesos.ship.bundle import ShipSpec
    from tfmesos.ship.ship_errors import ShipError
    from tfmesos.ship.shipping import Shipment
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('hi')\n" * 20000)
    if not kept:
        monkeypatch.setattr(tempfile, "tempdir", str(full_disk))
    with pytest.raises(ShipError) as caught:
        Shipment(ShipSpec(str(project)), bind_host="127.0.0.1", say=lambda text: None,
                 keep_in=str(full_disk / "run" / "shipped") if kept else None)
    where = str(full_disk / "run" / "shipped") if kept else str(full_disk)
    assert str(caught.value).startswith("cannot write what the run ships in %s" % where)
    assert "No space left on device" in str(caught.value)
    assert "free space there" in str(caught.value)
    assert sorted(os.listdir(full_disk)) == ["filler"] + (["run"] if kept else [])


HOLD_A_RUN_DIR = """
import sys
from tfmesos.core.jobs import Job
from tfmesos.core.slots import make_slots
from tfmesos.record.run_record import RunRecord
from tfmesos.record.schema import RunFile
record = RunRecord(sys.argv[1], RunFile(run_id="first000", mode="replica"),
                   make_slots([Job("worker", 1)]), False)
print("holding", flush=True)
sys.stdin.read()
"""


def test_a_run_directory_another_run_holds_is_refused_and_not_pruned(tmp_path):
    # Two tfruns started at once with one --run-dir each found no record
    # there yet and both ran in it: logs mixed, one record lost; and a
    # prune could remove it under a run that had just begun (found by a
    # review helper).
    from tfmesos.core.jobs import Job
    from tfmesos.core.slots import make_slots
    from tfmesos.exceptions import TFMesosError
    from tfmesos.record import pruning
    from tfmesos.record.run_record import RunRecord
    from tfmesos.record.schema import RunFile
    shared = tmp_path / "runs" / "shared"
    shared.parent.mkdir()
    with subprocess.Popen([sys.executable, "-c", HOLD_A_RUN_DIR, str(shared)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as first:
        try:
            assert first.stdout.readline() == "holding\n"
            assert not (shared / "run.json").exists()   # as before its first save
            with pytest.raises(TFMesosError) as caught:
                RunRecord(str(shared), RunFile(run_id="second00", mode="replica"),
                          make_slots([Job("worker", 1)]), False)
            assert str(caught.value) == (
                "the run directory %s is another run's, still starting or running: give this "
                "run a directory of its own (tfrun --run-dir DIR, cluster(run_dir=...))"
                % shared)
            write_ended_run(shared)
            removed, running, left = pruning.prune(str(shared.parent), 0)
            assert (removed, [run.directory for run in running], left) == ([], [str(shared)],
                                                                            [])
        finally:
            first.stdin.close()
            first.wait(timeout=30)
    # Its process ended: the directory is anyone's again, and this process'
    # own later run takes it after its first one finished.
    record = RunRecord(str(shared), RunFile(run_id="second00", mode="replica"),
                       make_slots([Job("worker", 1)]), False)
    record.finish()
    again = RunRecord(str(shared), RunFile(run_id="third000", mode="replica"),
                      make_slots([Job("worker", 1)]), False)
    again.finish()


def write_ended_run(directory):
    from run_dirs import write_run
    made = write_run(directory.parent, "ended000", name="x")
    os.replace(os.path.join(made, "run.json"), directory / "run.json")
    os.rmdir(made)


def test_a_run_directory_of_ones_own_one_cannot_write_is_refused():
    # Taken as it was: the run went on with two warnings and no record, no
    # logs (found by a review helper, as a second user).
    import shutil
    import tempfile

    from local_users import as_user, nobody

    from tfmesos.record.run_dirs import make_run_dir
    user = nobody(needs_root="acting as nobody needs root")
    base = tempfile.mkdtemp()
    try:
        os.chmod(base, 0o755)
        mine = os.path.join(base, "runs")
        os.mkdir(mine, 0o700)
        os.mkdir(os.path.join(mine, "rodir"), 0o500)
        for path in (mine, os.path.join(mine, "rodir")):
            os.chown(path, user.pw_uid, user.pw_gid)
        assert as_user(user, lambda: str(make_run_dir(os.path.join(mine, "rodir")))) == (
            "raised PermissionError(13, 'Permission denied')")
        assert as_user(user, lambda: str(make_run_dir(os.path.join(mine, "fresh")))) == "True"
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("warm", ["1", "0"])
def test_tfmesos_own_task_variables_exported_by_the_user_do_not_reach_the_tasks(warm):
    # The embedded master's tasks get tfrun's environment: an exported
    # TFMESOS_FAILOVER_TIMEOUT=abc failed every attempt ("malformed tfmesos
    # task environment"), and one that parsed changed what the tasks did
    # (found by a review helper). A Mesos agent's never see it.
    result = run_tfrun("-q", "-w", "1", "-s", "0", *TINY, "--",
                       "echo timeout=$TFMESOS_FAILOVER_TIMEOUT tasks=$TFMESOS_FAILOVER_TASKS",
                       env={"TFMESOS_FAILOVER_TIMEOUT": "abc", "TFMESOS_FAILOVER_TASKS": "x",
                            "TFMESOS_WARM_TASKS": warm}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[worker:0] timeout= tasks=\n"


def test_a_refused_claim_lets_the_directory_go(tmp_path):
    # Refused ("holds run ..., still running"), the claim kept its lock for
    # the life of the process: every other tfrun was refused there, and
    # prune skipped it (found by a review helper).
    from run_dirs import write_run

    from tfmesos.core.jobs import Job
    from tfmesos.core.slots import make_slots
    from tfmesos.exceptions import TFMesosError
    from tfmesos.record.run_record import RunRecord
    from tfmesos.record.schema import RunFile, Scheduler
    made = write_run(tmp_path, "aaaaaaaa", status="running", exit_code=None,
                     scheduler=Scheduler(host="otherhost", pid=1))
    with pytest.raises(TFMesosError, match="still running"):
        RunRecord(made, RunFile(run_id="bbbbbbbb", mode="replica"),
                  make_slots([Job("worker", 1)]), False)
    probe = subprocess.run([sys.executable, "-c", "import sys; from tfmesos.record.run_dir_lock "
                            "import in_use; print(in_use(sys.argv[1]))", made],
                           capture_output=True, text=True, timeout=60)
    assert probe.stdout == "False\n", probe.stderr


def test_a_run_directory_on_a_read_only_mount_is_said_so(small_tmpfs):
    # Worded "Permission denied" (EACCES), which sends one to chmod
    # (found by a review helper reading the change).
    from tfmesos.record.run_dirs import make_run_dir
    (small_tmpfs / "runs" / "run").mkdir(parents=True, mode=0o700)
    os.chmod(small_tmpfs / "runs", 0o700)
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    with pytest.raises(OSError) as caught:
        make_run_dir(str(small_tmpfs / "runs" / "run"))
    assert caught.value.strerror == "Read-only file system"
