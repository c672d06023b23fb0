"""A call's body parsed as JSON, within bounds.

Python's parser recurses once per nesting level (a body of 100,000 ``[``
would end in a RecursionError and a dropped connection) and reads
``NaN``, ``Infinity`` and ``1e999``, numbers JSON does not have and Mesos'
parser refuses. No Mesos message nests anywhere near ``MAX_DEPTH`` deep.
"""

import json
import math
from typing import Any, Union

MAX_DEPTH = 100


class BodyJSONError(ValueError):
    """The text after "Failed to parse body into JSON: "."""


def parse(body):
    try:
        value = json.loads(body.decode("utf-8"))
    except RecursionError:
        raise BodyJSONError("nested more than %d levels deep" % MAX_DEPTH) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise BodyJSONError(str(exc)) from None
    check(value)
    return value


def check(value):
    """Raise BodyJSONError for nesting deeper than MAX_DEPTH or a number
    that is not finite, naming where it is (``subscribe.framework_info.x``)."""
    pending: list[tuple[Any, tuple[Union[str, int], ...], int]] = [(value, (), 1)]
    while pending:
        item, path, depth = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise BodyJSONError("'%s' is %s, which JSON does not have: use a finite number"
                                % (dotted(path), item))
        if not isinstance(item, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            raise BodyJSONError("nested more than %d levels deep" % MAX_DEPTH)
        children = item.items() if isinstance(item, dict) else enumerate(item)
        pending.extend((child, path + (key,), depth + 1) for key, child in children)


def dotted(path):
    text = ""
    for key in path:
        text += "[%d]" % key if isinstance(key, int) else ("." if text else "") + key
    return text or "(the body)"
