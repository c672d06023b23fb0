"""Mesos events (RecordIO records of JSON) as ``addict.Dict`` objects, the
form pymesos users know: ``offer.resources[0].name``."""

import json
from collections.abc import Iterable
from typing import Any, Union

from addict import Dict


class EventDict(Dict):
    """An ``addict.Dict`` made from already decoded JSON pairs: nested
    objects are EventDicts already, so nothing is copied again (addict's
    own constructor would convert every nested object once more, which
    halves the driver's event throughput)."""

    def __init__(self, pairs: Iterable[tuple[str, Any]] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)   # addict's bookkeeping (parent, key, frozen)
        dict.update(self, pairs)


def decode_event(record: Union[str, bytes]) -> Any:
    """One RecordIO record -> Event as an ``addict.Dict``."""
    return json.loads(record, object_pairs_hook=EventDict)
