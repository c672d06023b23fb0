"""What ``tfmesos.run``'s caller sees of its tasks' output (``function_output``)."""

import io
import sys

from tfmesos.core.function_output import Printer


class Slot:
    name = "worker:0"


def test_a_line_stdout_cannot_encode_is_shown_escaped_not_dropped(monkeypatch):
    # The caller's stdout in a locale that is not UTF-8; the task prints UTF-8.
    written = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(written, encoding="ascii"))
    printer = Printer()
    printer(Slot(), "stdout", "h\u00e9llo \u2713\nnext\n")
    sys.stdout.flush()
    assert written.getvalue() == b"[worker:0] h\\xe9llo \\u2713\n[worker:0] next\n"
