"""The operator event stream's events as tfmesos keeps them
(``mesos.operator_state``: a master's frameworks and tasks in
``/master/state``'s shape, event by event), the lines ``tfmesos runs
--master --watch`` prints of what changed (``cli.runs_watch.changes``), and
what any framework may put in its names and labels printed escaped, never
obeyed by the terminal (``runs --master``'s table and reason lines). Pure:
no master; the events have master.proto's shapes (as tests/
test_operator_events.py checks the embedded master sends them)."""

import io

import pytest

from tfmesos.cli.cluster_logs import latest_tasks
from tfmesos.cli.cluster_runs import cluster_runs, print_cluster_runs
from tfmesos.cli.runs_watch import changes, runs_view
from tfmesos.cli.tables import printable
from tfmesos.mesos import operator_state
from tfmesos.mesos.operator_state import OperatorState
from tfmesos.mesos.operator_stream import DEFAULT_HEARTBEAT, MAX_HEARTBEAT, heartbeat_interval

FW = "fw-0001"
ESCAPE = "\x1b[31mred\x1b[0m"


def labels(**values):
    return {"labels": [{"key": key, "value": value} for key, value in values.items()]}


def framework(fid=FW, name="train", connected=True, **label_values):
    return {"framework_info": {"id": {"value": fid}, "name": name, "user": "alice",
                               "failover_timeout": 3600.0,
                               "labels": labels(**{"tfmesos.run_id": "r1", **label_values})},
            "active": connected, "connected": connected, "recovered": False,
            "registered_time": {"nanoseconds": 100 * 10 ** 9},
            "reregistered_time": {"nanoseconds": 100 * 10 ** 9},
            "unregistered_time": {"nanoseconds": 0 if connected else 150 * 10 ** 9}}


def task(task_id, name, state="TASK_STAGING", fid=FW):
    return {"task_id": {"value": task_id}, "name": name, "framework_id": {"value": fid},
            "agent_id": {"value": "S0"}, "state": state}


def updated(task_id, state, fid=FW):
    return {"type": "TASK_UPDATED", "task_updated": {
        "framework_id": {"value": fid}, "state": state,
        "status": {"task_id": {"value": task_id}, "state": state, "timestamp": 120.0,
                   "agent_id": {"value": "S0"}}}}


def get_state(frameworks=(), completed=(), tasks=(), completed_tasks=()):
    return {"get_frameworks": {"frameworks": list(frameworks),
                               "completed_frameworks": list(completed)},
            "get_tasks": {"tasks": list(tasks), "completed_tasks": list(completed_tasks)},
            "get_agents": {"agents": []}, "get_executors": {"executors": []}}


def test_a_framework_and_its_tasks_are_kept_as_master_state_shows_them():
    state = OperatorState(get_state([framework()],
                                    tasks=[task("tfmesos.r1.worker.0.0", "train worker:0",
                                                "TASK_RUNNING")]), clock=lambda: 500.0)
    shown, finished = state.framework(FW)
    assert not finished
    assert (shown["id"], shown["name"], shown["connected"], shown["registered_time"],
            shown["failover_timeout"]) == (FW, "train", True, 100.0, 3600.0)
    assert "unregistered_time" not in shown
    assert shown["tasks"] == [{"id": "tfmesos.r1.worker.0.0", "name": "train worker:0",
                               "framework_id": FW, "executor_id": "", "slave_id": "S0",
                               "state": "TASK_RUNNING"}]

    # A task ends, its next attempt is added: the latest attempt is the new one.
    assert state.apply(updated("tfmesos.r1.worker.0.0", "TASK_FAILED"))
    assert state.apply({"type": "TASK_ADDED",
                        "task_added": {"task": task("tfmesos.r1.worker.0.1", "train worker:0")}})
    shown, _ = state.framework(FW)
    assert [t["id"] for t in shown["completed_tasks"]] == ["tfmesos.r1.worker.0.0"]
    assert shown["completed_tasks"][0]["statuses"] == [{"state": "TASK_FAILED",
                                                        "timestamp": 120.0}]
    assert latest_tasks(shown)["worker:0"]["id"] == "tfmesos.r1.worker.0.1"

    # Its labels change (the outcome), then it is removed: finished, with them.
    assert state.apply({"type": "FRAMEWORK_UPDATED", "framework_updated": {
        "framework": framework(**{"tfmesos.outcome": "succeeded"})}})
    assert not state.apply({"type": "HEARTBEAT"})
    removed = framework(**{"tfmesos.outcome": "succeeded"})["framework_info"]
    assert state.apply({"type": "FRAMEWORK_REMOVED",
                        "framework_removed": {"framework_info": removed}})
    shown, finished = state.framework(FW)
    assert finished and shown["unregistered_time"] == 500.0
    assert {"key": "tfmesos.outcome", "value": "succeeded"} in shown["labels"]
    assert [t["id"] for t in shown["completed_tasks"]] == ["tfmesos.r1.worker.0.0",
                                                           "tfmesos.r1.worker.0.1"]
    assert not shown["tasks"] and not shown["connected"]
    whole = state.state()
    assert whole["frameworks"] == [] and [f["id"] for f in whole["completed_frameworks"]] == [FW]
    assert state.state("tfmesos.run_id") == whole
    assert state.state("no.such.label") == {"frameworks": [], "completed_frameworks": []}
    [run] = cluster_runs(whole)
    assert (run.run_id, run.state, run.outcome) == ("r1", "finished", "succeeded")
    assert state.framework("unknown") == (None, True)


def test_what_is_not_an_event_of_a_known_framework_changes_nothing():
    state = OperatorState(get_state([framework()]))
    before = state.state()
    for event in ({"type": "TASK_ADDED"}, {"type": "TASK_ADDED", "task_added": []},
                  {"type": "TASK_ADDED", "task_added": {"task": task("t", "x", fid="other")}},
                  updated("t", "TASK_RUNNING", fid="other"),
                  {"type": "TASK_UPDATED", "task_updated": {"status": "x"}},
                  {"type": "FRAMEWORK_ADDED", "framework_added": {"framework": {}}},
                  {"type": "FRAMEWORK_REMOVED", "framework_removed": {"framework_info": 5}},
                  {"type": "AGENT_ADDED", "agent_added": {"agent": {}}}, {"type": 7}, {}):
        assert not state.apply(event), event
    assert state.state() == before


def test_completed_frameworks_and_tasks_are_bounded(monkeypatch):
    monkeypatch.setattr(operator_state, "MAX_COMPLETED_FRAMEWORKS", 2)
    monkeypatch.setattr(operator_state, "MAX_COMPLETED_TASKS", 3)
    state = OperatorState(get_state([framework()]))
    for attempt in range(5):
        state.apply({"type": "TASK_ADDED", "task_added": {
            "task": task("t.%d" % attempt, "train worker:0")}})
        state.apply(updated("t.%d" % attempt, "TASK_KILLED"))
    assert [t["id"] for t in state.framework(FW)[0]["completed_tasks"]] == ["t.2", "t.3", "t.4"]
    for fid in ("a", "b", "c"):
        state.apply({"type": "FRAMEWORK_ADDED", "framework_added": {"framework": framework(fid)}})
        state.apply({"type": "FRAMEWORK_REMOVED", "framework_removed": {
            "framework_info": framework(fid)["framework_info"]}})
    assert [f["id"] for f in state.state()["completed_frameworks"]] == ["b", "c"]


def test_the_heartbeat_interval_is_the_masters_within_bounds():
    assert heartbeat_interval(0.5) == 0.5 and heartbeat_interval(15) == 15.0
    assert heartbeat_interval(10 ** 9) == MAX_HEARTBEAT
    for bad in (None, "15", True, 0, -1, float("nan"), float("inf")):
        assert heartbeat_interval(bad) == DEFAULT_HEARTBEAT, bad


# -- runs --watch's lines ------------------------------------------------------------------

def test_watch_lines_say_a_run_started_its_tasks_states_and_how_it_ended():
    state = OperatorState(get_state())
    seen = runs_view(state.state())
    state.apply({"type": "FRAMEWORK_ADDED", "framework_added": {"framework": framework(**{
        "tfmesos.jobs": "worker:1", "tfmesos.command": "python train.py"})}})
    state.apply({"type": "TASK_ADDED",
                 "task_added": {"task": task("tfmesos.r1.worker.0.0", "train worker:0")}})
    now = runs_view(state.state())
    assert changes(seen, now) == ["run r1 started: train (worker:1) python train.py",
                                  "run r1 worker:0: TASK_STAGING"]
    seen = now
    assert changes(seen, runs_view(state.state())) == []
    state.apply(updated("tfmesos.r1.worker.0.0", "TASK_FAILED"))
    state.apply({"type": "TASK_ADDED",
                 "task_added": {"task": task("tfmesos.r1.worker.0.1", "train worker:0")}})
    now = runs_view(state.state())
    assert changes(seen, now) == ["run r1 worker:0: TASK_FAILED",
                                  "run r1 worker:0 (attempt 1): TASK_STAGING"]
    seen = now
    ended = framework(**{"tfmesos.outcome": "failed (exit 1, worker:0)",
                         "tfmesos.reason": "worker:0: %s\nbye" % ESCAPE})["framework_info"]
    state.apply({"type": "FRAMEWORK_REMOVED", "framework_removed": {"framework_info": ended}})
    assert changes(seen, runs_view(state.state())) == [
        "run r1 ended: failed (exit 1, worker:0)",
        "run r1: worker:0: \\x1b[31mred\\x1b[0m bye"]


def test_watch_lines_say_a_scheduler_away_and_back():
    away = {"frameworks": [], "completed_frameworks": []}
    away["frameworks"].append({"id": FW, "name": "train", "connected": False,
                               "labels": labels(**{"tfmesos.run_id": "r1"})["labels"]})
    back = {"frameworks": [dict(away["frameworks"][0], connected=True)]}
    assert changes(runs_view(back), runs_view(away)) == [
        "run r1 failing over: its scheduler is away"]
    assert changes(runs_view(away), runs_view(back)) == [
        "run r1 running: its scheduler is back"]


# -- other frameworks' names and labels, escaped --------------------------------------------

def test_runs_master_prints_control_characters_of_names_and_labels_escaped():
    state = {"frameworks": [], "completed_frameworks": [
        {"id": "F1", "name": "evil\x1b]0;title\x07", "registered_time": 100.0,
         "unregistered_time": 110.0,
         "labels": labels(**{"tfmesos.run_id": "r\x1b[2Jx", "tfmesos.jobs": "worker:1\n",
                             "tfmesos.command": "python\u202e train.py",
                             "tfmesos.outcome": "failed\x1b[8m (exit 1)",
                             "tfmesos.reason": "worker:0: %s\nrm -rf /\r" % ESCAPE})["labels"]}]}
    out = io.StringIO()
    print_cluster_runs(cluster_runs(state), out, width=200, now=200.0)
    text = out.getvalue()
    for control in ("\x1b", "\x07", "\r", "\u202e"):
        assert control not in text
    lines = text.splitlines()
    assert len(lines) == 3, lines       # header, the run, its reason: no line of a label's
    assert lines[1].split()[:3] == ["r\\x1b[2Jx", "evil\\x1b]0;title\\x07", "failed\\x1b[8m"]
    assert "worker:1\\n" in lines[1] and lines[1].endswith("python\\u202e train.py")
    assert lines[2] == "r\\x1b[2Jx: worker:0: \\x1b[31mred\\x1b[0m rm -rf /"


@pytest.mark.parametrize("text, shown", [
    ("plain text, ünïcode", "plain text, ünïcode"), ("a\tb\nc", "a\\tb\\nc"),
    ("\x00\x7f\x9b", "\\x00\\x7f\\x9b"), ("\u2066x\u2069", "\\u2066x\\u2069")])
def test_printable_escapes_what_a_terminal_would_obey(text, shown):
    assert printable(text) == shown


def test_watch_without_a_master_is_a_usage_error(capsys):
    from tfmesos.cli.runs import runs_main
    with pytest.raises(SystemExit) as exited:
        runs_main(["--watch"], environ={})
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "tfmesos runs: error: --watch follows the runs of a Mesos master: give --master M")


def test_show_master_view_prints_what_the_master_holds_with_control_characters_escaped():
    from io import StringIO

    from tfmesos.cli.cluster_runs import ClusterRun
    from tfmesos.cli.cluster_show import show_master_view
    run = ClusterRun(run_id="r1", framework_id="f1", name="tr\x1b[2Jain", state="running",
                     registered=None, ended=None, jobs="worker:1", command="python\nrm -rf ~",
                     tasks_running=1, mode="replica")
    framework = {"tasks": [{"id": "tfmesos.r1.worker.0.1", "name": "x worker:0\u202e",
                            "state": "TASK_RUNNING", "slave_id": "S0"}]}
    out = StringIO()
    show_master_view(run, framework, {"S0": "host\x07"}, out, now=0)
    text = out.getvalue()
    assert not any(ch in text for ch in "\x1b\x07\u202e"), text
    assert "tr\\x1b[2Jain" in text and "python\\nrm -rf ~" in text and "host\\x07" in text
