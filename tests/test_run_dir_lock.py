"""The run directory's lock (tfmesos.record.run_dir_lock): held by the run
that claims it, through a file of its user's alone."""

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from local_users import as_user, nobody
from run_dirs import write_run

from tfmesos.core.jobs import Job
from tfmesos.core.slots import make_slots
from tfmesos.exceptions import TFMesosError
from tfmesos.record import pruning, run_dir_lock
from tfmesos.record.history import Run
from tfmesos.record.run_record import RunRecord
from tfmesos.record.schema import RunFile

BUSY = ("the run directory %s is another run's, still starting or running: give this run a "
        "directory of its own (tfrun --run-dir DIR, cluster(run_dir=...))")


def record(directory, run_id, new=False):
    return RunRecord(str(directory), RunFile(run_id=run_id, mode="replica"),
                     make_slots([Job("worker", 1)]), False, new_directory=new)


def held_elsewhere(directory):
    """Whether another process sees ``directory`` held (in_use)."""
    probe = subprocess.run([sys.executable, "-c", "import sys; from tfmesos.record.run_dir_lock "
                            "import in_use; print(in_use(sys.argv[1]))", str(directory)],
                           capture_output=True, text=True, timeout=60)
    assert probe.stdout in ("True\n", "False\n"), probe.stderr
    return probe.stdout == "True\n"


def test_another_user_who_can_read_the_run_directory_cannot_hold_it():
    # nobody flocked a run directory of root's (0755, umask 022): root's
    # tfrun there was refused as "another run's, still starting or
    # running", and runs --prune kept it as still running (found by a review).
    user = nobody(needs_root="acting as nobody needs root")
    base = tempfile.mkdtemp()
    try:
        os.chmod(base, 0o755)
        runs = os.path.join(base, "runs")
        directory = os.path.join(runs, "resdir")
        os.makedirs(directory, 0o755)
        os.chmod(directory, 0o755)
        with subprocess.Popen(["setpriv", "--reuid=%d" % user.pw_uid,
                               "--regid=%d" % user.pw_gid, "--clear-groups", "flock", "-x",
                               directory, "sleep", "60"], start_new_session=True) as locker:
            try:
                deadline = time.monotonic() + 30
                while not _flocked(directory):
                    assert time.monotonic() < deadline and locker.poll() is None
                    time.sleep(0.05)
                assert not run_dir_lock.in_use(directory)
                first = record(directory, "first000")
                lock = os.path.join(directory, run_dir_lock.LOCK_FILE)
                assert os.stat(lock).st_mode & 0o777 == 0o600
                assert held_elsewhere(directory)
                assert as_user(user, lambda: repr(os.open(lock, os.O_RDONLY))) == (
                    "raised PermissionError(13, 'Permission denied')")
                first.finish()
                assert not held_elsewhere(directory)
                assert Run.load(directory).run_id == "first000"
                removed, running, left = pruning.prune(runs, 0)
                assert ([run.run_id for run in removed], running, left) == (["first000"], [],
                                                                            [])
            finally:
                os.killpg(locker.pid, signal.SIGKILL)   # flock and its sleep
    finally:
        shutil.rmtree(base)


def _flocked(directory):
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)


@pytest.mark.parametrize("saved", [False, True])
def test_a_second_claim_in_one_process_is_refused_and_keeps_the_first_runs_lock(tmp_path,
                                                                                saved):
    # Two tfmesos.submit of one run_dir ran both there (run.json the first's
    # only, worker.0.stdout mixed); refused as "holds run ..., still
    # running", the second let the first run's lock go (found by a review).
    directory = tmp_path / "shared"
    first = record(directory, "first000")
    if saved:
        first.save()
    with pytest.raises(TFMesosError) as caught:
        record(directory, "second00")
    assert str(caught.value) == BUSY % directory
    assert held_elsewhere(directory)
    if saved:
        assert Run.load(str(directory)).run_id == "first000"
    first.finish()
    assert not held_elsewhere(directory)
    record(directory, "third000").finish()   # once the first ended, the directory is free


def test_a_made_run_directory_given_back_goes_with_its_lock(tmp_path):
    directory = tmp_path / "runs" / "made"
    refused = record(directory, "first000", new=True)
    assert os.listdir(directory) == [run_dir_lock.LOCK_FILE]
    refused.discard()
    assert not directory.exists()


def test_a_record_refused_for_a_live_run_leaves_no_lock_behind(tmp_path):
    from tfmesos.record.schema import Scheduler
    made = write_run(tmp_path, "aaaaaaaa", status="running", exit_code=None,
                     scheduler=Scheduler(host="otherhost", pid=1))
    with pytest.raises(TFMesosError, match="holds run aaaaaaaa, still running"):
        record(made, "bbbbbbbb")
    assert not held_elsewhere(made)


def test_a_run_that_cannot_be_made_gives_its_run_directory_back(tmp_path, monkeypatch):
    # Its record had claimed the directory when the run's making failed:
    # the lock stayed, and a second try of the same run in this process was
    # refused as "another run's, still starting or running".
    from policy_helpers import FakeBackend

    from tfmesos.core import launch
    from tfmesos.core.launch import ClusterRun
    from tfmesos.core.spec import RunSpec
    from tfmesos.mesos.mock_transport import MockTransport

    def broken(*args, **kwargs):
        raise RuntimeError("the failure policy could not be made")
    spec = RunSpec(jobs=(Job("worker", 1),), mode="replica", command="true",
                   master="mock-master:5050", run_dir=str(tmp_path / "run"))
    monkeypatch.setattr(launch, "Recovery", broken)
    with pytest.raises(RuntimeError, match="could not be made"):
        ClusterRun(spec, environ={}, backend=FakeBackend(), transport=MockTransport())
    assert not held_elsewhere(tmp_path / "run")
    monkeypatch.undo()
    again = ClusterRun(spec, environ={}, backend=FakeBackend(), transport=MockTransport())
    try:
        assert held_elsewhere(tmp_path / "run")
    finally:
        again.record.discard()


def test_a_lock_file_removed_as_it_is_claimed_is_not_held_the_one_there_is(tmp_path,
                                                                             monkeypatch):
    # A refused run's record takes its lock file away (run_dir_claim.release):
    # a claim that had opened it just before held a file no one else finds,
    # while a third made and held another: two runs in one directory.
    real = run_dir_lock.create_private
    calls = []

    def raced(path, **kwargs):
        descriptor = real(path, **kwargs)
        calls.append(path)
        if len(calls) == 1:        # removed, and made anew, under this claim
            os.unlink(path)
            os.close(real(path, **kwargs))
        return descriptor
    monkeypatch.setattr(run_dir_lock, "create_private", raced)
    try:
        assert run_dir_lock.hold(str(tmp_path)) is True
        assert len(calls) == 2     # the second try locked the file there
        assert held_elsewhere(tmp_path)
    finally:
        run_dir_lock.let_go(str(tmp_path))
    assert not held_elsewhere(tmp_path)


def test_a_run_refused_before_anything_ran_leaves_no_lock_file(tmp_path):
    # A --run-dir given, there already: it stays, empty as it was (a refused
    # --ship left its .run.lock there).
    (tmp_path / "run").mkdir(mode=0o700)
    made = record(tmp_path / "run", "cafe0001")
    assert os.path.exists(tmp_path / "run" / run_dir_lock.LOCK_FILE)
    made.discard()
    assert os.listdir(tmp_path / "run") == []


def test_a_takeover_that_cannot_be_made_leaves_the_runs_record_as_it_was(tmp_path,
                                                                          monkeypatch):
    # tfmesos attach claims the directory of the run it takes over: its
    # making failing (here the failure policy; a record that names other
    # tasks, a Ctrl-C) removed that run's run.json, and with it the run
    # from tfmesos runs, show, kill and attach (found by a review helper
    # reading cbc6df8).
    from policy_helpers import FakeBackend

    from tfmesos.core import launch
    from tfmesos.core.launch import ClusterRun
    from tfmesos.core.spec import RunSpec
    from tfmesos.mesos.mock_transport import MockTransport

    directory = tmp_path / "run"
    spec = RunSpec(jobs=(Job("worker", 1),), mode="replica", command="true",
                   master="mock-master:5050", run_dir=str(directory))
    first = ClusterRun(spec, environ={}, backend=FakeBackend(), transport=MockTransport())
    first.record.save()
    run_dir_lock.let_go(str(directory))   # its tfrun gone: the record stays
    before = (directory / "run.json").read_bytes()

    import dataclasses

    from tfmesos.core.takeover import Resume
    from tfmesos.record.history import Run
    resume = Resume(dataclasses.replace(first.identity, framework_id="fw-1"),
                    Run.load(str(directory)).file)

    def broken(*args, **kwargs):
        raise RuntimeError("the failure policy could not be made")
    monkeypatch.setattr(launch, "Recovery", broken)
    with pytest.raises(RuntimeError, match="could not be made"):
        ClusterRun(spec, environ={}, backend=FakeBackend(), transport=MockTransport(),
                   resume=resume)
    assert (directory / "run.json").read_bytes() == before
    assert not held_elsewhere(directory)
