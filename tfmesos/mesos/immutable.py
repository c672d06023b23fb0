"""The FrameworkInfo fields a registered framework keeps for its life.

Mesos refuses an UPDATE_FRAMEWORK, or a SUBSCRIBE of a known framework id,
that changes its ``principal``, ``user`` or ``checkpoint``
(``validateUpdate``, src/master/validation.cpp: HTTP 400 "Updating
'FrameworkInfo.checkpoint' is unsupported"), and a re-SUBSCRIBE that names
others has its ``user`` and ``checkpoint`` silently put back
(``preserveImmutableFields``, same file). A scheduler that takes over a
framework registered by another (an older tfmesos, which subscribed
without ``checkpoint``) must say them as the master holds them, or every
later UPDATE_FRAMEWORK (its labels: the run's outcome) is refused.
"""

import logging
from collections.abc import Mapping
from typing import Any, Optional, Protocol

from ..exceptions import TFMesosError

logger = logging.getLogger(__name__)

IMMUTABLE_FIELDS = ("principal", "user", "checkpoint")


class FrameworkReader(Protocol):
    """What reads a framework's FrameworkInfo off the master
    (``master_reads.MasterReader``)."""

    def framework_info(self, framework_id: str) -> Optional[dict]:
        """The FrameworkInfo the master holds, None where it has no such framework."""


def with_immutable_fields(info: Mapping[str, Any], held: Mapping[str, Any]) -> dict[str, Any]:
    """``info`` (a FrameworkInfo) with the immutable fields as ``held`` (the
    framework's FrameworkInfo as registered) has them: one that ``held``
    lacks is left out (Mesos' default: no principal, no checkpoint)."""
    adopted = dict(info)
    for field in IMMUTABLE_FIELDS:
        if field in held:
            adopted[field] = held[field]
        else:
            adopted.pop(field, None)
    return adopted


def adopt_held(info: Mapping[str, Any], reader: FrameworkReader) -> dict[str, Any]:
    """``info`` (naming the id of a framework taken over) with the
    immutable fields as the master that ``reader`` reads holds them. As it
    was where the master cannot be read or has no such framework: the
    SUBSCRIBE then says what the master thinks."""
    framework_id = (info.get("id") or {}).get("value")
    if not framework_id:
        return dict(info)
    try:
        held = reader.framework_info(framework_id)
    except TFMesosError as exc:   # a MesosError, or a master it cannot name

        logger.warning("cannot read how the master registered framework %s (%s): it is "
                       "taken over as this tfmesos would register it", framework_id, exc)
        return dict(info)
    if held is None:
        return dict(info)
    adopted = with_immutable_fields(info, held)
    changed = [field for field in IMMUTABLE_FIELDS if adopted.get(field) != info.get(field)]
    if changed:
        logger.info("framework %s keeps what it registered with: %s", framework_id,
                    ", ".join("%s %s" % (field, held.get(field, "unset")) for field in changed))
    return adopted


__all__ = ["IMMUTABLE_FIELDS", "adopt_held", "with_immutable_fields"]
