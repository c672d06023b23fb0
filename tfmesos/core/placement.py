"""Offer matching as pure functions: offers and pending tasks in, launch
decisions out. No driver, no network: unit tests feed synthetic offers.

A request may be pinned to an agent and one port (a worker relaunched where
it ran, ``tfmesos.core.recovery``); ports ``held`` for such requests are kept out
of every other request. A request may ask for ``extra_ports`` besides its
own (worker 0's second port, for the coordinator of Keras' multi-process
``keras.distribution``): they come from the same offer, so they are on the
task's host, and an offer that came with ports must have them all left,
as it must have the task's own (one without ports fits as before: the task
has none, and picks its own).

Resources taken for a task are cut from the offered resource entries, so a
task's resources keep the offer's ``allocation_info``, ``role`` and
``reservations`` exactly as Mesos requires. The offers themselves are never
modified: each task's entries are new dicts that share the offer entry's
other fields.
"""

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Generic, Optional, TypedDict, TypeVar

from ..field_methods import FieldMethods
from .inputs import milli

# Mesos' JSON messages as the driver hands them over (an ``addict.Dict``
# is a dict): an Offer, a Resource.
Offer = Mapping[str, Any]
Resource = Mapping[str, Any]
# What a request stands for, to the caller (a ``TaskSlot``): placement never looks.
K = TypeVar("K")


@dataclasses.dataclass(eq=False, repr=False)
class TaskRequest(FieldMethods, Generic[K]):
    """What one task needs; ``key`` identifies it to the caller."""

    key: K
    cpus: float
    mem: float
    gpus: int = 0
    port: bool = True  # take one port from the offer's ``ports`` when it has them
    agent_id: Optional[str] = None    # only an offer of this agent fits
    fixed_port: Optional[int] = None  # exactly this (held) port, or no fit
    extra_ports: int = 0              # more ports from the offer, besides ``port``


@dataclasses.dataclass(eq=False, repr=False)
class Assignment(FieldMethods, Generic[K]):
    """A request placed on an offer: the TaskInfo ``resources``, the port
    (None when the offer had no ports), the GPU ids (SET offers only), the
    ``extra_ports`` asked for (empty when the offer had no ports) and the
    offer's ``url`` (where its agent serves its sandboxes; None without)."""

    request: TaskRequest[K]
    offer_id: str
    agent_id: str
    hostname: str
    resources: list[dict[str, Any]]
    port: Optional[int]
    gpu_ids: list[str]
    extra_ports: list[int] = dataclasses.field(default_factory=list)
    agent_url: Optional[dict[str, Any]] = None


@dataclasses.dataclass(eq=False, repr=False)
class Placement(FieldMethods, Generic[K]):
    launches: dict[str, list[Assignment[K]]]    # offer id -> [Assignment, ...]
    unused: list[str]                           # offer ids nothing was placed on
    unplaced: list[TaskRequest[K]]              # requests no offer could take


class OfferSummary(TypedDict):
    """An offer's size, for messages and the most a run held at once."""

    cpus: float
    mem: float
    gpus: int
    agent: str


def _cut(entry: Resource, field: str, value: object) -> dict[str, Any]:
    """A task's share of ``entry``: a shallow copy with ``field`` replaced."""
    piece = dict(entry)
    piece[field] = value
    return piece


class OfferPool:
    """The resources of one offer, consumed as tasks are placed on it.

    What is left is tracked beside the offer's entries, which stay as they
    came: SCALAR values, GPU SET items, and per ``ports`` entry its ranges
    with the next free port of the current one.
    """

    def __init__(self, offer: Offer, held: Iterable[int] = (), port_agent: bool = False
                 ) -> None:
        self.offer_id: str = offer["id"]["value"]
        self.agent_id: str = offer["agent_id"]["value"]
        self.hostname: str = offer.get("hostname", "")
        self.agent_url: Optional[dict[str, Any]] = offer.get("url")
        # name -> [[entry, thousandths left], ...]
        self._scalars: dict[str, list[list[Any]]] = {}
        self._gpu_sets: list[list[Any]] = []  # [[entry, items left], ...]
        # [[entry, [(begin, end), ...], index, next port], ...]
        self._ports: list[list[Any]] = []
        self._held_ports = frozenset(held)
        # held port in this offer -> its entry (for pinned requests only)
        self._held: dict[int, Resource] = {}
        for res in offer.get("resources", ()):
            self._add(res)
        self._totals = {name: sum(left for _, left in parts)
                        for name, parts in self._scalars.items()}
        self._count_gpu_sets()
        self._has_ports = any(p[2] < len(p[1]) for p in self._ports)
        # An agent that offered ports before (``port_agent``) and offers none
        # now has them all in use: not one without ports, whose tasks pick
        # their own.
        self._offered_ports = self._has_ports or port_agent
        self.gpu_agent = self.gpu_count() > 0  # as offered, before anything was taken

    def _add(self, res: Resource) -> None:
        name, kind = res.get("name", ""), res.get("type", "SCALAR")
        if kind == "SCALAR":
            value = res.get("scalar", {}).get("value", 0.0)
            self._scalars.setdefault(name, []).append([res, milli(value)])
        elif name == "gpus" and kind == "SET":
            self._gpu_sets.append([res, list(res.get("set", {}).get("item", ()))])
        elif name == "ports" and kind == "RANGES":
            ranges = [(int(r["begin"]), int(r["end"]))
                      for r in res.get("ranges", {}).get("range", ())]
            ranges = self._hold(res, ranges)
            self._ports.append([res, ranges, 0, ranges[0][0] if ranges else None])

    def _hold(self, entry: Resource, ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """``ranges`` without the held ports, which are kept aside."""
        left = []
        for begin, end in ranges:
            for port in sorted(p for p in self._held_ports if begin <= p <= end):
                self._held[port] = entry
                if begin < port:
                    left.append((begin, port - 1))
                begin = port + 1
            if begin <= end:
                left.append((begin, end))
        return left

    def _count_gpu_sets(self) -> None:
        sizes = [len(items) for _, items in self._gpu_sets]
        self._gpu_set_items = sum(sizes)
        self._largest_gpu_set = max(sizes, default=0)

    def scalar(self, name: str) -> float:
        return self._totals.get(name, 0) / 1000

    def gpu_count(self) -> int:
        return self._totals.get("gpus", 0) // 1000 + self._gpu_set_items

    def ports(self) -> list[tuple[int, int]]:
        left: list[tuple[int, int]] = []
        for _, ranges, index, begin in self._ports:
            if index < len(ranges):
                left.append((begin, ranges[index][1]))
                left.extend(ranges[index + 1:])
        return left

    def has_ports(self) -> bool:
        return self._has_ports

    def port_count(self) -> int:
        """How many ports are left (the held ones not counted)."""
        return sum(end - begin + 1 for begin, end in self.ports())

    def fits(self, request: TaskRequest[Any]) -> bool:
        if request.agent_id is not None and request.agent_id != self.agent_id:
            return False
        if request.fixed_port is not None and request.fixed_port not in self._held:
            return False
        needs = request.extra_ports + (1 if request.port and request.fixed_port is None else 0)
        if needs and self._offered_ports and self.port_count() < needs:
            # A task without its port would bind one the agent never offered.
            return False   # (ports only shrink: an offer that cannot never will)
        totals = self._totals
        return (totals.get("cpus", 0) >= milli(request.cpus)
                and totals.get("mem", 0) >= milli(request.mem)
                and (request.gpus <= 0 or totals.get("gpus", 0) >= 1000 * request.gpus
                     or self._largest_gpu_set >= request.gpus))

    def take(self, request: TaskRequest[Any]
             ) -> tuple[list[dict[str, Any]], Optional[int], list[str], list[int]]:
        """Cut ``request`` out of this offer; returns (resources, port, gpu_ids,
        extra ports)."""
        resources = self._take_scalar("cpus", request.cpus) + self._take_scalar("mem", request.mem)
        gpu_ids: list[str] = []
        if request.gpus:
            taken, gpu_ids = self._take_gpus(request.gpus)
            resources += taken
        port: Optional[int] = None
        extra: list[int] = []
        if request.fixed_port is not None:
            port = request.fixed_port
            resources.append(_cut(self._held.pop(port), "ranges",
                                  {"range": [{"begin": port, "end": port}]}))
        own = request.port and request.fixed_port is None
        if self._has_ports and (own or request.extra_ports):
            port_resources, ports = self._take_ports(int(own) + request.extra_ports)
            resources += port_resources
            if own:
                port, *extra = ports
            else:
                extra = ports
        return resources, port, gpu_ids, extra

    def _take_scalar(self, name: str, amount: float) -> list[dict[str, Any]]:
        taken = []
        wanted = milli(amount)
        parts: Sequence[list[Any]] = self._scalars.get(name, ())
        for part_left in parts:
            if wanted <= 0:
                break
            part = min(part_left[1], wanted)
            if part <= 0:
                continue
            part_left[1] -= part
            wanted -= part
            taken.append(_cut(part_left[0], "scalar", {"value": part / 1000}))
        if taken:
            self._totals[name] = sum(left for _, left in parts)
        return taken

    def _take_gpus(self, count: int) -> tuple[list[dict[str, Any]], list[str]]:
        if self._totals.get("gpus", 0) >= 1000 * count:
            return self._take_scalar("gpus", count), []
        for entry_items in self._gpu_sets:
            entry, items = entry_items
            if len(items) >= count:
                ids = sorted(items, key=_natural)[:count]
                entry_items[1] = [i for i in items if i not in ids]
                self._count_gpu_sets()
                return [_cut(entry, "set", {"item": ids})], ids
        raise ValueError("offer %s has no %d GPUs in one resource" % (self.offer_id, count))

    def _take_ports(self, count: int) -> tuple[list[dict[str, Any]], list[int]]:
        """``count`` ports, lowest first: (one ``ports`` resource per offer
        entry they come from, with their ranges merged; the ports)."""
        taken = []   # [(entry, port), ...]
        for _ in range(count):
            taken.append(self._take_port())
        resources: list[dict[str, Any]] = []
        by_entry: dict[int, list[dict[str, int]]] = {}
        for entry, port in taken:
            ranges = by_entry.get(id(entry))
            if ranges is None:
                ranges = by_entry[id(entry)] = []
                resources.append(_cut(entry, "ranges", {"range": ranges}))
            if ranges and ranges[-1]["end"] == port - 1:
                ranges[-1]["end"] = port
            else:
                ranges.append({"begin": port, "end": port})
        return resources, [port for _, port in taken]

    def _take_port(self) -> tuple[Resource, int]:
        for state in self._ports:
            entry, ranges, index, port = state
            if index >= len(ranges):
                continue
            if port == ranges[index][1]:
                state[2] = index = index + 1
                state[3] = ranges[index][0] if index < len(ranges) else None
                self._has_ports = any(p[2] < len(p[1]) for p in self._ports)
            else:
                state[3] = port + 1
            return entry, port
        raise ValueError("offer %s has no port left" % self.offer_id)

    def summary(self) -> OfferSummary:
        return {"cpus": round(self.scalar("cpus"), 3), "mem": round(self.scalar("mem"), 1),
                "gpus": self.gpu_count(), "agent": self.hostname or self.agent_id}


def _natural(item: str) -> tuple[int, int, str]:
    return (0, int(item), "") if str(item).isdigit() else (1, 0, str(item))


class _FirstFit:
    """First fit in offer order, offers with ports first, over one tier of
    offers. Offers only shrink, so an offer that could not hold a request
    shape never will: one cursor per (tier, shape) skips them for good."""

    def __init__(self) -> None:
        # (tier, request shape) -> [next offer with ports, next offer] to try
        self._cursors: dict[tuple[object, ...], list[int]] = {}

    def find(self, tier_name: str, tier: Sequence[OfferPool], request: TaskRequest[Any]
             ) -> Optional[OfferPool]:
        key = (tier_name, request.cpus, request.mem, request.gpus, request.agent_id,
               request.port, request.fixed_port, request.extra_ports)
        cursor = self._cursors.setdefault(key, [0, 0])
        count = len(tier)
        i = cursor[0]
        while i < count and not (tier[i]._has_ports and tier[i].fits(request)):
            i += 1
        cursor[0] = i
        if i < count:
            return tier[i]
        j = cursor[1]
        while j < count and not tier[j].fits(request):
            j += 1
        cursor[1] = j
        return tier[j] if j < count else None


def place(requests: Iterable[TaskRequest[K]], offers: Iterable[Offer],
          held: Optional[Mapping[str, Iterable[int]]] = None,
          port_agents: Collection[str] = ()) -> Placement[K]:
    """Place ``requests`` (in order of importance) on ``offers``; ``held``
    (``{agent_id: {port, ...}}``) ports go only to requests pinned to them;
    ``port_agents``: the agents known to offer ports (an offer of theirs
    without ports fits no task that needs one).

    Largest requests first (GPU tasks before all others), first fit in offer
    order, preferring offers that still have ports, so several tasks pack
    into one offer and the rest spread over others; offers of agents due
    for maintenance only where no other offer fits, the latest due first.
    The GPU rule, within this one round of offers:

    1. a GPU task goes only to an offer with enough GPUs;
    2. a GPU-less task goes to an offer without GPUs when one fits;
    3. only when none fits does it take cpus/mem of a GPU offer, never its
       GPUs, and only after every GPU task was placed.
    """
    held = held or {}
    ordered = sorted(((_maintenance_last(offer), offer) for offer in offers),
                     key=lambda keyed: keyed[0])
    pools = [OfferPool(offer, held.get(offer["agent_id"]["value"], ()),
                       offer["agent_id"]["value"] in port_agents) for _, offer in ordered]
    # Agents due for maintenance in tiers of their own, after every other:
    # the first fit with ports would otherwise take them before a healthy
    # offer without ports.
    tiers: dict[str, list[OfferPool]] = {
        "gpu": [], "plain": [], "gpu-draining": [], "plain-draining": []}
    for each, ((due, _), _) in zip(pools, ordered):
        tiers[("gpu" if each.gpu_agent else "plain") + ("-draining" if due else "")].append(each)
    finder = _FirstFit()
    order = sorted(requests, key=lambda r: (-r.gpus, -r.cpus, -r.mem))
    launches: dict[str, list[Assignment[K]]] = {}
    unplaced: list[TaskRequest[K]] = []
    for request in order:
        names = (("gpu", "gpu-draining") if request.gpus > 0
                 else ("plain", "gpu", "plain-draining", "gpu-draining"))
        pool = None
        for name in names:
            pool = finder.find(name, tiers[name], request)
            if pool is not None:
                break
        if pool is None:
            unplaced.append(request)
            continue
        resources, port, gpu_ids, extra_ports = pool.take(request)
        launches.setdefault(pool.offer_id, []).append(Assignment(
            request, pool.offer_id, pool.agent_id, pool.hostname, resources, port, gpu_ids,
            extra_ports, pool.agent_url))
    unused = [p.offer_id for p in pools if p.offer_id not in launches]
    return Placement(launches, unused, unplaced)


def _maintenance_last(offer: Offer) -> tuple[int, float]:
    """Offers of agents due for maintenance after every other, the latest
    due first: their tasks "may be killed when the interval arrives"
    (``Offer.unavailability``, include/mesos/v1/mesos.proto;
    docs/maintenance.md leaves the choice to the scheduler)."""
    unavailability = offer.get("unavailability")
    if not isinstance(unavailability, Mapping):
        return (0, 0.0)
    try:
        starts = float(unavailability["start"]["nanoseconds"])
    except (KeyError, TypeError, ValueError):
        starts = 0.0
    return (1, -starts)


def largest_offer(offers: Iterable[Offer]) -> Optional[OfferSummary]:
    """A summary of the biggest offer, for 'nothing fits' messages."""
    best = None
    for offer in offers:
        summary = OfferPool(offer).summary()
        if best is None or (summary["cpus"], summary["mem"]) > (best["cpus"], best["mem"]):
            best = summary
    return best
