"""Whose the keys directory is (``$TFMESOS_KEYS_DIR``, else
``~/.tfmesos/keys``): a run's key is kept there, and read back from
there, only when no other user can change where it leads (it, each
directory above it, each link on the way), as the runs directory is
checked (``run_dirs.check_path``). One another user made first, or one
others may write without the sticky bit, would let her remove or swap
the run's key; such a one is refused in one line naming the fix, by tfrun
before the run starts."""

import os

import pytest
from local_users import nobody
from tfrun_helpers import run_tfrun

from tfmesos.core.identity import RunIdentity
from tfmesos.record.takeover_files import TakeoverError, forget_key, held_key, save_key

RUN = RunIdentity(run_id="0000abcd", key=b"k" * 32, user="alice", principal="team-a")
FIX = ", who could swap or remove the runs' keys: set $TFMESOS_KEYS_DIR to a directory of " \
    "your own"


def another_user():
    return nobody("giving a directory to another user needs root")


def test_a_keys_directory_another_user_made_first_is_refused(tmp_path):
    other = another_user()
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    os.chown(keys, other.pw_uid, other.pw_gid)
    environ = {"TFMESOS_KEYS_DIR": str(keys)}
    with pytest.raises(TakeoverError) as refused:
        save_key(RUN, environ)
    assert str(refused.value) == "the keys directory %s belongs to %s (uid %d)" % (
        keys, other.pw_name, other.pw_uid) + FIX
    assert os.listdir(keys) == []
    # A key of the caller's there proves nothing: she could have swapped it.
    (keys / RUN.run_id).write_text(RUN.key.hex() + "\n")
    (keys / RUN.run_id).chmod(0o600)
    with pytest.raises(TakeoverError, match="belongs to %s" % other.pw_name):
        held_key(RUN.run_id, environ)
    assert forget_key(RUN.run_id, environ) is None
    assert os.listdir(keys) == [RUN.run_id]
    # A keys directory of the caller's in hers: refused alike.
    inner = keys / "inner"
    inner.mkdir(mode=0o700)
    with pytest.raises(TakeoverError, match="^the keys directory %s lies in %s, which belongs to"
                       % (inner, keys)):
        save_key(RUN, {"TFMESOS_KEYS_DIR": str(inner)})


def test_a_keys_directory_others_may_write_without_the_sticky_bit_is_refused(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    keys.chmod(0o777)
    with pytest.raises(TakeoverError) as refused:
        save_key(RUN, {"TFMESOS_KEYS_DIR": str(keys)})
    assert str(refused.value) == ("the keys directory %s is writable by others (mode 0777)"
                                  % keys + FIX)
    assert os.listdir(keys) == []
    # One made anew in a sticky shared directory (/tmp) is the caller's: it works.
    keys.chmod(0o1777)
    path = save_key(RUN, {"TFMESOS_KEYS_DIR": str(keys / "mine")})
    assert held_key(RUN.run_id, {"TFMESOS_KEYS_DIR": str(keys / "mine")}) == RUN.key
    assert oct(os.stat(keys / "mine").st_mode & 0o777) == "0o700" and os.path.isfile(path)


@pytest.mark.integration    # runs tfrun
def test_tfrun_refuses_such_a_keys_directory_before_the_run_starts(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    keys.chmod(0o777)
    runs, code = tmp_path / "runs", tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("")
    for outlives in ("--failover", "--detach"):
        result = run_tfrun(outlives, "-m", "127.0.0.1:1", "-w", "1", "-s", "0", "--ship", str(code),
                           "--", "true", timeout=60,
                           env={"TFMESOS_KEYS_DIR": str(keys), "TFMESOS_RUNS_DIR": str(runs)})
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr, result.stderr
        lines = [line for line in result.stderr.splitlines()
                 if line.strip() and not line.startswith("usage: ")]
        assert lines == ["tfrun: error: the keys directory %s is writable by others (mode 0777)"
                         % keys + FIX + " (tfrun --help explains every option)"], result.stderr
        assert os.listdir(keys) == [] and not runs.exists()


def test_a_directory_open_regular_refuses_leaves_no_descriptor_open(tmp_path):
    # os.fdopen refuses a directory's descriptor and left it open: each
    # key, record or -e file named as a directory leaked one.
    from tfmesos.record.takeover_files import open_regular
    before = set(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with pytest.raises(IsADirectoryError):
            open_regular(str(tmp_path))
    assert set(os.listdir("/proc/self/fd")) <= before
