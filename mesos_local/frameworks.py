"""Frameworks coming and going: SUBSCRIBE (a new framework, or a failover
that takes over an existing one), the end of a SUBSCRIBE stream, the
failover timeout and removal (TEARDOWN, or no failover in time).

As in Mesos, a disconnected framework keeps its tasks for
``failover_timeout`` seconds; when it is removed its tasks are killed as
its executors' shutdown kills them: SIGTERM, then SIGKILL after the
agent's ``--executor_shutdown_grace_period`` less 2 s (3 s by default),
never after a longer KillPolicy grace (``CommandExecutor::shutdown``,
src/launcher/executor.cpp). A
framework's principal never changes (src/master/validation.cpp,
``validateUpdate``): a SUBSCRIBE that names a known framework id with
another principal is refused with an ERROR event and the framework goes on
undisturbed, so one run cannot fail another over. A master started with
``root_submissions=False`` (Mesos' ``--root_submissions=false``) refuses a
framework whose user is root, as Mesos' master does.

The operator's event stream gets FRAMEWORK_ADDED when a new framework has
subscribed, FRAMEWORK_UPDATED when one re-subscribed (or changed its
FrameworkInfo with UPDATE_FRAMEWORK) and FRAMEWORK_REMOVED once one is
removed, after its tasks' TASK_KILLED (``Master::subscribe``,
``sendFrameworkUpdates``, ``removeFramework``, src/master/master.cpp).
"""

import itertools
import logging
import math
import time

from .api.operator_json import (
    event_framework_added,
    event_framework_removed,
    event_framework_updated,
)
from .api.stream import HEARTBEAT, Subscription
from .ids import id_error
from .records import Framework, mesos_id

log = logging.getLogger(__name__)

# The local master's own bounds (Mesos has none): what it keeps of every
# framework for as long as it runs, and shows in its state.
MAX_NAME_LENGTH = 1024
MAX_LABELS = 100
MAX_LABEL_LENGTH = 1024
_INT64_MAX = 2 ** 63 - 1


def roles_error(info):
    """``validateRoles`` (src/master/validation.cpp): the role fields that
    go with MULTI_ROLE, no duplicates, each role valid as
    src/common/roles.cpp says (hierarchical roles such as ``ml/team`` are).
    An error message naming the role, or None."""
    capabilities = [c.get("type") for c in info.get("capabilities", [])]
    multi_role = "MULTI_ROLE" in capabilities
    if "roles" in info and not multi_role:
        return ("'FrameworkInfo.roles' must not be set when the framework is not "
                "MULTI_ROLE capable")
    if "role" in info and multi_role:
        return ("'FrameworkInfo.role' must not be set when the framework is "
                "MULTI_ROLE capable")
    if not multi_role:
        error = role_error(info.get("role", "*"))
        return None if error is None else "'FrameworkInfo.role' is not a valid role: " + error
    roles = info.get("roles", [])
    duplicates = sorted({role for role in roles if roles.count(role) > 1})
    if duplicates:
        return "'FrameworkInfo.roles' contains duplicate items: %s" % duplicates
    for role in roles:
        error = role_error(role)
        if error is not None:
            return "'FrameworkInfo.roles' contains invalid role: " + error
    return None


# Master::validateFramework (src/master/master.cpp) with --root_submissions=false
# (src/master/flags.cpp: "Can root submit frameworks?").
ROOT_REFUSED = "User 'root' is not allowed to run frameworks without --root_submissions set"


def framework_error(info, call, root_submissions=True):
    """Mesos' FrameworkInfo validation of a SUBSCRIBE or UPDATE_FRAMEWORK
    call (``Master::validateFramework``): an error message or None;
    ``root_submissions``: the master flag, false refusing user root."""
    refused = roles_error(info)
    if refused is not None:
        return refused
    framework_id = info.get("id", {}).get("value")
    if framework_id:                  # validateFrameworkId: it names sandboxes' directories
        refused = id_error(framework_id)
        if refused is not None:
            return refused
    capabilities = [c.get("type") for c in info.get("capabilities", [])]
    multi_role = "MULTI_ROLE" in capabilities
    roles = info.get("roles", []) if multi_role else [info.get("role", "*")]
    suppressed = set(call.get("suppressed_roles", []))
    if not suppressed <= set(roles):
        return ("Suppressed roles %s are not a subset of the framework's roles %s"
                % (sorted(suppressed - set(roles)), roles))
    if "offer_constraints" in call:
        return "offer_constraints are not supported by the local master"
    refused = failover_timeout_error(info) or size_error(info)
    if refused is None and not root_submissions and info.get("user") == "root":
        refused = ROOT_REFUSED
    return refused


def failover_timeout_error(info):
    """``validateFailoverTimeout`` (src/master/validation.cpp): the timeout
    must be a stout ``Duration`` (``Duration::create``: seconds in
    nanoseconds within int64). Stricter than Mesos, NaN and negative
    timeouts are refused too: a framework with either would never be
    removed, or be removed at once."""
    timeout = info.get("failover_timeout", 0)
    nanos = timeout * 1e9
    if math.isnan(nanos) or timeout < 0 or nanos > _INT64_MAX:
        return "The framework failover_timeout (%s) is invalid" % timeout
    return None


def size_error(info):
    """The local master's bounds on what a framework asks it to keep."""
    name = info.get("name", "")
    if len(name) > MAX_NAME_LENGTH:
        return ("'FrameworkInfo.name' has %d characters; it may have at most %d"
                % (len(name), MAX_NAME_LENGTH))
    labels = info.get("labels", {}).get("labels", [])
    if len(labels) > MAX_LABELS:
        return ("'FrameworkInfo.labels' has %d labels; it may have at most %d"
                % (len(labels), MAX_LABELS))
    for label in labels:
        for part in ("key", "value"):
            if len(label.get(part, "")) > MAX_LABEL_LENGTH:
                return ("'FrameworkInfo.labels' has a %s of %d characters; a label's key "
                        "and value may have at most %d" % (part, len(label[part]),
                                                           MAX_LABEL_LENGTH))
    return None


def update_error(old, new):
    """Mesos' ``validateUpdate`` (src/master/validation.cpp) of a failover
    or UPDATE_FRAMEWORK: principal, user and checkpoint are fixed. An error
    message or None."""
    if old.get("principal") != new.get("principal"):
        return "Changing framework's principal is not allowed."
    if new.get("user") != old.get("user"):
        return ("Updating 'FrameworkInfo.user' is unsupported; attempted to update from "
                "'%s' to '%s'" % (old.get("user"), new.get("user")))
    if bool(new.get("checkpoint", False)) != bool(old.get("checkpoint", False)):
        # stout's stringify(bool): true, false (3rdparty/stout/include/stout/stringify.hpp)
        return ("Updating 'FrameworkInfo.checkpoint' is unsupported; attempted to update "
                "from '%s' to '%s'" % (_stringify(old.get("checkpoint", False)),
                                       _stringify(new.get("checkpoint", False))))
    return None


def _stringify(flag):
    return "true" if flag else "false"


def preserve_immutable_fields(old, new):
    """Mesos' ``preserveImmutableFields`` (src/master/validation.cpp): a
    failover keeps the framework's user and checkpoint. Returns ``new``
    updated (a copy)."""
    new = dict(new, user=old.get("user"))
    if bool(new.get("checkpoint", False)) != bool(old.get("checkpoint", False)):
        new["checkpoint"] = bool(old.get("checkpoint", False))
    return new


class Frameworks:
    """Subscriptions and removals; ``master_info`` (for SUBSCRIBED) is set
    when the master starts. ``subscribe``, ``stream_ended`` (HTTP threads)
    and ``_failover_expired`` (a timer) take the master's lock; the other
    methods run with it held."""

    def __init__(self, records, allocator, updates, tasks, loop, master_id,
                 heartbeat_interval, root_submissions=True):
        self.root_submissions = root_submissions   # Mesos' master flag
        self.records = records
        self.allocator = allocator
        self.updates = updates
        self.tasks = tasks
        self.loop = loop
        self.master_id = master_id
        self.heartbeat_interval = heartbeat_interval
        self.master_info = None
        self._counter = itertools.count()

    def subscribe(self, call, principal=None, address=None):
        """Handle a SUBSCRIBE call of the authenticated ``principal`` (None:
        no authentication) that reached the master at ``address`` ((host,
        port), None: unknown); returns the Subscription to stream. A refused
        subscription streams an ERROR event and ends."""
        subscribe = call["subscribe"]
        info = subscribe["framework_info"]
        if principal is not None and "principal" not in info:
            # As src/master/http.cpp: the authenticated principal becomes the
            # framework's when FrameworkInfo does not name one.
            info = dict(info, principal=principal)
        framework_id = info.get("id", {}).get("value")
        with self.records.lock:
            framework, refused = self._find(info, subscribe, framework_id)
            if refused is not None:
                subscription = Subscription(framework_id or "", self.heartbeat_interval)
                subscription.close(error=refused)
                log.info("refused SUBSCRIBE of %r: %s", info.get("name"), refused)
                return subscription
            # Its stream first (a pipe: OSError out of file descriptors),
            # before anything changes: no framework is left without one.
            subscription = Subscription(framework_id or "", self.heartbeat_interval)
            suppressed = subscribe.get("suppressed_roles", [])
            event = event_framework_updated
            if framework is None:
                framework = self._add(framework_id, info, suppressed)
                event = event_framework_added
            else:
                self._fail_over(framework, preserve_immutable_fields(framework.info, info),
                                suppressed)
            framework.files_address = address
            self._connect(framework, subscription)
            self.records.subscribers.send(lambda: event(framework))
            return subscription

    def _find(self, info, subscribe, framework_id):
        """(the framework of that id or None, why SUBSCRIBE is refused or None)."""
        records = self.records
        if not records.running:
            return None, "The local master is stopping"
        refused = framework_error(info, subscribe, self.root_submissions)
        if refused is not None or framework_id is None:
            return None, refused
        framework = records.frameworks.get(framework_id)
        if framework is None and framework_id in records.removed_frameworks:
            return None, "Framework has been removed"
        if framework is not None:
            refused = update_error(framework.info,
                                   preserve_immutable_fields(framework.info, info))
            if refused is not None:
                log.warning("framework %s of principal %r: a SUBSCRIBE with principal %r "
                            "was refused", framework_id, framework.info.get("principal"),
                            info.get("principal"))
                return None, refused
        return framework, None

    def _add(self, framework_id, info, suppressed):
        # An id this master never saw is re-admitted, as a newly elected
        # Mesos master re-admits the frameworks of the one before it.
        framework_id = framework_id or "%s-%04d" % (self.master_id, next(self._counter))
        framework = Framework(framework_id, info, suppressed)
        self.records.frameworks[framework_id] = framework
        self.records.framework_order.append(framework)
        log.info("framework %s (%s) subscribed", framework_id, framework.name)
        return framework

    def _fail_over(self, framework, info, suppressed):
        old = framework.subscription
        if old is not None:
            old.close(error="Framework failed over")
        self.allocator.remove_offers(framework)
        framework.update_info(info, suppressed)
        framework.reregistered_time = time.time()
        framework.disconnects += 1  # cancels a pending failover timeout
        log.info("framework %s (%s) failed over", framework.id, framework.name)

    def _connect(self, framework, subscription):
        subscription.framework_id = framework.id
        framework.subscription = subscription
        framework.connected = framework.active = True
        subscription.send({"type": "SUBSCRIBED", "subscribed": {
            "framework_id": mesos_id(framework.id),
            "heartbeat_interval_seconds": self.heartbeat_interval,
            "master_info": self.master_info}})
        subscription.send(HEARTBEAT)
        self.updates.resend(framework)
        self.allocator.request()

    def stream_ended(self, subscription, reason):
        """The HTTP layer reports that a SUBSCRIBE stream ended."""
        with self.records.lock:
            framework = self.records.frameworks.get(subscription.framework_id)
            if framework is None or framework.subscription is not subscription:
                return
            log.info("framework %s disconnected (%s)", framework.id, reason)
            self.disconnect(framework)

    def connected(self, framework_id):
        """The connected framework of that id, or KeyError."""
        framework = self.records.frameworks.get(framework_id)
        if framework is None or not framework.connected:
            raise KeyError("no connected framework %r" % framework_id)
        return framework

    def disconnect(self, framework):
        framework.connected = framework.active = False
        framework.subscription = None
        # unregistered_time is its removal's, not its disconnection's: Mesos
        # sets it in Master::removeFramework only (master.cpp), so a framework
        # failing over shows 0 (state.json) or none (GET_FRAMEWORKS).
        framework.disconnects += 1
        # HierarchicalAllocatorProcess::deactivateFramework clears its
        # offer filters (src/master/allocator/mesos/hierarchical.cpp).
        framework.filters.clear()
        self.allocator.remove_offers(framework)
        self.loop.schedule(framework.failover_timeout, self._failover_expired, framework,
                           framework.disconnects)
        self.allocator.request()

    def _failover_expired(self, framework, generation):
        with self.records.lock:
            if (framework.disconnects == generation and not framework.connected
                    and self.records.frameworks.get(framework.id) is framework):
                log.info("framework %s did not fail over within %s s: removing it",
                         framework.id, framework.failover_timeout)
                self.remove(framework)

    def remove(self, framework):
        """TEARDOWN (the framework's or an operator's) or failover timeout:
        kill its tasks as their executors' shutdown does (SIGTERM, SIGKILL
        after ``TaskLauncher.shutdown_grace``: 3 s by default, however long
        a KillPolicy asks for), forget it."""
        records = self.records
        for task in list(framework.tasks.values()):
            task.removed = True
            task.updates.clear()
            if not task.terminal:
                self.updates.record(task, "TASK_KILLED", "SOURCE_MASTER",
                                    reason="REASON_FRAMEWORK_REMOVED",
                                    message="Framework %s removed" % framework.id,
                                    with_uuid=False)
            if task.proc is not None and not task.process_done:
                # Its executor is shut down: a shorter grace than a KILL's.
                task.proc.kill(self.tasks.shutdown_grace(task))
            framework.complete_task(task)
        self.tasks.executors.shutdown_framework(framework)   # Slave::shutdownFramework
        self.allocator.remove_offers(framework)
        if framework.subscription is not None:
            framework.subscription.close()
        framework.subscription = None
        framework.connected = framework.active = False
        framework.unregistered_time = framework.unregistered_time or time.time()
        records.frameworks.pop(framework.id, None)
        if framework in records.framework_order:
            records.framework_order.remove(framework)
        records.completed_frameworks.append(framework)
        records.removed_frameworks.add(framework.id)
        records.subscribers.send(lambda: event_framework_removed(framework))
        self.allocator.request()


# Mesos role names, checked as Mesos checks them (``roles::validate`` in
# src/common/roles.cpp): ``*``, or ``/``-separated components (hierarchical
# roles such as ``ml/team``) with no leading, trailing or doubled slash, no
# ``.``, ``..`` or ``*`` component, no component starting with ``-``, and no
# whitespace or DEL anywhere.
_INVALID_CHARACTERS = "\t\n\x0b\x0c\r \x7f"


def role_error(role):
    """Why Mesos refuses ``role``, or None when it is valid."""
    if role == "*":
        return None
    if role.startswith("/"):
        return "Role '%s' cannot start with a slash" % role
    if role.endswith("/"):
        return "Role '%s' cannot end with a slash" % role
    if "//" in role:
        return "Role '%s' cannot contain two adjacent slashes" % role
    components = [part for part in role.split("/") if part]
    if not components:
        return "Role names cannot be the empty string"
    for component in components:
        if component in (".", "..", "*"):
            return "Role '%s' cannot include '%s' as a component" % (role, component)
        if component.startswith("-"):
            return ("Role component '%s' is invalid because it starts with a dash"
                    % component)
        if any(char in _INVALID_CHARACTERS for char in component):
            return ("Role component '%s' is invalid because it contains backspace or "
                    "whitespace" % component)
    return None
