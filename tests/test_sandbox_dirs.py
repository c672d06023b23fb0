"""A nested container's sandbox (a task of the DEFAULT executor) lies in
its executor's sandbox, which the group's tasks own: a task of the group
can rename anything there, even while the agent (root) prepares the next
task. The agent makes that sandbox, its stdout and stderr, and gives it to
the task's user through descriptors opened below the executor's sandbox
without following a link (``sandbox_dirs.make_sandbox``), and gives only a
directory it made itself: never a directory a link leads to, nor one the
task's user put in its place.

The tests play the task that swaps ``containers`` between the agent's two
steps (``Executors._nested_sandbox``, then ``TaskProcess._make_sandbox``),
as root with ``nobody`` as the task's user, and check what lies outside
the sandbox is untouched."""

import os
import stat
import uuid

import pytest
from local_users import nobody

from mesos_local.containerizer.executor import TaskProcess
from mesos_local.containerizer.runner import TaskLaunch
from mesos_local.containerizer.users import SANDBOX_MODE, TaskUser, UserSwitch, open_log

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="giving a sandbox to a user needs root")


def nobody_task_user():
    entry = nobody()
    return TaskUser("nobody", entry.pw_uid, entry.pw_gid, (entry.pw_gid,))


def nested_task(executor_sandbox, container_id):
    """The TaskProcess (not started) of a task of nobody's in the nested
    container ``container_id`` of the executor whose sandbox is
    ``executor_sandbox``; its user looked up as ``_start`` does."""
    sandbox = os.path.join(str(executor_sandbox), "containers", container_id)
    launch = TaskLaunch(task_id="t", framework_id="f", agent_id="a", sandbox=sandbox,
                        command="true", sandbox_below=str(executor_sandbox))
    proc = TaskProcess(launch, runner=None, uris=[], on_running=None, on_exit=None,
                       user="nobody", switch=UserSwitch(enabled=True))
    proc.task_user = proc.launch.run_as = proc.switch.task_user("nobody")
    return proc


def executor_of(tmp_path, user):
    """An executor's sandbox, the user's, with the agent's containers/<id>
    made in it (root's, as ``_nested_sandbox`` makes it); (its path, the id)."""
    executor = tmp_path / "executor"
    container_id = str(uuid.uuid4())
    (executor / "containers" / container_id).mkdir(parents=True)
    os.chown(executor, user.uid, user.gid)
    return executor, container_id


def outside_tree(tmp_path, container_id):
    """A root directory outside every sandbox holding <id>/secret (0600,
    root's): where a planted link would lead the agent."""
    outside = tmp_path / "outside"
    (outside / container_id).mkdir(parents=True)
    secret = outside / container_id / "secret"
    secret.write_text("root's")
    secret.chmod(0o600)
    return outside, secret


def untouched(directory, secret):
    info = os.stat(secret)
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600)
    assert os.stat(directory).st_uid == 0
    assert stat.S_IMODE(os.stat(directory).st_mode) != SANDBOX_MODE
    assert sorted(os.listdir(directory)) == ["secret"]


def test_a_nested_sandbox_is_made_and_given_to_its_user(tmp_path):
    user = nobody_task_user()
    executor, container_id = executor_of(tmp_path, user)
    (executor / "containers" / container_id / "volume").symlink_to("/etc")
    nested_task(executor, container_id)._make_sandbox()
    sandbox = executor / "containers" / container_id
    info = os.stat(sandbox)
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (user.uid, SANDBOX_MODE)
    for name in ("stdout", "stderr"):
        assert os.stat(sandbox / name).st_uid == user.uid
    assert os.lstat(sandbox / "volume").st_uid == user.uid     # the link, not /etc
    assert os.stat("/etc").st_uid == 0


def test_what_the_agent_made_is_given_and_a_volume_its_user_filled_is_not_entered(tmp_path):
    # A SANDBOX_PATH volume of the task (made for nobody when the agent
    # prepared it) that a task of the group filled since with a hard link to
    # root's file (only a host without fs.protected_hardlinks lets a user
    # make one); beside it, directories the agent made on a volume's path.
    user = nobody_task_user()
    executor, container_id = executor_of(tmp_path, user)
    outside, secret = outside_tree(tmp_path, container_id)
    sandbox = executor / "containers" / container_id
    (sandbox / "volume").mkdir()
    os.chown(sandbox / "volume", user.uid, user.gid)
    os.link(secret, sandbox / "volume" / "secret")
    (sandbox / "made" / "deeper").mkdir(parents=True)
    nested_task(executor, container_id)._make_sandbox()
    info = os.stat(secret)
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600)
    for made in (sandbox / "made", sandbox / "made" / "deeper", sandbox / "stdout"):
        assert os.lstat(made).st_uid == user.uid


def test_a_nested_sandbox_is_never_made_or_given_through_a_link(tmp_path):
    # The group's task renames 'containers' and leaves a link to an outside
    # directory that holds <container id>, between the agent's two steps.
    user = nobody_task_user()
    executor, container_id = executor_of(tmp_path, user)
    outside, secret = outside_tree(tmp_path, container_id)
    (executor / "containers").rename(executor / "was-containers")
    (executor / "containers").symlink_to(outside)
    with pytest.raises(OSError, match="link"):
        nested_task(executor, container_id)._make_sandbox()
    untouched(outside / container_id, secret)


def test_a_nested_sandbox_its_user_put_in_place_is_not_given(tmp_path):
    # A directory of the task's user where the agent's was: whatever it
    # holds (here a hard link to root's file, which only a host without
    # fs.protected_hardlinks lets a user make) stays as it is.
    user = nobody_task_user()
    executor, container_id = executor_of(tmp_path, user)
    outside, secret = outside_tree(tmp_path, container_id)
    (executor / "containers").rename(executor / "was-containers")
    planted = executor / "containers" / container_id
    planted.mkdir(parents=True)
    os.link(secret, planted / "secret")
    os.chown(executor / "containers", user.uid, user.gid)
    os.chown(planted, user.uid, user.gid)
    with pytest.raises(OSError, match="not the agent's"):
        nested_task(executor, container_id)._make_sandbox()
    info = os.stat(secret)
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600)
    assert not (planted / "stdout").exists()


def test_a_task_s_log_is_never_created_through_a_link(tmp_path):
    # The runner opens the stdout and stderr the sandbox's preparation made:
    # a link planted since then leads nowhere root would create a file.
    user = nobody_task_user()
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "sandbox").symlink_to(outside)
    with pytest.raises(FileNotFoundError):
        open_log(str(tmp_path / "sandbox" / "stdout"), user, create=False)
    assert os.listdir(outside) == []
