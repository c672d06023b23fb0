"""Offer matching as pure functions: offers and pending tasks in, launch
decisions out. No driver, no network: unit tests feed synthetic offers.

Resources taken for a task are cut from the offered resource entries, so a
task's resources keep the offer's ``allocation_info``, ``role`` and
``reservations`` exactly as Mesos requires.
"""

import copy
import dataclasses
from typing import Optional

EPSILON = 1e-6


@dataclasses.dataclass
class TaskRequest:
    """What one task needs; ``key`` identifies it to the caller."""

    key: object
    cpus: float
    mem: float
    gpus: int = 0
    port: bool = True  # take one port from the offer's ``ports`` when it has them


@dataclasses.dataclass
class Assignment:
    """A request placed on an offer: the TaskInfo ``resources``, the port
    (None when the offer had no ports) and the GPU ids (SET offers only)."""

    request: TaskRequest
    offer_id: str
    agent_id: str
    hostname: str
    resources: list
    port: Optional[int]
    gpu_ids: list


@dataclasses.dataclass
class Placement:
    launches: dict    # offer id -> [Assignment, ...]
    unused: list      # offer ids nothing was placed on
    unplaced: list    # requests no offer could take


class OfferPool:
    """The resources of one offer, consumed as tasks are placed on it."""

    def __init__(self, offer):
        self.offer_id = offer["id"]["value"]
        self.agent_id = offer["agent_id"]["value"]
        self.hostname = offer.get("hostname", "")
        self._entries = [copy.deepcopy(dict(res)) for res in offer.get("resources", ())]
        self.gpu_agent = self.gpu_count() > 0  # as offered, before anything was taken

    def scalar(self, name):
        return sum(e.get("scalar", {}).get("value", 0.0) for e in self._entries
                   if e.get("name") == name and e.get("type", "SCALAR") == "SCALAR")

    def gpu_count(self):
        return int(self.scalar("gpus") + EPSILON) + len(self._gpu_set_items())

    def ports(self):
        return [(int(r["begin"]), int(r["end"])) for e in self._entries
                if e.get("name") == "ports" and e.get("type") == "RANGES"
                for r in e.get("ranges", {}).get("range", ())]

    def has_ports(self):
        return bool(self.ports())

    def _gpu_set_items(self):
        return [item for e in self._entries if e.get("name") == "gpus" and e.get("type") == "SET"
                for item in e.get("set", {}).get("item", ())]

    def fits(self, request):
        return (self.scalar("cpus") + EPSILON >= request.cpus
                and self.scalar("mem") + EPSILON >= request.mem
                and self.gpu_count() >= request.gpus)

    def take(self, request):
        """Cut ``request`` out of this offer; returns (resources, port, gpu_ids)."""
        resources = self._take_scalar("cpus", request.cpus) + self._take_scalar("mem", request.mem)
        gpu_ids = []
        if request.gpus:
            taken, gpu_ids = self._take_gpus(request.gpus)
            resources += taken
        port = None
        if request.port and self.has_ports():
            port_resource, port = self._take_port()
            resources.append(port_resource)
        return resources, port, gpu_ids

    def _take_scalar(self, name, amount):
        taken = []
        for entry in self._entries:
            if amount <= EPSILON:
                break
            if entry.get("name") != name or entry.get("type", "SCALAR") != "SCALAR":
                continue
            available = entry["scalar"]["value"]
            part = min(available, amount)
            if part <= EPSILON:
                continue
            entry["scalar"]["value"] = round(available - part, 6)
            amount -= part
            piece = copy.deepcopy(entry)
            piece["scalar"] = {"value": round(part, 6)}
            taken.append(piece)
        return taken

    def _take_gpus(self, count):
        if self.scalar("gpus") + EPSILON >= count:
            return self._take_scalar("gpus", count), []
        for entry in self._entries:
            if entry.get("name") == "gpus" and entry.get("type") == "SET":
                items = list(entry["set"]["item"])
                if len(items) >= count:
                    ids = sorted(items, key=_natural)[:count]
                    entry["set"]["item"] = [i for i in items if i not in ids]
                    piece = copy.deepcopy(entry)
                    piece["set"] = {"item": ids}
                    return [piece], ids
        raise ValueError("offer %s has no %d GPUs in one resource" % (self.offer_id, count))

    def _take_port(self):
        for entry in self._entries:
            if entry.get("name") != "ports" or entry.get("type") != "RANGES":
                continue
            ranges = entry["ranges"]["range"]
            if not ranges:
                continue
            first = ranges[0]
            port = int(first["begin"])
            if port == int(first["end"]):
                ranges.pop(0)
            else:
                first["begin"] = port + 1
            piece = copy.deepcopy(entry)
            piece["ranges"] = {"range": [{"begin": port, "end": port}]}
            return piece, port
        raise ValueError("offer %s has no port left" % self.offer_id)

    def summary(self):
        return {"cpus": round(self.scalar("cpus"), 3), "mem": round(self.scalar("mem"), 1),
                "gpus": self.gpu_count(), "agent": self.hostname or self.agent_id}


def _natural(item):
    return (0, int(item), "") if str(item).isdigit() else (1, 0, str(item))


def place(requests, offers):
    """Place ``requests`` (in order of importance) on ``offers``.

    Largest requests first, first fit, so several tasks pack into one offer
    and the rest spread over others. Tasks without GPUs go to GPU-less offers
    whenever one fits, keeping GPU agents free for GPU tasks.
    """
    pools = [OfferPool(offer) for offer in offers]
    order = sorted(requests, key=lambda r: (-r.gpus, -r.cpus, -r.mem))
    launches, unplaced = {}, []
    for request in order:
        candidates = [p for p in pools if p.fits(request)]
        if not request.gpus:
            plain = [p for p in candidates if not p.gpu_agent]
            candidates = plain or candidates
        # Keep ports reserved by Mesos: prefer offers that have ports.
        candidates.sort(key=lambda p: not p.has_ports())
        if not candidates:
            unplaced.append(request)
            continue
        pool = candidates[0]
        resources, port, gpu_ids = pool.take(request)
        launches.setdefault(pool.offer_id, []).append(Assignment(
            request, pool.offer_id, pool.agent_id, pool.hostname, resources, port, gpu_ids))
    unused = [p.offer_id for p in pools if p.offer_id not in launches]
    return Placement(launches, unused, unplaced)


def largest_offer(offers):
    """A summary of the biggest offer, for 'nothing fits' messages."""
    best = None
    for offer in offers:
        summary = OfferPool(offer).summary()
        if best is None or (summary["cpus"], summary["mem"]) > (best["cpus"], best["mem"]):
            best = summary
    return best
