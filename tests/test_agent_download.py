"""Whole files out of a task's sandbox through its agent's ``/files/read``
(``tfmesos.mesos.agent_files.download``): binary files byte for byte, page
by page, bounded in size and time, written whole or not at all
(``tfmesos attach`` takes a dead detached scheduler's shipped files so)."""

import os
import random
import time

import pytest
from fixtures_agents import finished_task, silent_agent
from fixtures_master import clients, local_master, make_local_master

from tfmesos.mesos.agent_files import (
    DOWNLOAD_PAGE,
    AgentFiles,
    AgentFilesError,
    download,
    sandbox_path,
)


def tricky_bytes():
    """A few hundred KB that JSON and UTF-8 could garble: every byte value,
    what is not UTF-8, encoded surrogates, what JSON escapes, UTF-8
    sequences cut by the pages' ends, then random bytes."""
    generator = random.Random(20240605)
    data = bytearray(bytes(range(256)) * 4)
    data += "é€😀 \"quoted\" back\\slash /slash \x7f".encode() + b"\xed\xa0\x80\xed\xb2\x80"
    data += b"\xff\xfe\xc3\x28\xe2\x82\x28\xf0\x9f\x98" + b"\x00" * 300
    for page_end in range(1, 5):   # a four-byte character across each of the first pages' ends
        data += bytes(generator.getrandbits(8) for _ in range(page_end * DOWNLOAD_PAGE - 2
                                                              - len(data)))
        data += "😀".encode()
    data += generator.randbytes(80 * 1000)
    return bytes(data)


@pytest.fixture
def sandbox(local_master, clients, tmp_path):
    """(an AgentFiles of the embedded master's agent, the finished task's
    sandbox path, {name: the bytes its sandbox holds}), closed at the end."""
    blobs = {"blob.bin": tricky_bytes(), "zeros.bin": b"\x00" * (3 * DOWNLOAD_PAGE + 7),
             "empty.bin": b""}
    given = tmp_path / "given"
    given.mkdir()
    for name, data in blobs.items():
        (given / name).write_bytes(data)
    client = clients(local_master)
    base, path = finished_task(client, "holder", "cp %s/*.bin ." % given)
    files = AgentFiles(base, 10.0, None, None)
    yield files, path, blobs
    files.close()


def test_binary_files_come_back_byte_for_byte(sandbox, tmp_path):
    files, path, blobs = sandbox
    assert len(blobs["blob.bin"]) > 4 * DOWNLOAD_PAGE
    for name, data in blobs.items():
        dest = tmp_path / ("copy-" + name)
        assert download(files, "%s/%s" % (path, name), str(dest), max_bytes=1 << 20) == \
            len(data)
        assert dest.read_bytes() == data, name
    # Twice over one connection, into a file that is there: replaced whole.
    dest = tmp_path / "copy-blob.bin"
    dest.write_bytes(b"old")
    download(files, path + "/blob.bin", str(dest), max_bytes=len(blobs["blob.bin"]),
             deadline=time.monotonic() + 60)
    assert dest.read_bytes() == blobs["blob.bin"]
    assert sorted(os.listdir(tmp_path)) == sorted(["given"] + ["copy-" + name
                                                               for name in blobs])


def test_a_file_over_the_limit_is_refused_before_it_is_read(sandbox, tmp_path):
    files, path, blobs = sandbox
    size = len(blobs["blob.bin"])
    with pytest.raises(AgentFilesError) as refused:
        download(files, path + "/blob.bin", str(tmp_path / "copy"), max_bytes=size - 1)
    assert str(refused.value) == "%s%s/blob.bin is %d bytes, over the %d a download may take" \
        % (files.base_url, path, size, size - 1)
    with pytest.raises(AgentFilesError, match="answered 404"):
        download(files, path + "/missing.bin", str(tmp_path / "copy"), max_bytes=size)
    with pytest.raises(AgentFilesError, match="answered 400.*directory"):
        download(files, path, str(tmp_path / "copy"), max_bytes=size)
    with pytest.raises(AgentFilesError, match="did not finish in time"):
        download(files, path + "/blob.bin", str(tmp_path / "copy"), max_bytes=size,
                 deadline=time.monotonic() - 1)
    with pytest.raises(AgentFilesError, match="cannot write"):
        download(files, path + "/blob.bin", str(tmp_path / "no" / "copy"), max_bytes=size)
    assert sorted(os.listdir(tmp_path)) == ["given"]       # nothing half written


def test_a_silent_agent_costs_the_deadline_and_no_more(silent_agent, tmp_path):
    files = AgentFiles(silent_agent, 30.0, None, None)
    started = time.monotonic()
    try:
        with pytest.raises(AgentFilesError, match="did not finish in time"):
            download(files, sandbox_path("f", "e") + "/blob.bin", str(tmp_path / "copy"),
                     max_bytes=1 << 20, deadline=started + 0.5)
    finally:
        files.close()
    assert time.monotonic() - started < 5     # not the connection's 30 s
    assert os.listdir(tmp_path) == []
