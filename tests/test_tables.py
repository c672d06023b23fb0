"""Tables on a terminal (``cli/tables.py``)."""

import io

from tfmesos.cli.tables import display_width, table


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
