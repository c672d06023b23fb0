"""Nothing left behind (issue 35, item 4): the temporary directories of a
tfrun killed before it could remove them go at the next tfrun's start, a
live one's stay; a run's key goes once the run has ended (its scheduler,
``tfmesos kill``, ``tfmesos attach``, ``tfmesos runs --prune``), never
while it runs; run directories and what is in them are their user's alone."""

import glob
import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

import pytest
from cgroup_names import mesos_local_cgroups_of
from fixtures_master import make_local_master
from tfrun_helpers import REPO, SMALL, finish_reading, start_tfrun
from waiting import wait_until

from tfmesos.backends.embedded import EmbeddedMaster
from tfmesos.ship import work_dirs

pytestmark = pytest.mark.timeout(300)

# A task that prints a step every 0.2 s until the file argv[1] exists.
TRAIN = (
    "import os, sys, time\n"
    "step = 0\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    print('step', step, flush=True)\n"
    "    step += 1\n"
    "    time.sleep(0.2)\n")


def tfmesos(*args, env, timeout=60):
    return subprocess.run([sys.executable, "-m", "tfmesos.cli.main", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def stepped(path):
    try:
        with open(path) as handle:
            return "step 0" in handle.read()
    except FileNotFoundError:
        return False


def ship_dirs_of(tmp, pid):
    """The ``tfmesos-ship-*`` directories in ``tmp`` named after process ``pid``."""
    return [name for name in os.listdir(tmp)
            if name.startswith("tfmesos-ship-") and ".%d." % pid in name]


# -- stale temporary directories -------------------------------------------------------


def dead_process():
    """(pid, its start ticks as a live process's name would carry them) of
    a process that has ended and was reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def named_for(tmp, pid, start=1):
    namespace = work_dirs._namespace_number(os.readlink("/proc/self/ns/pid"))
    return os.path.join(tmp, "tfmesos-ship-%d.%d.%d-abc_123" % (namespace, pid, start))


def test_a_directory_of_a_gone_process_goes_a_live_ones_a_link_and_another_users_stay(tmp_path):
    gone = named_for(tmp_path, dead_process())
    os.mkdir(gone)
    (tmp_path / "outside").mkdir()
    os.symlink(str(tmp_path / "outside"), os.path.join(gone, "link"))
    (tmp_path / "outside" / "kept").write_text("")
    mine = work_dirs.make("ship")   # this process's, in the real temporary directory
    try:
        live = os.path.join(tmp_path, os.path.basename(mine))
        os.mkdir(live)
        # A symbolic link named as a gone process's directory: neither followed nor removed.
        target = tmp_path / "target"
        target.mkdir()
        (target / "kept").write_text("")
        link = named_for(tmp_path, dead_process(), start=2)
        os.symlink(str(target), link)
        plain = tmp_path / "tfmesos-ship-x7k2"   # an older tfmesos's: no creator to tell
        plain.mkdir()
        others = []
        if os.geteuid() == 0:
            other = named_for(tmp_path, dead_process(), start=3)
            os.mkdir(other)
            os.chown(other, pwd.getpwnam("nobody").pw_uid, -1)
            others.append(other)
        assert work_dirs.remove_stale(str(tmp_path)) == [gone]
        assert not os.path.lexists(gone)
        assert (tmp_path / "outside" / "kept").exists()
        assert os.path.isdir(live) and os.path.islink(link) and (target / "kept").exists()
        assert plain.is_dir() and all(os.path.isdir(path) for path in others)
        assert os.path.isdir(mine)
        assert oct(os.stat(mine).st_mode & 0o777) == "0o700"
    finally:
        shutil.rmtree(mine, ignore_errors=True)


def test_a_killed_tfruns_ship_directory_goes_at_the_next_start_a_live_ones_stays(
        make_local_master, tmp_path):
    master = make_local_master()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    env = dict(os.environ, MESOS_MASTER="", TMPDIR=str(tmp), TFMESOS_RUNS_DIR=str(tmp_path))

    def shipped(run_dir, finish):
        return ("-m", master.url, "--ship", str(project), "-w", "1", "-s", "0", *SMALL,
                "--run-dir", str(tmp_path / run_dir), "--", sys.executable, "train.py",
                str(tmp_path / finish))
    with start_tfrun(*shipped("live", "finish-live"), env=env) as live, \
            start_tfrun(*shipped("killed", "never"), env=env) as killed:
        wait_until(lambda: stepped(tmp_path / "live" / "worker.0.stdout")
                   and stepped(tmp_path / "killed" / "worker.0.stdout"), timeout=120)
        [live_dir] = ship_dirs_of(tmp, live.pid)
        [killed_dir] = ship_dirs_of(tmp, killed.pid)
        killed.send_signal(signal.SIGKILL)
        killed.wait(30)
        assert os.path.isdir(tmp / killed_dir)    # nothing removed it: SIGKILL
        # The next tfrun removes it at its start, and leaves the live run's alone.
        with start_tfrun("-m", master.url, "-w", "1", "-s", "0", *SMALL, "--run-dir",
                         str(tmp_path / "next"), "--", "true", env=env) as following:
            out, err = finish_reading(following, 120)
        assert following.returncode == 0, err
        assert not os.path.lexists(tmp / killed_dir)
        assert os.path.isdir(tmp / live_dir)
        (tmp_path / "finish-live").write_text("")
        out, err = finish_reading(live, 120)
        assert live.returncode == 0, err
    assert not os.path.lexists(tmp / live_dir)    # its own tfrun removed it at its end


# -- the embedded master's cgroups and sandboxes -------------------------------------------


def test_tfruns_cgroups_and_sandboxes_go_after_it_exits(tmp_path):
    """tfrun leaves its embedded master's cgroups and sandboxes to a cleaner
    of their own, off the path that decides when it exits (issue 33): all
    gone within seconds of its end; its sandboxes were named after it (the
    next master's start removes them if that cleaner was killed)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, MESOS_MASTER="", TMPDIR=str(tmp), TFMESOS_RUNS_DIR=str(tmp_path))
    with start_tfrun("-w", "2", "-s", "0", *SMALL, "--", 'echo "sandbox $MESOS_SANDBOX"',
                     env=env) as tfrun:
        out, err = finish_reading(tfrun, 120)
    assert tfrun.returncode == 0, err
    sandboxes = re.findall(r"^\[worker:\d\] sandbox (\S+)$", out, re.M)
    assert len(sandboxes) == 2, out
    namespace = work_dirs._namespace_number(os.readlink("/proc/self/ns/pid"))
    for sandbox in sandboxes:
        assert re.match(r"%s/mesos-local-%d\.%d\.\d+-\w+/" % (re.escape(str(tmp)), namespace,
                                                                tfrun.pid), sandbox), sandbox
    wait_until(lambda: os.listdir(tmp) == [] and mesos_local_cgroups_of(tfrun.pid) == [], 30,
               message=lambda: "left: %s %s" % (os.listdir(tmp),
                                                mesos_local_cgroups_of(tfrun.pid)))


def test_the_embedded_master_stops_with_a_detached_cleanup():
    """tfrun's (and cluster()'s) master leaves its cgroups and sandboxes to
    a detached cleaner; mesos_local's own default removes them at once."""
    calls = []

    class Master:
        def stop(self, **options):
            calls.append(options)
    backend = EmbeddedMaster([])
    backend.master = Master()
    backend.stop()
    assert calls == [{"detached_cleanup": True}]


# -- keys and modes ---------------------------------------------------------------------


def run_id_of(run_dir):
    with open(os.path.join(run_dir, "failover.json")) as handle:
        return json.load(handle)["identity"]["run_id"]


def put_key(path, secret):
    """The key file ``path`` as tfrun writes it (0600), again."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(secret)


def as_nobody(*argv):
    return subprocess.run(["runuser", "-u", "nobody", "--", *argv], capture_output=True,
                          text=True, timeout=30)


@pytest.mark.skipif(os.geteuid() != 0, reason="reading as another user needs root")
def test_a_key_goes_when_its_run_ends_and_stays_while_it_runs_and_logs_are_private(
        make_local_master, tmp_path):
    master = make_local_master()
    # Run directories in a directory every user may enter (tmp_path's parents are root's
    # alone): only their own modes keep other users out.
    shared = tempfile.mkdtemp(prefix="tfmesos-test-leftovers-")
    os.chmod(shared, 0o755)
    keys = os.path.join(shared, "keys")
    train = tmp_path / "train.py"
    train.write_text(TRAIN)
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=keys, TFMESOS_RUNS_DIR=shared)
    live_dir, ended_dir = os.path.join(shared, "live"), os.path.join(shared, "ended")

    def failover(run_dir, finish):
        return ("--failover", "--failover-timeout", "300", "-m", master.url, "-w", "1", "-s",
                "0", *SMALL, "--run-dir", run_dir, "--", sys.executable, str(train),
                str(tmp_path / finish))
    try:
        with start_tfrun(*failover(live_dir, "finish-live"), env=env) as live, \
                start_tfrun(*failover(ended_dir, "never"), env=env) as ended:
            wait_until(lambda: stepped(os.path.join(live_dir, "worker.0.stdout"))
                       and stepped(os.path.join(ended_dir, "worker.0.stdout")), timeout=120)
            live_id, ended_id = run_id_of(live_dir), run_id_of(ended_dir)
            live_key, ended_key = os.path.join(keys, live_id), os.path.join(keys, ended_id)
            with open(os.path.join(ended_dir, "failover.json")) as handle:
                ended_framework = json.load(handle)["identity"]["framework_id"]
            with open(ended_key, "rb") as handle:
                secret = handle.read()
            ended.send_signal(signal.SIGKILL)   # its scheduler cannot remove its key
            ended.wait(30)

            # tfmesos kill removes the key of the run it killed.
            killed = tfmesos("kill", ended_id, "--master", master.url, env=env)
            assert killed.returncode == 0, killed.stderr
            assert "removed its key %s" % ended_key in killed.stdout
            assert not os.path.lexists(ended_key) and os.path.isfile(live_key)

            # tfmesos attach finding the run finished removes it.
            wait_until(lambda: all(framework["id"] != ended_framework
                                   for framework in master.state()["frameworks"]), timeout=60)
            put_key(ended_key, secret)
            attached = tfmesos("attach", ended_id, env=env)
            assert attached.returncode == 1, attached.stderr    # killed: not a success
            assert "has finished: killed (by " in attached.stdout, attached.stderr
            assert "removed the key of run %s" % ended_id in attached.stderr
            assert not os.path.lexists(ended_key) and os.path.isfile(live_key)

            # tfmesos runs --prune keeps the key of a run going, and removes that
            # of one whose tfrun is gone without saying how it ended once its
            # master no longer has its framework (only its master can tell).
            put_key(ended_key, secret)
            pruned = tfmesos("runs", "--prune", "--keep", "10", env=env)
            assert pruned.returncode == 0, pruned.stderr
            assert os.path.isfile(live_key) and not os.path.lexists(ended_key)
            assert "removed the keys of 1 ended run: %s" % ended_key in pruned.stdout

            # The run directory and its files are the run's user's alone.
            assert oct(os.stat(live_dir).st_mode & 0o777) == "0o700"
            for name in ("run.json", "worker.0.stdout", "worker.0.stderr", "failover.json"):
                mode = os.stat(os.path.join(live_dir, name)).st_mode & 0o777
                assert oct(mode) == "0o600", name
            assert as_nobody("ls", shared).returncode == 0   # the parent is open ...
            log = os.path.join(live_dir, "worker.0.stdout")
            read = as_nobody("cat", log)
            assert read.returncode != 0 and "step 0" not in read.stdout   # ... the log is not

            # The run's own tfrun removes its key at its end.
            (tmp_path / "finish-live").write_text("")
            out, err = finish_reading(live, 120)
            assert live.returncode == 0, err
        assert not os.path.lexists(live_key)
        reported = tfmesos("report", live_id, env=env)
        assert reported.returncode == 0, reported.stderr
        assert oct(os.stat(os.path.join(live_dir, "report.html")).st_mode & 0o777) == "0o600"

        # tfmesos runs --prune removes the key of a run whose record says it ended.
        put_key(live_key, secret)
        pruned = tfmesos("runs", "--prune", "--keep", "10", env=env)
        assert pruned.returncode == 0, pruned.stderr
        assert "removed the keys of 1 ended run: %s" % live_key in pruned.stdout
        assert not os.path.lexists(live_key)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_prune_keeps_a_killed_failover_run_while_its_master_has_it_or_cannot_be_asked(
        make_local_master, tmp_path):
    # Two --failover runs whose tfrun is SIGKILLed: their tasks go on. One's
    # master stays (then an operator tears its framework down), the other's
    # goes (it cannot be asked any more).
    alive_master, lost_master = make_local_master(), make_local_master()
    runs, keys = tmp_path / "runs", tmp_path / "keys"
    train = tmp_path / "train.py"
    train.write_text(TRAIN)
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_KEYS_DIR=str(keys),
               TFMESOS_RUNS_DIR=str(runs))
    alive_dir, lost_dir = str(runs / "alive"), str(runs / "lost")

    def failover(master, run_dir):
        return ("--failover", "--failover-timeout", "300", "-m", master.url, "-w", "1", "-s",
                "0", *SMALL, "--run-dir", run_dir, "--", sys.executable, str(train),
                str(tmp_path / "never"))
    with start_tfrun(*failover(alive_master, alive_dir), env=env) as alive, \
            start_tfrun(*failover(lost_master, lost_dir), env=env) as lost:
        wait_until(lambda: stepped(os.path.join(alive_dir, "worker.0.stdout"))
                   and stepped(os.path.join(lost_dir, "worker.0.stdout")), timeout=120)
        for tfrun in (alive, lost):
            tfrun.send_signal(signal.SIGKILL)   # its run's key and directory stay
            tfrun.wait(30)
    alive_key, lost_key = (os.path.join(keys, run_id_of(d)) for d in (alive_dir, lost_dir))
    with open(os.path.join(alive_dir, "failover.json")) as handle:
        framework = json.load(handle)["identity"]["framework_id"]
    lost_master.stop()

    # Its master has the framework (failing over): the run may go on.
    pruned = tfmesos("runs", "--prune", "--keep", "0", env=env)
    assert pruned.returncode == 0, pruned.stderr
    assert "removed 0 runs from %s; kept 1 still running: alive" % runs in pruned.stdout
    assert "removed the keys" not in pruned.stdout
    # A master that cannot be asked: kept, and said.
    assert "tfmesos runs: kept %s and its key: its tfrun is gone and its master %s cannot " \
        "be asked whether its framework" % (lost_dir, lost_master.url) in pruned.stderr
    assert all(os.path.exists(path) for path in (alive_dir, lost_dir, alive_key, lost_key))

    # Once the master no longer has the framework, both go.
    assert alive_master.teardown(framework)
    wait_until(lambda: all(each["id"] != framework
                           for each in alive_master.state()["frameworks"]), timeout=60)
    pruned = tfmesos("runs", "--prune", "--keep", "0", env=env)
    assert pruned.returncode == 0, pruned.stderr
    assert "removed the keys of 1 ended run: %s" % alive_key in pruned.stdout
    assert "removed 1 run from %s" % runs in pruned.stdout
    assert not os.path.lexists(alive_dir) and not os.path.lexists(alive_key)
    assert os.path.isdir(lost_dir) and os.path.isfile(lost_key)
