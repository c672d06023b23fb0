"""The local master's allocator: allocation rounds, offers, rescinds,
decline/accept filters and resources coming back from ended tasks.

Each round offers every agent's available resources to one framework,
round-robin. Filters are Mesos' ``RefusedOfferFilter``s
(src/master/allocator/mesos/hierarchical.cpp): every DECLINE or ACCEPT adds
one per (framework, agent) for its own ``refuse_seconds``, each expiring
independently (a later, shorter one does not shorten an earlier one), and
an offer is withheld while any live filter's resources contain it; REVIVE
clears them. As Mesos' hierarchical allocator
(``isCapableOfReceivingAgent``, src/master/allocator/mesos/hierarchical.cpp):
with ``filter_gpu_resources`` (the master's default) an agent with GPUs is
offered only to frameworks with GPU_RESOURCES; without it, to every
framework, GPUs included.
All methods but ``allocate`` run with the master's lock held.
"""

import itertools
import time

from .agent import agent_url
from .records import Offer, mesos_id

MAX_REFUSE = 365 * 24 * 3600.0     # refuse_seconds cap (Mesos: 365 days)
DEFAULT_REFUSE = 5.0


class Allocator:
    def __init__(self, records, master_id, interval, filter_gpu_resources):
        self.records = records
        self.master_id = master_id
        self.interval = interval
        self.filter_gpu_resources = filter_gpu_resources
        self.next_round = 0.0            # monotonic time of the next periodic round
        self._requested = False
        self._round = 0
        self._offer_counter = itertools.count(1)

    def request(self):
        """Ask for a round soon (after SUBSCRIBE, REVIVE, freed resources)."""
        self._requested = True
        self.records.cond.notify_all()

    def due(self, now):
        return self._requested or now >= self.next_round

    def allocate(self):
        records = self.records
        with records.lock:
            if not records.running:
                return
            now = time.monotonic()
            self._requested = False
            self.next_round = now + self.interval
            frameworks = [f for f in records.framework_order
                          if f.connected and f.active and f.offer_role() is not None]
            if not frameworks:
                return
            self._round += 1
            batches: dict[str, list[dict]] = {}   # framework id -> its offers' JSON
            for agent in records.agents.values():
                if not agent.active or not agent.available.allocatable():
                    continue
                offer = self._offer_agent(agent, frameworks, now)
                if offer is not None:
                    batches.setdefault(offer.framework_id, []).append(offer.json)
            for framework_id, offers in batches.items():
                records.frameworks[framework_id].send(
                    {"type": "OFFERS", "offers": {"offers": offers}})

    def _offer_agent(self, agent, frameworks, now):
        """Offer the agent to the first framework, in this round's order,
        that may have it; returns the Offer or None."""
        available = agent.available
        count = len(frameworks)
        start = (self._round + agent.index) % count
        for k in range(count):
            framework = frameworks[(start + k) % count]
            if agent.gpu_ids and not framework.gpu_aware and self.filter_gpu_resources:
                continue   # isCapableOfReceivingAgent (hierarchical.cpp)
            offerable = available.copy()
            # Each of its roles in turn, as the allocator offers to a framework
            # in every role it has (hierarchical.cpp: filters are per role): its
            # first role declined, the next one gets the resources.
            for role in framework.offer_roles():
                if not self._filtered(framework, agent.id, offerable, now, role):
                    return self.make_offer(framework, agent, offerable, role)
        return None

    @staticmethod
    def _filtered(framework, agent_id, offerable, now, role):
        """Whether a live filter of the framework's ``role`` on the agent
        covers ``offerable`` (``isFiltered``, hierarchical.cpp: filters are
        per role); drops the expired ones."""
        filters = framework.filters.get(agent_id)
        if not filters:
            return False
        live = [entry for entry in filters if now < entry[0]]
        if live:
            framework.filters[agent_id] = live
        else:
            del framework.filters[agent_id]
        return any(refused.contains(offerable) for _, refused, of in live if of == role)

    def make_offer(self, framework, agent, resources, role=None):
        offer_id = "%s-O%d" % (self.master_id, next(self._offer_counter))
        role = role if role is not None else framework.offer_role()
        body = {
            "id": mesos_id(offer_id), "framework_id": mesos_id(framework.id),
            "agent_id": mesos_id(agent.id), "hostname": agent.hostname,
            "resources": resources.to_json(
                role=None if framework.refinement else "*",
                allocation_role=role if framework.multi_role else None),
            "attributes": agent.attributes_json(),
        }
        url = agent_url(agent, framework.files_address or self.records.files_address)
        if url is not None:
            body["url"] = url
        if framework.multi_role:
            body["allocation_info"] = {"role": role}
        offer = Offer(offer_id, framework.id, agent.id, resources, role, body)
        agent.available.subtract(resources)
        agent.offered.add(resources)
        agent.offers[offer_id] = offer
        framework.offers[offer_id] = offer
        self.records.offers[offer_id] = offer
        return offer

    def remove_offer(self, offer, recover=True):
        """Withdraw an offer; its resources go back to the agent if ``recover``."""
        records = self.records
        records.offers.pop(offer.id, None)
        framework = records.frameworks.get(offer.framework_id)
        if framework is not None:
            framework.offers.pop(offer.id, None)
        agent = records.agents.get(offer.agent_id)
        if agent is not None:
            agent.offers.pop(offer.id, None)
            agent.offered.subtract(offer.resources)
            if recover:
                agent.available.add(offer.resources)

    def remove_offers(self, framework):
        """Withdraw all the framework's offers (no RESCIND: it is gone or failing over)."""
        for offer in list(framework.offers.values()):
            self.remove_offer(offer)

    def rescind(self, offer):
        self.remove_offer(offer)
        framework = self.records.frameworks.get(offer.framework_id)
        if framework is not None:
            framework.send({"type": "RESCIND", "rescind": {"offer_id": mesos_id(offer.id)}})

    def refuse(self, framework, agent_id, resources, filters, role):
        """Filter ``resources`` of the agent from the framework's offers to
        ``role``."""
        seconds = DEFAULT_REFUSE
        if filters is not None and "refuse_seconds" in filters:
            seconds = float(filters["refuse_seconds"])
            if seconds < 0:
                seconds = DEFAULT_REFUSE
        seconds = min(seconds, MAX_REFUSE)
        if seconds > 0 and resources:
            framework.filters.setdefault(agent_id, []).append(
                (time.monotonic() + seconds, resources.copy(), role))

    def release(self, task):
        """Give an ended task's resources and GPUs back to its agent (once)."""
        if task.released:
            return
        task.released = True
        agent = self.records.agents.get(task.agent_id)
        if agent is not None:
            agent.used.subtract(task.resources)
            agent.available.add(task.resources)
            agent.give_gpus(task.gpu_ids)
            agent.tasks.pop((task.framework_id, task.id), None)
        self.request()
