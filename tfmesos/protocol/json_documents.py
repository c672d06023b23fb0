"""JSON documents read from what someone else may write (a run record, a
frame, a tag, a datagram): ``loads`` and ``load`` as ``json``'s, but a
document nested past the parser's depth is a ``ValueError`` like any
other that is not JSON, not the ``RecursionError`` that ``json`` raises
past ~1,000 levels (``"[" * 5000`` is 5 kB). Callers catch ``ValueError``."""

import json

# typing for the checkers only, as in wire.py (the task entry imports this).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, Union


def loads(text: "Union[str, bytes]") -> "Any":
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested deeper than the JSON parser reads") from None


def load(handle: "IO[str]") -> "Any":
    return loads(handle.read())


__all__ = ["loads", "load"]
