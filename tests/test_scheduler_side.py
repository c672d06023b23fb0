"""``tfrun --detach``'s scheduler side (ship/scheduler_side.py): one
zip (the same from the user's cache) holding tfmesos, mesos_local, addict and kazoo, that runs
with nothing but the standard library of an agent's Python, and the
detached scheduler task's command."""

import dataclasses
import importlib.util
import json
import os
import shlex
import stat
import subprocess
import sys
import zipfile

import pytest
from zip_imports import imports_our_bytecode, zip_imports

from tfmesos.ship import compiled_zip, scheduler_side
from tfmesos.ship.bundle import ShipError
from tfmesos.ship.scheduler_side import SCHEDULER_DIR, pack_scheduler_side, scheduler_command

# This machine's Python outside any home directory, run with -S: no
# site-packages, so neither the installed tfmesos nor addict nor kazoo.
BARE_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MAX_ZIP = 3 * 1000 * 1000     # every detached run uploads it: keep it small
# What the detached scheduler needs at once (tfrun, the run, a real master).
ENTRY_MODULES = ("tfmesos.cli.tfrun", "tfmesos.core.launch", "tfmesos.backends.remote",
                 "tfmesos.mesos.driver", "tfmesos.ship.shipping", "addict")
# Imports every shipped module but the __main__ ones, then says where each
# loaded module came from (built-in modules have no file).
PROBE = """
import importlib, json, os, sys, sysconfig
root = sys.argv[1]
names = []
for top, dirs, files in os.walk(root):
    dirs.sort()
    for file_name in sorted(files):
        if not file_name.endswith(".py") or file_name == "__main__.py":
            continue
        parts = os.path.relpath(os.path.join(top, file_name), root)[:-3].split(os.sep)
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
failed = {}
for name in names:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        failed[name] = "%s: %s" % (type(exc).__name__, exc)
files = {name: getattr(module, "__file__", None) for name, module in list(sys.modules.items())}
stdlib = sorted({sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib")})
print(json.dumps({"imported": len(names), "failed": failed, "files": files, "stdlib": stdlib}))
"""


def bare_environment(**extra):
    """A clean environment: no PYTHONPATH but what is given, no tfmesos variables."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def unzipped(tmp_path_factory):
    """(the Bundle, the directory its zip was extracted into)."""
    packed = pack_scheduler_side(str(tmp_path_factory.mktemp("packed")))
    where = tmp_path_factory.mktemp("sandbox")
    with zipfile.ZipFile(packed.path) as archive:
        archive.extractall(str(where))
    return packed, str(where)


def test_the_zip_holds_the_packages_python_files_under_one_directory(unzipped):
    packed, _ = unzipped
    print("scheduler side: %s, %d bytes zipped, %d files, %d bytes" % (
        packed.name, packed.archive_size, packed.files, packed.size))
    assert packed.name == "tfmesos-scheduler-%s.zip" % packed.sha256[:16]
    assert packed.archive_size < MAX_ZIP
    with zipfile.ZipFile(packed.path) as archive:
        names = archive.namelist()
        infos = archive.infolist()
    assert names == sorted(names)
    assert all(name.startswith(SCHEDULER_DIR + "/") for name in names)
    compiled = [name for name in names if name.endswith(".pyc")]
    names = [name for name in names if name not in compiled]
    assert len(names) == packed.files and all(name.endswith(".py") for name in names)
    # Beside each source, where zipimport looks (it reads no __pycache__).
    assert sorted(compiled) == sorted(name + "c" for name in names)
    assert all(info.date_time == (1980, 1, 1, 0, 0, 0) for info in infos)
    tops = {name.split("/")[1] for name in names}
    assert {"tfmesos", "mesos_local", "addict"} <= tops <= {"tfmesos", "mesos_local", "addict",
                                                          "kazoo"}
    left_out = {package: paths for package, _, paths in scheduler_side.PACKAGES}
    for package in ("tfmesos", "mesos_local"):   # all of it, but what PACKAGES leaves out
        here = os.path.dirname(__import__(package).__file__)
        mine = sorted(os.path.relpath(os.path.join(top, name), here)
                      for top, dirs, files in os.walk(here) if "__pycache__" not in top
                      for name in files if name.endswith(".py"))
        mine = [name for name in mine if name not in left_out[package]]
        assert sorted(name.split("/", 2)[2] for name in names
                      if name.split("/")[1] == package) == mine
    assert "%s/tfmesos/ship/scheduler_side.py" % SCHEDULER_DIR in names
    if "kazoo" in tops:
        assert "%s/kazoo/client.py" % SCHEDULER_DIR in names
        assert not [name for name in names if name.startswith(
            ("%s/kazoo/tests/" % SCHEDULER_DIR, "%s/kazoo/testing/" % SCHEDULER_DIR))]


def test_each_module_s_bytecode_carries_its_source_s_hash_unchecked(unzipped):
    packed, _ = unzipped
    with zipfile.ZipFile(packed.path) as archive:
        for name in ("tfmesos/core/launch", "mesos_local/master", "addict/addict"):
            source = archive.read("%s/%s.py" % (SCHEDULER_DIR, name))
            pyc = archive.read("%s/%s.pyc" % (SCHEDULER_DIR, name))
            # PEP 552: magic, flags (hash-based, unchecked: the zip's sha256
            # vouches for both), the source's hash
            assert pyc[:16] == importlib.util.MAGIC_NUMBER + b"\x01\0\0\0" + \
                importlib.util.source_hash(source)


def test_the_scheduler_imports_its_modules_from_the_zip_compiled_not_from_source(unzipped):
    # Not extracted (~500 files: 0.13-0.4 s of each scheduler task's start),
    # and not compiled either (~2 MB of source: 0.25-0.4 s).
    packed, where = unzipped
    root = os.path.join(packed.path, SCHEDULER_DIR)
    if not imports_our_bytecode(BARE_PYTHON):
        pytest.skip("%s is another Python than this one: it compiles" % BARE_PYTHON)
    found = zip_imports(BARE_PYTHON, root, ("tfmesos.cli.detached_scheduler",
                                            "tfmesos.core.launch", "tfmesos.cli.tfrun"),
                        cwd=where, env=bare_environment(PYTHONDONTWRITEBYTECODE="1"))
    assert len(found["loaded"]) > 30 and found["compiled"] == [] and found["read"] == []
    # A traceback still shows the source's lines (zipimport's get_source,
    # through the module's globals as traceback passes them to linecache).
    failing = ("import linecache, tfmesos.core.launch as m; "
               "print(linecache.getline(m.__file__, 1, vars(m)))")
    shown = subprocess.run([BARE_PYTHON, "-S", "-c", failing], capture_output=True, text=True,
                           cwd=where, timeout=120, env=bare_environment(PYTHONPATH=root))
    assert shown.returncode == 0 and shown.stdout.startswith('"""'), shown


def cache_directory():
    return compiled_zip.cache_directory(scheduler_side.CACHE_KIND)


def uncompiled(member, source):
    """A stand-in for the compile, where what is compiled does not matter."""
    return [(member + "c", b"")]


def test_a_second_pack_of_the_same_code_comes_from_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(compiled_zip, "bytecode", uncompiled)
    first = pack_scheduler_side(str(tmp_path))
    cached = os.listdir(cache_directory())
    assert len(cached) == 1 and cached[0].endswith(".zip")

    def compiled(*_):
        raise AssertionError("compiled again")
    monkeypatch.setattr(compiled_zip, "bytecode", compiled)
    (tmp_path / "again").mkdir()
    again = pack_scheduler_side(str(tmp_path / "again"))
    assert (again.sha256, again.files, again.size) == (first.sha256, first.files, first.size)


def test_a_cache_others_can_write_is_not_used(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(compiled_zip, "bytecode", uncompiled)
    first = pack_scheduler_side(str(tmp_path))
    (cached,) = os.listdir(cache_directory())
    planted = os.path.join(cache_directory(), cached)
    with open(planted, "wb") as handle:
        handle.write(b"not the scheduler side")   # e.g. another user's, in a shared cache
    os.chmod(planted, 0o666)
    (tmp_path / "again").mkdir()
    again = pack_scheduler_side(str(tmp_path / "again"))
    assert again.sha256 == first.sha256
    # The repack above replaced the planted file: plant it again, the file
    # only its owner's now, the directory anyone's.
    with open(planted, "wb") as handle:
        handle.write(b"not the scheduler side")
    os.chmod(planted, 0o644)
    os.chmod(cache_directory(), 0o777)
    assert pack_scheduler_side(str(tmp_path / "again")).sha256 == first.sha256


def test_a_cache_that_cannot_be_written_only_costs_a_compile(monkeypatch, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr(compiled_zip, "bytecode", uncompiled)
    packed = pack_scheduler_side(str(tmp_path))
    assert os.path.isfile(packed.path) and packed.files > 150


def test_packing_is_reproducible(unzipped, monkeypatch, tmp_path):
    packed, _ = unzipped
    no_cache = tmp_path / "not-a-directory"   # compiled again, not the cache's copy
    no_cache.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(no_cache))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, again = (pack_scheduler_side(str(tmp_path / name)) for name in "ab")
    assert (again.name, again.sha256, again.files, again.size) == \
        (first.name, first.sha256, first.files, first.size)
    # The same sources as the cache's copy the fixture packed (whose
    # bytecode another process compiled: marshal writes what a process's
    # interned strings make it write, so only the cache keeps a zip's name
    # from one process to the next).
    with zipfile.ZipFile(packed.path) as cached, zipfile.ZipFile(first.path) as compiled:
        assert [(name, cached.read(name)) for name in cached.namelist()
                if name.endswith(".py")] == \
            [(name, compiled.read(name)) for name in compiled.namelist() if name.endswith(".py")]


def test_the_unzipped_scheduler_side_runs_on_the_standard_library_alone(unzipped):
    _, where = unzipped
    root = os.path.join(where, SCHEDULER_DIR)
    env = bare_environment(PYTHONPATH=root)
    probe = ("import sys, tfmesos, %s; print(tfmesos.__file__); "
             "print(sys.modules['tfmesos.cli.tfrun'].__file__)" % ", ".join(ENTRY_MODULES))
    result = subprocess.run([BARE_PYTHON, "-S", "-c", probe], capture_output=True, text=True,
                            env=env, cwd=where, timeout=120)
    assert result.returncode == 0, result.stderr
    assert all(line.startswith(root + os.sep) for line in result.stdout.splitlines()), \
        result.stdout
    usage = subprocess.run([BARE_PYTHON, "-S", "-m", "tfmesos.cli.tfrun", "--help"],
                           capture_output=True, text=True, env=env, cwd=where, timeout=120)
    assert usage.returncode == 0, usage.stderr
    assert "usage: tfrun" in usage.stdout


def test_every_shipped_module_imports_from_the_zip_or_the_standard_library(unzipped):
    """Each package's own imports are satisfied by what is shipped: nothing
    comes from site-packages (hidden by -S) or the submitter's paths."""
    _, where = unzipped
    root = os.path.join(where, SCHEDULER_DIR)
    result = subprocess.run([BARE_PYTHON, "-S", "-c", PROBE, root], capture_output=True,
                            text=True, env=bare_environment(PYTHONPATH=root), cwd=where,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.splitlines()[-1])
    assert found["imported"] > 150 and found["failed"] == {}
    places = tuple(path + os.sep for path in [root] + found["stdlib"])
    outside = {name: path for name, path in found["files"].items()
               if path and not path.startswith(places)}
    assert outside == {}


def test_kazoo_is_optional_the_rest_is_not(monkeypatch, tmp_path):
    real = scheduler_side.package_directory
    monkeypatch.setattr(scheduler_side, "package_directory",
                        lambda name: None if name == "kazoo" else real(name))
    packed = pack_scheduler_side(str(tmp_path))
    with zipfile.ZipFile(packed.path) as archive:
        assert not [n for n in archive.namelist() if n.startswith(SCHEDULER_DIR + "/kazoo/")]
    monkeypatch.setattr(scheduler_side, "package_directory",
                        lambda name: None if name == "addict" else real(name))
    with pytest.raises(ShipError, match="'addict' is not installed"):
        pack_scheduler_side(str(tmp_path))
    assert scheduler_side.package_directory("no_such_package_here") is None


SIDE = "tfmesos-scheduler-0123456789abcdef.zip"


def test_the_scheduler_command(tmp_path):
    sandbox = '"${MESOS_SANDBOX:-$PWD}"'
    tail = ('PYTHONPATH=%s/%s/tfmesos-scheduler"${PYTHONPATH:+:$PYTHONPATH}" exec %%s -m '
            'tfmesos.cli.detached_scheduler %s/detached.json' % (sandbox, SIDE, sandbox))
    # Without site where tfmesos chose the interpreter; the user's as given.
    assert scheduler_command(SIDE) == tail % "python3 -S"
    assert scheduler_command(SIDE, python="/opt/py/bin/python3") == \
        'PATH=/opt/py/bin"${PATH:+:$PATH}" ' + tail % "/opt/py/bin/python3"
    assert scheduler_command(SIDE, python_env=True) == \
        'PATH=%s/bin"${PATH:+:$PATH}" ' % sandbox + tail % (sandbox + "/bin/python3 -S")
    assert scheduler_command(SIDE, python="/opt/py/bin/python3", image="tfmesos/tfmesos") == \
        tail % "python3 -S"
    assert scheduler_command(SIDE, site=True) == tail % "python3"   # a zk:// master's


def test_the_scheduler_command_runs_in_a_shell_with_the_sandbox_first(tmp_path):
    """The command as an agent's shell runs it, the interpreter a script that
    shows what it was given."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$PYTHONPATH" "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    sandbox = tmp_path / "sand box"
    sandbox.mkdir()
    for env, cwd in (({"MESOS_SANDBOX": str(sandbox)}, str(tmp_path)), ({}, str(sandbox))):
        result = subprocess.run(["sh", "-c", scheduler_command(SIDE, python=str(fake))],
                                capture_output=True, text=True, cwd=cwd, timeout=60,
                                env=bare_environment(PYTHONPATH="/elsewhere", **env))
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [
            "%s/%s/tfmesos-scheduler:/elsewhere" % (sandbox, SIDE), "-m",
            "tfmesos.cli.detached_scheduler", "%s/detached.json" % sandbox]


def test_the_scheduler_task_keeps_site_for_a_zookeeper_master_only():
    # kazoo's optional imports (puresasl for SASL) may come from the
    # agent's packages: a zk:// master's scheduler starts with site.
    from tfmesos.core.jobs import Job
    from tfmesos.core.scheduler_task import command_of
    from tfmesos.core.spec import RunSpec
    spec = RunSpec(name="train.py", master="127.0.0.1:5050", jobs=(Job("worker", 1),),
                   mode="replica", command="python train.py")
    assert " exec python3 -S -m tfmesos.cli.detached_scheduler " in command_of(spec, None, SIDE)
    zookeeper = dataclasses.replace(spec, master="zk://127.0.0.1:2181/mesos")
    assert " exec python3 -m tfmesos.cli.detached_scheduler " in command_of(zookeeper, None, SIDE)


def test_the_scheduler_task_starts_without_site_in_tfruns_own_python_not_in_a_users():
    # tfrun's interpreter (the default where the agents are this machine's)
    # takes -S; a --python of the user's may be a wrapper that takes no flags
    ours = scheduler_command(SIDE, python=sys.executable)
    assert " exec %s -S -m tfmesos.cli.detached_scheduler " % shlex.quote(sys.executable) in ours
    theirs = scheduler_command(SIDE, python="/opt/bin/python-wrapper")
    assert " exec /opt/bin/python-wrapper -m tfmesos.cli.detached_scheduler " in theirs
