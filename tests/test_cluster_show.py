"""A run as its Mesos master knows it, from any machine: ``tfmesos show
RUN --master`` (a detached run's record read from its scheduler task's
sandbox; a foreground run's tasks and where its record is), ``tfmesos runs
--master``'s STATE (detached, failing over with the time left, a finished
run's outcome), and ``follow_scheduler`` (what ``tfmesos attach`` prints).

A detached run is played here by a small framework (the tests' own HTTP
scheduler client) that subscribes with a run's labels and launches
``tfmesos.<run>.scheduler.0.<attempt>`` tasks whose shell commands write
``run/run.json`` and print what the test feeds them."""

import io
import itertools
import os
import re
import subprocess
import sys
import threading
import time

import pytest
from fixtures_master import clients, make_local_master
from mesos_http_client import SchedulerClient, task_info
from run_dirs import write_run
from tfrun_helpers import REPO
from waiting import Buffer, wait_until

from tfmesos.cli import cluster_show
from tfmesos.cli.cluster_logs import (
    FRESH_POLL,
    FRESH_WINDOW,
    QUICK_POLL,
    follow_scheduler,
    next_poll,
)
from tfmesos.cli.cluster_runs import MAX_OUTCOME, cluster_runs, reader
from tfmesos.cli.main import main as tfmesos_main
from tfmesos.cli.runs import logs_main, runs_main, show_main, show_run
from tfmesos.protocol import labels
from tfmesos.record.history import Run

pytestmark = pytest.mark.timeout(180)

RUN_ID = "c0ffee12"
FAILOVER = 3600.0


def run_labels(run_id, **more):
    values = {labels.RUN_ID: run_id, labels.JOBS: "worker:1", labels.MODE: "replica",
              labels.COMMAND: "python train.py", **more}
    return {"labels": [{"key": key, "value": value} for key, value in values.items()]}


def subscribe(connect, master, run_id, detached=True, **more):
    extra = run_labels(run_id, **({labels.DETACHED: "1"} if detached else {}), **more)
    return connect(master, name="train", failover_timeout=FAILOVER,
                   extra_info={"labels": extra})


def launch(client, task_id, name, command):
    """Launch one task on the next offer, up to TASK_RUNNING."""
    offer = client.next_offers(timeout=30)[0]
    client.launch(offer, [task_info(task_id, offer, command, name=name)],
                  filters={"refuse_seconds": 0})
    client.wait_state(task_id, "TASK_RUNNING", timeout=30)


def scheduler_command(record, feed, attempt):
    """A scheduler task's stand-in: its run directory's run.json (a copy of
    ``record``, replaced whole as tfrun writes it), a line on each stream,
    then each line appended to ``feed`` (``err:`` ones to stderr) as it
    comes."""
    return ("mkdir -p run && cp %s run/.run.json && mv run/.run.json run/run.json && "
            "echo 'attempt %d up' && "
            "echo 'attempt %d err' >&2 && tail -n +1 -f %s | while IFS= read -r line; do "
            "case \"$line\" in err:*) echo \"${line#err:}\" >&2;; *) echo \"$line\";; esac; "
            "done" % (record, attempt, attempt, feed))



def listed(master, run_id):
    out = io.StringIO()
    assert runs_main(["--master", master.url], environ={"COLUMNS": "200"}, out=out) == 0
    rows = [line for line in out.getvalue().splitlines() if line.startswith(run_id)]
    assert len(rows) == 1, out.getvalue()
    return rows[0]


def shown(master, run_id):
    out = io.StringIO()
    assert show_main([run_id, "--master", master.url], environ={}, out=out) == 0
    return out.getvalue()


def without_times(text):
    """A show output without what depends on the run's directory or on the
    time it is shown at (a running run's duration)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("directory")]
    return [re.sub(r"(took|running for) .*?  \(", r"\1 ?  (", line) for line in lines]


def append(path, line):
    with open(path, "a") as handle:
        handle.write(line + "\n")


# -- runs --master's STATE, without a master -------------------------------------------

def framework(fid, connected=True, tasks=(), **label_values):
    return {"id": fid, "name": "train", "connected": connected, "registered_time": 100.0,
            "labels": run_labels(fid.lower(), **label_values)["labels"],
            "tasks": [{"id": task_id, "state": "TASK_RUNNING"} for task_id in tasks]}


def test_the_state_column_says_detached_failing_over_and_outcomes():
    away = dict(framework("B", connected=False, **{labels.DETACHED: "1"}),
                unregistered_time=1000.0, failover_timeout=6 * 3600.0)
    long_failure = "failed: worker:0 exited with code 1 " + "x" * 100
    state = {
        "frameworks": [
            framework("A", tasks=[labels.scheduler_task_id("a", 0), "tfmesos.a.worker.0.0",
                                  "tfmesos.a.worker.1.0"], **{labels.DETACHED: "1"}),
            away, framework("C", connected=False)],
        "completed_frameworks": [framework("D", **{labels.OUTCOME: "succeeded"}),
                                 framework("E", **{labels.OUTCOME: long_failure}),
                                 framework("F")]}
    runs = {run.run_id: run for run in cluster_runs(state)}
    now = 1000.0 + 60.0
    assert runs["a"].state_text(now) == "running (detached)"
    assert runs["a"].tasks_running == 2      # not the scheduler task
    assert runs["b"].state_text(now) == "failing over (5h59m left, detached)"
    assert runs["b"].state_text(1000.0 + 7 * 3600.0) == "failing over (0.0 s left, detached)"
    assert runs["c"].state_text(now) == "failing over"    # the master gave no times
    assert runs["d"].state_text(now) == "succeeded"
    assert runs["e"].state_text(now) == long_failure[:MAX_OUTCOME - 3] + "..."
    assert runs["f"].state_text(now) == "finished"


# -- a detached run on an embedded master --------------------------------------------------

def test_a_detached_run_shown_listed_and_followed_across_scheduler_attempts(
        make_local_master, clients, tmp_path):
    master = make_local_master()
    record_dir = write_run(tmp_path / "records", RUN_ID, name="train", status="running",
                           exit_code=None)
    record = os.path.join(record_dir, "run.json")
    feeds = [tmp_path / "feed0", tmp_path / "feed1"]
    for feed in feeds:
        feed.write_text("")
    client = subscribe(clients, master, RUN_ID)
    launch(client, labels.scheduler_task_id(RUN_ID, 0), "train scheduler",
           scheduler_command(record, feeds[0], 0))
    launch(client, "tfmesos.%s.worker.0.0" % RUN_ID, "train worker:0", "exec sleep 600")

    # show --master: the record from the scheduler's sandbox, as local show shows it.
    remote = wait_until(lambda: (lambda text: text if text.startswith("run %s" % RUN_ID)
                                 and "directory" in text else None)(shown(master, RUN_ID)),
                        timeout=30, message=lambda: shown(master, RUN_ID))
    local = io.StringIO()
    show_run(Run.load(record_dir), local)
    assert without_times(remote)[:-2] == without_times(local.getvalue())
    assert "run/ in the sandbox of task %s" % labels.scheduler_task_id(RUN_ID, 0) in remote
    assert remote.splitlines()[-1].startswith("on the master now: running (detached)")

    # runs --master: running, detached, one job task running (not the scheduler).
    row = listed(master, RUN_ID).split()
    assert row[1:4] == ["train", "running", "(detached)"] and row[-3] == "1", row

    # follow_scheduler: each stream as it grows, then the next attempt from its start.
    out, err, stop = Buffer(), Buffer(), threading.Event()
    outcome, states = [], []
    master_reader = reader(master.url, {})
    whole_state = master_reader.state
    master_reader.state = lambda: states.append(1) or whole_state()
    [run] = [run for run in cluster_runs(master_reader.state()) if run.run_id == RUN_ID]
    follower = threading.Thread(target=lambda: outcome.append(follow_scheduler(
        master_reader, run, out, err, stop=stop, poll=0.05)))
    follower.start()
    try:
        wait_until(lambda: "attempt 0 up\n" in out.text() and "attempt 0 err\n" in err.text(),
                   message=lambda: (out.text(), err.text()))
        append(feeds[0], "step 1")
        append(feeds[0], "err:warning 1")
        wait_until(lambda: "step 1\n" in out.text() and "warning 1\n" in err.text(),
                   message=lambda: (out.text(), err.text()))
        assert "step 1" not in err.text() and "warning 1" not in out.text()

        client.kill(labels.scheduler_task_id(RUN_ID, 0))
        client.wait_state(labels.scheduler_task_id(RUN_ID, 0), "TASK_KILLED", timeout=30)
        launch(client, labels.scheduler_task_id(RUN_ID, 1), "train scheduler",
               scheduler_command(record, feeds[1], 1))
        wait_until(lambda: "attempt 1 up\n" in out.text() and "attempt 1 err\n" in err.text(),
                   message=lambda: (out.text(), err.text()))
        assert err.text().index("--- scheduler attempt 1 ---\n") < err.text().index(
            "attempt 1 err")
        append(feeds[1], "step 2")
        wait_until(lambda: "step 2\n" in out.text(), message=lambda: out.text())
        assert out.text().count("attempt 0 up") == 1    # attempt 0 not printed again

        # logs --master: the scheduler's newest attempt as the task "scheduler".
        logs = io.StringIO()
        assert logs_main([RUN_ID, "scheduler", "--master", master.url], environ={},
                         out=logs) == 0
        assert logs.getvalue().splitlines()[:2] == ["attempt 1 up", "step 2"]

        # The scheduler's subscription is gone without a teardown: failing over.
        framework_id = client.framework_id
        client.close()
        wait_until(lambda: "failing over" in listed(master, RUN_ID))
        state = listed(master, RUN_ID)
        # No time left is said: Mesos gives a framework failing over no time
        # it went away (unregistered_time is its removal's, Master::removeFramework).
        assert "failing over (detached)" in state, state
        assert not outcome and follower.is_alive()   # its tasks go on: not over

        # A new scheduler takes the framework over, says how the run ended, tears it down.
        again = SchedulerClient(master.url, name="train", failover_timeout=FAILOVER,
                                framework_id=framework_id,
                                extra_info={"labels": run_labels(RUN_ID, **{
                                    labels.DETACHED: "1"})})
        try:
            again.subscribe()
            assert listed(master, RUN_ID).split()[2:4] == ["running", "(detached)"]
            info = dict(again.framework_info, labels=run_labels(RUN_ID, **{
                labels.DETACHED: "1", labels.OUTCOME: "failed: worker:0 exited with code 3"}))
            again.call("UPDATE_FRAMEWORK", {"framework_info": info}, check=False) \
                .raise_for_status()
            again.call("TEARDOWN")
        finally:
            again.close()
        follower.join(60)
        assert not follower.is_alive()
        assert outcome == ["failed: worker:0 exited with code 3"]
        assert states == [1]    # the run found once; then its framework only, polled
    finally:
        stop.set()
        follower.join(60)
    assert listed(master, RUN_ID).split()[2:8] == ["failed:", "worker:0", "exited", "with",
                                                   "code", "3"]
    # Its record still says running: its scheduler ended without saying otherwise.
    after = shown(master, RUN_ID)
    assert after.startswith("run %s  train (replica)  gone" % RUN_ID), after
    assert "scheduler attempt 1" in after.splitlines()[-1]


# -- a foreground run; a record that cannot be shown ------------------------------------

def tfmesos(*args):
    return subprocess.run([sys.executable, "-m", "tfmesos.cli.main", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_a_foreground_run_whose_record_is_here_says_so(make_local_master, clients, tmp_path):
    # "its record is in the run directory of the machine that submitted it
    # (tfmesos show ID there)", said on that very machine, its run directory
    # present (found by a review helper following the README).
    master = make_local_master()
    run_id = "f00dfac2"
    client = subscribe(clients, master, run_id, detached=False)
    launch(client, "tfmesos.%s.worker.0.0" % run_id, "train worker:0", "exec sleep 600")
    directory = write_run(tmp_path / "runs", run_id, name="train", status="running",
                          exit_code=None, framework_id=client.framework_id)
    out = io.StringIO()
    assert show_main([run_id, "--master", master.url],
                     environ={"TFMESOS_RUNS_DIR": str(tmp_path / "runs")}, out=out) == 0
    assert out.getvalue().splitlines()[-1] == (
        "run %s ran in the foreground: its record is here, in %s (tfmesos show %s)"
        % (run_id, directory, run_id))


def test_a_foreground_run_shows_what_the_master_knows_and_where_its_record_is(
        make_local_master, clients):
    master = make_local_master()
    run_id = "f00dface"
    client = subscribe(clients, master, run_id, detached=False)
    launch(client, "tfmesos.%s.worker.0.0" % run_id, "train worker:0", "exec sleep 600")
    text = shown(master, run_id)
    lines = text.splitlines()
    assert lines[0] == "run %s  train (replica)  running, framework %s" % (
        run_id, client.framework_id)
    host = master.state()["slaves"][0]["hostname"]
    assert ["worker:0", "tfmesos.%s.worker.0.0" % run_id, "TASK_RUNNING", host] in [
        line.split() for line in lines]
    assert lines[-1] == ("run %s ran in the foreground: its record is in the run directory "
                         "of the machine that submitted it (tfmesos show %s there)"
                         % (run_id, run_id))
    # A stop asked for ends a follower at once, with no outcome.
    stop = threading.Event()
    stop.set()
    [run] = [run for run in cluster_runs(master.state()) if run.run_id == run_id]
    assert follow_scheduler(reader(master.url, {}), run, io.StringIO(), io.StringIO(),
                            stop=stop) is None

    unknown = tfmesos("show", "beef", "--master", master.url)
    assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1, unknown.stderr
    assert "knows no tfmesos run 'beef'" in unknown.stderr
    both = tfmesos("show", run_id, "--master", master.url, "--runs-dir", "/tmp")
    assert both.returncode == 2 and "does not go with --master" in both.stderr


def test_a_record_that_is_no_run_json_or_too_large_is_one_line(
        make_local_master, clients, tmp_path, monkeypatch, capsys):
    master = make_local_master()
    run_id = "badc0de1"
    client = subscribe(clients, master, run_id)
    garbage = tmp_path / "garbage"
    garbage.write_text('{"schema_version": 5, "tasks": [')
    launch(client, labels.scheduler_task_id(run_id, 0), "train scheduler",
           "mkdir -p run && cp %s run/run.json && exec sleep 600" % garbage)
    broken = wait_until(lambda: (lambda done: done if done.returncode else None)(
        tfmesos("show", run_id, "--master", master.url)), timeout=30)
    assert broken.returncode == 1 and broken.stderr.count("\n") == 1, broken.stderr
    assert "is not a run record" in broken.stderr and "Traceback" not in broken.stderr
    assert labels.scheduler_task_id(run_id, 0) in broken.stderr

    monkeypatch.setattr(cluster_show, "MAX_RECORD", 8)
    assert tfmesos_main(["show", run_id, "--master", master.url]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "more than the 8 bytes tfmesos show reads" in error, error


def test_a_followed_scheduler_is_read_quickly_while_its_output_grows():
    # Its lines within QUICK_POLL (a poll of a second put them half a second
    # behind on average), the agent asked less often while it is quiet.
    assert next_poll(1.0, True, 1.0) == QUICK_POLL <= 0.1
    waits = [QUICK_POLL]
    for _ in range(5):
        waits.append(next_poll(waits[-1], False, 1.0))
    assert waits == sorted(waits) and waits[-1] == 1.0
    assert next_poll(1.0, True, 0.05) == 0.05   # never slower than asked


def test_a_new_scheduler_task_is_read_quickly_until_its_first_lines_come(monkeypatch):
    """``tfmesos attach`` relaunched the scheduler: it takes a moment to
    start, and its first lines are what the user waits for. Its output is
    read every QUICK_POLL until they come (before: the waits doubled from
    the first empty read, the lines came up to 0.4 s late); then every
    FRESH_POLL for FRESH_WINDOW, as the resumed run's own lines come back
    (before: QUICK_POLL, the run shown up to 0.1 s after it was back); then
    as ever."""
    from tfmesos.cli import cluster_logs

    stdout_reads = iter([0] * 6 + [120] + [0] * 200)
    waits = []
    clock = [1000.0]

    class Stop:
        def is_set(self):
            return clock[0] > 1000.0 + 5.0

        def wait(self, seconds):
            waits.append(seconds)
            clock[0] += seconds

    class FakeFile:
        def __init__(self, name, base_url, path, follow, auth):
            self.stdout = path.endswith("stdout")

        def read(self, out, final=False):
            return next(stdout_reads) if self.stdout else 0

    class Source:
        def framework(self):
            return {"id": "fw", "tasks": [{"id": labels.scheduler_task_id("r1", 1),
                                           "slave_id": "agent"}]}, False

    class View:
        def agent_url(self, agent_id):
            return "http://agent:5051"

    class Reader:
        auth = None

    class Run:
        run_id, framework_id = "r1", "fw"

    monkeypatch.setattr(cluster_logs, "SandboxFile", FakeFile)
    monkeypatch.setattr(cluster_logs.time, "monotonic", lambda: clock[0])
    cluster_logs._follow_scheduler(View(), Source(), Reader(), Run(), io.StringIO(),
                                   io.StringIO(), Stop(), 1.0)
    assert waits[:6] == [QUICK_POLL] * 6      # the new task's first lines awaited
    fresh = list(itertools.takewhile(lambda wait: wait == FRESH_POLL, waits[6:]))
    assert FRESH_POLL < QUICK_POLL and abs(sum(fresh) - FRESH_WINDOW) <= FRESH_POLL + 1e-9
    quiet = waits[6 + len(fresh):]
    assert quiet[:3] == [0.2, 0.4, 0.8] and set(quiet[3:]) == {1.0}   # then less often
    assert next_poll(1.0, False, 1.0, fresh=True) == FRESH_POLL
    assert next_poll(1.0, False, 0.01, fresh=True) == 0.01   # never slower than asked


def test_a_follower_without_the_event_stream_asks_the_master_once_a_poll():
    """Reading a growing output every QUICK_POLL seconds does not ask the
    master's /master/frameworks as often: at most once every ``poll``."""
    from tfmesos.cli.cluster_logs import FrameworkSource

    asked = []

    class View:
        reader, framework_id = None, "f"

        def framework(self):
            asked.append(time.monotonic())
            return {"id": "f"}, False

    source = FrameworkSource(View(), lambda text: None, poll=3600.0)
    source._subscribed = True       # the master refused the stream: polled
    for _ in range(5):
        assert source.framework() == ({"id": "f"}, False)
    assert len(asked) == 1
    source.poll = 0.0
    source.framework()
    assert len(asked) == 2
