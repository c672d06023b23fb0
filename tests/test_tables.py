"""Tables on a terminal (``cli/tables.py``)."""

import io

from tfmesos.cli.tables import display_width, fit_last_column, table


def test_columns_align_on_a_terminal_with_wide_and_combining_characters():
    # tfrun -n "名前 run": each of 名 and 前 takes two columns of a terminal;
    # ljust counted one, and every column after the name was shifted.
    out = io.StringIO()
    table([("ID", "NAME", "MODE"), ("1b264e04", "名前 run", "replica"),
           ("2c3d4e5f", "cafe\u0301", "fine")], out)
    lines = out.getvalue().splitlines()
    assert [display_width(line[:line.index(mode)]) for line, mode in
            zip(lines, ("MODE", "replica", "fine"))] == [20, 20, 20]
    assert display_width("名前 run") == 8 and display_width("cafe\u0301") == 4


def test_marks_and_format_characters_take_no_column_and_the_last_one_is_cut_by_columns():
    # As wcwidth counts them: Thai and Devanagari vowel signs (Mn of class 0),
    # a variation selector and a zero-width space (Cf), Hangul medial jamo.
    assert [display_width(text) for text in (
        "\u0e17\u0e35\u0e48\u0e19\u0e35\u0e48", "\u0915\u0941\u092e\u093e\u0930",
        "a\ufe0f", "\u200bx", "\u1100\u1161")] == [2, 4, 1, 1, 2]
    rows = [("ID", "COMMAND"), ("1", "名前" * 30)]
    (header, row) = fit_last_column(rows, 40)
    assert display_width("  ".join(row)) <= 40 and row[1].endswith("...")

