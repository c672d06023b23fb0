"""tfmesos follows runs through the master's operator event stream (issue 34,
item 1): ``tfmesos logs RUN --master M --follow`` and ``attach``'s follow of
a detached run's scheduler (``follow_scheduler``) learn a task's new
attempt and the framework's end from TASK_ADDED/TASK_UPDATED/
FRAMEWORK_UPDATED/FRAMEWORK_REMOVED instead of polling
``/master/frameworks`` every second, and ``tfmesos runs --master M --watch``
prints each change as the stream tells it.

The master is reached through ``MasterProxy`` (tests/master_proxy.py),
which counts what is asked of it and answers SUBSCRIBE as another master
might: refused (501, as the embedded master did before it had the stream:
everything works as before, by polling), silent after SUBSCRIBED (noticed
within 3 heartbeat intervals, then polled), or forged (a RecordIO record of
1 TiB: refused in one line, then polled). The runs are played by the tests'
own scheduler client with a run's labels, their tasks plain shell commands.
"""

import io
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from fixtures_master import clients, make_local_master
from master_proxy import FORGED_SIZE, MasterProxy
from mesos_http_client import task_info
from tfrun_helpers import REPO
from waiting import Buffer, wait_until

from tfmesos.cli.cluster_logs import follow_scheduler, print_logs
from tfmesos.cli.cluster_runs import cluster_runs
from tfmesos.cli.runs import logs_main
from tfmesos.mesos.master_reads import MasterReader
from tfmesos.mesos.operator_stream import OperatorStream, StreamLost, StreamRefused
from tfmesos.protocol import labels

pytestmark = pytest.mark.timeout(120)

RUN_ID = "5eed1234"
HEARTBEAT = 0.5          # the fixtures' masters' heartbeat interval
# The masters of the tests that follow a live stream: its silence is noticed
# after 3 intervals, and 1.5 s without a heartbeat read happened on a loaded
# CI machine (the stream was taken for lost, the fallback's line said).
STEADY = dict(heartbeat_interval=5.0)
ESCAPE = "\x1b[31mboom\x1b[0m"


@pytest.fixture
def proxies():
    """``proxy(master, mode)`` -> a MasterProxy, closed at the end."""
    made = []

    def proxy(master, mode="pass"):
        made.append(MasterProxy(master.url, mode))
        return made[-1]

    try:
        yield proxy
    finally:
        for proxy in made:
            proxy.close()



def run_labels(**more):
    values = {labels.RUN_ID: RUN_ID, labels.JOBS: "worker:1", labels.MODE: "replica",
              labels.COMMAND: "python train.py", **more}
    return {"labels": [{"key": key, "value": value} for key, value in values.items()]}


def start_run(connect, master, **more):
    return connect(master, name="train", failover_timeout=3600.0,
                   extra_info={"labels": run_labels(**more)})


def launch(client, task_id, name, command):
    """One task on the next offer, up to TASK_RUNNING."""
    offer = client.next_offers(timeout=30)[0]
    client.launch(offer, [task_info(task_id, offer, command, name=name)],
                  filters={"refuse_seconds": 0})
    client.wait_state(task_id, "TASK_RUNNING", timeout=30)


def printing(feed, attempt):
    """A task that says it is up (on stdout and stderr), then prints each
    line appended to ``feed`` as it comes."""
    return ("echo 'attempt %d up' && echo 'attempt %d err' >&2 && exec tail -n +1 -f %s"
            % (attempt, attempt, feed))


def end_run(client, outcome, **more):
    """What a run's scheduler does at its end: its outcome label, a teardown."""
    info = dict(client.framework_info, labels=run_labels(**{labels.OUTCOME: outcome}, **more))
    client.call("UPDATE_FRAMEWORK", {"framework_info": info}, check=False).raise_for_status()
    client.call("TEARDOWN")


def append(path, line):
    with open(path, "a") as handle:
        handle.write(line + "\n")


def feeds(tmp_path, count=2):
    found = [tmp_path / ("feed%d" % i) for i in range(count)]
    for feed in found:
        feed.write_text("")
    return found


def the_run(reader):
    state = reader.state()
    [run] = [run for run in cluster_runs(state) if run.run_id == RUN_ID]
    return run, state


def started(target):
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


# -- logs --follow and attach's follow ---------------------------------------------------

@pytest.mark.parametrize("mode", ["pass", "refuse"])
@pytest.mark.waits
def test_logs_follow_learns_new_attempts_and_the_end_from_the_stream(
        make_local_master, clients, proxies, tmp_path, capsys, mode):
    master = make_local_master(**STEADY)
    proxy = proxies(master, mode)
    client = start_run(clients, master)
    feed = feeds(tmp_path)
    task = "tfmesos.%s.worker.0.%d" % (RUN_ID, 0)
    launch(client, task, "train worker:0", printing(feed[0], 0))
    out, result = Buffer(), []
    follower = started(lambda: result.append(logs_main(
        [RUN_ID, "worker:0", "--master", proxy.url, "--follow"], environ={}, out=out)))
    try:
        wait_until(lambda: "attempt 0 up\n" in out.text(), message=out.text)
        append(feed[0], "step 1")
        wait_until(lambda: "step 1\n" in out.text(), message=out.text)
        client.kill(task)
        client.wait_state(task, "TASK_KILLED", timeout=30)
        launch(client, "tfmesos.%s.worker.0.1" % RUN_ID, "train worker:0", printing(feed[1], 1))
        append(feed[1], "step 2")
        wait_until(lambda: "step 2\n" in out.text(), message=out.text)
    finally:
        end_run(client, "succeeded")
        follower.join(60)
    assert not follower.is_alive() and result == [0]
    assert out.text() == "attempt 0 up\nstep 1\nattempt 1 up\nstep 2\n"   # as polled before
    assert capsys.readouterr().err == ""
    assert proxy.count("SUBSCRIBE") == 1
    if mode == "pass":        # the stream told the new attempt and the end: nothing polled
        assert proxy.count("/master/frameworks") == 0
    else:                     # a master without the stream: polled, as ever
        assert proxy.count("/master/frameworks") > 0


@pytest.mark.parametrize("mode", ["pass", "refuse"])
@pytest.mark.waits
def test_attach_follows_scheduler_attempts_and_the_outcome_from_the_stream(
        make_local_master, clients, proxies, tmp_path, mode):
    master = make_local_master(**STEADY)
    proxy = proxies(master, mode)
    client = start_run(clients, master, **{labels.DETACHED: "1"})
    feed = feeds(tmp_path)
    launch(client, labels.scheduler_task_id(RUN_ID, 0), "train scheduler", printing(feed[0], 0))
    reader = MasterReader(proxy.url, environ={})
    run, state = the_run(reader)
    out, err, outcome, notes = Buffer(), Buffer(), [], []
    follower = started(lambda: outcome.append(follow_scheduler(
        reader, run, out, err, poll=0.1, state=state, notify=notes.append)))
    try:
        wait_until(lambda: "attempt 0 up\n" in out.text() and "attempt 0 err\n" in err.text(),
                   message=lambda: (out.text(), err.text()))
        client.kill(labels.scheduler_task_id(RUN_ID, 0))
        client.wait_state(labels.scheduler_task_id(RUN_ID, 0), "TASK_KILLED", timeout=30)
        launch(client, labels.scheduler_task_id(RUN_ID, 1), "train scheduler",
               printing(feed[1], 1))
        wait_until(lambda: "attempt 1 up\n" in out.text() and "attempt 1 err\n" in err.text(),
                   message=lambda: (out.text(), err.text()))
    finally:
        end_run(client, "failed: worker:0 exited with code 3")
        follower.join(60)
    assert not follower.is_alive() and outcome == ["failed: worker:0 exited with code 3"]
    assert out.text() == "attempt 0 up\nattempt 1 up\n"
    assert err.text() == "attempt 0 err\n--- scheduler attempt 1 ---\nattempt 1 err\n"
    assert notes == []
    assert proxy.count("/master/state") == 1 and proxy.count("SUBSCRIBE") == 1
    assert (proxy.count("/master/frameworks") == 0) == (mode == "pass")


@pytest.mark.waits
def test_a_stream_gone_silent_is_noticed_within_three_heartbeats_then_polled(
        make_local_master, clients, proxies, tmp_path):
    master = make_local_master()
    proxy = proxies(master, "silent")
    reader = MasterReader(proxy.url, environ={})
    # The stream alone: SUBSCRIBED, then nothing, not even a HEARTBEAT.
    stream = OperatorStream.of(reader)
    try:
        assert stream.heartbeat == HEARTBEAT and stream.bound == 3 * HEARTBEAT
        began = time.monotonic()
        with pytest.raises(StreamLost, match=r"went silent: no event or heartbeat for 1\.5 s "
                                             r"\(3 heartbeat intervals\)"):
            stream.next_event()
        assert time.monotonic() - began >= stream.bound * 0.9
    finally:
        stream.close()

    # A follower: it says so in one line and polls the framework from then on.
    client = start_run(clients, master)
    [feed] = feeds(tmp_path, 1)
    launch(client, "tfmesos.%s.worker.0.0" % RUN_ID, "train worker:0", printing(feed, 0))
    run, state = the_run(reader)
    out, result, notes = Buffer(), [], []
    follower = started(lambda: result.append(print_logs(
        reader, state, run, [], "stdout", True, out, notify=notes.append)))
    try:
        wait_until(lambda: notes, message="the silent stream was never noticed")
        assert proxy.count("SUBSCRIBE") == 2
        polled = wait_until(lambda: proxy.first_at("/master/frameworks"),
                            message="the framework was never polled")
        noticed = polled - proxy.subscribed_at[1]
        assert 3 * HEARTBEAT * 0.9 <= noticed < 3 * HEARTBEAT + 20, noticed
        assert notes == ["the operator event stream of the Mesos master at %s went silent: no "
                         "event or heartbeat for 1.5 s (3 heartbeat intervals): polling the "
                         "master instead" % proxy.url]
        append(feed, "step 1")
        wait_until(lambda: "step 1\n" in out.text(), message=out.text)
    finally:
        end_run(client, "succeeded")
        follower.join(60)
    assert not follower.is_alive() and result == [0]
    assert out.text() == "attempt 0 up\nstep 1\n"
    assert proxy.count("/master/frameworks") > 0 and len(notes) == 1


@pytest.mark.waits
def test_the_proxy_passes_on_a_stream_through_a_silence_between_heartbeats(
        make_local_master, clients, proxies):
    # The tests above that follow a live stream (a 5-s heartbeat) pass it
    # through the proxy: a second without an event between two heartbeats
    # must not end it there (it did: the proxy's read timed out, and a
    # socket file that timed out reads no more).
    master = make_local_master(**STEADY)
    stream = OperatorStream.of(MasterReader(proxies(master, "pass").url, environ={}))
    try:
        time.sleep(2.0)            # the silence under test, under one heartbeat
        client = clients(master, name="after the silence")
        while True:
            event = stream.next_event()
            if event["type"] != "HEARTBEAT":
                break
        assert event["type"] == "FRAMEWORK_ADDED"
        assert event["framework_added"]["framework"]["framework_info"]["id"] == \
            client.framework_info["id"]
    finally:
        stream.close()


def test_a_refusing_or_forging_master_is_one_error_of_the_stream(make_local_master, proxies):
    master = make_local_master()
    refusing = MasterReader(proxies(master, "refuse").url, environ={})
    with pytest.raises(StreamRefused, match=r"does not serve the operator event stream: "
                                            r"SUBSCRIBE answered HTTP 501 Call type SUBSCRIBE "
                                            r"is not supported$") as refused:
        OperatorStream.of(refusing)
    assert refused.value.status == 501
    forging = MasterReader(proxies(master, "forged").url, environ={})
    with pytest.raises(StreamLost, match=r"is refused: RecordIO record of %d bytes exceeds "
                                         r"the \d+ byte limit$" % FORGED_SIZE):
        OperatorStream.of(forging)


# -- runs --watch ---------------------------------------------------------------------------

class Watch:
    """``tfmesos runs --master URL --watch`` in a process of its own, its
    stdout read line by line; ``stop()`` sends it Ctrl-C (SIGINT)."""

    def __init__(self, url):
        env = dict(os.environ, COLUMNS="200")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tfmesos.cli.main", "runs", "--master", url, "--watch"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self._reader = started(self._read)

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def text(self):
        return "\n".join(self.lines)

    def changes(self):
        """The change lines, without their times."""
        return [line.split(" ", 1)[1] for line in self.lines
                if re.match(r"\d\d:\d\d:\d\d run ", line)]

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(10)
        return self.process.returncode, self.process.stderr.read()


@pytest.mark.parametrize("mode", ["pass", "refuse"])
@pytest.mark.waits
def test_runs_watch_prints_each_change_until_ctrl_c(make_local_master, clients, proxies, mode):
    master = make_local_master(**STEADY)
    proxy = proxies(master, mode)
    watch = Watch(proxy.url)
    try:
        wait_until(lambda: "the master knows no tfmesos runs" in watch.lines,
                   message=watch.text)
        if mode == "pass":
            wait_until(lambda: proxy.subscribed_at, message="the watch never subscribed")
        client = start_run(clients, master, **{labels.COMMAND: "python %s.py" % ESCAPE})
        task = "tfmesos.%s.worker.0.0" % RUN_ID
        launch(client, task, "train worker:0", "exec sleep 600")
        wait_until(lambda: any("TASK_RUNNING" in line for line in watch.changes()),
                   message=watch.text)
        client.kill(task)
        client.wait_state(task, "TASK_KILLED", timeout=30)
        end_run(client, "failed (exit 3, worker:0)",
                **{labels.REASON: "worker:0: %s\nrm -rf /" % ESCAPE})
        wait_until(lambda: any(" ended: " in line for line in watch.changes()),
                   message=watch.text)
        wait_until(lambda: watch.changes()[-1].startswith("run %s: " % RUN_ID),
                   message=watch.text)
    finally:
        status, errors = watch.stop()
    assert status == 0 and errors == "", errors       # Ctrl-C: exit 0, no traceback
    escaped = "\\x1b[31mboom\\x1b[0m"
    changes = watch.changes()
    assert changes[0] == "run %s started: train (worker:1) python %s.py" % (RUN_ID, escaped)
    assert changes[-2:] == ["run %s ended: failed (exit 3, worker:0)" % RUN_ID,
                            "run %s: worker:0: %s rm -rf /" % (RUN_ID, escaped)]
    assert "\x1b" not in watch.text()
    tasks = [line for line in changes if line.startswith("run %s worker:0: " % RUN_ID)]
    if mode == "pass":          # every state, from the stream; /master/state read once
        assert [line.rsplit(" ", 1)[1] for line in tasks] == [
            "TASK_STAGING", "TASK_STARTING", "TASK_RUNNING", "TASK_KILLED"]
        assert proxy.count("/master/state") == 1 and proxy.count("SUBSCRIBE") == 1
    else:                       # what each read every 2 s showed
        assert "run %s worker:0: TASK_RUNNING" % RUN_ID in tasks
        assert proxy.count("/master/state") >= 2


@pytest.mark.waits
def test_runs_watch_refuses_a_forged_stream_in_one_line_and_reads_the_state(
        make_local_master, clients, proxies):
    master = make_local_master()
    proxy = proxies(master, "forged")
    watch = Watch(proxy.url)
    try:
        wait_until(lambda: proxy.count("/master/state") >= 2, message=watch.text)
        start_run(clients, master)
        wait_until(lambda: watch.changes(), message=watch.text)
    finally:
        status, errors = watch.stop()
    assert status == 0
    assert watch.changes() == ["run %s started: train (worker:1) python train.py" % RUN_ID]
    assert errors == ("tfmesos runs: the operator event stream of the Mesos master at %s is "
                      "refused: RecordIO record of %d bytes exceeds the %d byte limit: reading "
                      "the master's state every 2 s instead\n"
                      % (proxy.url, FORGED_SIZE, 64 * 1024 * 1024)), errors
