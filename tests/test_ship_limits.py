"""``--ship``'s limits: what cannot be read is refused, never left out in
silence; one line for every path that cannot be looked at."""

import os
import shutil
import subprocess
import sys
import tarfile
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
    packed = bundle.pack(sys.argv[2], sys.argv[3], exclude=tuple(sys.argv[4:]))
except bundle.ShipError as exc:
    print("refused:", exc)
else:
    print("shipped:", bundle.list_files(sys.argv[2], tuple(sys.argv[4:])))
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

    def pack_as_nobody(*exclude):
        result = subprocess.run([BARE_PYTHON, "-S", "-c", PACK_AS_USER, REPO, project, out,
                                 *exclude],
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
    # Left out, it is not read: git's listing said it could not open it
    # (refused all the same, before ship.exclude was applied), the walk
    # never went in.
    assert pack_as_nobody("pkg") == "shipped: ['a.txt']"
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


# -- the size limit: the archive's bytes --------------------------------------------------


def tiny_files(root, count, data="x", per_directory=None):
    for index in range(count):
        folder = "" if per_directory is None else "d%03d/" % (index // per_directory)
        write(root, {"%sf%05d" % (folder, index): data})


def test_the_limit_is_the_archive_s_exact_size_as_tar_lays_it_out(tmp_path):
    root, out = tmp_path / "p", tmp_path / "out"
    out.mkdir()
    long_name = "n" * 150
    write(root, {"empty": "", "block": b"b" * 512, "block+1": b"b" * 513,
                 long_name: "long name\n", "deep/" + "/".join(["d" * 60] * 5) + "/x": "deep\n",
                 "caf\u00e9.txt": "accent\n", "sub/data.bin": os.urandom(70000)})
    os.symlink("../" + long_name, str(root / "sub" / ("l" * 120)))
    os.link(str(root / "sub" / "data.bin"), str(root / "hard.bin"))
    real = bundle.pack(str(root), str(out), max_size=None).archive_size
    assert bundle.pack(str(root), str(out), max_size=real).archive_size == real
    with pytest.raises(ShipError) as caught:
        bundle.pack(str(root), str(out), max_size=real - 1)
    assert str(caught.value).startswith("ship.directory=%s: %s is over ship.max_size="
                                        % (root, bundle.human_size(real)))


def test_the_bound_packing_looks_at_first_is_never_under_the_exact_size(tmp_path):
    # Below the bound, pack builds no header twice; it must never let an
    # archive over the limit through.
    root, out = tmp_path / "p", tmp_path / "out"
    out.mkdir()
    names = ["a", "caf\u00e9" * 20, "x" * 200, "\udcff" * 30 if os.name == "posix" else "y"]
    files = {}
    for index, name in enumerate(names * 5):
        folder = "/".join(["d" * 60] * (index % 4))
        files["%s/%s%d" % (folder, name, index) if folder else name + str(index)] = \
            b"z" * [0, 1, 511, 512, 513, 5000][index % 6]
    write(root, files)
    os.symlink("l" * 150, str(root / "link"))
    packed = bundle.pack(str(root), str(out), max_size=None)
    infos = bundle._tar_infos(bundle.select(str(root), ()))
    top = bundle._directory_entry(bundle.TOP, os.stat(str(root)))
    exact = bundle.archive_size(infos, top)
    assert exact == packed.archive_size
    assert exact <= bundle.archive_bound(infos, top) <= exact * 2


def test_a_small_file_takes_a_header_and_its_content_and_no_pax_header(tmp_path):
    # With gettarinfo's fractional mtimes every member had a pax header
    # holding the fraction: a one-byte file took 2 kB of the archive, and a
    # project of small sources shipped twice its size. Whole seconds, as a
    # task's Python compares them (.pyc) and tar shows them.
    root, out = tmp_path / "p", tmp_path / "out"
    out.mkdir()
    tiny_files(root, 10)
    os.utime(str(root / "f00003"), (1.7e9 + 0.75, 1.7e9 + 0.75))
    packed = bundle.pack(str(root), str(out), max_size=None)
    # the top directory's header, 10 x (a header and a block of content), the end blocks
    assert packed.archive_size == tarfile.RECORDSIZE * -(-(512 + 10 * 1024 + 1024)
                                                         // tarfile.RECORDSIZE)
    with tarfile.open(packed.path) as archive:
        assert archive.getmember("project/f00003").mtime == 1700000000
        assert not any(member.pax_headers for member in archive.getmembers())


def test_each_member_takes_at_least_what_the_walk_counts_it_for(tmp_path):
    root, out = tmp_path / "p", tmp_path / "out"
    out.mkdir()
    tiny_files(root, 20, data="")
    for index in range(5):
        os.symlink("f%05d" % index, str(root / ("l%d" % index)))
    packed = bundle.pack(str(root), str(out), max_size=None)
    assert packed.archive_size >= 25 * bundle.MEMBER_AT_LEAST


def test_many_small_files_are_refused_for_their_archive_not_their_content(tmp_path):
    root = tmp_path / "p"
    tiny_files(root, 300)
    with pytest.raises(ShipError) as caught:
        bundle.pack(str(root), str(tmp_path), max_size=200 * 1000)
    assert str(caught.value) == (
        "ship.directory=%s: 317.4 kB (the archive of 300 files of 300 bytes in all: each takes "
        "at least 512 bytes in it) is over ship.max_size=200.0 kB; biggest: f00000 (1 byte), "
        "f00001 (1 byte), f00002 (1 byte), f00003 (1 byte), f00004 (1 byte) (drop them with "
        "ship.exclude or .gitignore, or read large data from shared storage)" % root)


@pytest.mark.parametrize("kind", ["plain", "git"])
def test_a_tree_past_the_limit_is_refused_before_it_is_all_walked(tmp_path, monkeypatch, kind):
    root = tmp_path / "p"
    tiny_files(root, 1200, per_directory=40)
    tiny_files(root / "data", 1200, per_directory=40)
    if kind == "git":
        git(root, "init", "-q")
    listed = []
    real_scandir, real_lstat = os.scandir, os.lstat

    def scandir(path="."):
        listed.append(path)
        return real_scandir(path)

    def lstat(path, *args, **kwargs):
        listed.append(path)
        return real_lstat(path, *args, **kwargs)
    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "lstat", lstat)
    with pytest.raises(ShipError) as caught:
        bundle.pack(str(root), str(tmp_path), max_size=150 * bundle.MEMBER_AT_LEAST)
    assert str(caught.value) == (
        "ship.directory=%s: more than 150 files, each at least 512 bytes in the archive, are "
        "over ship.max_size=76.8 kB: leave them out with ship.exclude or .gitignore, or read large "
        "data from shared storage" % root)
    assert len(listed) < 200
    # What is left out is not walked, nor counted.
    listed.clear()
    packed = bundle.pack(str(root), str(tmp_path), exclude=("d0*",), max_size=None)
    assert packed.files == 0 and not [path for path in listed if "/data/" in str(path)]


def test_the_summary_and_the_warning_say_the_archive_s_size(tmp_path, monkeypatch):
    from tfmesos.ship import shipping
    root = tmp_path / "p"
    tiny_files(root, 1500)
    said = []
    monkeypatch.setattr(shipping, "WARN_SIZE", 1000 * 1000)
    shipment = shipping.Shipment(bundle.ShipSpec(str(root)), bind_host="127.0.0.1",
                                 say=said.append)
    shipment.stop()
    assert said == ["shipped 1500 files, 1.5 kB (a 1.5 MB archive) from %s" % root,
                    "warning: the bundle is 1.5 MB and every task downloads it: keep data out "
                    "of it (--ship-exclude, .gitignore) and read it from shared storage"]


# -- file names in messages -------------------------------------------------------------


EVIL = "x\n\x1b[2Jevil"


def shown(text):
    """What a message must show of ``text``: its control characters escaped."""
    return text.replace("\n", "\\n").replace("\x1b", "\\x1b")


def assert_escaped(message):
    assert "\n" not in message and "\x1b" not in message, repr(message)


def test_names_in_refusals_are_escaped(tmp_path):
    root = tmp_path / ("p" + EVIL)
    root.mkdir()
    os.symlink("/etc/passwd", str(root / EVIL))
    with pytest.raises(ShipError) as caught:
        bundle.pack(str(root), str(tmp_path))
    assert_escaped(str(caught.value))
    assert "%s -> /etc/passwd" % shown(EVIL) in str(caught.value)
    assert "ship.directory=%s:" % shown(str(root)) in str(caught.value)
    os.unlink(str(root / EVIL))
    write(root, {"id_rsa\nfoo\x1b[0m": "key"})
    with pytest.raises(ShipError) as caught:
        bundle.pack(str(root), str(tmp_path))
    assert_escaped(str(caught.value))
    assert "every task: id_rsa\\nfoo\\x1b[0m;" in str(caught.value)
    os.unlink(str(root / "id_rsa\nfoo\x1b[0m"))
    write(root, {EVIL + ".bin": "x" * 40000})
    with pytest.raises(ShipError) as caught:
        bundle.pack(str(root), str(tmp_path), max_size=30000)
    assert_escaped(str(caught.value))
    assert "biggest: %s.bin (40.0 kB)" % shown(EVIL) in str(caught.value)
    packed = bundle.pack(str(root), str(tmp_path))
    assert_escaped(packed.summary())


def test_a_name_that_cannot_be_read_is_escaped(tmp_path, monkeypatch):
    write(tmp_path, {"a.txt": "hi\n"})
    os.symlink("a.txt", str(tmp_path / EVIL))

    def readlink(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(os, "readlink", readlink)
    with pytest.raises(ShipError) as caught:
        bundle.pack(str(tmp_path), str(tmp_path))
    assert str(caught.value) == "ship.directory: cannot read %s: Permission denied" % shown(EVIL)


def test_tfrun_s_refusal_of_a_name_is_one_escaped_line(tmp_path):
    root = tmp_path / "s3"
    root.mkdir()
    os.symlink("/etc/passwd", str(root / EVIL))
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_RUNS_DIR=str(tmp_path / "runs"),
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-m", "tfmesos.cli.tfrun", "--ship", str(root),
                             "-w", "1", "-s", "0", "--", "true"], capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "\x1b" not in result.stderr, result.stderr
    assert "%s -> /etc/passwd" % shown(EVIL) in errors[0]


# -- likely secrets -----------------------------------------------------------------------


@pytest.mark.parametrize("path", [
    "etc/shadow", "etc/gshadow", "etc/shadow-", "etc/ssh/ssh_host_ed25519_key",
    "etc/ssh/ssh_host_rsa_key", "home/.config/gcloud/credentials.db",
    ".config/gcloud/access_tokens.db", ".config/gcloud/application_default_credentials.json",
    ".npmrc", "web/.npmrc", ".config/gh/hosts.yml"])
def test_system_and_tool_credentials_are_likely_secrets(path):
    from tfmesos.ship.likely_secrets import likely_secret
    assert likely_secret(path) == path


@pytest.mark.parametrize("path", ["etc/ssh/ssh_host_ed25519_key.pub", "etc/ssh/sshd_config",
                                  "shadow.py", "etc/passwd", "gh/hosts.yml"])
def test_their_neighbours_are_not(path):
    from tfmesos.ship.likely_secrets import likely_secret
    assert likely_secret(path) is None


def test_a_followed_link_to_etc_shadow_is_refused(tmp_path):
    if not os.path.exists("/etc/shadow"):
        pytest.skip("no /etc/shadow here")
    root = tmp_path / "p"
    write(root, {"a.py": ""})
    os.symlink("/etc/shadow", str(root / "passwords"))
    with pytest.raises(ShipError) as caught:
        bundle.pack(str(root), str(tmp_path), follow_links=True)
    assert "likely secrets would go to every task: passwords;" in str(caught.value)


@pytest.mark.parametrize("shipped, name", [("etc", "shadow"), ("etc/ssh", "ssh_host_rsa_key"),
                                           ("home/.config/gh", "hosts.yml"),
                                           ("home/.kube", "config")])
def test_a_secret_is_found_where_the_shipped_directory_really_is(tmp_path, shipped, name):
    write(tmp_path, {"%s/%s" % (shipped, name): "secret\n", "%s/notes.txt" % shipped: ""})
    with pytest.raises(ShipError) as caught:
        bundle.pack(str(tmp_path / shipped), str(tmp_path))
    assert "likely secrets would go to every task: %s;" % name in str(caught.value)
    packed = bundle.pack(str(tmp_path / shipped), str(tmp_path), exclude=(name,))
    assert packed.files == 1


# -- what the caller gave ---------------------------------------------------------------


def test_a_file_given_to_ship_is_said_to_be_a_file(tmp_path):
    from tfmesos.exceptions import SpecError
    write(tmp_path, {"api1.py": "print(1)\n"})
    with pytest.raises(SpecError) as caught:
        bundle.ShipSpec(str(tmp_path / "api1.py"))
    assert str(caught.value) == ("ship.directory=%s: a file, not a directory: ship the directory "
                                 "it is in" % (tmp_path / "api1.py"))
    with pytest.raises(SpecError) as caught:
        bundle.ShipSpec(str(tmp_path / "nothing"))
    assert str(caught.value).endswith(": no such directory")


def test_run_s_ship_that_is_no_path_is_one_line_naming_it(tmp_path, monkeypatch):
    import tfmesos
    from tfmesos.exceptions import SpecError
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "runs"))
    with pytest.raises(SpecError) as caught:
        tfmesos.run(len, ship=42)
    assert str(caught.value) == "ship is a directory's path, got 42"


def test_fifos_and_sockets_left_out_are_said(tmp_path):
    import socket
    root = tmp_path / "p"
    write(root, {"a.txt": "hi\n"})
    os.mkfifo(str(root / "fifo"))
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(root / "sock"))
        packed = bundle.pack(str(root), str(tmp_path))
    finally:
        server.close()
    assert packed.files == 1
    assert packed.summary() == ("shipped 1 file, 3 bytes from %s; left out 2 that are neither a "
                                "file, a link nor a directory: fifo, sock" % root)


def test_files_ship_exclude_leaves_out_do_not_count_toward_the_early_stop(tmp_path):
    # 200 excluded files in a project of one: "more than 150 files ... leave
    # them out with ship.exclude", which they were (git's listing counted
    # after the exclusion; the walk, before it).
    root = tmp_path / "p"
    write(root, dict({"a.py": "x\n"}, **{"data/%d.npy" % n: "" for n in range(200)}))
    members = bundle.select(str(root), exclude=("*.npy",), max_size=150 * bundle.MEMBER_AT_LEAST)
    assert [member.path for member in members] == ["a.py"]


def test_a_fifo_named_run_json_is_not_waited_on(tmp_path):
    # The walk looks for run records (a run directory inside the project is
    # left out); a FIFO by that name held the packing forever.
    import threading
    root = tmp_path / "p"
    write(root, {"a.txt": "hi\n"})
    (root / "sub").mkdir()
    fifo = root / "sub" / "run.json"
    os.mkfifo(str(fifo))
    found = []
    packing = threading.Thread(target=lambda: found.append(bundle.select(str(root))),
                               daemon=True)
    packing.start()
    packing.join(30)
    if packing.is_alive():   # release it: a writer opens the FIFO and closes it
        os.close(os.open(str(fifo), os.O_WRONLY))
        packing.join(30)
        pytest.fail("the packing waited on sub/run.json, a FIFO")
    assert [member.path for member in found[0]] == ["a.txt"]
