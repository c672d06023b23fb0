"""Whose the runs directory is: a run writes its record (run.json, the
task logs, failover.json) only where no other user can redirect it, as
ssh and sudo treat such paths. A runs directory another user owns (or
any directory above it), one others may write without the sticky bit,
or a symbolic link of another user's could be swapped for a link to a
directory of the caller's while the run goes, and the record written
there; such a one is refused before the run starts, in one line. A
sticky shared directory (/tmp) is safe: no one else can rename the
caller's entries in it."""

import os
import stat
import threading

import pytest
from local_users import nobody
from tfrun_helpers import run_tfrun

from tfmesos.exceptions import TFMesosError

BASE = ["-w", "1", "-s", "0", "-Cw", "0.1", "-Mw", "64"]
FIX = ": use a directory of your own (--run-dir, $TFMESOS_RUNS_DIR)"
HELP = " (tfrun --help explains every option)"


def another_user():
    return nobody("giving a directory to another user needs root")


def error_line(result):
    """tfrun's one line on stderr, a usage error's (exit 2, no traceback),
    without argparse's usage line and the pointer to --help."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines()
             if line.strip() and not line.startswith("usage: ")]
    assert len(lines) == 1, result.stderr
    return lines[0].removesuffix(HELP)


def precious(tmp_path):
    """The caller's own directory, 0700, with a run.json nobody may replace."""
    place = tmp_path / "rootonly"
    place.mkdir(mode=0o700)
    (place / "run.json").write_text('{"precious": true}\n')
    return place


def test_a_runs_directory_another_user_owns_is_refused_in_one_line(tmp_path):
    other = another_user()
    runs = tmp_path / "aruns"
    runs.mkdir(mode=0o777)
    runs.chmod(0o777)
    os.chown(runs, other.pw_uid, other.pw_gid)
    result = run_tfrun(*BASE, "--", "true", env={"TFMESOS_RUNS_DIR": str(runs)}, timeout=60)
    assert error_line(result) == (
        "tfrun: error: the runs directory %s belongs to %s (uid %d), who could redirect "
        "this run's record" % (runs, other.pw_name, other.pw_uid) + FIX)
    assert os.listdir(runs) == []
    # An explicit --run-dir there, new or already made, is refused alike.
    for made in (False, True):
        if made:
            (runs / "mine").mkdir(mode=0o700)
        result = run_tfrun(*BASE, "--run-dir", str(runs / "mine"), "--", "true", timeout=60)
        assert error_line(result).startswith(
            "tfrun: error: the runs directory %s belongs to %s (uid %d)"
            % (runs, other.pw_name, other.pw_uid)), result.stderr
        assert os.listdir(runs) == (["mine"] if made else [])
        if made:
            assert os.listdir(runs / "mine") == []
    # A runs directory in a directory of another user's: refused too.
    inner = runs / "inner"
    inner.mkdir(mode=0o700)
    result = run_tfrun(*BASE, "--", "true", env={"TFMESOS_RUNS_DIR": str(inner)}, timeout=60)
    assert error_line(result).startswith(
        "tfrun: error: the runs directory %s lies in %s, which belongs to %s (uid %d)"
        % (inner, runs, other.pw_name, other.pw_uid)), result.stderr
    assert os.listdir(inner) == []


def test_a_runs_directory_that_is_another_users_link_is_refused(tmp_path):
    other = another_user()
    target = precious(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)                 # /tmp, where anyone may leave a link
    link = shared / "aruns"
    link.symlink_to(target)
    os.lchown(link, other.pw_uid, other.pw_gid)
    result = run_tfrun(*BASE, "--", "true", env={"TFMESOS_RUNS_DIR": str(link)}, timeout=60)
    assert error_line(result) == (
        "tfrun: error: the runs directory %s belongs to %s (uid %d), who could redirect "
        "this run's record" % (link, other.pw_name, other.pw_uid) + FIX)
    assert sorted(os.listdir(target)) == ["run.json"]
    assert (target / "run.json").read_text() == '{"precious": true}\n'


def test_a_runs_directory_others_may_write_without_the_sticky_bit_is_refused(tmp_path):
    runs = tmp_path / "open"
    runs.mkdir()
    runs.chmod(0o777)
    result = run_tfrun(*BASE, "--", "true", env={"TFMESOS_RUNS_DIR": str(runs)}, timeout=60)
    assert error_line(result) == (
        "tfrun: error: the runs directory %s is writable by others (mode 0777), who could "
        "redirect this run's record" % runs + FIX)
    assert os.listdir(runs) == []


def test_a_sticky_shared_runs_directory_still_works(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    result = run_tfrun(*BASE, "--", "echo hi", env={"TFMESOS_RUNS_DIR": str(shared)},
                       timeout=120)
    assert result.returncode == 0, result.stderr
    [run_dir] = list(shared.iterdir())
    found = os.lstat(run_dir)
    assert stat.S_ISDIR(found.st_mode) and stat.S_IMODE(found.st_mode) == 0o700
    assert found.st_uid == os.geteuid()
    assert (run_dir / "worker.0.stdout").read_text() == "hi\n"
    assert (run_dir / "run.json").exists()


def test_an_existing_run_directory_of_another_user_or_a_link_is_never_written(tmp_path):
    # tfmesos.run(), cluster() and tfmesos attach make their record here:
    # the run directory itself must be a directory of the caller's.
    from tfmesos.core.jobs import Job
    from tfmesos.core.slots import make_slots
    from tfmesos.record.run_record import RunRecord
    from tfmesos.record.schema import RunFile

    target = precious(tmp_path)
    link = tmp_path / "run"
    link.symlink_to(target)

    def record(directory, **new):
        return RunRecord(str(directory), RunFile(mode="replica"), make_slots([Job("worker", 1)]),
                         forwarding=True, **new)

    with pytest.raises(TFMesosError, match="the run directory %s is a symbolic link" % link):
        record(link)
    with pytest.raises(TFMesosError, match="cannot create the run directory %s: File exists"
                       % target):
        record(target, new_directory=True)     # the default directory is always made anew
    assert (target / "run.json").read_text() == '{"precious": true}\n'
    if os.geteuid() == 0:
        other = another_user()
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, other.pw_uid, other.pw_gid)
        with pytest.raises(TFMesosError, match="the run directory %s belongs to %s"
                           % (theirs, other.pw_name)):
            record(theirs)
        assert os.listdir(theirs) == []
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    kept = record(mine)                   # the caller's own, made before: still taken
    kept.save()
    assert (mine / "run.json").exists()


def test_a_log_file_that_is_there_already_must_be_the_callers_own_file(tmp_path):
    from tfmesos.record.run_dirs import create_private
    from tfmesos.record.task_logs import TaskLogs

    os.mkfifo(tmp_path / "worker.0.stdout")
    failed = []
    logs = TaskLogs(str(tmp_path), threading.RLock(),
                    on_failure=lambda name, exc: failed.append(name))
    logs.write("worker.0.stdout", "hi\n")     # a FIFO nobody reads: no hang, no write
    assert failed == ["worker.0.stdout"]
    os.close(create_private(str(tmp_path / "worker.0.stderr")))
    assert stat.S_IMODE(os.stat(tmp_path / "worker.0.stderr").st_mode) == 0o600
