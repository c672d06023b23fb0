"""Text from outside shown on a terminal without being obeyed: what other
frameworks put in their names and labels, a server's answer, a ZooKeeper
entry. ``printable`` escapes its control characters; ``quoted`` also makes
it one bounded line, for a message that quotes a master's, an agent's or
ZooKeeper's words."""

import re
from typing import Union

__all__ = ["MAX_QUOTED", "SHOWN_AT_MOST", "UNPRINTABLE", "escape_match", "printable", "quoted"]

# C0 and C1 control characters, DEL, and the marks that reorder text on a
# terminal (Unicode bidirectional controls): what a terminal obeys instead
# of showing.
UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

MAX_QUOTED = 200      # characters of outside text a message quotes at most
_MORE = "..."         # where the quoted text was cut
SHOWN_AT_MOST = 4    # times the limit of characters (or bytes) looked at
_PIECES = re.compile("(%s)" % UNPRINTABLE.pattern)


def escape_match(match: "re.Match[str]") -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def printable(text: object) -> str:
    """``text`` with every control character written as its escape
    (``\\x1b``, ``\\n``, ``\\u202e``): what other frameworks put in
    their names and labels is shown, never obeyed by the terminal."""
    return UNPRINTABLE.sub(escape_match, str(text))


def quoted(text: Union[str, bytes, bytearray], limit: int = MAX_QUOTED) -> str:
    """``text`` (bytes are read as UTF-8) as one line a message may quote:
    its runs of white space (line ends included) one space, its control
    characters escaped as ``printable`` writes them, and at most ``limit``
    characters, the last of them ``...`` where it was cut (never inside an
    escape)."""
    # What can show: a body of megabytes is not folded whole.
    text = text[:SHOWN_AT_MOST * limit]
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    folded = " ".join(str(text).split())
    shown = printable(folded)
    if len(shown) <= limit:
        return shown
    room = max(0, limit - len(_MORE))
    pieces = []
    for index, piece in enumerate(_PIECES.split(folded)):
        # Even pieces are plain text, odd ones a character to escape: an
        # escape goes whole or not at all.
        piece = printable(piece) if index % 2 else piece
        if index % 2 and len(piece) > room:
            break
        pieces.append(piece[:room])
        room -= len(pieces[-1])
        if not room:
            break
    return "".join(pieces) + _MORE
