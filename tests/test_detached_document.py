"""A detached run's scheduler document (``detached.json``) is sealed with the
run's key and bound to its framework: the scheduler task and ``tfmesos
attach``'s relaunch open it with the key before they read any field of
it, and refuse one that is unsigned, forged, edited or another
framework's (a look-alike's copy) with nothing launched, nothing started;
the record a new scheduler carries on must be the run's."""

import json
import os
import urllib.request

import pytest

from tfmesos.cli import detached_scheduler
from tfmesos.core import detached
from tfmesos.core.identity import IdentityError, RunIdentity
from tfmesos.core.jobs import Job
from tfmesos.core.scheduler_document import (
    DETACHED_FILE,
    PREVIOUS_RECORD,
    RUN_KEY,
    DetachError,
    document_body,
    open_document,
    seal_document,
)
from tfmesos.core.spec import RunSpec
from tfmesos.exceptions import TFMesosError
from tfmesos.protocol import labels
from tfmesos.record.schema import Attempt, RunFile, Task

KEY = bytes(range(32))
OTHER_KEY = b"m" * 32
RUN_ID = "0123abcd"
SPEC = RunSpec(name="train.py", master="127.0.0.1:5050", python="/usr/bin/python3",
               jobs=(Job("worker", 1),), mode="replica", command="python train.py",
               env=(("PLAIN", "1"),), secret_env=("TOKEN",))


def run_identity(**fields):
    values = dict(run_id=RUN_ID, key=KEY, user="alice", principal="alice",
                  framework_id="F-1")
    values.update(fields)
    return RunIdentity(**values)


def body(**changes):
    return dict(document_body(SPEC, {}, None, 0.5, 512), **changes)


def test_a_sealed_document_opens_with_the_runs_key_only():
    sealed = seal_document(run_identity(), body())
    document, identity = open_document(sealed, KEY)
    assert identity == run_identity() and document["spec"]["master"] == "127.0.0.1:5050"
    assert document["spec"]["secret_env"] == ["TOKEN"]
    assert KEY.hex().encode() not in sealed
    with pytest.raises(IdentityError, match="not signed with this run's key"):
        open_document(sealed, OTHER_KEY)
    with pytest.raises(IdentityError, match="framework is known"):
        seal_document(run_identity(framework_id=None), body())


def payload(sealed):
    return sealed.partition(b"\n")[2]


def forgeries():
    good = seal_document(run_identity(), body())
    edited = good.replace(b"/usr/bin/python3", b"/tmp/attacker/py")
    assert edited != good
    return {
        "unsigned": payload(good),                               # the old, plain JSON
        "forged": seal_document(run_identity(key=OTHER_KEY), body()),
        "edited": edited,
        "another framework": seal_document(run_identity(framework_id="F-2"), body()),
        "another principal": seal_document(run_identity(principal="mallory"), body()),
    }


FORGERIES = sorted(forgeries())


# -- the scheduler task --------------------------------------------------------------------

class Stop(TFMesosError):
    pass


@pytest.fixture
def scheduler_task(tmp_path, monkeypatch):
    """Run ``detached_scheduler.main`` on a document as the scheduler task
    of run RUN_ID in framework F-1 (principal alice): what ClusterRun was
    given (it stops there), or None when it was never made."""
    import tfmesos.cli.common
    import tfmesos.core.launch
    made = []

    def fake_run(spec, **kwargs):
        made.append((spec, kwargs))
        raise Stop("stopped before the run")
    monkeypatch.setattr(tfmesos.core.launch, "ClusterRun", fake_run)
    monkeypatch.setattr(tfmesos.cli.common, "setup_logging", lambda *args: None)
    monkeypatch.chdir(tmp_path)

    def run(data, capsys):
        path = tmp_path / DETACHED_FILE
        path.write_bytes(data)
        monkeypatch.setenv(RUN_KEY, KEY.hex())
        monkeypatch.setenv("TFMESOS_FRAMEWORK_ID", "F-1")
        monkeypatch.setenv("TFMESOS_RUN_ID", RUN_ID)
        monkeypatch.setenv("MESOS_PRINCIPAL", "alice")
        monkeypatch.setenv("MESOS_SECRET", "pw")
        monkeypatch.setenv("TOKEN", "t")
        code = detached_scheduler.main(str(path))
        assert code == 1 and RUN_KEY not in os.environ
        [line] = capsys.readouterr().err.splitlines()
        return line, (made.pop() if made else None)
    return run


def test_the_scheduler_task_runs_the_document_it_was_given(scheduler_task, capsys):
    line, (spec, kwargs) = scheduler_task(seal_document(run_identity(), body()), capsys)
    assert line == "tfrun: error: stopped before the run"
    assert spec.master == "127.0.0.1:5050" and spec.python == "/usr/bin/python3"
    assert kwargs["resume"].identity == run_identity()


@pytest.mark.parametrize("kind", FORGERIES)
def test_the_scheduler_task_refuses_a_document_that_is_not_the_runs(scheduler_task, capsys,
                                                                   kind):
    line, made = scheduler_task(forgeries()[kind], capsys)
    assert made is None, "a run was made of a document that is not the run's"
    assert line.startswith("tfrun: error: ") and "nothing of it is used" in line, line


def test_the_scheduler_task_refuses_a_record_of_another_run(scheduler_task, capsys, tmp_path):
    record(tmp_path / PREVIOUS_RECORD, "tfmesos.%s.worker.0.1" % "99999999")
    line, made = scheduler_task(seal_document(run_identity(), body(previous=PREVIOUS_RECORD)),
                                capsys)
    assert made is None and "not of run %s" % RUN_ID in line, line


def test_the_scheduler_task_refuses_a_record_nested_past_the_parsers_depth(scheduler_task,
                                                                            capsys, tmp_path):
    # The record a scheduler task is given comes from the sandbox of the one
    # before it; nested that deep, it ended the task in a RecursionError.
    (tmp_path / PREVIOUS_RECORD).write_text('{"tasks": ' + "[" * 100000 + "]" * 100000 + "}")
    line, made = scheduler_task(seal_document(run_identity(), body(previous=PREVIOUS_RECORD)),
                                capsys)
    assert made is None and line.startswith("tfrun: error: cannot read "), line


def record(path, *task_ids, run_id=RUN_ID):
    tasks = [Task(name="worker:%d" % i, job="worker", index=i,
                  attempts=[Attempt(attempt=1, task_id=task_id)])
             for i, task_id in enumerate(task_ids)]
    path.write_text(json.dumps(RunFile(run_id=run_id, tasks=tasks).to_dict()))
    return path


# -- tfmesos attach: a new scheduler task --------------------------------------------------

class Launches:
    """``relaunch_scheduler`` with the sandbox of the last scheduler task
    (``files``) and ``launch_scheduler`` recorded, not run."""

    def __init__(self, monkeypatch, tmp_path, files, framework=None):
        self.files, self.launched, self.documents, self.uris = files, [], [], []
        self.tmp = tmp_path
        self.framework = framework or {
            "id": "F-1", "user": "alice", "principal": "alice",
            "completed_tasks": [{"id": labels.scheduler_task_id(RUN_ID, 1), "slave_id": "S1"}]}
        monkeypatch.setattr(detached, "sandbox_reader", self.reader)
        monkeypatch.setattr(detached, "launch_scheduler", self.launch)
        (tmp_path / "key").write_text(KEY.hex() + "\n")
        (tmp_path / "key").chmod(0o600)

    def reader(self, reader, state, framework, task):
        def fetch(name, dest, optional=False, max_bytes=None):
            if name not in self.files:
                if optional:
                    return None
                raise DetachError("no %s" % name)
            with open(dest, "wb") as handle:
                handle.write(self.files[name])
            return dest
        return fetch

    def launch(self, spec, identity, uris_for, command, cpus, mem, say, environ=None):
        uris = uris_for(identity)
        self.uris.append([uri["value"] for uri in uris])
        [document] = [uri["value"] for uri in uris
                      if uri["value"].endswith("/" + DETACHED_FILE)]
        with urllib.request.urlopen(document, timeout=10) as response:
            self.documents.append(response.read())
        self.launched.append((spec, identity, command))

    def __call__(self, changes=None):
        environ = {"MESOS_PRINCIPAL": "alice", "MESOS_SECRET": "pw", "TOKEN": "t"}
        environ.update(changes or {})
        environ = {name: value for name, value in environ.items() if value is not None}
        said = []
        detached.relaunch_scheduler(None, {}, self.framework, RUN_ID, str(self.tmp / "key"),
                                    environ, said.append)
        return said


def test_relaunch_seals_the_new_document_for_the_next_attempt(monkeypatch, tmp_path):
    launches = Launches(monkeypatch, tmp_path, {
        DETACHED_FILE: seal_document(run_identity(), body()),
        labels.SCHEDULER_RECORD: record(tmp_path / "r.json",
                                        "tfmesos.%s.worker.0.1" % RUN_ID).read_bytes()})
    launches()
    [(spec, identity, command)] = launches.launched
    assert identity == run_identity(scheduler_attempt=2)
    assert spec.python == "/usr/bin/python3" and "/usr/bin/python3" in command
    document, sealed_for = open_document(launches.documents[0], KEY)
    assert sealed_for == identity and document["previous"] == PREVIOUS_RECORD


def test_relaunch_keeps_a_python_env_url_the_run_shipped(monkeypatch, tmp_path):
    url = "https://envs.example/train-env.tar.gz"
    launches = Launches(monkeypatch, tmp_path, {DETACHED_FILE: seal_document(run_identity(), body(
        shipped={"bundle": None, "task_side": "tfmesos-task-00.zip", "python_env": url}))})
    launches()
    assert url in launches.uris[0]   # the document's spec ships nothing: its shipped says it


def test_relaunch_carries_on_the_record_the_last_scheduler_was_given(monkeypatch, tmp_path):
    # It died before it wrote its own: the one it was given is the run's so far.
    launches = Launches(monkeypatch, tmp_path, {
        DETACHED_FILE: seal_document(run_identity(), body(previous=PREVIOUS_RECORD)),
        PREVIOUS_RECORD: record(tmp_path / "r.json",
                                "tfmesos.%s.worker.0.1" % RUN_ID).read_bytes()})
    launches()
    document, _ = open_document(launches.documents[0], KEY)
    assert document["previous"] == PREVIOUS_RECORD


@pytest.mark.parametrize("kind", FORGERIES)
def test_relaunch_refuses_a_document_that_is_not_the_runs(monkeypatch, tmp_path, kind):
    launches = Launches(monkeypatch, tmp_path, {DETACHED_FILE: forgeries()[kind]})
    with pytest.raises(TFMesosError, match="nothing of it is used"):
        launches()
    assert launches.launched == []


def test_relaunch_refuses_a_framework_of_another_user(monkeypatch, tmp_path):
    launches = Launches(monkeypatch, tmp_path, {
        DETACHED_FILE: seal_document(run_identity(), body())})
    launches.framework["user"] = "mallory"
    with pytest.raises(DetachError, match="another user"):
        launches()
    assert launches.launched == []


@pytest.mark.parametrize("task_id, run_id, why", [
    ("tfmesos.99999999.worker.0.1", RUN_ID, "not of run"),
    ("tfmesos.%s.worker.0.1" % RUN_ID, "99999999", "is run 99999999's"),
])
def test_relaunch_refuses_a_record_that_is_not_the_runs(monkeypatch, tmp_path, task_id,
                                                        run_id, why):
    launches = Launches(monkeypatch, tmp_path, {
        DETACHED_FILE: seal_document(run_identity(), body()),
        labels.SCHEDULER_RECORD: record(tmp_path / "r.json", task_id,
                                        run_id=run_id).read_bytes()})
    with pytest.raises(DetachError, match=why):
        launches()
    assert launches.launched == []


def test_relaunch_needs_the_runs_principal_and_secrets(monkeypatch, tmp_path):
    launches = Launches(monkeypatch, tmp_path, {
        DETACHED_FILE: seal_document(run_identity(), body())})
    with pytest.raises(DetachError, match="principal alice, not bob"):
        launches({"MESOS_PRINCIPAL": "bob"})
    with pytest.raises(TFMesosError, match="TOKEN is not set"):
        launches({"TOKEN": None})
    assert launches.launched == []


def test_a_scheduler_task_that_ended_is_quoted_by_its_error_not_its_last_line():
    from tfmesos.core.scheduler_task import telling_line
    # tfrun prints its record's directory after its error: the error says why.
    assert telling_line(["tfrun: cluster ready", "tfrun: error: the Mesos driver stopped: x",
                         "tfrun: logs and run record: run", ""]) == \
        "tfrun: error: the Mesos driver stopped: x"
    assert telling_line(["Traceback (most recent call last):", "ImportError: no tfmesos  "]) \
        == "ImportError: no tfmesos"
    assert telling_line(["", "  "]) is None and telling_line([]) is None


def test_a_detached_runs_failure_names_where_its_logs_are_read_not_its_sandbox_path():
    # tfmesos attach relayed "tfrun: logs and run record: run", a directory
    # of the scheduler task's sandbox, not of the attaching shell (found by
    # a review helper).
    import types

    from tfmesos.cli.tfrun import where_recorded
    record = types.SimpleNamespace(directory="run")
    spec = types.SimpleNamespace(master="zk://u:pw@zk1:2181/mesos")
    detached = types.SimpleNamespace(detached=True, run_id="cafe0123", record=record, spec=spec)
    assert where_recorded(detached) == (
        "tfmesos logs cafe0123 --master 'zk://u:***@zk1:2181/mesos', "
        "tfmesos show cafe0123 --master 'zk://u:***@zk1:2181/mesos'")
    # Quoted for the shell (review: IPv6): "[::1]:5050" is a glob to zsh.
    detached.spec = types.SimpleNamespace(master="[::1]:5050")
    assert where_recorded(detached) == ("tfmesos logs cafe0123 --master '[::1]:5050', "
                                        "tfmesos show cafe0123 --master '[::1]:5050'")
    foreground = types.SimpleNamespace(detached=False, record=types.SimpleNamespace(
        directory="/home/u/tfmesos-runs/train-cafe0123"))
    assert where_recorded(foreground) == "/home/u/tfmesos-runs/train-cafe0123"


# -- tfrun --detach: the run's key is kept before anything is launched -----------------------

class Submits:
    """``detached.submit`` on a master nobody contacts: ``launch_scheduler``
    recorded (whether the run's key was kept by then), not run."""

    def __init__(self, monkeypatch, tmp_path, fail=None):
        self.keys, self.launched, self.fail = tmp_path / "keys", [], fail
        self.environ = {"TFMESOS_KEYS_DIR": str(self.keys)}
        monkeypatch.setattr(detached, "launch_scheduler", self.launch)
        monkeypatch.setenv("TMPDIR", str(tmp_path))

    def launch(self, spec, identity, uris_for, command, cpus, mem, say, environ=None,
               timeout=None):
        self.launched.append(sorted(os.listdir(self.keys)) if self.keys.exists() else [])
        if self.fail is not None:
            raise self.fail
        return identity

    def __call__(self):
        spec = RunSpec(name="train.py", master="127.0.0.1:5050", image="busybox",
                       jobs=(Job("worker", 1),), mode="replica", command="python train.py",
                       advertise_address="127.0.0.1")
        return detached.submit(spec, lambda text: None, 0.5, 512, environ=self.environ)


def test_detach_keeps_the_runs_key_before_it_launches_the_run(monkeypatch, tmp_path):
    submits = Submits(monkeypatch, tmp_path)
    identity = submits()
    assert submits.launched == [[identity.run_id]]
    assert (submits.keys / identity.run_id).read_text() == identity.key.hex() + "\n"


def test_detach_launches_nothing_when_the_runs_key_cannot_be_kept(monkeypatch, tmp_path):
    from tfmesos.record import takeover_files

    def read_only(identity, environ):
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr(takeover_files, "save_key", read_only)
    submits = Submits(monkeypatch, tmp_path)
    with pytest.raises(DetachError, match=r"^cannot keep the run's key \(Read-only file "
                       r"system\): nothing was launched; set \$TFMESOS_KEYS_DIR"):
        submits()
    assert submits.launched == []


def test_a_detached_run_that_did_not_launch_leaves_no_key(monkeypatch, tmp_path):
    submits = Submits(monkeypatch, tmp_path, fail=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        submits()
    assert len(submits.launched[0]) == 1 and os.listdir(submits.keys) == []


def test_detach_refuses_a_keys_directory_it_cannot_write_before_anything_starts(tmp_path):
    (tmp_path / "file").write_text("")
    keys = tmp_path / "file" / "keys"   # under a file: no directory can be made there
    spec = RunSpec(name="train.py", master="127.0.0.1:5050", image="busybox",
                   jobs=(Job("worker", 1),), mode="replica", command="python train.py")
    with pytest.raises(TFMesosError, match=r"^cannot keep the run's key in %s \(Not a "
                       r"directory\): set \$TFMESOS_KEYS_DIR to a directory you can write$"
                       % keys):
        detached.check_detachable(spec, {"TFMESOS_KEYS_DIR": str(keys)})
    writable = tmp_path / "mine" / "keys"
    detached.check_detachable(spec, {"TFMESOS_KEYS_DIR": str(writable)})
    assert os.listdir(writable) == []   # the probe is gone
