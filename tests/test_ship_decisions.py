"""``tfrun --ship``'s decisions at pack time: symbolic links, likely
secrets and run directories, each refused (or left out) before anything
launches, naming what to change."""

import json
import os
import subprocess
import tarfile
import time

import pytest
from tfrun_helpers import REPO, tfrun_argv

from mesos_local.containerizer.fetcher import fetch_uris
from tfmesos.exceptions import SpecError
from tfmesos.record.schema import RunFile
from tfmesos.ship import bundle
from tfmesos.ship.bundle import ShipError, ShipSpec

TINY = ["-Cw", "0.1", "-Mw", "64", "-Cs", "0.1", "-Ms", "64"]


def write(root, files):
    for path, text in files.items():
        full = os.path.join(str(root), path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as handle:
            handle.write(text)


def git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture(params=["git", "plain"])
def project(request, tmp_path):
    """A project, as a git work tree (everything committed) or a plain directory."""
    root = tmp_path / "proj"
    write(root, {"train.py": "print('hi')\n", "conf/settings.txt": "lr=0.1\n",
                 "mylib/__init__.py": "ANSWER = 42\n"})
    if request.param == "git":
        git(root, "init", "-q")
    return root


def commit(root):
    if (root / ".git").exists():
        git(root, "add", "-A")


def members(path):
    with tarfile.open(path) as tar:
        return {member.name: member for member in tar.getmembers()}


def packed(root, tmp_path, **options):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return bundle.pack(str(root), str(out), **options)


# -- symbolic links ---------------------------------------------------------------------


@pytest.mark.parametrize("name, target", [("outlink", "/etc/hostname"),
                                          ("sub/up", "../../elsewhere/notes.txt"),
                                          ("escape", "..")])
def test_a_link_leading_out_of_the_project_is_refused_naming_it(project, tmp_path, name,
                                                                target):
    write(tmp_path, {"elsewhere/notes.txt": "outside\n"})
    os.makedirs(os.path.dirname(str(project / name)), exist_ok=True)
    os.symlink(target, str(project / name))
    commit(project)
    with pytest.raises(ShipError) as caught:
        packed(project, tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert "links lead out of it, to what the agents do not have: %s -> %s;" % (name, target) \
        in message
    assert "ship.follow_links=True" in message and "ship.exclude" in message
    # Left out, it is no longer a problem.
    assert packed(project, tmp_path, exclude=(name,)).files == 3


def test_a_link_inside_by_its_words_that_leads_out_through_another_is_refused(project,
                                                                             tmp_path):
    # 'up -> sub/s/..' reads as 'sub'; with 'sub/s -> ..' it is the project's
    # parent: it shipped, and on the agent led out of the sandbox's project.
    os.makedirs(str(project / "sub"))
    os.symlink("..", str(project / "sub" / "s"))
    os.symlink("sub/s/..", str(project / "up"))
    commit(project)
    with pytest.raises(ShipError, match="links lead out of it, to what the agents do not "
                                        "have: up -> sub/s/..;"):
        packed(project, tmp_path)


@pytest.mark.parametrize("change", ["shrinks", "grows"])
def test_a_file_written_while_it_is_packed_is_refused_naming_it(project, tmp_path, monkeypatch,
                                                               change):
    # Listed, then written by another process before its bytes were read: a
    # file that shrank said "cannot read data.bin: unexpected end of data",
    # one that grew shipped cut off at its listed size, without a word.
    data = project / "data.bin"
    data.write_bytes(b"x" * 5000)
    commit(project)
    listed = bundle._tar_infos

    def then_written(members):
        infos = listed(members)
        if change == "shrinks":
            os.truncate(data, 1000)
        else:
            with open(data, "ab") as handle:
                handle.write(b"y" * 5000)
        return infos
    monkeypatch.setattr(bundle, "_tar_infos", then_written)
    with pytest.raises(ShipError, match="data.bin changed while it was packed .*: ship it once "
                                        "it is written, or leave it out"):
        packed(project, tmp_path)


def test_a_link_inside_ships_as_a_link_and_works_after_the_fetch(project, tmp_path):
    os.symlink("conf/settings.txt", str(project / "settings"))
    os.symlink("../mylib", str(project / "conf" / "lib"))     # a directory, via ..
    commit(project)
    made = packed(project, tmp_path)
    found = members(made.path)
    assert found["project/settings"].issym() and \
        found["project/settings"].linkname == "conf/settings.txt"
    assert found["project/conf/lib"].issym() and found["project/conf/lib"].linkname == "../mylib"
    box = tmp_path / "sandbox"
    box.mkdir()
    fetch_uris([{"value": made.path, "extract": True}], str(box))
    assert (box / "project" / "settings").read_text() == "lr=0.1\n"
    assert (box / "project" / "conf" / "lib" / "__init__.py").read_text() == "ANSWER = 42\n"


def test_follow_links_ships_what_an_outside_link_points_to(project, tmp_path):
    write(tmp_path, {"shared/data.txt": "shared data\n", "shared/deep/more.txt": "more\n",
                     "one.txt": "one file\n"})
    os.symlink(str(tmp_path / "one.txt"), str(project / "one"))
    os.symlink(os.path.join("..", "shared"), str(project / "shared"))
    commit(project)
    made = packed(project, tmp_path, follow_links=True)
    found = members(made.path)
    for name in ("project/one", "project/shared/data.txt", "project/shared/deep/more.txt"):
        assert found[name].isreg(), name
    box = tmp_path / "sandbox"
    box.mkdir()
    fetch_uris([{"value": made.path, "extract": True}], str(box))
    assert (box / "project" / "one").read_text() == "one file\n"
    assert (box / "project" / "shared" / "deep" / "more.txt").read_text() == "more\n"
    assert made.files == 6 and made.size == sum(len(text) for text in (
        "print('hi')\n", "lr=0.1\n", "ANSWER = 42\n", "one file\n", "shared data\n", "more\n"))


def test_links_inside_a_followed_directory(tmp_path):
    root = tmp_path / "proj"
    write(root, {"a.py": "", "../outside/b.txt": "b\n", "../elsewhere/c.txt": "c\n"})
    os.symlink("b.txt", str(tmp_path / "outside" / "same"))           # stays inside: a link
    os.symlink("../elsewhere", str(tmp_path / "outside" / "other"))   # out of it: followed
    os.symlink(str(tmp_path / "outside"), str(root / "outside"))
    found = members(packed(root, tmp_path, follow_links=True).path)
    assert sorted(found) == ["project", "project/a.py", "project/outside/b.txt",
                             "project/outside/other/c.txt", "project/outside/same"]
    assert found["project/outside/same"].issym() and found["project/outside/other/c.txt"].isreg()
    # A link back to a directory being followed would never end: refused, named.
    os.symlink(str(tmp_path / "outside"), str(tmp_path / "outside" / "again"))
    with pytest.raises(ShipError, match="outside/again -> %s loops back" % (tmp_path / "outside")):
        packed(root, tmp_path, follow_links=True)


# -- likely secrets ------------------------------------------------------------------------

SECRETS = [(".env", ".env"), (".env.production", ".env.production"),
           ("deploy/id_rsa", "deploy/id_rsa"), ("id_ed25519", "id_ed25519"),
           ("certs/server.pem", "certs/server.pem"), ("tls.key", "tls.key"),
           ("client.p12", "client.p12"), (".ssh/config", ".ssh/"),
           (".netrc", ".netrc"), (".aws/credentials", ".aws/"),
           (".git-credentials", ".git-credentials"), (".pypirc", ".pypirc"),
           (".docker/config.json", ".docker/config.json")]


@pytest.mark.parametrize("path, named", SECRETS)
def test_a_likely_secret_is_refused_naming_it(project, tmp_path, path, named):
    write(project, {path: "secret\n"})
    commit(project)
    with pytest.raises(ShipError) as caught:
        packed(project, tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "likely secrets" in message
    assert ": %s;" % named in message
    assert "ship.exclude" in message and "ship.allow_secrets=True" in message
    allowed = packed(project, tmp_path, allow_secrets=True)
    assert "project/" + path in members(allowed.path)
    excluded = packed(project, tmp_path, exclude=(named.rstrip("/"),))
    assert "project/" + path not in members(excluded.path)


def test_secrets_found_are_named_together_and_lookalikes_pass(tmp_path):
    root = tmp_path / "proj"
    write(root, {"a.py": "", ".env": "", ".ssh/id_rsa": "", ".ssh/known_hosts": "",
                 "keys/b.key": "", "c.pem": "", "d.p12": "", "e.key": "", "f.key": "",
                 "id_rsa.pub": "", ".env.example": "", "docker/config.json": "",
                 "keyboard.py": "", "environment.yml": ""})
    with pytest.raises(ShipError) as caught:
        packed(root, tmp_path)
    assert ": .env, .ssh/, c.pem, d.p12, e.key and 2 more;" in str(caught.value)
    kept = bundle.list_files(str(root), exclude=(".env", ".ssh", "*.key", "*.pem", "*.p12"))
    assert kept == [".env.example", "a.py", "docker/config.json", "environment.yml",
                    "id_rsa.pub", "keyboard.py"]


def test_what_a_followed_link_reaches_is_checked_for_secrets_where_it_is(tmp_path):
    root = tmp_path / "proj"
    write(root, {"a.py": "", "../home/.aws/credentials": "key\n", "../home/.netrc": "x\n"})
    os.symlink(str(tmp_path / "home" / ".aws" / "credentials"), str(root / "creds"))
    os.symlink(os.path.join("..", "home"), str(root / "home"))
    with pytest.raises(ShipError, match=": creds, home/.aws/, home/.netrc;"):
        packed(root, tmp_path, follow_links=True)
    assert members(packed(root, tmp_path, follow_links=True, allow_secrets=True).path)[
        "project/creds"].isreg()


# -- run directories ---------------------------------------------------------------------


# An earlier run's record (record/run_record.py writes these).
RUN_JSON = json.dumps(RunFile(run_id="0badcafe", name="tfrun", mode="replica").to_dict())


def test_run_directories_are_never_shipped(project, tmp_path):
    write(project, {"logs/run1/run.json": "{}", "logs/run1/worker.0.stderr": "old\n",
                    "nested/tfmesos-runs/r/run.json": "{}", "runs/r2/run.json": "{}",
                    "old/exp1/run.json": RUN_JSON, "old/exp1/worker.0.stdout": "old\n"})
    commit(project)
    made = packed(project, tmp_path, leave_out=(str(project / "logs"),
                                                 str(tmp_path / "not-inside"),
                                                 os.path.relpath(str(project / "runs"))))
    assert sorted(members(made.path)) == ["project", "project/conf/settings.txt",
                                          "project/mylib/__init__.py", "project/train.py"]


def test_a_run_json_nested_past_the_parsers_depth_is_no_run_record_and_is_shipped(project,
                                                                                  tmp_path):
    # A project may hold any file named run.json (a collaborator's, a data
    # set's); one nested that deep ended tfrun --ship in a RecursionError.
    write(project, {"data/run.json": "[" * 100000 + "]" * 100000})
    commit(project)
    made = packed(project, tmp_path)
    assert "project/data/run.json" in members(made.path)


# -- the options ------------------------------------------------------------------------------


def test_tfrun_options_make_the_ship_spec(tmp_path):
    from tfmesos.cli import tfrun_options as tfrun
    from tfmesos.cli.tfrun_values import ship_spec

    args = tfrun.build_parser().parse_options(["--ship", str(tmp_path), "--ship-follow-links",
                                               "--ship-allow-secrets"])
    spec = ship_spec(args)
    assert (spec.follow_links, spec.allow_secrets) == (True, True)
    assert ShipSpec(str(tmp_path)) == ShipSpec(str(tmp_path), follow_links=False,
                                               allow_secrets=False)
    for option in ("--ship-follow-links", "--ship-allow-secrets"):
        with pytest.raises(SpecError, match="%s needs --ship" % option):
            ship_spec(tfrun.build_parser().parse_options([option]))
    assert "--ship-follow-links" in tfrun.build_parser().format_help()
    assert "--ship-allow-secrets" in tfrun.build_parser().format_help()


def run_tfrun_in(cwd, *args, timeout=120, env=None):
    env = dict(os.environ, MESOS_MASTER="", **(env or {}),
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    try:
        return subprocess.run(tfrun_argv(*args), cwd=str(cwd), env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail("tfrun %s did not finish in %d s: %s" % (args, timeout, exc.stderr))


def test_tfrun_refuses_a_link_out_and_a_secret_before_anything_launches(tmp_path):
    root = tmp_path / "proj"
    write(root, {"train.py": "print(1)\n", ".env": "TOKEN=1\n"})
    os.symlink("/etc/hostname", str(root / "outlink"))
    started = time.monotonic()
    result = run_tfrun_in(root, "--ship", "-w", "1", "-s", "0", *TINY, "--run-dir",
                          str(tmp_path / "run"), "--", "python", "train.py")
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith(
        "tfrun: error: --ship %s: links lead out of it, to what the agents do not have: "
        "outlink -> /etc/hostname;" % root), errors
    assert "Traceback" not in result.stderr and "cluster ready" not in result.stderr
    result = run_tfrun_in(root, "--ship", "--ship-exclude", "outlink", "-w", "1", "-s", "0",
                          *TINY, "--run-dir", str(tmp_path / "run"), "--", "python", "train.py")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "likely secrets would go to every task: .env;" in errors[0]
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("where", ["default", "given"])
def test_a_refused_ship_is_one_line_and_leaves_no_run_record(tmp_path, where):
    # Nothing ran: no "logs and run record:" line, no aborted run in tfmesos runs.
    root, runs = tmp_path / "proj", tmp_path / "runs"
    write(root, {"train.py": "print(1)\n", ".env": "TOKEN=1\n"})
    given = ["--run-dir", str(runs / "mine")] if where == "given" else []
    result = run_tfrun_in(root, "--ship", "-w", "1", "-s", "0", *TINY, *given, "--", "python",
                          "train.py", env={"TFMESOS_RUNS_DIR": str(runs)})
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("tfrun: error: --ship %s: likely secrets would go to every task: "
                           ".env;" % root), line
    if where == "given":   # the directory asked for, made for the run, goes with it
        assert not (runs / "mine").exists()
    else:
        assert not runs.exists() or os.listdir(runs) == [], os.listdir(runs)


def test_tfrun_ships_neither_its_run_directory_nor_earlier_runs(tmp_path):
    root = tmp_path / "proj"
    write(root, {"ls.py": "import os\nprint('shipped', sorted(os.path.join(d, f)[2:] for d, _, "
                          "files in os.walk('.') for f in files))\n",
                 "out/earlier/worker.0.stdout": "an earlier run's log\n",
                 "out/earlier/run.json": RUN_JSON, "out/config/run.json": "{}",
                 "runs/x/run.json": "{}"})
    result = run_tfrun_in(root, "--ship", "-w", "1", "-s", "0", *TINY, "--run-dir", "out/now",
                          "--", "python", "ls.py",
                          env={"TFMESOS_RUNS_DIR": str(root / "runs")})
    assert result.returncode == 0, result.stderr
    # out/now: this run's; out/earlier: a run directory; runs: $TFMESOS_RUNS_DIR
    assert "[worker:0] shipped ['ls.py', 'out/config/run.json']" in result.stdout.splitlines()
    assert (root / "out" / "now" / "run.json").exists()
