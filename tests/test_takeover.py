"""Taking a run over from its record (pure): which attempts are adopted,
the record carried on, the spec sent to a detached run's scheduler task, the
files ``tfmesos attach`` reads, and the FrameworkInfo of a run that
outlives its scheduler."""

import dataclasses
import json
import os
import queue

import pytest

from tfmesos.cli.tfrun_options import build_parser, read_options
from tfmesos.core.identity import RunIdentity
from tfmesos.core.jobs import Job
from tfmesos.core.slots import make_slots
from tfmesos.core.spec_codec import spec_from_dict, spec_to_dict
from tfmesos.core.takeover import adopt_slots
from tfmesos.core.taskinfo import framework_info
from tfmesos.exceptions import SpecError
from tfmesos.protocol import labels
from tfmesos.record.run_record import RunRecord
from tfmesos.record.schema import (
    Attempt,
    Logs,
    MetricSeries,
    Restart,
    RunFile,
    State,
    Task,
    Timings,
)
from tfmesos.record.takeover_files import (
    FAILOVER_FILE,
    FailoverFile,
    TakeoverError,
    key_path,
    read_failover,
    read_key,
    save_failover,
    save_key,
)

JOBS = [Job("ps", 1), Job("worker", 2)]


def attempt(task, number, restart=0, states=("TASK_RUNNING",), exit_code=None, exited=None):
    job, index = task.split(":")
    return Attempt(attempt=number, restart=restart, task_id="tfmesos.r1.%s.%s.%d" % (
        job, index, number), agent_id="a1", address="10.0.0.1:%d" % (31000 + number),
                   states=[State(state=s, time="2026-11-26T10:00:00.000Z") for s in states],
                   exit_code=exit_code, exited=exited,
                   logs=Logs(stdout="%s.%s.stdout" % (job, index),
                             stderr="%s.%s.stderr" % (job, index)))


def previous_run(restarts=0, **tasks):
    return RunFile(run_id="r1", framework_id="F-1", mode="replica", command="train",
                   tasks=[Task(name=name, job=name.split(":")[0], index=int(name.split(":")[1]),
                               attempts=attempts) for name, attempts in tasks.items()],
                   restarts=[Restart(restart=n + 1, time="2026-11-26T10:00:00.000Z")
                             for n in range(restarts)],
                   timings=Timings(submitted="2026-11-26T10:00:00.000Z",
                                   all_registered="2026-11-26T10:00:05.000Z",
                                   finished="2026-11-26T10:09:00.000Z"),
                   metrics=[MetricSeries(task="worker:0", name="loss", last=0.5, last_step=7,
                                         count=8, steps=[7], values=[0.5], times=[1.0])])


def test_the_current_attempts_are_adopted_and_must_register_again():
    slots = make_slots(JOBS)
    previous = previous_run(**{
        "ps:0": [attempt("ps:0", 1)],
        "worker:0": [attempt("worker:0", 1, states=("TASK_FAILED",)), attempt("worker:0", 2)],
        "worker:1": [attempt("worker:1", 1, states=("TASK_FINISHED",), exit_code=0,
                             exited="2026-11-26T10:05:00.000Z")]})
    waiting = adopt_slots(slots, previous, "replica")
    assert waiting == ["tfmesos.r1.ps.0.1", "tfmesos.r1.worker.0.2"]
    ps, worker0, worker1 = slots
    assert (worker0.task_id, worker0.attempts, worker0.address, worker0.port) == (
        "tfmesos.r1.worker.0.2", 2, "10.0.0.1:31002", 31002)
    assert slots.slot_of("tfmesos.r1.worker.0.1") is worker0      # an earlier attempt's updates
    assert slots.current("tfmesos.r1.worker.0.1") is None
    assert worker1.done and worker1.exit_code == 0                  # ended meanwhile, as expected
    assert not ps.done and ps.exit_code is None and ps.state == "TASK_RUNNING"
    assert slots.pending() == []


def test_attempts_of_an_earlier_restart_are_not_adopted():
    slots = make_slots(JOBS)
    previous = previous_run(restarts=1, **{
        "ps:0": [attempt("ps:0", 1), attempt("ps:0", 2, restart=1)],
        "worker:0": [attempt("worker:0", 1)],     # not relaunched yet in restart 1
        "worker:1": [attempt("worker:1", 1), attempt("worker:1", 2, restart=1)]})
    waiting = adopt_slots(slots, previous, "replica")
    assert waiting == ["tfmesos.r1.ps.0.2", "tfmesos.r1.worker.1.2"]
    assert [slot.name for slot in slots.pending()] == ["worker:0"]
    assert slots[0].base == 1 and slots[0].attempts == 2


def test_the_record_is_carried_on(tmp_path):
    slots = make_slots(JOBS)
    previous = previous_run(**{name: [attempt(name, 1)] for name in ("ps:0", "worker:0",
                                                                     "worker:1")})
    (tmp_path / "worker.0.stdout").write_text("step 1\n")
    record = RunRecord(str(tmp_path), RunFile(run_id="r1", mode="replica"), slots, True)
    record.resume(previous)
    record.submitted()
    record.output("tfmesos.r1.worker.0.1", "stdout", "step 2\n")
    record.save()
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["framework_id"] == "F-1"
    assert saved["timings"]["submitted"] == "2026-11-26T10:00:00.000Z"
    assert saved["timings"]["finished"] is None
    assert [len(task["attempts"]) for task in saved["tasks"]] == [1, 1, 1]
    assert saved["metrics"][0]["last_step"] == 7
    assert (tmp_path / "worker.0.stdout").read_text() == "step 1\nstep 2\n"   # appended


def test_a_takeover_keeps_the_runs_framework_id(tmp_path):
    # tfmesos attach erased framework_id from run.json: its scheduler
    # re-subscribed (reregistered), never set its framework_id, and the
    # record took None over the one resumed (found by a review helper).
    from tfmesos.core.scheduler import TFMesosScheduler

    class Driver:
        framework_id = "F-1"

        def reconcileTasks(self, tasks):
            pass

    scheduler = TFMesosScheduler.__new__(TFMesosScheduler)
    scheduler.framework_id = None
    scheduler.reconcile = lambda driver, implicit: None
    scheduler._events = queue.Queue()
    scheduler.reregistered(Driver(), {})
    assert scheduler.framework_id == "F-1"
    slots = make_slots(JOBS)
    record = RunRecord(str(tmp_path), RunFile(run_id="r1", mode="replica"), slots, True)
    record.resume(previous_run(**{name: [attempt(name, 1)] for name in ("ps:0", "worker:0",
                                                                        "worker:1")}))
    record.all_registered(None)
    assert json.loads((tmp_path / "run.json").read_text())["framework_id"] == "F-1"


def test_a_record_of_other_tasks_is_refused(tmp_path):
    record = RunRecord(None, RunFile(run_id="r1"), make_slots(JOBS), True)
    with pytest.raises(Exception, match="names other tasks"):
        record.resume(previous_run(**{"worker:0": [attempt("worker:0", 1)]}))


def parsed(*argv, command="python train.py"):
    args = build_parser().parse_options(list(argv), None)
    return read_options(args, command)


def test_a_spec_goes_to_the_scheduler_task_and_back_unchanged():
    spec = parsed("-w", "2", "-s", "1", "-E", "A=1", "--max-restarts", "2", "-m",
                  "10.0.0.9:5050", "--detach", "--job", "chief:1:0.5:256", "-I", "img",
                  "-V", "/tmp:/x:ro",
                  "--failover-timeout", "7200")
    assert spec_from_dict(json.loads(json.dumps(spec_to_dict(spec)))) == spec
    assert spec.failover_timeout == 7200
    with pytest.raises(SpecError, match="unknown field"):
        spec_from_dict(dict(spec_to_dict(spec), future=1))
    with pytest.raises(SpecError):   # checked again when read
        spec_from_dict(dict(spec_to_dict(spec), launch_timeout=float("nan")))


def test_a_saved_spec_holds_its_zookeeper_password_masked():
    spec = parsed("-w", "1", "-m", "zk://alice:s3cret@zk1:2181/mesos", "--detach")
    saved = json.dumps(spec_to_dict(spec))
    assert "s3cret" not in saved
    assert spec_from_dict(json.loads(saved)).master == "zk://alice:***@zk1:2181/mesos"


def test_the_failover_timeouts_by_default():
    assert parsed("-m", "h:5050").failover_timeout is None
    assert parsed("-m", "h:5050", "--failover").failover_timeout == 3600
    assert parsed("-m", "h:5050", "--detach").failover_timeout == 6 * 3600


RUN = RunIdentity(run_id="0000abcd", key=b"k" * 32, user="alice", principal="team-a")


def test_the_framework_of_a_run_that_outlives_its_scheduler():
    spec = parsed("-m", "h:5050", "--failover", "--failover-timeout", "900")
    info = framework_info(spec, spec.jobs, RUN.with_framework("F-1"),
                          rendezvous="10.0.0.1:4000", detached=True)
    assert info["failover_timeout"] == 900 and info["id"] == {"value": "F-1"}
    assert info["user"] == "alice"
    # Its tasks outlive an agent's restart too (they were lost with it).
    assert info["checkpoint"] is True
    found = labels.label_map(info["labels"])
    assert found[labels.RENDEZVOUS] == "10.0.0.1:4000" and found[labels.DETACHED] == "1"
    assert found[labels.RUN_ID] == "0000abcd"
    # The framework taken over carries its proof, which only the key makes.
    assert RUN.proves("F-1", "team-a", "alice", found[labels.PROOF])
    assert not RUN.proves("F-2", "team-a", "alice", found[labels.PROOF])
    plain = framework_info(parsed("-m", "h:5050"), spec.jobs, RUN)
    assert plain["failover_timeout"] == 60 and "id" not in plain and "checkpoint" not in plain
    assert labels.PROOF not in labels.label_map(plain["labels"])


def test_keys_and_failover_files_are_private_and_checked(tmp_path):
    environ = {"TFMESOS_KEYS_DIR": str(tmp_path / "keys")}
    path = save_key(RUN, environ)
    assert read_key(path) == b"k" * 32
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert oct(os.stat(tmp_path / "keys").st_mode & 0o777) == "0o700"
    (tmp_path / "bad").write_text("zz\n")
    with pytest.raises(TakeoverError, match="not a tfmesos run key"):
        read_key(str(tmp_path / "bad"))
    with pytest.raises(TakeoverError, match="copy it from the machine that submitted"):
        read_key(str(tmp_path / "missing"))
    with pytest.raises(TakeoverError, match="not a run id"):
        key_path("../x", environ)
    with pytest.raises(TakeoverError, match="not started with --failover or --detach"):
        read_failover(str(tmp_path / "keys"))


def kept_run(tmp_path):
    """A --failover run's failover.json as tfrun writes it (its spec with a
    plain setting and a secret's name, what it shipped kept in its run
    directory)."""
    spec = parsed("-m", "h:5050", "--failover", "-w", "2", "-E", "PLAIN=1",
                  "--run-dir", str(tmp_path))
    spec = dataclasses.replace(spec, secret_env=("TOKEN",))
    kept = str(tmp_path / "shipped")
    return FailoverFile(
        identity=RUN.with_framework("F-1").with_shipment("ab" * 32, "cd" * 32).public(),
        spec=spec_to_dict(spec), workdir="/home/alice/project",
        packed={"bundle": kept + "/tfmesos-bundle-abababababababab.tar.gz",
                "task_side": kept + "/tfmesos-task-cdcdcdcdcdcdcdcd.zip"}), spec


def test_failover_json_is_the_runs_spec_and_identity_and_nothing_to_replay(tmp_path):
    failover, spec = kept_run(tmp_path)
    save_failover(str(tmp_path), failover)
    path = tmp_path / FAILOVER_FILE
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert [name for name in os.listdir(tmp_path) if name != FAILOVER_FILE] == []  # atomic
    read = read_failover(str(tmp_path))
    assert read == failover
    assert (read.run_id, read.framework_id, read.master) == ("0000abcd", "F-1", "h:5050")
    assert spec_from_dict(read.spec, packed=True, run_dir=str(tmp_path)) == spec
    data = json.loads(path.read_text())
    assert sorted(data) == ["format", "identity", "packed", "spec", "workdir"]
    assert data["format"] == 2
    text = path.read_text()
    # The run's key never, and of a secret only its name.
    assert RUN.key.hex() not in text and "key" not in data["identity"]
    assert "TOKEN" in text and "argv" not in text


@pytest.mark.parametrize("change, refusal", [
    (lambda d: {"identity": d["identity"], "master": "h:5050", "argv": ["-w", "1"],
                "cwd": "/w"}, "another tfmesos .*format 1"),
    (lambda d: dict(d, format=3), "another tfmesos .*format 3"),
    (lambda d: dict(d, argv=["--", "true"]), "unknown field.*argv"),
    (lambda d: dict(d, identity=dict(d["identity"], key="6b" * 32)), "identity"),
    (lambda d: dict(d, identity=dict(d["identity"], framework_id=None)), "framework"),
    (lambda d: dict(d, identity=dict(d["identity"], run_id="../x")), "identity"),
    (lambda d: dict(d, spec=["-w", "2"]), "spec"),
    (lambda d: dict(d, spec={k: v for k, v in d["spec"].items() if k != "master"}), "master"),
    (lambda d: dict(d, packed={"bundle": "shipped/b.tar.gz"}), "packed"),
    (lambda d: dict(d, packed={"bundle": 7}), "packed"),
    (lambda d: dict(d, packed=["/b.tar.gz"]), "packed"),
    (lambda d: dict(d, workdir="project"), "workdir"),
    (lambda d: {k: v for k, v in d.items() if k != "workdir"}, "workdir"),
    (lambda d: [d], "not a tfmesos failover file"),
])
def test_failover_json_of_another_shape_is_refused_in_one_line(tmp_path, change, refusal):
    failover, _ = kept_run(tmp_path)
    save_failover(str(tmp_path), failover)
    path = tmp_path / FAILOVER_FILE
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    with pytest.raises(TakeoverError, match=refusal) as error:
        read_failover(str(tmp_path))
    assert "\n" not in str(error.value) and str(path) in str(error.value)
    path.write_text("{not json")
    with pytest.raises(TakeoverError, match="cannot read"):
        read_failover(str(tmp_path))


@pytest.mark.parametrize("content", ["[" * 100000, "[" * 100000 + "]" * 100000],
                         ids=["unclosed", "nested"])
def test_failover_json_nested_past_the_parsers_depth_is_refused_in_one_line(tmp_path, content):
    # A RecursionError out of tfmesos attach, kill and runs --prune before.
    path = tmp_path / FAILOVER_FILE
    path.write_text(content)
    path.chmod(0o600)
    with pytest.raises(TakeoverError, match="cannot read .*nested deeper") as error:
        read_failover(str(tmp_path))
    assert "\n" not in str(error.value) and str(path) in str(error.value)


@pytest.mark.timeout(20)
def test_a_key_or_failover_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    # tfmesos attach --key FIFO waited for a writer forever, and so did
    # anything reading a failover.json that is a FIFO.
    os.mkfifo(tmp_path / "key", 0o600)
    with pytest.raises(TakeoverError, match="cannot read the run's key .*key "
                                            r"\(not a regular file\): copy it"):
        read_key(str(tmp_path / "key"))
    with pytest.raises(TakeoverError, match="not a regular file"):
        read_key(str(tmp_path / "key"), private=True)
    os.mkfifo(tmp_path / FAILOVER_FILE, 0o600)
    with pytest.raises(TakeoverError, match="cannot read .*failover.json: not a regular file"):
        read_failover(str(tmp_path))


def test_plain_tasks_run_where_the_run_began_not_where_its_scheduler_is(tmp_path, monkeypatch):
    from policy_helpers import FakeBackend

    from tfmesos.core.launch import ClusterRun
    from tfmesos.core.spec import RunSpec
    from tfmesos.mesos.mock_transport import MockTransport

    def published_cwd(run):
        sent = []
        run.runtime.send = lambda task_id, message: sent.append(message) or True
        run.cluster_spec = {"worker": ["127.0.0.1:1"]}
        run.publish_to(run.slots.named("worker:0"))
        return sent[0]["cwd"]

    spec = RunSpec(jobs=(Job("worker", 1),), mode="replica", command="true",
                   master="mock-master:5050", run_dir=None)
    for name in ("began", "later"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "began")
    runs = [ClusterRun(spec, environ={}, backend=FakeBackend(), transport=MockTransport()),
            ClusterRun(spec, environ={}, backend=FakeBackend(), transport=MockTransport(),
                       workdir="/home/alice/project")]
    monkeypatch.chdir(tmp_path / "later")
    assert [published_cwd(run) for run in runs] == [str(tmp_path / "began"),
                                                    "/home/alice/project"]
    assert [run.workdir for run in runs] == [str(tmp_path / "began"), "/home/alice/project"]


class Reconciles:
    def __init__(self):
        self.calls = []

    def reconcileTasks(self, tasks):
        self.calls.append([task["task_id"]["value"] for task in tasks])


def test_only_adopted_attempts_are_reconciled_not_one_launched_meanwhile(tmp_path):
    # A task launched from the first offer may reach the master after the
    # reconciliation, which would then call it lost ("Task is unknown").
    from tfmesos.core.takeover import Adoption, Resume
    identity = RunIdentity.new("alice").with_framework("F-1")
    earlier = previous_run(**{"ps:0": [attempt("ps:0", 1)], "worker:0": [attempt("worker:0", 1)],
                              "worker:1": []})
    for previous, adopted in ((None, []), (earlier, ["tfmesos.r1.ps.0.1",
                                                     "tfmesos.r1.worker.0.1"])):
        slots = make_slots(JOBS)
        record = RunRecord(None, RunFile(run_id="r1"), slots, True)
        adoption = Adoption(Resume(identity, previous), slots, record, _Recovery(), "replica")
        slots.launched(slots[2], "tfmesos.r1.worker.1.1", "a1", 31000)
        driver = Reconciles()
        adoption.reconcile(driver)
        assert driver.calls == ([adopted] if adopted else [])


class _Recovery:
    restarts = 0


def test_a_home_that_does_not_exist_is_not_made_for_the_keys(tmp_path, monkeypatch):
    # As root, HOME=/nonexistent tfrun --failover made /nonexistent/.tfmesos/keys
    # (found by a review helper).
    from tfmesos.record.takeover_files import check_keys_writable
    monkeypatch.setenv("HOME", str(tmp_path / "nonexistent"))
    with pytest.raises(TakeoverError) as caught:
        check_keys_writable({"HOME": str(tmp_path / "nonexistent")})
    assert str(caught.value) == (
        "the home directory %s, where the runs' keys are kept (~/.tfmesos/keys), does not "
        "exist: set $TFMESOS_KEYS_DIR to a directory of your own" % (tmp_path / "nonexistent"))
    assert os.listdir(tmp_path) == []
