"""tfrun end to end on the embedded local master, as a user runs it."""

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest
from tfrun_helpers import (
    HELLO,
    HELLO_ARGS,
    REPO,
    SMALL,
    assert_no_task_processes,
    dumping_env,
    exited_or_dumped,
    finished_record,
    free_port,
    marked_tasks,
    reaped,
    run_tfrun,
    start_tfrun,
    terminated,
    tfrun_argv,
    wait_for_line,
)
from waiting import wait_until


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    """Run directories go to the test's temporary directory, not the checkout."""
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "tfmesos-runs"))


def test_replica_run_substitutes_placeholders_and_streams_worker_output():
    result = run_tfrun("-w", "2", "-s", "1", *SMALL, "--", "python", HELLO, *HELLO_ARGS)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "[worker:0] hello from worker:0" in out
    assert "[worker:1] hello from worker:1" in out
    assert out.count("placeholders and TF_CONFIG agree") == 2
    assert "[ps:0]" not in out  # only the workers' logs are forwarded by default
    assert "cluster ready" in result.stderr
    assert_no_task_processes()


def test_worker_logs_selects_workers():
    result = run_tfrun("-w", "2", "-s", "0", *SMALL, "--worker-logs", "1", "--",
                       "echo", "I am {job_name}:{task_index}")
    assert result.returncode == 0, result.stderr
    assert "[worker:1] I am worker:1" in result.stdout
    assert "worker:0" not in result.stdout


def test_failing_worker_gives_its_exit_code_and_kills_everything():
    cmd = "if [ {task_index} = 1 ]; then echo failing >&2; exit 3; fi; sleep 600"
    result = run_tfrun("-w", "2", "-s", "1", *SMALL, "--", cmd, timeout=90)
    assert result.returncode == 3, result.stderr
    assert "worker:1 exited with code 3" in result.stderr
    assert "[worker:1] failing" in result.stderr
    assert_no_task_processes()


def flaky_python(tmp_path, failures):
    """An interpreter that fails its first ``failures`` runs."""
    counter = tmp_path / "runs"
    script = tmp_path / "flaky-python"
    script.write_text(
        "#!/bin/sh\n"
        "n=$(cat %s 2>/dev/null || echo 0); echo $((n + 1)) > %s\n"
        "if [ \"$n\" -lt %d ]; then echo 'cannot start' >&2; exit 127; fi\n"
        "exec %s \"$@\"\n" % (counter, counter, failures, os.sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, counter


def test_task_that_fails_to_start_is_relaunched(tmp_path):
    python, counter = flaky_python(tmp_path, failures=1)
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "-v", "--python", str(python), "--",
                       "echo ok from {job_name}")
    assert result.returncode == 0, result.stderr
    assert "[worker:0] ok from worker" in result.stdout
    assert "relaunching (attempt 2 of 3)" in result.stderr
    assert int(counter.read_text()) == 2


def test_task_that_always_fails_aborts_within_the_retry_budget():
    started = time.monotonic()
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "--python", "/bin/false", "--", "true",
                       timeout=60)
    assert result.returncode == 1
    assert "worker:0 failed 3 times before the cluster was complete; last: TASK_FAILED: " \
           "Command exited with status 1" in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 45


def test_ctrl_c_kills_every_task_and_exits_130():
    with start_tfrun("-w", "2", "-s", "1", *SMALL, "--", "sleep 600",
                     env=dumping_env()) as proc:
        wait_for_line(proc.stderr, "cluster ready", timeout=60)
        proc.send_signal(signal.SIGINT)
        exited_or_dumped(proc, 30)
        assert proc.returncode == 130
        assert "interrupted" in proc.stderr.read()
    assert_no_task_processes()


SAVES_ON_SIGTERM = """
import os, signal, sys, time
def stop(signum, frame):
    raise SystemExit(143)
signal.signal(signal.SIGTERM, stop)
try:
    print("training", flush=True)
    time.sleep(600)
finally:
    print("saving a checkpoint", flush=True)
    time.sleep(2)
    with open(sys.argv[1], "w") as handle:
        handle.write("saved")
    print("checkpoint saved", flush=True)
"""


@pytest.mark.parametrize("how", ["", "exec "], ids=["sh -c", "exec"])
@pytest.mark.waits
def test_ctrl_c_leaves_a_command_its_grace_to_save_a_checkpoint(tmp_path, how):
    # The SIGTERM's 5 s grace, cut short: without exec, dash's sh -c ended of
    # the SIGTERM and the task entry SIGKILLed the rest of its group at once;
    # with it, the teardown SIGTERMed it again 1.5 s in (SystemExit inside
    # the save) and SIGKILLed it 3 s later.
    script, saved, run_dir = tmp_path / "train.py", tmp_path / "saved", tmp_path / "run"
    script.write_text(SAVES_ON_SIGTERM)
    with start_tfrun("-w", "1", "-s", "0", *SMALL, "--run-dir", str(run_dir), "--",
                     "%s%s %s %s" % (how, sys.executable, script, saved),
                     env=dumping_env()) as proc:
        wait_until(lambda: "training" in (run_dir / "worker.0.stdout").read_text()
                   if (run_dir / "worker.0.stdout").exists() else False, 60,
                   message="the command never started")
        proc.send_signal(signal.SIGINT)
        exited_or_dumped(proc, 60)
        assert proc.returncode == 130
    assert saved.read_text() == "saved"
    assert "checkpoint saved" in (run_dir / "worker.0.stdout").read_text()
    assert_no_task_processes()


RESTART_SAVES_ON_SIGTERM = """
import os, signal, sys, time
index, saved, here = int(sys.argv[1]), sys.argv[2], sys.argv[3]
training, failed = os.path.join(here, "training"), os.path.join(here, "failed")
if os.path.exists(failed):            # the attempt after the restart
    sys.exit(0)
if index == 1:                        # fails once worker 0 trains: a whole restart
    while not os.path.exists(training):
        time.sleep(0.05)
    open(failed, "w").close()
    sys.exit(3)
def stop(signum, frame):
    raise SystemExit(143)
signal.signal(signal.SIGTERM, stop)
try:
    open(training, "w").close()
    time.sleep(600)
finally:
    time.sleep(3.5)                   # past Mesos' default 3 s, within the 5 s grace
    with open(saved, "w") as handle:
        handle.write("saved")
"""


@pytest.mark.waits
def test_a_whole_restart_leaves_a_command_its_grace_to_save_a_checkpoint(tmp_path):
    # The stop and a Mesos KILL went together: two SIGTERMs (a SystemExit
    # inside the save), and the KILL's SIGKILL 3 s on.
    script, saved = tmp_path / "train.py", tmp_path / "saved"
    script.write_text(RESTART_SAVES_ON_SIGTERM)
    result = run_tfrun("-w", "2", "-s", "0", *SMALL, "--max-restarts", "1",
                       "--restart-on", "failure", "--restart-backoff", "0", "--",
                       "exec %s %s {task_index} %s %s" % (sys.executable, script, saved, tmp_path),
                       timeout=120)
    assert result.returncode == 0, result.stderr
    assert "restarting the cluster (restart 1 of 1)" in result.stderr
    assert saved.read_text() == "saved"
    assert_no_task_processes()


def test_sigterm_behaves_like_ctrl_c(tmp_path):
    run_dir = tmp_path / "run"
    with start_tfrun("-w", "1", "-s", "0", *SMALL, "--run-dir", str(run_dir), "--",
                     "sleep 600", env=dumping_env()) as proc:
        wait_for_line(proc.stderr, "cluster ready", timeout=60)
        proc.send_signal(signal.SIGTERM)
        exited_or_dumped(proc, 30)
        assert proc.returncode == 130
        assert "tfrun: logs and run record: %s" % run_dir in proc.stderr.read()
    assert_no_task_processes()
    with open(run_dir / "run.json") as handle:
        assert json.load(handle)["outcome"]["status"] == "interrupted"


@pytest.mark.waits
def test_unreachable_master_is_a_clear_error_in_bounded_time():
    started = time.monotonic()
    result = run_tfrun("-m", "127.0.0.1:1", "--connect-timeout", "2", "--", "true", timeout=60)
    assert result.returncode == 1
    assert "could not subscribe to the Mesos master 127.0.0.1:1" in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 30


def on_a_small_master(*options):
    """tfrun ``options`` against a ``tfmesos local-master`` whose one agent
    offers 2 cpus and 512 MB: its CompletedProcess."""
    port = free_port()
    master = subprocess.Popen(["tfmesos", "local-master", "--port", str(port), "--cpus", "2",
                               "--mem", "512", *marked_tasks()], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_line(master.stdout, "listening on", timeout=30)
        return run_tfrun("-m", "127.0.0.1:%d" % port, *options, timeout=60)
    finally:
        master.terminate()
        master.wait(30)


@pytest.mark.waits
def test_nothing_fits_times_out_naming_what_is_missing():
    result = on_a_small_master("-w", "1", "-s", "0", "-Cw", "0.1", "-Mw", "1024",
                               "--launch-timeout", "3", "--", "true")
    assert result.returncode == 1
    assert "the cluster was not complete after 3 s; missing: worker:0 (no offer fits " \
           "cpus=0.1 mem=1024 gpus=0); the cluster needs cpus=0.1 mem=1024 gpus=0 in total; " \
           "offers held at most cpus=2 mem=512 gpus=0; largest offer seen: cpus=2 mem=512 " \
           "gpus=0" in result.stderr


@pytest.mark.waits
def test_a_launch_timeout_of_200_tasks_names_them_in_one_short_line():
    """Each missing task was named with its reason: a line of ~10 kB at 200
    tasks. They are grouped by reason, as ranges (core.task_names)."""
    result = on_a_small_master("-w", "199", "-s", "1", "-Cw", "0.5", "-Cs", "0.5", "-Mw", "32",
                               "-Ms", "32", "--launch-timeout", "3", "--", "true")
    assert result.returncode == 1
    error = [line for line in result.stderr.splitlines() if line.startswith("tfrun: error:")]
    assert len(error) == 1 and len(error[0]) < 400, error
    # Four tasks of 0.5 cpus fit the agent's 2: ps:0 and worker:0-2 (on a loaded
    # machine those may not have registered yet either: a group of their own).
    assert "worker:3-198 (no offer fits cpus=0.5 mem=32 gpus=0); the cluster needs cpus=100 " \
           "mem=6400 gpus=0 in total" in error[0]


@pytest.mark.parametrize("args, error", [
    (["-Mw", "100000000"], "worker tasks ask for mem=100000000 MB (-Mw or --job "
     "worker:COUNT:CPUS:MEM) but this machine has "),
    (["-Gw", "64"], "the cluster asks for 64 GPUs but this machine has "),
    # More cpus than the machine has (the agent offers no more than its cores to a task).
    (["-Cw", str(32 * (os.cpu_count() or 1))], "worker tasks ask for cpus=%d (-Cw or --job "
     "worker:COUNT:CPUS) but this machine has %d cpus for the embedded master"
     % (32 * (os.cpu_count() or 1), os.cpu_count() or 1)),
    (["--job", "ps:1:%d" % (32 * (os.cpu_count() or 1))], "ps tasks ask for cpus="),
])
def test_embedded_master_refuses_what_this_machine_cannot_hold_at_once(tmp_path, args, error):
    """A usage error: at once, before a run directory (or anything) is made."""
    runs = tmp_path / "runs"
    result = run_tfrun("-w", "1", "-s", "0", *args, "--", "true", timeout=60,
                       env={"TFMESOS_RUNS_DIR": str(runs)})
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 2, result.stderr
    assert lines[1].startswith("tfrun: error: " + error), result.stderr
    assert "run on a Mesos cluster (-m)" in lines[1]
    assert not runs.exists()


def test_usage_errors_exit_2(tmp_path):
    runs = tmp_path / "runs"
    for args in ([], ["-w", "1"], ["-w", "x", "--", "true"], ["-V", "rel:/x", "--", "true"],
                 ["--", "echo {nope}"], ["-w", "0", "--", "true"], ["-r", "ml/", "--", "true"],
                 ["-C", "DOCKER", "-Gw", "1", "-I", "img", "--", "true"]):
        result = run_tfrun(*args, timeout=30, env={"TFMESOS_RUNS_DIR": str(runs)})
        assert result.returncode == 2, (args, result.stderr)
        assert "usage:" in result.stderr and "Traceback" not in result.stderr
        assert not runs.exists(), args
    assert "GPUs need the Mesos containerizer: use -C MESOS" in result.stderr


def test_replica_mode_never_imports_tensorflow(tmp_path):
    poisoned = tmp_path / "tensorflow"
    poisoned.mkdir()
    (poisoned / "__init__.py").write_text("raise RuntimeError('tensorflow was imported')\n")
    result = run_tfrun("-w", "2", "-s", "1", *SMALL, "--", "echo {job_name} ok",
                       env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "[worker:1] worker ok" in result.stdout
    assert "tensorflow was imported" not in result.stderr


def test_tensorflow_is_quiet_unless_verbose():
    show = ["-w", "1", "-s", "0", *SMALL, "--", 'echo "level=[$TF_CPP_MIN_LOG_LEVEL]"']
    assert "[worker:0] level=[2]" in run_tfrun(*show).stdout
    assert "[worker:0] level=[]" in run_tfrun("-v", *show).stdout


def test_more_tasks_than_the_old_port_window_run_on_the_embedded_master(tmp_path):
    """150 tasks (the embedded agent's window held 101 ports; an ACCEPT of
    that many launch threads at once starved the master past the call
    timeout): every one registers, runs and finishes, and nothing is left."""
    result = run_tfrun("-q", "-w", "149", "-s", "1", "-Cw", "0.01", "-Cs", "0.01", "-Mw", "64",
                       "-Ms", "64", "--launch-timeout", "300", "--", "true", timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    [run_dir] = (tmp_path / "tfmesos-runs").iterdir()
    record = json.loads((run_dir / "run.json").read_text())
    assert len(record["tasks"]) == 150
    assert {task["state"] for task in record["tasks"]} == {"TASK_FINISHED"}
    assert_no_task_processes()


def test_the_usage_table_of_30_tasks_reads_the_run_s_record_and_counts_what_it_leaves_out():
    """The end-of-run table (record.usage_table) past MAX_ROWS tasks, from
    the record a real run wrote: each job's extremes, and how many it left
    out."""
    result = run_tfrun("-w", "29", "-s", "1", "-Cw", "0.01", "-Cs", "0.01", "-Mw", "64",
                       "-Ms", "64", "--", "true", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    head = lines.index("tfrun: resources asked and used (samples in run.json):")
    rows = [line.split()[0] for line in lines[head + 2:] if line.startswith("  ")]
    left_out = rows.pop()
    assert left_out == "(%d" % (30 - len(rows)), lines[head:]
    assert {row.split(":")[0] for row in rows} == {"ps", "worker"} and 2 <= len(rows) <= 4
    assert_no_task_processes()


def test_a_run_of_more_tasks_than_the_soft_open_files_limit_allows_raises_it():
    # 60 tasks took over 300 descriptors in tfrun (two log files each, held
    # open; the rendezvous' connections; the embedded agent's): beyond a soft
    # limit of 160, as beyond the common 1,024 at 200 tasks. The hard limit
    # lets tfrun raise it.
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip("the hard open-files limit is %d here" % hard)
    argv = ["sh", "-c", 'ulimit -Sn 160 && exec "$@"', "sh"] + tfrun_argv(
        "-q", "-w", "59", "-s", "1", "-Cw", "0.01", "-Cs", "0.01", "-Mw", "64", "-Ms", "64",
        "--", "true")
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, MESOS_MASTER=""))
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            terminated(proc, 30)
    assert proc.returncode == 0, err[-3000:]
    assert "Too many open files" not in err and "Traceback" not in err, err[-3000:]
    assert_no_task_processes()


def test_more_tasks_than_the_hard_open_files_limit_allows_is_a_usage_error():
    # ulimit -n 64 with 60 tasks: a warning, then tracebacks of the agent's
    # threads (EMFILE in oom_watch) and of the reactions; ulimit -n 128 with
    # 40 tasks: "cannot write run.json", the run going on without its record.
    argv = ["sh", "-c", 'ulimit -n 64 && exec "$@"', "sh"] + tfrun_argv(
        "-q", "-w", "60", "-s", "0", "-Cw", "0.01", "-Mw", "64", "--", "true")
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, MESOS_MASTER=""))
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == (
        "tfrun: error: 60 tasks need at least 212 open files at once, and this process may "
        "open 64 at most (ulimit -Hn): raise the hard limit (limits.conf, LimitNOFILE=), or "
        "run at most 10 tasks (tfrun --help explains every option)"), done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert_no_task_processes()


def bindable(port):
    with socket.socket() as probe:
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


@pytest.mark.waits
def test_a_port_another_program_listens_on_is_never_given_to_a_task():
    # The embedded agent's whole window: its first port held by a server that
    # is none of this run's (another run's task, a service of this machine).
    low = next((low for low in range(19899, 10000, -101)
                if all(bindable(port) for port in range(low, low + 101))), None)
    if low is None:
        pytest.skip("no window of 101 free ports here")
    with socket.socket() as server:
        server.bind(("", low))
        server.listen()
        binds = ("import json, os, socket; "
                 "cluster = json.loads(os.environ['TF_CONFIG'])['cluster']; "
                 "port = int(cluster['worker'][0].rsplit(':', 1)[1]); "
                 "socket.socket().bind(('', port)); print('bound', port)")
        result = run_tfrun("-w", "1", "-s", "0", "--", "python3", "-c", binds,
                           env={"TFMESOS_LOCAL_PORTS": "%d-%d" % (low, low + 100)}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[worker:0] bound %d\n" % (low + 1)


def test_output_the_terminal_cannot_encode_is_escaped_not_the_end_of_the_run(tmp_path):
    # A terminal whose locale is not UTF-8 (here: PYTHONIOENCODING=ascii), a
    # task that prints UTF-8: tfrun and tfmesos logs write it escaped.
    ascii_only = {"PYTHONIOENCODING": "ascii"}
    result = run_tfrun("-w", "1", "-s", "0", "--", "printf", "h\u00e9llo \u2713\\n",
                       env=ascii_only, timeout=60)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout == "[worker:0] h\\xe9llo \\u2713\n"
    [run_dir] = (tmp_path / "tfmesos-runs").iterdir()
    logs = subprocess.run([sys.executable, "-m", "tfmesos.cli.main", "logs",
                           run_dir.name.rsplit("-", 1)[1]], capture_output=True, text=True,
                          timeout=60, cwd=REPO, env=dict(os.environ, **ascii_only))
    assert (logs.returncode, logs.stdout, logs.stderr) == (0, "h\\xe9llo \\u2713\n", "")


def sleeping(seconds):
    """Whether a ``sleep SECONDS`` runs on this machine."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                if handle.read() == b"sleep\0" + seconds + b"\0":
                    return True
        except OSError:
            continue   # ended since it was listed
    return False


def test_a_failed_task_stops_the_run_while_nobody_reads_tfruns_output(tmp_path):
    # worker:0 writes 2 MB (far more than a pipe holds) and waits; worker:1
    # fails then. Before the console, tfrun waited in print for a reader
    # and took the failure in only once its output was read: here, never.
    runs = tmp_path / "runs"
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_RUNS_DIR=str(runs))
    flag = tmp_path / "written"   # worker:0 wrote its 2 MB: worker:1 fails then
    script = ("if [ {task_index} = 0 ]; then yes | head -c 2000000; touch %s; sleep 613; "
              "else while [ ! -e %s ]; do sleep 0.1; done; exit 3; fi" % (flag, flag))
    proc = subprocess.Popen(tfrun_argv("-q", "-w", "2", "-s", "0", "-Cw", "0.1", "-Mw", "64",
                                       "--", "sh", "-c", script),
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        def finished():
            found = list(runs.iterdir()) if runs.exists() else []
            return finished_record(found[0]) if found else None
        document = wait_until(finished, timeout=90,
                              message="the run did not end while its output was not read")
        assert document["outcome"]["status"] == "failed", document["outcome"]
        assert document["outcome"]["task"] == "worker:1"
        wait_until(lambda: not sleeping(b"613"), timeout=30,
                   message="worker:0's sleep outlived the run")
        out, err = proc.communicate(timeout=120)   # read at last
    finally:
        if proc.poll() is None:   # stopped as a user stops it: its tasks with it
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=120)   # read: it writes what it held, then exits
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 3, err
    # What worker:0 forwarded before it was stopped (most of its 1,000,000
    # lines: the rest may be in flight as it is killed), in whole lines.
    lines = out.splitlines()
    assert lines and set(lines) == {b"[worker:0] y"}, out[-200:]
    assert b"tfrun: task worker:1 exited with code 3" in err


@pytest.mark.parametrize("signals", [1, 2], ids=["one SIGTERM", "a second one 1 s later"])
def test_a_run_ended_by_sigterm_ends_tfrun_while_nobody_reads_its_output(tmp_path, signals):
    # ( timeout 5 tfrun ... ) | sleep 40: the run stopped at 5 s, tfrun itself
    # lived until the reader exited, waiting to write what it held; timeout,
    # systemd and docker stop then escalate to SIGKILL. A second signal
    # during the bounded wait went back to waiting for the reader.
    runs = tmp_path / "runs"
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_RUNS_DIR=str(runs))
    flag = tmp_path / "written"
    script = "yes | head -c 2000000; touch %s; sleep 614" % flag
    with open(tmp_path / "stderr", "wb") as errors:
        proc = subprocess.Popen(tfrun_argv("-q", "-w", "1", "-s", "0", "-Cw", "0.1", "-Mw",
                                           "64", "--", "sh", "-c", script),
                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=errors)
    try:
        wait_until(flag.exists, timeout=90, message="the task never wrote its 2 MB")
        proc.send_signal(signal.SIGTERM)
        if signals == 2:
            time.sleep(1)   # (the second comes during the wait for the reader, not a sync)
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)   # nothing reads its output meanwhile
        except subprocess.TimeoutExpired:
            pytest.fail("tfrun, its run ended by SIGTERM, waited for a reader that never read")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    assert proc.returncode == 130
    # Its own lines still reach a stderr that takes them.
    assert "tfrun: interrupted" in (tmp_path / "stderr").read_text()
    wait_until(lambda: not sleeping(b"614"), timeout=30, message="the task outlived the run")
    [run] = list(runs.iterdir())
    assert finished_record(run)["outcome"]["status"] == "interrupted"


def test_a_reader_that_leaves_before_the_output_of_a_finished_run_was_written_gets_141(
        tmp_path):
    # tfrun ... | sleep 15: the run finished, 3 MB of its output still
    # waiting for a reader that never read and then left: tfrun exited 0,
    # the output lost without a word (found by a review helper). A reader
    # that leaves is SIGPIPE's 141, as the README says of one that leaves
    # while the run goes.
    run_dir = tmp_path / "run"
    read_end, write_end = os.pipe()
    with reaped(subprocess.Popen(
            tfrun_argv("-w", "1", "-s", "0", *SMALL, "--run-dir", str(run_dir), "--",
                       sys.executable, "-c",
                       "print(('y' * 1000 + '\\n') * 3000)"),
            cwd=REPO, stdout=write_end, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, MESOS_MASTER=""))) as proc:
        os.close(write_end)
        try:
            wait_until(lambda: finished_record(run_dir), timeout=120,
                       message="the run never finished")
            assert proc.poll() is None   # its output still waits for the reader
        finally:
            os.close(read_end)           # the reader leaves, having read nothing
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141, err
    assert finished_record(run_dir)["outcome"]["status"] == "succeeded"
