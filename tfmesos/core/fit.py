"""Whether the tasks still waiting for offers can ever be placed (issue 35:
say when nothing can fit).

Offers only show what is free now; an agent's total (``resources`` of each
agent in the master's ``/master/slaves``, src/master/http.cpp) is the most
it can ever offer. So:

* a task that asks more than every agent's total can never fit (``NEVER``),
  nor can a cluster that needs more than all the agents have together:
  the run fails with one line, at once;
* a task that some agent's total holds, while no offer of the last
  ``WINDOW`` seconds could, waits for that agent's resources to be freed
  (``BUSY``): said once, and in the waiting line;
* without the totals (the master's endpoint not readable), offers alone
  decide nothing for good: after ``WINDOW`` seconds with no offer that
  could hold the task, that is said (``UNKNOWN``) and the run keeps
  waiting up to its launch timeout.

``judge`` and ``judge_cluster`` are pure; ``OfferLog`` keeps the offers of
late (the scheduler notes every offer); ``FitWatch`` is what
the waiting loop asks (``launch.ClusterRun.form``): it reads the totals in
a thread of its own, never in the loop.
"""

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional

from ..exceptions import ClusterError
from ..field_methods import FrozenFieldMethods

logger = logging.getLogger(__name__)

EPSILON = 1e-6
READ_AFTER = 10.0   # seconds a task waits before the agents' totals are read
REREAD = 30.0       # seconds between reads of the totals while tasks wait
CHECK_INTERVAL = 1.0   # seconds between two looks at the slots (check_slots)
WINDOW = 30.0       # seconds of offers that say "no offer could hold it"

NEVER, BUSY, UNKNOWN, FITS = "never", "busy", "unknown", "fits"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Size(FrozenFieldMethods):
    """cpus, mem (MB) and whole gpus: a task's ask, an offer, an agent's total."""

    cpus: float
    mem: float
    gpus: int = 0

    def holds(self, ask: "Size") -> bool:
        return (self.cpus + EPSILON >= ask.cpus and self.mem + EPSILON >= ask.mem
                and self.gpus >= ask.gpus)

    def lacking(self, ask: "Size") -> tuple[str, ...]:
        """The resources of ``ask`` this size has too little of."""
        return tuple(name for name in ("cpus", "mem", "gpus")
                     if getattr(self, name) + (EPSILON if name != "gpus" else 0)
                     < getattr(ask, name))

    def describe(self, gpus: bool = False) -> str:
        """``cpus=1 mem=512``, with ``gpus=N`` when it has any or ``gpus``."""
        text = "cpus=%g mem=%g" % (round(self.cpus, 3), round(self.mem, 1))
        return text + (" gpus=%d" % self.gpus if self.gpus or gpus else "")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Agent(FrozenFieldMethods):
    """An agent as the master lists it: its name (host name, else id) and total."""

    name: str
    total: Size


def agents_of(document: Mapping[str, Any], role: Optional[str] = None) -> list[Agent]:
    """The agents of a ``/master/slaves`` (or ``/master/state``) document,
    each with the most it can ever offer a framework in ``role`` (None:
    unreserved resources only): its total ``resources`` less what is
    reserved to roles whose resources Mesos never offers ``role``; an entry
    that is not an agent with numbers is left out."""
    found = []
    for item in document.get("slaves") or []:
        if not isinstance(item, Mapping):
            continue
        resources = item.get("resources")
        if not isinstance(resources, Mapping):
            continue
        try:
            total = _size(resources)
            for reserved_to, reserved in _reservations(item):
                if not _offered_to(role, reserved_to):
                    less = _size(reserved)
                    total = Size(max(0.0, total.cpus - less.cpus),
                                 max(0.0, total.mem - less.mem), max(0, total.gpus - less.gpus))
        except (TypeError, ValueError):
            continue
        found.append(Agent(str(item.get("hostname") or item.get("id") or "?"), total))
    return found


def _size(resources: Mapping[str, Any]) -> Size:
    return Size(float(resources.get("cpus") or 0), float(resources.get("mem") or 0),
                int(float(resources.get("gpus") or 0)))


def _reservations(agent: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(role, its resources) of an agent's ``reserved_resources``, keyed by
    the role each reservation is for (src/master/readonly_handler.cpp: only
    the roles the reader may view; the hidden ones stay in the total, which
    may then say too much, never too little)."""
    reserved = agent.get("reserved_resources")
    if not isinstance(reserved, Mapping):
        return []
    return [(str(name), value) for name, value in reserved.items()
            if isinstance(value, Mapping)]


def _offered_to(role: Optional[str], reserved_to: str) -> bool:
    """Whether Mesos offers resources reserved to ``reserved_to`` to a
    framework in ``role``: that role or a descendant of it
    (``Resources::isAllocatableTo``, src/common/resources.cpp)."""
    return role is not None and (role == reserved_to or role.startswith(reserved_to + "/"))


class OfferLog:
    """The offers of each agent of late, the largest kept (an offer that a
    later one of its agent holds is dropped); ``clock``: monotonic seconds.
    Thread-safe: the driver's thread adds, the waiting loop reads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        # agent id -> [(when, its name, size), ...]
        self._seen: dict[str, list[tuple[float, str, Size]]] = {}

    def add(self, agent_id: str, name: str, size: Size) -> None:
        """An offer of ``size`` from agent ``agent_id`` (``name``: its host name)."""
        now = self._clock()
        with self._lock:
            kept = [entry for entry in self._seen.get(agent_id, ())
                    if now - entry[0] <= WINDOW and not size.holds(entry[2])]
            self._seen[agent_id] = kept + [(now, name, size)]

    def recent(self, within: float = WINDOW) -> list[tuple[str, Size]]:
        """(agent name, size) of the offers of the last ``within`` seconds
        that no later offer of their agent holds."""
        now = self._clock()
        with self._lock:
            return [(name, size) for seen in self._seen.values()
                    for when, name, size in seen if now - when <= within]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Verdict(FrozenFieldMethods):
    """What ``judge`` found for one task: ``kind`` (``NEVER``, ``BUSY``,
    ``UNKNOWN``, ``FITS``); ``agent``: for ``NEVER`` the agent nearest to
    holding it (``lacking`` says of what it has too little), for ``BUSY``
    the largest agent that can; ``offer``: the largest offer seen (agent,
    size), if any; ``agents``: how many agents the master listed (None:
    not known)."""

    kind: str
    task: str
    ask: Size
    agent: Optional[Agent] = None
    lacking: tuple[str, ...] = ()
    offer: Optional[tuple[str, Size]] = None
    agents: Optional[int] = None


def largest_of(offers: Sequence[tuple[str, Size]]) -> Optional[tuple[str, Size]]:
    """The largest of ``offers`` (agent name, size) by gpus, mem, cpus, or None."""
    if not offers:
        return None
    return max(offers, key=lambda offer: (offer[1].gpus, offer[1].mem, offer[1].cpus))


def judge(task: str, ask: Size, agents: Optional[Sequence[Agent]],
          offers: Sequence[tuple[str, Size]]) -> Verdict:
    """Whether ``task`` asking ``ask`` can be placed: ``FITS`` when one of
    ``offers`` (agent name, size: the offers of late) holds it; else, from
    ``agents`` (their totals; None: not known), ``NEVER`` when no agent's
    total holds it (there is at least one agent), ``BUSY`` when one's does;
    ``UNKNOWN`` when the totals are not known or no agent is listed."""
    offer = largest_of(offers)
    if any(size.holds(ask) for _, size in offers):
        return Verdict(FITS, task, ask, offer=offer)
    if not agents:
        return Verdict(UNKNOWN, task, ask, offer=offer,
                       agents=None if agents is None else 0)
    holding = [agent for agent in agents if agent.total.holds(ask)]
    if holding:
        best = max(holding, key=lambda a: (a.total.gpus, a.total.mem, a.total.cpus))
        return Verdict(BUSY, task, ask, agent=best, offer=offer, agents=len(agents))
    nearest = min(agents, key=lambda a: (len(a.total.lacking(ask)), -a.total.gpus,
                                         -a.total.mem, -a.total.cpus))
    return Verdict(NEVER, task, ask, agent=nearest, lacking=nearest.total.lacking(ask),
                   offer=offer, agents=len(agents))


def total_of(sizes: Iterable[Size]) -> Size:
    cpus = mem = 0.0
    gpus = 0
    for size in sizes:
        cpus, mem, gpus = cpus + size.cpus, mem + size.mem, gpus + size.gpus
    return Size(cpus, mem, gpus)


def judge_cluster(asks: Sequence[Size], agents: Optional[Sequence[Agent]]
                  ) -> Optional[tuple[Size, Size]]:
    """(what the cluster needs, what the agents have in all) when the whole
    cluster ``asks`` can never be placed on ``agents`` together, else None
    (fits, or the totals are not known)."""
    if not agents:
        return None
    need, have = total_of(asks), total_of(agent.total for agent in agents)
    return None if have.holds(need) else (need, have)


def _offer_text(verdict: Verdict) -> str:
    if verdict.offer is None:
        return "no offer seen"
    agent, size = verdict.offer
    return "largest offer: %s on %s" % (size.describe(bool(verdict.ask.gpus)), agent)


def never_error(verdict: Verdict, job: str) -> ClusterError:
    """The run's error for a ``NEVER`` verdict, naming the job's fields to lower."""
    assert verdict.agent is not None   # (a NEVER verdict has one)
    fields = " and ".join("{job.%s}" % name for name in verdict.lacking)
    return ClusterError.about(
        "%s asks %s but no agent can hold it: the largest agent has %s (total, %s); %s; "
        "lower " + fields + " or add a bigger agent",
        verdict.task, verdict.ask.describe(), verdict.agent.total.describe(bool(verdict.ask.gpus)),
        "1 agent" if verdict.agents == 1 else "of %d agents" % (verdict.agents or 0),
        _offer_text(verdict), job=job)


def cluster_error(need: Size, have: Size, agents: int) -> ClusterError:
    return ClusterError("the cluster needs %s in total but the master's %s %s in all: ask for "
                        "fewer or smaller tasks, or add agents"
                        % (need.describe(bool(need.gpus)),
                           "agent has" if agents == 1 else "%d agents have" % agents,
                           have.describe(bool(need.gpus))))


def note(verdict: Verdict, waited: float, unreadable: Optional[str] = None) -> Optional[str]:
    """What is said of a task still waiting (``BUSY``, ``UNKNOWN``), None
    otherwise; ``waited``: the seconds of offers seen; ``unreadable``: why
    the agents' totals are not known."""
    offers = "no offer in %d s could hold it (%s)" % (waited, _offer_text(verdict))
    head = "%s asks %s: %s" % (verdict.task, verdict.ask.describe(), offers)
    if verdict.kind == BUSY:
        assert verdict.agent is not None
        return "%s; agent %s could (%s in total) once what runs there ends: waiting" % (
            head, verdict.agent.name, verdict.agent.total.describe(bool(verdict.ask.gpus)))
    if verdict.kind == UNKNOWN:
        if verdict.agents == 0:
            return "%s; the master lists no agent: waiting for one" % head
        return "%s; the agents' totals are not known (%s): waiting" % (
            head, unreadable or "not read")
    return None


def short_note(verdict: Verdict) -> Optional[str]:
    """The waiting line's part of ``note``."""
    if verdict.kind == BUSY:
        assert verdict.agent is not None
        return "%s fits agent %s (%s) once it is freed" % (
            verdict.task, verdict.agent.name, verdict.agent.total.describe(bool(verdict.ask.gpus)))
    if verdict.kind == UNKNOWN:
        return "no offer could hold %s (%s)" % (verdict.task, _offer_text(verdict))
    return None


class FitWatch:
    """Asked by the waiting loop, about once a second, while tasks wait:
    ``check(waiting, asks)`` raises the run's ``ClusterError`` once the
    agents' totals say a task (or the cluster) can never fit, and returns
    what to say of a task that waits in vain (or None). ``read_agents()``
    gives the master's agents (``agents_of``; a ``TFMesosError`` or any
    error: not readable), called in a thread of its own ``READ_AFTER`` s
    after the first check with tasks waiting, then every ``REREAD`` s;
    ``offers``: the scheduler's ``OfferLog``."""

    def __init__(self, read_agents: Callable[[], list[Agent]], offers: OfferLog,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._read_agents = read_agents
        self.offers = offers
        self._clock = clock
        self._since: Optional[float] = None    # tasks have been waiting since
        self._read_at: Optional[float] = None   # the last read began
        self._reading: Optional[threading.Thread] = None
        self.agents: Optional[list[Agent]] = None   # the latest totals read
        self.unreadable: Optional[str] = None        # why the latest read failed
        self.said: Optional[str] = None   # the latest note, once made
        self.short: Optional[str] = None  # its waiting-line part
        self._said_key: Optional[tuple[str, str]] = None   # (task, kind) said last
        self._slots_checked: Optional[float] = None   # when check_slots last checked

    def check_slots(self, slots: Iterable[Any], subscribed: bool) -> Optional[str]:
        """``check`` of a run's task slots (those PENDING wait for an offer;
        none while the scheduler is not subscribed), at most once every
        ``CHECK_INTERVAL`` s: the forming loop asks once per event
        (thousands while hundreds of tasks register)."""
        now = self._clock()
        if self._slots_checked is not None and now - self._slots_checked < CHECK_INTERVAL:
            return None
        self._slots_checked = now
        slots = list(slots)
        waiting = [(slot.name, slot.job.name, Size(slot.job.cpus, slot.job.mem, slot.job.gpus))
                   for slot in slots if slot.state == "PENDING"] if subscribed else []
        return self.check(waiting, [Size(slot.job.cpus, slot.job.mem, slot.job.gpus)
                                    for slot in slots])

    def check(self, waiting: Sequence[tuple[str, str, Size]], asks: Sequence[Size]
              ) -> Optional[str]:
        """``waiting``: (task, job, ask) of each task waiting for an offer;
        ``asks``: what every task of the cluster asks. A new note (to say
        once), else None."""
        now = self._clock()
        if not waiting:
            self._since = self.said = self.short = self._said_key = None
            return None
        if self._since is None:
            self._since = now
        waited = now - self._since
        if waited < READ_AFTER:
            return None
        self._read(now)
        agents = self.agents
        if agents is None and waited < WINDOW:
            return None   # the first read is under way: offers alone decide nothing yet
        offers = self.offers.recent(min(waited, WINDOW))
        verdicts = [(judge(task, ask, agents, offers), job) for task, job, ask in waiting]
        for verdict, job in verdicts:
            if verdict.kind == NEVER:
                raise never_error(verdict, job)
        too_big = judge_cluster(asks, agents)
        if too_big is not None:
            raise cluster_error(too_big[0], too_big[1], len(agents or ()))
        for verdict, _ in verdicts:
            if verdict.kind == UNKNOWN and waited < WINDOW:
                continue
            text = note(verdict, min(waited, WINDOW), self.unreadable)
            if text is not None:
                key = (verdict.task, verdict.kind)
                first, self._said_key = key != self._said_key, key
                self.said, self.short = text, short_note(verdict)
                return text if first else None
        self.said = self.short = self._said_key = None
        return None

    def _read(self, now: float) -> None:
        if self._reading is not None and self._reading.is_alive():
            return
        if self._read_at is not None and now - self._read_at < REREAD:
            return
        self._read_at = now
        self._reading = threading.Thread(target=self._read_once, name="tfmesos-agent-totals",
                                         daemon=True)
        self._reading.start()

    def _read_once(self) -> None:
        try:
            agents = self._read_agents()
        except Exception as exc:   # any failure: the totals stay unknown
            logger.info("cannot read the agents' totals from the master: %s", exc)
            self.unreadable = str(exc) or type(exc).__name__
            return
        self.agents, self.unreadable = agents, None

    def join(self, timeout: Optional[float] = None) -> None:
        """Wait for a read under way (tests)."""
        if self._reading is not None:
            self._reading.join(timeout)


__all__ = ["Agent", "FitWatch", "OfferLog", "Size", "Verdict", "agents_of", "judge",
           "judge_cluster", "note", "short_note", "NEVER", "BUSY", "UNKNOWN", "FITS"]
