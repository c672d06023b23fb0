"""Tasks run as the user Mesos would run them as (``--switch_user``, on by
default): a plain task of the embedded master runs as its
``CommandInfo.user``, else its ``FrameworkInfo.user``, in a sandbox that
user owns, and its URIs are fetched as that user; an unknown user is a task
that never launches (Mesos' agent: its sandbox cannot be given to it);
``--no-switch-user`` runs every task as the master's own user. A master not
run as root can give tasks only its own user.

The switching tests need root (``pytest.mark.skipif``); every master is
stopped at the end of its test (``fixtures_master``)."""

import glob
import os
import pathlib
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest
from cgroup_names import mesos_local_cgroups_of
from fixtures_master import (  # fixtures
    RecordingRunner,
    clients,
    make_local_master,
    read_file,
    small_agent,
)
from local_users import nobody, python_for
from mesos_http_client import task_info
from tfrun_helpers import run_tfrun

from mesos_local import command_line as cli
from mesos_local.containerizer import users
from mesos_local.containerizer.cgroups import isolation_problem
from mesos_local.containerizer.environment import DEFAULT_PATH
from mesos_local.containerizer.fetch_cache import FetcherCache
from mesos_local.containerizer.fetcher import FetchError, fetch_uris
from tfmesos.backends.task_user import check_task_user
from tfmesos.exceptions import SpecError

pytestmark = pytest.mark.timeout(180)

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="switching users needs root")
UNKNOWN = "no-such-user-here"
# What a task reports: who it is, who owns its sandbox, whether it reads /etc/shadow.
WHO = ("id -un; stat -c %U \"$MESOS_SANDBOX\"; "
       "if cat /etc/shadow >/dev/null 2>&1; then echo shadow-read; else echo shadow-denied; fi")


# -- who a task runs as --------------------------------------------------------------


def test_without_switch_user_every_task_runs_as_the_master_s_user():
    assert users.UserSwitch(enabled=False).task_user("nobody") is None
    assert users.UserSwitch(enabled=False).task_user(UNKNOWN) is None


def test_an_unknown_user_is_mesos_no_such_user():
    with pytest.raises(users.UserError, match="^No such user '%s'$" % UNKNOWN):
        users.UserSwitch(euid=0).task_user(UNKNOWN)


def test_a_task_of_the_master_s_own_user_needs_no_switch():
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert users.UserSwitch().task_user(me) is None


def test_root_switches_to_the_task_s_user_with_its_groups():
    entry = nobody()
    user = users.UserSwitch(euid=0).task_user("nobody")
    assert (user.name, user.uid, user.gid) == ("nobody", entry.pw_uid, entry.pw_gid)
    assert set(user.groups) == set(os.getgrouplist("nobody", entry.pw_gid))


def test_a_master_not_run_as_root_cannot_give_a_task_another_user():
    # As a Mesos agent not run as root: chown of the sandbox to that user fails.
    nobody()
    with pytest.raises(users.UserError, match="^Operation not permitted$"):
        users.UserSwitch(euid=4242).task_user("nobody")


def test_nothing_root_runs_before_the_switch_gets_the_framework_s_environment():
    env = {"LD_PRELOAD": "/tmp/evil.so", "PATH": "/tmp/evil", "PYTHONPATH": "/tmp",
           "MESOS_SANDBOX": "/sb", "MESOS_EXECUTOR_ID": "t", "SECRET": "s",
           "MESOS_TASK_ID": "not Mesos'"}
    assert users.step_environment(env) == {"MESOS_SANDBOX": "/sb", "MESOS_EXECUTOR_ID": "t",
                                           "PATH": DEFAULT_PATH}


def test_a_sandbox_log_is_never_opened_through_a_link(tmp_path):
    (tmp_path / "target").write_text("")
    os.symlink(tmp_path / "target", tmp_path / "stdout")
    with pytest.raises(OSError):
        users.open_log(str(tmp_path / "stdout"), None)
    os.mkfifo(tmp_path / "stderr")
    with pytest.raises(OSError):
        users.open_log(str(tmp_path / "stderr"), None)
    os.close(users.open_log(str(tmp_path / "fresh"), None))
    assert (tmp_path / "fresh").is_file()


def test_the_command_line_turns_switching_off_as_mesos_flag_does():
    assert cli.build_parser().parse_args([]).switch_user is True
    assert cli.build_parser().parse_args(["--no-switch-user"]).switch_user is False


# -- the fetcher as the task's user -----------------------------------------------------


def users_sandbox(parent, name, entry):
    """A sandbox ``parent/name`` that belongs to the user of ``entry`` (pwd)."""
    box = parent / name
    box.mkdir()
    os.chown(box, entry.pw_uid, entry.pw_gid)
    return box


@pytest.fixture
def open_dir():
    """A directory every user may pass through (pytest's tmp_path is root's alone)."""
    with tempfile.TemporaryDirectory(prefix="task-users-") as name:
        os.chmod(name, 0o755)
        yield pathlib.Path(name)


@needs_root
def test_a_file_uri_is_read_with_the_task_user_s_permissions(open_dir):
    entry = nobody()
    user = users.lookup("nobody")
    box = users_sandbox(open_dir, "sandbox", entry)
    with pytest.raises(FetchError, match="^Failed to fetch 'file:///etc/shadow': .*"
                                         "Permission denied"):
        fetch_uris([{"value": "file:///etc/shadow"}], str(box), run_as=user)
    assert os.listdir(box) == []
    readable = open_dir / "readable.txt"
    readable.write_text("hello\n")
    fetch_uris([{"value": "file://%s" % readable}], str(box), run_as=user)
    fetched = box / "readable.txt"
    assert fetched.read_text() == "hello\n" and fetched.stat().st_uid == entry.pw_uid


@needs_root
def test_a_cached_uri_is_kept_in_the_user_s_own_cache_directory(open_dir):
    entry = nobody()
    user = users.lookup("nobody")
    source = open_dir / "tool.sh"
    source.write_text("echo hi\n")
    uri = {"value": "file://%s" % source, "cache": True, "executable": True}
    cache = FetcherCache(str(open_dir / "cache"))
    for name in ("first", "second"):
        box = users_sandbox(open_dir, name, entry)
        fetch_uris([uri], str(box), cache=cache, user="nobody", run_as=user)
        fetched = (box / "tool.sh").stat()
        assert (fetched.st_uid, stat.S_IMODE(fetched.st_mode)) == (entry.pw_uid, 0o750)
    assert cache.downloads[uri["value"]] == 1
    [directory] = os.listdir(open_dir / "cache")
    mine = (open_dir / "cache" / directory).stat()
    assert (mine.st_uid, stat.S_IMODE(mine.st_mode)) == (entry.pw_uid, 0o700)


@needs_root
def test_a_shipped_bundle_lands_as_the_task_user_s_and_checks(open_dir):
    # tfrun --ship for a task of another user: the bundle (cache: true) goes
    # into that user's part of the agent's fetcher cache and is copied from
    # there, by a fetcher process that became the user, into the sandbox,
    # where the task's command checks its sha256 before it extracts it
    # (ship/fetch_check.py): the user's file, the bytes packed.
    from tfmesos.ship import bundle
    entry = nobody()
    user = users.lookup("nobody")
    project = open_dir / "proj"
    project.mkdir()
    (project / "train.py").write_text("print('hi')\n" * 1000)
    (project / "weights.bin").write_bytes(os.urandom(1 << 20))
    packed = bundle.pack(str(project), str(open_dir))
    os.chmod(packed.path, 0o644)
    uri = {"value": "file://%s" % packed.path, "extract": False, "cache": True}
    cache = FetcherCache(str(open_dir / "cache"))
    for name in ("first", "second"):
        box = users_sandbox(open_dir, name, entry)
        fetch_uris([uri], str(box), cache=cache, user="nobody", run_as=user)
        assert (box / packed.name).stat().st_uid == entry.pw_uid
        assert bundle.file_sha256(str(box / packed.name)) == packed.sha256
    assert cache.downloads[uri["value"]] == 1


# -- through the embedded master, as root ------------------------------------------------


def run_who(master, clients, user):
    """Run WHO as a task of a framework of ``user``; its stdout lines."""
    client = clients(master, user=user)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("who", offer, WHO)])
    client.wait_state("who", "TASK_FINISHED", timeout=60)
    sandbox = master.attached(client.framework_id, "who")
    return read_file(os.path.join(sandbox, "stdout"), contains="shadow-").split()


SWITCHES = [pytest.param({}, ["nobody", "nobody", "shadow-denied"], id="switch"),
            pytest.param({"switch_user": False}, ["root", "root", "shadow-read"],
                         id="no-switch")]
if isolation_problem() is None:
    SWITCHES.append(pytest.param({"isolation": "cgroups/cpu,cgroups/mem"},
                                 ["nobody", "nobody", "shadow-denied"], id="cgroups"))
if shutil.which("unshare"):
    # Hidden paths hide this host's Python too: the switch to the user sees it.
    SWITCHES.append(pytest.param({"agents": [small_agent(isolate=("fs",))]},
                                 ["nobody", "nobody", "shadow-denied"], id="isolate-fs"))


@needs_root
@pytest.mark.parametrize("options, seen", SWITCHES)
def test_a_task_of_nobody_on_a_root_master_runs_as_nobody(make_local_master, clients, options,
                                                          seen):
    nobody()
    assert run_who(make_local_master(**options), clients, "nobody") == seen


@needs_root
@pytest.mark.parametrize("options, seen", SWITCHES)
@pytest.mark.parametrize("user", ["nobody", "root"])
def test_without_a_shell_argv0_is_arguments_0_whatever_starts_the_task(
        make_local_master, clients, options, seen, user):
    """Each way a plain task starts (as the master's user, switched to
    another, in cgroups, with hidden paths): ``value`` exec'd with
    ``arguments`` as its argv (launch.cpp), arguments[0] its argv[0]."""
    nobody()
    master = make_local_master(**options)
    client = clients(master, user=user)
    offer = client.next_offers()[0]
    info = task_info("argv0", offer, "/bin/sh")
    info["command"].update({"shell": False, "arguments": [
        "my-argv0", "-c", 'printf "%s %s\\n" "$0" "$(id -un)"']})
    client.launch(offer, [info])
    client.wait_state("argv0", "TASK_FINISHED", timeout=60)
    sandbox = master.attached(client.framework_id, "argv0")
    runs_as = seen[0] if user == "nobody" else "root"
    assert read_file(os.path.join(sandbox, "stdout")) == "my-argv0 %s\n" % runs_as


@needs_root
@pytest.mark.parametrize("container", [False, True], ids=["plain", "container"])
def test_a_uri_the_task_s_user_cannot_read_is_never_copied(make_local_master, clients,
                                                           container):
    # A container task's URIs were fetched as root: a task of nobody's copied
    # /etc/shadow into its sandbox (as a Mesos agent, fetched as its user:
    # DockerContainerizerProcess::fetch, src/slave/containerizer/docker.cpp).
    nobody()
    master = make_local_master(container_runner=RecordingRunner())
    client = clients(master, user="nobody")
    offer = client.next_offers()[0]
    info = task_info("shadow", offer, "true")
    info["command"]["uris"] = [{"value": "file:///etc/shadow"}]
    if container:
        info["container"] = {"type": "DOCKER", "docker": {"image": "img", "network": "HOST"}}
    client.launch(offer, [info])
    status = client.wait_state("shadow", "TASK_FAILED", timeout=60)
    assert status["message"].startswith("Failed to fetch 'file:///etc/shadow': ")
    assert "Permission denied" in status["message"]
    sandbox = master.attached(client.framework_id, "shadow")
    assert not os.path.exists(os.path.join(sandbox, "shadow"))


@needs_root
def test_an_unknown_user_s_task_is_lost_as_on_a_mesos_agent(make_local_master, clients):
    master = make_local_master()
    client = clients(master, user=UNKNOWN)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("lost", offer, "true")])
    status = client.wait_state("lost", "TASK_LOST", timeout=60)
    assert status["source"] == "SOURCE_AGENT"
    assert status["reason"] == "REASON_EXECUTOR_TERMINATED"
    assert status["message"].startswith("Failed to create executor directory '")
    assert status["message"].endswith("': Failed to chown directory to '%s': No such user '%s'"
                                      % (UNKNOWN, UNKNOWN))
    # The master goes on: the same framework's next task, as a user that exists, runs.
    offer = client.next_offers()[0]
    info = task_info("known", offer, "true")
    info["command"]["user"] = "root"        # CommandInfo.user comes before the framework's
    client.launch(offer, [info])
    client.wait_state("known", "TASK_FINISHED", timeout=60)


# -- tfrun -u ------------------------------------------------------------------------------


@needs_root
def test_tfrun_u_runs_the_tasks_as_that_user():
    nobody()
    done = run_tfrun("-u", "nobody", "--python", python_for("nobody"), "--", "id", "-un")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == ["[worker:0] nobody"]


@needs_root
def test_tfrun_u_gives_the_tasks_of_another_user_none_of_the_submitter_s_secrets():
    # Every variable of root's reached nobody's tasks: credentials never given
    # with --secret-env (AWS_*, MESOS_SECRET), HOME=/root.
    nobody()
    done = run_tfrun("-u", "nobody", "--python", python_for("nobody"), "--", "sh", "-c",
                     'echo "aws=${{AWS_SECRET_ACCESS_KEY-unset}} mesos=${{MESOS_SECRET-unset}} '
                     'lang=${{LANG-unset}}"', env={"AWS_SECRET_ACCESS_KEY": "rootonly",
                                                  "MESOS_SECRET": "mesospw", "LANG": "C.UTF-8"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == [
        "[worker:0] aws=unset mesos=unset lang=C.UTF-8"]


@needs_root
def test_tfrun_u_says_at_once_when_the_user_cannot_run_the_tasks_python(tmp_path):
    nobody()
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    os.symlink(sys.executable, private / "python3")
    done = run_tfrun("-u", "nobody", "--python", str(private / "python3"), "--", "true")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(
        "tfrun: error: -u nobody: nobody cannot run ")
    assert "--python" in done.stderr.splitlines()[-1]


@needs_root
@pytest.mark.parametrize("api", ["run", "cluster"])
def test_a_python_call_as_another_user_says_at_once_when_the_user_cannot_run_its_python(
        api, tmp_path, monkeypatch):
    # tfmesos.run(user="nobody") under a Python only root can run failed
    # three launches ("exec: ...python3: Permission denied", exit 126) and
    # raised TaskFailed, where tfrun -u says it before anything starts.
    import tfmesos
    nobody()
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    os.symlink(sys.executable, private / "python3")
    monkeypatch.setattr(sys, "executable", str(private / "python3"))
    monkeypatch.delenv("MESOS_MASTER", raising=False)
    monkeypatch.chdir(tmp_path)
    masters_before = set(mesos_local_cgroups_of(os.getpid()))
    with pytest.raises(SpecError) as caught:
        if api == "run":
            tfmesos.run(len, workers=1, user="nobody", ship=None, cpus=0.1, mem=64)
        else:
            with tfmesos.cluster([{"name": "worker", "num": 1, "cpus": 0.1, "mem": 64}],
                                 user="nobody"):
                pass
    message = str(caught.value)
    assert message.startswith("user=nobody: nobody cannot run the tasks' Python, %s"
                              % (private / "python3")), message
    assert "give python an interpreter nobody can run" in message
    assert set(mesos_local_cgroups_of(os.getpid())) <= masters_before   # no master started


def test_tfrun_u_of_another_user_needs_tfrun_to_run_as_root():
    nobody()
    with pytest.raises(SpecError, match="^user=nobody: the embedded master runs tasks as nobody "
                                        "only when tfrun runs as root"):
        check_task_user("nobody", sys.executable, None, euid=4242)
    # Its own user it runs anyway; with switch_user off, tfrun's own.
    check_task_user(pwd.getpwuid(os.geteuid()).pw_name, "/nonexistent/python", None)
    check_task_user("nobody", "/nonexistent/python", None, switch_user=False, euid=4242)


def test_tfrun_u_with_an_unknown_user_is_a_usage_error():
    done = run_tfrun("-u", UNKNOWN, "--", "true")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(
        "tfrun: error: -u %s: no such user on this machine, where the embedded master runs "
        "the tasks" % UNKNOWN)
