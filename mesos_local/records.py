"""What the local master keeps: ``Records`` (every agent, framework, offer
and running process, behind the master's one lock) and the records it
holds of each framework, offer, task and unacknowledged status update.
"""

import collections
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Optional

from .ids import uuid4_text
from .subscribers import Subscribers

if TYPE_CHECKING:   # the stream imports nothing of the records; only its type is named here
    from .api.stream import Subscription

# A task in one of these states will never change state again (TaskState in
# include/mesos/v1/mesos.proto).
TERMINAL_STATES = frozenset((
    "TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST",
    "TASK_DROPPED", "TASK_GONE", "TASK_GONE_BY_OPERATOR"))


MAX_COMPLETED_TASKS = 1000        # Mesos' --max_completed_tasks_per_framework
MAX_COMPLETED_FRAMEWORKS = 50     # Mesos' --max_completed_frameworks


def mesos_id(value):
    """An ID message (FrameworkID, AgentID, OfferID, TaskID) as JSON."""
    return {"value": value}


class Records:
    """The master's shared state. ``lock`` (an RLock) guards all of it and
    is held only for short updates; ``cond`` wakes the loop thread."""

    def __init__(self):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.status = "new"              # new -> starting -> running -> stopping -> stopped
        self.agents = {}                 # agent_id -> Agent (insertion ordered)
        self.removed_agents = set()
        self.frameworks = {}             # framework_id -> Framework
        self.framework_order = []        # round-robin order of allocation
        self.completed_frameworks: collections.deque[Framework] = collections.deque(
            maxlen=MAX_COMPLETED_FRAMEWORKS)
        self.removed_frameworks = set()
        self.offers = {}                 # offer_id -> Offer
        self.procs = set()               # TaskProcesses not yet reaped
        # (agent id, framework id, executor id) -> its custom Executor (executors.py)
        self.executors: dict[tuple[str, str, str], Executor] = {}
        self.ended_tasks: collections.Counter[str] = collections.Counter()   # state -> tasks
        # (framework id, executor id) -> its latest run directory, and
        # (framework id, executor id, container id) -> each run's: the
        # sandboxes /files serves (api/files.py)
        self.sandboxes = {}
        self.runs = {}
        # Where /files is served, (host, port), for a framework that did not
        # say where it reached the master (Framework.files_address).
        self.files_address = None
        # The operator API's SUBSCRIBE streams: every change below is sent there.
        self.subscribers = Subscribers()

    @property
    def running(self):
        return self.status == "running"


class Framework:
    def __init__(self, framework_id, info, suppressed_roles=()):
        self.id = framework_id
        self.tasks = {}                  # task_id -> Task (not yet completed)
        self.completed_tasks: collections.deque[Task] = collections.deque(
            maxlen=MAX_COMPLETED_TASKS)
        self.offers = {}                 # offer_id -> Offer
        self.filters = {}                # agent_id -> [(expiry, refused Resources, role)]
        self.subscription: Optional[Subscription] = None
        self.connected = False
        self.active = False
        self.registered_time = time.time()
        self.reregistered_time = None
        self.unregistered_time = 0.0
        self.disconnects = 0             # invalidates pending failover timers
        self.files_address = None        # (host, port) it subscribed at: its offers' url
        self.update_info(info, suppressed_roles)

    def update_info(self, info, suppressed_roles=()):
        self.info = info
        self.capabilities = [c.get("type", "UNKNOWN") for c in info.get("capabilities", [])]
        self.multi_role = "MULTI_ROLE" in self.capabilities
        self.gpu_aware = "GPU_RESOURCES" in self.capabilities
        self.partition_aware = "PARTITION_AWARE" in self.capabilities
        self.killing_state = "TASK_KILLING_STATE" in self.capabilities
        self.refinement = "RESERVATION_REFINEMENT" in self.capabilities
        if self.multi_role:
            self.roles = list(info.get("roles", []))
        else:
            self.roles = [info.get("role", "*")]
        self.suppressed = set(suppressed_roles)
        self.failover_timeout = float(info.get("failover_timeout", 0.0))

    @property
    def name(self):
        return self.info["name"]

    def offer_role(self):
        """The first role offers may go to, None when all are suppressed (or
        without roles)."""
        return next(iter(self.offer_roles()), None)

    def offer_roles(self):
        """Every role offers may go to, in the framework's order."""
        return [role for role in self.roles if role not in self.suppressed]

    def send(self, event):
        """Put an event on the stream while the framework is connected."""
        if self.connected and self.subscription is not None:
            self.subscription.send(event)

    def complete_task(self, task: "Task") -> None:
        """Move a task to ``completed_tasks`` (once)."""
        if self.tasks.get(task.id) is task:
            del self.tasks[task.id]
            self.completed_tasks.append(task)


class Offer:
    __slots__ = ("id", "framework_id", "agent_id", "resources", "role", "json")

    def __init__(self, offer_id, framework_id, agent_id, resources, role, json):
        self.id = offer_id
        self.framework_id = framework_id
        self.agent_id = agent_id
        self.resources = resources
        self.role = role
        self.json = json


class Update:
    """A reliable status update awaiting its acknowledgement."""

    __slots__ = ("uuid", "status")

    def __init__(self, raw_uuid, status):
        self.uuid = raw_uuid
        self.status = status


class Task:
    def __init__(self, framework, agent, info, resources, plan, role):
        self.id = info["task_id"]["value"]
        self.framework_id = framework.id
        self.agent_id = agent.id
        self.info = info
        self.name = info["name"]
        self.resources = resources
        self.plan = plan
        self.role = role
        self.gpu_ids = []
        self.sandbox = None
        self.container_id = uuid4_text()   # as an agent's containerizer names it
        self.agent_ip = agent.ip
        self.proc = None
        self.executor: Optional[Executor] = None   # a custom executor's task: that executor
        self.group: Optional[list[Task]] = None    # a task group's task: the group's tasks
        self.state = "TASK_STAGING"
        self.statuses = []               # for /master/state
        self.last_status = None          # latest TaskStatus JSON
        # Task.statuses as Mesos' master keeps them (``Master::updateTask``):
        # every TaskStatus, one that repeats the last one's state replacing
        # it; GET_TASKS shows them, reconciliation copies from them.
        self.status_log = []
        self.updates: collections.deque[Update] = collections.deque()   # not yet acknowledged
        self.retry_interval = None
        self.retry_generation = 0
        self.released = False            # resources returned to the agent
        self.removed = False             # framework or agent gone: no more updates
        self.kill_requested = False
        self.kill_reason = None
        self.process_done = False
        # The update last forwarded to the framework (Task.status_update_state
        # and status_update_uuid, as Master::forward sets them).
        self.status_update_state: Optional[str] = None
        self.status_update_uuid: Optional[str] = None
        # The state of the last TASK_UPDATED event (Master::updateTask sends
        # one for every new state).
        self.published_state: Optional[str] = None

    @property
    def terminal(self):
        return self.state in TERMINAL_STATES


class Executor:
    """An executor (``TaskInfo.executor``, a LAUNCH_GROUP's) on one agent:
    its process and its tasks, as a Mesos agent's ``Executor``
    (src/slave/slave.hpp) keeps them. ``state``: REGISTERING (launched, not
    yet subscribed), RUNNING (subscribed), TERMINATING (shut down or
    killed), TERMINATED. ``kind``: CUSTOM (a process of the framework's,
    ``plan``), or DEFAULT (Mesos' default executor, played by the agent
    itself: its tasks run as processes of their own, ``executors.py``)."""

    def __init__(self, framework_id, agent, info, resources, role, plan, kind="CUSTOM"):
        self.id = info["executor_id"]["value"]
        self.kind = kind
        self.framework_id = framework_id
        self.agent_id = agent.id
        self.info = info                 # its ExecutorInfo, framework_id filled in
        self.resources = resources       # its own, beside its tasks'
        self.role = role
        self.plan = plan                 # planning.TaskPlan of its command
        self.container_id = uuid4_text()
        self.sandbox: Optional[str] = None
        self.gpu_ids: list[str] = []
        self.state = "REGISTERING"
        self.subscription: Optional[Subscription] = None
        self.proc: Any = None            # its containerizer.executor.TaskProcess
        self.queued: dict[str, Task] = {}     # task id -> task not yet sent to it
        self.launched: dict[str, Task] = {}   # task id -> task sent to it (LAUNCH)
        self.queued_groups: list[list[Task]] = []   # task groups not yet sent to it
        self.ever_sent_task = False
        self.uuids: set[bytes] = set()   # of the updates taken: one sent again is dropped
        # (state, reason, message) its live tasks end with when it terminates,
        # set before it is killed (``pendingTermination``, src/slave/slave.cpp)
        self.pending_termination: Optional[tuple[str, str, str]] = None
        self.released = False            # its own resources given back
        self.removed = False             # its agent was removed
        self.generation = 0              # a shutdown's timer checks it is still due
        # MESOS_EXECUTOR_AUTHENTICATION_TOKEN where the agents authenticate
        # executors (a master with credentials), else None
        self.token: Optional[str] = None

    @property
    def key(self) -> tuple[str, str, str]:
        return self.agent_id, self.framework_id, self.id

    def tasks(self) -> "list[Task]":
        return list(self.launched.values()) + list(self.queued.values()) + [
            task for group in self.queued_groups for task in group]

    def allocated(self, tasks: "Optional[Iterable[Task]]" = None):
        """Its resources and its live tasks' (of ``tasks``; None: its own,
        ``tasks()``), as ``Executor::allocatedResources`` (src/slave/slave.cpp)."""
        resources = self.resources.copy()
        for task in self.tasks() if tasks is None else tasks:
            if not task.terminal:
                resources.add(task.resources)
        return resources
