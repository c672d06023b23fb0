"""``--ship``'s limits: what cannot be read is refused, never left out in
silence; one line for every path that cannot be looked at."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from local_users import nobody
from tfrun_helpers import REPO

from tfmesos.ship import bundle
from tfmesos.ship.bundle import ShipError


def write(root, files):
    for path, data in files.items():
        full = os.path.join(str(root), path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb" if isinstance(data, bytes) else "w") as handle:
            handle.write(data)


def git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


BARE_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
PACK_AS_USER = """\
import sys
sys.path.insert(0, sys.argv[1])
from tfmesos.ship import bundle
try:
    packed = bundle.pack(sys.argv[2], sys.argv[3])
except bundle.ShipError as exc:
    print("refused:", exc)
else:
    print("shipped:", bundle.list_files(sys.argv[2]))
"""


@pytest.fixture
def users_project():
    """A project of nobody's, where nobody can reach it, holding a.txt: (its
    path, nobody, a function packing it as nobody: what it printed)."""
    user = nobody("a directory its user may not read needs root to make")
    home = tempfile.mkdtemp(prefix="tfmesos-test-ship-")
    os.chmod(home, 0o755)
    project, out = os.path.join(home, "p"), os.path.join(home, "out")
    write(project, {"a.txt": "hi\n"})
    os.mkdir(out)
    for path in (project, out, os.path.join(project, "a.txt")):
        os.chown(path, user.pw_uid, user.pw_gid)

    def pack_as_nobody():
        result = subprocess.run([BARE_PYTHON, "-S", "-c", PACK_AS_USER, REPO, project, out],
                                capture_output=True, text=True, timeout=120,
                                user=user.pw_uid, group=user.pw_gid, extra_groups=[],
                                env={"PATH": os.environ["PATH"], "HOME": home})
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()
    try:
        yield project, user, pack_as_nobody
    finally:
        shutil.rmtree(home)


@pytest.mark.parametrize("mode", [0o700, 0o744])
@pytest.mark.parametrize("kind", ["plain", "git"])
def test_a_directory_its_user_cannot_read_is_refused_naming_it(users_project, mode, kind):
    project, user, pack_as_nobody = users_project
    if kind == "git":
        git(project, "init", "-q")
        for root, _, files in os.walk(os.path.join(project, ".git")):
            for name in [root] + [os.path.join(root, name) for name in files]:
                os.chown(name, user.pw_uid, user.pw_gid)
    write(project, {"pkg/mod.py": "ANSWER = 42\n"})
    os.chmod(os.path.join(project, "pkg"), mode)    # root's, as the user found it
    assert pack_as_nobody() == "refused: ship.directory: cannot read pkg/: Permission denied"
    os.chmod(os.path.join(project, "pkg"), 0o755)
    assert pack_as_nobody() == "shipped: ['a.txt', 'pkg/mod.py']"


def test_a_link_that_cannot_be_read_is_refused_naming_it(tmp_path, monkeypatch):
    write(tmp_path, {"a.txt": "hi\n"})
    os.symlink("a.txt", str(tmp_path / "cwd"))
    real_readlink = os.readlink

    def readlink(path, *args, **kwargs):
        if str(path).endswith("cwd"):    # as /proc/1/cwd is to a user who does not own it
            raise PermissionError(13, "Permission denied", str(path))
        return real_readlink(path, *args, **kwargs)
    monkeypatch.setattr(os, "readlink", readlink)
    with pytest.raises(ShipError) as caught:
        bundle.pack(str(tmp_path), str(tmp_path))
    assert str(caught.value) == "ship.directory: cannot read cwd: Permission denied"


def test_shipping_the_root_directory_is_refused_in_one_line(tmp_path):
    # /proc's links that may not be read, or more files than the limit.
    with pytest.raises(ShipError) as caught:
        bundle.pack("/", str(tmp_path), max_size=10 * 1000 * 1000)
    assert "\n" not in str(caught.value)
