"""The local master's state machine: frameworks, agents, offers, tasks.

All state sits behind one lock. Nothing that can block on the network or on
a process runs under it: events go into each subscription's queue (written
by that stream's own thread), tasks run on their own threads (``agent.py``),
and timers (status update retries, failover timeouts, allocation rounds) run
on the master's loop thread, which takes the lock only for short updates.

Mesos behaviour reproduced here (see ``master/master.cpp``): status updates
of one task are delivered in order, one at a time, re-sent with backoff until
acknowledged; master-generated updates (TASK_ERROR, invalid offers, lost
agents, reconciliation) carry no uuid and need no acknowledgement; a
disconnected framework keeps its tasks for ``failover_timeout`` seconds;
decline/accept filters refuse a subset of an agent's resources for
``refuse_seconds``; a task's processes are all gone (its group, and any that
left it with setsid(), found by their ``MESOS_SANDBOX``) before its terminal
update goes out, as when Mesos destroys a container.
"""

import base64
import collections
import heapq
import itertools
import json
import logging
import os
import shutil
import socket
import struct
import tempfile
import threading
import time
import uuid

from ...exceptions import MesosError
from . import agent as agentlib
from .agent import (NO_DOCKER_MESSAGE, Agent, AgentSpec, TaskInvalid, TaskProcess,
                    build_launch, check_id, describe_exit, gpu_count, plan_task)
from .resources import ResourceError, Resources
from .resources import parse as parse_resources
from .runner import ProcessRunner
from .state import VERSION, render_state, render_version
from .stream import HEARTBEAT, Subscription

log = logging.getLogger(__name__)

TERMINAL_STATES = frozenset((
    "TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST",
    "TASK_DROPPED", "TASK_GONE", "TASK_GONE_BY_OPERATOR"))
_MAX_RETRY = 600.0                 # status update backoff cap (10 minutes)
_MAX_REFUSE = 365 * 24 * 3600.0    # refuse_seconds cap (Mesos: 365 days)
_DEFAULT_REFUSE = 5.0
_MAX_COMPLETED_TASKS = 1000        # Mesos' --max_completed_tasks_per_framework
_MAX_COMPLETED_FRAMEWORKS = 50     # Mesos' --max_completed_frameworks


class LocalMasterError(MesosError):
    """The local master cannot start (e.g. its port is taken) or was misused."""


class CallError(Exception):
    """A scheduler call refused with an HTTP status and a plain-text message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def _id(value):
    return {"value": value}


def _b64(raw):
    return base64.b64encode(raw).decode("ascii")


class _Framework:
    def __init__(self, framework_id, info, suppressed_roles=()):
        self.id = framework_id
        self.tasks = {}                  # task_id -> _Task (not yet completed)
        self.completed_tasks = collections.deque(maxlen=_MAX_COMPLETED_TASKS)
        self.offers = {}                 # offer_id -> _Offer
        self.filters = {}                # agent_id -> (expiry, refused Resources)
        self.subscription = None
        self.connected = False
        self.active = False
        self.registered_time = time.time()
        self.reregistered_time = None
        self.unregistered_time = 0.0
        self.disconnects = 0             # invalidates pending failover timers
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
        """The role offers go to, None when suppressed (or without roles)."""
        for role in self.roles:
            if role not in self.suppressed:
                return role
        return None


class _Offer:
    __slots__ = ("id", "framework_id", "agent_id", "resources", "role", "json")

    def __init__(self, offer_id, framework_id, agent_id, resources, role, json):
        self.id = offer_id
        self.framework_id = framework_id
        self.agent_id = agent_id
        self.resources = resources
        self.role = role
        self.json = json


class _Update:
    __slots__ = ("uuid", "status")

    def __init__(self, raw_uuid, status):
        self.uuid = raw_uuid
        self.status = status


class _Task:
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
        self.proc = None
        self.state = "TASK_STAGING"
        self.statuses = []               # for /master/state
        self.last_status = None          # latest TaskStatus JSON (for reconciliation)
        self.updates = collections.deque()   # reliable updates not yet acknowledged
        self.retry_interval = None
        self.retry_generation = 0
        self.released = False            # resources returned to the agent
        self.removed = False             # framework or agent gone: no more updates
        self.kill_requested = False
        self.kill_reason = None
        self.process_done = False

    @property
    def terminal(self):
        return self.state in TERMINAL_STATES


class _Timers:
    """A heap of (deadline, callback, args); the loop runs what is due."""

    def __init__(self):
        self._heap = []
        self._counter = itertools.count()

    def add(self, deadline, callback, args):
        heapq.heappush(self._heap, (deadline, next(self._counter), callback, args))

    def next_deadline(self):
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now):
        due = []
        while self._heap and self._heap[0][0] <= now:
            _, _, callback, args = heapq.heappop(self._heap)
            due.append((callback, args))
        return due

    def clear(self):
        self._heap.clear()


class LocalMaster:
    """A single-process Mesos master speaking the v1 scheduler HTTP API.

    ``agents``: AgentSpecs (default: one agent sized to this machine).
    ``heartbeat_interval``: seconds between HEARTBEAT events.
    ``allocation_interval``: seconds between allocation rounds (a round also
    runs promptly after SUBSCRIBE, REVIVE and freed resources).
    ``status_update_retry``: first re-send of an unacknowledged status
    update, doubling up to 10 minutes. ``kill_grace_period``: SIGTERM to
    SIGKILL, unless the task's or the call's kill policy says otherwise.
    ``work_dir``: where sandboxes go (default a temporary directory, removed
    by ``stop()`` unless ``keep_sandboxes``). ``runner``: runs plain command
    tasks (default ``ProcessRunner()``); ``container_runner``: runs tasks
    that name an image (default none: such tasks fail).
    ``filter_gpu_resources``: like the Mesos master flag of that name, keep
    GPU agents entirely from frameworks without GPU_RESOURCES (default off:
    they get the agent's other resources, never its GPUs).
    """

    def __init__(self, agents=None, host="127.0.0.1", port=0, heartbeat_interval=15.0,
                 allocation_interval=0.25, status_update_retry=10.0, kill_grace_period=3.0,
                 work_dir=None, keep_sandboxes=False, runner=None, container_runner=None,
                 filter_gpu_resources=False):
        for name, value in (("heartbeat_interval", heartbeat_interval),
                            ("allocation_interval", allocation_interval),
                            ("status_update_retry", status_update_retry)):
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError("LocalMaster(%s=%r): must be a number > 0" % (name, value))
        if not isinstance(kill_grace_period, (int, float)) or kill_grace_period < 0:
            raise ValueError("LocalMaster(kill_grace_period=%r): must be a number >= 0"
                             % (kill_grace_period,))
        specs = [AgentSpec()] if agents is None else list(agents)
        for spec in specs:
            if not isinstance(spec, AgentSpec):
                raise TypeError("LocalMaster(agents=...) takes AgentSpec objects, got %r"
                                % (spec,))
        self.host = host
        self.port = port
        self.heartbeat_interval = float(heartbeat_interval)
        self.allocation_interval = float(allocation_interval)
        self.status_update_retry = float(status_update_retry)
        self.kill_grace_period = float(kill_grace_period)
        self.keep_sandboxes = keep_sandboxes
        self.filter_gpu_resources = filter_gpu_resources
        self.id = str(uuid.uuid4())
        self.url = None
        self.work_dir = work_dir
        self._own_work_dir = work_dir is None
        self._specs = specs
        self._runner = runner if runner is not None else ProcessRunner()
        self._container_runner = container_runner

        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._status = "new"             # new -> running -> stopped
        self._agents = {}                # agent_id -> Agent (insertion ordered)
        self._removed_agents = set()
        self._agent_counter = itertools.count()
        self._frameworks = {}            # framework_id -> _Framework
        self._framework_order = []       # round-robin order of allocation
        self._completed_frameworks = collections.deque(maxlen=_MAX_COMPLETED_FRAMEWORKS)
        self._removed_frameworks = set()
        self._framework_counter = itertools.count()
        self._offers = {}                # offer_id -> _Offer
        self._offer_counter = itertools.count(1)
        self._timers = _Timers()
        self._allocation_requested = False
        self._next_allocation = 0.0
        self._round = 0
        self._leader = None              # None: this master leads
        self._procs = set()              # TaskProcesses not yet reaped
        self._loop_thread = None
        self._http = None
        self._start_time = None
        self.master_info = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        """Start serving; returns the URL (``http://127.0.0.1:PORT``)."""
        from .http import MasterHTTPServer

        with self._lock:
            if self._status != "new":
                raise LocalMasterError("a LocalMaster can be started only once "
                                       "(this one is %s)" % self._status)
            self._status = "starting"
        try:
            if self.work_dir is None:
                self.work_dir = tempfile.mkdtemp(prefix="tfmesos-local-master-")
            else:
                self.work_dir = os.path.abspath(self.work_dir)
                os.makedirs(self.work_dir, exist_ok=True)
            agents = [self._new_agent(spec) for spec in self._specs]
            try:
                self._http = MasterHTTPServer(self, self.host, self.port)
            except OSError as exc:
                raise LocalMasterError("the local master cannot listen on %s:%s: %s"
                                       % (self.host, self.port, exc.strerror or exc)) from exc
        except BaseException:
            with self._lock:
                self._status = "stopped"
            self._remove_work_dir()
            raise
        self.port = self._http.server_port
        url_host = self._http.url_host
        self.url = "http://%s:%d" % (url_host, self.port)
        self._start_time = time.time()
        self.master_info = self._make_master_info(url_host)
        with self._lock:
            for agent in agents:
                self._agents[agent.id] = agent
            self._status = "running"
            self._next_allocation = time.monotonic()
        self._loop_thread = threading.Thread(target=self._loop, daemon=True,
                                             name="local-master-loop")
        self._loop_thread.start()
        self._http.start()
        log.info("local master %s listening on %s with %d agent(s), work dir %s",
                 self.id, self.url, len(agents), self.work_dir)
        return self.url

    def stop(self):
        """Kill every task (SIGTERM, SIGKILL after the grace period), close
        every stream, free the port. Idempotent."""
        with self._lock:
            if self._status in ("new", "stopped"):
                self._status = "stopped"
                return
            if self._status == "stopping":
                return
            self._status = "stopping"
            procs = list(self._procs)
            for framework in self._frameworks.values():
                if framework.subscription is not None:
                    framework.subscription.close()
                framework.connected = framework.active = False
            self._timers.clear()
            self._cond.notify_all()
        grace = self.kill_grace_period
        for proc in procs:
            proc.kill(grace)
        if self._loop_thread is not None:
            self._loop_thread.join(5)
        if self._http is not None:
            self._http.stop()
        with self._lock:  # anything launched while the first kills went out
            late = [proc for proc in self._procs if proc not in procs]
        for proc in late:
            proc.kill(grace)
        procs += late
        deadline = time.monotonic() + grace + 10
        for proc in procs:
            if not proc.join(max(0.0, deadline - time.monotonic())):
                log.warning("task %s did not end within %.0f s of stop()",
                            proc.launch.task_id, grace + 10)
        with self._lock:
            self._status = "stopped"
        if not self.keep_sandboxes:
            self._remove_work_dir()

    def _remove_work_dir(self):
        if self._own_work_dir and self.work_dir and os.path.isdir(self.work_dir):
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def _make_master_info(self, url_host):
        hostname = url_host
        try:
            ip = socket.gethostbyname(url_host)
            packed = struct.unpack("=I", socket.inet_aton(ip))[0]
        except OSError:
            ip, packed = "127.0.0.1", struct.unpack("=I", socket.inet_aton("127.0.0.1"))[0]
        return {"id": self.id, "ip": packed, "port": self.port,
                "pid": "master@%s:%d" % (ip, self.port), "hostname": hostname,
                "version": VERSION,
                "address": {"hostname": hostname, "ip": ip, "port": self.port}}

    # ------------------------------------------------------------------ public API

    def state(self):
        """The /master/state document."""
        with self._lock:
            return render_state(self)

    def add_agent(self, spec):
        """Add an agent (an AgentSpec) while running; returns its id."""
        if not isinstance(spec, AgentSpec):
            raise TypeError("add_agent takes an AgentSpec, got %r" % (spec,))
        if self.work_dir is None:
            raise LocalMasterError("start the master before adding agents")
        agent = self._new_agent(spec)
        with self._lock:
            self._agents[agent.id] = agent
            self._request_allocation()
        return agent.id

    def remove_agent(self, agent_id):
        """Fault injection: the agent is gone. Its tasks are killed; each
        framework gets TASK_GONE (PARTITION_AWARE) or TASK_LOST with reason
        REASON_AGENT_REMOVED, a FAILURE event, and RESCIND for its offers."""
        with self._lock:
            agent = self._agents.pop(agent_id, None)
            if agent is None:
                raise KeyError("no agent %r (agents: %s)" % (agent_id, ", ".join(self._agents)))
            agent.active = False
            self._removed_agents.add(agent_id)
            for offer in list(agent.offers.values()):
                self._rescind(offer)
            for task in list(agent.tasks.values()):
                framework = self._frameworks.get(task.framework_id)
                task.removed = True
                task.updates.clear()
                if task.proc is not None and not task.process_done:
                    task.proc.kill(0.0)
                if framework is None:
                    continue
                if not task.terminal:
                    state = "TASK_GONE" if framework.partition_aware else "TASK_LOST"
                    status = self._record_status(
                        task, state, "SOURCE_MASTER", reason="REASON_AGENT_REMOVED",
                        message="Agent %s removed" % agent_id, with_uuid=False)
                    self._send_update(framework, status)
                self._complete_task(framework, task)
            for framework in self._frameworks.values():
                if framework.connected:
                    framework.subscription.send(
                        {"type": "FAILURE", "failure": {"agent_id": _id(agent_id)}})
            self._request_allocation()

    def drop_subscription(self, framework_id):
        """Fault injection: close the framework's SUBSCRIBE stream abruptly;
        the framework is disconnected and its failover timer starts."""
        with self._lock:
            framework = self._connected_framework(framework_id)
            subscription = framework.subscription
            self._disconnect(framework)
        subscription.abort()

    def stall_subscription(self, framework_id):
        """Fault injection: keep the stream open but write nothing more
        (no heartbeats either); the framework stays 'connected'."""
        with self._lock:
            self._connected_framework(framework_id).subscription.stall()

    def set_leader(self, url=None):
        """None: this master leads. A URL: scheduler calls get 307 to it.
        "": no leader (503)."""
        with self._lock:
            self._leader = url

    def leader(self):
        with self._lock:
            return self._leader

    def wait_until(self, predicate, timeout):
        """Poll ``predicate(state())`` until true (returns the state) or raise
        TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state()
            if predicate(state):
                return state
            if time.monotonic() >= deadline:
                raise TimeoutError("local master: condition %s not met within %s s"
                                   % (getattr(predicate, "__name__", "predicate"), timeout))
            time.sleep(0.02)

    def sandbox(self, task_id, framework_id=None):
        """The sandbox directory of a task (the latest run of that id)."""
        with self._lock:
            for framework in list(self._frameworks.values()) + list(self._completed_frameworks):
                if framework_id is not None and framework.id != framework_id:
                    continue
                task = framework.tasks.get(task_id)
                if task is None:
                    task = next((t for t in reversed(framework.completed_tasks)
                                 if t.id == task_id), None)
                if task is not None and task.sandbox:
                    return task.sandbox
        raise KeyError("no task %r with a sandbox" % task_id)

    # ------------------------------------------------------------------ agents

    def _new_agent(self, spec):
        index = next(self._agent_counter)
        return Agent("%s-S%d" % (self.id, index), spec, self.work_dir, index)

    # ------------------------------------------------------------------ the loop

    def _loop(self):
        while True:
            with self._lock:
                if self._status != "running":
                    return
                now = time.monotonic()
                due = self._timers.pop_due(now)
                allocate = self._allocation_requested or now >= self._next_allocation
                if not due and not allocate:
                    wake = self._next_allocation
                    deadline = self._timers.next_deadline()
                    if deadline is not None:
                        wake = min(wake, deadline)
                    self._cond.wait(max(0.0, wake - now))
                    continue
            for callback, args in due:
                try:
                    callback(*args)
                except Exception:
                    log.exception("local master timer %s failed", callback.__name__)
            if allocate:
                try:
                    self._allocate()
                except Exception:
                    log.exception("local master allocation failed")

    def _schedule(self, delay, callback, *args):
        self._timers.add(time.monotonic() + delay, callback, args)
        self._cond.notify_all()

    def _request_allocation(self):
        self._allocation_requested = True
        self._cond.notify_all()

    # ------------------------------------------------------------------ allocation

    def _allocate(self):
        with self._lock:
            if self._status != "running":
                return
            now = time.monotonic()
            self._allocation_requested = False
            self._next_allocation = now + self.allocation_interval
            frameworks = [f for f in self._framework_order
                          if f.connected and f.active and f.offer_role() is not None]
            if not frameworks:
                return
            count = len(frameworks)
            self._round += 1
            batches = {}
            for agent in self._agents.values():
                available = agent.available
                if not agent.active or not available.allocatable():
                    continue
                start = (self._round + agent.index) % count
                for k in range(count):
                    framework = frameworks[(start + k) % count]
                    if agent.gpu_ids and not framework.gpu_aware:
                        if self.filter_gpu_resources:
                            continue
                        offerable = available.without("gpus")
                        if not offerable.allocatable():
                            continue
                    else:
                        offerable = available.copy()
                    refused = framework.filters.get(agent.id)
                    if refused is not None:
                        if now >= refused[0]:
                            del framework.filters[agent.id]
                        elif refused[1].contains(offerable):
                            continue
                    offer = self._make_offer(framework, agent, offerable)
                    batches.setdefault(framework.id, []).append(offer.json)
                    break
            for framework_id, offers in batches.items():
                self._frameworks[framework_id].subscription.send(
                    {"type": "OFFERS", "offers": {"offers": offers}})

    def _make_offer(self, framework, agent, resources):
        offer_id = "%s-O%d" % (self.id, next(self._offer_counter))
        role = framework.offer_role()
        body = {
            "id": _id(offer_id), "framework_id": _id(framework.id),
            "agent_id": _id(agent.id), "hostname": agent.spec.hostname,
            "resources": resources.to_json(
                role=None if framework.refinement else "*",
                allocation_role=role if framework.multi_role else None),
            "attributes": agent.attributes_json(),
        }
        if framework.multi_role:
            body["allocation_info"] = {"role": role}
        offer = _Offer(offer_id, framework.id, agent.id, resources, role, body)
        agent.available.subtract(resources)
        agent.offered.add(resources)
        agent.offers[offer_id] = offer
        framework.offers[offer_id] = offer
        self._offers[offer_id] = offer
        return offer

    def _remove_offer(self, offer, recover=True):
        """Withdraw an offer; its resources go back to the agent if ``recover``."""
        self._offers.pop(offer.id, None)
        framework = self._frameworks.get(offer.framework_id)
        if framework is not None:
            framework.offers.pop(offer.id, None)
        agent = self._agents.get(offer.agent_id)
        if agent is not None:
            agent.offers.pop(offer.id, None)
            agent.offered.subtract(offer.resources)
            if recover:
                agent.available.add(offer.resources)

    def _rescind(self, offer):
        self._remove_offer(offer)
        framework = self._frameworks.get(offer.framework_id)
        if framework is not None and framework.connected:
            framework.subscription.send({"type": "RESCIND",
                                         "rescind": {"offer_id": _id(offer.id)}})

    def _refuse(self, framework, agent_id, resources, filters):
        seconds = _DEFAULT_REFUSE
        if filters is not None and "refuse_seconds" in filters:
            seconds = float(filters["refuse_seconds"])
            if seconds < 0:
                seconds = _DEFAULT_REFUSE
        seconds = min(seconds, _MAX_REFUSE)
        if seconds > 0 and resources:
            framework.filters[agent_id] = (time.monotonic() + seconds, resources.copy())

    # ------------------------------------------------------------------ subscribe

    def _framework_error(self, info, call):
        """Mesos' FrameworkInfo validation; returns an error message or None."""
        capabilities = [c.get("type") for c in info.get("capabilities", [])]
        multi_role = "MULTI_ROLE" in capabilities
        if "roles" in info and not multi_role:
            return ("'FrameworkInfo.roles' is set but the framework does not have the "
                    "MULTI_ROLE capability")
        if "role" in info and multi_role:
            return ("'FrameworkInfo.role' must not be set when the framework has the "
                    "MULTI_ROLE capability (use 'roles')")
        roles = info.get("roles", []) if multi_role else [info.get("role", "*")]
        if len(set(roles)) != len(roles):
            return "'FrameworkInfo.roles' contains duplicate entries: %s" % roles
        for role in roles:
            if (not role or role in (".", "..") or role.startswith("-")
                    or any(c.isspace() or c in "/\\" or ord(c) < 32 for c in role)) \
                    and role != "*":
                return "Invalid role %r" % role
        suppressed = set(call.get("suppressed_roles", []))
        if not suppressed <= set(roles):
            return ("Suppressed roles %s are not a subset of the framework's roles %s"
                    % (sorted(suppressed - set(roles)), roles))
        if "offer_constraints" in call:
            return "offer_constraints are not supported by the local master"
        if info.get("failover_timeout", 0) < 0:
            return "'FrameworkInfo.failover_timeout' must not be negative"
        return None

    def subscribe(self, call):
        """Handle a SUBSCRIBE call; returns the Subscription to stream. A
        refused subscription streams an ERROR event and ends."""
        subscribe = call["subscribe"]
        info = subscribe["framework_info"]
        framework_id = info.get("id", {}).get("value")
        with self._lock:
            refused = None
            if self._status != "running":
                refused = "The local master is stopping"
            else:
                refused = self._framework_error(info, subscribe)
            framework = None
            if refused is None and framework_id is not None:
                framework = self._frameworks.get(framework_id)
                if framework is None and framework_id in self._removed_frameworks:
                    refused = "Framework has been removed"
            if refused is not None:
                subscription = Subscription(framework_id or "", self.heartbeat_interval)
                subscription.close(error=refused)
                log.info("refused SUBSCRIBE of %r: %s", info.get("name"), refused)
                return subscription
            suppressed = subscribe.get("suppressed_roles", [])
            if framework is None:
                # An id this master never saw is re-admitted, as a newly elected
                # Mesos master re-admits the frameworks of the one before it.
                framework_id = framework_id or "%s-%04d" % (self.id, next(self._framework_counter))
                framework = _Framework(framework_id, info, suppressed)
                self._frameworks[framework_id] = framework
                self._framework_order.append(framework)
                log.info("framework %s (%s) subscribed", framework_id, framework.name)
            else:
                old = framework.subscription
                if old is not None:
                    old.close(error="Framework failed over")
                for offer in list(framework.offers.values()):
                    self._remove_offer(offer)
                framework.update_info(info, suppressed)
                framework.reregistered_time = time.time()
                framework.disconnects += 1  # cancels a pending failover timeout
                log.info("framework %s (%s) failed over", framework_id, framework.name)
            subscription = Subscription(framework_id, self.heartbeat_interval)
            framework.subscription = subscription
            framework.connected = framework.active = True
            framework.unregistered_time = 0.0
            subscription.send({"type": "SUBSCRIBED", "subscribed": {
                "framework_id": _id(framework_id),
                "heartbeat_interval_seconds": self.heartbeat_interval,
                "master_info": self.master_info}})
            subscription.send(HEARTBEAT)
            for task in framework.tasks.values():
                if task.updates:
                    task.retry_interval = self.status_update_retry
                    self._forward(task)
            self._request_allocation()
            return subscription

    def stream_ended(self, subscription, reason):
        """The HTTP layer reports that a SUBSCRIBE stream ended."""
        with self._lock:
            framework = self._frameworks.get(subscription.framework_id)
            if framework is None or framework.subscription is not subscription:
                return
            log.info("framework %s disconnected (%s)", framework.id, reason)
            self._disconnect(framework)

    def _connected_framework(self, framework_id):
        framework = self._frameworks.get(framework_id)
        if framework is None or not framework.connected:
            raise KeyError("no connected framework %r" % framework_id)
        return framework

    def _disconnect(self, framework):
        framework.connected = framework.active = False
        framework.subscription = None
        framework.unregistered_time = time.time()
        framework.disconnects += 1
        for offer in list(framework.offers.values()):
            self._remove_offer(offer)
        self._schedule(framework.failover_timeout, self._failover_expired, framework,
                       framework.disconnects)
        self._request_allocation()

    def _failover_expired(self, framework, generation):
        with self._lock:
            if (framework.disconnects == generation and not framework.connected
                    and self._frameworks.get(framework.id) is framework):
                log.info("framework %s did not fail over within %s s: removing it",
                         framework.id, framework.failover_timeout)
                self._remove_framework(framework)

    def _remove_framework(self, framework):
        """TEARDOWN or failover timeout: kill its tasks, forget it."""
        for task in list(framework.tasks.values()):
            task.removed = True
            task.updates.clear()
            if not task.terminal:
                self._record_status(task, "TASK_KILLED", "SOURCE_MASTER",
                                    reason="REASON_FRAMEWORK_REMOVED",
                                    message="Framework %s removed" % framework.id,
                                    with_uuid=False)
            if task.proc is not None and not task.process_done:
                task.proc.kill(self._grace(task))
            self._complete_task(framework, task)
        for offer in list(framework.offers.values()):
            self._remove_offer(offer)
        if framework.subscription is not None:
            framework.subscription.close()
        framework.subscription = None
        framework.connected = framework.active = False
        framework.unregistered_time = framework.unregistered_time or time.time()
        self._frameworks.pop(framework.id, None)
        if framework in self._framework_order:
            self._framework_order.remove(framework)
        self._completed_frameworks.append(framework)
        self._removed_frameworks.add(framework.id)
        self._request_allocation()

    # ------------------------------------------------------------------ other calls

    def scheduler_call(self, call, stream_id):
        """Handle any call but SUBSCRIBE; returns (HTTP status, content type,
        body) or raises CallError."""
        kind = call["type"]
        framework_id = call["framework_id"]["value"]
        with self._lock:
            if self._status != "running":
                raise CallError(503, "The local master is stopping")
            framework = self._frameworks.get(framework_id)
            if framework is None:
                raise CallError(400, "Framework cannot be found")
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
        self._remove_framework(framework)

    def _call_accept(self, framework, call):
        accept = call["accept"]
        operations = accept.get("operations", [])
        for index, operation in enumerate(operations):
            kind = operation.get("type")
            if kind != "LAUNCH":
                raise CallError(400, "Call.accept.operations[%d]: operation type %s is not "
                                     "supported by the local master (only LAUNCH)"
                                % (index, kind or "(unset)"))
            if "launch" not in operation:
                raise CallError(400, "Call.accept.operations[%d]: a LAUNCH operation needs "
                                     "'launch'" % index)
        task_infos = [info for operation in operations
                      for info in operation["launch"].get("task_infos", [])]
        offer_ids = [offer_id["value"] for offer_id in accept.get("offer_ids", [])]
        offers, error = self._take_offers(framework, offer_ids)
        pool = Resources()
        for offer in offers:
            pool.add(offer.resources)
        if error is not None:
            for offer in offers:
                agent = self._agents.get(offer.agent_id)
                if agent is not None:
                    agent.available.add(offer.resources)
            state = "TASK_DROPPED" if framework.partition_aware else "TASK_LOST"
            for info in task_infos:
                self._send_master_update(
                    framework, info["task_id"]["value"], info["agent_id"]["value"], state,
                    "REASON_INVALID_OFFERS", "Task launched with invalid offers: " + error)
            self._request_allocation()
            return None
        agent = self._agents[offers[0].agent_id]
        role = offers[0].role
        seen = set()
        for info in task_infos:
            self._launch(framework, agent, info, pool, role, seen)
        agent.available.add(pool)
        self._refuse(framework, agent.id, pool, accept.get("filters"))
        self._request_allocation()
        return None

    def _take_offers(self, framework, offer_ids):
        """Remove the named offers; returns (valid offers, error or None)."""
        if not offer_ids:
            return [], "No offers specified"
        offers, error, seen = [], None, set()
        for offer_id in offer_ids:
            offer = self._offers.get(offer_id)
            if offer_id in seen:
                error = error or "Duplicate offer %s in offer list" % offer_id
            elif offer is None:
                error = error or "Offer %s is no longer valid" % offer_id
            elif offer.framework_id != framework.id:
                error = error or ("Offer %s has invalid framework %s while framework %s is "
                                  "expected" % (offer_id, offer.framework_id, framework.id))
            elif offers and offer.agent_id != offers[0].agent_id:
                error = error or ("Aggregated offers must belong to one single agent. Offer "
                                  "%s uses agent %s and agent %s"
                                  % (offer_id, offer.agent_id, offers[0].agent_id))
            else:
                offers.append(offer)
                self._remove_offer(offer, recover=False)
            seen.add(offer_id)
        return offers, error

    def _launch(self, framework, agent, info, pool, role, seen):
        task_id = info["task_id"]["value"]
        try:
            check_id("TaskID", task_id)
            if task_id in framework.tasks or task_id in seen:
                raise TaskInvalid("Task has duplicate ID: %s" % task_id)
            if info["agent_id"]["value"] != agent.id:
                raise TaskInvalid("Task uses invalid agent: %s (the offer is on agent %s)"
                                  % (info["agent_id"]["value"], agent.id))
            plan = plan_task(info)
            resources = parse_resources(info.get("resources", []),
                                        multi_role=framework.multi_role, role=role)
            gpus = gpu_count(resources)
            if not pool.contains(resources):
                raise TaskInvalid("Task uses more resources %s than available %s"
                                  % (resources.describe(), pool.describe()))
        except (TaskInvalid, ResourceError) as exc:
            self._send_master_update(framework, task_id, info["agent_id"]["value"],
                                     "TASK_ERROR", "REASON_TASK_INVALID", str(exc))
            return
        seen.add(task_id)
        pool.subtract(resources)
        task = _Task(framework, agent, info, resources, plan, role)
        task.retry_interval = self.status_update_retry
        task.gpu_ids = agent.take_gpus(gpus)
        agent.used.add(resources)
        agent.tasks[(framework.id, task_id)] = task
        framework.tasks[task_id] = task
        task.sandbox = agent.sandbox_path(framework.id, task_id)
        if plan.image is not None and self._container_runner is None:
            self._update(task, "TASK_FAILED", "SOURCE_AGENT",
                         reason="REASON_CONTAINER_LAUNCH_FAILED", message=NO_DOCKER_MESSAGE)
            return
        launch = build_launch(plan, task_id, framework.id, agent.id, task.sandbox,
                              task.gpu_ids, bool(agent.gpu_ids), dict(os.environ))
        if launch.image and launch.user is None:
            # Mesos runs a container task as the framework's user, not the image's.
            launch.user = framework.info.get("user")
        runner = self._container_runner if plan.image is not None else self._runner
        proc = TaskProcess(launch, runner, plan.uris, self._on_running, self._on_exit)
        proc.task = task
        task.proc = proc
        self._procs.add(proc)
        self._update(task, "TASK_STARTING", "SOURCE_EXECUTOR")
        proc.start()
        if plan.max_completion is not None:
            self._schedule(plan.max_completion, self._max_completion_reached, task)

    def _call_decline(self, framework, call):
        decline = call["decline"]
        for offer_id in decline.get("offer_ids", []):
            offer = self._offers.get(offer_id["value"])
            if offer is None or offer.framework_id != framework.id:
                continue  # Mesos ignores declines of unknown offers
            self._remove_offer(offer)
            self._refuse(framework, offer.agent_id, offer.resources, decline.get("filters"))
        self._request_allocation()

    def _call_revive(self, framework, call):
        roles = call.get("revive", {}).get("roles") or framework.roles
        framework.suppressed -= set(roles)
        framework.filters.clear()
        self._request_allocation()

    def _call_suppress(self, framework, call):
        roles = call.get("suppress", {}).get("roles") or framework.roles
        framework.suppressed |= set(roles)

    def _call_kill(self, framework, call):
        kill = call["kill"]
        task_id = kill["task_id"]["value"]
        task = framework.tasks.get(task_id)
        if task is None:
            agent_id = kill.get("agent_id", {}).get("value")
            self._reconcile_unknown(framework, task_id, agent_id)
            return
        if task.terminal or task.proc is None:
            return
        grace = self._grace(task)
        if "grace_period" in kill.get("kill_policy", {}):
            grace = max(0.0, agentlib.duration_seconds(kill["kill_policy"]["grace_period"]))
        if not task.kill_requested:
            task.kill_requested = True
            if framework.killing_state and task.state in ("TASK_STARTING", "TASK_RUNNING"):
                self._update(task, "TASK_KILLING", "SOURCE_EXECUTOR")
        task.proc.kill(grace)

    def _grace(self, task):
        return task.plan.kill_grace if task.plan.kill_grace is not None \
            else self.kill_grace_period

    def _max_completion_reached(self, task):
        with self._lock:
            if task.terminal or task.removed or task.proc is None or task.kill_requested:
                return
            task.kill_requested = True
            task.kill_reason = "max_completion"
            task.proc.kill(self._grace(task))

    def _call_acknowledge(self, framework, call):
        ack = call["acknowledge"]
        task = framework.tasks.get(ack["task_id"]["value"])
        raw = base64.b64decode(ack["uuid"])
        if (task is None or task.agent_id != ack["agent_id"]["value"] or not task.updates
                or task.updates[0].uuid != raw):
            return  # Mesos answers 202 and drops unknown acknowledgements
        task.updates.popleft()
        task.retry_generation += 1
        task.retry_interval = self.status_update_retry
        if task.updates:
            self._forward(task)
        elif task.terminal:
            self._complete_task(framework, task)

    def _call_reconcile(self, framework, call):
        wanted = call["reconcile"].get("tasks", [])
        if not wanted:
            for task in list(framework.tasks.values()):
                self._send_update(framework, self._reconciliation_status(task))
            return
        for item in wanted:
            task_id = item["task_id"]["value"]
            agent_id = item.get("agent_id", {}).get("value")
            task = framework.tasks.get(task_id)
            if task is not None:
                self._send_update(framework, self._reconciliation_status(task))
            else:
                self._reconcile_unknown(framework, task_id, agent_id)

    def _reconciliation_status(self, task):
        status = {"task_id": _id(task.id), "state": task.state, "source": "SOURCE_MASTER",
                  "reason": "REASON_RECONCILIATION",
                  "message": "Reconciliation: Latest task state",
                  "agent_id": _id(task.agent_id), "timestamp": time.time()}
        if task.last_status is not None and "labels" in task.last_status:
            status["labels"] = task.last_status["labels"]
        return status

    def _reconcile_unknown(self, framework, task_id, agent_id):
        if agent_id is not None and agent_id in self._agents:
            state = "TASK_GONE" if framework.partition_aware else "TASK_LOST"
            message = "Reconciliation: Task is unknown to the agent"
        elif agent_id is not None and agent_id in self._removed_agents:
            state = "TASK_GONE" if framework.partition_aware else "TASK_LOST"
            message = "Reconciliation: Task is unknown; its agent was removed"
        else:
            state = "TASK_UNKNOWN" if framework.partition_aware else "TASK_LOST"
            message = "Reconciliation: Task is unknown"
        self._send_master_update(framework, task_id, agent_id, state,
                                 "REASON_RECONCILIATION", message)

    def _call_shutdown(self, framework, call):
        pass  # no custom executors here, so nothing to shut down

    def _call_message(self, framework, call):
        pass  # no custom executors to deliver to; Mesos gives no guarantee anyway

    def _call_request(self, framework, call):
        pass  # the built-in Mesos allocator ignores REQUEST too

    def _call_accept_inverse_offers(self, framework, call):
        pass

    def _call_decline_inverse_offers(self, framework, call):
        pass

    def _call_acknowledge_operation_status(self, framework, call):
        pass  # operations with feedback are never created here

    def _call_reconcile_operations(self, framework, call):
        statuses = [{"operation_id": item["operation_id"], "state": "OPERATION_UNKNOWN"}
                    for item in call["reconcile_operations"].get("operations", [])]
        body = {"type": "RECONCILE_OPERATIONS",
                "reconcile_operations": {"operation_statuses": statuses}}
        return 200, "application/json", json.dumps(body).encode("utf-8")

    def _call_update_framework(self, framework, call):
        update = call["update_framework"]
        info = update["framework_info"]
        if info.get("id", {}).get("value") != framework.id:
            raise CallError(400, "Failed to validate scheduler::Call: "
                                 "'framework_info.id' must be the framework's id %s"
                            % framework.id)
        error = self._framework_error(info, update)
        if error is not None:
            raise CallError(400, error)
        framework.update_info(info, update.get("suppressed_roles", []))
        for offer in list(framework.offers.values()):
            if offer.role not in framework.roles:
                self._rescind(offer)
        self._request_allocation()
        return 200, None, b""

    # ------------------------------------------------------------------ status updates

    def _record_status(self, task, state, source, reason=None, message=None, with_uuid=True):
        status = {"task_id": _id(task.id), "state": state, "source": source,
                  "agent_id": _id(task.agent_id), "timestamp": time.time()}
        if reason is not None:
            status["reason"] = reason
        if message is not None:
            status["message"] = message
        raw = None
        if with_uuid:
            raw = uuid.uuid4().bytes
            status["uuid"] = _b64(raw)
        task.state = state
        task.last_status = status
        entry = {"state": state, "timestamp": status["timestamp"]}
        if message is not None:
            entry["message"] = message
        task.statuses.append(entry)
        if state in TERMINAL_STATES:
            self._release(task)
        return status if raw is None else _Update(raw, status)

    def _update(self, task, state, source, reason=None, message=None):
        """A reliable (agent or executor) update: queued, delivered in order."""
        update = self._record_status(task, state, source, reason, message)
        task.updates.append(update)
        if len(task.updates) == 1:
            self._forward(task)

    def _forward(self, task):
        """Send the oldest unacknowledged update and arm its retry."""
        framework = self._frameworks.get(task.framework_id)
        if not task.updates or framework is None or not framework.connected:
            return
        framework.subscription.send({"type": "UPDATE",
                                     "update": {"status": task.updates[0].status}})
        task.retry_generation += 1
        self._schedule(task.retry_interval, self._retry, task, task.retry_generation)
        task.retry_interval = min(task.retry_interval * 2, _MAX_RETRY)

    def _retry(self, task, generation):
        with self._lock:
            if task.retry_generation == generation and task.updates and not task.removed:
                log.debug("re-sending %s of task %s", task.updates[0].status["state"], task.id)
                self._forward(task)

    def _send_update(self, framework, status):
        if framework.connected:
            framework.subscription.send({"type": "UPDATE", "update": {"status": status}})

    def _send_master_update(self, framework, task_id, agent_id, state, reason, message):
        status = {"task_id": _id(task_id), "state": state, "source": "SOURCE_MASTER",
                  "reason": reason, "message": message, "timestamp": time.time()}
        if agent_id is not None:
            status["agent_id"] = _id(agent_id)
        self._send_update(framework, status)

    def _release(self, task):
        if task.released:
            return
        task.released = True
        agent = self._agents.get(task.agent_id)
        if agent is not None:
            agent.used.subtract(task.resources)
            agent.available.add(task.resources)
            agent.give_gpus(task.gpu_ids)
            agent.tasks.pop((task.framework_id, task.id), None)
        self._request_allocation()

    def _complete_task(self, framework, task):
        if framework.tasks.get(task.id) is task:
            del framework.tasks[task.id]
            framework.completed_tasks.append(task)

    # ------------------------------------------------------------------ task callbacks

    def _on_running(self, proc):
        with self._lock:
            task = proc.task
            if self._status != "running" or task.removed or task.terminal \
                    or task.kill_requested:
                return
            self._update(task, "TASK_RUNNING", "SOURCE_EXECUTOR")

    def _on_exit(self, proc, status, error):
        with self._lock:
            self._procs.discard(proc)
            task = proc.task
            task.process_done = True
            if task.removed or task.terminal or self._status != "running":
                self._release(task)
                return
            if task.kill_reason == "max_completion":
                self._update(task, "TASK_FAILED", "SOURCE_EXECUTOR",
                             reason="REASON_MAX_COMPLETION_TIME_REACHED",
                             message="Task reached its maximum completion time")
            elif task.kill_requested:
                if status is None:
                    self._update(task, "TASK_KILLED", "SOURCE_AGENT",
                                 reason="REASON_TASK_KILLED_DURING_LAUNCH",
                                 message="Task killed during launch")
                else:
                    self._update(task, "TASK_KILLED", "SOURCE_EXECUTOR",
                                 message=describe_exit(status))
            elif error is not None:
                self._update(task, "TASK_FAILED", "SOURCE_AGENT",
                             reason="REASON_CONTAINER_LAUNCH_FAILED", message=error)
            elif status == 0:
                self._update(task, "TASK_FINISHED", "SOURCE_EXECUTOR",
                             message=describe_exit(status))
            else:
                self._update(task, "TASK_FAILED", "SOURCE_EXECUTOR",
                             reason="REASON_COMMAND_EXECUTOR_FAILED",
                             message=describe_exit(status))

    def version_json(self):
        """The /version document (the scheduler picks its containerizer from it)."""
        return render_version()
