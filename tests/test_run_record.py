"""run.json tells the truth at the end (no processes: the record driven by
hand). Every attempt ends with a terminal state and where it came from;
the outcome carries tfrun's exit code."""

import json
import queue

import pytest
from addict import Dict
from tmpfs_mounts import mounted_tmpfs

from tfmesos.core.events import StatusUpdate, TaskExited, TaskOutput
from tfmesos.core.jobs import Job
from tfmesos.core.last_updates import record_leftovers
from tfmesos.core.phase import Phase
from tfmesos.core.placement import Assignment
from tfmesos.core.scheduler import Launch
from tfmesos.core.slots import make_slots
from tfmesos.exceptions import LaunchTimeout, TaskFailed
from tfmesos.record.hints import hint_for
from tfmesos.record.run_dirs import run_json_text
from tfmesos.record.run_record import RunRecord
from tfmesos.record.schema import RunFile


def launched_record(tmp_path, mode="replica"):
    """(record, slots): ps:0, worker:0 and worker:1 launched and running."""
    slots = make_slots([Job("ps", 1), Job("worker", 2)])
    record = RunRecord(str(tmp_path), RunFile(mode=mode), slots, forwarding=mode == "replica")
    for number, slot in enumerate(slots, 1):
        assignment = Assignment(None, "o1", "a1", "host", [], 31000 + number, [])
        record.launched(Launch(slot, "t-%s" % slot.name, 1, "o1", assignment))
        update(record, slot.name, "TASK_RUNNING")
    return record, slots


def make_record(tmp_path, mode="replica"):
    return launched_record(tmp_path, mode)[0]


def update(record, name, state, message="", task_id=None):
    record.status(Dict(task_id={"value": task_id or "t-%s" % name}, state=state,
                       message=message, source="SOURCE_EXECUTOR"))


def saved(record):
    with open(record.directory + "/run.json", encoding="utf-8") as handle:
        return json.load(handle)


def ends(data):
    return {task["name"]: (task["state"], task["exit_code"],
                           task["attempts"][-1]["states"][-1]["source"])
            for task in data["tasks"]}


def test_mesos_updates_then_exit_frames_then_stopped_by_tfrun(tmp_path):
    record = make_record(tmp_path)
    record.exited("t-worker:0", 0)
    update(record, "worker:0", "TASK_FINISHED")          # Mesos' update came
    record.exited("t-worker:1", 0)                       # only the exit frame
    record.outcome("succeeded")
    record.finish()                                      # ps:0: neither
    data = saved(record)
    assert ends(data) == {"worker:0": ("TASK_FINISHED", 0, "SOURCE_EXECUTOR"),
                          "worker:1": ("TASK_FINISHED", 0, "exit frame"),
                          "ps:0": ("TASK_KILLED", None, "stopped by tfrun")}
    assert data["outcome"]["exit_code"] == 0
    [worker_1] = [task["attempts"][0]["states"][-1] for task in data["tasks"]
                  if task["name"] == "worker:1"]
    assert "Mesos' update did not come before the framework was torn down" \
        in worker_1["message"]


def test_an_exit_frame_with_a_code_is_task_failed(tmp_path):
    record = make_record(tmp_path)
    record.exited("t-ps:0", 3)
    record.ended(TaskFailed("task ps:0 exited with code 3", "ps:0", None, 3), Phase.RUNNING)
    record.finish()
    data = saved(record)
    assert ends(data)["ps:0"] == ("TASK_FAILED", 3, "exit frame")
    assert data["outcome"]["exit_code"] == 3 and data["outcome"]["status"] == "failed"


def test_what_is_still_queued_at_the_stop_is_recorded(tmp_path):
    record = make_record(tmp_path)
    events = queue.Queue()
    events.put(TaskOutput("t-ps:0", "stderr", "bye\n"))
    events.put(TaskExited("t-worker:0", 0))
    events.put(StatusUpdate(Dict(task_id={"value": "t-worker:1"}, state="TASK_FINISHED",
                                 message="", source="SOURCE_EXECUTOR")))
    shown = []
    record_leftovers(record, events, show=lambda *output: shown.append(output))
    record.finish()
    # and its output shown as the run's was (a task's last lines can come
    # after Mesos said it finished: lost on the console once in CI)
    assert shown == [("t-ps:0", "stderr", "bye\n")]
    assert ends(saved(record)) == {"worker:0": ("TASK_FINISHED", 0, "exit frame"),
                                   "worker:1": ("TASK_FINISHED", 0, "SOURCE_EXECUTOR"),
                                   "ps:0": ("TASK_KILLED", None, "stopped by tfrun")}
    assert (tmp_path / "ps.0.stderr").read_text() == "bye\n"


@pytest.mark.parametrize("error, phase, status, code", [
    (KeyboardInterrupt(), Phase.RUNNING, "interrupted", 130),
    (LaunchTimeout("the cluster was not complete after 3 s"), Phase.FORMING, "aborted", 1),
    (TaskFailed("task worker:1 ended: TASK_LOST", "worker:1", "TASK_LOST"), Phase.RUNNING,
     "failed", 1),
])
def test_the_outcome_carries_the_code_tfrun_exits_with(tmp_path, error, phase, status, code):
    record = make_record(tmp_path)
    record.ended(error, phase)
    record.finish()
    data = saved(record)
    assert (data["outcome"]["status"], data["outcome"]["exit_code"]) == (status, code)
    assert all(state == "TASK_KILLED" for state, _, _ in ends(data).values())



def test_a_failure_after_all_replaces_a_success_and_no_other_outcome(tmp_path):
    # tfmesos.run: its trainers were done ("succeeded"), then the value failed the call.
    from tfmesos.exceptions import ClusterError
    record = make_record(tmp_path)
    record.outcome("succeeded")
    record.failed_after_all(ClusterError("worker:0's value does not unpickle here"),
                            Phase.RUNNING)
    record.failed_after_all(KeyboardInterrupt(), Phase.RUNNING)   # the first failure stays
    record.finish()
    outcome = saved(record)["outcome"]
    assert (outcome["status"], outcome["message"], outcome["exit_code"]) == (
        "failed", "worker:0's value does not unpickle here", 1)


def test_fine_grained_tasks_are_stopped_by_cluster_and_keep_a_null_code(tmp_path):
    record = make_record(tmp_path, mode="fine")
    record.finish()
    data = saved(record)
    assert {source for _, _, source in ends(data).values()} == {"stopped by cluster()"}
    assert data["outcome"] == {"status": "succeeded", "message": None, "task": None,
                               "exit_code": None, "hint": None, "by": None}


def attempts(data, name):
    return [task for task in data["tasks"] if task["name"] == name][0]["attempts"]


MISSING = hint_for(["ModuleNotFoundError: No module named 'sklearn'"])


def test_a_failed_attempt_keeps_the_hint_for_its_failure_through_a_restart(tmp_path):
    record, slots = launched_record(tmp_path)
    record.output("t-worker:1", "stderr", "ModuleNotFoundError: No module named 'sklearn'\n")
    record.exited("t-worker:1", 1, when=1e9)
    record.exited("t-worker:0", 0)    # stopped for the restart: a clean end
    record.restarting(1, "failure", "worker:1", "worker:1 exited with code 1", 0.5)
    saved_then = saved(record)
    [failed] = attempts(saved_then, "worker:1")
    assert failed["hint"] == MISSING and failed["exited"] == "2001-09-09T01:46:40.000Z"
    assert [a["hint"] for a in attempts(saved_then, "worker:0")] == [None]
    record.launched(Launch(slots[2], "t-worker:1-2", 2, "o2",
                           Assignment(None, "o2", "a1", "host", [], 31009, [])))
    update(record, "worker:1", "TASK_RUNNING", task_id="t-worker:1-2")
    record.exited("t-worker:1-2", 0)
    record.finish()
    data = saved(record)
    assert [(a["attempt"], a["hint"]) for a in attempts(data, "worker:1")] == [(1, MISSING),
                                                                             (2, None)]
    assert data["outcome"]["status"] == "succeeded" and data["outcome"]["hint"] is None


def test_a_run_stopped_as_it_restarted_says_so(tmp_path):
    # A cluster() block that ended during a restart's back-off: "aborted",
    # no message, and nothing raised to say why.
    record, _ = launched_record(tmp_path, mode="fine")
    record.restarting(1, "failure", "worker:1", "worker:1 exited with code 137", 10.0)
    record.stopped_in(Phase.RESTARTING, None)
    record.finish()
    outcome = saved(record)["outcome"]
    assert (outcome["status"], outcome["message"]) == (
        "aborted", "the run was stopped while it restarted after worker:1 exited with code 137")


def test_the_outcome_hint_is_the_failed_attempts(tmp_path):
    record = make_record(tmp_path, mode="fine")
    update(record, "worker:0", "TASK_FAILED", "Memory limit exceeded: Requested: 64MB")
    record.ended(TaskFailed("task worker:0 ended: TASK_FAILED", "worker:0", "TASK_FAILED"),
                 Phase.RUNNING)
    record.finish()
    data = saved(record)
    [attempt] = attempts(data, "worker:0")
    assert attempt["hint"].startswith("the task ran out of memory: give it more, e.g. tfrun "
                                      "-Mw 4096")
    assert data["outcome"]["hint"] == attempt["hint"]
    assert [a["hint"] for a in attempts(data, "ps:0")] == [None]   # stopped by cluster()


def test_a_terminal_state_is_the_attempt_s_last(tmp_path):
    """Mesos never changes a terminal state: a reconciliation that finds the
    task forgotten (TASK_LOST "Task is unknown") after it failed is not its end."""
    record = make_record(tmp_path)
    update(record, "worker:1", "TASK_FAILED", "Command exited with status 1")
    record.status(Dict(task_id={"value": "t-worker:1"}, state="TASK_LOST",
                       message="Task is unknown to the agent", source="SOURCE_MASTER",
                       reason="REASON_RECONCILIATION"))
    record.finish()
    [worker_1] = [task for task in saved(record)["tasks"] if task["name"] == "worker:1"]
    assert [s["state"] for s in worker_1["attempts"][0]["states"]] == ["TASK_RUNNING",
                                                                      "TASK_FAILED"]
    assert (worker_1["state"], worker_1["exit_code"]) == ("TASK_FAILED", 1)


# -- tasks tfrun stopped end as stopped, and Mesos' own word is waited for ------------

def last_states(data):
    return {task["name"]: (task["attempts"][-1]["states"][-1]["state"],
                           task["attempts"][-1]["states"][-1]["source"]) for task in data["tasks"]}


def test_a_ps_stopped_after_the_workers_finished_ends_killed_by_tfrun(tmp_path):
    record = make_record(tmp_path)
    for name in ("worker:0", "worker:1"):
        record.exited("t-%s" % name, 0, stopped=False)
        update(record, name, "TASK_FINISHED", "Command exited with status 0")
    record.outcome("succeeded")
    for name in ("ps:0", "worker:0", "worker:1"):   # the stop of the run
        record.stopping("t-%s" % name)
    record.exited("t-ps:0", 0, stopped=True)
    update(record, "ps:0", "TASK_FINISHED", "Command exited with status 0")
    record.finish()
    data = saved(record)
    assert last_states(data) == {"ps:0": ("TASK_KILLED", "stopped by tfrun"),
                                 "worker:0": ("TASK_FINISHED", "SOURCE_EXECUTOR"),
                                 "worker:1": ("TASK_FINISHED", "SOURCE_EXECUTOR")}
    [ps] = attempts(data, "ps:0")
    assert ps["states"][-1]["message"] == "stopped by tfrun; Mesos reported TASK_FINISHED: " \
                                          "Command exited with status 0"
    assert data["outcome"]["status"] == "succeeded" and data["outcome"]["exit_code"] == 0
    assert ps["hint"] is None


def test_a_task_stopped_without_saying_so_is_killed_and_a_finished_one_is_finished(tmp_path):
    """An exit frame without ``stopped`` (a task side before it) after the
    stop: stopped; one that says it ended by itself keeps its end."""
    record = make_record(tmp_path)
    for name in ("ps:0", "worker:0", "worker:1"):   # Ctrl-C
        record.stopping("t-%s" % name)
    record.exited("t-worker:0", 0)
    record.exited("t-worker:1", 0, stopped=False)
    record.ended(KeyboardInterrupt(), Phase.RUNNING)
    record.finish()
    assert last_states(saved(record)) == {"ps:0": ("TASK_KILLED", "stopped by tfrun"),
                                          "worker:0": ("TASK_KILLED", "stopped by tfrun"),
                                          "worker:1": ("TASK_FINISHED", "exit frame")}


def test_mesos_own_kill_stays_and_an_update_before_the_exit_frame_is_corrected(tmp_path):
    record = make_record(tmp_path)
    for name in ("ps:0", "worker:0", "worker:1"):
        record.stopping("t-%s" % name)
    update(record, "ps:0", "TASK_KILLED", "Command terminated with signal Terminated")
    update(record, "worker:0", "TASK_FINISHED", "Command exited with status 0")
    record.exited("t-worker:0", 0, stopped=True)    # its exit frame came after Mesos' update
    record.exited("t-worker:1", 0, stopped=True)
    update(record, "worker:1", "TASK_FAILED", "Memory limit exceeded")  # failed all the same
    record.finish()
    assert last_states(saved(record)) == {"ps:0": ("TASK_KILLED", "SOURCE_EXECUTOR"),
                                          "worker:0": ("TASK_KILLED", "stopped by tfrun"),
                                          "worker:1": ("TASK_FAILED", "SOURCE_EXECUTOR")}


def test_fine_grained_servers_stopped_by_cluster_end_killed(tmp_path):
    record = make_record(tmp_path, mode="fine")
    record.stopping("t-worker:0")
    update(record, "worker:0", "TASK_FINISHED", "Command exited with status 0")
    record.finish()
    assert last_states(saved(record))["worker:0"] == ("TASK_KILLED", "stopped by cluster()")


class ClockQueue:
    """A queue of ``(at, event)`` on a fake clock: ``get`` moves the clock to
    the next event's time, or by its whole timeout when none comes in it."""

    def __init__(self, items):
        self.now, self.items, self.waited = 0.0, list(items), []

    def clock(self):
        return self.now

    def get_nowait(self):
        if self.items and self.items[0][0] <= self.now:
            return self.items.pop(0)[1]
        raise queue.Empty

    def get(self, timeout):
        self.waited.append(timeout)
        if self.items and self.items[0][0] <= self.now + timeout:
            at, event = self.items.pop(0)
            self.now = max(self.now, at)
            return event
        self.now += timeout
        raise queue.Empty


def finished(name):
    return StatusUpdate(Dict(task_id={"value": "t-%s" % name}, state="TASK_FINISHED",
                             message="", source="SOURCE_EXECUTOR"))


def test_the_wait_for_mesos_ends_as_soon_as_every_update_came(tmp_path):
    from tfmesos.core.last_updates import wait_for_mesos_ends
    record = make_record(tmp_path)
    record.exited("t-worker:1", 0, stopped=False)
    update(record, "worker:1", "TASK_FINISHED")
    events = ClockQueue([(0.0, TaskExited("t-worker:0", 0, stopped=False)),   # queued
                         (0.2, TaskOutput("t-worker:0", "stdout", "bye\n")),
                         (0.4, finished("worker:0")), (0.5, finished("ps:0"))])
    wait_for_mesos_ends(record, events, 2.0, clock=events.clock)
    assert events.now == 0.4 and len(events.items) == 1     # ps:0 sent no exit frame
    assert last_states(record.snapshot())["worker:0"] == ("TASK_FINISHED", "SOURCE_EXECUTOR")
    assert (tmp_path / "worker.0.stdout").read_text() == "bye\n"


def test_the_wait_for_mesos_never_exceeds_its_bound(tmp_path):
    from tfmesos.core.last_updates import wait_for_mesos_ends
    record = make_record(tmp_path)
    record.exited("t-worker:0", 137)
    events = ClockQueue([(0.5, TaskOutput("t-worker:0", "stderr", "x\n")),
                         (9.0, finished("worker:0"))])
    wait_for_mesos_ends(record, events, 2.0, clock=events.clock)
    assert events.now == 2.0 and max(events.waited) <= 2.0
    nothing = ClockQueue([(0.1, finished("worker:0"))])
    wait_for_mesos_ends(make_record(tmp_path / "other"), nothing, 2.0, clock=nothing.clock)
    assert nothing.waited == []     # no exit frame without Mesos' end: no wait at all


def test_run_json_text_is_json_with_a_field_and_a_list_item_a_line():
    # Written at every second of a run by the C encoder, and still readable:
    # each task (each restart, ...) on a line of its own.
    document = {"run_id": "r1", "tasks": [{"name": "worker:0", "attempts": [{"attempt": 1}]},
                                          {"name": "ps:0", "attempts": []}],
                "restarts": [], "outcome": {"status": "succeeded", "hint": "\u00e9\n"}}
    text = run_json_text(document)
    assert json.loads(text) == document
    lines = text.splitlines()
    assert '  {"name": "worker:0", "attempts": [{"attempt": 1}]},' in lines
    assert '  {"name": "ps:0", "attempts": []}' in lines
    assert ' "restarts": [],' in lines
    assert len(lines) == 9


def test_run_json_is_saved_at_most_a_tenth_of_the_time(tmp_path, monkeypatch):
    # A save that took 0.5 s (a thousand tasks, a busy interpreter) is not
    # repeated within 5 s; a cheap one is, every second.
    from tfmesos.record import run_record
    record = make_record(tmp_path)
    writes = []
    monkeypatch.setattr(run_record, "write_run_json", lambda directory, text: writes.append(1))
    now = [1000.0]
    monkeypatch.setattr(run_record.time, "monotonic", lambda: now[0])
    record.save()
    record._pace._took = 0.5
    for _ in range(4):
        record._dirty = True   # something changed
        now[0] += 1.1
        record.flush()
    assert len(writes) == 1
    now[0] += 1.0
    record.flush()
    assert len(writes) == 2
    record._dirty = True
    now[0] += 1.1
    record.flush()
    assert len(writes) == 3   # the last save took no time on this clock
    record._pace._took, record._dirty = 0.01, True
    now[0] += 1.1
    record.flush()
    assert len(writes) == 4


def test_a_detached_scheduler_s_record_is_final_before_its_framework_is_torn_down(tmp_path):
    # The teardown makes Mesos kill the framework's tasks, the detached
    # scheduler's own among them: what run.json says then is what stays
    # (seen in CI: "gone", run.json still "running", for a run that failed).
    from tfmesos.core.runtime import RunRuntime
    record = make_record(tmp_path)
    record.outcome("failed", "task worker:0 exited with code 5", "worker:0", 5)
    seen = {}

    class Driver:
        connected = False

        def stop(self, failover=False):
            seen["at teardown"] = saved(record)

        def join(self, timeout=None):
            pass

    runtime = object.__new__(RunRuntime)   # only what stop() reads
    runtime.scheduler, runtime.rendezvous, runtime.driver = None, None, Driver()
    runtime.detached, runtime.events, runtime.shipment = True, queue.Queue(), None
    runtime.backend = Dict(stop=lambda: None)
    runtime.stop(launched_record(tmp_path / "other")[1], record, lambda: None)
    at_teardown = seen["at teardown"]
    assert at_teardown["outcome"]["status"] == "failed"
    assert at_teardown["timings"]["finished"] is not None
    assert {task["state"] for task in at_teardown["tasks"]} == {"TASK_KILLED"}


def test_a_concluded_record_is_written_once_at_its_end(tmp_path, monkeypatch):
    # A detached run's scheduler concludes before its teardown, then finishes:
    # nothing changed in between, nothing is written again (issue 33).
    from tfmesos.record import run_record
    record = make_record(tmp_path)
    writes = []
    monkeypatch.setattr(run_record, "write_run_json", lambda directory, text: writes.append(text))
    record.conclude()
    record.finish()
    assert len(writes) == 1 and '"finished": "' in writes[0]
    record.outcome("failed")   # the first outcome stays: no change, no write
    record.finish()
    assert len(writes) == 1


def test_the_reason_of_a_failed_run_reads_its_outcome_not_the_whole_record(tmp_path,
                                                                          monkeypatch):
    # At every run's end (the framework's tfmesos.reason label): no copy of
    # the whole record through JSON (run_file), whose first read costs more
    # than the rest of it.
    from tfmesos.core.runtime import reason_line
    record = make_record(tmp_path)
    record.output("t-worker:0", "stderr", "Traceback\nValueError: boom\n")
    record.outcome("failed", "task worker:0 exited with code 1", "worker:0", 1)

    def whole(*args, **kwargs):
        raise AssertionError("the whole record was copied")
    monkeypatch.setattr(RunFile, "from_dict", whole)
    assert reason_line(record) == "worker:0: ValueError: boom"
    assert reason_line(make_record(tmp_path / "succeeded")) is None


def test_a_run_directory_that_cannot_be_written_is_said_once_and_fails_nothing(tmp_path, caplog):
    # run.json's place taken by a directory: every save fails, as on a full disk
    (tmp_path / "run.json").mkdir()
    with caplog.at_level("WARNING", logger="tfmesos.record.run_record"):
        record = make_record(tmp_path)
        record.save()
        record.output("t-worker:0", "stdout", "a line\n")
        record.output("t-worker:1", "stdout", "a line\n")
        record.save()
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == ["warning: cannot write run.json in %s: Is a directory; the run goes on, "
                      "but its record and task logs there may stay incomplete" % tmp_path]
    assert record.unwritable.startswith("cannot write run.json in ")
    assert not (tmp_path / ".run.json.tmp").exists()        # no half-written file left
    assert (tmp_path / "worker.1.stdout").read_text() == "a line\n"   # the rest is written


def test_a_task_log_that_cannot_be_written_is_said_once(tmp_path, caplog):
    (tmp_path / "worker.0.stdout").mkdir()
    with caplog.at_level("WARNING", logger="tfmesos.record.run_record"):
        record = make_record(tmp_path)
        record.output("t-worker:0", "stdout", "a line\n")
        record.output("t-worker:0", "stdout", "another\n")
        record.save()
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and warned[0].startswith(
        "warning: cannot write worker.0.stdout in %s: Is a directory" % tmp_path)
    assert saved(record)["tasks"][0]["name"] == "ps:0"     # run.json is written all the same


def test_run_json_is_written_before_the_task_logs_take_the_last_inodes(tmp_path):
    # run.json is what makes a run findable (tfmesos runs, show): on a file
    # system with inodes for a few files only, it was the one left out.
    with mounted_tmpfs(tmp_path / "few-inodes", "size=1m,nr_inodes=3") as place:
        record = make_record(place)
        record.save()
        assert saved(record)["tasks"] and record.run_json_error is None
        assert record.unwritable is not None   # the logs that found no inode: said once


def test_an_ntp_step_while_the_run_goes_leaves_its_times_in_order(tmp_path, monkeypatch):
    # Every record time was a time.time() of its own: the wall clock stepped
    # back an hour 7 s into a run made `tfmesos runs` say "took 0.0 s" and
    # the run end before it was submitted.
    import time
    record = make_record(tmp_path)
    record.submitted()
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600)
    record.finish()
    timings = saved(record)["timings"]
    assert timings["submitted"] <= timings["finished"], timings


def test_an_agent_s_clock_minutes_off_does_not_date_a_state_before_its_launch(tmp_path):
    # TaskStatus.timestamp is the agent's clock (apache/mesos
    # src/common/protobuf_utils.cpp, createStatusUpdate): 10 minutes behind,
    # `tfmesos show` printed "ENDED +-595.6 s"; an hour ahead, "+3604.9 s".
    import time

    from tfmesos.record.times import parse_timestamp
    record = make_record(tmp_path)
    for name, skew in (("worker:0", -600), ("worker:1", 3600)):
        record.status(Dict(task_id={"value": "t-%s" % name}, state="TASK_FINISHED",
                           source="SOURCE_EXECUTOR", timestamp=time.time() + skew))
    record.finish()
    tasks = {task["name"]: task["attempts"][-1] for task in saved(record)["tasks"]}
    for name in ("worker:0", "worker:1"):
        launched = parse_timestamp(tasks[name]["launched"])
        ended = parse_timestamp(tasks[name]["states"][-1]["time"])
        assert launched <= ended <= time.time(), (name, tasks[name])


def test_a_reported_time_is_kept_where_it_can_be_true():
    from tfmesos.record.times import now, reported
    current = now()
    assert reported(current - 5, current - 10) == current - 5   # sent late: when it happened
    assert reported(current - 5, None) == current - 5
    for impossible in (current - 20, current + 600, None, 0.0):
        assert reported(impossible, current - 10) >= current   # before what preceded it, ahead


def test_each_failed_attempt_s_log_is_read_for_its_hint_once_not_at_every_relaunch(
        tmp_path, monkeypatch):
    # A worker failing with an error no hint rule knows, relaunched: every
    # relaunch read the log tail of every earlier failed attempt again (and
    # under the record's lock, which every forwarded line takes): 1.31 s a
    # relaunch after 273 of them, the healthy chief's lines 1.26 s late.
    from tfmesos.record.task_logs import TaskLogs
    record, slots = launched_record(tmp_path)
    reads = []
    real_tail = TaskLogs.tail
    monkeypatch.setattr(TaskLogs, "tail", lambda self, attempt, *rest: (
        reads.append(attempt.task_id), real_tail(self, attempt, *rest))[1])
    worker = slots[1]
    for number in range(2, 32):
        update(record, worker.name, "TASK_FAILED", "Command exited with status 1",
               task_id="t-%s" % worker.name if number == 2 else "t-%s-%d" % (worker.name,
                                                                            number - 1))
        record.relaunching(worker.name, "failure", "exit 1", None, None)
        assignment = Assignment(None, "o%d" % number, "a1", "host", [], 32000 + number, [])
        record.launched(Launch(worker, "t-%s-%d" % (worker.name, number), number,
                               "o%d" % number, assignment))
    assert len(reads) == len(set(reads)) == 30, reads


def test_a_later_run_of_the_same_process_is_on_the_corrected_clock(tmp_path, monkeypatch):
    # A notebook's runs: the clock corrected by 300 s after the first one;
    # the second was recorded 300 s off (read-through of d27888a).
    import time

    from tfmesos.record import times
    from tfmesos.record.times import parse_timestamp
    make_record(tmp_path / "first")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 300)
    try:
        second = make_record(tmp_path / "second")
        second.submitted()
        second.finish()
        assert abs(parse_timestamp(saved(second)["timings"]["submitted"]) - time.time()) < 5
    finally:
        monkeypatch.undo()
        times.anchor()   # the clock of the tests after this one
