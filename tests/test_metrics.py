"""Metrics (``tfmesos.log_metrics``) without a run: the checks and bounds of
points and frames, the sender's batches, the task entry's relay, the
rendezvous' metrics frames, the record's bounded series, the status line,
``tfmesos show`` and the report's charts."""

import collections
import contextlib
import io
import json
import math
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
import warnings

import pytest
from rendezvous_client import Client, make_rendezvous, next_event
from run_dirs import write_run
from tfrun_helpers import REPO, only_metrics_warnings

from tfmesos.cli.main import main
from tfmesos.cli.progress import Progress, describe_metrics, metrics_line
from tfmesos.cli.runs import show_run
from tfmesos.cli.tfrun import print_metrics
from tfmesos.core.events import TaskMetrics
from tfmesos.protocol import metric_points, task_env, wire
from tfmesos.protocol.metric_points import (
    MAX_POINTS,
    MAX_STEP,
    MAX_VALUES,
    Batcher,
    MetricError,
    check_name,
    check_step,
    check_value,
    dropped_datagram,
    parse_frame,
    parse_point,
)
from tfmesos.record.history import Run
from tfmesos.record.metric_series import MAX_POINTS as SERIES_POINTS
from tfmesos.record.metric_series import Metrics, add_value, left_out_note, summaries
from tfmesos.record.report import render
from tfmesos.record.run_record import RunRecord
from tfmesos.record.schema import MetricSeries, RunFile
from tfmesos.task import metrics_relay
from tfmesos.task import user_metrics as task_metrics
from tfmesos.task.metrics_relay import MetricsRelay

# -- checks ------------------------------------------------------------------------


def test_names_values_and_steps_are_checked():
    assert check_name("val_loss") == "val_loss" and check_name("loss/train:0") == "loss/train:0"
    for bad in ("", "x" * 65, "a b", "<script>", 3, None, "é"):
        with pytest.raises(MetricError):
            check_name(bad)
    assert check_value(1) == 1.0 and check_value(0.5) == 0.5
    assert check_value(float("nan")) is None and check_value(float("inf")) is None
    for bad in ("1", True, None, [1, 2], object()):
        with pytest.raises(MetricError):
            check_value(bad)
    assert check_step(3) == 3
    for bad in (-1, 2 ** 53, 1.5, "1", True, None):
        with pytest.raises(MetricError):
            check_step(bad)


def test_received_points_and_frames_are_checked():
    assert parse_point([3, 10.0, {"loss": 1, "acc": None}]) == (3, 10.0, {"loss": 1.0,
                                                                           "acc": None})
    for bad in ([3, 10.0], [-1, 1.0, {"a": 1.0}], [True, 1.0, {"a": 1.0}],
                [1, float("nan"), {"a": 1.0}], [1, 1.0, {}], [1, 1.0, {"a": "1"}],
                [1, 1.0, {"a": float("inf")}], [1, 1.0, {"a b": 1.0}],
                [1, 1.0, {"m%d" % i: 1.0 for i in range(MAX_VALUES + 1)}], "x", None):
        assert parse_point(bad) is None, bad
    good = [1, 5.0, {"loss": 0.5}]
    assert parse_frame({"type": "metrics", "now": 6.0, "points": [good, [1, 2]],
                        "dropped": 3}) == (6.0, [(1, 5.0, {"loss": 0.5})], 4)
    for bad in ({"now": "6", "points": []}, {"now": 6.0, "points": {}},
                {"now": 6.0, "points": [good] * (MAX_POINTS + 1)},
                {"now": float("nan"), "points": []}, {"now": 6.0, "points": [], "dropped": -1}):
        assert parse_frame(dict(bad, type="metrics")) is None, bad


def test_a_full_frame_fits_the_wire_limit():
    point = [2 ** 52, time.time(), {("m%02d" % i) * 16: -1.2345678901234567e-300
                                    for i in range(MAX_VALUES)}]
    assert parse_point(point) is not None
    assert len(json.dumps(point)) < metric_points.MAX_DATAGRAM
    frame = wire.encode(b"k" * 32, wire.Context(wire.TO_SCHEDULER, b"n" * 16, 5, "t"),
                        {"type": "metrics", "now": 1.0, "points": [point] * MAX_POINTS,
                         "dropped": 0})
    assert len(frame) < wire.MAX_FRAME


# -- the sender's batch --------------------------------------------------------------

def test_a_flood_keeps_a_batch_bounded_spread_and_ending_with_the_latest():
    batcher = Batcher(limit=16, interval=0.5)
    assert not batcher.due(0.0) and batcher.take(0.0) is None
    for step in range(10000):
        batcher.add([step, 0.0, {"loss": 1.0}])
    assert batcher.due(0.0)
    points, dropped = batcher.take(0.0)
    steps = [point[0] for point in points]
    assert len(points) <= 16 and steps[0] == 0 and steps[-1] == 9999
    assert steps == sorted(steps) and len(points) + dropped == 10000
    gaps = [b - a for a, b in zip(steps, steps[1:-1])]
    assert len(set(gaps)) == 1   # evenly spread
    batcher.add([10000, 0.0, {"loss": 1.0}])
    assert not batcher.due(0.3) and batcher.due(0.5)
    assert batcher.take(0.5) == ([[10000, 0.0, {"loss": 1.0}]], 0)


def test_each_metrics_latest_value_survives_a_flood_of_others():
    batcher = Batcher(limit=16)
    batcher.add([0, 0.0, {"val_loss": 2.0}])
    for step in range(1, 5000):
        batcher.add([step, 0.0, {"loss": 1.0}])
        if step == 2500:
            batcher.add([step, 0.0, {"val_loss": 1.0}])
    points, dropped = batcher.take(0.0)
    assert len(points) <= 16 and len(points) + dropped == 5001
    assert [2500, 0.0, {"val_loss": 1.0}] in points and points[-1][0] == 4999
    assert [point[0] for point in points] == sorted(point[0] for point in points)



def test_a_batch_of_new_names_every_step_still_ends_with_the_latest_point():
    # Before: only the first limit // 4 names keep their latest point, so a
    # flood of new names lost its last steps (tfrun said step 9985 of 9999).
    for limit in (4, 16, 128):
        batcher = Batcher(limit=limit)
        for step in range(1000):
            batcher.add([step, 0.0, {"m%05d" % step: 1.0}])
        points, dropped = batcher.take(0.0)
        assert len(points) <= limit and len(points) + dropped == 1000
        assert points[-1] == [999, 0.0, {"m00999": 1.0}]

# -- log_metrics -------------------------------------------------------------------

@pytest.fixture
def fresh_metrics(monkeypatch):
    """log_metrics as a new process has it."""
    monkeypatch.setattr(task_metrics, "_warned", set())
    monkeypatch.setattr(task_metrics, "_next_step", 0)
    monkeypatch.setattr(task_metrics, "_local", [])
    monkeypatch.setattr(task_metrics, "_pending", collections.deque())
    monkeypatch.setattr(task_metrics, "dropped", 0)
    monkeypatch.delenv(task_env.METRICS_SOCKET, raising=False)
    return task_metrics


def test_outside_a_run_it_warns_once_and_does_nothing(fresh_metrics):
    import tfmesos
    with warnings.catch_warnings(record=True) as caught:
        only_metrics_warnings()
        assert tfmesos.log_metrics(step=1, loss=0.5) is False
        assert tfmesos.log_metrics(loss=0.4) is False
    assert len(caught) == 1 and caught[0].category is tfmesos.MetricsWarning
    assert "not in a tfmesos run" in str(caught[0].message)
    assert caught[0].filename == __file__   # points at the caller


def test_a_fresh_interpreter_warns_once_on_stderr():
    result = subprocess.run(
        [sys.executable, "-c", "import tfmesos\nfor i in range(3): tfmesos.log_metrics(loss=i)"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("TFMESOS_")})
    assert result.returncode == 0
    assert result.stderr.count("not in a tfmesos run") == 1, result.stderr


def test_bad_values_are_left_out_with_a_warning_and_nan_is_null(fresh_metrics):
    points = []
    fresh_metrics.record_locally(points.append)
    with warnings.catch_warnings(record=True) as caught:
        only_metrics_warnings()
        assert fresh_metrics.log_metrics(loss=float("nan"), acc=0.5, name="x", **{"a b": 1})
        assert fresh_metrics.log_metrics(step=7, loss=float("nan"))
        assert fresh_metrics.log_metrics(loss=1.0)
        assert not fresh_metrics.log_metrics(step=-1, loss=1.0)
        assert not fresh_metrics.log_metrics(name="only a string")
        assert fresh_metrics.log_metrics(**{"m%d" % i: i for i in range(MAX_VALUES + 5)})
    messages = [str(w.message) for w in caught]
    assert sum("not finite" in m for m in messages) == 1   # once per metric
    assert any("must be a number, not str" in m for m in messages)
    assert any("metric name 'a b'" in m for m in messages)
    assert any("out of range" in m for m in messages)
    assert any("at most %d values" % MAX_VALUES in m for m in messages)
    assert [(p[0], p[2]) for p in points[:3]] == [
        (0, {"loss": None, "acc": 0.5}), (7, {"loss": None}), (8, {"loss": 1.0})]
    assert len(points[3][2]) == MAX_VALUES and points[3][0] == 9
    assert abs(points[0][1] - time.time()) < 60


def test_numbers_of_numpy_convert():
    numpy = pytest.importorskip("numpy")
    assert check_value(numpy.float32(0.25)) == 0.25 and check_value(numpy.array(2)) == 2.0
    assert check_step(numpy.int64(4)) == 4
    # A bool is no metric (Python's is refused): numpy's True_ was 1.0.
    for boolean in (numpy.bool_(True), numpy.array(False), numpy.array([True])[0]):
        with pytest.raises(MetricError, match="must be a number, not"):
            check_value(boolean)


def test_a_value_or_step_whose_own_methods_raise_is_left_out_not_raised(fresh_metrics):
    # README: log_metrics never raises. A value whose __float__ or dtype
    # raised, or a step whose __index__ did, raised RuntimeError into the
    # training loop (outside a run, in cluster() and in run() alike).
    class BadFloat:
        def __float__(self):
            raise RuntimeError("boom")

    class BadIndex:
        def __index__(self):
            raise RuntimeError("idx boom")

    class BadDtype:
        @property
        def dtype(self):
            raise RuntimeError("dtype boom")

        def __float__(self):
            return 1.0

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fresh_metrics.log_metrics(a=BadFloat()) is False
        assert fresh_metrics.log_metrics(step=BadIndex(), a=1.0) is False
        assert fresh_metrics.log_metrics(b=BadDtype()) is False   # (warned once a name)
    said = " ".join(str(w.message) for w in caught)
    assert "boom" in said and "idx boom" in said and "dtype boom" in said, said


def _receiver(tmp_path):
    """A task entry's socket that reads only when asked to."""
    path = str(tmp_path / "m")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    return path, sock


def _read_steps(sock, told=None):
    """The steps of the points waiting on ``sock``; the counts of dropped
    points the sender told are added to ``told`` (a list)."""
    steps = []
    while True:
        try:
            item = json.loads(sock.recv(65536))
        except BlockingIOError:
            return steps
        if isinstance(item, dict):
            told.append(metric_points.parse_dropped(item))
        else:
            steps.append(item[0])


def _read_until(sock, last, timeout=30):
    steps = []
    sock.settimeout(timeout)
    while not steps or steps[-1] != last:
        steps.append(json.loads(sock.recv(65536))[0])
    return steps


def test_points_the_entry_cannot_take_yet_wait_in_order_not_dropped(fresh_metrics,
                                                                   monkeypatch, tmp_path):
    # A relay thread that waits for the CPU a tenth of a second on a loaded
    # machine let the socket's queue (max_dgram_qlen: 10) fill: steps 12-18
    # of a 20-step run were lost, only the latest kept.
    path, sock = _receiver(tmp_path)
    monkeypatch.setenv(task_env.METRICS_SOCKET, path)
    try:
        for step in range(40):                  # nothing read meanwhile
            fresh_metrics.log_metrics(step=step, loss=1.0)
        received = _read_steps(sock)
        assert fresh_metrics.log_metrics(step=40, loss=1.0) is False   # 40 behind 41 - 10
        received += _read_steps(sock)
        reader = threading.Thread(target=lambda: received.extend(_read_until(sock, 40)))
        reader.start()
        fresh_metrics._send_pending(timeout=30)    # the exit's
        reader.join()
        assert received == list(range(41)) and fresh_metrics.dropped == 0
        assert not fresh_metrics._pending
    finally:
        sock.close()


def test_past_max_pending_the_oldest_waiting_points_are_dropped_and_counted(
        fresh_metrics, monkeypatch, tmp_path):
    monkeypatch.setattr(fresh_metrics, "MAX_PENDING", 5)
    path, sock = _receiver(tmp_path)
    monkeypatch.setenv(task_env.METRICS_SOCKET, path)
    try:
        queued = None
        for step in range(100):
            if not fresh_metrics.log_metrics(step=step, loss=1.0) and queued is None:
                queued = step                   # the socket's queue held this many
        fresh_metrics._send_pending(timeout=0.01)   # nothing reads: they are dropped
        assert fresh_metrics.dropped == 100 - queued
        assert _read_steps(sock) == list(range(queued))
        # The points dropped are counted to the task entry before the next
        # point, so that the run's record says so (metrics_dropped): before,
        # only this process's `dropped` knew.
        told: list = []
        for step in range(100, 100 + queued + 3):
            fresh_metrics.log_metrics(step=step, loss=1.0)
        received = _read_steps(sock, told)
        fresh_metrics._send_pending(timeout=1.0)
        received += _read_steps(sock, told)
        assert received == list(range(100, 100 + queued + 3))
        assert fresh_metrics.dropped == 100 - queued and told == [100 - queued]
    finally:
        sock.close()


# -- the task entry's relay --------------------------------------------------------

def test_the_relay_sends_what_the_command_logs_bounded_and_then_removes_its_socket(
        fresh_metrics, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    frames = []
    relay = MetricsRelay(frames.append).start()
    try:
        assert os.stat(os.path.dirname(relay.path)).st_mode & 0o777 == 0o700
        monkeypatch.setenv(task_env.METRICS_SOCKET, relay.path)
        started = time.monotonic()
        for step in range(20000):
            fresh_metrics.log_metrics(step=step, loss=1.0 / (step + 1))
        took = time.monotonic() - started
        fresh_metrics._send_pending()   # what the process does when it exits
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.sendto(b"not json", relay.path)
        sock.sendto(b"x" * (metric_points.MAX_DATAGRAM + 10), relay.path)
        sock.close()
    finally:
        relay.close()
    assert took < 20, took   # never blocked by the relay
    assert not os.path.exists(relay.path) and not os.listdir(tmp_path)
    assert frames and all(f["type"] == "metrics" and len(f["points"]) <= MAX_POINTS
                          for f in frames)
    steps = [point[0] for frame in frames for point in frame["points"]]
    assert steps == sorted(steps) and steps[-1] == 19999
    received = sum(len(f["points"]) for f in frames)
    dropped = sum(f["dropped"] for f in frames)   # the process's own drops included
    assert received + dropped == 20000 + 2   # the two bad datagrams are counted


def test_deep_nesting_and_huge_numbers_are_malformed_points_not_a_dead_relay(monkeypatch,
                                                                            tmp_path):
    # One 8,000-byte "[[[..." datagram (RecursionError) or a 400-digit number
    # (OverflowError) stopped the relay's thread: metrics then stopped
    # silently while training went on.
    huge = "1" + "0" * 400
    for bad in ([int(huge), 1.0, {"loss": 1.0}], [1, 1.0, {"loss": int(huge)}],
                [1, int(huge), {"x": 1}]):
        assert parse_point(bad) is None, bad
    assert parse_frame({"type": "metrics", "now": int(huge), "points": []}) is None
    monkeypatch.chdir(tmp_path)
    frames = []
    relay = MetricsRelay(frames.append).start()
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.sendto(b"[" * 8000, relay.path)
        sock.sendto(("[1, 2.0, {\"loss\": %s}]" % huge).encode(), relay.path)
        sock.sendto(b"[5, 2.0, {\"loss\": 0.5}]", relay.path)
        sock.close()
    finally:
        relay.close()
    # The point after the two bad ones went; the bad ones are counted.
    assert [point[0] for frame in frames for point in frame["points"]] == [5]
    assert sum(frame["dropped"] for frame in frames) == 2


def test_counts_of_dropped_points_stop_at_what_run_json_holds(monkeypatch, tmp_path):
    # A task's 2,000 datagrams "dropped 2**53 - 1": the sum past int64 made
    # tfrun fail ("RunFile.metrics_dropped: ... int out of range") and its
    # run.json unreadable.
    monkeypatch.chdir(tmp_path)
    frames = []
    relay = MetricsRelay(frames.append).start()
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        for _ in range(2000):
            sock.sendto(dropped_datagram(MAX_STEP - 1), relay.path)
        sock.sendto(b"[5, 2.0, {\"loss\": 0.5}]", relay.path)
        sock.close()
    finally:
        relay.close()
    assert all(frame["dropped"] < MAX_STEP for frame in frames)
    assert parse_frame({"now": 1.0, "points": [], "dropped": MAX_STEP}) is None
    metrics = Metrics(began=0.0)
    for frame in frames + [{"now": 1.0, "points": [], "dropped": MAX_STEP - 1}] * 3:
        metrics.add("worker:0", [], parse_frame(frame)[2])
    assert metrics.dropped == MAX_STEP - 1


def test_the_relay_ends_when_closed_not_when_its_wait_times_out(monkeypatch, tmp_path):
    """A task's exit waits for its relay: ``close`` wakes the thread at once
    (it waited up to POLL, 0.25 s, at every task's end)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(metrics_relay, "POLL", 600.0)
    frames = []
    relay = MetricsRelay(frames.append).start()
    relay.close(timeout=20)
    assert not relay._thread.is_alive()
    assert frames == [] and relay.malformed == 0   # the wake-up is no datagram of the command's


def _dead_relay_directory(base, name, age, owner=None, extra=False):
    """What a relay killed ``age`` seconds ago leaves in ``base``: its
    directory and a socket file nobody is bound to."""
    directory = base / name
    directory.mkdir(mode=0o700)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(directory / "m"))
    sock.close()
    if extra:
        (directory / "not-a-relay-s").write_text("")
    if owner is not None:
        os.chown(directory, owner, owner)
    then = time.time() - age
    os.utime(directory, (then, then))
    return directory


def test_relays_killed_before_they_removed_their_socket_are_swept_by_the_next_one(
        monkeypatch, tmp_path, request):
    """A Mesos agent's sandbox paths are too long for a socket's: relays
    live in the temporary directory, where a SIGKILLed one (an OOM kill, a
    kill after the grace period) leaves its directory. The next relay
    started there removes this user's dead ones; nothing else."""
    sandbox = tmp_path / ("sandbox-" + "x" * metrics_relay.MAX_PATH)
    sandbox.mkdir()
    shared = pathlib.Path(tempfile.mkdtemp(prefix="tfm-", dir="/tmp"))   # short enough
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    env = dict(os.environ, TMPDIR=str(shared))
    killed = subprocess.Popen(
        [sys.executable, "-c", "from tfmesos.task.metrics_relay import MetricsRelay; "
         "print(MetricsRelay(print).start().path, flush=True); import time; time.sleep(600)"],
        cwd=sandbox, env=env, stdout=subprocess.PIPE, text=True)
    try:
        killed_dir = os.path.dirname(killed.stdout.readline().strip())
    finally:
        killed.kill()
        killed.wait()
        killed.stdout.close()
    assert os.path.dirname(killed_dir) == str(shared)   # the sandbox's path was too long
    then = time.time() - 2 * metrics_relay.SWEEP_AGE
    os.utime(killed_dir, (then, then))
    old = 2 * metrics_relay.SWEEP_AGE
    ours = metrics_relay._host_prefix()
    dead = _dead_relay_directory(shared, ours + "dead", old)
    young = _dead_relay_directory(shared, ours + "young", 1)
    full = _dead_relay_directory(shared, ours + "full", old, extra=True)
    others = _dead_relay_directory(shared, ours + "others", old,
                                   owner=65534) if os.geteuid() == 0 else None
    # another host's (a temporary directory on NFS): its socket refuses us, yet it may live
    elsewhere = _dead_relay_directory(shared, metrics_relay.PREFIX + "0badc0de-live", old)
    unrelated = shared / "unrelated"
    unrelated.mkdir()
    # a forged entry: a link with a relay's name to a dead relay's directory elsewhere
    target = _dead_relay_directory(tmp_path, "target", old)
    forged = shared / (ours + "forged")
    forged.symlink_to(target)
    monkeypatch.chdir(sandbox)
    monkeypatch.setenv("TMPDIR", str(shared))
    live = MetricsRelay(lambda frame: None).start()
    os.utime(os.path.dirname(live.path), (then, then))
    relay = MetricsRelay(lambda frame: None).start()
    try:
        left = set(os.listdir(shared))
        assert os.path.basename(killed_dir) not in left and dead.name not in left
        assert os.path.exists(target / "m")   # nothing followed through the link
        kept = {young.name, full.name, unrelated.name, elsewhere.name, forged.name,
                os.path.basename(os.path.dirname(live.path)),
                os.path.basename(os.path.dirname(relay.path))}
        if others is not None:
            kept.add(others.name)
        assert left == kept
        assert os.path.exists(live.path)   # a live relay keeps its socket
    finally:
        relay.close()
        live.close()

# -- the rendezvous ----------------------------------------------------------------

@contextlib.contextmanager
def registered(task_id):
    """(a rendezvous, a client registered with it as ``task_id``)."""
    rdv = make_rendezvous()
    rdv.expect(task_id)
    try:
        client = Client(rdv.port)
        client.register(task_id)
        client.registered()
        yield rdv, client
        client.close()
    finally:
        rdv.close()


def test_the_rendezvous_turns_metrics_frames_into_events_on_its_clock():
    with registered("good") as (rdv, client):
        # The task's clock is an hour ahead: its points still land in the past.
        ahead = time.time() + 3600
        client.send({"type": "metrics", "now": ahead, "dropped": 2,
                     "points": [[5, ahead - 2.0, {"loss": 0.5}], [6, ahead, {"loss": None}],
                                ["bad"]]})
        client.send({"type": "metrics", "now": 1.0, "points": "nope"})   # left out
        client.send({"type": "log", "stream": "stdout", "data": "still here\n"})
        event = next_event(rdv, TaskMetrics)
        assert event.task_id == "good" and event.dropped == 3
        [(step5, at5, values5), (step6, at6, values6)] = event.points
        assert (step5, values5, step6, values6) == (5, {"loss": 0.5}, 6, {"loss": None})
        assert abs(at6 - time.time()) < 5 and abs(at6 - at5 - 2.0) < 0.01


def test_a_frame_that_waited_for_the_cpu_does_not_move_its_points_back_in_time():
    # A loaded machine: one frame reached tfrun 0.5 s after it was sent, the
    # next at once. Placed by each frame's own transit, step 1 landed before
    # step 0 (a series' times went backwards: CI saw 0.653 then 0.636).
    with registered("task") as (rdv, client):
        late = time.time() - 0.5
        client.send({"type": "metrics", "now": late, "points": [[0, late - 0.01, {"x": 0.0}]]})
        first = next_event(rdv, TaskMetrics)
        prompt = time.time()
        client.send({"type": "metrics", "now": prompt,
                     "points": [[1, late + 0.2, {"x": 1.0}], [2, prompt, {"x": 2.0}]]})
        second = next_event(rdv, TaskMetrics)
    times = [at for _, at, _ in first.points + second.points]
    assert times == sorted(times), times
    # The prompt frame's transit is the better estimate: step 2 is where it was.
    assert abs(times[2] - prompt) < 0.25


def test_a_task_clock_stepped_back_freezes_its_points_for_seconds_not_for_the_step(monkeypatch):
    # NTP stepped the agent's clock back an hour: every later point was put
    # at the moment of the last one until the hour had passed (steps/s read
    # 6.48 where the task made 2.0).
    from tfmesos.core import metric_clock
    later = [0.0]
    monkeypatch.setattr(metric_clock, "time", types.SimpleNamespace(
        monotonic=lambda: time.monotonic() + later[0]))
    with registered("task") as (rdv, client):
        sent = time.time()
        client.send({"type": "metrics", "now": sent, "points": [[0, sent - 5, {"x": 0.0}]]})
        first = next_event(rdv, TaskMetrics)
        later[0] = metric_clock.OFFSET_WINDOW + 1   # the frames of a while later
        stepped = time.time() - 3600
        client.send({"type": "metrics", "now": stepped + 0.5,
                     "points": [[1, stepped + 0.2, {"x": 1.0}], [2, stepped + 0.5, {"x": 2.0}]]})
        second = next_event(rdv, TaskMetrics)
    times = [at for _, at, _ in first.points + second.points]
    assert times == sorted(times), times
    assert abs(times[2] - times[1] - 0.3) < 0.01, times   # as far apart as the task logged them


# -- the record's series -----------------------------------------------------------

def test_a_series_keeps_at_most_500_points_spread_over_the_whole_run():
    series = MetricSeries(task="worker:0", name="loss")
    for step in range(100000):
        add_value(series, step, step / 1000, 1.0 / (step + 1))
    assert len(series.steps) < SERIES_POINTS == 500
    assert len(series.steps) == len(series.values) == len(series.times)
    assert series.stride & (series.stride - 1) == 0 and series.count == 100000
    assert series.steps[0] == 0 and series.steps[-1] > 99000
    assert {b - a for a, b in zip(series.steps, series.steps[1:])} == {series.stride}
    assert (series.last, series.last_step, series.last_time) == (1e-5, 99999, 99.999)


def test_a_run_keeps_a_bounded_number_of_series_and_counts_what_it_leaves_out():
    metrics = Metrics(began=1000.0, max_series=4, max_per_task=3)
    metrics.add("worker:0", [(0, 1001.0, {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})], dropped=5)
    metrics.add("worker:1", [(0, 1001.0, {"a": 1.0, "b": 2.0})])
    assert [(s.task, s.name) for s in metrics.series] == [
        ("worker:0", "a"), ("worker:0", "b"), ("worker:0", "c"), ("worker:1", "a")]
    assert metrics.dropped == 5 + 1 + 1
    assert metrics.series[0].times == [1.0]


def test_steps_per_second_and_latest_values():
    metrics = Metrics(began=0.0)
    metrics.add("worker:0", [(step * 10, step * 0.5, {"loss": 1.0 / (step + 1)})
                             for step in range(100)])
    assert metrics.latest("worker:0") == (990, [("loss", 0.01)])
    assert metrics.steps_per_second("worker:0") == pytest.approx(20.0)
    assert metrics.latest("ps:0") is None and metrics.steps_per_second("ps:0") is None



def test_a_task_restarted_from_an_earlier_step_is_measured_from_its_restart():
    # A whole restart resumes from a checkpoint: worker:0 reached step 700
    # at 20 steps/s, then came back at step 500. Before, its latest step
    # stayed 700 and its steps/s stayed the old 20.0 (no step above 700
    # arrived to move it) while it now ran at 5 steps/s.
    metrics = Metrics(began=0.0)
    metrics.add("worker:0", [(step, step / 20.0, {"loss": 1.0, "acc": 0.5})
                             for step in range(0, 701, 10)])
    assert metrics.latest("worker:0")[0] == 700
    metrics.add("worker:0", [(500 + step, 100.0 + step / 5.0, {"loss": 0.9})
                             for step in range(0, 51, 5)])
    assert metrics.latest("worker:0") == (550, [("loss", 0.9), ("acc", 0.5)])
    assert metrics.steps_per_second("worker:0") == pytest.approx(5.0)


def test_the_latest_step_of_a_record_carried_on_is_its_newest_points():
    # tfmesos attach carries on the series of a run that restarted: the
    # newest point (by time) says the step, not the highest one.
    before = Metrics(began=0.0)
    before.add("worker:0", [(700, 10.0, {"acc": 0.5}), (500, 20.0, {"loss": 0.9})])
    after = Metrics(began=0.0)
    after.adopt(before.series)
    assert after.latest("worker:0")[0] == 500
    # tfmesos show alike, and its steps/s is the restarted stretch's.
    restarted = Metrics(began=0.0)
    restarted.add("worker:0", [(step, step / 20.0, {"loss": 1.0}) for step in range(0, 701, 10)]
                  + [(500 + step, 100.0 + step / 5.0, {"loss": 0.9}) for step in range(0, 51, 5)])
    [(task, step, values, rate)] = summaries(restarted.series)
    assert (task, step, values) == ("worker:0", 550, [("loss", 0.9)])
    assert rate == pytest.approx(5.0)


def test_a_restarts_line_starts_again_where_the_steps_go_back():
    # The chart's line of a series that went 0..700 then 500..550 drew a
    # stroke from step 700 back to step 500 across the chart.
    from tfmesos.record.report_metrics import _segments
    points = [(0, 1.0), (700, 0.5), (500, 0.9), (550, 0.8), (550, 0.7), (600, None),
              (610, 0.6)]
    assert _segments(points) == [[(0, 1.0), (700, 0.5)], [(500, 0.9), (550, 0.8), (550, 0.7)],
                                 [(610, 0.6)]]


def _series_flood_record():
    """A run's record after worker:0 logged 10,000 names, one a step
    (``m00000`` at step 0 ... ``m09999`` at 9999): 32 series kept."""
    record = RunRecord(None, RunFile(mode="replica"), [], forwarding=False)
    record.metrics(None, [(step, time.time(), {"m%05d" % step: float(step)})
                          for step in range(10000)], source="worker:0")
    return record


class _EndedRun:
    def __init__(self, record):
        self.record, self.run_id = record, "5eed0044"


def test_tfruns_last_metrics_say_the_points_past_the_series_cap_and_the_latest_step(capsys):
    # Before: "tfrun: metrics: worker:0 step 31 · m00000 0 ..." and not a word
    # of the 9,968 points left out (only tfmesos show and the report said so).
    record = _series_flood_record()
    assert record.latest_metrics()[0][1] == 9999
    print_metrics(_EndedRun(record))
    err = capsys.readouterr().err
    assert err.startswith("tfrun: metrics: worker:0 step 9999 · m00000 0 "), err
    assert "tfrun: metrics: 9968 points left out: more series than a run keeps (32 a task, " \
        "256 in all)\n" in err, err
    # The status line says so too, short.
    line = metrics_line(_EndedRun(record))
    assert line.startswith("worker:0 step 9999 · ") and line.endswith(" · 9968 points left out")


def test_the_points_left_out_are_said_in_the_words_of_their_cause():
    metrics = Metrics(began=0.0, max_series=4, max_per_task=1)
    assert metrics.left_out_note() is None
    metrics.add("worker:0", [(0, 1.0, {"a": 1.0})], dropped=3)   # thinned by the task
    assert metrics.left_out_note() == "3 points left out: a flood thinned by the tasks"
    metrics.add("worker:0", [(1, 1.0, {"a": 1.0, "b": 2.0})])   # b: over the cap
    assert metrics.left_out_note() == "4 points left out: 3 of a flood thinned by the tasks, " \
        "1 of more series than a run keeps (1 a task, 4 in all)"
    # run.json keeps the total only: tfmesos show says both causes.
    assert left_out_note(12) == "12 points left out: a flood thinned by the tasks, or more " \
        "series than a run keeps"

# -- what the user sees --------------------------------------------------------------

class _Record:
    def __init__(self, latest):
        self._latest = latest

    def latest_metrics(self):
        return self._latest

    def metrics_left_out(self):
        return 0, None


class _Run:
    def __init__(self, latest):
        self.record = _Record(latest)


def test_the_status_line_shows_the_chiefs_latest_metrics_and_steps_per_second():
    latest = [("worker:1", 30, [("loss", 0.9)], None),
              ("worker:0", 120, [("loss", 0.41234567), ("accuracy", 0.88), ("x", None)], 12.34)]
    assert metrics_line(_Run(latest)) == \
        "worker:0 step 120 · loss 0.4123 accuracy 0.88 x n/a · 12.3 steps/s"
    assert metrics_line(_Run([])) is None
    assert describe_metrics("w", 1, [("m%d" % i, 1.0) for i in range(8)], 1234.5, limit=2) \
        == "w step 1 · m0 1 m1 1 ... · 1234 steps/s"
    out = io.StringIO()
    progress = Progress(out, tty=False, interval=0.0, clock=iter(range(100)).__next__)
    progress.ready()
    progress(_Run([]))                      # no metrics: no line
    progress(_Run(latest))
    assert out.getvalue() == "tfrun: worker:0 step 120 · loss 0.4123 accuracy 0.88 x n/a · " \
        "12.3 steps/s\n"


def test_the_status_line_on_a_terminal_makes_way_for_task_output():
    out, idle = io.StringIO(), [True]
    progress = Progress(out, tty=True, clock=iter(range(0, 100, 2)).__next__,
                        idle=lambda: idle[0])
    progress.ready()
    progress(_Run([("worker:0", 1, [("loss", 0.5)], None)]))
    assert out.getvalue().endswith("\rtfrun: worker:0 step 1 · loss 0.5\033[K")
    progress.hide()
    assert out.getvalue().endswith("\r\033[K")
    idle[0] = False    # a task's line is unfinished: not drawn over it
    before = out.getvalue()
    progress(_Run([("worker:0", 2, [("loss", 0.4)], None)]))
    assert out.getvalue() == before


def series(task, name, values, start=0):
    one = MetricSeries(task=task, name=name)
    for step, value in enumerate(values, start):
        add_value(one, step, step * 0.25, value)
    return one


def metrics_run(root):
    directory = write_run(root, "5eed0042")
    run = Run.load(directory)
    run.file.metrics = [series("worker:0", "loss", [2.0, 1.0, None, 0.5]),
                        series("worker:0", "accuracy", [0.1, 0.5, 0.7, 0.9]),
                        series("worker:1", "loss", [2.1, 1.1, 0.6, 0.4]),
                        series("worker:1", "accuracy", [0.2]),
                        series("client", "<b>&evil\"", [1.0, 2.0])]
    run.file.metrics_dropped = 12
    return run


def test_show_prints_each_tasks_latest_metrics(tmp_path):
    run = metrics_run(tmp_path)
    out = io.StringIO()
    show_run(run, out)
    text = out.getvalue()
    assert "metrics (latest; steps/s averaged over the run):\n" \
        "  worker:0 step 3 · loss 0.5 accuracy 0.9 · 4.00 steps/s\n" \
        "  worker:1 step 3 · loss 0.4 accuracy 0.2 · 4.00 steps/s\n" in text
    assert "(12 points left out" in text
    assert [(t, s) for t, s, _, _ in summaries(run.file.metrics)] == [
        ("worker:0", 3), ("worker:1", 3), ("client", 1)]


def edited_run(tmp_path, run_id, edit):
    """A run directory whose run.json ``edit`` (a function of its JSON) changed:
    (the directory, its run.json)."""
    directory = write_run(tmp_path, run_id)
    path = os.path.join(directory, "run.json")
    with open(path) as handle:
        data = json.load(handle)
    edit(data)
    with open(path, "w") as handle:
        json.dump(data, handle)
    return directory, path


def test_show_of_a_record_whose_series_lists_differ_in_length_is_one_line(tmp_path, capsys):
    # An IndexError traceback in the metrics' summary before.
    def uneven(data):
        data["metrics"] = [MetricSeries(task="worker:0", name="loss", last=1.0, last_step=1,
                                        count=1, steps=[1], values=[1.0], times=[]).to_dict()]
    directory, path = edited_run(tmp_path, "5eed0043", uneven)
    assert main(["show", directory]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "tfmesos: error: %s is not a run record: run.json.metrics[0]: its " \
        "steps, values and times differ in length (1, 1, 0)\n" % path


def test_a_record_with_an_exit_code_no_wait_status_holds_is_not_a_run_record(tmp_path,
                                                                            capsys):
    # Printed whole (401 digits) by tfmesos runs and show before.
    def huge(data):
        data["outcome"]["exit_code"] = 10 ** 400
    directory, path = edited_run(tmp_path, "5eed0044", huge)
    assert main(["show", directory]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "tfmesos: error: %s is not a run record: run.json.outcome." \
        "exit_code: expected integer from -255 to 255, got int out of range\n" % path
    assert main(["runs", "--runs-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "5eed0044" not in captured.out and "0" * 100 not in captured.out + captured.err
    shutil.rmtree(directory)   # the suite holds every run.json left to docs/run.schema.json


def test_the_report_draws_a_chart_per_metric_and_a_line_per_task(tmp_path):
    page = render(metrics_run(tmp_path))
    assert "<h2>Metrics</h2>" in page and "12 points were left out" in page
    charts = dict(re.findall(r'<svg[^>]*aria-label="metric (.*?) per task">(.*?)</svg>', page))
    assert set(charts) == {"loss", "accuracy", "&lt;b&gt;&amp;evil&quot;"}
    lines = {name: re.findall(r'<polyline class="metric" data-task="([^"]*)" points="([^"]*)"',
                              chart) for name, chart in charts.items()}
    # worker:0's loss is cut where it was not finite (NaN): two segments.
    assert [task for task, _ in lines["loss"]] == ["worker:0", "worker:0", "worker:1"]
    assert [len(points.split()) for _, points in lines["loss"]] == [2, 1, 4]
    # A single value is a dot.
    assert [task for task, _ in lines["accuracy"]] == ["worker:0", "worker:1"]
    assert '<circle' in charts["accuracy"]
    for _, points in sum(lines.values(), []):
        for point in points.split():
            assert all(math.isfinite(float(v)) for v in point.split(","))
    assert "<b>&evil" not in page


def test_two_cluster_blocks_open_at_once_each_get_their_own_threads_points():
    # cluster() in two threads at once: one recorder for the process, so
    # the second block took the first's points, and lost its own once the
    # first closed ("not in a tfmesos run" while its block was open).
    from tfmesos.task import user_metrics
    got = {"A": [], "B": []}
    tokens = {}
    opened, logged = threading.Barrier(2, timeout=30), threading.Barrier(2, timeout=30)

    def block(name, closes_first):
        tokens[name] = user_metrics.record_locally(lambda point: got[name].append(point[0]))
        opened.wait()
        assert user_metrics.log_metrics(step=1, loss=1.0)
        logged.wait()
        if closes_first:
            user_metrics.stop_recording(tokens[name])
        logged.wait()
        if not closes_first:
            assert user_metrics.log_metrics(step=2, loss=2.0)   # A's block is closed
            user_metrics.stop_recording(tokens[name])
    threads = [threading.Thread(target=block, args=("A", True), daemon=True),
               threading.Thread(target=block, args=("B", False), daemon=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert got == {"A": [1], "B": [1, 2]}
    # A thread of no block's: the newest block open; none open: not recorded.
    token = user_metrics.record_locally(lambda point: got["A"].append(point[0]))
    helper = threading.Thread(target=user_metrics.log_metrics, kwargs={"step": 7, "x": 1.0},
                              daemon=True)
    helper.start()
    helper.join(30)
    user_metrics.stop_recording(token)
    assert got["A"] == [1, 7]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert not user_metrics.log_metrics(step=8, x=1.0)


def test_the_callers_own_points_are_on_the_records_clock_after_a_step(monkeypatch):
    # tfmesos.log_metrics in the process that runs cluster(): its points kept
    # time.time(); after a step back of an hour every one sat at the run's
    # start for the hour (read-through of 18a2654).
    import queue

    from tfmesos.core.fine_grained import LocalMetrics
    from tfmesos.record import times
    events = queue.SimpleQueue()
    local = LocalMetrics(events, "(cluster)")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600)
    local((7, time.time(), {"loss": 0.5}))
    local.flush()
    [(step, at, values)] = events.get_nowait().points
    assert step == 7 and abs(at - times.now()) < 1.0, at - times.now()
