"""Replica mode's pure parts, no processes: output chunking and \\r
coalescing, the command's environment, tfrun's printing of chunks."""

import errno
import io
import os
import sys
import threading
import types

import pytest
from local_users import as_user, nobody

from tfmesos.cli import tfrun
from tfmesos.task import replica
from tfmesos.task.line_forwarder import CUT_MARKER, MAX_FRAGMENT, LineForwarder


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def forwarder(**kwargs):
    clock = Clock()
    return LineForwarder(clock=clock, **kwargs), clock


def test_complete_lines_go_out_at_once_in_one_fragment():
    lines, _ = forwarder()
    assert lines.feed("one\ntwo\n") == ["one\ntwo\n"]
    assert lines.timeout() is None and lines.poll() == [] and lines.close() == []


def test_unfinished_line_goes_out_after_the_interval_and_continues_without_newline():
    lines, clock = forwarder(interval=0.2)
    assert lines.feed("loading") == []
    assert lines.timeout() == pytest.approx(0.2)
    clock.now += 0.1
    assert lines.poll() == [] and lines.timeout() == pytest.approx(0.1)
    clock.now += 0.1
    assert lines.poll() == ["loading"]
    assert lines.timeout() is None
    assert lines.feed("... ok\nnext") == ["... ok\n"]
    assert lines.close() == ["next\n"]


def test_progress_is_coalesced_to_its_last_state_and_redrawn_with_cr():
    lines, clock = forwarder(interval=0.2)
    assert lines.feed("".join("\rstep %d/100" % i for i in range(50))) == []
    clock.now += 0.2
    assert lines.poll() == ["step 49/100"]  # nothing of this line was shown: no \r needed
    assert lines.feed("".join("\rstep %d/100" % i for i in range(50, 100))) == []
    clock.now += 0.2
    assert lines.poll() == ["\rstep 99/100"]
    assert lines.feed("\rdone 100%\n") == ["\rdone 100%\n"]


def test_crlf_is_a_newline_and_a_trailing_cr_erases_nothing():
    lines, clock = forwarder()
    assert lines.feed("hello\r\nworld\r") == ["hello\n"]
    clock.now += 1
    assert lines.poll() == ["world"]
    assert lines.feed("\n") == ["\n"]
    assert lines.feed("a\r") == [] and lines.feed("\nb\r\r\n") == ["a\nb\n"]


def test_long_line_is_cut_with_a_marker_and_fragments_are_bounded():
    lines, clock = forwarder(max_line=1000, max_fragment=300)
    out = lines.feed("x" * 700)
    clock.now += 1
    out += lines.poll() + lines.feed("y" * 800) + lines.feed("z\nshort\n")
    assert all(len(fragment) <= 300 for fragment in out)
    text = "".join(out)
    assert text == "x" * 700 + "y" * 300 + CUT_MARKER % 501 + "\nshort\n"


def test_progress_states_are_each_cut_not_summed():
    lines, _ = forwarder(max_line=10)
    assert "".join(lines.feed("\r" + "a" * 8) + lines.feed("\r" + "b" * 12 + "\n")) \
        == "b" * 10 + CUT_MARKER % 2 + "\n"


def test_close_ends_an_unfinished_line_once():
    lines, clock = forwarder()
    lines.feed("half")
    clock.now += 1
    assert lines.poll() == ["half"]
    assert lines.close() == ["\n"]
    fresh, _ = forwarder()
    assert fresh.feed("tail") == [] and fresh.close() == ["tail\n"]


def test_a_200000_character_progress_stream_costs_a_few_small_fragments():
    lines, clock = forwarder()
    stream = "".join("\rstep %d/12000" % i for i in range(12000)) + "\rdone 100%\n"
    assert len(stream) > 190000
    out = []
    for start in range(0, len(stream), 65536):
        out += lines.feed(stream[start:start + 65536])
        clock.now += 0.25
        out += lines.poll()
    out += lines.close()
    assert "".join(out).endswith("\rdone 100%\n")
    assert sum(map(len, out)) < 200
    assert "\n" not in "".join(out)[:-1]


class FakeConnection:
    def __init__(self):
        self.sent = []

    def send(self, message):
        self.sent.append(message)


def test_pump_copies_every_byte_and_forwards_split_utf8_intact():
    command = replica.ReplicaCommand.__new__(replica.ReplicaCommand)
    command.conn, command.forward = FakeConnection(), True
    read_end, write_end = os.pipe()
    sink = types.SimpleNamespace(buffer=io.BytesIO(), flush=lambda: None)
    sink.write = sink.buffer.write
    pump = threading.Thread(target=command._pump,
                            args=(os.fdopen(read_end, "rb", 0), "stdout", sink))
    pump.start()
    data = "héllo wörld\n".encode() * 10000 + b"\xe2\x82"  # ends in half a euro sign
    os.write(write_end, data[:5])
    os.write(write_end, data[5:])
    os.write(write_end, b"\xac!")
    os.close(write_end)
    pump.join(10)
    assert sink.buffer.getvalue() == data + b"\xac!"
    assert all(m["type"] == "log" and m["stream"] == "stdout" for m in command.conn.sent)
    assert all(len(m["data"]) <= MAX_FRAGMENT for m in command.conn.sent)
    assert "".join(m["data"] for m in command.conn.sent) == (data + b"\xac!\n").decode()


class FullDisk:
    """A sandbox file (``target.buffer``) on a disk that is full after
    ``room`` bytes: a write past it fails with ENOSPC, as a file's would."""

    def __init__(self, room):
        self.room, self.written, self.buffer = room, bytearray(), self

    def write(self, data):
        if len(self.written) + len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.written += data

    def flush(self):
        pass


def test_a_sandbox_file_that_cannot_be_written_stops_neither_the_pump_nor_the_forwarding():
    # The pump thread ended at the first ENOSPC (its traceback on the same
    # full disk): no one read the pipe any more, the command blocked in its
    # next write for ever and the rest of its output never reached tfrun.
    command = replica.ReplicaCommand.__new__(replica.ReplicaCommand)
    command.conn, command.forward = FakeConnection(), True
    read_end, write_end = os.pipe()
    stream, sandbox = os.fdopen(read_end, "rb", 0), FullDisk(100000)
    data = b"".join(b"line %d\n" % n for n in range(100000))   # 688,890 bytes

    def command_writes():   # the command: everything, then its end
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view):]
        except BrokenPipeError:   # the test gave up: the reading end closed
            pass
        finally:
            os.close(write_end)

    pump = threading.Thread(target=command._pump, args=(stream, "stdout", sandbox), daemon=True)
    writer = threading.Thread(target=command_writes, daemon=True)
    pump.start()
    writer.start()
    writer.join(60)
    pump.join(60)
    blocked = writer.is_alive()
    stream.close()     # releases a blocked writer
    writer.join(60)
    assert not blocked, "the command was left blocked: the pump no longer read its output"
    assert not pump.is_alive()
    assert 0 < len(sandbox.written) <= 100000 and data.startswith(sandbox.written)
    out = "".join(m["data"] for m in command.conn.sent if m["stream"] == "stdout")
    assert out == data.decode(), (len(out), len(data))
    said = [m["data"] for m in command.conn.sent if m["stream"] == "stderr"]
    assert said == ["tfmesos: cannot write the sandbox's stdout (No space left on device): "
                    "its output goes on to tfrun only\n"]


def test_secrets_are_kept_from_the_command_environment():
    env = replica.command_environment(
        {"TFMESOS_SECRET": "ab12", "TFMESOS_TASK_ID": "t1", "TFMESOS_TEST_SESSION": "x",
         "PATH": "/bin", "MY_SECRET": "mine"}, {"TFMESOS_JOB_NAME": "worker", "TFMESOS_TOKEN": "t"})
    assert env == {"TFMESOS_TASK_ID": "t1", "TFMESOS_TEST_SESSION": "x", "PATH": "/bin",
                   "MY_SECRET": "mine", "TFMESOS_JOB_NAME": "worker"}


def test_a_torch_runs_torchrun_keeps_its_log_folder_in_the_sandbox(tmp_path):
    torch, sandbox = {"PET_NNODES": "2", "PATH": "/bin"}, str(tmp_path)
    assert replica.torch_log_dir(torch, sandbox) == dict(
        torch, PET_LOG_DIR=os.path.join(sandbox, "torchelastic"))
    assert replica.torch_log_dir(dict(torch, PET_LOG_DIR="/logs"), sandbox)["PET_LOG_DIR"] \
        == "/logs"                                        # the user's wins
    assert "PET_LOG_DIR" not in replica.torch_log_dir({"TF_CONFIG": "{}"}, sandbox)
    assert replica.torch_log_dir(torch, str(tmp_path / "gone")) == torch


def test_a_sandbox_the_task_cannot_write_to_keeps_torchruns_default(tmp_path):
    # another local user's task (nobody) in a sandbox it does not own: torchrun
    # would fail to make its folder there
    other = nobody("switching users needs root")
    tmp_path.chmod(0o755)
    told = as_user(other, lambda: repr(sorted(replica.torch_log_dir(
        {"PET_NNODES": "2"}, str(tmp_path)))))
    assert told == "['PET_NNODES']"
    assert "PET_LOG_DIR" in replica.torch_log_dir({"PET_NNODES": "2"}, str(tmp_path))  # root's


def print_chunks(monkeypatch, chunks):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(tfrun, "_open_lines", {})
    monkeypatch.setattr(tfrun, "_cut_lines", {}, raising=False)
    for name, text in chunks:
        tfrun.print_log(types.SimpleNamespace(name=name), "stdout", text)
    return out.getvalue()


def test_print_log_prefixes_lines_and_continues_them_across_chunks(monkeypatch):
    assert print_chunks(monkeypatch, [("worker:0", "a\n\nb"), ("worker:0", "c\nd\n")]) \
        == "[worker:0] a\n[worker:0] \n[worker:0] bc\n[worker:0] d\n"


def test_print_log_redraws_progress_with_its_prefix(monkeypatch):
    out = print_chunks(monkeypatch, [("worker:0", "step 1"), ("worker:0", "\rstep 2"),
                                     ("worker:0", "\rdone 100%\n")])
    assert out == "[worker:0] step 1\r[worker:0] step 2\r[worker:0] done 100%\n"


def test_print_log_ends_an_unfinished_line_when_another_task_prints(monkeypatch):
    out = print_chunks(monkeypatch, [("worker:0", "50%"), ("worker:1", "hi\n"),
                                     ("worker:0", "\r100%\n")])
    assert out == "[worker:0] 50%\n[worker:1] hi\n[worker:0] \r[worker:0] 100%\n"


def test_print_log_ends_a_line_another_task_cut_with_no_empty_line(monkeypatch):
    # print("1") reaching tfrun as "1" then "\n" with another task's line in
    # between: that line ended it; the "\n" that comes after is no line of its own.
    out = print_chunks(monkeypatch, [("worker:0", "1"), ("worker:1", "hi\n"),
                                     ("worker:0", "\n"), ("worker:1", "x"), ("worker:0", "2"),
                                     ("worker:1", "\ny\n"), ("worker:0", "\n3\n")])
    assert out == ("[worker:0] 1\n[worker:1] hi\n[worker:1] x\n[worker:0] 2\n"
                   "[worker:1] y\n[worker:0] 3\n")

