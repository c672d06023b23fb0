"""Custom executors (``TaskInfo.executor`` with a ``command``), as a Mesos
agent runs them (src/slave/slave.cpp; docs/executor-http-api.md).

A task that names an executor goes to that executor: the first such task
of a (framework, executor id) on an agent starts the executor as a process
of its own, through the same containerizer path a command task takes
(``containerizer/executor.py``'s ``TaskProcess``: sandbox, fetch, user,
cgroups, runner), with the environment Mesos gives executors
(``executorEnvironment``, src/slave/slave.cpp); later tasks go to the
running executor. Its resources are its ExecutorInfo's, beside its tasks'.

The executor speaks the v1 executor API at its agent's
``/api/v1/executor`` (``api/executor_api.py``): ``SUBSCRIBE`` (the agent
answers ``SUBSCRIBED``, then ``LAUNCH`` for each task held for it, and
``HEARTBEAT`` every 30 minutes), ``UPDATE`` (forwarded to the scheduler
reliably with the executor's uuid; the executor gets ``ACKNOWLEDGED`` as
soon as the agent took the update, as ``Slave::___statusUpdate`` sends
it), ``MESSAGE`` (to the scheduler as a ``MESSAGE`` event). The
scheduler's ``MESSAGE`` reaches it as a ``MESSAGE`` event, ``KILL`` of one
of its tasks as a ``KILL`` event; ``SHUTDOWN`` and the framework's removal
send ``SHUTDOWN`` and destroy it after its shutdown grace period
(``Slave::_shutdownExecutor``). An executor that does not subscribe within
the registration timeout is destroyed (``registerExecutorTimeout``). When
its process ends, each of its live tasks fails (TASK_FAILED,
``REASON_EXECUTOR_TERMINATED``, "Executor terminated", from the agent:
``sendExecutorTerminatedStatusUpdate``) and the scheduler gets a
``FAILURE`` event with the agent, the executor and its wait status
(``Master::exitedExecutor``).

Every method but the process callbacks and timers runs with the master's
lock held.
"""

import base64
import hmac
import logging
import secrets

from .api.operator_json import agent_info
from .api.stream import Subscription
from .containerizer.planning import (
    NO_DOCKER_MESSAGE,
    TaskInvalid,
    build_launch,
    check_container_user,
    check_executor,
    duration_seconds,
    gpu_count,
    plan_custom_task,
    plan_executor,
)
from .containerizer.task_checks import check_task_fields
from .durations import stringify_duration
from .errors import CallError
from .records import Executor, mesos_id
from .resources import ResourceError
from .resources import parse as parse_resources
from .task_groups import TaskGroups
from .updates import container_status
from .watchdog import RECOVERY_TIMEOUT

log = logging.getLogger(__name__)

# src/slave/constants.hpp and src/slave/flags.cpp
HEARTBEAT_INTERVAL = 1800.0        # DEFAULT_EXECUTOR_HEARTBEAT_INTERVAL (30 minutes)
REGISTRATION_TIMEOUT = 60.0        # --executor_registration_timeout
SHUTDOWN_GRACE_PERIOD = 5.0        # --executor_shutdown_grace_period
REREGISTRATION_TIMEOUT = 2.0       # --executor_reregistration_timeout
# MAX_REAP_INTERVAL() (1 s, 3rdparty/libprocess/src/reap.cpp) + 1 s: what
# the command executor's shutdown grace adds to its task's kill grace
# (Slave::getExecutorInfo), and keeps back of its own (CommandExecutor::shutdown).
REAP_MARGIN = 2.0

# The TaskStatus fields an executor's update carries through to the scheduler.
_STATUS_FIELDS = ("message", "reason", "data", "healthy", "check_status", "labels",
                  "limitation", "timestamp")

def wait_status(status):
    """A process' end as ``waitpid`` reports it (ExitedExecutorMessage.status,
    the FAILURE event's ``status``): an exit code n is n << 8, a signal its
    number; -1 for an executor that never started (``executorTerminated``)."""
    if status is None:
        return -1
    return status << 8 if status >= 0 else -status


class Executors(TaskGroups):
    """The custom executors of the master's agents. ``launcher``: the
    master's ``tasks.TaskLauncher`` (runners, isolator, users, fetchers);
    ``endpoint(agent)``: ``host:port`` of the agent's HTTP server as its
    executors reach it (``MESOS_AGENT_ENDPOINT``); ``recovery_timeout``:
    the agent's ``--recovery_timeout``, in a checkpointing framework's
    executor environment (``MESOS_RECOVERY_TIMEOUT``)."""

    def __init__(self, records, allocator, updates, loop, launcher, endpoint,
                 registration_timeout=REGISTRATION_TIMEOUT,
                 shutdown_grace_period=SHUTDOWN_GRACE_PERIOD, authenticate=False,
                 recovery_timeout=RECOVERY_TIMEOUT):
        self.recovery_timeout = recovery_timeout
        # As an agent with --authenticate_http_executors: each custom
        # executor gets a token of its own (MESOS_EXECUTOR_AUTHENTICATION_TOKEN,
        # Slave::generateSecret) that its calls must carry.
        self.authenticate = authenticate
        self._by_token: dict[str, Executor] = {}   # token -> its executor, until released
        self.records = records
        self.allocator = allocator
        self.updates = updates
        self.loop = loop
        self.launcher = launcher
        self.endpoint = endpoint
        self.registration_timeout = registration_timeout
        self.shutdown_grace_period = shutdown_grace_period

    # -- launching (ACCEPT's LAUNCH of a task with an executor) ------------------

    def launch(self, framework, agent, info, pool, role, seen):
        """Launch a TaskInfo with ``executor`` (as ``TaskLauncher.launch``)."""
        task_id = info["task_id"]["value"]
        try:
            self.launcher.check_ids(framework, agent, info, seen)
            check_task_fields(info)
            executor_info = check_executor(info, framework.id)
            executor = self._existing(framework, agent, executor_info)
            resources = parse_resources(info.get("resources", []),
                                        multi_role=framework.multi_role, role=role)
            total = resources.copy()
            plan = own = None
            if executor is None:
                plan = plan_executor(executor_info)
                self._check_image(framework, plan)
                own = parse_resources(executor_info.get("resources", []),
                                      multi_role=framework.multi_role, role=role)
                total.add(own)
            gpu_count(total)
            if not pool.contains(total):
                raise TaskInvalid("Total resources %s required by task and its executor is "
                                  "more than available %s"
                                  % (total.describe(), pool.describe()))
        except (TaskInvalid, ResourceError) as exc:
            self.launcher.refuse(framework, info, "REASON_TASK_INVALID", str(exc))
            return
        seen.add(task_id)
        pool.subtract(total)
        if executor is None:
            executor = self._add(framework, agent, executor_info, own, role, plan,
                                 first=[resources])
        task = self._task(framework, agent, executor, info, resources, role,
                          plan_custom_task(info))
        if self._dropped(framework, executor, [task]):
            return
        if executor.state == "RUNNING" and executor.subscription is not None:
            self._send_task(executor, task)
        else:
            executor.queued[task_id] = task
        self._resize(executor)

    def _check_image(self, framework, plan):
        """A plan with an image: its user checked as a container task's
        (``check_container_user``); TaskInvalid where no Docker engine runs
        images (a command task fails so at launch, ``NO_DOCKER_MESSAGE``)."""
        if plan.image is None:
            return
        if self.launcher.container_runner is None:
            raise TaskInvalid(NO_DOCKER_MESSAGE)
        plan.user = check_container_user(plan, framework.info.get("user"),
                                         self.launcher.root_allowed)

    def _add(self, framework, agent, info, resources, role, plan, kind="CUSTOM", first=()):
        """A new executor: its resources booked, its process started (the
        DEFAULT executor's part is the agent's: it runs at once); ``first``:
        the resources of the tasks it starts with (its container's limits)."""
        executor = Executor(framework.id, agent, info, resources, role, plan, kind)
        if self.authenticate and kind == "CUSTOM":
            executor.token = secrets.token_urlsafe(32)
            self._by_token[executor.token] = executor
        executor.gpu_ids = agent.take_gpus(gpu_count(resources))
        agent.used.add(resources)
        self.records.executors[executor.key] = executor
        executor.sandbox = agent.sandbox_path(framework.id, executor.id, executor.container_id)
        self.records.sandboxes[(framework.id, executor.id)] = executor.sandbox
        self.records.runs[(framework.id, executor.id, executor.container_id)] = executor.sandbox
        if kind == "DEFAULT":
            executor.state = "RUNNING"
            log.info("default executor %s of framework %s running on agent %s", executor.id,
                     framework.id, agent.id)
        else:
            self._start(framework, agent, executor, first)
        return executor

    def _environment(self, framework, agent, executor):
        """A custom executor's: ``environment`` with its shutdown grace
        period and token."""
        env = self.environment(framework, agent, self.grace(executor))
        if executor.token is not None:
            env["MESOS_EXECUTOR_AUTHENTICATION_TOKEN"] = executor.token
        return env

    def environment(self, framework, agent, grace):
        """``executorEnvironment`` (src/slave/slave.cpp) beside the master's
        base environment (the agent's ``--executor_environment_variables``):
        the variables an executor's container starts with, a custom
        executor's or the command executor of a command task (whose task
        inherits them: src/launcher/executor.cpp); ``grace``: its shutdown
        grace period. ``build_launch`` adds the ids and directories.
        ``LIBPROCESS_IP``: the agent's own when it has one; an embedded agent
        listens on the master's address as ``mesos-agent --ip`` would, which
        sets it (src/slave/main.cpp), except in a network namespace of its
        own, where that address is none of its tasks'."""
        endpoint = self.endpoint(agent)
        env = dict(self.launcher.base_env)
        ip = self.libprocess_ip(agent)
        if ip is not None:
            env["LIBPROCESS_IP"] = ip
        env.update({
            "LIBPROCESS_PORT": "0",
            "MESOS_AGENT_ENDPOINT": endpoint,
            "MESOS_SLAVE_PID": "slave(1)@" + endpoint,
            "MESOS_CHECKPOINT": "1" if framework.info.get("checkpoint") else "0",
            "MESOS_HTTP_COMMAND_EXECUTOR": "0",
            "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD": stringify_duration(grace),
        })
        if framework.info.get("checkpoint"):
            env["MESOS_RECOVERY_TIMEOUT"] = stringify_duration(self.recovery_timeout)
            env["MESOS_SUBSCRIPTION_BACKOFF_MAX"] = stringify_duration(REREGISTRATION_TIMEOUT)
        return env

    def libprocess_ip(self, agent):
        """An executor's LIBPROCESS_IP (None: none): the agent's, then the
        flag's over it ("a LIBPROCESS_IP present in the provided flags will
        override this value": executorEnvironment)."""
        own = agent.address[0] if agent.address is not None and agent.netns is None else None
        return self.launcher.base_env.get("LIBPROCESS_IP", own)

    def command_grace(self, plan):
        """The shutdown grace period of a command task's executor: its kill
        policy's grace period + ``MAX_REAP_INTERVAL()`` (1 s,
        3rdparty/libprocess/src/reap.cpp) + 1 s when it has one
        (``Slave::getExecutorInfo``, src/slave/slave.cpp), else the agent's."""
        if plan.kill_grace is None:
            return self.shutdown_grace_period
        return plan.kill_grace + REAP_MARGIN

    def grace(self, executor):
        """Its shutdown grace period: ``ExecutorInfo.shutdown_grace_period``,
        else the agent's (``--executor_shutdown_grace_period``)."""
        period = executor.info.get("shutdown_grace_period")
        return self.shutdown_grace_period if period is None \
            else max(0.0, duration_seconds(period))

    def _start(self, framework, agent, executor, first=()):
        launcher = self.launcher
        plan = executor.plan
        hidden = launcher.hidden_paths if "fs" in agent.spec.isolate else ()
        launch = build_launch(plan, executor.id, framework.id, agent.id, executor.sandbox,
                              executor.gpu_ids, bool(agent.gpu_ids),
                              self._environment(framework, agent, executor), agent.netns,
                              hidden)
        launch.container_id = executor.container_id
        if launcher.isolator is not None:
            launch.limits = self._limits(executor, first)
        proc = launcher.process(framework, agent, launch, plan, lambda proc: None,
                                lambda proc, status, error: self._on_exit(executor, proc,
                                                                          status, error),
                                self.grace(executor))
        executor.proc = proc
        self.records.procs.add(proc)
        proc.start()
        self.loop.schedule(self.registration_timeout, self._registration_timeout, executor)
        log.info("executor %s of framework %s starting on agent %s", executor.id,
                 framework.id, agent.id)

    def _limits(self, executor, resources):
        """The cgroup limits of its container: its own resources and its
        live tasks' (``resources``; ``Slave::computeExecutorLimits``, the
        containerizer's ``update`` as tasks come and go)."""
        cpus = executor.resources.get("cpus") + sum(r.get("cpus") for r in resources)
        mem = executor.resources.get("mem") + sum(r.get("mem") for r in resources)
        return self.launcher.isolator.limits(cpus, mem)

    def _resize(self, executor):
        """Its cgroups sized to it and its live tasks (best effort; before
        its process made them, the limits it will make them with)."""
        proc = executor.proc
        if proc is None or self.launcher.isolator is None:
            return
        limits = self._limits(executor, [t.resources for t in executor.tasks()
                                         if not t.terminal])
        try:
            proc.resize(limits)
        except OSError as exc:
            log.warning("executor %s: cannot resize its cgroups: %s", executor.id, exc)

    def _send_task(self, executor, task):
        executor.ever_sent_task = True
        executor.launched[task.id] = task
        executor.subscription.send({"type": "LAUNCH", "launch": {"task": task.info}})

    # -- the executor API (api/executor_api.py) ----------------------------------

    def find(self, agent, call):
        """The executor a call names on ``agent``: CallError 400 as
        ``Http::executor`` (src/slave/http.cpp) answers an unknown one."""
        framework_id = call["framework_id"]["value"]
        if framework_id not in self.records.frameworks:
            raise CallError(400, "Framework cannot be found")
        executor = self.records.executors.get((agent.id, framework_id,
                                               call["executor_id"]["value"]))
        if executor is None:
            raise CallError(400, "Executor cannot be found")
        if executor.kind == "DEFAULT":   # no process of its own to speak for it
            raise CallError(403, "Executor %s is the default executor, which the local agent "
                                 "runs itself: it takes no executor calls" % executor.id)
        return executor

    def principal(self, token):
        """The executor whose token ``token`` is, or None: a dict lookup
        (tokens are random 32-byte secrets), the one found compared in
        constant time."""
        executor = self._by_token.get(token)
        if executor is None or not hmac.compare_digest(executor.token, token):
            return None
        return executor

    @staticmethod
    def check_claims(principal, call, executor=None):
        """``verifyExecutorClaims`` (src/slave/http.cpp): the authenticated
        executor must be the one the call names (``executor``, found on the
        agent called: its container, Mesos' 'cid' claim, tells two agents'
        executors of one id apart); CallError 403 otherwise."""
        name = "executor %s of framework %s" % (principal.id, principal.framework_id)
        if call["framework_id"]["value"] != principal.framework_id:
            raise CallError(403, "Authenticated principal '%s' does not contain an 'fid' claim "
                                 "with the framework ID %s, which is set in the call"
                            % (name, call["framework_id"]["value"]))
        if call["executor_id"]["value"] != principal.id:
            raise CallError(403, "Authenticated principal '%s' does not contain an 'eid' claim "
                                 "with the executor ID %s, which is set in the call"
                            % (name, call["executor_id"]["value"]))
        if executor is not None and executor is not principal:
            raise CallError(403, "Authenticated principal '%s' does not contain a 'cid' claim "
                                 "with the container ID %s of the executor called"
                            % (name, executor.container_id))

    def subscribe(self, agent, call):
        """SUBSCRIBE: the Subscription to stream (``Slave::subscribe``)."""
        executor = self.find(agent, call)
        framework = self.records.frameworks[executor.framework_id]
        subscription = Subscription(framework.id, HEARTBEAT_INTERVAL)
        if executor.state in ("TERMINATING", "TERMINATED"):
            subscription.send({"type": "SHUTDOWN"})
            subscription.close()
            return subscription
        if executor.subscription is not None:   # a retried or second SUBSCRIBE
            executor.subscription.close()
        executor.state = "RUNNING"
        executor.subscription = subscription
        framework_info = dict(framework.info, id=mesos_id(framework.id))
        subscription.send({"type": "SUBSCRIBED", "subscribed": {
            "executor_info": executor.info, "framework_info": framework_info,
            "agent_info": agent_info(agent),
            "container_id": {"value": executor.container_id}}})
        for update in call["subscribe"].get("unacknowledged_updates", []):
            self.update(agent, executor, update["status"])
        if not executor.ever_sent_task and not executor.queued and not executor.queued_groups:
            # MESOS-8411: its only tasks were killed before it subscribed.
            self.shutdown(executor)
            return subscription
        queued, executor.queued = executor.queued, {}
        for task in queued.values():
            self._send_task(executor, task)
        groups, executor.queued_groups = executor.queued_groups, []
        for group in groups:
            self._send_group(executor, group)
        log.info("executor %s of framework %s subscribed", executor.id, framework.id)
        return subscription

    def stream_ended(self, subscription):
        """Its SUBSCRIBE stream ended: it may subscribe again."""
        for executor in self.records.executors.values():
            if executor.subscription is subscription:
                executor.subscription = None

    def check_subscribed(self, executor):
        if executor.state == "REGISTERING":
            raise CallError(403, "Executor is not subscribed")

    def update(self, agent, executor, status):
        """UPDATE (``Slave::statusUpdate``): the task's update, forwarded
        reliably with the executor's uuid; ACKNOWLEDGED once taken."""
        raw = base64.b64decode(status["uuid"])
        task_id = status["task_id"]["value"]
        framework = self.records.frameworks.get(executor.framework_id)
        task = framework.tasks.get(task_id) if framework is not None else None
        if task is None or task.executor is not executor:
            log.warning("executor %s: update %s of unknown task %s dropped", executor.id,
                        status["state"], task_id)
        elif raw in executor.uuids:
            log.debug("executor %s: duplicate update of task %s dropped", executor.id, task_id)
        elif task.terminal or task.removed:
            log.warning("executor %s: update %s of task %s, already %s, dropped",
                        executor.id, status["state"], task_id, task.state)
        else:
            executor.uuids.add(raw)
            fields = {key: status[key] for key in _STATUS_FIELDS if key in status}
            fields["executor_id"] = mesos_id(executor.id)
            fields["container_status"] = container_status(task)
            self.updates.update(task, status["state"], "SOURCE_EXECUTOR",
                                raw=raw, fields=fields)
            if task.terminal:
                executor.launched.pop(task_id, None)
                self._resize(executor)
        if executor.subscription is not None:
            executor.subscription.send({"type": "ACKNOWLEDGED", "acknowledged": {
                "task_id": status["task_id"], "uuid": status["uuid"]}})

    def message(self, agent, executor, data):
        """MESSAGE (``Slave::executorMessage``, ``Master::executorMessage``):
        to the scheduler as a MESSAGE event, if it is connected."""
        framework = self.records.frameworks.get(executor.framework_id)
        if framework is not None:
            framework.send({"type": "MESSAGE", "message": {
                "agent_id": mesos_id(agent.id), "executor_id": mesos_id(executor.id),
                "data": data}})

    # -- the scheduler's calls ------------------------------------------------------

    def scheduler_message(self, framework, agent_id, executor_id, data):
        """The scheduler's MESSAGE (``Master::message``, ``Slave::
        schedulerMessage``): a MESSAGE event to a subscribed executor;
        dropped otherwise, as Mesos drops it (no delivery guarantee)."""
        executor = self.records.executors.get((agent_id, framework.id, executor_id))
        # (Mesos' default executor logs a framework message and drops it.)
        if executor is None or executor.state != "RUNNING" or executor.subscription is None:
            log.info("framework %s: message to executor %s on agent %s dropped (not "
                     "running)", framework.id, executor_id, agent_id)
            return
        executor.subscription.send({"type": "MESSAGE", "message": {"data": data}})

    def kill_task(self, task, kill_policy=None):
        """The scheduler's KILL of an executor's task (``Slave::killTask``):
        a KILL event to the executor, which reports the end; a task not
        yet sent to it ends here, TASK_KILLED, and an executor left with
        nothing to run is shut down."""
        executor = task.executor
        if executor.kind == "DEFAULT":   # DefaultExecutor::killTask
            if task.proc is not None and not task.process_done:
                task.kill_requested = True
                framework = self.records.frameworks.get(task.framework_id)
                if framework is not None and framework.killing_state \
                        and task.state in ("TASK_STARTING", "TASK_RUNNING"):
                    self.updates.update(task, "TASK_KILLING", "SOURCE_EXECUTOR")
                grace = self.launcher.grace(task)
                if kill_policy and "grace_period" in kill_policy:
                    grace = max(0.0, duration_seconds(kill_policy["grace_period"]))
                task.proc.kill(grace)
            return
        queued_group = next((group for group in executor.queued_groups if task in group), None)
        if queued_group is not None:
            queued_group.remove(task)
            if not queued_group:
                executor.queued_groups.remove(queued_group)
            executor.queued[task.id] = task
        if task.id in executor.queued:
            del executor.queued[task.id]
            self.updates.update(task, "TASK_KILLED", "SOURCE_AGENT",
                                "REASON_TASK_KILLED_DURING_LAUNCH", "Killed before delivery "
                                "to the executor")
            self._resize(executor)
            if not executor.queued and not executor.launched and not executor.queued_groups:
                self.shutdown(executor)
            return
        if executor.subscription is None:
            return
        kill = {"task_id": mesos_id(task.id)}
        if kill_policy:
            kill["kill_policy"] = kill_policy
        executor.subscription.send({"type": "KILL", "kill": kill})

    def shutdown_executor(self, framework, agent_id, executor_id):
        """The scheduler's SHUTDOWN (``Master::shutdown``, ``Slave::
        shutdownExecutor``): unknown or terminating executors are ignored."""
        executor = self.records.executors.get((agent_id, framework.id, executor_id))
        if executor is not None and executor.state in ("REGISTERING", "RUNNING"):
            self.shutdown(executor)

    def shutdown_framework(self, framework):
        """The framework was removed (``Slave::shutdownFramework``): each of
        its executors is shut down; its tasks are the master's to end."""
        for executor in list(self.records.executors.values()):
            if executor.framework_id == framework.id \
                    and executor.state in ("REGISTERING", "RUNNING"):
                self.shutdown(executor)

    def shutdown(self, executor):
        """``Slave::_shutdownExecutor``: SHUTDOWN to it, destroyed after its
        grace period if it is still there."""
        executor.state = "TERMINATING"
        if executor.kind == "DEFAULT":   # DefaultExecutor::shutdown: kills its tasks
            for task in list(executor.launched.values()):
                if task.proc is not None and not task.process_done:
                    task.kill_requested = True
                    task.proc.kill(self.launcher.shutdown_grace(task))
            if not executor.launched:
                self._default_ended(executor)
            return
        if executor.subscription is not None:
            executor.subscription.send({"type": "SHUTDOWN"})
        executor.generation += 1
        self.loop.schedule(self.grace(executor), self._shutdown_timeout, executor,
                           executor.generation)

    def _shutdown_timeout(self, executor, generation):
        with self.records.lock:
            if executor.state == "TERMINATING" and executor.generation == generation \
                    and executor.proc is not None:
                log.info("executor %s did not exit within its shutdown grace period: "
                         "killing it", executor.id)
                executor.proc.kill_at_once()

    def _registration_timeout(self, executor):
        with self.records.lock:
            if executor.state != "REGISTERING" or executor.proc is None:
                return
            log.info("executor %s did not subscribe within %s: killing it", executor.id,
                     stringify_duration(self.registration_timeout))
            executor.state = "TERMINATING"
            executor.pending_termination = (
                "TASK_FAILED", "REASON_EXECUTOR_REGISTRATION_TIMEOUT",
                "Executor did not register within %s"
                % stringify_duration(self.registration_timeout))
            executor.proc.kill_at_once()

    def remove_agent(self, agent_id):
        """Its agent is gone: its executors are killed at once, their tasks
        the master's to report."""
        for executor in list(self.records.executors.values()):
            if executor.agent_id == agent_id:
                executor.removed = True
                executor.state = "TERMINATING"
                if executor.proc is not None:
                    executor.proc.kill_at_once()

    # -- its end ------------------------------------------------------------------

    def _on_exit(self, executor, proc, status, error):
        """Its process ended (``Slave::executorTerminated``)."""
        with self.records.lock:
            self.records.procs.discard(proc)
            executor.state = "TERMINATED"
            if executor.subscription is not None:
                executor.subscription.close()
                executor.subscription = None
            if self.records.executors.get(executor.key) is executor:
                del self.records.executors[executor.key]
            self._release(executor)
            termination = self._termination(executor, proc, error)
            framework = self.records.frameworks.get(executor.framework_id)
            for task in executor.tasks():
                if task.removed or task.terminal or not self.records.running \
                        or framework is None:
                    self.allocator.release(task)
                    continue
                self.updates.update(task, *termination)
            executor.queued.clear()
            executor.queued_groups.clear()
            executor.launched.clear()
            log.info("executor %s of framework %s ended (%s)", executor.id,
                     executor.framework_id, error or "status %s" % status)
            if framework is not None and not executor.removed and self.records.running:
                framework.send({"type": "FAILURE", "failure": {
                    "agent_id": mesos_id(executor.agent_id),
                    "executor_id": mesos_id(executor.id), "status": wait_status(status)}})

    @staticmethod
    def _termination(executor, proc, error):
        """(state, source, reason, message) of its live tasks' last update
        (``sendExecutorTerminatedStatusUpdate``)."""
        if proc.limitation is not None:
            return ("TASK_FAILED", "SOURCE_AGENT", "REASON_CONTAINER_LIMITATION_MEMORY",
                    proc.limitation)
        if executor.pending_termination is not None:
            state, reason, message = executor.pending_termination
            return state, "SOURCE_AGENT", reason, message
        if error is not None:
            return ("TASK_FAILED", "SOURCE_AGENT", "REASON_CONTAINER_LAUNCH_FAILED",
                    "Failed to launch container: %s" % error)
        return "TASK_FAILED", "SOURCE_AGENT", "REASON_EXECUTOR_TERMINATED", "Executor terminated"

    def _release(self, executor):
        """Give its own resources and GPUs back to its agent (once)."""
        if executor.released:
            return
        executor.released = True
        if executor.token is not None:   # a fresh random secret: its own entry
            self._by_token.pop(executor.token, None)
        agent = self.records.agents.get(executor.agent_id)
        if agent is not None:
            agent.used.subtract(executor.resources)
            agent.available.add(executor.resources)
            agent.give_gpus(executor.gpu_ids)
        self.allocator.request()


__all__ = ["Executors", "wait_status", "HEARTBEAT_INTERVAL",
           "REGISTRATION_TIMEOUT", "SHUTDOWN_GRACE_PERIOD"]
