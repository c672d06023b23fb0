"""The tfmesos Mesos scheduler: turns offers into tasks of the run's jobs.

It only places and launches; what a task's end means (relaunch, fail the
run, done) is the launcher's decision. Everything it learns goes on the
launcher's event queue, so callbacks stay short and never raise into the
driver for a run-level problem.
"""

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Protocol

from ..exceptions import MesosError
from ..mesos import Scheduler
from ..mesos.task_states import TERMINAL_STATES
from ..record import times
from .events import AgentLost, MesosDisconnected, MesosFailed, StatusUpdate, Subscribed
from .fit import OfferLog, Size
from .placement import Assignment, Offer, OfferPool, OfferSummary, TaskRequest, largest_offer, place
from .slots import SlotTable, TaskSlot
from .task_names import brief, grouped

if TYPE_CHECKING:
    import queue

    from addict import Dict

logger = logging.getLogger(__name__)

IDLE_REFUSE_SECONDS = 120.0
BUSY_REFUSE_SECONDS = 2.0


class OfferDriver(Protocol):
    """What the scheduler asks of its driver (``mesos.MesosSchedulerDriver``;
    the unit tests' recording fake)."""

    def launchTasks(self, offer_ids: list[dict[str, str]], tasks: list[dict[str, Any]],
                    filters: Optional[dict[str, float]] = None) -> object: ...

    def declineOffer(self, offer_ids: list[dict[str, str]],
                     filters: Optional[dict[str, float]] = None) -> object: ...

    def suppressOffers(self) -> object: ...

    def reviveOffers(self) -> object: ...

    def reconcileTasks(self, tasks: list[dict[str, Any]]) -> object: ...


class Launch(NamedTuple):
    """An attempt the scheduler launched: ``slot``'s new ``task_id`` on
    ``assignment`` (its agent, host name, port and resources) from ``offer_id``."""

    slot: TaskSlot
    task_id: str
    attempt: int       # 1 for the slot's first launch
    offer_id: str
    assignment: Assignment[TaskSlot]

    @property
    def agent_id(self) -> str:
        return self.assignment.agent_id

    @property
    def port(self) -> Optional[int]:
        return self.assignment.port


def ask_mesos_of(driver: OfferDriver, tasks: Iterable[tuple[str, str]]) -> None:
    """Explicit reconciliation of ``tasks`` ((task id, agent id)): Mesos
    answers each with its latest state, TASK_LOST for one it does not know
    (docs/reconciliation.md). A call that fails only postpones it: the
    periodic reconciliation and the one after every re-subscription cover it."""
    items = [{"task_id": {"value": task_id}, "agent_id": {"value": agent_id}}
             for task_id, agent_id in tasks]
    if not items:
        return
    try:
        driver.reconcileTasks(items)
    except MesosError as exc:
        logger.info("reconciliation postponed: %s", exc)


def unless_disconnected(call: Callable[..., object], *args: Any,
                        said: str = "left to the master") -> bool:
    """``call(*args)``; False when it failed while the master could not be
    reached (a timeout, a re-subscription, a master that does not lead:
    ``MesosError.means_disconnected``), said at info as ``said``. Any other
    refusal is raised."""
    try:
        call(*args)
    except MesosError as exc:
        if not exc.means_disconnected:
            raise
        logger.info("%s: %s", said, exc)
        return False
    return True


def resource_totals(items: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Sum of ``cpus``, ``mem`` and ``gpus`` over dicts (offer summaries, jobs)."""
    totals: dict[str, float] = {"cpus": 0.0, "mem": 0.0, "gpus": 0}
    for item in items:
        for key in totals:
            totals[key] += item[key]
    return totals


def describe_resources(resources: Mapping[str, Any]) -> str:
    return "cpus=%g mem=%g gpus=%d" % (round(resources["cpus"], 3), round(resources["mem"], 1),
                                       resources["gpus"])


class TFMesosScheduler(Scheduler):
    """Places the pending slots of ``slots`` (a ``SlotTable``) on offers.
    ``make_task(slot, assignment) -> TaskInfo`` builds each task (pure);
    ``on_launch(launches)`` (a list of ``Launch``) is told of the attempts
    about to be launched, outside the lock and before Mesos may start them;
    what the driver reports goes to ``events`` as ``tfmesos.core.events`` objects,
    a task's terminal update through ``after_reports(task_id, event)``
    (``Rendezvous.put_after_reports``: after the task's last output and exit
    frame; default: at once). ``extra_ports(slot)`` says how many ports a
    slot needs besides its own (default none)."""

    def __init__(self, slots: SlotTable,
                 make_task: Callable[[TaskSlot, Assignment[TaskSlot]], dict[str, Any]],
                 events: "queue.SimpleQueue[object]", run_id: str,
                 on_launch: Optional[Callable[[list[Launch]], None]] = None,
                 extra_ports: Optional[Callable[[TaskSlot], int]] = None,
                 after_reports: Optional[Callable[[str, object], None]] = None) -> None:
        if not isinstance(slots, SlotTable):
            raise TypeError("slots must be a SlotTable (tfmesos.core.slots.make_slots)")
        self.slots = slots
        self.lock = slots.lock
        self._make_task = make_task
        self._on_launch = on_launch or (lambda launches: None)
        self._extra_ports = extra_ports or (lambda slot: 0)
        self._events = events
        self._after_reports = after_reports or (lambda task_id, event: events.put(event))
        self._run_id = run_id
        self._suppressed = False
        self._revive_owed = False  # a REVIVE could not be sent: asked again at the next reconcile
        self._closed = False       # the run is stopping: launch nothing more
        self.largest_offer: Optional[OfferSummary] = None
        # Agents that offered ports: an offer of theirs without any has them all in use.
        self._port_agents: set[str] = set()
        # Such agents whose latest offers had none -> their hostnames.
        self._ports_used_up: dict[str, str] = {}
        # the offers of late (``fit``: can a waiting task ever fit)
        self.offer_log = OfferLog()
        # the most offers + live tasks held at once (totals)
        self.most_held: Optional[dict[str, float]] = None
        self.first_offer_at: Optional[float] = None  # times.now() of the first offers
        self.framework_id: Optional[str] = None

    def slot_of(self, task_id: str) -> Optional[TaskSlot]:
        return self.slots.slot_of(task_id)

    def pending(self) -> list[TaskSlot]:
        return self.slots.pending()

    # -- Mesos callbacks ----------------------------------------------------

    def registered(self, driver: OfferDriver, framework_id: "Dict", master_info: "Dict") -> None:
        self.framework_id = framework_id.value
        self._events.put(Subscribed(master_info))

    def reregistered(self, driver: OfferDriver, master_info: "Dict") -> None:
        # A takeover (tfmesos attach, a detached run's new scheduler task)
        # subscribes with the run's framework id and hears only this.
        self.framework_id = getattr(driver, "framework_id", None) or self.framework_id
        # Updates the master made while we were away (TASK_LOST of a removed
        # agent) were dropped, not queued: ask for every task's state.
        self.reconcile(driver, implicit=True)
        self._events.put(Subscribed(master_info, again=True))

    def offerRescinded(self, driver: OfferDriver, offer_id: "Dict") -> None:
        # Offers are used or declined within resourceOffers: nothing is held.
        logger.debug("offer %s rescinded", offer_id.value)

    def executorLost(self, driver: OfferDriver, executor_id: "Dict", agent_id: "Dict",
                     status: Optional[int]) -> None:
        # The command executor's end comes with its task's status update.
        logger.info("executor %s on agent %s ended (%s)", executor_id.value, agent_id.value,
                    status)

    def disconnected(self, driver: OfferDriver) -> None:
        self._events.put(MesosDisconnected())

    def error(self, driver: OfferDriver, message: str) -> None:
        self._events.put(MesosFailed(message, getattr(driver, "exception", None)))

    def slaveLost(self, driver: OfferDriver, agent_id: "Dict") -> None:
        self._events.put(AgentLost(agent_id.value))

    def statusUpdate(self, driver: OfferDriver, update: "Dict") -> None:
        if update.state in TERMINAL_STATES:
            self._after_reports(update.task_id.value, StatusUpdate(update))
        else:
            self._events.put(StatusUpdate(update))

    def resourceOffers(self, driver: OfferDriver, offers: list[Offer]) -> None:
        launches, unused = self._place(offers)
        try:
            if launches:
                self._on_launch(launches)
                unused = self._send(driver, launches, unused)
            with self.lock:   # (a launch that failed put its slots back)
                still_pending = not self._closed and bool(self.pending())
            if unused:
                refuse = BUSY_REFUSE_SECONDS if still_pending else IDLE_REFUSE_SECONDS
                driver.declineOffer([{"value": oid} for oid in unused],
                                    {"refuse_seconds": refuse})
            if not still_pending:
                with self.lock:
                    suppress, self._suppressed = not self._suppressed, True
                if suppress:
                    driver.suppressOffers()
        except MesosError as exc:
            if not exc.means_disconnected:
                raise
            # Disconnected meanwhile: Mesos has rescinded these offers anyway.
            # An offer that came as the run tore its framework down is no news.
            with self.lock:
                closed = self._closed
            (logger.debug if closed else logger.info)("offers lost to a disconnection: %s", exc)

    def _place(self, offers: list[Offer]) -> tuple[list[Launch], list[str]]:
        """Under the lock: decide which pending slots go where, and mark them
        launched. Returns (launches, unused offer ids)."""
        with self.lock:
            self.first_offer_at = self.first_offer_at or times.now()
            self._note_held(offers)
            summary = largest_offer(offers)
            if summary and (self.largest_offer is None or (summary["cpus"], summary["mem"]) >
                            (self.largest_offer["cpus"], self.largest_offer["mem"])):
                self.largest_offer = summary
            pending = [] if self._closed else self.pending()
            held: dict[str, set[int]] = {}
            for slot in pending:
                if slot.hold:
                    held.setdefault(slot.hold[0], set()).add(slot.hold[1])
            with_ports = {offer["agent_id"]["value"] for offer in offers
                          if any(res.get("name") == "ports"
                                 for res in offer.get("resources", ()))}
            self._port_agents.update(with_ports)
            for offer in offers:
                agent = offer["agent_id"]["value"]
                if agent in with_ports:
                    self._ports_used_up.pop(agent, None)
                elif agent in self._port_agents:   # its latest offers: every port in use
                    self._ports_used_up[agent] = offer.get("hostname") or agent
            placement = place([_request(slot, self._extra_ports(slot)) for slot in pending],
                              offers, held, self._port_agents)
            launches: list[Launch] = []
            for offer_id, assignments in placement.launches.items():
                for assignment in assignments:
                    slot = assignment.request.key
                    task_id = "tfmesos.%s.%s.%d.%d" % (self._run_id, slot.job.name, slot.index,
                                                       slot.attempts + 1)
                    self.slots.launched(slot, task_id, assignment.agent_id, assignment.port,
                                        assignment.extra_ports)
                    launches.append(Launch(slot, task_id, slot.attempts, offer_id, assignment))
            return launches, list(placement.unused)

    def _send(self, driver: OfferDriver, launches: list[Launch], unused: list[str]
              ) -> list[str]:
        """One LAUNCH per offer, until one fails. Returns ``unused`` (offer
        ids placement left unused) and the ids of the offers not sent
        (their slots are pending again). A call the master may have carried
        out (its answer never came) keeps its tasks and asks Mesos of them;
        any other failure puts back its slots too and raises, after the
        offers not sent and ``unused`` were given back (where the
        subscription lives on, Mesos would keep them this framework's: it
        has no offer timeout by default: src/master/flags.cpp,
        ``offer_timeout``)."""
        by_offer: dict[str, list[Launch]] = {}
        for launch in launches:
            by_offer.setdefault(launch.offer_id, []).append(launch)
        groups = list(by_offer.items())
        for sent, (offer_id, group) in enumerate(groups):
            infos = [self._make_task(launch.slot, launch.assignment) for launch in group]
            try:
                driver.launchTasks([{"value": offer_id}], infos,
                                   {"refuse_seconds": BUSY_REFUSE_SECONDS})
            except MesosError as exc:
                delivered = exc.maybe_delivered
                unsent = groups[sent + 1:] if delivered else groups[sent:]
                for _, back in unsent:
                    for launch in back:
                        self.slots.unlaunched(launch.slot)
                unsent_ids = unused + [unsent_id for unsent_id, _ in unsent]
                if delivered:
                    self._ask_about(driver, group, exc)
                    return unsent_ids
                self._give_back(driver, unsent_ids)
                raise
        return unused

    def _ask_about(self, driver: OfferDriver, group: list[Launch], error: MesosError) -> None:
        """The LAUNCH of ``group`` may have reached the master: whether its
        tasks run is Mesos' to say (TASK_LOST when it never got them,
        docs/reconciliation.md); until then they are the run's attempts."""
        logger.warning("no answer from the Mesos master to the launch of %s (%s); asking it "
                       "whether they were launched", brief(launch.slot.name for launch in group),
                       error)
        self.slots.unanswered(launch.task_id for launch in group)
        ask_mesos_of(driver, [(launch.task_id, launch.agent_id) for launch in group])

    def _give_back(self, driver: OfferDriver, offer_ids: list[str]) -> None:
        """Decline offers a failed call left unused, if the master still listens."""
        if not offer_ids:
            return
        try:
            driver.declineOffer([{"value": oid} for oid in offer_ids],
                                {"refuse_seconds": BUSY_REFUSE_SECONDS})
        except MesosError as exc:
            logger.debug("could not decline offers %s: %s", ", ".join(offer_ids), exc)

    def _note_held(self, offers: list[Offer]) -> None:
        """Track the most this run held at once: these offers plus what its
        launched, live tasks use (offers are used or declined at once)."""
        summaries = [OfferPool(offer).summary() for offer in offers]
        for offer, summary in zip(offers, summaries):
            self.offer_log.add(offer["agent_id"]["value"], summary["agent"],
                               Size(summary["cpus"], summary["mem"], summary["gpus"]))
        held = resource_totals(summaries)
        live = [slot.job for slot in self.slots
                if slot.state != "PENDING" and slot.state not in TERMINAL_STATES]
        used = resource_totals(vars(job) for job in live)
        held = {key: held[key] + used[key] for key in held}
        if self.most_held is not None:
            held = {key: max(held[key], self.most_held[key]) for key in held}
        self.most_held = held

    # -- called by the launcher ---------------------------------------------

    def missing_message(self, waited: float, master: str) -> str:
        """Why the cluster is not complete after ``waited`` seconds: each
        missing task, what the whole cluster needs against the most that
        offers (and the run's live tasks) held at once, and the largest
        offer seen (or that ``master`` sent none)."""
        said = []
        for slot in self.slots:
            if slot.address is not None:
                continue
            if slot.state == "PENDING" and slot.attempts == 0:
                said.append((slot.name, "no offer fits cpus=%g mem=%g gpus=%d"
                             % (slot.job.cpus, slot.job.mem, slot.job.gpus)))
            else:
                said.append((slot.name, slot.condition()))
        text = "the cluster was not complete after %.0f s; missing: %s; the cluster needs %s " \
            "in total" % (waited, grouped(said),
                          describe_resources(resource_totals(vars(s.job) for s in self.slots)))
        largest, most_held = self.largest_offer, self.most_held
        if self._ports_used_up:
            text += ("; %s offered no port: every port %s is in use (each task needs one)"
                     % (_grouped_agents(sorted(self._ports_used_up.values())),
                        "it offers" if len(self._ports_used_up) == 1 else "they offer"))
        if largest and most_held is not None:   # (both noted from the same offers)
            return text + "; offers held at most %s; largest offer seen: %s on %s" % (
                describe_resources(most_held), describe_resources(largest),
                largest["agent"])
        return text + "; no offer received from %s" % master

    def reconcile(self, driver: OfferDriver, implicit: bool = False) -> None:
        """Explicit reconciliation of every task that is not known to have
        ended (docs/reconciliation.md): Mesos answers each with its latest
        state, TASK_LOST for a task it does not know any more. A lost
        connection only postpones it (the next subscription reconciles).
        A REVIVE that could not be sent is sent again first."""
        if self._revive_owed:
            self.revive(driver)
        with self.lock:
            tasks = [{"task_id": {"value": slot.task_id}, "agent_id": {"value": slot.agent_id}}
                     for slot in self.slots
                     if slot.task_id and slot.state not in TERMINAL_STATES
                     and slot.state != "PENDING"]
        said = "reconciliation postponed"
        if tasks and not unless_disconnected(driver.reconcileTasks, tasks, said=said):
            return
        if implicit:   # and whatever else Mesos still runs for us
            unless_disconnected(driver.reconcileTasks, [], said=said)

    def close(self) -> None:
        """The run stops: later offers are declined, nothing more launches
        (a task that ends meanwhile frees resources for the missing ones)."""
        with self.lock:
            self._closed = True

    def revive(self, driver: OfferDriver) -> None:
        """Slots wait for another attempt: ask for offers again. A master
        that cannot be reached now (reconnecting, or its answer never came)
        is asked again by the next ``reconcile`` (periodic, and after every
        re-subscription, whose SUBSCRIBE no longer says suppressed): the run
        waits, it does not fail."""
        with self.lock:
            self._suppressed = False
            self._revive_owed = False
        if not unless_disconnected(driver.reviveOffers, said="offers asked for again later"):
            self._revive_owed = True


def _request(slot: TaskSlot, extra_ports: int = 0) -> TaskRequest[TaskSlot]:
    """What a pending slot asks of the offers; pinned to its agent and port
    for a sticky relaunch."""
    agent_id, port = slot.hold or (None, None)
    return TaskRequest(slot, slot.job.cpus, slot.job.mem, slot.job.gpus, agent_id=agent_id,
                       fixed_port=port, extra_ports=extra_ports)


def _grouped_agents(hosts: list[str]) -> str:
    """``agent h1``, ``agents h1, h2``, ``agents h1, h2 and 3 more``."""
    shown = ", ".join(hosts[:3]) + (" and %d more" % (len(hosts) - 3) if len(hosts) > 3 else "")
    return ("agent " if len(hosts) == 1 else "agents ") + shown
