"""Running the tasks of accepted offers: ``TaskLauncher.launch`` checks one
TaskInfo (TASK_ERROR if invalid), books its resources on the agent and
starts its ``TaskProcess``; the process's callbacks turn its start and end
into status updates (TASK_RUNNING, TASK_FINISHED, TASK_FAILED, TASK_KILLED)
with the reasons and messages of Mesos' command executor; a task that
outgrew its memory under isolation (``cgroups.py``) ends TASK_FAILED with
``REASON_CONTAINER_LIMITATION_MEMORY`` from the agent, as in Mesos. A plain
task runs as its ``CommandInfo.user``, else its ``FrameworkInfo.user``,
where the agents switch users (``containerizer/users.py``); one whose
sandbox cannot be given to that user never launches: TASK_DROPPED
(PARTITION_AWARE) or TASK_LOST, ``REASON_EXECUTOR_TERMINATED``, from the
agent, as Mesos' agent reports a failed ``Framework::addExecutor``
(``sendTaskDroppedUpdate`` in src/slave/slave.cpp). Where root submissions
are refused (``root_submissions=False``), a task whose user (its
``CommandInfo.user``, else the framework's) is root never launches:
TASK_ERROR, ``REASON_TASK_UNAUTHORIZED``, from the master, as Mesos' master
refuses a task its authorizer does not allow (the ``run_tasks`` ACL that
keeps a principal from root, docs/authorization.md): Mesos'
``--root_submissions=false`` checks only ``FrameworkInfo.user``
(``frameworks.py``), which a framework's ``CommandInfo.user`` overrides.
"""

import os
from typing import TYPE_CHECKING

from .api.operator_json import event_task_added
from .containerizer.cgroup_limits import ISOLATORS, Limits
from .containerizer.environment import executor_environment
from .containerizer.escapes import EscapeSweeper
from .containerizer.executor import TaskProcess, describe_container_exit, describe_exit
from .containerizer.fetch_cache import DEFAULT_FETCHER_CACHE_SIZE, AgentFetcher, FetcherCache
from .containerizer.planning import (
    NO_DOCKER_MESSAGE,
    TaskInvalid,
    build_launch,
    check_container_user,
    check_id,
    container_uid,
    gpu_count,
    plan_task,
)
from .containerizer.task_checks import check_task_fields
from .containerizer.users import UserSwitch
from .executors import REAP_MARGIN
from .records import Task
from .resources import ResourceError
from .resources import parse as parse_resources

if TYPE_CHECKING:
    from .executors import Executors


# The DEFAULT executor's kill of a task with no grace period given
# (``DefaultExecutor::kill``, src/launcher/default_executor.cpp).
DEFAULT_EXECUTOR_KILL_GRACE = 3.0


class TaskLauncher:
    """``runner`` runs plain command tasks, ``container_runner`` (or none)
    tasks that name an image; ``kill_grace_period`` is the default SIGTERM
    to SIGKILL delay; ``base_env`` the environment every executor and
    command task starts from (``environment.executor_environment``; a
    nested container gets none of it); ``root_allowed``: whether
    container tasks may run as root; ``isolator``: the master's
    ``cgroups.Isolator`` (None: cpus and mem are not enforced);
    ``user_switch``: the agents' ``users.UserSwitch`` (None: on, as Mesos'
    ``--switch_user``); ``root_submissions``: false refuses tasks of root;
    ``watchdog``: the master's ``watchdog.Watchdog`` (None: none), which
    ends the tasks if the master dies; ``fetcher_cache_size``: the bytes
    each agent's fetcher cache holds at most."""

    def __init__(self, records, allocator, updates, loop, kill_grace_period, runner,
                 container_runner, base_env, root_allowed, isolator=None, hidden_paths=(),
                 user_switch=None, root_submissions=True, watchdog=None,
                 fetcher_cache_size=DEFAULT_FETCHER_CACHE_SIZE):
        self.watchdog = watchdog
        self.fetcher_cache_size = fetcher_cache_size
        self.root_submissions = root_submissions
        self.isolator = isolator
        # The processes that left ended tasks' cgroups: many tasks' per pass over /proc.
        self.escapes = EscapeSweeper()
        self.user_switch = user_switch if user_switch is not None else UserSwitch()
        self.base_env = dict(base_env)
        self.root_allowed = root_allowed
        self.records = records
        self.allocator = allocator
        self.updates = updates
        self.loop = loop
        self.kill_grace_period = kill_grace_period
        self.runner = runner
        self.container_runner = container_runner
        self.hidden_paths = list(hidden_paths)   # for tasks of isolate=fs agents
        self._fetchers = {}                      # agent id -> its AgentFetcher (and cache)
        # The tasks that name an executor: the master sets it right after
        # (Executors is built with this launcher), before any task comes.
        self.executors: Executors

    def grace(self, task):
        """A KILL's SIGTERM to SIGKILL delay: the task's KillPolicy grace
        period, else ``kill_grace_period``."""
        return task.plan.kill_grace if task.plan.kill_grace is not None \
            else self.kill_grace_period

    def shutdown_grace(self, task):
        """The SIGTERM to SIGKILL delay of a task whose executor is shut
        down (its framework removed: ``Slave::shutdownFramework`` ->
        ``_shutdownExecutor``, src/slave/slave.cpp), never more than its
        KILL's (``grace``). A command task's executor kills it with the
        agent's ``--executor_shutdown_grace_period`` less
        ``MAX_REAP_INTERVAL`` (1 s) and 1 s, whatever its KillPolicy says
        (``CommandExecutor::shutdown``, src/launcher/executor.cpp: 3 s of
        the default 5 s); the DEFAULT executor kills each of its tasks with
        its default 3 s (``DefaultExecutor::shutdown`` -> ``kill``,
        src/launcher/default_executor.cpp), and the agent destroys the
        container after the executor's shutdown grace period
        (``shutdownExecutorTimeout``)."""
        executors = self.executors
        if task.executor is None:
            limit = max(0.0, executors.shutdown_grace_period - REAP_MARGIN)
        else:
            limit = min(DEFAULT_EXECUTOR_KILL_GRACE, executors.grace(task.executor))
        return min(self.grace(task), limit)

    def launch(self, framework, agent, info, pool, role, seen):
        """Launch one TaskInfo of an ACCEPT from ``pool`` (the offered
        resources left); ``seen``: task ids launched by this call so far."""
        task_id = info["task_id"]["value"]
        refused = self.unauthorized(framework, info)
        if refused is not None:        # authorized before it is validated, as in Mesos
            self.refuse(framework, info, "REASON_TASK_UNAUTHORIZED", refused)
            return
        if "executor" in info:   # a custom executor's
            self.executors.launch(framework, agent, info, pool, role, seen)
            return
        try:
            plan, resources, gpus = self._check(framework, agent, info, pool, role, seen)
        except (TaskInvalid, ResourceError) as exc:
            self.refuse(framework, info, "REASON_TASK_INVALID", str(exc))
            return
        seen.add(task_id)
        pool.subtract(resources)
        task = self.book(framework, agent, info, resources, plan, role, gpus)
        # A command task's executor id is its task id (Mesos' command
        # executor); its container's run directory is its sandbox.
        task.sandbox = agent.sandbox_path(framework.id, task_id, task.container_id)
        self.records.sandboxes[(framework.id, task_id)] = task.sandbox
        self.records.runs[(framework.id, task_id, task.container_id)] = task.sandbox
        # Framework::addTask (src/master/framework.cpp): the operator's stream sees it.
        self.records.subscribers.send(lambda: event_task_added(task))
        if plan.image is not None and self.container_runner is None:
            self.updates.update(task, "TASK_FAILED", "SOURCE_AGENT",
                                reason="REASON_CONTAINER_LAUNCH_FAILED",
                                message=NO_DOCKER_MESSAGE)
            return
        self.start_process(framework, agent, task)

    def refuse(self, framework, info, reason, message):
        """TASK_ERROR, from the master, for a TaskInfo it does not launch."""
        self.updates.send_master_update(framework, info["task_id"]["value"],
                                        info["agent_id"]["value"], "TASK_ERROR", reason, message)

    def book(self, framework, agent, info, resources, plan, role, gpus):
        """The Task of a checked TaskInfo on the master's records (its
        agent's and framework's), its ``resources`` and ``gpus`` GPUs taken
        from its agent; not yet announced (``event_task_added``)."""
        task = Task(framework, agent, info, resources, plan, role)
        task.retry_interval = self.updates.first_retry
        task.gpu_ids = agent.take_gpus(gpus)
        agent.used.add(resources)
        agent.tasks[(framework.id, task.id)] = task
        framework.tasks[task.id] = task
        return task

    def unauthorized(self, framework, info):
        """Why a task of root is refused (``root_submissions`` false), or
        None: its user as Mesos' authorizer sees it (``ActionObject::
        taskLaunch``, src/master/authorization.cpp; the local authorizer's
        RUN_TASK: its ``CommandInfo.user``, else its executor's, else the
        framework's), root by name or uid."""
        if self.root_submissions:
            return None
        user = info.get("command", {}).get(
            "user", info.get("executor", {}).get("command", {}).get(
                "user", framework.info.get("user", "")))
        if user != "root" and container_uid(user) != 0:
            return None
        return ("Not authorized to launch task %s of framework %s under user '%s': this master "
                "refuses root submissions (--no-root-submissions, Mesos' "
                "--root_submissions=false); run the task as another user"
                % (info["task_id"]["value"], framework.id, user))

    @staticmethod
    def check_ids(framework, agent, info, seen):
        """TaskInvalid for a TaskInfo's bad, duplicate or foreign ids."""
        task_id = info["task_id"]["value"]
        check_id("TaskID", task_id)
        if task_id in framework.tasks or task_id in seen:
            raise TaskInvalid("Task has duplicate ID: %s" % task_id)
        if info["agent_id"]["value"] != agent.id:
            raise TaskInvalid("Task uses invalid agent: %s (the offer is on agent %s)"
                              % (info["agent_id"]["value"], agent.id))

    def _check(self, framework, agent, info, pool, role, seen):
        """(plan, resources, gpu count) of a TaskInfo, or TaskInvalid/ResourceError."""
        self.check_ids(framework, agent, info, seen)
        check_task_fields(info)
        plan = plan_task(info)
        if plan.sandbox_volumes:
            raise TaskInvalid("SANDBOX_PATH volumes are supported by the local master for the "
                              "tasks of a task group (LAUNCH_GROUP) only")
        if plan.image is not None:
            # Mesos runs a container task as the framework's user, not the image's.
            plan.user = check_container_user(plan, framework.info.get("user"),
                                             self.root_allowed)
        resources = parse_resources(info.get("resources", []),
                                    multi_role=framework.multi_role, role=role)
        gpus = gpu_count(resources)
        if not pool.contains(resources):
            raise TaskInvalid("Task uses more resources %s than available %s"
                              % (resources.describe(), pool.describe()))
        if info.get("limits"):
            # These agents do not claim TASK_RESOURCE_LIMITS (agent_json's
            # AGENT_CAPABILITIES): Mesos refuses the task for such an agent, not
            # runs it without its limits (validateResourceLimits,
            # src/master/validation.cpp).
            raise TaskInvalid("Agent is not capable of handling task resource limits")
        return plan, resources, gpus

    def start_process(self, framework, agent, task):
        """Start a task's process: a command task's, or one of the DEFAULT
        executor's (``executors.py``), whose executor id is the executor's."""
        plan = task.plan
        hidden = self.hidden_paths if "fs" in agent.spec.isolate else ()
        nested = task.executor is not None
        # A command task inherits its command executor's environment
        # (src/launcher/executor.cpp): executorEnvironment's. A nested
        # container none of its executor's: PATH when unset (launch.cpp).
        base = executor_environment(None) if nested else \
            self.executors.environment(framework, agent, self.executors.command_grace(plan))
        launch = build_launch(plan, task.id, framework.id, agent.id, task.sandbox,
                              task.gpu_ids, bool(agent.gpu_ids), base, agent.netns, hidden,
                              nested=nested)
        launch.container_id = task.container_id
        if nested:   # in its executor's sandbox
            launch.sandbox_below = task.executor.sandbox
            if task.container_id != task.executor.container_id:
                launch.container_id = "%s.%s" % (task.executor.container_id, task.container_id)
            # The default executor's, over the task's own
            # (DefaultExecutor::launchGroup, src/launcher/default_executor.cpp).
            launch.env["MESOS_CONTAINER_IP"] = self.executors.container_ip(agent)
        # The command executor (CommandExecutor::launchTaskSubprocess,
        # src/launcher/executor.cpp) and the default executor
        # (src/launcher/default_executor.cpp) set it over the task's own.
        launch.env["MESOS_ALLOCATION_ROLE"] = task.role
        if self.isolator is not None:
            # Containers get the same limits through the Docker engine.
            launch.limits = self.isolator.limits(task.resources.get("cpus"),
                                                 task.resources.get("mem"))
        elif plan.image is not None and launch.containerizer == "DOCKER":
            # Mesos' Docker containerizer limits its containers whatever the
            # agent's --isolation: --cpu-shares and --memory from the task's
            # resources (Docker::RunOptions::create, src/docker/docker.cpp).
            cpus, mem = task.resources.get("cpus"), task.resources.get("mem")
            launch.limits = Limits(cpus=cpus or 0.0, mem=mem or 0.0, isolators=tuple(
                isolator for isolator, amount in zip(ISOLATORS, (cpus, mem)) if amount))
        proc = self.process(framework, agent, launch, plan,
                            lambda proc: self._on_running(task),
                            lambda proc, status, error: self._on_exit(task, proc, status,
                                                                      error),
                            self.grace(task))
        task.proc = proc
        self.records.procs.add(proc)
        self.updates.update(task, "TASK_STARTING", "SOURCE_EXECUTOR")
        proc.start()
        if plan.max_completion is not None:
            self.loop.schedule(plan.max_completion, self._max_completion_reached, task)

    def process(self, framework, agent, launch, plan, on_running, on_exit, grace):
        """The TaskProcess (not started) of a task's or an executor's
        ``launch``: the container runner's for an image, else the plain
        runner's; its URIs fetched through its agent's fetcher. ``grace``:
        its SIGTERM to SIGKILL should the master die: a task's ``grace``
        (its kill policy's grace period, else the master's
        ``kill_grace_period``, 3 s by default, as Mesos' command executor
        shuts down once its agent is gone: the agent's
        ``--executor_shutdown_grace_period`` less 2 s, src/slave/slave.cpp
        ``getExecutorInfo``, src/launcher/executor.cpp ``shutdown``), a custom
        executor's shutdown grace period."""
        runner = self.container_runner if plan.image is not None else self.runner
        # CommandInfo.user, when set, else the framework's (Framework::addExecutor).
        user = plan.user if plan.user is not None else framework.info.get("user", "")
        fetcher = self.fetcher(agent)
        return TaskProcess(launch, runner, plan.uris, on_running, on_exit,
                           fetch=lambda uris, sandbox, cancelled, run_as: fetcher.fetch(
                               uris, sandbox, user, cancelled, run_as),
                           isolator=self.isolator, user=user,
                           switch=self.user_switch,
                           escapes=self.escapes, watchdog=self.watchdog, grace=grace,
                           checkpoint=framework.info.get("checkpoint", False))

    def fetcher(self, agent):
        """The agent's fetcher: its cache, its network namespace."""
        fetcher = self._fetchers.get(agent.id)
        if fetcher is None:
            cache = FetcherCache(os.path.join(agent.directory, "fetcher-cache"),
                                 self.fetcher_cache_size)
            fetcher = self._fetchers[agent.id] = AgentFetcher(cache, agent.netns)
        return fetcher

    def _max_completion_reached(self, task):
        with self.records.lock:
            if task.terminal or task.removed or task.proc is None or task.kill_requested:
                return
            task.kill_requested = True
            task.kill_reason = "max_completion"
            task.proc.kill(self.grace(task))

    # -- TaskProcess callbacks (from the task's thread) ------------------------

    def _on_running(self, task):
        with self.records.lock:
            if not self.records.running or task.removed or task.terminal \
                    or task.kill_requested:
                return
            self.updates.update(task, "TASK_RUNNING", "SOURCE_EXECUTOR")

    def _on_exit(self, task, proc, status, error):
        with self.records.lock:
            self.records.procs.discard(proc)
            task.process_done = True
            if task.removed or task.terminal or not self.records.running:
                self.allocator.release(task)
            else:
                framework = self.records.frameworks.get(task.framework_id)
                dropped = proc.dropped and ("TASK_DROPPED" if framework is not None
                                            and framework.partition_aware else "TASK_LOST")
                state, source, reason, message = _exit_update(task, status, error,
                                                              proc.limitation, dropped,
                                                              proc.lost)
                self.updates.update(task, state, source, reason, message)
            if task.executor is not None:
                self.executors.nested_ended(task)


def _exit_update(task, status, error, limitation=None, dropped=None, lost=None):
    """(state, source, reason, message) of a task whose process ended;
    ``limitation``: Mesos' message when it outgrew its memory; ``dropped``:
    the state of a task that never launched, its sandbox not given to its
    user (TASK_DROPPED or TASK_LOST); ``lost``: why its runner lost it as it
    ran (a container whose engine stopped answering). A DOCKER task's end
    is worded as Mesos' docker executor words it (src/docker/executor.cpp,
    ``_reaped``)."""
    docker = task.plan.image is not None and task.plan.containerizer == "DOCKER"
    describe = describe_container_exit if docker else describe_exit
    if dropped:
        return dropped, "SOURCE_AGENT", "REASON_EXECUTOR_TERMINATED", error
    if limitation is not None:
        # The agent, not the executor, reports a container its isolator
        # destroyed (src/slave/slave.cpp; v0's SOURCE_SLAVE is v1's SOURCE_AGENT).
        return ("TASK_FAILED", "SOURCE_AGENT", "REASON_CONTAINER_LIMITATION_MEMORY",
                limitation)
    if task.kill_reason == "max_completion":
        return ("TASK_FAILED", "SOURCE_EXECUTOR", "REASON_MAX_COMPLETION_TIME_REACHED",
                describe(status))
    if task.kill_requested:
        if status is None:
            return ("TASK_KILLED", "SOURCE_AGENT", "REASON_TASK_KILLED_DURING_LAUNCH",
                    "Task killed during launch")
        return "TASK_KILLED", "SOURCE_EXECUTOR", None, describe(status)
    if lost is not None:
        # As Mesos' docker executor when its container's run failed, the engine
        # gone with it: TASK_FAILED, no reason, the runner's words.
        return "TASK_FAILED", "SOURCE_EXECUTOR", None, lost
    if error is not None:
        return "TASK_FAILED", "SOURCE_AGENT", "REASON_CONTAINER_LAUNCH_FAILED", error
    if status == 0:
        return "TASK_FINISHED", "SOURCE_EXECUTOR", None, describe(status)
    # No reason, as both of Mesos' executors send it (CommandExecutor::reaped,
    # src/launcher/executor.cpp; the proto's default REASON_COMMAND_EXECUTOR_FAILED
    # is deprecated and never set).
    return "TASK_FAILED", "SOURCE_EXECUTOR", None, describe(status)
