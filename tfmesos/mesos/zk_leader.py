"""Which registered Mesos master leads (``zk://`` masters): pure logic,
no ZooKeeper; ``zookeeper.ZKDetector`` reads the children and keeps the
answer current.

Mesos masters register as the children ``json.info_<sequence>`` of a path,
each holding a JSON ``MasterInfo`` (decoded by :mod:`tfmesos.mesos.master_info`);
the child with the lowest sequence number is the leader
(``src/master/detector/zookeeper.cpp`` and ``src/zookeeper/group.cpp`` in
apache/mesos).
"""

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple, Optional

from tfmesos.mesos.master_info import Decoded

__all__ = ["Leadership", "choose_leader", "master_children"]

# A child "json.info_0000000012" of the masters' path: Mesos >= 0.24 writes
# its MasterInfo as JSON under the label "json.info"; ZooKeeper appends the
# zero-padded sequence number. Older "info_<seq>" children hold protobuf.
_JSON_INFO_CHILD = re.compile(r"json\.info_(\d+)")


class Leadership(NamedTuple):
    """What the children of the masters' path say; see :func:`choose_leader`."""

    leader: Optional[str] = None  # the leading master's URL, None if unknown
    candidates: tuple[str, ...] = ()  # where to subscribe: the leader, or none
    members: tuple[str, ...] = ()  # json.info_<seq> children by sequence
    ignored: tuple[str, ...] = ()  # every other child, sorted
    problem: Optional[str] = None  # why the lowest member gives no leader
    unresolved: bool = False  # some member's znode could not be read


def master_children(children: Iterable[str]) -> tuple[str, ...]:
    """The ``json.info_<seq>`` names among ``children``, lowest sequence first."""
    members = []
    for name in children:
        match = _JSON_INFO_CHILD.fullmatch(name)
        if match:
            members.append((int(match.group(1)), name))
    return tuple(name for _, name in sorted(members))


def choose_leader(children: Iterable[str], infos: Mapping[str, Decoded],
                  unreadable: Optional[Mapping[str, str]] = None) -> Leadership:
    """The leader among the masters' path ``children`` (names, any order).

    ``infos`` maps ``json.info_<seq>`` children to their decoded MasterInfo,
    ``(url, None)`` or ``(None, why it is unusable)`` (see
    :func:`~tfmesos.mesos.master_info.decode_master_info`); ``unreadable``
    maps those whose znode could not be read now to a phrase saying why.
    Children that vanished while being read are left out of ``children`` by
    the caller.

    The member with the lowest sequence number leads, gaps or not; if its
    MasterInfo is unusable or unread there is no leader, and ``problem``
    says why. Other children (``log_replicas``, protobuf ``info_<seq>``)
    are only reported, in ``ignored``.
    """
    names = tuple(children)
    unread = unreadable or {}
    members = master_children(names)
    ignored = tuple(sorted(name for name in names if not _JSON_INFO_CHILD.fullmatch(name)))
    leader: Optional[str] = None
    problem: Optional[str] = None
    if members:
        leader, problem = infos.get(members[0], (None, unread.get(members[0])))
    return Leadership(
        leader=leader,
        # The leader alone, as Mesos' detector reads only the lowest member's
        # data (src/master/detector/zookeeper.cpp) and its scheduler library
        # connects only there (src/scheduler/scheduler.cpp): whoever may add a
        # child to the path would get the run's SUBSCRIBE, its credentials
        # and, subscribed, its tasks (a non-leader that is a real master
        # answers with a redirect to the leader).
        candidates=(leader,) if leader else (),
        members=members,
        ignored=ignored,
        problem=problem,
        unresolved=any(name in unread for name in members),
    )
