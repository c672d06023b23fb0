"""Task groups (ACCEPT's ``LAUNCH_GROUP``) of the default executor, as a
Mesos agent runs them (src/slave/slave.cpp, src/launcher/default_executor.cpp):
each task of the group a nested container in its executor's sandbox, with
the volumes the group shares; all of a group's tasks launch on its
executor, or all get TASK_ERROR (``validation::task::group::validate``).
``Executors`` (executors.py) holds these methods: every one runs with the
master's lock held."""

import contextlib
import ipaddress
import logging
import os
from typing import Any, Callable

from .api.operator_json import event_task_added
from .containerizer.planning import (
    TaskInvalid,
    check_group_executor,
    gpu_count,
    plan_custom_task,
    plan_executor,
    plan_task,
)
from .containerizer.sandbox_dirs import DIRECTORY, LinkFound, give_directory, open_below
from .containerizer.task_checks import check_task_fields
from .containerizer.users import UserError
from .ids import uuid4_text
from .records import Task, mesos_id
from .resources import ResourceError, Resources
from .resources import parse as parse_resources

log = logging.getLogger(__name__)


def _closing(stack, fd):
    stack.callback(os.close, fd)
    return fd


class TaskGroups:
    """``Executors``' part for task groups (module docstring); what it uses
    of the rest of ``Executors`` is declared here."""

    records: Any
    updates: Any
    launcher: Any
    _check_image: Callable[[Any, Any], None]
    _add: Callable[..., Any]
    _resize: Callable[[Any], None]
    _release: Callable[[Any], None]
    libprocess_ip: Callable[[Any], Any]

    # -- task groups (ACCEPT's LAUNCH_GROUP) --------------------------------------

    def launch_group(self, framework, agent, operation, pool, role, seen):
        """A LAUNCH_GROUP: its tasks all launch on its executor, or all get
        TASK_ERROR with the reason (``validation::task::group::validate``,
        src/master/validation.cpp; docs/nested-container-and-task-group.md)."""
        raw_executor = operation["executor"]
        infos = [dict(info) for info in operation["task_group"].get("tasks", [])]
        if not infos:
            return   # nothing to launch (nor to report a refusal to)
        refused = next(filter(None, (self.launcher.unauthorized(
            framework, dict(info, executor=raw_executor)) for info in infos)), None)
        if refused is not None:   # each task authorized with its executor, the group as one
            for info in infos:
                self.launcher.refuse(framework, info, "REASON_TASK_UNAUTHORIZED", refused)
            return
        try:
            executor, executor_info, own, plans, resources, total = self._check_group(
                framework, agent, raw_executor, infos, pool, role, seen)
        except (TaskInvalid, ResourceError) as exc:
            for info in infos:
                self.launcher.refuse(framework, info, "REASON_TASK_INVALID", str(exc))
            return
        pool.subtract(total)
        kind = executor_info["type"]
        if executor is None:
            plan = plan_executor(executor_info) if kind == "CUSTOM" else None
            executor = self._add(framework, agent, executor_info, own, role, plan, kind,
                                 first=resources)
        group: list[Task] = []
        for info, plan, task_resources in zip(infos, plans, resources):
            seen.add(info["task_id"]["value"])
            info["executor"] = executor_info   # Master::accept sets it on each task
            task = self._task(framework, agent, executor, info, task_resources, role, plan)
            task.group = group
            group.append(task)
        if self._dropped(framework, executor, group):
            return
        if kind == "DEFAULT":
            for task in group:
                self._start_nested(framework, agent, executor, task)
            return
        if executor.state == "RUNNING" and executor.subscription is not None:
            self._send_group(executor, group)
        else:
            executor.queued_groups.append(group)
        self._resize(executor)

    def _check_group(self, framework, agent, raw_executor, infos, pool, role, seen):
        """(executor or None, ExecutorInfo, its resources, the tasks' plans,
        the tasks' resources, all the group takes); TaskInvalid otherwise."""
        ids = set(seen)
        for info in infos:
            try:
                self.launcher.check_ids(framework, agent, info, ids)
                check_task_fields(info)
            except TaskInvalid as exc:   # group::validate, src/master/validation.cpp:2183
                raise TaskInvalid("Task '%s' is invalid: %s"
                                  % (info["task_id"]["value"], exc)) from None
            ids.add(info["task_id"]["value"])
        own = parse_resources(raw_executor.get("resources", []),
                              multi_role=framework.multi_role, role=role)
        executor_info = check_group_executor(raw_executor, framework.id, own)
        for info in infos:
            if "executor" in info and info["executor"] != raw_executor \
                    and info["executor"] != executor_info:
                raise TaskInvalid("The `ExecutorInfo` of task '%s' is different from executor "
                                  "'%s'" % (info["task_id"]["value"],
                                            executor_info["executor_id"]["value"]))
        executor = self._existing(framework, agent, executor_info)
        plans, resources = [], []
        total = own.copy() if executor is None else Resources()
        for info in infos:
            container = info.get("container")
            if container is not None and container["type"] == "DOCKER":
                raise TaskInvalid("Docker ContainerInfo is not supported on the task")
            task_resources = parse_resources(info.get("resources", []),
                                             multi_role=framework.multi_role, role=role)
            if executor_info["type"] == "DEFAULT":
                plan = plan_task({key: value for key, value in info.items()
                                  if key != "executor"})
                self._check_image(framework, plan)
            else:
                plan = plan_custom_task(info)
            plans.append(plan)
            resources.append(task_resources)
            total.add(task_resources)
        gpu_count(total)
        if not pool.contains(total):
            raise TaskInvalid("Total resources %s required by task group and its executor are "
                              "more than available %s" % (total.describe(), pool.describe()))
        return executor, executor_info, own, plans, resources, total

    def _existing(self, framework, agent, executor_info):
        """The agent's executor of this framework with ``executor_info``'s
        id, or None; TaskInvalid where its ExecutorInfo differs
        (``validateCompatibleExecutorInfo``, src/master/validation.cpp)."""
        executor = self.records.executors.get(
            (agent.id, framework.id, executor_info["executor_id"]["value"]))
        if executor is not None and executor.info != executor_info:
            raise TaskInvalid("ExecutorInfo is not compatible with existing ExecutorInfo "
                              "with same ExecutorID")
        return executor

    def _dropped(self, framework, executor, tasks):
        """Whether ``tasks`` came for an executor that is going away, and
        were so dropped (``Slave::run``: TASK_DROPPED, or TASK_LOST for a
        framework that is not partition-aware)."""
        if executor.state not in ("TERMINATING", "TERMINATED"):
            return False
        state = "TASK_DROPPED" if framework.partition_aware else "TASK_LOST"
        for task in tasks:
            self.updates.update(task, state, "SOURCE_AGENT", "REASON_EXECUTOR_TERMINATED",
                                "Executor terminating")
        return True

    def _task(self, framework, agent, executor, info, resources, role, plan):
        """The master's Task of an executor's task, its resources booked."""
        task = self.launcher.book(framework, agent, info, resources, plan, role,
                                  gpu_count(resources))
        task.executor = executor
        if executor.kind == "DEFAULT":
            # A nested container: its own id and sandbox under the executor's
            # (containerizer/mesos/paths.cpp getSandboxPath), linked from
            # tasks/<task id> as the default executor links it.
            task.container_id = uuid4_text()
            task.sandbox = os.path.join(executor.sandbox, "containers", task.container_id)
        else:
            task.container_id = executor.container_id   # its tasks run in its container
            task.sandbox = executor.sandbox
        self.records.subscribers.send(lambda: event_task_added(task))
        return task

    def _send_group(self, executor, group):
        executor.ever_sent_task = True
        for task in group:
            executor.launched[task.id] = task
        executor.subscription.send({"type": "LAUNCH_GROUP", "launch_group": {
            "task_group": {"tasks": [task.info for task in group]}}})

    def _start_nested(self, framework, agent, executor, task):
        """A task of the DEFAULT executor: its nested container's sandbox
        (and its SANDBOX_PATH volumes), then its process, as a command
        task's (TASK_STARTING, TASK_RUNNING, its end from the executor)."""
        executor.launched[task.id] = task
        try:
            self._nested_sandbox(framework, executor, task)
        except OSError as exc:
            log.warning("task %s: cannot prepare its sandbox %s: %s", task.id, task.sandbox,
                        exc)
        self.launcher.start_process(framework, agent, task)

    def _nested_sandbox(self, framework, executor, task):
        """containers/<container id> in the executor's sandbox, linked from
        tasks/<task id>, and its SANDBOX_PATH volumes: made and opened below
        the executor's sandbox, never through a link (its tasks own it)."""
        with contextlib.ExitStack() as fds:
            top = _closing(fds, os.open(executor.sandbox, DIRECTORY))
            below = os.path.relpath(task.sandbox, executor.sandbox)   # containers/<id>
            own = _closing(fds, open_below(top, below)[0])
            tasks = _closing(fds, open_below(top, "tasks")[0])
            try:
                os.symlink(os.path.join("..", below), task.id, dir_fd=tasks)
            except FileExistsError:
                pass
            self._sandbox_volumes(framework, executor, task, top, own)

    def _sandbox_volumes(self, framework, executor, task, parent=None, own=None):
        """SANDBOX_PATH volumes (the ``volume/sandbox_path`` isolator): the
        volume's ``container_path`` in the task's sandbox is a link to
        ``path`` in its executor's sandbox (PARENT, shared by the group) or
        its own (SELF), the directory made for the task's user. ``parent``
        and ``own``: descriptors of the two sandboxes (None: opened here)."""
        user = task.plan.user if task.plan.user is not None else framework.info.get("user", "")
        try:
            run_as = self.launcher.user_switch.task_user(user)
        except UserError:
            run_as = None     # the launch reports it
        with contextlib.ExitStack() as fds:
            if parent is None:
                parent = _closing(fds, os.open(executor.sandbox, DIRECTORY))
            if own is None:
                own = _closing(fds, os.open(task.sandbox, DIRECTORY))
            for kind, path, container_path in task.plan.sandbox_volumes:
                base = executor.sandbox if kind == "PARENT" else task.sandbox
                # The sandbox is its tasks' user's: a link one of them made
                # (even between a check and a use) must not lead this (root)
                # process to make or give a directory outside, so each
                # component is opened below the sandbox's descriptor with
                # O_NOFOLLOW, and the directory made is given through its own.
                try:
                    fd, made = open_below(parent if kind == "PARENT" else own, path)
                except LinkFound:
                    raise OSError("SANDBOX_PATH volume %r leads out of the sandbox"
                                  % path) from None
                try:
                    if made:
                        give_directory(fd, run_as)
                finally:
                    os.close(fd)
                os.symlink(os.path.join(base, path), container_path, dir_fd=own)

    def container_ip(self, agent):
        """``MESOS_CONTAINER_IP`` of the DEFAULT executor's tasks: the
        executor's own address, its libprocess IP (``DefaultExecutor::
        launchGroup``): its LIBPROCESS_IP, else, or when that is any
        address, its hostname's (``process::initialize``)."""
        ip = self.libprocess_ip(agent) or ""
        try:
            if not ipaddress.ip_address(ip).is_unspecified:
                return ip
        except ValueError:
            pass
        return agent.ip

    def nested_ended(self, task):
        """A DEFAULT executor's task process ended (``TaskLauncher``, once
        its update is out): a failed or killed task kills the rest of its
        group (``DefaultExecutor::waited``: the default restart policy), and
        the executor ends with its last task."""
        executor = task.executor
        executor.launched.pop(task.id, None)
        group = task.group or []
        if task.state in ("TASK_FAILED", "TASK_KILLED") and executor.state == "RUNNING" \
                and not task.removed:
            for other in group:
                if other is task or other.process_done or other.proc is None \
                        or other.kill_requested:
                    continue
                other.kill_requested = True
                other.proc.kill(self.launcher.grace(other))
        if not executor.launched:
            self._default_ended(executor)

    def _default_ended(self, executor):
        """The DEFAULT executor with no task left exits (status 0), as
        ``DefaultExecutor::_shutdown`` does: FAILURE to the framework."""
        executor.state = "TERMINATED"
        if self.records.executors.get(executor.key) is executor:
            del self.records.executors[executor.key]
        self._release(executor)
        framework = self.records.frameworks.get(executor.framework_id)
        if framework is not None and not executor.removed and self.records.running:
            framework.send({"type": "FAILURE", "failure": {
                "agent_id": mesos_id(executor.agent_id),
                "executor_id": mesos_id(executor.id), "status": 0}})
