"""tfrun's console (``tfmesos.core.console``, and ``tfmesos.cli.tfrun_console``
in place of its streams): a reader that does not read tfrun's output
(``tfrun ... | less`` left on one page, a terminal stopped with Ctrl-S)
never holds the run up, and what waits for it is bounded."""

import io
import sys
import threading

import pytest
from waiting import wait_until

from tfmesos.cli import tfrun_console as cli_console
from tfmesos.core import console


class Blocking(io.StringIO):
    """A stream whose writes wait for ``opened`` (a reader that does not
    read), then raise ``error`` if one is set."""

    def __init__(self, error=None):
        super().__init__()
        self.opened = threading.Event()
        self.error = error

    def write(self, text):
        self.opened.wait(60)
        if self.error is not None:
            raise self.error
        return super().write(text)


def test_writes_keep_their_order_across_both_streams_and_never_wait_for_the_reader():
    out, err = Blocking(), Blocking()
    writer = console.Console({"stdout": out, "stderr": err})
    for index in range(5):
        writer.write("stdout", "out %d\n" % index, output=True)
        writer.write("stderr", "tfrun: line %d\n" % index)   # returns: the reader reads nothing
    assert out.getvalue() == err.getvalue() == ""
    out.opened.set()
    err.opened.set()
    assert writer.drain(30)
    assert out.getvalue() == "".join("out %d\n" % i for i in range(5))
    assert err.getvalue() == "".join("tfrun: line %d\n" % i for i in range(5))


def test_past_the_backlog_the_tasks_output_is_left_out_and_said_so_tfruns_own_lines_are_not():
    out, err = Blocking(), Blocking()
    writer = console.Console({"stdout": out, "stderr": err}, backlog=100)
    writer.write("stdout", "x" * 60 + "\n", output=True)   # the writer takes it, and waits
    wait_until(lambda: writer._busy)
    writer.write("stdout", "y" * 60 + "\n", output=True)   # 122 bytes not written yet
    writer.write("stdout", "z" * 60 + "\n", output=True)   # past 100: left out
    writer.write("stdout", "w" * 60 + "\n", output=True)   # left out
    writer.write("stderr", "tfrun: task worker:1 exited with code 3\n")   # never left out
    out.opened.set()
    err.opened.set()
    assert writer.drain(30)
    assert out.getvalue() == "x" * 60 + "\n" + "y" * 60 + "\n"
    assert err.getvalue() == (
        "tfrun: task worker:1 exited with code 3\n"
        "tfrun: warning: the tasks' output came faster than this console was read: 122 bytes "
        "of it are not shown here (tfmesos logs shows all of it)\n")


def test_a_closed_pipe_under_the_tasks_output_calls_on_closed_and_is_raised_next():
    closed = threading.Event()
    out = Blocking(BrokenPipeError(32, "Broken pipe"))
    out.opened.set()
    writer = console.Console({"stdout": out, "stderr": io.StringIO()}, on_closed=closed.set)
    writer.write("stdout", "hi\n", output=True)
    assert closed.wait(30) and writer.closed
    with pytest.raises(BrokenPipeError):
        writer.write("stdout", "more\n", output=True)


def test_a_closed_stderr_under_tfruns_own_lines_stops_nothing():
    closed = threading.Event()
    err = Blocking(BrokenPipeError(32, "Broken pipe"))
    err.opened.set()
    writer = console.Console({"stdout": io.StringIO(), "stderr": err}, on_closed=closed.set)
    writer.write("stderr", "tfrun: cluster ready\n")
    assert writer.drain(30)
    assert not closed.is_set() and not writer.closed


def test_running_puts_the_streams_back_once_everything_was_written():
    real_out, real_err = sys.stdout, sys.stderr
    with cli_console.running() as outer:
        assert isinstance(sys.stdout, cli_console.ConsoleStream)
        with cli_console.running() as inner:   # inside one: that one
            assert inner is outer
        print("through the console")
    assert (sys.stdout, sys.stderr) == (real_out, real_err)


def test_abandoned_what_is_queued_is_left_out_and_no_wait_is_for_the_reader():
    # A run ended by a signal whose reader does not read: its sender (timeout,
    # systemd, docker stop) waits for tfrun's end, which waited for the reader.
    out, err = Blocking(), Blocking()
    writer = console.Console({"stdout": out, "stderr": err})
    writer.write("stdout", "x" * 10, output=True)   # the writer takes it, and waits
    wait_until(lambda: writer._busy)
    writer.write("stdout", "y" * 20, output=True)
    writer.write("stderr", "tfrun: interrupted\n")
    writer.write("stdout", "tfrun: said on stdout\n")
    assert not writer.drain(0.1)
    # The launcher's lines for another stream than the stuck one: for the
    # caller to write where they are taken; the rest left out.
    assert writer.abandon() == ("stdout", [("stderr", "tfrun: interrupted\n")])
    assert writer.drain(0)
    writer.finish()   # returns: nothing is waited for any more
    writer.write("stdout", "z", output=True)   # leaving: nothing more is queued
    assert writer.drain(0)
    out.opened.set()
    err.opened.set()


def no_thread(self):
    raise RuntimeError("can't start new thread")


def test_without_a_thread_to_be_had_the_writer_writes_itself_and_finish_returns(monkeypatch):
    # RLIMIT_NPROC reached (ulimit -u): the writer thread cannot start; the
    # text was queued for it, and finish() waited for it forever.
    monkeypatch.setattr(threading.Thread, "start", no_thread)
    out, err = io.StringIO(), io.StringIO()
    writer = console.Console({"stdout": out, "stderr": err})
    writer.write("stderr", "tfrun: cluster ready\n")
    writer.write("stdout", "[worker:0] 1\n", output=True)
    assert err.getvalue() == "tfrun: cluster ready\n"   # written at once, by the caller
    assert out.getvalue() == "[worker:0] 1\n"
    assert writer.drain(5)
    finishing = threading.Thread(target=writer.finish, daemon=True)
    monkeypatch.undo()   # (the test's own thread)
    finishing.start()
    finishing.join(10)
    assert not finishing.is_alive(), "finish() waits for a writer that never started"


def test_without_a_thread_a_closed_pipe_is_raised_by_the_next_write(monkeypatch):
    monkeypatch.setattr(threading.Thread, "start", no_thread)
    closed = threading.Event()
    out = Blocking(BrokenPipeError(32, "Broken pipe"))
    out.opened.set()
    writer = console.Console({"stdout": out, "stderr": io.StringIO()}, on_closed=closed.set)
    writer.write("stdout", "hi\n", output=True)
    assert closed.is_set() and writer.closed
    with pytest.raises(BrokenPipeError):
        writer.write("stdout", "more\n", output=True)


def test_running_without_a_thread_puts_the_streams_back(monkeypatch, capsys):
    real_out, real_err = sys.stdout, sys.stderr
    monkeypatch.setattr(threading.Thread, "start", no_thread)
    with cli_console.running():
        print("through the console")
        print("tfrun: a line", file=sys.stderr)
    assert (sys.stdout, sys.stderr) == (real_out, real_err)
    assert capsys.readouterr() == ("through the console\n", "tfrun: a line\n")
