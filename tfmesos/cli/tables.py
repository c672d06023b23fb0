"""Tables on a terminal: aligned columns, the last one cut to the width,
times and durations as the run listings print them."""

import os
import re
import unicodedata

from ..terminal_text import UNPRINTABLE, escape_match, printable


def local_time(moment):
    """``2026-11-26 10:51:38`` in local time, or ``-``."""
    if moment is None:
        return "-"
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def duration_text(seconds):
    if seconds is None:
        return "-"
    if seconds < 60:
        return "%.1f s" % seconds
    minutes, seconds = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return "%dm%02ds" % (minutes, seconds)
    hours, minutes = divmod(minutes, 60)
    return "%dh%02dm" % (hours, minutes)


_UNPRINTABLE_IN_LINES = re.compile(UNPRINTABLE.pattern.replace("\x00-\x1f", "\x00-\x09\x0b-\x1f"))


class PrintableLines:
    """``out`` whose writes are shown as ``printable`` shows text, but for
    their line ends: a report made of lines, some of whose words come from a
    file anyone may have written (run.json in a shared runs directory)."""

    def __init__(self, out):
        self._out = out

    def write(self, text):
        return self._out.write(_UNPRINTABLE_IN_LINES.sub(escape_match, text))

    def __getattr__(self, name):
        return getattr(self._out, name)


def display_width(text):
    """The columns ``text`` takes on a terminal (as wcwidth counts them):
    two for a wide (East Asian) character, none for a mark that joins the
    one before (Mn, Me), a format character (Cf: U+200B, a variation
    selector's) or a Hangul vowel or final consonant jamo."""
    if text.isascii():
        return len(text)
    return sum(_char_width(char) for char in text)


def _char_width(char):
    if unicodedata.category(char) in ("Mn", "Me", "Cf") or "\u1160" <= char <= "\u11ff":
        return 0
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1


def cut_to_width(text, width):
    """``text``, or as much of it as fits ``width`` columns followed by ``...``."""
    if display_width(text) <= width:
        return text
    kept, used = [], 0
    for char in text:
        used += _char_width(char)
        if used > width - 3:
            break
        kept.append(char)
    return "".join(kept) + "..."


def table(rows, out):
    """Print ``rows`` (the first is the header) in aligned columns, every
    cell ``printable``."""
    rows = [[str(printable(cell)) for cell in row] for row in rows]
    widths = [max(display_width(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(cell + " " * (width - display_width(cell))
                            for cell, width in zip(row, widths)).rstrip() + "\n")


DEFAULT_WIDTH = 100    # where the width is not known (a pipe, no $COLUMNS)
MIN_LAST = 20          # the last column keeps at least this much of its text


def terminal_width(environ, out):
    """$COLUMNS, else the width of the terminal ``out`` is, else DEFAULT_WIDTH."""
    try:
        return int(environ.get("COLUMNS", ""))
    except ValueError:
        pass
    try:
        return os.get_terminal_size(out.fileno()).columns if out.isatty() else DEFAULT_WIDTH
    except (AttributeError, ValueError, OSError):
        return DEFAULT_WIDTH


def fit_last_column(rows, width):
    """``rows`` whose last cells are shortened (``...``) so that each line
    of ``table`` fits ``width`` (the last column keeps MIN_LAST characters)."""
    before = sum(max(display_width(str(row[i])) for row in rows) + 2
                 for i in range(len(rows[0]) - 1))
    room = max(MIN_LAST, width - before)
    return [row[:-1] + (cut_to_width(row[-1], room),) for row in rows]
