"""The embedded agents' fetcher contains itself (mesos_local/containerizer/
fetcher.py, archives.py): nothing an archive or a URI holds lands outside the
sandbox, no special file or set-id bit comes in, what it brings is bounded,
and a kill stops it at once."""

import contextlib
import io
import os
import socket
import stat
import subprocess
import tarfile
import threading
import time
import zipfile

import pytest
from fixtures_master import clients, local_master, make_local_master  # fixtures
from mesos_http_client import task_info

from mesos_local.containerizer.archives import ArchiveError, Limits, extract
from mesos_local.containerizer.fetcher import FetchError, fetch_uris


def tar_of(path, members):
    """A .tar.gz at ``path`` of ``members``: (TarInfo, bytes or None)."""
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
            else:
                archive.addfile(info)
    return str(path)


def member(name, kind=tarfile.REGTYPE, linkname="", mode=0o644):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, mode
    return info


def files_under(root):
    return sorted(os.path.relpath(os.path.join(d, n), root)
                  for d, dirs, names in os.walk(root) for n in dirs + names)


@pytest.fixture
def box(tmp_path):
    """A sandbox inside a parent directory a breakout would write to."""
    sandbox = tmp_path / "parent" / "sandbox"
    sandbox.mkdir(parents=True)
    return sandbox


def test_the_cve_2025_4517_archive_writes_nothing_outside(tmp_path, box):
    # The published shape: directories of long names, each reached by a
    # one-letter symlink, a link through them all pointing back up far
    # enough that realpath() gives up, then a link and a file through it.
    comp, steps, members, path = "d" * 247, "abcdefghijklmnop", [], ""
    for step in steps:
        members.append((member(os.path.join(path, comp), tarfile.DIRTYPE), None))
        members.append((member(os.path.join(path, step), tarfile.SYMTYPE, comp), None))
        path = os.path.join(path, comp)
    link = os.path.join("/".join(steps), "l" * 254)
    members.append((member(link, tarfile.SYMTYPE, "../" * len(steps)), None))
    members.append((member("escape", tarfile.SYMTYPE, link + "/../../.."), None))
    members.append((member("escape/pwned", tarfile.REGTYPE), b"outside\n"))
    archive = tar_of(tmp_path / "cve.tar.gz", members)
    with pytest.raises(ArchiveError, match="goes through|leaves the sandbox|leave the sandbox"):
        extract(archive, str(box))
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "parent" / "pwned").exists()
    assert files_under(tmp_path / "parent") == ["sandbox"] + [
        os.path.join("sandbox", p) for p in files_under(box)]


@pytest.mark.parametrize("members, why", [
    ([(member("../evil"), b"x")], "leaves the sandbox"),
    ([(member("/etc/evil"), b"x")], "leaves the sandbox"),
    ([(member("a/../../evil"), b"x")], "leaves the sandbox"),
    ([(member("out", tarfile.SYMTYPE, "/etc"), None)], "link to an absolute path"),
    ([(member("out", tarfile.SYMTYPE, "../.."), None)], "link that leaves the sandbox"),
    ([(member("sub", tarfile.DIRTYPE), None), (member("in", tarfile.SYMTYPE, "sub"), None),
      (member("in/through"), b"x")], "goes through 'in', which is not a directory"),
    ([(member("hard", tarfile.LNKTYPE, "../outside"), None)], "leaves the sandbox"),
    ([(member("hard", tarfile.LNKTYPE, "missing"), None)], "did not put there first"),
    ([(member("dev", tarfile.CHRTYPE), None)], "device, fifo or other special file"),
    ([(member("fifo", tarfile.FIFOTYPE), None)], "device, fifo or other special file"),
])
def test_members_that_would_leave_or_are_special_are_refused(tmp_path, box, members, why):
    (tmp_path / "parent" / "outside").write_text("secret")
    archive = tar_of(tmp_path / "bad.tar.gz", members)
    with pytest.raises(ArchiveError, match=why):
        extract(archive, str(box))
    assert sorted(os.listdir(tmp_path / "parent")) == ["outside", "sandbox"]
    assert (tmp_path / "parent" / "outside").read_text() == "secret"


@pytest.mark.parametrize("top", [".", "./", "./."])
def test_an_archive_whose_top_is_dot_extracts_into_the_sandbox_as_tar_takes_it(tmp_path, box,
                                                                               top):
    # ``tar czf env.tar.gz -C env .`` names its top '.' or './': that is the
    # sandbox itself, whose directory is there already (its mode stays).
    os.chmod(box, 0o750)
    archive = tar_of(tmp_path / "dot.tar.gz", [
        (member(top, tarfile.DIRTYPE, mode=0o777), None),
        (member("./bin", tarfile.DIRTYPE), None),
        (member("./bin/python3", mode=0o755), b"#!/bin/sh\n")])
    extract(archive, str(box))
    assert files_under(box) == ["bin", os.path.join("bin", "python3")]
    assert stat.S_IMODE(os.stat(box).st_mode) == 0o750
    assert sorted(os.listdir(tmp_path / "parent")) == ["sandbox"]


def test_an_archive_made_with_tar_of_a_directorys_dot_is_extracted(tmp_path, box):
    # The common way, with the tar program itself.
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python3").write_text("#!/bin/sh\n")
    (env / "lib").mkdir()
    os.symlink("lib", env / "lib64")
    archive = tmp_path / "env.tar.gz"
    subprocess.run(["tar", "czf", str(archive), "-C", str(env), "."], check=True)
    assert "." in tarfile.open(archive).getnames()   # tar wrote "./", tarfile reads "."
    fetch_uris([{"value": str(archive)}], str(box))
    assert (box / "bin" / "python3").read_text() == "#!/bin/sh\n"
    assert os.readlink(box / "lib64") == "lib"


def test_a_zip_whose_top_is_dot_extracts_into_the_sandbox(tmp_path, box):
    path = tmp_path / "dot.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(zipfile.ZipInfo("./"), "")
        archive.writestr("./pkg/a.py", "x = 1\n")
    extract(str(path), str(box))
    assert (box / "pkg" / "a.py").read_text() == "x = 1\n"


@pytest.mark.parametrize("members", [
    [(member("."), b"x")],
    [(member("./", tarfile.SYMTYPE, "/etc"), None)],
    [(member(".", tarfile.SYMTYPE, "sub"), None)],
    [(member("/", tarfile.DIRTYPE), None)],
    [(member("", tarfile.DIRTYPE), None)],
    [(member("x"), b"x"), (member("hard", tarfile.LNKTYPE, "."), None)],
])
def test_only_a_directory_may_name_the_sandboxs_top(tmp_path, box, members):
    with pytest.raises(ArchiveError, match="leaves the sandbox"):
        extract(tar_of(tmp_path / "top.tar.gz", members), str(box))
    assert not os.path.islink(box) and os.path.isdir(box)
    assert sorted(os.listdir(tmp_path / "parent")) == ["sandbox"]


@pytest.mark.parametrize("where", ["here", "in a fetcher process"])
def test_a_refused_archive_says_the_fetchers_rule_and_what_to_do(tmp_path, box, monkeypatch,
                                                                 where):
    # venv-pack's archive: bin/python3 links to the base interpreter by its
    # absolute path, which a Mesos agent's tar extracts and this fetcher
    # refuses (issue 26): the message says so, and how to ship it anyway.
    from mesos_local.containerizer import fetcher
    if where != "here":
        monkeypatch.setattr(fetcher, "CHILD_EXTRACT_BYTES", 1)
    archive = tar_of(tmp_path / "tfenv.tar.gz", [
        (member("bin", tarfile.DIRTYPE), None),
        (member("bin/python3", tarfile.SYMTYPE, "/usr/bin/python3"), None)])
    with pytest.raises(FetchError) as caught:
        fetch_uris([{"value": archive}], str(box))
    assert str(caught.value) == (
        "Failed to fetch '%s': the local master's fetcher refuses this archive: member "
        "'bin/python3' is a link to an absolute path, and only links that stay inside the "
        "sandbox are extracted here (a Mesos agent's tar takes this one): give it to the "
        "task as a file that the task extracts itself, or make it with conda-pack" % archive)
    assert not os.path.lexists(box / "bin" / "python3")


def test_a_cancelled_or_unreadable_archive_is_no_refusal_of_it(tmp_path, box):
    archive = tar_of(tmp_path / "a.tar.gz", [(member("data"), b"x")])
    with pytest.raises(ArchiveError, match="^the fetch was cancelled$"):
        extract(archive, str(box), cancelled=lambda: True)
    (tmp_path / "html.tar.gz").write_text("<html>Not Found</html>")
    with pytest.raises(ArchiveError, match="^it is not a readable archive: "):
        extract(str(tmp_path / "html.tar.gz"), str(box))


def test_a_refusal_for_another_rule_names_the_fetcher_too(tmp_path, box):
    archive = tar_of(tmp_path / "bad.tar.gz", [(member("../evil"), b"x")])
    with pytest.raises(FetchError, match="^Failed to fetch '.*': the local master's fetcher "
                                         "refuses this archive: member '../evil' leaves the "
                                         "sandbox$"):
        fetch_uris([{"value": archive}], str(box))


def chain_to_the_parent():
    """Each link inside by a lexical check; ``t`` is really the sandbox's parent."""
    return [(member("sub", tarfile.DIRTYPE), None), (member("sub/s", tarfile.SYMTYPE, ".."), None),
            (member("t", tarfile.SYMTYPE, "sub/s/.."), None)]


@pytest.mark.parametrize("order", ["link first", "link last"])
def test_a_chain_of_links_inside_one_by_one_that_leads_out_is_refused(tmp_path, box, order):
    # 't -> sub/s/..' is 'sub' to a lexical check; with 'sub/s -> ..' it is
    # the sandbox's parent, whichever link the archive makes first.
    members = chain_to_the_parent()
    if order == "link last":
        members = [members[0], members[2], members[1]]
    with pytest.raises(ArchiveError, match="only leading '..' steps"):
        extract(tar_of(tmp_path / "chain.tar.gz", members), str(box))
    for path in (box / "t", box / "sub" / "s"):
        assert not os.path.islink(path) or os.path.realpath(path).startswith(str(box))


def test_an_output_file_through_a_link_an_archive_left_is_refused(tmp_path, box):
    # A later URI's output_file wrote through an archive's link, out of the
    # sandbox (into root-only directories, for a fetch as root).
    archive = tar_of(tmp_path / "links.tar.gz", [
        (member("sub", tarfile.DIRTYPE), None), (member("in", tarfile.SYMTYPE, "sub"), None)])
    payload = tmp_path / "payload.txt"
    payload.write_text("x")
    with pytest.raises(FetchError, match="output_file 'in/planted' goes through 'in', which is "
                                         "not a directory"):
        fetch_uris([{"value": archive}, {"value": str(payload), "output_file": "in/planted"}],
                   str(box))
    assert not (box / "sub" / "planted").exists()


def test_links_with_leading_steps_up_and_down_only_are_kept(tmp_path, box):
    extract(tar_of(tmp_path / "ok.tar.gz", [
        (member("lib", tarfile.DIRTYPE), None), (member("lib/python3", tarfile.DIRTYPE), None),
        (member("lib/python3/up", tarfile.SYMTYPE, "../../lib"), None),
        (member("lib64", tarfile.SYMTYPE, "./lib/python3"), None)]), str(box))
    assert os.path.realpath(box / "lib64" / "up") == os.path.realpath(box / "lib")


def test_links_inside_and_modes_without_set_id_or_world_bits(tmp_path, box):
    archive = tar_of(tmp_path / "ok.tar.gz", [
        (member("bin", tarfile.DIRTYPE), None),
        (member("bin/tool", mode=0o4777), b"#!/bin/sh\n"),
        (member("bin/alias", tarfile.SYMTYPE, "tool"), None),
        (member("hard", tarfile.LNKTYPE, "bin/tool"), None),
        (member("data", mode=0o666), b"data"),
    ])
    extract(archive, str(box))
    assert os.readlink(box / "bin" / "alias") == "tool"
    assert os.path.samefile(box / "hard", box / "bin" / "tool")
    assert stat.S_IMODE(os.stat(box / "bin" / "tool").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(box / "data").st_mode) == 0o640


def test_an_archive_extracted_twice_replaces_its_files_not_writes_through_links(tmp_path, box):
    (tmp_path / "parent" / "outside").write_text("secret")
    os.symlink("../outside", box / "data")        # what a link left there points at
    archive = tar_of(tmp_path / "a.tar.gz", [(member("data"), b"new")])
    extract(archive, str(box))
    extract(archive, str(box))
    assert not os.path.islink(box / "data") and (box / "data").read_text() == "new"
    assert (tmp_path / "parent" / "outside").read_text() == "secret"


def test_zip_slip_and_zip_links_are_refused(tmp_path, box):
    for name, attr, why in (("../evil", 0o644, "leaves the sandbox"),
                            ("link", stat.S_IFLNK | 0o777, "link or special file")):
        path = tmp_path / ("%s.zip" % len(name))
        with zipfile.ZipFile(path, "w") as archive:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | attr if not attr & stat.S_IFLNK else attr) << 16
            archive.writestr(info, "/etc/passwd")
        with pytest.raises(ArchiveError, match=why):
            extract(str(path), str(box))
    assert sorted(os.listdir(tmp_path / "parent")) == ["sandbox"]


def test_zip_members_whose_mode_names_no_file_type_are_files_as_unzip_takes_them(tmp_path,
                                                                               box):
    # Python's zipfile.writestr with a bare 0o644, a zip made on Windows (no
    # Unix mode): unzip, which Mesos' fetcher runs, extracts both as files.
    path = tmp_path / "plain.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, attr in (("pkg/bare.py", 0o644 << 16), ("pkg/dos.py", 0)):
            info = zipfile.ZipInfo(name)
            info.external_attr = attr
            archive.writestr(info, "x = 1\n")
    extract(str(path), str(box))
    assert (box / "pkg" / "bare.py").read_text() == (box / "pkg" / "dos.py").read_text() == \
        "x = 1\n"


def test_an_archive_expands_within_its_ratio(tmp_path, box):
    archive = tar_of(tmp_path / "bomb.tar.gz", [(member("zeros"), b"\0" * (8 << 20))])
    limits = Limits(max_ratio=10, min_expansion=1 << 20)
    with pytest.raises(ArchiveError, match=r"^the local master's fetcher refuses this archive: "
                                           r"it expands to more than \d+ MB \(\d+ times its "
                                           r"size\)$"):
        extract(archive, str(box), limits)
    assert os.path.getsize(box / "zeros") <= (2 << 20)     # stopped, not written out


def test_local_files_regular_only_bounded_and_never_world_readable(tmp_path, box):
    source = tmp_path / "weights.bin"
    source.write_bytes(b"w" * 4096)
    os.chmod(source, 0o644)
    fetch_uris([{"value": "file://%s" % source}], str(box))
    assert stat.S_IMODE(os.stat(box / "weights.bin").st_mode) == 0o640
    with pytest.raises(FetchError, match="Failed to fetch 'file:///dev/zero': not a regular file"):
        fetch_uris([{"value": "file:///dev/zero"}], str(box))
    with pytest.raises(FetchError, match=r"weights.bin': it is larger than 0 MB"):
        fetch_uris([{"value": "file://%s" % source, "output_file": "w2"}], str(box),
                   limits=Limits(max_bytes=1024))


@pytest.mark.parametrize("kernel", [True, False])
def test_a_cached_file_is_copied_whole_by_the_kernel_or_without_it(tmp_path, box, monkeypatch,
                                                                    kernel):
    # As Mesos' fetcher copies from its cache with cp (copy_file_range):
    # os.copy_file_range, in chunks that let a kill in; where the kernel
    # cannot (EXDEV, ENOSYS), read and written here. Same bytes, same mode,
    # same bound either way.
    from mesos_local.containerizer import fetcher
    calls = []
    real = os.copy_file_range

    def copy_file_range(src, dst, count, *args):
        calls.append(count)
        if not kernel:
            raise OSError(18, "Invalid cross-device link")
        return real(src, dst, count, *args)
    monkeypatch.setattr(os, "copy_file_range", copy_file_range)
    monkeypatch.setattr(fetcher, "KERNEL_CHUNK", 1 << 20)
    data = os.urandom((5 << 20) + 123)
    source = tmp_path / "cached.tar"
    source.write_bytes(data)
    os.chmod(source, 0o755)
    fetch_uris([{"value": str(source), "extract": False}], str(box))
    assert (box / "cached.tar").read_bytes() == data
    assert stat.S_IMODE(os.stat(box / "cached.tar").st_mode) == 0o750
    assert len(calls) == (7 if kernel else 1)     # 6 chunks and the end; or given up at once
    with pytest.raises(FetchError, match="it is larger than 4 MB"):
        fetch_uris([{"value": str(source), "output_file": "big", "extract": False}], str(box),
                   limits=Limits(max_bytes=4 << 20))
    assert not (box / "big").exists() or (box / "big").stat().st_size == 0
    killed = iter([False, True])
    with pytest.raises(FetchError, match="the task was killed"):
        fetch_uris([{"value": str(source), "output_file": "killed", "extract": False}],
                   str(box), cancelled=lambda: next(killed, True))


@pytest.mark.parametrize("uri, why", [
    ("http://bad host/x.tar.gz", "Failed to fetch 'http://bad host/x.tar.gz': "),
    ("gopher://example.com/x", "the scheme 'gopher' is not supported"),
])
def test_a_malformed_uri_fails_the_fetch_with_one_line(box, uri, why):
    with pytest.raises(FetchError, match=why) as error:
        fetch_uris([{"value": uri}], str(box))
    assert "\n" not in str(error.value)


# Fetcher::uriToLocalPath and Fetcher::basename (src/slave/containerizer/fetcher.cpp), as
# mesos-fetcher reports them (src/launcher/fetcher.cpp: "Failed to fetch '<uri>': <error>").
# An agent without --frameworks_home (Mesos' default: none) refuses relative paths.
RELATIVE = ("A relative path was passed for the resource but the Mesos framework home was "
            "not specified. Please either provide this config option or avoid using a "
            "relative path")


@pytest.mark.parametrize("uri, why", [
    ("data/input.txt", RELATIVE),
    ("input.txt", RELATIVE),
    ("file://data/input.txt", "File URI only supports absolute paths"),
    ("file://input.txt", "Malformed URI (missing path): file://input.txt"),   # basename first
    ("http://127.0.0.1:1/", "Malformed URI (missing path): http://127.0.0.1:1/"),
    ("http://127.0.0.1:1", "Malformed URI (missing path): http://127.0.0.1:1"),
    ("/data/it's", "Illegal characters in URI"),
])
def test_uris_mesos_refuses_are_refused_in_its_words(tmp_path, box, monkeypatch, uri, why):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "input.txt").write_text("relative data\n")
    (tmp_path / "input.txt").write_text("relative data\n")
    monkeypatch.chdir(tmp_path)   # where a relative path would resolve against
    with pytest.raises(FetchError) as error:
        fetch_uris([{"value": uri, "extract": False}], str(box))
    assert str(error.value) == "Failed to fetch '%s': %s" % (uri, why)
    assert os.listdir(box) == []


def test_absolute_local_uris_are_fetched_as_mesos_fetches_them(tmp_path, box):
    source = tmp_path / "in.txt"
    source.write_text("data\n")
    fetch_uris([{"value": str(source), "output_file": "plain"},
                {"value": "file://" + str(source), "output_file": "file"},
                {"value": "file://localhost" + str(source), "output_file": "localhost"}],
               str(box))
    assert {name: (box / name).read_text() for name in os.listdir(box)} == {
        "plain": "data\n", "file": "data\n", "localhost": "data\n"}


@pytest.fixture
def file_server(tmp_path):
    """An HTTP server of ``tmp_path / 'served'`` (the query ignored): its base URL."""
    import functools
    import http.server
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served, "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(10)


def test_a_query_stays_in_the_file_name_as_mesos_keeps_it(tmp_path, box, file_server):
    # Fetcher::basename: what follows the URI's last '/', '?' and all; so an
    # archive named with a query is not one to extract (its name does not end
    # with .tar.gz), and lands whole.
    served, base = file_server
    tar_of(served / "env.tar.gz", [(member("inside.txt"), b"x")])
    (served / "a.txt").write_text("served\n")
    fetch_uris([{"value": base + "/a.txt?sig=1"}, {"value": base + "/env.tar.gz?v=2"}],
               str(box))
    assert sorted(os.listdir(box)) == ["a.txt?sig=1", "env.tar.gz?v=2"]
    assert (box / "a.txt?sig=1").read_text() == "served\n"


@contextlib.contextmanager
def http_server(respond, name):
    """A server whose each connection ``respond(conn, stop)`` answers after
    reading its request (``stop``: set when the test is over): the URL of
    ``name`` there."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.recv(4096)
                respond(conn, stop)
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d/%s" % (listener.getsockname()[1], name)
    finally:
        stop.set()
        thread.join(10)
        listener.close()


@pytest.fixture
def trickling_server():
    """An HTTP server that answers a long body one byte every 2 s."""
    def trickle(conn, stop):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
        while not stop.wait(2.0):
            try:
                conn.sendall(b"x")
            except OSError:
                break
    with http_server(trickle, "slow.bin") as url:
        yield url


def late_server(delay):
    """An HTTP server that answers ``delay`` s after a request: its URL."""
    def late(conn, stop):
        if not stop.wait(delay):
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello")
    return http_server(late, "late.txt")


def test_a_server_that_answers_late_is_waited_for_up_to_the_stall(box):
    # Its headers were waited for one second (the fetch's look at the kill),
    # then "timed out": a bundle server whose downloads were all busy failed
    # the 17th task.
    with late_server(2.5) as url:
        fetch_uris([{"value": url}], str(box))
        assert (box / "late.txt").read_text() == "hello"
        with pytest.raises(FetchError, match="nothing came for 1 s"):
            fetch_uris([{"value": url, "output_file": "again.txt"}], str(box), timeout=1)


def test_a_kill_stops_a_download_waiting_for_its_answer(box):
    killed = threading.Event()
    with late_server(120) as url:
        threading.Timer(0.5, killed.set).start()
        started = time.monotonic()
        with pytest.raises(FetchError, match="the task was killed"):
            fetch_uris([{"value": url}], str(box), cancelled=killed.is_set)
        assert time.monotonic() - started < 60      # the answer, and the stall, are far off


def test_a_kill_stops_a_download_whose_connection_is_never_answered(box):
    # A full backlog: the SYNs are dropped. Connecting waited the whole
    # 60-s stall for the kill.
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    waiting = []
    try:
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(listener.getsockname())
            waiting.append(filler)
        killed = threading.Event()
        threading.Timer(0.5, killed.set).start()
        started = time.monotonic()
        with pytest.raises(FetchError, match="the task was killed"):
            fetch_uris([{"value": "http://127.0.0.1:%d/x.bin" % listener.getsockname()[1]}],
                       str(box), cancelled=killed.is_set)
        assert time.monotonic() - started < 30      # the stall, 60 s, is far off
    finally:
        for end in waiting + [listener]:
            end.close()


@contextlib.contextmanager
def ftp_server(transfer):
    """A minimal FTP server (passive mode) whose RETR ``transfer(data
    connection, control connection)`` answers: the URL of x.bin there."""
    data, control = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    port = data.getsockname()[1]
    held = []

    def serve():
        conn, _ = control.accept()
        held.append(conn)
        conn.sendall(b"220 hi\r\n")
        for line in conn.makefile("rb"):
            verb = line.decode().split(" ")[0].strip().upper()
            if verb == "PASV":
                conn.sendall(b"227 Entering Passive Mode (127,0,0,1,%d,%d)\r\n"
                             % (port >> 8, port & 255))
            elif verb == "RETR":
                held.append(data.accept()[0])
                conn.sendall(b"150 here it comes\r\n")
                transfer(held[-1], conn)
            else:
                conn.sendall({"USER": b"331 pw\r\n", "PASS": b"230 ok\r\n", "EPSV": b"500 no\r\n",
                              "SIZE": b"550 no\r\n"}.get(verb, b"200 ok\r\n"))
    threading.Thread(target=serve, daemon=True).start()
    try:
        yield "ftp://127.0.0.1:%d/x.bin" % control.getsockname()[1]
    finally:
        for end in held + [data, control]:
            end.close()


def test_a_kill_stops_an_ftp_download_that_stalls(box):
    # Its reads waited the 60-s stall (and as long again as it closed): 120 s.
    with ftp_server(lambda data, control: None) as url:
        killed = threading.Event()
        threading.Timer(1.0, killed.set).start()
        started = time.monotonic()
        with pytest.raises(FetchError, match="the task was killed"):
            fetch_uris([{"value": url}], str(box), cancelled=killed.is_set)
        assert time.monotonic() - started < 30


def test_an_ftp_server_that_pauses_is_waited_for(box):
    # A read that timed out after a second left its file unreadable: "cannot
    # read from timed out object", a pause of 2 s failed the fetch.
    def late(data, control):
        time.sleep(2.0)
        data.sendall(b"hello")
        data.close()
        control.sendall(b"226 done\r\n")
    with ftp_server(late) as url:
        fetch_uris([{"value": url}], str(box))
    assert (box / "x.bin").read_bytes() == b"hello"


def test_a_kill_stops_a_stalled_download_at_once(box, trickling_server):
    killed = threading.Event()
    outcome = []

    def fetch():
        try:
            fetch_uris([{"value": trickling_server}], str(box), cancelled=killed.is_set)
        except FetchError as exc:
            outcome.append(exc)
    thread = threading.Thread(target=fetch)
    thread.start()
    deadline = time.monotonic() + 30
    while not (box / "slow.bin").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    killed.set()
    killed_at = time.monotonic()
    thread.join(30)
    assert not thread.is_alive()
    # Within a few reads of a second each, far from the 60 s stall timeout.
    assert time.monotonic() - killed_at < 15
    assert "the task was killed" in str(outcome[0])


# -- through the embedded master -----------------------------------------------------

def test_a_task_whose_uri_is_a_device_fails_and_the_master_stays(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    info = task_info("zero", offer, "true")
    info["command"]["uris"] = [{"value": "file:///dev/zero"}]
    client.launch(offer, [info])
    status = client.wait_state("zero", "TASK_FAILED", timeout=30)
    assert status["message"] == "Failed to fetch 'file:///dev/zero': not a regular file"
    assert local_master.state()["slaves"]   # still serving


def test_a_relative_path_uri_fails_the_task_as_on_an_agent_without_frameworks_home(
        tmp_path, monkeypatch, make_local_master, clients):
    # The master's working directory holds data/input.txt: Mesos' agent never
    # looks there (Fetcher::uriToLocalPath), and nor does this one.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "input.txt").write_text("relative data\n")
    monkeypatch.chdir(tmp_path)
    master = make_local_master()
    client = clients(master)
    for task_id, uri, why in (
            ("rel", "data/input.txt", RELATIVE),
            ("fileuri", "file://data/input.txt", "File URI only supports absolute paths")):
        offer = client.next_offers()[0]
        info = task_info(task_id, offer, "cat input.txt")
        info["command"]["uris"] = [{"value": uri, "extract": False}]
        client.launch(offer, [info], filters={"refuse_seconds": 0})
        status = client.wait_state(task_id, "TASK_FAILED", timeout=30)
        assert status["reason"] == "REASON_CONTAINER_LAUNCH_FAILED"
        assert status["message"] == "Failed to fetch '%s': %s" % (uri, why)
        assert os.listdir(master.sandbox(task_id)) in ([], ["stderr", "stdout"])


def test_a_big_archive_is_extracted_by_a_fetcher_process_the_rest_in_this_one(tmp_path, box,
                                                                             monkeypatch):
    # Tasks that start together extract on all the cores, as Mesos runs its
    # fetcher program per container, not one at a time on the agent's
    # interpreter lock; a file that is only copied, or a small archive, is
    # not worth a process' start.
    from mesos_local.containerizer import fetcher
    started = []
    popen = fetcher.subprocess.Popen

    def counting(argv, **kwargs):
        started.append(argv)
        return popen(argv, **kwargs)
    monkeypatch.setattr(fetcher.subprocess, "Popen", counting)
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        data = b"print('hi')\n"
        info = tarfile.TarInfo("pkg/a.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    plain = tmp_path / "notes.txt"
    plain.write_text("notes\n")
    fetch_uris([{"value": str(plain)}], str(box))
    fetch_uris([{"value": str(archive), "extract": True}], str(box))
    assert started == []
    monkeypatch.setattr(fetcher, "CHILD_EXTRACT_BYTES", 1)    # now it counts as big
    fetch_uris([{"value": str(archive), "extract": True}], str(box))
    assert [argv[-1] for argv in started] == [fetcher.CHILD_MODULE]
    assert open(os.path.join(box, "pkg", "a.py")).read() == "print('hi')\n"
    assert open(os.path.join(box, "notes.txt")).read() == "notes\n"
