"""What a stopped master leaves (issue 33, item 1): ``LocalMaster.stop()``
removes its cgroups and its work directory before it returns;
``stop(detached_cleanup=True)`` leaves them to a cleaner of their own that
outlives the master's process (tfrun's end); what no cleaner removed (the
master or its cleaner killed with SIGKILL) the next master's start
removes, and nothing of a live master's, another user's, or through a
symbolic link."""

import json
import os
import pwd
import re
import subprocess
import sys
import textwrap

import pytest
from conftest import MARKER
from fixtures_master import clients, launch_running, make_local_master
from waiting import wait_until

from mesos_local import cleanup
from mesos_local.containerizer.cgroups import isolation_problem

pytestmark = pytest.mark.timeout(180)

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
PROBLEM = isolation_problem()
ISOLATION = None if PROBLEM is not None else "cgroups/cpu,cgroups/mem"
GONE_WITHIN = 30.0   # seconds: a loaded machine; what this catches stays for good

# A master in a process of its own: starts, runs a task, then ends as
# argv[1] says: "detached" (stop(detached_cleanup=True), then exit at once)
# or "killed" (SIGKILL once its task finished, no stop). It prints its work directory, its
# cgroups and the task's sandbox first.
MASTER = textwrap.dedent("""
    import json, os, signal, sys
    sys.path.insert(0, %(tests)r)
    from mesos_http_client import SchedulerClient, task_info
    from mesos_local import AgentSpec, LocalMaster

    master = LocalMaster(agents=[AgentSpec(cpus=1, mem=256, disk=100, ports=((31000, 31000),),
                                           gpus=0)],
                         isolation=%(isolation)r, allocation_interval=0.05,
                         kill_grace_period=0.5, executor_environment={%(marker)r: %(token)r})
    master.start()
    client = SchedulerClient(master.url)
    client.subscribe()
    offer = client.next_offers()[0]
    killed = sys.argv[1] == "killed"   # its task ends first: none outlives the master
    client.launch(offer, [task_info("t1", offer, "echo hi" if killed else "echo hi; sleep 60")],
                  filters={"refuse_seconds": 0})
    client.wait_state("t1", "TASK_FINISHED" if killed else "TASK_RUNNING")
    sandbox = master.attached(client.framework_id, "t1")
    cgroups = list(master.isolator.directories.values()) if master.isolator else []
    print(json.dumps({"work_dir": master.work_dir, "cgroups": cgroups, "sandbox": sandbox}),
          flush=True)
    if killed:
        os.kill(os.getpid(), signal.SIGKILL)
    client.close()
    master.stop(detached_cleanup=True)
    os._exit(0)
""")


def run_master(tmp_path, end, prefix=()):
    """Run ``MASTER`` ending as ``end`` (under the command ``prefix``);
    what it printed (a dict)."""
    script = tmp_path / "master.py"
    script.write_text(MASTER % {"tests": TESTS, "isolation": ISOLATION, "marker": MARKER,
                                "token": os.environ[MARKER]})
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    done = subprocess.run([*prefix, sys.executable, str(script), end], cwd=REPO,
                          capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=REPO))
    assert done.stdout, done.stderr
    assert done.returncode == (0 if end == "detached" else -9), done.stderr
    return json.loads(done.stdout.splitlines()[0])


def left(paths):
    return [path for path in paths if os.path.lexists(path)]


def test_stop_removes_cgroups_and_sandboxes_before_it_returns(make_local_master, clients):
    """A library user's stop() (and mesos-local's): everything gone when it
    returns; the work directory is named after the master's process."""
    master = make_local_master(isolation=ISOLATION)
    client = clients(master)
    launch_running(client, master, "t1", "sleep 60")
    work_dir = master.work_dir
    cgroups = list(master.isolator.directories.values()) if master.isolator else []
    sandbox = master.attached(client.framework_id, "t1")
    assert sandbox.startswith(work_dir + os.sep) and os.path.isdir(sandbox)
    assert re.fullmatch(r"mesos-local-\d+\.%d\.\d+-\w+" % os.getpid(),
                        os.path.basename(work_dir)), work_dir
    assert all(os.path.isdir(path) for path in cgroups)
    master.stop()
    assert left([work_dir] + cgroups) == []


def test_a_kept_work_dir_is_not_named_for_removal(make_local_master, tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    master = make_local_master(keep_sandboxes=True)
    assert re.fullmatch(r"mesos-local-\w{8}", os.path.basename(master.work_dir))
    master.stop()
    assert os.path.isdir(master.work_dir)
    assert cleanup.remove_stale_work_dirs(str(tmp_path)) == []
    assert os.path.isdir(master.work_dir)


def test_a_detached_cleaner_removes_them_after_the_master_exits(tmp_path):
    found = run_master(tmp_path, "detached")
    paths = [found["work_dir"]] + found["cgroups"]
    assert found["sandbox"].startswith(found["work_dir"] + os.sep)
    assert not ISOLATION or found["cgroups"]
    wait_until(lambda: not left(paths), GONE_WITHIN,
               message=lambda: "left after the cleaner: %s" % left(paths))
    assert os.listdir(tmp_path / "tmp") == []


@pytest.mark.parametrize("init", ["the master", "a shell"])
def test_a_master_in_a_pid_namespace_of_its_own_removes_them_before_it_exits(tmp_path, init):
    # tfrun as PID 1 of a pid namespace of its own (unshare -fp, a container's
    # entry point), or under an init that exits right after it (tini, a shell
    # that did not exec): the kernel kills every process of the namespace as
    # its init exits, the detached cleaner too; its work directory and
    # cgroups were left, named for a namespace no later master runs in.
    if os.geteuid() != 0:
        pytest.skip("a pid namespace of its own needs root")
    prefix = ("unshare", "-fp", "--mount-proc")
    if init == "a shell":   # sh -c 'CMD; true': not exec'd, the master is pid 2
        prefix += ("sh", "-c", '"$@"; status=$?; exit $status', "sh")
    found = run_master(tmp_path, "detached", prefix=prefix)
    paths = [found["work_dir"]] + found["cgroups"]
    try:
        assert left(paths) == []
    finally:
        if left(paths):
            subprocess.run([sys.executable, "-I", "-S", cleanup.__file__,
                            *[word for path in found["cgroups"] for word in ("--cgroup", path)],
                            "--tree", found["work_dir"]], timeout=60)


def gone_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def named(root, pid, start, tail):
    """A work directory's path as ``make_work_dir`` names one, for a
    creator (``pid``, ``start``) in this pid namespace; checked against the
    pattern the start's removal reads, so that a change of format cannot
    make a decoy "kept" only because it is no longer recognised."""
    name = "mesos-local-%d.%d.%d-%s" % (cleanup._pid_namespace(), pid, start, tail)
    assert cleanup._WORK_DIR.match(name), name
    return os.path.join(root, name)


def test_what_a_killed_master_or_cleaner_left_goes_at_the_next_start(
        tmp_path, make_local_master, monkeypatch):
    found = run_master(tmp_path, "killed")   # no stop, no cleaner: all of it stays
    paths = [found["work_dir"]] + found["cgroups"]
    assert left(paths) == paths
    tmp = str(tmp_path / "tmp")
    # Alongside: a live process' work directory, a symbolic link named as a
    # gone one's, an older mesos-local's (no creator named), another user's.
    live = named(tmp, os.getpid(), cleanup.process_start(os.getpid()), "live1234")
    os.mkdir(live)
    target = tmp_path / "target"
    target.mkdir()
    (target / "kept").write_text("")
    link = named(tmp, gone_pid(), 1, "link1234")
    os.symlink(str(target), link)
    older = os.path.join(tmp, "mesos-local-ab12cd34")
    os.mkdir(older)
    kept = [live, link, older]
    if os.geteuid() == 0:
        other = named(tmp, gone_pid(), 2, "other123")
        os.mkdir(other)
        os.chown(other, pwd.getpwnam("nobody").pw_uid, -1)
        kept.append(other)
    monkeypatch.setattr("tempfile.tempdir", tmp)
    master = make_local_master(isolation=ISOLATION)   # its start removes them
    assert left(paths) == []
    assert left(kept) == kept and (target / "kept").exists()
    master.stop()
    assert sorted(os.listdir(tmp)) == sorted(os.path.basename(path) for path in kept)


def test_the_cleaner_removes_cgroup_directories_and_the_tree(tmp_path):
    # The cleaner's cgroup half without cgroups: plain directories, their
    # task "cgroups" empty ones (no cgroup.procs: nothing to kill).
    d1, d2, tree = tmp_path / "cpu", tmp_path / "memory", tmp_path / "work"
    for task in (d1 / "t1", d1 / "t2", d2 / "t1"):
        task.mkdir(parents=True)
    (tree / "slaves" / "s1").mkdir(parents=True)
    (tree / "slaves" / "s1" / "stdout").write_text("hi\n")
    assert cleanup.main(["--cgroup", str(d1), "--cgroup", str(d2), "--tree", str(tree)]) == 0
    assert os.listdir(tmp_path) == []
