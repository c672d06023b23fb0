"""What ``tfmesos.run``'s caller sees of its tasks' output (``function_output``):
written by a console's thread, so that a caller whose output nobody reads
never holds the run up, and what waits for the reader is bounded."""

import io
import sys
import threading

from waiting import wait_until

from tfmesos.core.console import Console
from tfmesos.core.function_output import Printer


class Slot:
    name = "worker:0"


class Blocking(io.StringIO):
    """A stream whose writes wait for ``opened`` (a reader that does not read)."""

    def __init__(self):
        super().__init__()
        self.opened = threading.Event()

    def write(self, text):
        self.opened.wait(60)
        return super().write(text)


def console_threads():
    return [thread for thread in threading.enumerate() if thread.name == "tfmesos-console"]


def test_a_line_stdout_cannot_encode_is_shown_escaped_not_dropped(monkeypatch):
    # The caller's stdout in a locale that is not UTF-8; the task prints UTF-8.
    written = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(written, encoding="ascii"))
    printer = Printer()
    printer(Slot(), "stdout", "h\u00e9llo \u2713\nnext\n")
    printer.close()
    assert written.getvalue() == b"[worker:0] h\\xe9llo \\u2713\n[worker:0] next\n"


def test_the_output_and_tfmesos_lines_never_wait_for_the_reader_and_come_in_order(monkeypatch):
    # Before the console, the printer wrote from the thread that runs the
    # run: a caller piped to a pager held the run up (a failed task was not
    # acted on until the output was read).
    out, err = Blocking(), Blocking()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    printer = Printer()
    for index in range(3):
        printer(Slot(), "stdout", "step %d\n" % index)   # returns: nobody reads
    printer.say("task worker:1 exited with code 3")
    printer(Slot(), "stdout", "unfinished")
    assert out.getvalue() == err.getvalue() == ""
    closing = threading.Thread(target=printer.close)
    closing.start()
    closing.join(0.5)
    assert closing.is_alive()   # close waits until the reader read it all
    out.opened.set()
    err.opened.set()
    closing.join(30)
    assert not closing.is_alive()
    assert out.getvalue() == "".join("[worker:0] step %d\n" % i for i in range(3)) + \
        "[worker:0] unfinished\n"
    assert err.getvalue() == "tfmesos: task worker:1 exited with code 3\n"
    wait_until(lambda: not console_threads(), timeout=30,
               message="the printer's console thread outlived its close")


def test_past_the_backlog_the_tasks_output_is_left_out_and_tfmesos_says_so(monkeypatch):
    out = Blocking()
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    console = Console({"stdout": out, "stderr": err}, backlog=100, prog="tfmesos")
    printer = Printer(console)
    printer(Slot(), "stdout", "x" * 60 + "\n")   # the writer takes it, and waits
    wait_until(lambda: console._busy)
    printer(Slot(), "stdout", "y" * 60 + "\n")   # 72 bytes waiting
    printer(Slot(), "stdout", "z" * 60 + "\n")   # 144 past 100: left out
    printer.say("task worker:1 exited with code 3")   # never left out
    out.opened.set()
    printer.close()
    assert out.getvalue() == "[worker:0] %s\n[worker:0] %s\n" % ("x" * 60, "y" * 60)
    assert err.getvalue() == (
        "tfmesos: task worker:1 exited with code 3\n"
        "tfmesos: warning: the tasks' output came faster than this console was read: 72 bytes "
        "of it are not shown here (tfmesos logs shows all of it)\n")


def test_a_stream_that_refuses_writes_is_left_alone(monkeypatch):
    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    printer = Printer()
    for index in range(3):
        printer(Slot(), "stdout", "line %d\n" % index)
    printer.close()   # returns: nothing raised, nothing waits
