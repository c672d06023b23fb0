"""Serving what a Shipment already packed (``Shipment.packed_files``,
``Shipment.from_packed``): the detached scheduler and ``tfmesos attach``
hand the tasks the very files the submitter packed, under the same names,
with the same TaskInfo parts, and refuse files that changed."""

import io
import os
import re
import shutil
import tarfile
import urllib.request

import pytest

from tfmesos.ship.bundle import ShipError, ShipSpec, file_sha256
from tfmesos.ship.reproducible_zip import write_zip
from tfmesos.ship.shipping import Shipment

HOST = "127.0.0.1"
QUIET = {"say": lambda text: None}
COMMANDS = ({}, {"python": "/opt/py/bin/python3"}, {"python": "venv/bin/python"},
            {"image": "tfmesos/tfmesos", "python": "/opt/py/bin/python3"})


def write(root, files):
    for path, text in files.items():
        full = os.path.join(str(root), path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as handle:
            handle.write(text)


def tar_gz(path, members):
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def original(tmp_path):
    """A Shipment of a real directory with a local --python-env and two extra
    files (one content-addressed, as tfmesos.run's function is), stopped at
    the end."""
    project = tmp_path / "proj"
    write(project, {"train.py": "print('hi')\n", "lib/util.py": "X = 1\n",
                    "data.bin": "\x00\x01" * 5000})
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    env = tar_gz(str(inputs / "tfenv.tar.gz"), {"bin/python3": b"#!/bin/sh\n"})
    function, function_name, _, _ = write_zip([("meta.json", b"{}")], str(inputs),
                                              "tfmesos-function")
    notes = inputs / "notes.txt"
    notes.write_text("extra\n")
    spec = ShipSpec(str(project), python_env=env,
                    extra_files=((function_name, function), ("notes.txt", str(notes))))
    shipment = Shipment(spec, bind_host=HOST, **QUIET)
    yield shipment
    shipment.stop()


def copies(files, where):
    """``files`` (role -> path) copied into ``where``, each under its name."""
    os.makedirs(where, exist_ok=True)
    copied = {}
    for role, path in files.items():
        if path is None:
            copied[role] = None
            continue
        target = os.path.join(where, os.path.basename(path))
        shutil.copyfile(path, target)
        copied[role] = target
    return copied


def relative(uris, shipment):
    """``uris`` with the server's address and secret path taken out."""
    prefix = re.escape("http://%s:%d/%s/" % (HOST, shipment.server.port, shipment.server.token))
    return [dict(uri, value=re.sub("^" + prefix, "SERVED/", uri["value"])) for uri in uris]


def get(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


def test_packed_files_name_every_file_by_role(original):
    files = original.packed_files()
    assert list(files) == ["bundle", "task_side", "extra:" + original.extra_files[0][0],
                           "extra:notes.txt", "python_env"]
    assert files["bundle"] == original.bundle.path
    assert files["task_side"] == original.task_side.path
    assert files["python_env"] == original.spec.python_env
    assert all(os.path.isfile(path) for path in files.values())


def test_a_shipment_from_the_packed_files_gives_the_tasks_the_same(original, tmp_path):
    files = copies(original.packed_files(), str(tmp_path / "sandbox"))
    said = []
    again = Shipment.from_packed(None, files, bind_host=HOST, say=said.append,
                                 recorded=original.record())
    try:
        assert relative(again.uris(HOST), again) == relative(original.uris(HOST), original)
        assert again.environment() == original.environment() != {}
        for options in COMMANDS:
            assert again.command(**options) == original.command(**options)
        assert again.record() == original.record()
        assert again.record()["bundle"]["files"] == 3
        assert again.packed_files() == files
        assert len(said) == 1 and original.bundle.name in said[0]
        # What each URL serves: byte for byte the original's file.
        for mine, theirs in zip(again.uris(HOST), original.uris(HOST)):
            assert get(mine["value"]) == get(theirs["value"])
        assert again.server.token != original.server.token
    finally:
        again.stop()
    assert all(os.path.isfile(path) for path in files.values())   # not its to remove
    with pytest.raises(OSError):
        get(again.uris(HOST)[0]["value"])                           # nothing served after


def test_without_the_record_the_files_say_what_they_can(original, tmp_path):
    files = copies(original.packed_files(), str(tmp_path / "sandbox"))
    again = Shipment.from_packed(None, files, bind_host=HOST, **QUIET)
    try:
        assert relative(again.uris(HOST), again) == relative(original.uris(HOST), original)
        assert again.environment() == original.environment()
        assert again.command() == original.command()
        record = again.record()
        assert (record["bundle"]["sha256"], record["bundle"]["name"]) == (
            original.bundle.sha256, original.bundle.name)
        assert record["task_side"] == original.task_side.name
        assert record["python_env"] == files["python_env"]
    finally:
        again.stop()


def test_a_url_python_env_and_no_bundle(tmp_path):
    url = "https://repo.example.com/envs/tf.tar.gz"
    shipment = Shipment(ShipSpec(None, python_env=url), bind_host=HOST, **QUIET)
    try:
        files = shipment.packed_files()
        assert files == {"bundle": None, "task_side": shipment.task_side.path,
                         "python_env": None}
        for spec, recorded in ((None, shipment.record()), (ShipSpec(None, python_env=url),
                                                           None)):
            again = Shipment.from_packed(spec, copies(files, str(tmp_path / "copy")),
                                         bind_host=HOST, recorded=recorded, **QUIET)
            try:
                assert relative(again.uris(HOST), again) == relative(shipment.uris(HOST),
                                                                     shipment)
                assert again.uris(HOST)[-1] == {"value": url, "extract": True, "cache": True}
                assert again.environment() == {}
                assert again.command() == shipment.command()
                assert again.record() == shipment.record()
            finally:
                again.stop()
    finally:
        shipment.stop()


def tampered(path):
    with open(path, "r+b") as handle:
        handle.seek(os.path.getsize(path) // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("role", ["bundle", "task_side", "function"])
def test_a_changed_content_addressed_file_is_refused(original, tmp_path, role):
    files = copies(original.packed_files(), str(tmp_path / "sandbox"))
    if role == "function":
        role = "extra:" + original.extra_files[0][0]
    tampered(files[role])
    with pytest.raises(ShipError) as error:
        Shipment.from_packed(None, files, bind_host=HOST, recorded=original.record(), **QUIET)
    message = str(error.value)
    assert "\n" not in message and os.path.basename(files[role]) in message
    assert "has sha256 %s, not the one its name says" % file_sha256(files[role]) in message


def test_files_that_are_not_the_runs_are_refused(original, tmp_path):
    files = copies(original.packed_files(), str(tmp_path / "sandbox"))
    recorded = original.record()
    other_project = tmp_path / "other"
    write(other_project, {"other.py": "pass\n"})
    other = Shipment(ShipSpec(str(other_project)), bind_host=HOST, **QUIET)
    try:
        wrong = dict(files, bundle=copies({"b": other.bundle.path}, str(tmp_path / "o"))["b"])
        with pytest.raises(ShipError, match="but the run shipped %s" % original.bundle.name):
            Shipment.from_packed(None, wrong, bind_host=HOST, recorded=recorded, **QUIET)
    finally:
        other.stop()
    renamed = os.path.join(str(tmp_path), "my-bundle.tar.gz")
    shutil.copyfile(files["bundle"], renamed)
    cases = [
        (dict(files, bundle=renamed), "my-bundle.tar.gz is not a name tfrun --ship packs"),
        (dict(files, bundle=None), "shipped the bundle %s, but no file" % original.bundle.name),
        ({k: v for k, v in files.items() if k != "task_side"}, "task side zip .* is missing"),
        (dict(files, python_env=None), "shipped --python-env .*tfenv.tar.gz, but no file"),
        (dict(files, extras=files["bundle"]), "unknown role 'extras'"),
        (dict(files, **{"extra:../x": files["bundle"]}), "a plain file name"),
        (dict(files, python_env=str(tmp_path / "gone.tar.gz")), "gone.tar.gz: no such file"),
        (dict(files, bundle=str(tmp_path / "tfmesos-bundle-0123456789abcdef.tar.gz")),
         "cannot read"),
    ]
    for given, refusal in cases:
        with pytest.raises(ShipError, match=refusal):
            Shipment.from_packed(None, given, bind_host=HOST, recorded=recorded, **QUIET)
    with pytest.raises(ShipError, match="the task side is"):
        Shipment.from_packed(None, files, bind_host=HOST, recorded=dict(
            recorded, task_side="tfmesos-task-0000000000000000.zip"), **QUIET)


def test_a_run_that_may_be_taken_over_keeps_what_it_packed_until_it_stops(tmp_path):
    # tfrun --failover: packed into the run directory, not a temporary one;
    # left to its tasks (stop(keep=True)) the files stay for the scheduler
    # that takes the run over, which serves them and removes them once the
    # run is stopped.
    write(tmp_path / "proj", {"train.py": "print('hi')\n"})
    kept = tmp_path / "run" / "shipped"
    shipment = Shipment(ShipSpec(str(tmp_path / "proj")), bind_host=HOST, keep_in=str(kept),
                        **QUIET)
    files = {role: path for role, path in shipment.packed_files().items() if path}
    assert sorted(files) == ["bundle", "task_side"]
    assert {os.path.dirname(path) for path in files.values()} == {str(kept)}
    assert oct(os.stat(kept).st_mode & 0o777) == "0o700"
    recorded = shipment.record()
    shipment.stop(keep=True)
    assert all(os.path.isfile(path) for path in files.values())
    again = Shipment.from_packed(None, files, bind_host=HOST, recorded=recorded,
                                 keep_in=str(kept), **QUIET)
    assert get(again.server.url(HOST, again.bundle.name)) == open(files["bundle"], "rb").read()
    again.stop(keep=True)
    assert all(os.path.isfile(path) for path in files.values())
    last = Shipment.from_packed(None, files, bind_host=HOST, recorded=recorded,
                                keep_in=str(kept), **QUIET)
    last.stop()
    assert not kept.exists() and (tmp_path / "run").is_dir()


def test_an_ordinary_run_packs_into_a_temporary_directory_it_always_removes(tmp_path):
    write(tmp_path / "proj", {"train.py": "print('hi')\n"})
    shipment = Shipment(ShipSpec(str(tmp_path / "proj")), bind_host=HOST, **QUIET)
    work = os.path.dirname(shipment.bundle.path)
    assert os.path.basename(work).startswith("tfmesos-ship-")
    shipment.stop(keep=True)   # nothing can take an ordinary run over
    assert not os.path.exists(work)


def test_a_bundle_packed_before_bundles_were_plain_tars_is_still_served(tmp_path):
    # A run taken over (attach, a detached scheduler) serves what its
    # submitter packed: before issue 33 a .tar.gz. Its name still checks.
    from tfmesos.ship.shipping import _packed_bundle
    old = tar_gz(str(tmp_path / "old.tar.gz"), {"project/train.py": b"print('hi')\n"})
    sha = file_sha256(old)
    named = str(tmp_path / ("tfmesos-bundle-%s.tar.gz" % sha[:16]))
    os.rename(old, named)
    assert _packed_bundle(named, None).sha256 == sha
    plain = str(tmp_path / ("tfmesos-bundle-%s.tar" % sha[:16]))
    shutil.copyfile(named, plain)
    assert _packed_bundle(plain, None).sha256 == sha
    with pytest.raises(ShipError, match="not the one its name says"):
        _packed_bundle(str(tmp_path / ("tfmesos-bundle-%s.tar" % ("0" * 16))), None,
                       hashed={str(tmp_path / ("tfmesos-bundle-%s.tar" % ("0" * 16))): sha})


def test_a_python_env_that_changed_since_the_run_started_is_no_takeover(original):
    # tfmesos attach hashed the --python-env archive where the user keeps
    # it and gave the tasks that new digest: one swapped there (anyone who
    # may write it: a team's environment) ran as the run's user in every
    # task relaunched after the takeover. The run's identity holds the
    # digest it started with.
    from tfmesos.core.identity import RunIdentity
    from tfmesos.core.takeover import check_kept
    from tfmesos.record.takeover_files import TakeoverError

    files = original.packed_files()
    env = files["python_env"]
    assert original.env_sha256 == file_sha256(env)
    identity = RunIdentity.new("alice").with_framework("F-1").with_shipment(
        original.bundle.sha256, original.task_side.sha256, original.env_sha256)
    kept = {role: path for role, path in files.items() if role in ("bundle", "task_side")}
    kept_dir = os.path.dirname(files["bundle"])
    assert check_kept(identity, dict(kept, python_env=env), kept_dir)[env] == original.env_sha256
    tar_gz(env, {"bin/python3": b"#!/bin/sh\ntouch /tmp/pwned\n"})
    with pytest.raises(TakeoverError) as refused:
        check_kept(identity, dict(kept, python_env=env), kept_dir)
    assert original.env_sha256 in str(refused.value) and file_sha256(env) in str(refused.value)
    assert "Python environment" in str(refused.value)
    # A run that started with no archive's digest takes none over.
    with pytest.raises(TakeoverError, match="no Python environment"):
        check_kept(identity.with_shipment(original.bundle.sha256, original.task_side.sha256),
                   dict(kept, python_env=env), kept_dir)


@pytest.mark.parametrize("name", ["bob's env.tar.gz", "env?.TGZ", "a\\b.zip"])
def test_a_python_env_is_served_under_a_name_a_uri_may_hold(tmp_path, name):
    # An archive named bob's-env.tar.gz was served under its own name: the
    # URI held a quote, Mesos' fetcher (Fetcher::basename) refused it,
    # "Illegal characters in URI", and every task failed three times.
    from mesos_local.containerizer.fetcher import basename

    project = tmp_path / "proj"
    write(project, {"train.py": "print('hi')\n"})
    env = tar_gz(str(tmp_path / name), {"bin/python3": b"#!/bin/sh\n"})
    shipment = Shipment(ShipSpec(str(project), python_env=env), bind_host=HOST, **QUIET)
    try:
        [uri] = [uri["value"] for uri in shipment.uris(HOST) if "python-env" in uri["value"]]
        suffix = ".tgz" if name.endswith(".TGZ") else name[name.index("."):]
        assert uri.endswith("/python-env" + suffix), uri
        assert basename(uri) == "python-env" + suffix
        assert get(uri) == open(env, "rb").read()
    finally:
        shipment.stop()

