"""``tfrun --ship``: the user's directory and the task side of tfmesos sent
to every task through the Mesos fetcher (bundle.py, bundle_server.py,
shipping.py, fetch_check.py, task/bundle_dir.py, the local fetcher's cache)."""

import ast
import hashlib
import importlib.util
import io
import json
import logging
import marshal
import os
import pathlib
import pwd
import re
import shutil
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile

import pytest
from fixtures_master import local_master, make_local_master  # fixtures
from tfrun_helpers import REPO, tfrun_argv
from waiting import wait_until
from zip_imports import imports_our_bytecode, zip_imports

from mesos_local.containerizer.fetch_cache import FetcherCache
from mesos_local.containerizer.fetcher import fetch_uris
from mesos_local.containerizer.fs_isolation import effective_paths
from tfmesos.exceptions import SpecError, TFMesosError
from tfmesos.ship import bundle, compiled_zip
from tfmesos.ship.bundle import ShipError, ShipSpec
from tfmesos.ship.bundle_server import BundleServer
from tfmesos.ship.fetch_check import BIG, TAR_BLOCKING, Fetched, check_command
from tfmesos.task.bundle_dir import enter_bundle, enter_task_directory
from tfmesos.task.task_environ import TaskError

TINY = ["-Cw", "0.1", "-Mw", "64", "-Cs", "0.1", "-Ms", "64"]
# This machine's Python outside any home directory (run with -S below: no site-packages,
# so nothing of an installed tfmesos).
BARE_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def write(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as handle:
            handle.write(text)


def git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def project(tmp_path):
    """A git project: a script importing a module of its own, an ignored
    data file, an untracked (not ignored) file, a run directory."""
    root = tmp_path / "proj"
    write(root, {
        ".gitignore": "data/\n*.log\n",
        "train.py": "import os, sys, tfmesos\nfrom mylib.util import ANSWER\n"
                    "print('answer', ANSWER, 'cwd', os.path.basename(os.getcwd()), "
                    "'data', os.path.exists('data'), 'notes', os.path.exists('notes.txt'))\n"
                    "print('tfmesos from', tfmesos.__file__)\n",
        "mylib/__init__.py": "",
        "mylib/util.py": "ANSWER = 42\n",
        "notes.txt": "not committed, not ignored\n",
        "data/big.bin": "x" * 5000,
        "debug.log": "ignored\n",
        "tfmesos-runs/old/run.json": "{}",
    })
    git(root, "init", "-q")
    git(root, "add", "train.py", "mylib", ".gitignore")
    return root


# -- what is packed ---------------------------------------------------------------


def test_a_git_project_ships_what_git_would_commit(project):
    assert bundle.list_files(project) == [".gitignore", "mylib/__init__.py", "mylib/util.py",
                                          "notes.txt", "train.py"]


def test_outside_git_caches_environments_and_run_directories_stay_home(tmp_path):
    write(tmp_path, {"a.py": "", "pkg/__pycache__/a.cpython-311.pyc": "", "pkg/b.pyc": "",
                     "pkg/c.py": "", ".git/config": "", "venv/pyvenv.cfg": "",
                     "venv/bin/python": "", "env/conda-meta/history": "", "env/lib/x.py": "",
                     "tfmesos-runs/r/run.json": "", "sub/tfmesos-runs/x": ""})
    assert bundle.list_files(tmp_path) == ["a.py", "pkg/c.py"]


def test_ship_exclude_patterns_match_paths_and_their_parts(project):
    files = bundle.list_files(project, exclude=("mylib/util.py", "*.txt"))
    assert files == [".gitignore", "mylib/__init__.py", "train.py"]
    assert bundle.list_files(project, exclude=("mylib",)) == [".gitignore", "notes.txt",
                                                              "train.py"]


def test_a_bundle_over_the_limit_is_refused_naming_the_five_biggest_files(tmp_path):
    write(tmp_path, {"f%d.bin" % i: "x" * (1000 * (i + 1)) for i in range(7)})
    with pytest.raises(ShipError) as caught:
        bundle.pack(tmp_path, str(tmp_path), max_size=30000)
    message = str(caught.value)
    # 28.0 kB of content, 41.0 kB of archive: its headers, blocks and records.
    assert "\n" not in message and "41.0 kB is over ship.max_size=30.0 kB" in message
    for name in ("f6.bin (7.0 kB)", "f5.bin", "f4.bin", "f3.bin", "f2.bin"):
        assert name in message
    assert "f1.bin" not in message and "f0.bin" not in message
    assert "ship.exclude" in message


def test_bundles_are_reproducible_and_hold_the_tree_under_project(project, tmp_path):
    first = bundle.pack(project, str(tmp_path))
    os.rename(first.path, first.path + ".first")
    second = bundle.pack(project, str(tmp_path))
    assert (first.sha256, first.name) == (second.sha256, second.name)
    with open(second.path, "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == second.sha256
    assert second.name == "tfmesos-bundle-%s.tar" % second.sha256[:16]
    with tarfile.open(second.path) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert sorted(members) == ["project", "project/.gitignore", "project/mylib/__init__.py",
                               "project/mylib/util.py", "project/notes.txt",
                               "project/train.py"]
    assert {(m.uid, m.gid, m.uname) for m in members.values()} == {(0, 0, "")}
    assert (second.files, second.size) == (5, sum(
        os.path.getsize(project / p) for p in bundle.list_files(project)))
    assert second.summary().startswith("shipped 5 files, ")


def test_the_bundle_is_a_plain_tar_that_any_tar_reads(project, tmp_path):
    # Nothing is deflated (bundle's docstring: each task inflates its own
    # copy, ~0.6 s a task for 100 MB, where the wire carries it once an
    # agent): every file's bytes are in the archive as they are, and GNU
    # tar, as the task's command runs it, extracts it without -z.
    weights = os.urandom(1 << 20)
    corpus = b"the same line of text\n" * 50000
    write(project, {"weights.bin": "", "corpus.txt": ""})
    (project / "weights.bin").write_bytes(weights)
    (project / "corpus.txt").write_bytes(corpus)
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True)
    packed = bundle.pack(project, str(tmp_path))
    assert packed.name.endswith(".tar") and packed.size < packed.archive_size
    with open(packed.path, "rb") as handle:
        data = handle.read()
    assert data[:2] != b"\x1f\x8b" and weights in data and corpus in data
    assert packed.sha256 == hashlib.sha256(data).hexdigest()
    out = tmp_path / "gnu"
    out.mkdir()
    subprocess.run(["tar", "-xof", packed.path, "-C", str(out)], check=True)
    assert (out / "project" / "weights.bin").read_bytes() == weights
    assert (out / "project" / "corpus.txt").read_bytes() == corpus


def test_the_bundle_s_sha256_is_its_bytes_across_many_writes(tmp_path):
    # The digest is taken on a thread of its own while the archive is
    # written (bundle._HashingWriter): it must still be the file's, in order,
    # over more chunks than wait to be hashed at once.
    source = tmp_path / "src"
    write(source, {"f%03d.bin" % i: "" for i in range(40)})
    for i in range(40):
        (source / ("f%03d.bin" % i)).write_bytes(os.urandom(3 * bundle.COPY_BUFFER // 2 + i))
    out = tmp_path / "out"
    out.mkdir()
    packed = bundle.pack(source, str(out), max_size=None)
    assert packed.sha256 == bundle.file_sha256(packed.path)
    assert packed.name == "tfmesos-bundle-%s.tar" % packed.sha256[:16]


def test_ship_spec_checks_its_values(tmp_path):
    with pytest.raises(SpecError, match="no such directory"):
        ShipSpec(str(tmp_path / "missing"))
    with pytest.raises(SpecError, match="only .tar"):
        ShipSpec(str(tmp_path), python_env=str(tmp_path / "env.rpm"))
    with pytest.raises(SpecError, match="no such file"):
        ShipSpec(str(tmp_path), python_env=str(tmp_path / "env.tar.gz"))
    with pytest.raises(SpecError, match="http"):
        ShipSpec(str(tmp_path), python_env="s3://bucket/env.tar.gz")
    assert ShipSpec(None, python_env="hdfs://nn/envs/tf.tar.gz").python_env \
        == "hdfs://nn/envs/tf.tar.gz"


# -- the task side as a zip ---------------------------------------------------------


def bare_environment(**extra):
    """A clean environment: no PYTHONPATH but what is given, no tfmesos variables."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def test_the_task_side_zip_runs_on_a_python_without_tfmesos(tmp_path):
    zipped = bundle.pack_task_side(str(tmp_path))
    probe = ("import os, sys, tfmesos.task.entry as e; from tfmesos.task import replica; "
             "print(e.__file__); "
             "g = replica.replica_guard.start('echo guarded', dict(os.environ), capture=True); "
             "print(g.stdout.read().decode().strip(), g.wait()); "
             "print(sorted(m for m in sys.modules if m.startswith('tfmesos')))")
    result = subprocess.run([BARE_PYTHON, "-S", "-c", probe], capture_output=True, text=True,
                            env=bare_environment(PYTHONPATH=zipped.path), cwd=str(tmp_path),
                            timeout=60)
    assert result.returncode == 0, result.stderr
    where, guarded, modules = result.stdout.splitlines()
    assert where.startswith(zipped.path + "/tfmesos/task/")
    assert guarded == "guarded 0"                # the guard runs from the zip too
    modules = ast.literal_eval(modules)
    assert "tfmesos.task.entry" in modules and all(
        name == "tfmesos" or name.startswith(("tfmesos.task", "tfmesos.protocol"))
        for name in modules), modules
    entry = subprocess.run([BARE_PYTHON, "-S", "-m", "tfmesos.task"], capture_output=True,
                           text=True, env=bare_environment(PYTHONPATH=zipped.path), timeout=60)
    assert entry.returncode == 1 and "TFMESOS_RENDEZVOUS" in entry.stderr


def test_a_task_that_calls_tfmesos_run_is_told_runs_start_from_the_caller(tmp_path):
    # A function of tfmesos.run that called tfmesos.run got "AttributeError:
    # module 'tfmesos' has no attribute 'run'" from the task side (found by a
    # review helper).
    zipped = bundle.pack_task_side(str(tmp_path))
    probe = "import tfmesos\nfor name in ('run', 'submit', 'cluster', 'nope'):\n" \
        "    try:\n        getattr(tfmesos, name)\n    except AttributeError as exc:\n" \
        "        print(exc)\n"
    result = subprocess.run([BARE_PYTHON, "-S", "-c", probe], capture_output=True, text=True,
                            env=bare_environment(PYTHONPATH=zipped.path), cwd=str(tmp_path),
                            timeout=60)
    assert result.returncode == 0, result.stderr
    said = result.stdout.splitlines()
    assert said[0] == ("tfmesos.run is not in a task's tfmesos (its task side): a run starts "
                       "from the program that called tfmesos.run or tfrun, not from inside "
                       "one of its tasks")
    assert said[1].startswith("tfmesos.submit is not in a task's tfmesos")
    assert said[2].startswith("tfmesos.cluster is not in a task's tfmesos")
    assert said[3] == "module 'tfmesos' has no attribute 'nope'"


def test_the_task_side_zip_s_modules_import_compiled_and_read_no_source(tmp_path):
    # Each shipped task imports the task side from this zip: compiling its
    # ~150 KB of source was about half of a task's start.
    zipped = bundle.pack_task_side(str(tmp_path))
    with zipfile.ZipFile(zipped.path) as archive:
        names = archive.namelist()
        sources = [name for name in names if name.endswith(".py")]
        assert sorted(name for name in names if name.endswith(".pyc")) == \
            sorted(name + "c" for name in sources)
        pyc = archive.read("tfmesos/task/entry.pyc")
        assert pyc[:16] == importlib.util.MAGIC_NUMBER + b"\x01\0\0\0" + \
            importlib.util.source_hash(archive.read("tfmesos/task/entry.py"))
    assert zipped.files == len(sources)
    if not imports_our_bytecode(BARE_PYTHON):
        pytest.skip("%s is another Python than this one: it compiles" % BARE_PYTHON)
    found = zip_imports(BARE_PYTHON, zipped.path, ("tfmesos.task.entry", "tfmesos.keras"),
                        cwd=str(tmp_path), env=bare_environment())
    assert "tfmesos.task.replica" in found["loaded"]
    assert (found["compiled"], found["read"]) == ([], [])


def test_another_python_s_task_side_compiles_its_sources(tmp_path):
    zipped = bundle.pack_task_side(str(tmp_path))
    foreign = tmp_path / "foreign.zip"
    with zipfile.ZipFile(zipped.path) as archive, zipfile.ZipFile(foreign, "w") as out:
        for name in archive.namelist():
            data = archive.read(name)
            # A magic number no Python of this machine writes: another Python's.
            out.writestr(name, b"\0\0\r\n" + data[4:] if name.endswith(".pyc") else data)
    found = zip_imports(BARE_PYTHON, str(foreign), ("tfmesos.task.entry",), cwd=str(tmp_path),
                        env=bare_environment())
    assert "tfmesos.task.replica" in found["loaded"]
    assert str(foreign) + "/tfmesos/task/entry.py" in found["compiled"]


def test_the_task_side_is_compiled_once_then_taken_from_the_user_s_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = bundle.pack_task_side(str(tmp_path / "a"))
    assert os.listdir(tmp_path / "cache" / "tfmesos" / bundle.TASK_SIDE_CACHE) != []

    def compiled(*_):
        raise AssertionError("compiled again")
    monkeypatch.setattr(compiled_zip, "bytecode", compiled)
    again = bundle.pack_task_side(str(tmp_path / "b"))
    assert (again.name, again.sha256, again.files) == (first.name, first.sha256, first.files)


def test_a_tfrun_under_python_oo_ships_bytecode_that_keeps_docstrings_and_asserts(tmp_path):
    # The cache is not keyed by -O: what one run under -OO compiled, others
    # ship too (tfmesos.cli.main's help is its __doc__).
    pack = ("import sys; sys.path.insert(0, sys.argv[1]); from tfmesos.ship import bundle; "
            "print(bundle.pack_task_side(sys.argv[2]).path)")
    result = subprocess.run([sys.executable, "-OO", "-c", pack, REPO, str(tmp_path)],
                            capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))
    assert result.returncode == 0, result.stderr
    with zipfile.ZipFile(result.stdout.strip()) as archive:
        code = marshal.loads(archive.read("tfmesos/task/entry.pyc")[16:])
        docstring = ast.get_docstring(ast.parse(archive.read("tfmesos/task/entry.py")),
                                      clean=False)
    assert docstring and code.co_consts[0] == docstring


def test_the_task_side_cache_works_under_a_group_writable_umask(tmp_path, monkeypatch, caplog):
    # umask 002 (Debian's and Fedora's for users): a cached file made with
    # the umask's mode would be group-writable, and refused ever after.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    old = os.umask(0o002)
    try:
        first = bundle.pack_task_side(str(tmp_path / "a"))

        def compiled(*_):
            raise AssertionError("compiled again")
        monkeypatch.setattr(compiled_zip, "bytecode", compiled)
        with caplog.at_level(logging.WARNING):
            again = bundle.pack_task_side(str(tmp_path / "b"))
    finally:
        os.umask(old)
    assert again.sha256 == first.sha256 and "not only yours" not in caplog.text
    cache = tmp_path / "cache" / "tfmesos" / bundle.TASK_SIDE_CACHE
    assert [entry.stat().st_mode & 0o777 for entry in cache.iterdir()] == [0o600]


PACK_TASK_SIDE = ("import sys; sys.path.insert(0, sys.argv[1]); from tfmesos.ship import bundle; "
                  "print(bundle.pack_task_side(sys.argv[2]).sha256)")


@pytest.fixture
def nobody_home():
    """A directory the user nobody owns, where nobody can reach it (pytest's
    own temporary directories are root's alone): (its path, nobody)."""
    if os.geteuid() != 0:
        pytest.skip("packing as another user needs root")
    other = pwd.getpwnam("nobody")
    home = pathlib.Path(tempfile.mkdtemp(prefix="tfmesos-test-nobody-"))
    try:
        os.chmod(home, 0o755)
        os.chown(home, other.pw_uid, other.pw_gid)
        yield home, other
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_another_local_user_packs_from_a_cache_of_their_own_that_root_does_not_trust(
        nobody_home):
    home, other = nobody_home
    cache = home / "cache"

    def pack(as_nobody, out):
        """(the sha256, stderr) of the task side packed by /usr/bin/python3
        (the same Python, so the same cache key) as nobody or as root."""
        who = {"user": other.pw_uid, "group": other.pw_gid, "extra_groups": []} \
            if as_nobody else {}
        result = subprocess.run(
            [BARE_PYTHON, "-S", "-c", PACK_TASK_SIDE, REPO, str(out)], capture_output=True,
            text=True, timeout=60, **who,
            env={"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_CACHE_HOME": str(cache)})
        assert result.returncode == 0, result.stderr
        return result.stdout.strip(), result.stderr
    first, _ = pack(True, home)
    again, said = pack(True, home)
    assert again == first and "not only yours" not in said
    kept = cache / "tfmesos" / bundle.TASK_SIDE_CACHE
    assert {(entry.stat().st_uid, entry.stat().st_mode & 0o777) for entry in kept.iterdir()} \
        == {(other.pw_uid, 0o600)}
    # Root pointed at that user's cache: not its own, so not used (compiled here).
    (home / "root").mkdir()
    _, said = pack(False, home / "root")
    assert "the directory %s is not only yours: not used" % kept in said


def test_a_task_side_others_could_plant_in_the_cache_is_not_shipped(tmp_path, monkeypatch,
                                                                    caplog):
    # Another local user who can write a shared $XDG_CACHE_HOME would have
    # every task of the run import their code.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "a").mkdir()
    first = bundle.pack_task_side(str(tmp_path / "a"))
    cache = tmp_path / "cache" / "tfmesos" / bundle.TASK_SIDE_CACHE
    (planted,) = cache.iterdir()
    planted.write_bytes(b"someone else's task side")
    planted.chmod(0o666)
    (tmp_path / "b").mkdir()
    with caplog.at_level(logging.WARNING):
        again = bundle.pack_task_side(str(tmp_path / "b"))
    assert again.sha256 == first.sha256
    assert b"someone else's" not in (tmp_path / "b" / again.name).read_bytes()
    assert "the file %s is not only yours: not used" % planted in caplog.text


def test_the_task_side_zip_gives_the_command_log_metrics_and_the_keras_callback(tmp_path):
    zipped = bundle.pack_task_side(str(tmp_path))
    probe = ("import sys, tfmesos, tfmesos.keras; print(tfmesos.log_metrics(loss=1.0), "
             "tfmesos.keras.MetricsCallback.__name__, 'keras' in sys.modules)")
    result = subprocess.run([BARE_PYTHON, "-S", "-c", probe], capture_output=True, text=True,
                            env=bare_environment(PYTHONPATH=zipped.path), cwd=str(tmp_path),
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "MetricsCallback", "False"]
    assert result.stderr.count("not in a tfmesos run") == 1


# -- the command's check of what the task fetched ------------------------------------------


@pytest.fixture
def sandbox(project, tmp_path):
    """A sandbox as the fetcher leaves it for a shipping task: the bundle
    copied (``extract: false``), not extracted."""
    packed = bundle.pack(project, str(tmp_path))
    box = tmp_path / "sandbox"
    box.mkdir()
    fetch_uris([{"value": packed.path, "extract": False}], str(box))
    return box, packed


def task_environ(box, packed):
    return {"MESOS_SANDBOX": str(box), "TFMESOS_BUNDLE": packed.name,
            "TFMESOS_BUNDLE_DIR": "project"}


def run_checked(box, files, then="echo ran", path="/usr/bin:/bin"):
    """``check_command(files)`` then ``then``, in a shell in ``box``, as Mesos
    runs a task's command (``sh -c``, the sandbox as working directory)."""
    return subprocess.run(["/bin/sh", "-c", check_command(files) + then], cwd=str(box),
                          env={"PATH": path}, capture_output=True, text=True, timeout=60)


def test_the_command_checks_the_bundle_extracts_it_and_the_task_enters_it(sandbox,
                                                                         monkeypatch):
    box, packed = sandbox
    result = run_checked(box, [Fetched(packed.name, packed.sha256, unpack=True)])
    assert (result.returncode, result.stdout, result.stderr) == (0, "ran\n", "")
    assert (box / "project" / "mylib" / "util.py").read_text() == "ANSWER = 42\n"
    monkeypatch.chdir(box)
    assert enter_bundle(task_environ(box, packed)) == str(box / "project")
    assert os.getcwd() == str(box / "project") and os.path.isfile("train.py")
    assert enter_bundle({}) is None


def test_without_a_bundle_the_task_enters_its_sandbox(tmp_path, monkeypatch):
    # A DOCKER task starts in its image's WORKDIR, not in the sandbox Mesos maps
    # at $MESOS_SANDBOX (src/docker/docker.cpp, Docker::run: no -w).
    monkeypatch.chdir("/")
    assert enter_task_directory({"MESOS_SANDBOX": str(tmp_path)}) == str(tmp_path)
    assert os.getcwd() == str(tmp_path)
    assert enter_task_directory({}) is None and os.getcwd() == str(tmp_path)
    with pytest.raises(TaskError, match="^cannot enter the sandbox .*/gone .MESOS_SANDBOX.: "):
        enter_task_directory({"MESOS_SANDBOX": str(tmp_path / "gone")})


def test_a_changed_bundle_is_refused_in_one_line_before_anything_is_extracted(sandbox):
    box, packed = sandbox
    with open(box / packed.name, "ab") as handle:
        handle.write(b"\0")                   # as a proxy or a cache might
    got = hashlib.sha256((box / packed.name).read_bytes()).hexdigest()
    task_side = box / "tfmesos-task-0123456789abcdef.zip"
    task_side.write_bytes(b"the task side")
    result = run_checked(box, [Fetched(task_side.name, hashlib.sha256(b"the task side")
                                       .hexdigest()),
                               Fetched(packed.name, packed.sha256, unpack=True)])
    assert (result.returncode, result.stdout) == (65, "")
    assert result.stderr.splitlines() == [
        "tfmesos: %s sha256 %s != expected %s: refusing to run it"
        % (packed.name, got, packed.sha256)]
    assert not (box / "project").exists()


def test_the_check_quotes_what_it_names_and_says_a_missing_file(tmp_path):
    # A --python-env's name is the user's: quotes, spaces and $(...) stay a name.
    (tmp_path / "x").write_text("")
    name = "it's $(touch pwned) `touch pwned2` \"env\".tar.gz"
    with tarfile.open(tmp_path / name, "w:gz") as tar:
        tar.add(tmp_path / "x", arcname="bin/python3")
    sha = hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
    result = run_checked(tmp_path, [Fetched(name, sha, unpack=True)])
    assert result.returncode == 0 and (tmp_path / "bin" / "python3").exists(), result.stderr
    result = run_checked(tmp_path, [Fetched(name, "0" * 64)])
    assert (result.returncode, result.stderr) == (
        65, "tfmesos: %s sha256 %s != expected %s: refusing to run it\n" % (name, sha, "0" * 64))
    result = run_checked(tmp_path, [Fetched("gone.zip", sha)])
    assert (result.returncode, result.stderr) == (
        65, "tfmesos: gone.zip sha256 (unreadable) != expected %s: refusing to run it\n" % sha)
    assert not {"pwned", "pwned2"} & set(os.listdir(tmp_path))


@pytest.mark.parametrize("openssl", [True, False])
def test_a_big_file_is_checked_by_openssl_else_by_sha256sum(tmp_path, openssl):
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sha256sum", "openssl") if openssl else ("sha256sum",):
        os.symlink(subprocess.run(["sh", "-c", "command -v " + tool], capture_output=True,
                                  text=True).stdout.strip(), tools / tool)
    (tmp_path / "env.tgz").write_bytes(b"not really big")
    sha = hashlib.sha256(b"not really big").hexdigest()
    files = [Fetched("env.tgz", sha, size=64 << 20)]
    result = run_checked(tmp_path, files, then='echo "$_tfm_f"', path=str(tools))
    assert (result.returncode, result.stdout, result.stderr) == (
        0, "openssl dgst -sha256 -r\n" if openssl else "sha256sum\n", "")
    result = run_checked(tmp_path, [Fetched("env.tgz", "0" * 64, size=64 << 20)],
                         path=str(tools))
    assert (result.returncode, result.stderr) == (
        65, "tfmesos: env.tgz sha256 %s != expected %s: refusing to run it\n" % (sha, "0" * 64))


# tar as busybox' is (no -b: "invalid option") or GNU tar, either saying
# how it was called.
_TAR_WRAPPER = """#!/bin/sh
echo "$*" >> "{log}"
{refuse}
exec {tar} "$@"
"""


@pytest.mark.parametrize("takes_b", [True, False], ids=["gnu-tar", "tar-without-b"])
def test_a_big_bundle_is_extracted_in_big_records_by_a_tar_that_takes_them(
        sandbox, tmp_path, takes_b):
    box, packed = sandbox
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sha256sum", "openssl", "sh"):
        os.symlink(shutil.which(tool), tools / tool)
    log = tmp_path / "tar.log"
    refuse = "" if takes_b else (
        'case " $* " in *" -b "*) echo "tar: invalid option -- \'b\'" >&2; exit 1;; esac')
    (tools / "tar").write_text(_TAR_WRAPPER.format(log=log, refuse=refuse,
                                                   tar=shutil.which("tar")))
    (tools / "tar").chmod(0o755)
    # Its real size is small: what it is said to be chooses the commands.
    result = run_checked(box, [Fetched(packed.name, packed.sha256, unpack=True, size=BIG)],
                         path=str(tools))
    assert (result.returncode, result.stdout, result.stderr) == (0, "ran\n", "")
    assert (box / "project" / "mylib" / "util.py").read_text() == "ANSWER = 42\n"
    calls = log.read_text().splitlines()
    extract = '-xof %s -C %s' % (box / packed.name, box)
    assert calls[-1] == ("-b %d " % TAR_BLOCKING if takes_b else "") + extract
    assert len(calls) == 2    # the try, and the extraction


def test_an_agent_without_sha256sum_runs_nothing_it_fetched(tmp_path):
    (tmp_path / "a.zip").write_text("")
    result = run_checked(tmp_path, [Fetched("a.zip", hashlib.sha256(b"").hexdigest())],
                         path=str(tmp_path))
    assert (result.returncode, result.stdout) == (65, "")
    assert result.stderr.splitlines() == [
        "tfmesos: this agent has no sha256sum (coreutils) to check the files the task "
        "fetched: refusing to run them"]


def test_a_bundle_that_is_not_extracted_fails_the_task_entry(sandbox):
    box, packed = sandbox
    with pytest.raises(TaskError, match="the shipped bundle %s is not extracted into %s"
                       % (packed.name, box / "project")):
        enter_bundle(task_environ(box, packed))


# -- the bundle server ----------------------------------------------------------------------


def served_count(server, name, expected):
    """``server.served[name]`` once it reached ``expected`` (or after the
    wait): the server counts a response when its sendfile returned, which
    can be after the client read the whole body."""
    try:
        wait_until(lambda: server.served[name] >= expected, 30)
    except AssertionError:
        pass
    return server.served[name]


@pytest.fixture
def served(tmp_path):
    path = tmp_path / "payload.tar.gz"
    path.write_bytes(os.urandom(200000))
    server = BundleServer({"payload.tar.gz": str(path)}, bind_host="127.0.0.1")
    yield server, path
    server.stop()


def request(url, method="GET", timeout=30):
    with urllib.request.urlopen(urllib.request.Request(url, method=method),
                                timeout=timeout) as response:
        return response.status, dict(response.headers), response.read()


def test_the_server_serves_get_and_head_at_its_secret_path(served):
    server, path = served
    url = server.url("127.0.0.1", "payload.tar.gz")
    assert len(server.token) >= 40 and server.token in url
    status, headers, body = request(url)
    assert (status, body) == (200, path.read_bytes())
    status, headers, body = request(url, "HEAD")
    assert (status, headers["Content-Length"], body) == (200, "200000", b"")
    assert served_count(server, "payload.tar.gz", 1) == 1


def test_a_wrong_path_gets_404_and_is_logged(served, caplog):
    server, _ = served
    wrong = ["/payload.tar.gz", "/%s/other.tar.gz" % server.token,
             "/%s/payload.tar.gz" % ("x" * len(server.token)), "/../etc/passwd"]
    with caplog.at_level(logging.WARNING, logger="tfmesos.ship.bundle_server"):
        for path in wrong:
            with pytest.raises(urllib.error.HTTPError) as caught:
                request("http://127.0.0.1:%d%s" % (server.port, path))
            assert caught.value.code == 404
    assert server.not_found == len(wrong)
    logged = [r.getMessage() for r in caplog.records if "404" in r.getMessage()]
    assert len(logged) == len(wrong) and "other.tar.gz" in logged[1]


def test_only_get_and_head_are_allowed(served):
    server, _ = served
    for method in ("POST", "PUT", "DELETE"):
        with pytest.raises(urllib.error.HTTPError) as caught:
            request(server.url("127.0.0.1", "payload.tar.gz"), method)
        assert caught.value.code == 405 and caught.value.headers["Allow"] == "GET, HEAD"


def test_idle_clients_are_dropped_and_cannot_hold_the_server(tmp_path):
    path = tmp_path / "f.zip"
    path.write_bytes(b"data")
    server = BundleServer({"f.zip": str(path)}, bind_host="127.0.0.1", max_clients=1,
                          idle_timeout=0.5)
    try:
        idle = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        # The one slot is the idle client's until it times out; then this is served.
        assert request(server.url("127.0.0.1", "f.zip"), timeout=60)[2] == b"data"
        assert idle.recv(100) == b""            # dropped, unanswered
        idle.close()
    finally:
        server.stop()


def trickle(port, stop, sent):
    """A client that sends a request one byte every 0.3 s (never finishing)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        for byte in b"GET /" + b"x" * 10000:
            if stop.is_set():
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                sent.append("dropped")
                return
            stop.wait(0.3)


def test_trickling_clients_keep_no_fetch_out(served):
    """More slow clients than download slots, each feeding its request a byte
    at a time: a real fetch beside them is served while they still trickle."""
    server, path = served
    stop, dropped = threading.Event(), []
    clients = [threading.Thread(target=trickle, args=(server.port, stop, dropped))
               for _ in range(20)]
    for client in clients:
        client.start()
    try:
        assert request(server.url("127.0.0.1", "payload.tar.gz"))[2] == path.read_bytes()
        assert not dropped     # served while every trickler was still connected
    finally:
        stop.set()
        for client in clients:
            client.join(30)


@pytest.mark.waits
def test_a_request_has_a_deadline_not_each_read(tmp_path):
    path = tmp_path / "f.zip"
    path.write_bytes(b"data")
    server = BundleServer({"f.zip": str(path)}, bind_host="127.0.0.1", request_timeout=1.0)
    stop, dropped = threading.Event(), []
    client = threading.Thread(target=trickle, args=(server.port, stop, dropped))
    client.start()
    try:
        wait_until(lambda: dropped, 30, message="a trickling request was never cut off")
    finally:
        stop.set()
        client.join(30)
        server.stop()


def test_a_client_that_resets_mid_response_is_one_log_line(tmp_path, caplog, capfd):
    path = tmp_path / "big.tar.gz"
    path.write_bytes(os.urandom(32 << 20))
    server = BundleServer({"big.tar.gz": str(path)}, bind_host="127.0.0.1")
    try:
        for _ in range(3):
            conn = socket.create_connection(("127.0.0.1", server.port), timeout=60)
            conn.sendall(b"GET %s HTTP/1.0\r\n\r\n" % server.path_of("big.tar.gz").encode())
            conn.recv(65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()      # a reset, mid-response
        wait_until(lambda: len([r for r in caplog.records if "went away" in r.message]) >= 3,
                   30, message="no log line for the resets")
    finally:
        server.stop()
    assert "Traceback" not in capfd.readouterr().err


def test_nothing_is_served_once_stopped(served):
    server, _ = served
    url = server.url("127.0.0.1", "payload.tar.gz")
    assert request(url)[0] == 200
    server.stop()
    # Refused; or, once another test's listener got the freed port, its own
    # answer (a reset, a 404): never the payload.
    with pytest.raises(OSError):
        request(url, timeout=10)


# -- the local fetcher's cache -------------------------------------------------------------


def env_archive(directory, marker="from-env"):
    """A tiny stand-in for a conda-pack archive: bin/python3 (and python)
    runs this machine's bare Python with ``FROM_ENV`` set (proof that it ran)."""
    wrapper = "#!/bin/sh\nFROM_ENV=%s exec %s \"$@\"\n" % (marker, BARE_PYTHON)
    path = os.path.join(directory, "tfenv.tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("bin/python3")
        info.mode, info.size = 0o755, len(wrapper)
        tar.addfile(info, io.BytesIO(wrapper.encode()))
        link = tarfile.TarInfo("bin/python")
        link.type, link.linkname = tarfile.SYMTYPE, "python3"
        tar.addfile(link)
    return path


# -- a --python-env URL on the embedded master: extracted by its fetcher -----------------------

ENV_SCRIPT = "import os\nprint('env', os.environ.get('FROM_ENV'))\n"


@pytest.fixture
def env_url_server():
    """``serve(path)``: the URL a BundleServer serves the file ``path`` at
    (as a --python-env URL of the user's own)."""
    servers = []

    def serve(path):
        name = os.path.basename(path)
        server = BundleServer({name: path}, bind_host="127.0.0.1")
        servers.append(server)
        return server.url("127.0.0.1", name)
    yield serve
    for server in servers:
        server.stop()


def test_a_python_env_url_made_with_tar_of_dot_runs_the_tasks(tmp_path, env_url_server):
    # ``tar czf env.tar.gz -C env .``: its first member './' is the archive's
    # top, which the local master's fetcher once refused as leaving the
    # sandbox, every attempt.
    env = tmp_path / "env"
    write(env, {"bin/python3": "#!/bin/sh\nFROM_ENV=dot exec %s \"$@\"\n" % BARE_PYTHON})
    (env / "bin" / "python3").chmod(0o755)
    archive = tmp_path / "env.tar.gz"
    subprocess.run(["tar", "czf", str(archive), "-C", str(env), "."], check=True)
    write(tmp_path / "proj", {"train.py": ENV_SCRIPT})
    result = run_tfrun_in(tmp_path / "proj", "--ship", "--python-env", env_url_server(archive),
                          "-w", "1", "-s", "0", *TINY, "--", "python", "train.py")
    assert result.returncode == 0, result.stderr
    assert "[worker:0] env dot" in result.stdout.splitlines()


def venv_pack_like(directory):
    """A venv-pack archive's shape: bin/python3 a link to the base
    interpreter by its absolute path (here a wrapper that says it ran)."""
    base = os.path.join(directory, "base-python3")
    with open(base, "w") as handle:
        handle.write("#!/bin/sh\nFROM_ENV=venv exec %s \"$@\"\n" % BARE_PYTHON)
    os.chmod(base, 0o755)
    path = os.path.join(directory, "tfenv.tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        for name, target in (("bin/python3", base), ("bin/python", "python3")):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            tar.addfile(link)
    return path


def test_a_python_env_url_the_local_fetcher_refuses_fails_at_once_saying_what_to_do(
        tmp_path, env_url_server):
    url = env_url_server(venv_pack_like(str(tmp_path)))
    write(tmp_path / "proj", {"train.py": ENV_SCRIPT})
    result = run_tfrun_in(tmp_path / "proj", "--ship", "--python-env", url, "--max-attempts",
                          "3", "-w", "1", "-s", "0", *TINY, "--", "python", "train.py")
    assert result.returncode == 1, result.stderr
    assert "relaunching" not in result.stderr
    [failed] = [line for line in result.stderr.splitlines() if "cannot be launched" in line]
    assert failed.startswith("tfrun: worker:0 cannot be launched: TASK_FAILED: Failed to fetch "
                             "'%s': the local master's fetcher refuses this archive: member "
                             "'bin/python3' is a link to an absolute path" % url), failed
    assert failed.endswith("give it to the task as a file that the task extracts itself, or "
                           "make it with conda-pack (the archive is refused on every fetch; "
                           "retrying cannot help)"), failed
    [hint] = [line for line in result.stderr.splitlines() if line.startswith("tfrun: hint: ")]
    assert "the local master's fetcher refused the archive" in hint and "conda-pack" in hint


def test_the_same_archive_given_as_a_file_runs_its_tasks(tmp_path):
    # What that refusal advises: a file is served with extract false and the
    # task's tar extracts it once checked, links and all (the base
    # interpreter is at its path here, as venv-pack needs on every agent).
    archive = venv_pack_like(str(tmp_path))
    write(tmp_path / "proj", {"train.py": ENV_SCRIPT})
    result = run_tfrun_in(tmp_path / "proj", "--ship", "--python-env", archive, "-w", "1", "-s",
                          "0", *TINY, "--", "python", "train.py")
    assert result.returncode == 0, result.stderr
    assert "[worker:0] env venv" in result.stdout.splitlines()


def test_cached_uris_are_downloaded_once_per_agent_and_user(tmp_path):
    archive = env_archive(str(tmp_path))
    server = BundleServer({"tfenv.tar.gz": archive}, bind_host="127.0.0.1")
    try:
        url = server.url("127.0.0.1", "tfenv.tar.gz")
        cache = FetcherCache(str(tmp_path / "cache"))
        boxes = [tmp_path / ("box%d" % i) for i in range(6)]
        errors = []

        def fetch(box, user):
            box.mkdir()
            try:
                fetch_uris([{"value": url, "cache": True}], str(box), cache=cache, user=user)
            except Exception as exc:   # reported below
                errors.append(exc)
        threads = [threading.Thread(target=fetch, args=(box, "alice" if i < 4 else "bob"))
                   for i, box in enumerate(boxes)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors
        assert served_count(server, "tfenv.tar.gz", 2) == 2 and cache.downloads[url] == 2  # per user
        for box in boxes:   # extracted from the cache: the archive is not in the sandbox
            assert sorted(os.listdir(box)) == ["bin"]
            assert os.access(box / "bin" / "python3", os.X_OK)
        fetch_uris([{"value": url, "cache": False}], str(boxes[0]), cache=cache)
        assert served_count(server, "tfenv.tar.gz", 3) == 3       # cache: false bypasses it
        assert sorted(os.listdir(boxes[0])) == ["bin", "tfenv.tar.gz"]
    finally:
        server.stop()


def test_isolate_fs_hides_existing_directories_but_never_the_sandbox(tmp_path):
    (tmp_path / "home" / "proj").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    sandbox = tmp_path / "work" / "sandbox"
    sandbox.mkdir()
    paths = [str(tmp_path / "home"), str(tmp_path / "home" / "proj"), str(tmp_path / "gone"),
             "/", str(tmp_path / "work"), str(tmp_path)]
    assert effective_paths(paths, str(sandbox)) == [str(tmp_path / "home")]


# -- tfrun --ship on the embedded master --------------------------------------------------------


def run_tfrun_in(cwd, *args, timeout=180, path_first=None):
    """``tfrun ARGS`` in ``cwd``; ``path_first``: a directory put first on
    the ``PATH`` tfrun and its tasks (the embedded master's) see."""
    env = dict(os.environ, MESOS_MASTER="",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    if path_first is not None:
        env["PATH"] = os.pathsep.join([str(path_first), env.get("PATH", "")])
    try:
        return subprocess.run(tfrun_argv(*args), cwd=str(cwd), env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail("tfrun %s did not finish in %d s: %s" % (args, timeout, exc.stderr))


def test_tfrun_ship_runs_the_project_from_its_bundle_in_every_task(project, tmp_path):
    runs = tmp_path / "runs"
    result = run_tfrun_in(project, "--ship", "-w", "2", "-s", "1", *TINY,
                          "--run-dir", str(runs), "--", "python", "train.py")
    assert result.returncode == 0, result.stderr
    assert "tfrun: shipped 5 files, " in result.stderr
    assert "from %s" % project in result.stderr
    lines = sorted(line for line in result.stdout.splitlines() if "answer" in line)
    assert lines == ["[worker:%d] answer 42 cwd project data False notes True" % i
                     for i in (0, 1)]
    loaded = [line for line in result.stdout.splitlines() if "tfmesos from" in line]
    assert len(loaded) == 2 and all(".zip/tfmesos/__init__.py" in line and "tfmesos-task-"
                                    in line for line in loaded)
    with open(runs / "run.json") as handle:
        shipped = json.load(handle)["shipped"]
    packed = shipped["bundle"]
    assert (packed["files"], packed["source"]) == (5, str(project))
    assert len(packed["sha256"]) == 64 and packed["bytes"] > 0
    assert shipped["task_side"].startswith("tfmesos-task-")


def test_a_big_shipped_bundle_is_checked_and_extracted_in_big_records_by_the_task(tmp_path):
    # Shipment's sizes -> check_command -> the agent's fetcher -> the task's
    # shell: a bundle of BIG bytes or more takes the big path end to end.
    project = tmp_path / "proj"
    weights = os.urandom(BIG + (1 << 20))
    write(project, {"train.py": "import hashlib\nprint('weights', hashlib.sha256("
                                "open('weights.bin', 'rb').read()).hexdigest())\n"})
    (project / "weights.bin").write_bytes(weights)
    tools, log = tmp_path / "bin", tmp_path / "tar.log"
    tools.mkdir()
    (tools / "tar").write_text(_TAR_WRAPPER.format(log=log, refuse="", tar=shutil.which("tar")))
    (tools / "tar").chmod(0o755)
    result = run_tfrun_in(project, "--ship", "-w", "1", "-s", "0", *TINY, "--", "python",
                          "train.py", path_first=tools)
    assert result.returncode == 0, result.stderr
    assert "[worker:0] weights %s" % hashlib.sha256(weights).hexdigest() in \
        result.stdout.splitlines()
    extracted = [line for line in log.read_text().splitlines() if " -x" in " " + line]
    assert len(extracted) == 1 and extracted[0].startswith("-b %d -xof " % TAR_BLOCKING), \
        extracted


def test_tfrun_refuses_a_bundle_over_the_limit_in_one_line(tmp_path):
    write(tmp_path, {"big.bin": "x" * 300000, "small.py": "print(1)\n"})
    result = run_tfrun_in(tmp_path, "--ship", "--ship-max-size", "0.1", "-w", "1", "-s", "0",
                          *TINY, "--", "python", "small.py", timeout=120)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert errors == ["tfrun: error: --ship %s: 307.2 kB is over --ship-max-size 100.0 kB; "
                      "biggest: big.bin (300.0 kB), small.py (9 bytes) (drop them with "
                      "--ship-exclude PATTERN or .gitignore, or read large data from shared "
                      "storage)" % tmp_path]


# -- a run in this process: what the server saw -------------------------------------------------


def replica_spec(project, tmp_path, workers=2, max_attempts=1, **ship):
    """A replica run of ``python train.py`` on the embedded master (one agent)."""
    from tfmesos.core.jobs import Job
    from tfmesos.core.spec import RunSpec
    return RunSpec(jobs=(Job("worker", num=workers, cpus=0.1, mem=64),), mode="replica",
                   command="python train.py", run_dir=str(tmp_path / "run"),
                   max_attempts=max_attempts,
                   launch_timeout=120, ship=ShipSpec(str(project), **ship))


def test_a_cached_python_env_is_fetched_once_per_agent_and_runs_the_tasks(project, tmp_path):
    from tfmesos.core.launch import ClusterRun

    # The command's python is the environment's (its bin/ comes first on PATH).
    write(project, {"train.py": "import os, sys\nprint('env', os.environ.get('FROM_ENV'), "
                                "sys.executable == '%s', os.environ['PATH'].split(':')[0] == "
                                "os.environ['MESOS_SANDBOX'] + '/bin')\n" % BARE_PYTHON})
    archive = env_archive(str(tmp_path))
    lines = []
    run = ClusterRun(replica_spec(project, tmp_path, workers=3, python_env=archive),
                     on_log=lambda slot, stream, text: lines.append(text))
    try:
        run.start()
        run.wait_ready()
        assert run.wait_finished() == 0
        server = run.shipment.server
        url = server.url("127.0.0.1", run.shipment.bundle.name)
        with pytest.raises(urllib.error.HTTPError) as caught:   # during the run: 404
            request(url.replace(server.token, "wrong"))
        assert caught.value.code == 404
    finally:
        run.stop()
    # Three tasks, one agent: the bundle and the environment once each.
    assert served_count(server, run.shipment.bundle.name, 1) == 1
    assert served_count(server, "python-env.tar.gz", 1) == 1   # served_env_name
    assert "".join(lines).split("\n").count("env from-env True True") == 3
    with pytest.raises(OSError):   # nothing is served after the run (see the test above)
        request(url, timeout=10)


# What a proxy, a poisoned cache or an attacker on the way would do: tfrun
# (in a process of its own) whose bundle server hands out another file
# under the name of one it shipped (``PREFIX``): the TaskInfos carry the
# digest of what tfrun packed, the agent fetches the other one.
SWAPPING_TFRUN = """\
import sys
from tfmesos.ship import bundle_server
prefix, swapped = sys.argv[1], sys.argv[2]
add = bundle_server.BundleServer.add
bundle_server.BundleServer.add = lambda self, name, path: add(
    self, name, swapped if name.startswith(prefix) else path)
from tfmesos.cli.tfrun import main
sys.exit(main(sys.argv[3:]))
"""


def swapped_archive(kind, directory, marker):
    """An archive of ``kind`` whose code, if anything ran it, writes ``marker``."""
    code = "open(%r, 'w').write('ran')\n" % str(marker)
    if kind == "bundle":
        path = os.path.join(directory, "swapped.tar.gz")
        with tarfile.open(path, "w:gz") as tar:
            info = tarfile.TarInfo("project/train.py")
            info.size = len(code)
            tar.addfile(info, io.BytesIO(code.encode()))
        return path
    import zipfile
    top = "tfmesos-scheduler/" if kind == "scheduler" else ""
    main = "tfmesos/cli/detached_scheduler.py" if kind == "scheduler" else \
        "tfmesos/task/__main__.py"
    path = os.path.join(directory, "swapped.zip")
    with zipfile.ZipFile(path, "w") as archive:
        for name in ("tfmesos/__init__.py", os.path.dirname(main) + "/__init__.py"):
            archive.writestr(top + name, "")
        archive.writestr(top + main, code)
    return path


@pytest.mark.parametrize("kind, prefix", [("bundle", "tfmesos-bundle-"),
                                          ("task side", "tfmesos-task-"),
                                          ("scheduler", "tfmesos-scheduler-")])
def test_a_swapped_archive_is_refused_by_the_command_and_nothing_of_it_runs(
        project, tmp_path, request, kind, prefix):
    marker = tmp_path / "swapped-code-ran"
    swapped = swapped_archive(kind, str(tmp_path), marker)
    got = hashlib.sha256(open(swapped, "rb").read()).hexdigest()
    runs = tmp_path / "runs"
    where = ["--run-dir", str(runs)]
    if kind == "scheduler":   # tfrun --detach: the scheduler task's own zip
        master = request.getfixturevalue("local_master")
        where = ["--detach", "-m", master.url]
    env = dict(os.environ, MESOS_MASTER="", PYTHONPATH=REPO)
    result = subprocess.run(
        [sys.executable, "-c", SWAPPING_TFRUN, prefix, swapped, "--ship", "-w", "1", "-s", "0",
         *TINY, *where, "--", "python", "train.py"], cwd=str(project), env=env,
        capture_output=True, text=True, timeout=180)
    # tfrun exits with the failed task's status, the check's (a detached
    # submission: 1, its scheduler never took over).
    assert result.returncode == (1 if kind == "scheduler" else 65), result.stderr
    refusal = re.search(r"tfmesos: (%s[0-9a-f]{16}\.\S+) sha256 %s != expected ([0-9a-f]{64}): "
                        r"refusing to run it" % (re.escape(prefix), got), result.stderr)
    assert refusal, result.stderr
    name, want = refusal.groups()
    assert name[len(prefix):].startswith(want[:16])   # what tfrun packed and named
    assert not marker.exists()
    if kind == "scheduler":
        assert "the scheduler task ended before it took the run over: TASK_FAILED: Command " \
            "exited with status 65; it said: %s" % refusal.group(0) in result.stderr
        return
    # Not retried (fetching it again cannot help): the run fails in one line,
    # and its record keeps the line and the advice.
    assert "worker:0 cannot be launched: TASK_FAILED: Command exited with status 65 (%s; " \
        "retrying cannot help)" % refusal.group(0) in result.stderr
    with open(runs / "run.json") as handle:
        [attempt] = json.load(handle)["tasks"][0]["attempts"]
    assert refusal.group(0) in attempt["sandbox_tail"]["stderr"]
    assert "is not the one tfrun shipped" in attempt["hint"]


# -- the TaskInfos of a shipping run -------------------------------------------------------------


@pytest.fixture
def shipment(project):
    from tfmesos.ship.shipping import Shipment
    said = []
    shipped = Shipment(ShipSpec(str(project), python_env="https://repo.example.com/tfenv.tgz"),
                       bind_host="127.0.0.1", say=said.append)
    yield shipped, said
    shipped.stop()


def test_shipped_taskinfos_carry_the_uris_the_check_and_the_shipped_task_side(shipment):
    from offers import offer
    from taskinfo_helpers import PS_AND_WORKERS, launch_all, variables

    from tfmesos.core.spec import RunSpec

    shipped, said = shipment
    assert said == [shipped.bundle.summary()]
    for run, interpreter, path in (
            (RunSpec(), '"${MESOS_SANDBOX:-$PWD}"/bin/python3', ""),
            (RunSpec(python="/opt/py/bin/python3"), "/opt/py/bin/python3", "/opt/py/bin:")):
        _, infos, _ = launch_all(PS_AND_WORKERS, run, [offer("o1")], shipment=shipped,
                                 ship_host="10.0.0.5")   # and through the strict schema
        for info in infos.values():
            command = info["command"]
            assert command["uris"] == [
                {"value": "http://10.0.0.5:%d/%s/%s" % (shipped.server.port,
                                                        shipped.server.token, name),
                 "extract": extract, "cache": cache}
                for name, extract, cache in ((shipped.bundle.name, False, True),
                                             (shipped.task_side.name, False, False))] + [
                # tfrun never has its bytes: the fetcher extracts it, unchecked
                {"value": "https://repo.example.com/tfenv.tgz", "extract": True, "cache": True}]
            # The check of both files (their digests in the command's own text),
            # the bundle extracted, then the entry.
            assert command["value"] == check_command([
                Fetched(shipped.bundle.name, shipped.bundle.sha256, unpack=True),
                Fetched(shipped.task_side.name, shipped.task_side.sha256)]) + (
                'PATH=%s"${MESOS_SANDBOX:-$PWD}"/bin"${PATH:+:$PATH}" '
                'PYTHONPATH="${MESOS_SANDBOX:-$PWD}"/%s"${PYTHONPATH:+:$PYTHONPATH}" '
                'exec %s -m tfmesos.task' % (path, shipped.task_side.name, interpreter))
            assert "_tfm_c %s %s; " % (shipped.bundle.name, shipped.bundle.sha256) \
                in command["value"]
            env = variables(info)
            assert "PYTHONPATH" not in env          # nothing of the submitter's paths
            assert (env["TFMESOS_BUNDLE"], env["TFMESOS_BUNDLE_DIR"]) == (shipped.bundle.name,
                                                                          "project")


def test_shipped_commands_without_an_environment_run_python3_or_python(project):
    from tfmesos.ship.shipping import Shipment
    shipped = Shipment(ShipSpec(str(project)), bind_host="127.0.0.1", say=lambda text: None)
    shipped.stop()
    zip_path = '"${MESOS_SANDBOX:-$PWD}"/%s' % shipped.task_side.name
    check = check_command(shipped.fetched())
    assert check.startswith('_tfm_d="${MESOS_SANDBOX:-$PWD}"; ')
    assert shipped.command() == check + ('PYTHONPATH=%s"${PYTHONPATH:+:$PYTHONPATH}" exec '
                                         'python3 -m tfmesos.task' % zip_path)
    # --python's directory comes first on PATH: the command's python is its.
    assert shipped.command(python="/venv/bin/python") == check + (
        'PATH=/venv/bin"${PATH:+:$PATH}" PYTHONPATH=%s"${PYTHONPATH:+:$PYTHONPATH}" exec '
        '/venv/bin/python -m tfmesos.task' % zip_path)
    assert shipped.command(python="python3.11").startswith(check + "PYTHONPATH=")
    assert shipped.command(python="venv/bin/python").startswith(
        check + 'PATH="${MESOS_SANDBOX:-$PWD}"/venv/bin"${PATH:+:$PATH}" ')
    assert shipped.command(image="tfmesos/tfmesos", python="/venv/bin/python").endswith(
        "exec python3 -m tfmesos.task")


def test_tfrun_and_cluster_options_make_the_ship_spec(tmp_path):
    from tfmesos.cli import tfrun_options as tfrun
    from tfmesos.cli.tfrun_values import ship_spec
    from tfmesos.core.cluster_arguments import run_spec_of

    args = tfrun.build_parser().parse_options(["--ship", str(tmp_path), "--ship-exclude", "*.h5",
                                               "--ship-max-size", "5"])
    assert ship_spec(args) == ShipSpec(str(tmp_path), ("*.h5",), 5000000, None)
    args = tfrun.build_parser().parse_options(["--ship", "-w", "2"])
    assert ship_spec(args).directory == os.getcwd() and args.nworker == 2
    assert ship_spec(tfrun.build_parser().parse_options(["-w", "2"])) is None
    spec = run_spec_of([{"name": "worker"}], master="local", ship=str(tmp_path))
    assert spec.ship == ShipSpec(str(tmp_path))
    with pytest.raises(SpecError, match="drop image or ship.python_env"):
        run_spec_of([{"name": "worker"}], master="local", image="tfmesos/tfmesos",
                     ship=ShipSpec(str(tmp_path), python_env="https://h/e.tar.gz"))



def test_a_committed_file_under_a_directory_now_a_link_out_is_not_shipped(project, tmp_path):
    # conf/credentials was committed; conf became a link to ~/.aws, and
    # .gitignore'd: git lists conf/credentials still (deleted, to git), and
    # it was read through the link and shipped, the secret with it.
    outside = tmp_path / "home" / ".aws"
    write(outside, {"credentials": "[default]\naws_secret_access_key=AKIAFAKE\n"})
    write(project, {"conf/credentials": "x\n", "conf/settings.toml": "a = 1\n"})
    git(project, "add", "conf")
    shutil.rmtree(project / "conf")
    os.symlink(str(outside), str(project / "conf"))
    with open(project / ".gitignore", "a") as handle:
        handle.write("conf\n")
    assert bundle.list_files(project) == [".gitignore", "mylib/__init__.py", "mylib/util.py",
                                          "notes.txt", "train.py"]


@pytest.mark.parametrize("pattern", ["./data", "data/", "././data", "{project}/data",
                                     "{project}/data/"])
def test_ship_exclude_takes_a_path_as_written_in_the_shell(pattern, tmp_path):
    # "./data" and an absolute path matched nothing: data/ went with no word.
    write(tmp_path / "p", {"train.py": "", "data/a.bin": "x", "data/sub/b.bin": "y",
                           "notes/data.txt": ""})
    files = bundle.list_files(tmp_path / "p",
                              exclude=(pattern.format(project=tmp_path / "p"),))
    assert files == ["notes/data.txt", "train.py"]


def test_ship_exclude_double_star_matches_at_the_top_too(tmp_path):
    # '**/*.ckpt' left out sub/m.ckpt, not model.ckpt (gitignore's **/ also matches none).
    write(tmp_path / "p", {"model.ckpt": "", "sub/m.ckpt": "", "train.py": ""})
    assert bundle.list_files(tmp_path / "p", exclude=("**/*.ckpt",)) == ["train.py"]


@pytest.mark.parametrize("pattern, error", [
    ("/etc", "ship.exclude=/etc: it is outside ship.directory="),
    (".", "ship.exclude=. would leave out the whole directory"),
    ("./", "ship.exclude=./ would leave out the whole directory"),
])
def test_ship_exclude_of_what_is_not_in_the_directory_is_refused(pattern, error, tmp_path):
    write(tmp_path / "p", {"train.py": ""})
    with pytest.raises(ShipError, match=re.escape(error)):
        bundle.list_files(tmp_path / "p", exclude=(pattern,))


def test_a_directory_tree_deeper_than_pythons_recursion_is_walked(tmp_path):
    # os.walk (3.11) takes a frame a level: 1,100 nested directories were a
    # RecursionError traceback from tfrun --ship.
    root = tmp_path / "p"
    deep = str(root)
    os.mkdir(deep)
    for _ in range(1100):   # (os.makedirs recurses too)
        deep = os.path.join(deep, "d")
        os.mkdir(deep)
    with open(os.path.join(deep, "f"), "w") as handle:
        handle.write("x")
    write(root, {"train.py": ""})
    try:
        assert bundle.list_files(root) == ["/".join(["d"] * 1100 + ["f"]), "train.py"]
    finally:   # os.walk and shutil.rmtree recurse too: conftest's checks, pytest's cleanup
        subprocess.run(["rm", "-rf", str(root / "d")], check=True)


def test_a_git_repository_inside_the_project_ships_its_files(project, tmp_path):
    # A clone inside the project (and a submodule): git lists its directory
    # alone, and nothing of it went, with no word; the task's import failed.
    library = tmp_path / "lib"
    write(library, {"helper.py": "X = 1\n", "pkg/__init__.py": ""})
    git(library, "init", "-q")
    git(library, "add", ".")
    git(library, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "lib")
    git(project, "clone", "-q", str(library), "vendored")
    git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library),
        "sub")
    files = bundle.list_files(project)
    for name in ("vendored/helper.py", "vendored/pkg/__init__.py", "sub/helper.py",
                 "sub/pkg/__init__.py", ".gitmodules", "train.py"):
        assert name in files, files
    assert not [name for name in files if "/.git/" in name or name.endswith("/.git")], files


def test_followed_links_stop_as_early_as_the_rest_of_the_directory(tmp_path, monkeypatch):
    # Links to links to ... (two a level) fanned a followed link out to 2**17
    # members, walked in full (19 s) before the early stop looked at them.
    from tfmesos.ship import contents, listing
    out = tmp_path / "out"
    levels = 12
    for level in range(levels + 1):
        (out / ("L%d" % level)).mkdir(parents=True)
    for level in range(levels):
        for name in "ab":
            os.symlink(str(out / ("L%d" % (level + 1))), str(out / ("L%d" % level) / name))
    (out / ("L%d" % levels) / "f").write_text("x")
    write(tmp_path / "p", {"train.py": ""})
    os.symlink(str(out / "L0"), str(tmp_path / "p" / "data"))
    visited = []
    real_tree = listing.tree
    monkeypatch.setattr(listing, "tree", lambda top, onerror: (
        visited.append(top), real_tree(top, onerror))[1])
    with pytest.raises(ShipError, match=r"more than 50 files, each at least"):
        contents.select(str(tmp_path / "p"), follow_links=True,
                        max_size=50 * contents.MEMBER_AT_LEAST + 1)
    assert len(visited) < 500, len(visited)    # all of them: 8,191
    excluded = bundle.list_files(tmp_path / "p", follow_links=True, exclude=("data",))
    assert excluded == ["train.py"]


def test_the_largest_max_size_is_the_same_for_tfrun_and_the_apis():
    # tfrun's --ship-max-size stopped at 100 GB, ShipSpec(max_size=) at 10 TB
    # ("at most 10000000" MB) while its comment said 100 GB.
    from tfmesos.core.inputs import MAX_SHIP_MB
    assert bundle.MAX_SIZE_LIMIT == MAX_SHIP_MB * 1000 * 1000
    ShipSpec(".", max_size=MAX_SHIP_MB * 1000 * 1000)
    with pytest.raises(SpecError, match="at most 100000, got"):
        ShipSpec(".", max_size=MAX_SHIP_MB * 1000 * 1000 + 1)
