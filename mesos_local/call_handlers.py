"""The scheduler calls but SUBSCRIBE: ``SchedulerCalls.handle`` checks the
caller (framework, stream id) and runs ``_call_<type>``: ACCEPT (LAUNCH and
LAUNCH_GROUP), DECLINE, REVIVE, SUPPRESS, KILL, ACKNOWLEDGE, RECONCILE, TEARDOWN,
UPDATE_FRAMEWORK, SHUTDOWN and MESSAGE (to custom executors: ``executors.py``),
RECONCILE_OPERATIONS, and the calls with nothing to do here (REQUEST,
inverse offers, operation acknowledgements).
"""

import base64
import logging
import time
from typing import Optional

from .api.operator_json import event_framework_updated
from .containerizer.planning import duration_seconds
from .errors import CallError
from .frameworks import framework_error, role_error, update_error
from .records import Offer, mesos_id
from .resources import Resources, format_error

log = logging.getLogger(__name__)


# The ACCEPT operations served here and the field each needs.
_LAUNCHES = {"LAUNCH": "launch", "LAUNCH_GROUP": "launch_group"}


class SchedulerCalls:
    def __init__(self, records, allocator, updates, tasks, frameworks):
        self.records = records
        self.allocator = allocator
        self.updates = updates
        self.tasks = tasks
        self.frameworks = frameworks

    def handle(self, call, stream_id, principal=None):
        """Handle any call but SUBSCRIBE of the authenticated ``principal``
        (None: no authentication); returns (HTTP status, content type, body)
        or raises CallError."""
        kind = call["type"]
        framework_id = call["framework_id"]["value"]
        with self.records.lock:
            if not self.records.running:
                raise CallError(503, "The local master is stopping")
            framework = self.records.frameworks.get(framework_id)
            if framework is None:
                raise CallError(400, "Framework cannot be found")
            owner = framework.info.get("principal")
            if principal is not None and principal != owner:
                # src/master/http.cpp: only the framework's principal may call.
                raise CallError(400, "Authenticated principal '%s' does not match principal "
                                     "'%s' set in `FrameworkInfo`" % (principal, owner or ""))
            if not framework.connected:
                raise CallError(403, "Framework is not subscribed")
            if stream_id is None:
                raise CallError(400, "All non-subscribe calls should include the "
                                     "'Mesos-Stream-Id' header")
            if stream_id != framework.subscription.stream_id:
                raise CallError(400, "The stream ID '%s' included in this request didn't "
                                     "match the stream ID currently associated with "
                                     "framework ID %s" % (stream_id, framework_id))
            handler = getattr(self, "_call_" + kind.lower(), None)
            if handler is None:
                raise CallError(501, "Call type %s is not implemented" % kind)
            result = handler(framework, call)
            return result if result is not None else (202, None, b"")

    def _call_teardown(self, framework, call):
        log.info("framework %s torn down", framework.id)
        self.frameworks.remove(framework)

    # -- offers -----------------------------------------------------------------

    def _call_accept(self, framework, call):
        accept = call["accept"]
        operations = accept.get("operations", [])
        for index, operation in enumerate(operations):
            kind = operation.get("type")
            if kind not in _LAUNCHES:
                raise CallError(400, "Call.accept.operations[%d]: operation type %s is not "
                                     "supported by the local master (only LAUNCH and "
                                     "LAUNCH_GROUP)" % (index, kind or "(unset)"))
            if _LAUNCHES[kind] not in operation:
                raise CallError(400, "Call.accept.operations[%d]: a %s operation needs '%s'"
                                % (index, kind, _LAUNCHES[kind]))
        task_infos = [info for operation in operations for info in _operation_tasks(operation)]
        offer_ids = [offer_id["value"] for offer_id in accept.get("offer_ids", [])]
        offers, error = self._take_offers(framework, offer_ids)
        if error is not None:
            self._drop_launches(framework, task_infos, error)
            return None
        pool = Resources()
        for offer in offers:
            pool.add(offer.resources)
        agent = self.records.agents[offers[0].agent_id]
        role = offers[0].role
        seen: set[str] = set()   # task ids launched by this call
        for operation in operations:   # in order, as Master::_accept takes them
            refused = _operation_error(operation)
            if refused is not None:    # Master::accept (src/master/master.cpp:4107-4190)
                reason = "REASON_TASK_INVALID" if operation["type"] == "LAUNCH" \
                    else "REASON_TASK_GROUP_INVALID"
                for info in _operation_tasks(operation):
                    self.tasks.refuse(framework, info, reason, refused)
                continue
            if operation["type"] == "LAUNCH":
                for info in operation["launch"].get("task_infos", []):
                    self.tasks.launch(framework, agent, info, pool, role, seen)
            else:
                self.tasks.executors.launch_group(framework, agent, operation["launch_group"],
                                                  pool, role, seen)
        agent.available.add(pool)
        self.allocator.refuse(framework, agent.id, pool, accept.get("filters"), role)
        self.allocator.request()
        return None

    def _take_offers(self, framework, offer_ids):
        """Remove every named offer the master has; returns (those offers,
        error or None). Valid: they are the caller's, on one agent, for one
        role. Invalid: Master::accept (src/master/master.cpp) discards each
        (``discardOffer``: its resources recovered, no RESCIND), another
        framework's included, so none of them can be used again."""
        error = self._offers_error(framework, offer_ids)
        offers: list[Offer] = []
        for offer_id in dict.fromkeys(offer_ids):
            offer = self.records.offers.get(offer_id)
            if offer is not None:
                offers.append(offer)
                self.allocator.remove_offer(offer, recover=error is not None)
        return offers, error

    def _offers_error(self, framework, offer_ids) -> Optional[str]:
        """validation::offer::validate (src/master/validation.cpp): each check
        runs over every offer before the next, the first failing one names
        the error."""
        if not offer_ids:
            return "No offers specified"
        seen: set[str] = set()
        for offer_id in offer_ids:
            if offer_id in seen:
                return "Duplicate offer %s in offer list" % offer_id
            seen.add(offer_id)
        offers = []
        for offer_id in offer_ids:
            offer = self.records.offers.get(offer_id)
            if offer is None:
                return "Offer %s is no longer valid" % offer_id
            offers.append(offer)
        for offer in offers:
            if offer.framework_id != framework.id:
                return ("Offer %s has invalid framework %s while framework %s is expected"
                        % (offer.id, offer.framework_id, framework.id))
        for offer in offers:
            if offer.role != offers[0].role:   # Mesos' quotes, unbalanced as there
                return ("Aggregated offers must be allocated to the same role. Offer %s "
                        "uses role '%s but another is using role '%s"
                        % (offer.id, offer.role, offers[0].role))
        for offer in offers:
            if offer.agent_id != offers[0].agent_id:
                return ("Aggregated offers must belong to one single agent. Offer %s uses "
                        "agent %s and agent %s" % (offer.id, offer.agent_id,
                                                   offers[0].agent_id))
        return None

    def _drop_launches(self, framework, task_infos, error):
        """An ACCEPT with invalid offers (already discarded): each task gets
        TASK_DROPPED (PARTITION_AWARE) or TASK_LOST."""
        state = "TASK_DROPPED" if framework.partition_aware else "TASK_LOST"
        for info in task_infos:
            self.updates.send_master_update(
                framework, info["task_id"]["value"], info["agent_id"]["value"], state,
                "REASON_INVALID_OFFERS", "Task launched with invalid offers: " + error)
        self.allocator.request()

    def _call_decline(self, framework, call):
        decline = call["decline"]
        for offer_id in decline.get("offer_ids", []):
            offer = self.records.offers.get(offer_id["value"])
            if offer is None or offer.framework_id != framework.id:
                continue  # Mesos ignores declines of unknown offers
            self.allocator.remove_offer(offer)
            self.allocator.refuse(framework, offer.agent_id, offer.resources,
                                  decline.get("filters"), offer.role)
        self.allocator.request()

    def _call_revive(self, framework, call):
        """``Master::revive`` (src/master/master.cpp): the roles named (none:
        all the framework's) are unsuppressed and their filters cleared
        (``HierarchicalAllocatorProcess::reviveOffers``); a role invalid or
        not the framework's drops the whole call."""
        roles = _call_roles(framework, call.get("revive", {}).get("roles"), "REVIVE")
        if roles is None:
            return
        framework.suppressed -= roles
        for agent_id, filters in list(framework.filters.items()):
            kept = [entry for entry in filters if entry[2] not in roles]
            if kept:
                framework.filters[agent_id] = kept
            else:
                del framework.filters[agent_id]
        self.allocator.request()

    def _call_suppress(self, framework, call):
        """``Master::suppress``: the roles named (none: all) are suppressed;
        a role invalid or not the framework's drops the whole call."""
        roles = _call_roles(framework, call.get("suppress", {}).get("roles"), "SUPPRESS")
        if roles is not None:
            framework.suppressed |= roles

    # -- tasks ------------------------------------------------------------------

    def _call_kill(self, framework, call):
        kill = call["kill"]
        task_id = kill["task_id"]["value"]
        task = framework.tasks.get(task_id)
        if task is None:
            agent_id = kill.get("agent_id", {}).get("value")
            self._reconcile_unknown(framework, task_id, agent_id)
            return
        agent_id = kill.get("agent_id", {}).get("value")
        if agent_id is not None and agent_id != task.agent_id:
            # Master::kill (src/master/master.cpp): ignored.
            log.warning("Cannot kill task %s of framework %s because it belongs to different "
                        "agent %s than %s", task_id, framework.id, task.agent_id, agent_id)
            return
        if task.terminal:
            return
        if task.executor is not None:   # its executor kills it and reports the end
            if not task.kill_requested:
                task.kill_requested = True
            self.tasks.executors.kill_task(task, kill.get("kill_policy"))
            return
        if task.proc is None:
            return
        grace = self.tasks.grace(task)
        if "grace_period" in kill.get("kill_policy", {}):
            grace = max(0.0, duration_seconds(kill["kill_policy"]["grace_period"]))
        if not task.kill_requested:
            task.kill_requested = True
            if framework.killing_state and task.state in ("TASK_STARTING", "TASK_RUNNING"):
                self.updates.update(task, "TASK_KILLING", "SOURCE_EXECUTOR")
        task.proc.kill(grace)

    def _call_acknowledge(self, framework, call):
        ack = call["acknowledge"]
        raw = base64.b64decode(ack["uuid"])
        self.updates.acknowledge(framework, ack["task_id"]["value"], ack["agent_id"]["value"],
                                 raw)

    def _call_reconcile(self, framework, call):
        wanted = call["reconcile"].get("tasks", [])
        if not wanted:
            for task in list(framework.tasks.values()):
                self.updates.send(framework, _reconciliation_status(task))
            return
        for item in wanted:
            task_id = item["task_id"]["value"]
            agent_id = item.get("agent_id", {}).get("value")
            task = framework.tasks.get(task_id)
            if task is not None:
                self.updates.send(framework, _reconciliation_status(task))
            else:
                self._reconcile_unknown(framework, task_id, agent_id)

    def _reconcile_unknown(self, framework, task_id, agent_id):
        if agent_id is not None and agent_id in self.records.agents:
            state = "TASK_GONE" if framework.partition_aware else "TASK_LOST"
            message = "Reconciliation: Task is unknown to the agent"
        elif agent_id is not None and agent_id in self.records.removed_agents:
            # Master::reconcileTasks, (5): an agent marked gone (src/master/master.cpp).
            state = "TASK_GONE_BY_OPERATOR" if framework.partition_aware else "TASK_LOST"
            message = "Reconciliation: Task is gone"
        else:
            state = "TASK_UNKNOWN" if framework.partition_aware else "TASK_LOST"
            message = "Reconciliation: Task is unknown"
        self.updates.send_master_update(framework, task_id, agent_id, state,
                                        "REASON_RECONCILIATION", message)

    # -- the framework ------------------------------------------------------------

    def _call_update_framework(self, framework, call):
        update = call["update_framework"]
        info = update["framework_info"]
        if info.get("id", {}).get("value") != framework.id:
            raise CallError(400, "Failed to validate scheduler::Call: "
                                 "'framework_info.id' must be the framework's id %s"
                            % framework.id)
        error = framework_error(info, update, self.frameworks.root_submissions)
        if error is not None:   # Master::updateFramework (src/master/master.cpp)
            raise CallError(400, "Supplied FrameworkInfo is not valid: %s" % error)
        error = update_error(framework.info, info)
        if error is not None:
            raise CallError(400, "FrameworkInfo update is not valid: %s" % error)
        changed = info != framework.info
        framework.update_info(info, update.get("suppressed_roles", []))
        if changed:   # Master::updateFramework: sendFrameworkUpdates
            self.records.subscribers.send(lambda: event_framework_updated(framework))
        for offer in list(framework.offers.values()):
            if offer.role not in framework.roles:
                self.allocator.rescind(offer)
        self.allocator.request()
        return 200, None, b""

    # -- custom executors (executors.py) --------------------------------------------

    def _call_shutdown(self, framework, call):
        shutdown = call["shutdown"]
        agent_id, executor_id = shutdown["agent_id"]["value"], shutdown["executor_id"]["value"]
        task = framework.tasks.get(executor_id)
        if task is not None and task.executor is None and task.group is None \
                and task.agent_id == agent_id:
            # A command task's executor is named after it (Slave::getExecutorInfo,
            # src/slave/slave.cpp); shut down, it kills its task: TASK_KILLED
            # (CommandExecutor::shutdown, src/launcher/executor.cpp).
            if not task.terminal and task.proc is not None and not task.kill_requested:
                task.kill_requested = True
                task.proc.kill(self.tasks.shutdown_grace(task))
            return
        self.tasks.executors.shutdown_executor(framework, agent_id, executor_id)

    def _call_message(self, framework, call):
        message = call["message"]
        self.tasks.executors.scheduler_message(framework, message["agent_id"]["value"],
                                               message["executor_id"]["value"],
                                               message["data"])

    # -- calls with nothing to do here ----------------------------------------------

    def _call_request(self, framework, call):
        pass  # the built-in Mesos allocator ignores REQUEST too

    def _call_accept_inverse_offers(self, framework, call):
        pass

    def _call_decline_inverse_offers(self, framework, call):
        pass

    def _call_acknowledge_operation_status(self, framework, call):
        pass  # operations with feedback are never created here

    def _call_reconcile_operations(self, framework, call):
        """202, then an UPDATE_OPERATION_STATUS event per operation asked
        about, as Mesos >= 1.10 answers (``Master::reconcileOperations``,
        src/master/master.cpp; src/master/http.cpp answers ``Accepted``).
        This master keeps no operations with feedback, so every one is
        unknown; an implicit reconciliation (no operations) has nothing to
        send. Not reliable: no uuid."""
        records = self.records
        for item in call["reconcile_operations"].get("operations", []):
            status = {"operation_id": item["operation_id"], "state": "OPERATION_UNKNOWN"}
            agent_id = item.get("agent_id", {}).get("value")
            if agent_id is None:
                status["message"] = ("Reconciliation: Operation is unknown and no 'agent_id' "
                                     "was provided")
            elif agent_id in records.agents:
                status["message"] = "Reconciliation: Operation is unknown"
            else:
                status["message"] = "Reconciliation: Both operation and agent are unknown"
            if agent_id is not None:
                status["agent_id"] = item["agent_id"]
            if "resource_provider_id" in item:
                status["resource_provider_id"] = item["resource_provider_id"]
            framework.send({"type": "UPDATE_OPERATION_STATUS",
                            "update_operation_status": {"status": status}})

def _operation_tasks(operation):
    if operation["type"] == "LAUNCH":
        return operation["launch"].get("task_infos", [])
    return operation["launch_group"]["task_group"].get("tasks", [])


def _operation_error(operation):
    """What fails a whole LAUNCH or LAUNCH_GROUP in ``Master::accept``:
    an invalid resource of any of its tasks (``validateAndUpgradeResources``)
    or an ``id`` (no operation feedback for launches)."""
    infos = _operation_tasks(operation)
    executors = [info["executor"] for info in infos if "executor" in info]
    if operation["type"] == "LAUNCH_GROUP" and "executor" in operation["launch_group"]:
        executors.append(operation["launch_group"]["executor"])
    for resources in [info.get("resources", []) for info in infos] + \
            [executor.get("resources", []) for executor in executors]:
        error = format_error(resources)
        if error is not None:
            return error
    if "id" in operation:
        return "The `id` field cannot be set on %s operations" % operation["type"]
    return None


def _call_roles(framework, named, kind):
    """The roles a REVIVE or SUPPRESS names (none: all the framework's), or
    None when one is invalid or not the framework's: Mesos drops the whole
    call then (``Master::revive``, ``Master::suppress``)."""
    if not named:
        return set(framework.roles)
    for role in named:
        error = role_error(role)
        if error is None and role not in framework.roles:
            error = "Role '%s' is not a role of the framework" % role
        if error is not None:
            log.warning("dropping %s of framework %s: %s", kind, framework.id, error)
            return None
    return set(named)


def _reconciliation_status(task):
    """The master's answer for a known task (``Master::reconcile``,
    src/master/master.cpp): the state of the update last forwarded to the
    framework (``status_update_state``: one being delivered, not yet
    acknowledged, may be older than the newest the master knows), else its
    latest state, from the master, with what
    ``createStatusUpdate`` is given there: ``healthy`` and ``check_status``
    of its last status and the most recent ``container_status``
    (``getTaskHealth``, ``getTaskCheckStatus``, ``getTaskContainerStatus``,
    src/common/protobuf_utils.cpp); no labels, no uuid."""
    state = task.status_update_state if task.status_update_state is not None else task.state
    status = {"task_id": mesos_id(task.id), "state": state, "source": "SOURCE_MASTER",
              "reason": "REASON_RECONCILIATION",
              "message": "Reconciliation: Latest task state",
              "agent_id": mesos_id(task.agent_id), "timestamp": time.time()}
    if task.status_log:
        last = task.status_log[-1]
        for key in ("healthy", "check_status"):
            if key in last:
                status[key] = last[key]
    for earlier in reversed(task.status_log):
        if "container_status" in earlier:
            status["container_status"] = earlier["container_status"]
            break
    return status
