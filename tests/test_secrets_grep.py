"""The secrets grep: a detached run with ``--secret-env`` (and, on a master
that asks for credentials, the ``MESOS_PRINCIPAL``/``MESOS_SECRET`` its
scheduler task subscribes with) leaves neither those values nor the run's
key in any file of any sandbox (on disk, and as ``/files`` serves them),
in ``/master/state``, ``/master/tasks``, ``/master/frameworks``, the
operator API, the scheduler document, the run's directories, what tfrun
packed (its TMPDIR), any process' command line or tfrun's and attach's
output, while its
task does see the secret (it prints a hash of it); on the master that asks
for credentials, nor after ``tfmesos attach`` launched the next scheduler
task with the secrets and credentials of its own environment. That master
tells a submitter without credentials so, in one line."""

import base64
import hashlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys

import pytest
import requests
from fixtures_master import make_local_master
from fixtures_zk import registered_in_zookeeper, zookeeper
from processes import scheduler_pids
from tfrun_helpers import REPO, reaped, release
from waiting import wait_until

from tfmesos.core.identity import RunIdentity
from tfmesos.protocol import labels

TRAIN = (
    "import hashlib, os, sys, time\n"
    "value = os.environ.get('RUN_TOKEN', '')\n"
    "print('token', hashlib.sha256(value.encode()).hexdigest(), flush=True)\n"
    "print('key in the command:', 'TFMESOS_SECRET' in os.environ, flush=True)\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.1)\n")
PRINCIPAL = "alice"


def needles(values, password=None):
    """{name: bytes}: each of ``values`` ({name: value}) and its base64 (a
    Secret.Value's ``data``), and the basic authorization of ``password``."""
    found = {}
    for name, value in values.items():
        found[name] = value.encode()
        found["base64 of the " + name] = base64.b64encode(value.encode())
    if password is not None:
        found["basic authorization"] = base64.b64encode(
            ("%s:%s" % (PRINCIPAL, password)).encode())
    return found


def leaks(where, data, looked_for):
    return ["%s in %s" % (name, where) for name, needle in looked_for.items()
            if needle in data]


class Grep:
    """Everything a detached run's secrets must not be in, read through the
    master and its agents (as anyone they let read) and from disk."""

    def __init__(self, master, auth, tmp_path):
        self.master, self.tmp = master, tmp_path
        self.session = requests.Session()   # kept alive: a sandbox is read 64 KiB at a time
        self.session.auth = auth
        self.read = 0

    def get(self, endpoint, gone=False, **params):
        """The reply of ``endpoint``; with ``gone``, None for a 404 (a
        file replaced since it was listed: the record's atomic rewrites)."""
        return self.get_at(self.master.url, endpoint, gone, **params)

    def get_at(self, base, endpoint, gone=False, **params):
        """``get`` of the server at ``base`` (an agent's)."""
        reply = self.session.get(base + endpoint, params=params, timeout=30)
        if gone and reply.status_code == 404:
            return None
        assert reply.status_code == 200, (endpoint, reply.status_code, reply.text)
        return reply

    def operator(self, kind, base=None):
        """The answer to ``kind`` of the master's v1 API (``base``: an agent's)."""
        reply = self.session.post((base or self.master.url) + "/api/v1", json={"type": kind},
                                  timeout=30)
        assert reply.status_code == 200, (kind, reply.status_code, reply.text)
        return reply.content

    def endpoints(self):
        """{where: bytes} of the master's endpoints."""
        found = {path: self.get(path).content
                 for path in ("/master/state", "/master/tasks", "/master/frameworks",
                              "/master/state.json")}
        for kind in ("GET_STATE", "GET_TASKS", "GET_FRAMEWORKS", "GET_EXECUTORS"):
            found["operator " + kind] = self.operator(kind)
        # Each agent's own: its /state and its v1 API's read calls (another
        # principal read the run's key from GET_EXECUTORS there).
        for base in self.agents().values():
            found[base + "/state"] = self.get_at(base, "/state").content
            for kind in ("GET_STATE", "GET_TASKS", "GET_FRAMEWORKS", "GET_EXECUTORS",
                         "GET_CONTAINERS"):
                found["agent %s %s" % (base, kind)] = self.operator(kind, base)
        return found

    def agents(self):
        """{agent id: its base URL}, as /master/state's pids name them."""
        state = self.get("/master/state").json()
        return {agent["id"]: "http://" + agent["pid"].rpartition("@")[2]
                for agent in state["slaves"]}

    def served_files(self):
        """{virtual path: bytes} of every file of every sandbox, through
        its agent's /files/browse and /files/read."""
        state = self.get("/master/state").json()
        agents = self.agents()
        files = {}
        for framework in state["frameworks"] + state["completed_frameworks"]:
            for task in framework["tasks"] + framework["completed_tasks"]:
                self._browse(agents[task["slave_id"]], "/frameworks/%s/executors/%s/runs/latest"
                             % (framework["id"], task["id"]), files)
        return files

    def _browse(self, base, path, files):
        for entry in self.get_at(base, "/files/browse", path=path).json():
            if entry["mode"].startswith("d"):
                self._browse(base, entry["path"], files)
            else:
                files[entry["path"]] = self._read(base, entry["path"])

    def _read(self, base, path):
        data, offset = b"", 0
        while True:
            reply = self.get_at(base, "/files/read", gone=True, path=path, offset=offset)
            chunk = reply.json()["data"] if reply is not None else ""
            if not chunk:
                return data
            data += chunk.encode("utf-8", "surrogateescape")
            offset += len(chunk.encode("utf-8", "surrogateescape"))

    def on_disk(self, *roots, leave_out=()):
        found = {}
        for root in roots:
            for directory, _, names in os.walk(root):
                for name in names:
                    path = os.path.join(directory, name)
                    if path in leave_out or os.path.islink(path) or not os.path.isfile(path):
                        continue
                    try:
                        with open(path, "rb") as handle:
                            found[path] = handle.read()
                    except (FileNotFoundError, IsADirectoryError):
                        continue   # replaced since it was listed
        return found

    @staticmethod
    def command_lines():
        """{where: bytes}: every process' command line (what ``ps`` shows
        any local user)."""
        found = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as handle:
                    found["the command line of process %s" % pid] = handle.read()
            except OSError:
                continue   # ended since it was listed
        return found

    def everywhere(self, looked_for, key_file, key_removed=False):
        """What of ``looked_for`` shows anywhere (the run's key file aside,
        which holds the key by design, and nothing else); ``key_removed``:
        the run ended and its key file is gone."""
        places = self.command_lines()
        places.update(self.endpoints())
        served = self.served_files()
        assert any(path.endswith("/" + labels.SCHEDULER_RECORD) for path in served), served
        places.update(served)
        places.update(self.on_disk(self.master.work_dir, str(self.tmp), leave_out={key_file}))
        assert any(path.endswith("/detached.json") for path in places)
        self.read += len(places)
        if key_removed:
            assert not os.path.exists(key_file)
            held = b""
        else:
            with open(key_file, "rb") as handle:
                held = handle.read()
        key_file_leaks = ["%s in the key file" % name for name, needle in looked_for.items()
                          if needle in held and "run key" not in name]
        return [leak for where, data in places.items() for leak in leaks(where, data, looked_for)
                ] + key_file_leaks


def tfrun(project, env, *args):
    return subprocess.run([sys.executable, "-m", "tfmesos.cli.tfrun", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=150)


def relaunch(master, grep, project, env, run_id, flag, looked_for, key_file, given=True):
    """Kill run ``run_id``'s scheduler task, let ``tfmesos attach`` launch
    the next one (``given``: with --master, else the one of its
    environment), grep while it runs, then let the run end."""
    [pid] = scheduler_pids(run_id)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not master.state()["frameworks"][0]["connected"], timeout=60)
    with subprocess.Popen([sys.executable, "-m", "tfmesos.cli.main", "attach", run_id,
                           *(["--master", master.url] if given else [])], cwd=project, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as attach:
        with reaped(attach):
            wait_until(lambda: scheduler_pids(run_id) and master.state()["frameworks"][0][
                "connected"], timeout=120, message=lambda: json.dumps(master.state())[-2000:])
            assert grep.everywhere(looked_for, key_file) == []
            out, err = release(flag, attach)
    assert attach.returncode == 0, err
    assert leaks("attach's output", (out + err).encode(), looked_for) == []
    assert "launching scheduler task 2" in err and "ended: succeeded" in err, err


@pytest.mark.parametrize("credentials", [False, True], ids=["plain", "credentials"])
def test_a_detached_runs_secrets_are_in_no_file_and_no_endpoint(make_local_master, tmp_path,
                                                                credentials):
    detached_run_keeps_its_secrets(make_local_master, tmp_path, credentials)


def test_the_zookeeper_password_of_a_zk_master_is_in_no_file_and_no_endpoint(
        make_local_master, tmp_path, zookeeper):
    # zk://alice:PASSWORD@.../path, the only reader of whose znodes is alice:
    # the scheduler task (and the next one, launched by attach) find the
    # master with the password, which no record, document or message holds.
    detached_run_keeps_its_secrets(make_local_master, tmp_path, False, zookeeper)


def detached_run_keeps_its_secrets(make_local_master, tmp_path, credentials, zookeeper=None):
    """The secrets grep of a detached run on a master with (``credentials``)
    or without credentials; with ``zookeeper`` (its servers), the master is
    found under a znode path only ``alice`` may read, through a zk:// master
    in $MESOS_MASTER with her password, and attach takes it over from there."""
    token, password = "tok-" + secrets.token_hex(16), "pw-" + secrets.token_hex(16)
    master = make_local_master(credentials={PRINCIPAL: password} if credentials else None)
    auth = (PRINCIPAL, password) if credentials else None
    project, flag = tmp_path / "project", tmp_path / "finish"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    (tmp_path / "tmp").mkdir()   # what tfrun packs and serves lands there, and is grepped
    env = dict(os.environ, MESOS_MASTER="", PYTHONPATH=REPO, RUN_TOKEN=token,
               TMPDIR=str(tmp_path / "tmp"),
               TFMESOS_KEYS_DIR=str(tmp_path / "keys"), TFMESOS_RUNS_DIR=str(tmp_path / "runs"))
    env.pop("MESOS_PRINCIPAL", None)
    env.pop("MESOS_SECRET", None)
    argv = ["--detach", "--ship", "--python", sys.executable, "-m", master.url, "-w", "1",
            "-s", "0", "-Cw", "0.2", "-Mw", "128", "--secret-env", "RUN_TOKEN", "--",
            "python", "train.py", str(flag)]
    if zookeeper is not None:
        env["MESOS_MASTER"] = registered_in_zookeeper(master, zookeeper, password)
        argv[argv.index("-m"):argv.index("-m") + 2] = []
    if credentials:
        # Without credentials: the master's 401, in one line, and nothing left.
        refused = tfrun(project, env, *argv)
        assert refused.returncode == 1, refused.stderr
        assert refused.stderr.splitlines()[-1] == (
            "tfrun: error: the master at %s asks for credentials: set MESOS_PRINCIPAL and "
            "MESOS_SECRET" % master.url), refused.stderr
        assert master.state()["frameworks"] == []
        env.update(MESOS_PRINCIPAL=PRINCIPAL, MESOS_SECRET=password)
    submitted = tfrun(project, env, *argv)
    assert submitted.returncode == 0, submitted.stderr
    [run_id] = re.findall(r"^run (\w+) detached", submitted.stdout, re.M)
    key_file = str(tmp_path / "keys" / run_id)
    with open(key_file) as handle:
        key = handle.read().strip()
    values = {"secret": token, "run key": key}
    if credentials:
        values["MESOS_SECRET"] = password
    if zookeeper is not None:
        values["ZooKeeper password"] = password
    looked_for = needles(values, password if credentials else None)
    assert leaks("tfrun's output", (submitted.stdout + submitted.stderr).encode(),
                 looked_for) == []
    grep = Grep(master, auth, tmp_path)

    def worker_said():
        for framework in grep.get("/master/state").json()["frameworks"]:
            for task in framework["tasks"]:
                if ".worker." in task["id"] and task["state"] == "TASK_RUNNING":
                    stdout = os.path.join(task["sandbox"], "stdout")
                    text = open(stdout).read() if os.path.exists(stdout) else ""
                    # The whole line: print() writes its words one by one (unbuffered).
                    if re.search(r"key in the command: \w+\n", text):
                        return text
        return None
    said = wait_until(worker_said, timeout=120, message=lambda: json.dumps(master.state())[-2000:])
    # The task sees the secret (its hash), the key is kept from its command.
    assert "token %s" % hashlib.sha256(token.encode()).hexdigest() in said, said
    assert "key in the command: False" in said, said
    assert grep.everywhere(looked_for, key_file) == []
    # The scheduler document is sealed with the run's key, for the run's framework.
    [framework] = master.state()["frameworks"]
    [document] = [path for path in grep.on_disk(master.work_dir) if path.endswith(
        "/detached.json")]
    with open(document, "rb") as handle:
        sealed = handle.read()
    from tfmesos.core.scheduler_document import open_document
    _, identity = open_document(sealed, bytes.fromhex(key))
    assert isinstance(identity, RunIdentity)
    assert (identity.framework_id, identity.principal) == (
        framework["id"], PRINCIPAL if credentials else None)
    if credentials or zookeeper is not None:
        # Its scheduler task dies; tfmesos attach launches the next one with
        # the secrets and credentials of its own environment.
        relaunch(master, grep, project, env, run_id, flag, looked_for, key_file,
                 given=zookeeper is None)
    else:   # tests/test_detached.py relaunches on a master without credentials
        flag.write_text("")
    wait_until(lambda: master.state()["frameworks"] == [], timeout=120,
               message=lambda: json.dumps(master.state())[-2000:])
    [ended] = master.state()["completed_frameworks"]
    assert labels.label_map(ended.get("labels")).get(labels.OUTCOME, "").startswith(
        "succeeded"), ended.get("labels")
    # The attach that followed the run to its end removed its key.
    attached = credentials or zookeeper is not None
    assert grep.everywhere(looked_for, key_file, key_removed=attached) == []
    assert os.path.exists(key_file) is not attached
    assert grep.read > 20
    if zookeeper is not None:   # a run the master does not know: named, the password not
        for command in ("kill", "show", "attach"):
            unknown = subprocess.run([sys.executable, "-m", "tfmesos.cli.main", command,
                                      "abcdef01", "--master", env["MESOS_MASTER"]], cwd=project,
                                     env=env, capture_output=True, text=True, timeout=60)
            assert unknown.returncode == 1 and "zk://alice:***@" in unknown.stderr, unknown.stderr
            assert leaks("tfmesos %s's output" % command, unknown.stderr.encode(),
                         looked_for) == []
