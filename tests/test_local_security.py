"""The embedded master's security: framework authentication (HTTP basic,
as Mesos' --authenticate_http_frameworks), failover only by the same
principal, containers that are never privileged, never mount the host's
/ and are not root unless allowed, and tasks that get a clean environment.

Every master is stopped at the end of its test (``fixtures_master``); the
container checks need no Docker engine (a recording runner stands in).
"""

import base64
import getpass
import json
import os
import pwd
import stat
import subprocess
import sys
import types

import pytest
import requests
from driver_helpers import drivers, states_of, task
from fixtures_master import (
    MARKER,
    RecordingRunner,
    clients,
    launch_running,
    make_local_master,
    marked_environment,
    read_file,
)
from mesos_http_client import CLOSED, task_info

from mesos_local import LocalMaster
from mesos_local import command_line as cli
from mesos_local.api.auth import (
    CHALLENGE,
    Authenticator,
    CredentialsError,
    credentials_table,
    parse_credentials,
    read_credentials,
)
from mesos_local.containerizer import users
from mesos_local.containerizer.environment import DEFAULT_PATH, parse_environment_json
from mesos_local.containerizer.planning import TaskInvalid, check_container_user, plan_task

pytestmark = pytest.mark.timeout(120)

ALICE = ("alice", "wonderland")
MALLORY = ("mallory", "s3cret:with:colons")
CREDENTIALS = dict([ALICE, MALLORY])
SUBSCRIBE = {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "u", "name": "n"}}}


def basic(principal, secret):
    return "Basic " + base64.b64encode(("%s:%s" % (principal, secret)).encode()).decode()


def post(master, body, authorization=None):
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    return requests.post(master.url + "/api/v1/scheduler", data=json.dumps(body),
                         headers=headers, timeout=10, stream=True)


# --- authentication ---------------------------------------------------------------------------

@pytest.mark.parametrize("authorization", [
    None, basic("alice", "wrong"), basic("nobody", "wonderland"), "Bearer abc",
    "Basic !!!not-base64", basic("alice", "")])
def test_subscribe_without_valid_credentials_is_401(make_local_master, authorization):
    master = make_local_master(credentials=CREDENTIALS)
    response = post(master, SUBSCRIBE, authorization)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == CHALLENGE == \
        'Basic realm="mesos-master-scheduler"'
    # libprocess' Unauthorized (3rdparty/libprocess/include/process/http.hpp:730-731):
    # no hint a client could come to rely on that a Mesos master never sends.
    assert response.text == "401 Unauthorized."
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert master.state()["frameworks"] == []
    other = requests.get(master.url + "/api/v1/scheduler", timeout=10)
    assert other.status_code == 401                # before the 405 of a GET
    assert requests.get(master.url + "/health", timeout=10).status_code == 200


@pytest.mark.parametrize("authorization", [None, basic("alice", "wrong"), "Bearer abc"])
def test_the_operator_event_stream_needs_credentials_too(make_local_master, authorization):
    """SUBSCRIBE on the operator API streams every task and framework of the
    cluster: without valid credentials it is a 401 like any operator call,
    and no stream is held for it."""
    master = make_local_master(credentials=CREDENTIALS)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    refused = requests.post(master.url + "/api/v1", data=json.dumps({"type": "SUBSCRIBE"}),
                            headers=headers, timeout=10, stream=True)
    assert refused.status_code == 401 and refused.text == "401 Unauthorized."
    assert refused.headers["WWW-Authenticate"] == 'Basic realm="mesos-master-readwrite"'
    assert len(master._records.subscribers) == 0
    headers["Authorization"] = basic(*MALLORY)
    with requests.post(master.url + "/api/v1", data=json.dumps({"type": "SUBSCRIBE"}),
                       headers=headers, timeout=10, stream=True) as stream:
        assert stream.status_code == 200
        assert len(master._records.subscribers) == 1


def test_principal_mismatch_is_refused(make_local_master):
    master = make_local_master(credentials=CREDENTIALS)
    body = json.loads(json.dumps(SUBSCRIBE))
    body["subscribe"]["framework_info"]["principal"] = "mallory"
    response = post(master, body, basic(*ALICE))
    assert response.status_code == 400
    assert response.text == ("Failed to validate scheduler::Call: Authenticated principal "
                             "'alice' does not match principal 'mallory' set in `FrameworkInfo`")


def test_authenticated_driver_runs_tasks_and_state_shows_no_secret(make_local_master,
                                                                    drivers):
    master = make_local_master(credentials=CREDENTIALS)
    principal, secret = ALICE
    driver, sched = drivers(master.url, framework={"principal": principal},
                            principal=principal, secret=secret)
    offer = sched.next("offers")[0][0]
    driver.launchTasks([offer.id], [task("hello", offer, "echo hi")], {"refuse_seconds": 0})
    assert states_of(sched, "hello", "TASK_FINISHED")[-1].state == "TASK_FINISHED"
    state = requests.get(master.url + "/master/state", timeout=10).json()
    assert state["frameworks"][0]["principal"] == "alice"
    assert secret not in json.dumps(state) and MALLORY[1] not in json.dumps(state)


def test_the_authenticated_principal_becomes_the_frameworks(make_local_master,
                                                            clients):
    master = make_local_master(credentials=CREDENTIALS)
    clients(master, auth=ALICE)          # FrameworkInfo names no principal
    assert master.state()["frameworks"][0]["principal"] == "alice"


def test_another_principal_cannot_fail_a_run_over(make_local_master, clients):
    master = make_local_master(credentials=CREDENTIALS)
    alice = clients(master, auth=ALICE, name="alices-run", failover_timeout=60)
    launch_running(alice, master, "work", "sleep 60")
    framework_id = alice.framework_id

    mallory = clients(master, subscribe=False, auth=MALLORY, name="x",
                      framework_id=framework_id)
    error = mallory.subscribe(expect_error=True)
    assert error["error"]["message"] == "Changing framework's principal is not allowed."
    mallory.next_event(CLOSED, timeout=30)
    mallory.stream_id = "stolen"
    response = mallory.call("REVIVE", check=False)
    assert response.status_code == 400 and "Authenticated principal 'mallory'" in response.text

    alice.next_event("HEARTBEAT", timeout=30, skip=())     # alice's stream goes on
    assert alice.call("REVIVE").status_code == 202
    framework = master.state()["frameworks"][0]
    assert framework["id"] == framework_id and framework["connected"]
    assert [t["state"] for t in framework["tasks"]] == ["TASK_RUNNING"]

    again = clients(master, subscribe=False, auth=ALICE, framework_id=framework_id,
                    name="alices-run", failover_timeout=60)
    assert again.subscribe()["subscribed"]["framework_id"]["value"] == framework_id
    assert alice.next_event("ERROR", timeout=30)["error"]["message"] == "Framework failed over"


def test_failover_keeps_principal_and_user_without_credentials(make_local_master,
                                                               clients):
    master = make_local_master()
    first = clients(master, user="tester", extra_info={"principal": "a"}, failover_timeout=60)
    other = clients(master, subscribe=False, framework_id=first.framework_id,
                    extra_info={"principal": "b"})
    assert other.subscribe(expect_error=True)["error"]["message"] == \
        "Changing framework's principal is not allowed."
    same = clients(master, subscribe=False, framework_id=first.framework_id, user="root",
                   extra_info={"principal": "a"})
    same.subscribe()
    assert master.state()["frameworks"][0]["user"] == "tester"   # preserved, as in Mesos


# --- containers --------------------------------------------------------------------------------

def container_task(task_id, offer, user=None, privileged=False, parameters=(), volumes=()):
    info = task_info(task_id, offer, "true")
    if user is not None:
        info["command"]["user"] = user
    info["container"] = {"type": "DOCKER", "docker": {
        "image": "img", "network": "HOST", "privileged": privileged,
        "parameters": [{"key": k, "value": v} for k, v in parameters]},
        "volumes": [{"container_path": "/data", "host_path": h, "mode": "RO"}
                    for h in volumes]}
    return info


def refusals(client, infos):
    """Launch ``infos`` (task id -> TaskInfo maker) on one offer each; the
    TASK_ERROR message of each."""
    messages = {}
    for task_id, make in infos.items():
        offer = client.next_offers()[0]
        client.launch(offer, [make(task_id, offer)], filters={"refuse_seconds": 0})
        status = client.wait_state(task_id, "TASK_ERROR")
        assert status["reason"] == "REASON_TASK_INVALID"
        messages[task_id] = status["message"]
    return messages


def test_privileged_root_volume_and_root_containers_are_refused(make_local_master,
                                                                clients, tmp_path):
    (tmp_path / "to-root").symlink_to("/")
    runner = RecordingRunner()
    master = make_local_master(container_runner=runner, allow_root=False)
    client = clients(master, user="nobody")
    messages = refusals(client, {
        "priv": lambda t, o: container_task(t, o, user="nobody", privileged=True),
        "priv-param": lambda t, o: container_task(t, o, user="nobody",
                                                  parameters=[("--privileged", "")]),
        "slash": lambda t, o: container_task(t, o, user="nobody", volumes=["/"]),
        "slashes": lambda t, o: container_task(t, o, user="nobody", volumes=["//"]),
        "dot": lambda t, o: container_task(t, o, user="nobody", volumes=["/./"]),
        "up": lambda t, o: container_task(t, o, user="nobody", volumes=["/tmp/../.."]),
        "link": lambda t, o: container_task(t, o, user="nobody",
                                            volumes=[str(tmp_path / "to-root")]),
        "root": lambda t, o: container_task(t, o, user="root"),
        "uid0": lambda t, o: container_task(t, o, user="0:1000"),
        "unknown": lambda t, o: container_task(t, o, user="no-such-user-here"),
        "caps": lambda t, o: container_task(t, o, user="nobody",
                                            parameters=[("cap-add", "SYS_ADMIN")]),
        # src/common/validation.cpp (MESOS-8497), at the master: TASK_ERROR
        "name": lambda t, o: container_task(t, o, user="nobody",
                                            parameters=[("name", "mine")]),
    })
    assert runner.launches == []
    for name in ("priv", "priv-param"):
        assert messages[name].startswith("privileged containers are refused")
    for name in ("slash", "slashes", "dot", "up", "link"):
        assert "the host's root directory" in messages[name], messages[name]
    for name in ("root", "uid0"):
        assert messages[name].startswith("container tasks may not run as root")
        assert "--allow-root" in messages[name]
    assert "could make it root" in messages["unknown"]
    assert "cap-add=SYS_ADMIN lifts the container's user boundary" in messages["caps"]
    assert messages["name"] == ("Task's `ContainerInfo` is invalid: Parameter in DockerInfo "
                                "must not be 'name'")


def test_root_framework_user_is_refused_unless_allowed(make_local_master, clients):
    refused = make_local_master(container_runner=RecordingRunner(), allow_root=False)
    client = clients(refused, user="root")
    message = refusals(client, {"r": lambda t, o: container_task(t, o)})["r"]
    assert message.startswith("container tasks may not run as root (user 'root')")

    runner = RecordingRunner()
    allowed = make_local_master(container_runner=runner, allow_root=True)
    client = clients(allowed, user="root")
    offer = client.next_offers()[0]
    client.launch(offer, [container_task("r", offer, parameters=[("privileged", "false")])])
    client.wait_state("r", "TASK_FINISHED")
    assert [launch.user for launch in runner.launches] == ["root"]


def test_container_user_checks_are_pure():
    info = {"task_id": {"value": "t"}, "agent_id": {"value": "S"}, "command": {"value": "true"},
            "container": {"type": "MESOS", "mesos": {"image": {
                "type": "DOCKER", "docker": {"name": "img"}}}}}
    plan = plan_task(info)
    assert check_container_user(plan, "nobody", root_allowed=False) == "nobody"
    assert check_container_user(plan, "65534:65534", root_allowed=False) == "65534:65534"
    assert check_container_user(plan, "root", root_allowed=True) == "root"
    for user in ("root", "0", "", None):
        with pytest.raises(TaskInvalid):
            check_container_user(plan, user, root_allowed=False)
    plan.docker_parameters = [("security-opt", "no-new-privileges")]
    assert check_container_user(plan, "nobody", root_allowed=False) == "nobody"
    plan.docker_parameters = [("group-add", "docker")]
    with pytest.raises(TaskInvalid, match="group-add=docker"):
        check_container_user(plan, "nobody", root_allowed=False)


# --- root submissions ---------------------------------------------------------------------------

ROOT_REFUSED = "User 'root' is not allowed to run frameworks without --root_submissions set"


def unprivileged_user():
    """A user a task may run as here: ``nobody`` when the tests run as root
    (the master switches to it), else the tests' own user."""
    if os.geteuid() != 0:
        return getpass.getuser()
    try:
        return pwd.getpwnam("nobody").pw_name
    except KeyError:
        pytest.skip("no user 'nobody' here")


def test_no_root_submissions_refuses_root_as_mesos_does(make_local_master, clients):
    master = make_local_master(root_submissions=False)
    assert master.state()["flags"]["root_submissions"] == "false"
    # A framework of user root: Mesos' master refuses its SUBSCRIBE
    # (Master::validateFramework, src/master/master.cpp).
    error = clients(master, subscribe=False, user="root").subscribe(expect_error=True)
    assert error["error"]["message"] == ROOT_REFUSED
    assert master.state()["frameworks"] == []
    # Another user's framework that names root for one task: the task is
    # refused as Mesos' authorizer refuses it (the run_tasks ACL).
    user = unprivileged_user()
    client = clients(master, user=user)
    offer = client.next_offers()[0]
    info = task_info("as-root", offer, "id -un")
    info["command"]["user"] = "root"
    client.launch(offer, [info], filters={"refuse_seconds": 0})
    status = client.wait_state("as-root", "TASK_ERROR")
    assert (status["source"], status["reason"]) == ("SOURCE_MASTER", "REASON_TASK_UNAUTHORIZED")
    assert status["message"].startswith("Not authorized to launch task as-root of framework "
                                        "%s under user 'root': " % client.framework_id)
    assert "--no-root-submissions" in status["message"]
    assert master.attached(client.framework_id, "as-root") is None   # never launched
    # Its other tasks run, as its own user.
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("as-user", offer, "id -un")])
    client.wait_state("as-user", "TASK_FINISHED", timeout=60)
    sandbox = master.attached(client.framework_id, "as-user")
    assert read_file(os.path.join(sandbox, "stdout"), contains="\n") == user + "\n"


def test_root_submissions_are_allowed_by_default_as_in_mesos(make_local_master, clients):
    master = make_local_master()
    assert master.state()["flags"]["root_submissions"] == "true"
    client = clients(master, user="root")   # subscribed: no ERROR
    offer = client.next_offers()[0]
    info = task_info("root", offer, "true")
    info["command"]["user"] = "root"
    client.launch(offer, [info])
    # Not as root, the master cannot give the task root (TASK_LOST, as on such an agent).
    client.wait_state("root", "TASK_FINISHED" if os.geteuid() == 0 else "TASK_LOST", timeout=60)


def test_no_root_submissions_where_every_task_runs_as_root_is_refused(capsys):
    # A root master without --switch_user runs every task as root: refusing
    # the name root alone would only seem to keep tasks from root.
    check = users.root_submissions_error
    assert check(switch_user=False, root_submissions=False, euid=1000) is None
    assert check(switch_user=True, root_submissions=False, euid=0) is None
    assert check(switch_user=False, root_submissions=True, euid=0) is None
    error = check(switch_user=False, root_submissions=False, euid=0)
    assert "--no-root-submissions" in error and "--no-switch-user" in error
    if os.geteuid() == 0:
        assert cli.main(["--no-switch-user", "--no-root-submissions", "--port", "0"]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0] == "mesos-local: error: " + error, lines
        with pytest.raises(ValueError, match="--no-switch-user"):
            LocalMaster(switch_user=False, root_submissions=False)


def test_a_root_master_without_credentials_warns_at_start(tmp_path):
    path = tmp_path / "credentials"
    path.write_text("alice wonderland\n")
    parse = cli.build_parser().parse_args
    open_root = cli.root_warning(parse([]), euid=0)
    assert open_root.count("\n") == 0
    assert "any user it names" in open_root and "root included" in open_root
    assert "--credentials FILE" in open_root and "--no-root-submissions" in open_root
    assert cli.root_warning(parse(["--credentials", str(path)]), euid=0) is None
    assert cli.root_warning(parse([]), euid=1000) is None
    assert cli.root_warning(parse(["--credentials", str(path)]), euid=1000) is None
    no_root = cli.root_warning(parse(["--no-root-submissions"]), euid=0)
    assert "but root" in no_root and "--credentials FILE" in no_root
    assert "--no-switch-user" in cli.root_warning(parse(["--no-switch-user"]), euid=0)


def test_the_command_line_prints_the_warning_when_root_without_credentials(tmp_path):
    path = tmp_path / "credentials"
    path.write_text("alice wonderland\n")
    for extra, warned in (([], os.geteuid() == 0), (["--credentials", str(path)], False)):
        proc = subprocess.Popen(
            [sys.executable, "-m", "mesos_local", "--port", "0", "--no-docker", "--cpus", "1",
             "--mem", "256", "--gpus", "0", "--work-dir", str(tmp_path / "work"),
             "--log-level", "warning"] + extra,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().startswith("local Mesos master listening on ")
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        warnings = [line for line in err.splitlines() if "warning:" in line]
        assert len(warnings) == (1 if warned else 0), err
        if warned:
            assert warnings[0].startswith("mesos-local: warning: running as root without "
                                          "--credentials")


def test_the_command_line_has_mesos_root_submissions_switch():
    parse = cli.build_parser().parse_args
    assert parse([]).root_submissions is True
    assert parse(["--no-root-submissions"]).root_submissions is False
    text = " ".join(cli.build_parser().format_help().split())
    assert "--no-root-submissions" in text and "--root_submissions" in text


# --- the tasks' environment ---------------------------------------------------------------

def test_plain_tasks_get_a_clean_environment(make_local_master, clients, monkeypatch):
    monkeypatch.setenv("TFMESOS_ONLY_IN_THE_MASTER", "leaked")
    master = make_local_master()
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("env", offer, "env", env={"FROM_TASKINFO": "yes"})])
    client.wait_state("env", "TASK_FINISHED")
    env = dict(line.split("=", 1) for line in
               read_file(os.path.join(master.sandbox("env"), "stdout")).splitlines()
               if "=" in line)
    assert "TFMESOS_ONLY_IN_THE_MASTER" not in env
    assert env["FROM_TASKINFO"] == "yes" and env[MARKER] == os.environ[MARKER]
    assert env["PATH"] == DEFAULT_PATH and env["MESOS_SANDBOX"] == master.sandbox("env")
    assert "HOME" not in env


def test_executor_environment_is_every_tasks_base(make_local_master, clients):
    base = marked_environment(PATH="/bin:/usr/bin", SHARED="1")
    master = make_local_master(executor_environment=base)
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("env", offer, 'echo "$PATH $SHARED"')])
    client.wait_state("env", "TASK_FINISHED")
    assert read_file(os.path.join(master.sandbox("env"), "stdout")) == "/bin:/usr/bin 1\n"


def test_embedded_master_of_a_run_has_credentials_and_the_submitters_environment(
        monkeypatch, drivers):
    from tfmesos.backends.sizing import start_local_master
    monkeypatch.setenv("TFMESOS_SUBMITTER_VARIABLE", "mine")
    job = types.SimpleNamespace(name="worker", num=1, cpus=0.1, mem=32, gpus=0)
    principal, secret = "mesos-local-run", "the-runs-own-secret-of-32-characters"
    master, url = start_local_master([job], (principal, secret))
    try:
        assert post(master, SUBSCRIBE).status_code == 401
        driver, sched = drivers(url, framework={"principal": principal},
                                principal=principal, secret=secret)
        offer = sched.next("offers")[0][0]
        driver.launchTasks([offer.id], [task("env", offer, "env")], {"refuse_seconds": 0})
        states_of(sched, "env", "TASK_FINISHED")
        text = read_file(os.path.join(master.sandbox("env"), "stdout"))
        assert "TFMESOS_SUBMITTER_VARIABLE=mine" in text.splitlines()
        assert principal.startswith("mesos-local-") and len(secret) >= 32
    finally:
        master.stop()


# --- the command line and credentials files ---------------------------------------------

def test_cli_refuses_a_public_host_without_credentials(capsys):
    assert cli.main(["--host", "0.0.0.0", "--port", "0"], prog="tfmesos local-master") == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--credentials" in lines[0]
    assert lines[0].startswith("tfmesos local-master: error: --host 0.0.0.0")


@pytest.mark.parametrize("argv, text", [
    (["--credentials", "/no/such/file"], "cannot read the credentials file /no/such/file"),
    (["--executor-environment-variables", '{"A": 1}'], "the value of A must be a string"),
    (["--executor-environment-variables", "[1]"], "expected a JSON object"),
])
def test_cli_argument_errors_are_one_line_usage_errors(capsys, argv, text):
    assert cli.main(argv + ["--port", "0"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], lines


def test_cli_security_options(tmp_path):
    path = tmp_path / "credentials"
    path.write_text("alice wonderland\n")
    args = cli.build_parser().parse_args([
        "--host", "::", "--credentials", "file://%s" % path, "--allow-root",
        "--executor-environment-variables", '{"LANG": "C.UTF-8"}'])
    assert cli.security_options(args) == {
        "credentials": {"alice": "wonderland"}, "allow_root": True,
        "executor_environment": {"LANG": "C.UTF-8", "PATH": DEFAULT_PATH}}
    local = cli.build_parser().parse_args(["--host", "127.0.0.2"])
    assert cli.security_options(local) == {"allow_root": None}
    assert cli.is_loopback("localhost") and cli.is_loopback("[::1]")
    assert not cli.is_loopback("0.0.0.0") and not cli.is_loopback("example.com")


def test_credentials_files_in_both_formats(tmp_path):
    assert parse_credentials(json.dumps({"credentials": [
        {"principal": "a", "secret": "x y"}, {"principal": "b"}]})) == {"a": "x y", "b": ""}
    assert parse_credentials("a x\n\n  b  y:z \n") == {"a": "x", "b": "y:z"}
    path = tmp_path / "creds.json"
    path.write_text('{"credentials": [{"principal": "p", "secret": "s"}]}')
    assert read_credentials(str(path)) == read_credentials("file://%s" % path) == {"p": "s"}


@pytest.mark.parametrize("text, error", [
    ("", "holds no credentials"),
    ('{"credentials": []}', "the list is empty"),
    ("a b c\n", "line 1: expected 'principal secret'"),
    ("a b\nonly\n", "line 2"),
    ('{"credential": []}', 'expected {"credentials"'),
    ('{"credentials": [{"secret": "s"}]}', "credentials[0]"),
    ('{"credentials": [{"principal": "a", "secrets": "s"}]}', "credentials[0]"),
    ('{"credentials": [{"principal": "a:b", "secret": "s"}]}', "contains ':'"),
    ("a x\na y\n", "given twice"),
    ("7", 'expected {"credentials"'),
])
def test_bad_credentials_files(text, error):
    with pytest.raises(CredentialsError) as info:
        parse_credentials(text, "FILE")
    assert error in str(info.value) and str(info.value).startswith("FILE")


def test_credentials_argument_and_authenticator():
    assert credentials_table(None) is None and credentials_table({}) is None
    assert credentials_table([("a", "b")]) == {"a": "b"}
    with pytest.raises(CredentialsError):
        credentials_table(["ab"])          # a string is not a pair
    auth = Authenticator(CREDENTIALS)
    assert auth.principal(basic(*MALLORY)) == "mallory"     # ':' in a secret is fine
    assert auth.principal(basic(*ALICE).replace("Basic", "basic")) == "alice"
    for header in (None, "", "Basic", basic("alice", "x"), "Digest abc"):
        assert auth.principal(header) is None
    with pytest.raises(ValueError, match="must be a string"):
        parse_environment_json('{"A": null}')


def test_a_work_directory_the_master_makes_lets_others_pass_through_but_not_list(
        make_local_master, tmp_path):
    # --work-dir made 0755: another local user listed every framework's
    # directory below it (found by a review helper); the README says other
    # users may pass through to their sandboxes but not list.
    made = tmp_path / "new-work"
    umask = os.umask(0o077)   # a umask does not cut it (0700 left the tasks' users out)
    try:
        master = make_local_master(work_dir=str(made))
    finally:
        os.umask(umask)
    assert master.work_dir == str(made)
    expected = 0o711 if os.geteuid() == 0 else 0o700   # root switches to the tasks' users
    assert stat.S_IMODE(os.stat(made).st_mode) == expected


def test_a_deleted_working_directory_is_one_usage_line(capsys, tmp_path, monkeypatch):
    # tfmesos local-master from a directory deleted under the shell was a
    # traceback (FileNotFoundError from os.getcwd; found by a review helper).
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(SystemExit) as caught:
        cli.main(["--port", "0"], prog="tfmesos local-master")
    assert caught.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "tfmesos local-master: error: the current directory no longer exists (deleted or moved "
        "away): cd to one that does, then run again")


def test_a_work_directory_this_user_cannot_write_is_one_usage_line():
    # One that was there was taken, and every task failed "cannot prepare the
    # sandbox: Permission denied" (found by a review helper, as a second user).
    import shutil
    import tempfile

    from local_users import as_user, nobody
    user = nobody(needs_root="acting as nobody needs root")
    base = tempfile.mkdtemp()      # (tmp_path's parents are 0700: nobody sees nothing there)
    os.chmod(base, 0o755)
    unwritable = os.path.join(base, "rodir")
    os.mkdir(unwritable, 0o755)

    def start():
        import contextlib
        import io
        import signal
        signal.alarm(30)   # (in the forked child) a master that starts is ended, not waited for
        errors = io.StringIO()
        with contextlib.redirect_stderr(errors):
            try:
                cli.main(["--port", "0", "--work-dir", str(unwritable)],
                         prog="tfmesos local-master")
            except SystemExit as exc:
                return "exit %s: %s" % (exc.code, errors.getvalue().strip().splitlines()[-1])
        return "started"
    try:
        assert as_user(user, start) == (
            "exit 2: tfmesos local-master: error: --work-dir %s: you cannot write there: give "
            "a directory you can write" % unwritable)
    finally:
        shutil.rmtree(base)
