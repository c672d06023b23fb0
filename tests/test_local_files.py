"""The embedded agents serve their tasks' sandboxes as a Mesos agent does
(src/files/files.cpp, docs/endpoints/files/read.md and browse.md) at the
virtual path src/slave/slave.cpp attaches them at, and their offers say where
(``Offer.url``, include/mesos/v1/mesos.proto); the master serves none, as a
Mesos master attaches only its log (src/master/master.cpp)."""

import base64
import contextlib
import json
import os
import stat
import threading

import pytest
import requests
from fixtures_master import clients, local_master, make_local_master, small_agent
from mesos_http_client import task_info

from mesos_local.api import files
from mesos_local.api.validation import SchemaError, validate_message

CREDENTIALS = {"alice": "s3cret"}


def agent_url(master):
    """The address of ``master``'s one agent, as its ``pid`` names it."""
    [agent] = master.state()["slaves"]
    return "http://%s" % agent["pid"].split("@", 1)[1]


def get(master, route, auth=None, **params):
    """GET ``route`` of the agent of ``master``'s one agent, where its tasks'
    sandboxes are served."""
    return requests.get(agent_url(master) + route, params=params, auth=auth, timeout=10)


def sandbox(client, task_id):
    return files.virtual_path(client.framework_id, task_id)


def run_task(client, task_id, command):
    """Launch ``command`` on the next offer and wait until it ended."""
    offer = client.next_offers()[0]
    client.launch(offer, [task_info(task_id, offer, command)], filters={"refuse_seconds": 0})
    status = client.wait_state(task_id, "TASK_FINISHED", timeout=30)
    return offer, status


@pytest.fixture
def ran(local_master, clients):
    """A task that wrote to both streams, a subdirectory and two symlinks."""
    client = clients(local_master)
    # (stdout: a Mesos agent's command executor logs to stderr too, src/launcher/executor.cpp)
    run_task(client, "writer", "printf 'one\\ntwo\\nthree\\n'; printf 'err' >&2; mkdir sub; "
                               "echo deep > sub/file; ln -s /etc/passwd leak; "
                               "ln -s sub/file inside")
    return local_master, client


def test_offers_carry_the_url_the_framework_reaches_the_agents_at(local_master, clients):
    client = clients(local_master)
    [offer] = client.next_offers()
    url = offer["url"]
    # The agent's own HTTP server (mesos_local/api/agent_http.py), as its pid says.
    [agent] = local_master.state()["slaves"]
    assert agent["pid"] == "slave(1)@127.0.0.1:%d" % agent["port"]
    assert agent["port"] != local_master.port
    assert url == {"scheme": "http", "path": "/slave(1)",
                   "address": {"hostname": offer["hostname"], "ip": "127.0.0.1",
                               "port": agent["port"]}}
    validate_message("Offer", offer)                 # the strict schema knows URL
    with pytest.raises(SchemaError, match="scheme"):
        validate_message("Offer", dict(offer, url={"address": url["address"]}))
    with pytest.raises(SchemaError, match="port"):
        validate_message("Offer", dict(offer, url={"scheme": "http", "address": {"ip": "x"}}))


def test_read_as_mesos_reads(ran):
    master, client = ran
    path = sandbox(client, "writer") + "/stdout"
    whole = b"one\ntwo\nthree\n"

    def read(**params):
        response = get(master, "/files/read", path=path, **params)
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"] == "application/json"
        return response.json()

    assert read(offset=0) == {"offset": 0, "data": whole.decode()}
    assert read(offset=4, length=3) == {"offset": 4, "data": "two"}
    assert read(offset=4, length=-1) == {"offset": 4, "data": "two\nthree\n"}
    assert read(offset=-1) == {"offset": len(whole), "data": ""}   # the size
    assert read() == {"offset": len(whole), "data": ""}            # no offset: the same
    assert read(offset=100) == {"offset": 100, "data": ""}
    assert read(offset=0, length=0) == {"offset": 0, "data": ""}
    assert read(offset=0, length=2)["data"] == "on"
    stderr = get(master, "/files/read", path=sandbox(client, "writer") + "/stderr", offset=0)
    assert stderr.json() == {"offset": 0, "data": "err"}
    trailing = get(master, "/files/read", path=sandbox(client, "writer") + "/sub/file/",
                   offset=0)
    assert trailing.json()["data"] == "deep\n"


def test_a_read_is_capped_at_16_pages(local_master, clients):
    client = clients(local_master)
    run_task(client, "big", "head -c 200000 /dev/zero | tr '\\0' x >&2")
    response = get(local_master, "/files/read", path=sandbox(client, "big") + "/stderr",
                   offset=10, length=150000)
    assert response.json() == {"offset": 10, "data": "x" * files.MAX_READ}
    assert files.MAX_READ == 16 * os.sysconf("SC_PAGESIZE")


def test_bytes_that_are_not_utf8_come_back_unchanged(local_master, clients):
    client = clients(local_master)
    run_task(client, "binary", "printf 'caf\\303\\251 \\377\\n'")
    response = get(local_master, "/files/read", path=sandbox(client, "binary") + "/stdout",
                   offset=0)
    assert b'"data": "caf\xc3\xa9 \xff\\n"' in response.content


def test_browse_lists_a_sandbox_as_mesos_does(ran):
    master, client = ran
    base = sandbox(client, "writer")
    response = get(master, "/files/browse", path=base)
    assert response.status_code == 200 and response.headers["Content-Type"] == "application/json"
    listing = response.json()
    assert [entry["path"] for entry in listing] == [
        base + "/" + name for name in ("inside", "leak", "stderr", "stdout", "sub")]
    by_name = {entry["path"].rsplit("/", 1)[1]: entry for entry in listing}
    stderr = by_name["stdout"]
    assert set(stderr) == {"path", "size", "mode", "mtime", "nlink", "uid", "gid"}
    assert stderr["size"] == len("one\ntwo\nthree\n") and stderr["nlink"] == 1
    assert stderr["mode"].startswith("-rw") and len(stderr["mode"]) == 10
    assert by_name["sub"]["mode"].startswith("d")
    assert stderr["uid"] == "root" if os.geteuid() == 0 else stderr["uid"]
    assert isinstance(stderr["mtime"], float) and stderr["mtime"] == int(stderr["mtime"])
    # A trailing slash and a subdirectory, as the web UI asks.
    assert get(master, "/files/browse", path=base + "/").json() == listing
    [deep] = get(master, "/files/browse", path=base + "/sub").json()
    assert deep["path"] == base + "/sub/file" and deep["size"] == 5
    assert get(master, "/files/browse", path=base + "/stderr").json() == []


def test_jsonp_wraps_the_answer_and_refuses_what_is_not_an_identifier(ran):
    master, client = ran
    path = sandbox(client, "writer") + "/stdout"
    for route, params in (("/files/read", {"path": path, "offset": 0}),
                          ("/files/browse", {"path": sandbox(client, "writer")})):
        response = get(master, route, jsonp="ns.cb$1", **params)
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "text/javascript"
        assert response.text.startswith("ns.cb$1(") and response.text.endswith(");")
        json.loads(response.text[len("ns.cb$1("):-2])
        for bad in ("alert(1)//", "1cb", "cb;x", "a b", "<script>", "ça"):
            refused = get(master, route, jsonp=bad, **params)
            assert refused.status_code == 400, bad
            assert "jsonp" in refused.text


def test_unknown_paths_are_404_and_bad_requests_400(ran):
    master, client = ran
    base = sandbox(client, "writer")
    for path in (base + "/nothing", files.virtual_path(client.framework_id, "nobody"),
                 files.virtual_path("other-framework", "writer"),
                 "/frameworks/%s/executors/writer/runs/other" % client.framework_id,
                 "/frameworks/%s/executors/writer" % client.framework_id, "/etc/passwd",
                 master.work_dir, base + "/stderr/more"):
        assert get(master, "/files/read", path=path, offset=0).status_code == 404, path
        assert get(master, "/files/browse", path=path).status_code == 404, path
    for params, text in (({}, "Expecting 'path=value' in query"),
                         ({"path": ""}, "Expecting 'path=value' in query"),
                         ({"path": base + "/stderr", "offset": "x"}, "Failed to parse offset"),
                         ({"path": base + "/stderr", "offset": "-2"}, "Negative offset"),
                         ({"path": base + "/stderr", "length": "1.5"}, "Failed to parse length"),
                         ({"path": base + "/stderr", "length": "-3"}, "Negative length"),
                         ({"path": base + "/sub", "offset": "0"}, "Cannot read a directory")):
        response = get(master, "/files/read", **params)
        assert response.status_code == 400 and text in response.text, (params, response.text)
    assert get(master, "/files/browse").status_code == 400


def test_nothing_outside_the_sandbox_can_be_reached(ran):
    master, client = ran
    base = sandbox(client, "writer")
    for path in (base + "/../../../../../../../etc/passwd", base + "/..", base + "/sub/../..",
                 base + "/leak"):
        for route in ("/files/read", "/files/browse"):
            response = get(master, route, path=path, offset=0)
            assert response.status_code == 400 and "inaccessible" in response.text, (route, path)
    # A symlink that stays inside is followed.
    assert get(master, "/files/read", path=base + "/inside", offset=0).json()["data"] == "deep\n"
    assert get(master, "/files/read", path=base + "/sub/../stdout",
               offset=0).json()["data"] == "one\ntwo\nthree\n"


def test_the_latest_run_of_a_task_id_is_served(local_master, clients):
    client = clients(local_master)
    run_task(client, "again", "echo first")
    run_task(client, "again", "echo second")
    response = get(local_master, "/files/read", path=sandbox(client, "again") + "/stdout",
                   offset=0)
    assert response.json()["data"] == "second\n"


def test_a_failed_fetch_is_in_the_sandbox_stderr(local_master, clients):
    client = clients(local_master)
    offer = client.next_offers()[0]
    info = task_info("fetching", offer, "true")
    info["command"]["uris"] = [{"value": "/nonexistent/bundle.tar.gz"}]
    client.launch(offer, [info])
    status = client.wait_state("fetching", "TASK_FAILED", timeout=30)
    assert status["reason"] == "REASON_CONTAINER_LAUNCH_FAILED"
    data = get(local_master, "/files/read", path=sandbox(client, "fetching") + "/stderr",
               offset=0).json()["data"]
    assert data.startswith("Failed to fetch '/nonexistent/bundle.tar.gz': ") and \
        data.endswith("\n")


def test_with_credentials_the_sandboxes_need_them(make_local_master, clients):
    master = make_local_master(agents=[small_agent()], credentials=CREDENTIALS)
    client = clients(master, auth=("alice", "s3cret"))
    run_task(client, "secret", "echo private")
    path = sandbox(client, "secret") + "/stdout"
    refused = get(master, "/files/read", path=path, offset=0)
    assert refused.status_code == 401 and refused.text == "401 Unauthorized."
    # Mesos' agent serves /files in its read-only realm (src/slave/main.cpp).
    assert refused.headers["WWW-Authenticate"] == 'Basic realm="mesos-agent-readonly"'
    assert get(master, "/files/browse", path=path,
               auth=("alice", "wrong")).status_code == 401
    assert get(master, "/files/read", path=path, offset=0,
               auth=("alice", "s3cret")).json()["data"] == "private\n"
    # The master's read endpoints stay open, as Mesos' by default.
    assert requests.get(master.url + "/master/state", timeout=10).status_code == 200


def test_the_master_serves_no_sandbox_as_a_mesos_master_does(ran):
    """A Mesos master's /files attaches its own log only, with --log_dir
    (src/master/master.cpp, Master::initialize): a client that reads a
    sandbox from the master works here only if the master serves one, and
    on a cluster finds 404. Its operator READ_FILE/LIST_FILES alike."""
    master, client = ran
    virtual = sandbox(client, "writer")
    real = master.attached(client.framework_id, "writer")
    assert get(master, "/files/read", path=virtual + "/stdout", offset=0).json()["data"] \
        == "one\ntwo\nthree\n"
    for path in (virtual + "/stdout", virtual, real + "/stdout", real, "/master/log"):
        for route, params in (("/files/read", {"path": path, "offset": 0}),
                              ("/files/browse", {"path": path})):
            response = requests.get(master.url + route, params=params, timeout=10)
            assert response.status_code == 404, (route, path, response.text)
        for call in ({"type": "READ_FILE", "read_file": {"path": path, "offset": 0}},
                     {"type": "LIST_FILES", "list_files": {"path": path}}):
            reply = requests.post(master.url + "/api/v1", data=json.dumps(call), timeout=10,
                                  headers={"Content-Type": "application/json"})
            assert reply.status_code == 404, (call, reply.text)


def test_with_credentials_the_masters_files_ask_for_them_before_finding_nothing(
        make_local_master, clients):
    master = make_local_master(agents=[small_agent()], credentials=CREDENTIALS)
    client = clients(master, auth=("alice", "s3cret"))
    run_task(client, "secret", "echo private >&2")
    params = {"path": sandbox(client, "secret") + "/stderr", "offset": 0}
    refused = requests.get(master.url + "/files/read", params=params, timeout=10)
    # Mesos' master serves /files in its read-only realm (src/master/main.cpp).
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"] == 'Basic realm="mesos-master-readonly"'
    assert requests.get(master.url + "/files/read", params=params, auth=("alice", "s3cret"),
                        timeout=10).status_code == 404


def test_a_fifo_is_refused_not_waited_on(local_master, clients):
    client = clients(local_master)
    run_task(client, "piped", "mkfifo pipe")
    response = get(local_master, "/files/read", path=sandbox(client, "piped") + "/pipe",
                   offset=0)
    assert response.status_code == 400 and "not a regular file" in response.text


def test_a_name_swapped_for_a_symlink_after_the_check_is_refused(tmp_path, monkeypatch):
    # What a task could do between resolve() and open(): the walk from the
    # sandbox finds a link where resolve() saw none, and follows it not.
    root = tmp_path / "sandbox"
    root.mkdir()
    (tmp_path / "secret").write_text("not yours")
    (root / "swapped").symlink_to(tmp_path / "secret")
    monkeypatch.setattr(files, "resolve", lambda path, attached: (str(root),
                                                                  str(root / "swapped")))
    with pytest.raises(files.FilesError, match="inaccessible") as refused:
        files.read("/frameworks/f/executors/e/runs/latest/swapped", "0", None, None)
    assert refused.value.status == 400
    with pytest.raises(files.FilesError, match="inaccessible"):
        files.browse("/frameworks/f/executors/e/runs/latest/swapped", None)


@contextlib.contextmanager
def fifo_opened(fifo):
    """Watch FIFO ``fifo`` while the block runs: a writer blocks on its other
    end, and wakes at the first reader's open however short (the kernel
    counts the readers that came), so the list yielded holds True once the
    FIFO was opened for reading meanwhile; the writer is released after."""
    finished, opening = threading.Event(), threading.Event()
    woken = []

    def writer():
        opening.set()                         # the GIL is next let go in the open below
        fd = os.open(fifo, os.O_WRONLY)       # blocks until a reader opens the other end
        woken.append(not finished.is_set())
        os.close(fd)

    thread = threading.Thread(target=writer)
    thread.start()
    assert opening.wait(30)
    try:
        yield woken
    finally:
        finished.set()
        release = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)   # the wake, if none came
        thread.join()
        os.close(release)


def test_a_name_swapped_with_a_link_to_an_outside_fifo_never_opens_the_fifo(ran, tmp_path):
    """A task that swaps a name between a regular file and a link to a FIFO
    outside its sandbox while /files is asked for it again and again: the
    agent (root, often) never opens the FIFO, whose open alone has effects,
    and every answer is a 200 or a 400 (the connection is never dropped)."""
    master, client = ran
    name = os.path.join(master.attached(client.framework_id, "writer"), "swapped")
    path = sandbox(client, "writer") + "/swapped"
    fifo = str(tmp_path / "outside")
    os.mkfifo(fifo)
    finished = threading.Event()

    def plain():
        with open(name + ".file", "w") as handle:
            handle.write("plain\n")
        os.replace(name + ".file", name)

    def swap():                               # what the task does, each rename atomic
        while not finished.is_set():
            os.symlink(fifo, name + ".link")
            os.replace(name + ".link", name)
            plain()

    plain()   # the name is there before the first request, however late swap() first runs

    swapper = threading.Thread(target=swap)
    with fifo_opened(fifo) as woken:
        swapper.start()
        try:
            with requests.Session() as session:
                for i in range(600):
                    if woken:
                        break
                    route = ("/files/read", "/files/browse")[i % 2]
                    response = session.get(agent_url(master) + route, timeout=10,
                                           params={"path": path, "offset": 0})
                    assert response.status_code in (200, 400), response.text
                    if response.status_code == 200 and route == "/files/read":
                        assert response.json() == {"offset": 0, "data": "plain\n"}
        finally:
            finished.set()
            swapper.join()
    assert woken == [False], "the agent opened the FIFO a task's link pointed at"


def test_a_fifo_or_a_device_in_the_sandbox_is_refused_never_opened(ran):
    master, client = ran
    directory = master.attached(client.framework_id, "writer")
    base = sandbox(client, "writer")
    os.mkfifo(os.path.join(directory, "pipe"))
    with fifo_opened(os.path.join(directory, "pipe")) as woken:
        for _ in range(20):
            for route in ("/files/read", "/files/browse"):
                response = get(master, route, path=base + "/pipe", offset=0)
                assert response.status_code == 400, (route, response.text)
                assert "not a regular file" in response.text, response.text
    assert woken == [False], "the agent opened a FIFO of the sandbox"
    try:
        os.mknod(os.path.join(directory, "null"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        return                                # no CAP_MKNOD: no device to test with
    for route in ("/files/read", "/files/browse"):
        response = get(master, route, path=base + "/null", offset=0)
        assert response.status_code == 400 and "not a regular file" in response.text, \
            (route, response.text)


def test_a_path_that_cannot_be_a_path_is_a_400_and_the_server_goes_on(ran):
    master, client = ran
    base = sandbox(client, "writer")
    with requests.Session() as session:   # one connection: the server does not drop it
        for route in ("/files/read", "/files/browse"):
            for path in (base + "/std\0out", base + "\0", "\0", base.replace("writer", "wr\0")):
                response = session.get(agent_url(master) + route, params={"path": path, "offset": 0},
                                       timeout=10)
                assert response.status_code == 400, (route, path, response.text)
                assert response.text.endswith("\n") and response.text.count("\n") == 1
                assert "NUL" in response.text, response.text
        after = session.get(agent_url(master) + "/files/read", params={"path": base + "/stdout",
                                                                 "offset": 0}, timeout=10)
        assert after.json() == {"offset": 0, "data": "one\ntwo\nthree\n"}
    # The operator API's READ_FILE answers as /files/read does; a lone
    # surrogate (valid JSON, no file name) is no path either.
    for path, text in ((base + "/std\0out", "NUL"), (base + "/\ud800", "file name")):
        reply = requests.post(agent_url(master) + "/api/v1", timeout=10,
                              headers={"Content-Type": "application/json"},
                              data=json.dumps({"type": "READ_FILE", "read_file": {
                                  "path": path, "offset": 0}}))
        assert reply.status_code == 400 and text in reply.text, reply.text
        assert reply.text.count("\n") == 1
    reply = requests.post(agent_url(master) + "/api/v1", timeout=10,
                          headers={"Content-Type": "application/json"},
                          data=json.dumps({"type": "READ_FILE", "read_file": {
                              "path": base + "/stdout", "offset": 0}}))
    assert base64.b64decode(reply.json()["read_file"]["data"]) == b"one\ntwo\nthree\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_a_scheduler_in_the_hub_is_offered_the_hubs_address(make_local_master, clients,
                                                            tmp_path):
    from mesos_http_client import SchedulerClient

    from mesos_local.containerizer.netns import call_in_namespace

    master = make_local_master(agents=[small_agent()], network_namespaces=True)
    hub, address = master.network.hub, master.network.hub_address
    # Its socket made in the hub, the client speaks from there (as tfrun does
    # under ``ip netns exec``).
    client = call_in_namespace(hub, lambda: SchedulerClient(master.hub_url))
    try:
        call_in_namespace(hub, client.subscribe)
        [offer] = client.next_offers()
        assert offer["url"]["address"]["ip"] == address
        # The agent's own server, on the same port in the hub as on loopback.
        [agent] = master.state()["slaves"]
        assert offer["url"]["address"]["port"] == agent["port"] != master.port
        assert offer["url"]["address"]["hostname"] == offer["hostname"]   # the agent's
        answer = call_in_namespace(hub, lambda: requests.get(
            "http://%s:%d/state" % (address, agent["port"]), timeout=10).json())
        assert answer["id"] == agent["id"]
    finally:
        client.close()
    # One on loopback is offered loopback.
    assert clients(master).next_offers()[0]["url"]["address"]["ip"] == "127.0.0.1"
