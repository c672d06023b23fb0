"""A whole Mesos framework written with pymesos 0.3.15 (douban/pymesos, not
this project): its ``MesosSchedulerDriver`` against a master given as
``host:port``, unchanged. Each callback is printed as one JSON line on
stdout (``{"callback": ..., ...}``); the process exits 0 once its plan is
done and the driver stopped (pymesos' ``stop()`` sends TEARDOWN), 1 on an
``error`` callback or when the plan is not done within ``--timeout`` s.

``executor EXECUTOR_COMMAND``: two tasks on one custom executor of that
command (``pymesos_executor.py``: task "a" finishes, task "b" runs until
killed); once "b" runs, a framework message "hi" to the executor; its
answer "echo hi" has "b" killed; done at "a" TASK_FINISHED and "b"
TASK_KILLED.

``group``: a task group of two tasks on Mesos' default executor, sent as
pymesos sends any operation (``acceptOffers`` with a LAUNCH_GROUP
operation: its ``launchTasks`` sends only LAUNCH), sharing a PARENT
SANDBOX_PATH volume: "writer" writes a file, "reader" waits for it and
prints it; done when both are TASK_FINISHED and the executor, which ends
with its last task, is lost (``executorLost``: Mesos' FAILURE event).

``executor-group EXECUTOR_COMMAND``: a task group of two tasks, "g1" and
"g2", both finishing, on that custom executor (LAUNCH_GROUP, which pymesos'
``MesosExecutorDriver`` gives its ``launchTaskGroup``); done when both are
TASK_FINISHED.

``--operator`` (executor mode): pymesos' ``MesosOperatorMasterDriver``
subscribes to the master's operator stream before the framework starts and
prints what it calls back (``operator.frameworkAdded``, ``operator.taskAdded``,
``operator.taskUpdated``, ``operator.frameworkRemoved``); once the plan is
done (the executor still up) its read calls, and those of
``MesosOperatorAgentDriver`` at the agent's address (GET_AGENTS' ``pid``),
are printed in one ``operatorCalls`` line: call -> "ok" and a summary, or
the error pymesos raised.

The environment's PYTHONPATH must name pymesos and http-parser
(scripts/test.sh: TFMESOS_TEST_PYMESOS); the executor's command gets it too.
"""

import argparse
import getpass
import json
import os
import sys
import threading
import time

from pymesos import (
    MesosOperatorAgentDriver,
    MesosOperatorMasterDriver,
    MesosSchedulerDriver,
    OperatorMaster,
    Scheduler,
    decode_data,
    encode_data,
)

TERMINAL = {"TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST",
            "TASK_DROPPED", "TASK_GONE"}


_SAY = threading.Lock()   # callbacks come on the drivers' IO threads


def say(callback, **fields):
    with _SAY:
        print(json.dumps(dict(fields, callback=callback), sort_keys=True), flush=True)


def scalar(name, value):
    return {"name": name, "type": "SCALAR", "scalar": {"value": value}}


class Plan(Scheduler):
    def __init__(self, mode, executor_command):
        self.mode = mode
        self.executor_command = executor_command
        self.launched = False
        self.states = {}
        self.executor_lost = False
        self.done = threading.Event()
        self.failed = False

    # --- callbacks (pymesos calls them on its IO thread) ---

    def registered(self, driver, framework_id, master_info):
        say("registered", framework_id=framework_id["value"], master_info=dict(master_info))

    def reregistered(self, driver, master_info):
        say("reregistered", master_info=dict(master_info))

    def disconnected(self, driver):
        say("disconnected")

    def resourceOffers(self, driver, offers):
        for offer in offers:
            say("resourceOffers", offer_id=offer["id"]["value"],
                agent_id=offer["agent_id"]["value"])
            if self.launched:
                driver.declineOffer(offer["id"], {"refuse_seconds": 3600})
                continue
            self.launched = True
            if self.mode == "executor":
                driver.launchTasks(offer["id"], self.executor_tasks(offer),
                                   {"refuse_seconds": 3600})
            elif self.mode == "executor-group":
                driver.acceptOffers([offer["id"]], [self.executor_group_operation(offer)],
                                    {"refuse_seconds": 3600})
            else:
                driver.acceptOffers([offer["id"]], [self.group_operation(offer)],
                                    {"refuse_seconds": 3600})

    def statusUpdate(self, driver, status):
        task_id = status["task_id"]["value"]
        state = status["state"]
        say("statusUpdate", task_id=task_id, state=state, source=status.get("source"),
            message=status.get("message"), has_uuid="uuid" in status)
        self.states.setdefault(task_id, []).append(state)
        if self.mode == "executor" and task_id == "b" and state == "TASK_RUNNING":
            driver.sendFrameworkMessage(status["executor_id"], status["agent_id"],
                                        encode_data(b"hi"))
        self.check(driver)

    def frameworkMessage(self, driver, executor_id, agent_id, data):
        text = decode_data(data).decode()
        say("frameworkMessage", executor_id=executor_id["value"], agent_id=agent_id["value"],
            data=text)
        if text == "echo hi":
            driver.killTask({"value": "b"})

    def executorLost(self, driver, executor_id, agent_id, status):
        say("executorLost", executor_id=executor_id["value"], status=status)
        self.executor_lost = True
        self.check(driver)

    def slaveLost(self, driver, agent_id):
        say("slaveLost", agent_id=agent_id["value"])

    def error(self, driver, message):
        say("error", message=message)
        self.failed = True
        self.done.set()

    # --- the plan ---

    def check(self, driver):
        last = {task_id: states[-1] for task_id, states in self.states.items()}
        if self.mode == "executor":
            wanted = {"a": "TASK_FINISHED", "b": "TASK_KILLED"}
        elif self.mode == "executor-group":
            wanted = {"g1": "TASK_FINISHED", "g2": "TASK_FINISHED"}
        else:
            wanted = {"writer": "TASK_FINISHED", "reader": "TASK_FINISHED"}
        if any(last.get(task_id) in TERMINAL and last[task_id] != state
               for task_id, state in wanted.items()):
            self.failed = True
            self.done.set()
        elif (all(last.get(task_id) == state for task_id, state in wanted.items())
              and (self.mode != "group" or self.executor_lost)):
            self.done.set()

    def executor_info(self, **fields):
        executor = {"executor_id": {"value": "pm"}, "name": "pymesos executor",
                    "command": {"value": self.executor_command, "environment": {"variables": [
                        {"name": "PYTHONPATH", "value": os.environ.get("PYTHONPATH", "")}]}},
                    "resources": [scalar("cpus", 0.1), scalar("mem", 32)]}
        executor.update(fields)
        return executor

    def executor_group_operation(self, offer):
        # A group's executor: cpus, mem and disk (group::internal::validateExecutor,
        # src/master/validation.cpp), its type CUSTOM.
        executor = self.executor_info(type="CUSTOM", resources=[
            scalar("cpus", 0.1), scalar("mem", 32), scalar("disk", 10)])
        tasks = [{"name": task_id, "task_id": {"value": task_id},
                  "agent_id": offer["agent_id"], "data": encode_data(b"finish"),
                  "resources": [scalar("cpus", 0.1), scalar("mem", 32)]}
                 for task_id in ("g1", "g2")]
        return {"type": "LAUNCH_GROUP",
                "launch_group": {"executor": executor, "task_group": {"tasks": tasks}}}

    def executor_tasks(self, offer):
        executor = self.executor_info()
        tasks = []
        for task_id, data in (("a", b"finish"), ("b", b"run")):
            tasks.append({"name": task_id, "task_id": {"value": task_id},
                          "agent_id": offer["agent_id"], "executor": executor,
                          "data": encode_data(data),
                          "resources": [scalar("cpus", 0.1), scalar("mem", 32)]})
        return tasks

    def group_operation(self, offer):
        volume = {"type": "MESOS", "volumes": [{
            "container_path": "shared", "mode": "RW",
            "source": {"type": "SANDBOX_PATH",
                       "sandbox_path": {"type": "PARENT", "path": "data"}}}]}
        commands = {"writer": "echo shared-data > shared/f",
                    "reader": "while [ ! -s shared/f ]; do sleep 0.05; done; cat shared/f"}
        # The suite's leak marker as the tasks' own: a nested container gets
        # none of the agent's environment (as on Mesos).
        marker = [{"name": name, "value": value} for name, value in os.environ.items()
                  if name == "TFMESOS_TEST_SESSION"]
        tasks = [{"name": task_id, "task_id": {"value": task_id},
                  "agent_id": offer["agent_id"],
                  "command": {"value": command, "environment": {"variables": marker}},
                  "container": volume,
                  "resources": [scalar("cpus", 0.1), scalar("mem", 32)]}
                 for task_id, command in commands.items()]
        # Mesos' default executor: resources as group::internal::validateExecutor
        # asks (cpus, mem and disk; src/master/validation.cpp).
        executor = {"executor_id": {"value": "group"}, "type": "DEFAULT",
                    "resources": [scalar("cpus", 0.1), scalar("mem", 32), scalar("disk", 10)]}
        return {"type": "LAUNCH_GROUP",
                "launch_group": {"executor": executor, "task_group": {"tasks": tasks}}}


class Operator(OperatorMaster):
    """pymesos' operator callbacks, printed."""

    def __init__(self):
        self.removed = threading.Event()

    def frameworkAdded(self, framework):
        say("operator.frameworkAdded", framework_id=framework["framework_info"]["id"]["value"])

    def frameworkUpdated(self, framework):
        say("operator.frameworkUpdated",
            framework_id=framework["framework_info"]["id"]["value"])

    def frameworkRemoved(self, framework_info):
        say("operator.frameworkRemoved", framework_id=framework_info["id"]["value"])
        self.removed.set()

    def taskAdded(self, task):
        say("operator.taskAdded", task_id=task["task_id"]["value"], state=task["state"])

    def taskUpdated(self, event):
        # state: the task's latest state, which may be ahead of the status
        # this event carries (TaskUpdated, include/mesos/v1/master/master.proto)
        say("operator.taskUpdated", task_id=event["status"]["task_id"]["value"],
            state=event["status"]["state"], latest_state=event["state"])

    def agentAdded(self, agent):
        say("operator.agentAdded", agent_id=agent["agent_info"]["id"]["value"])

    def agentRemoved(self, agent_id):
        say("operator.agentRemoved", agent_id=agent_id)


def summary(response):
    """A few words of an operator response: its type and what it lists."""
    words = [response.get("type", "?")]
    agents = response.get("get_agents", {}).get("agents")
    if agents is not None:
        words.append("agents=%d" % len(agents))
    for key in ("get_tasks", "get_state"):
        tasks = response.get(key, {})
        tasks = tasks.get("get_tasks", tasks) if key == "get_state" else tasks
        if "tasks" in tasks or "completed_tasks" in tasks:
            ids = sorted(t["task_id"]["value"] for t in
                         tasks.get("tasks", []) + tasks.get("completed_tasks", []))
            words.append("tasks=" + ",".join(ids))
    containers = response.get("get_containers", {}).get("containers")
    if containers is not None:
        words.append("containers=%d" % len(containers))
    executors = response.get("get_executors", {}).get("executors")
    if executors is not None:
        words.append("executors=" + ",".join(
            e["executor_info"]["executor_id"]["value"] for e in executors))
    files = response.get("list_files", {}).get("file_infos")
    if files is not None:
        words.append("files=" + ",".join(sorted(f["path"].rpartition("/")[2] for f in files)))
    if "read_file" in response:
        words.append("size=%s" % response["read_file"].get("size"))
    return " ".join(words)


def operator_calls(master, framework_id):
    """Each read call of pymesos' operator drivers -> "ok <summary>" or its error."""
    results = {}

    def call(name, method, *args):
        try:
            results[name] = "ok " + summary(method(*args))
        except Exception as exc:    # what pymesos raised: reported, not fatal
            results[name] = "error %s" % str(exc)[:300]

    for name in ("getHealth", "getFlags", "getVersion", "getLoggingLevel", "getState",
                 "getFrameworks", "getExecutors", "getTasks", "getAgents", "getRoles",
                 "getWeights", "getMaster", "getMaintenanceStatus", "getMaintenanceSchedule",
                 "getQuota"):
        call("master." + name, getattr(master, name))
    call("master.getMetrics", master.getMetrics, 5 * 10 ** 9)
    agents = master.getAgents()["get_agents"]["agents"]
    agent = MesosOperatorAgentDriver(agents[0]["pid"].rpartition("@")[2])
    for name in ("getHealth", "getFlags", "getVersion", "getState", "getFrameworks",
                 "getExecutors", "getTasks", "getContainers"):
        call("agent." + name, getattr(agent, name))
    # Mesos' agent serves each executor's sandbox at this virtual path
    # (src/slave/paths.cpp getExecutorVirtualPath; Slave::attach)
    sandbox = "/frameworks/%s/executors/pm/runs/latest" % framework_id
    call("agent.listFiles", agent.listFiles, sandbox)
    call("agent.readFile", agent.readFile, sandbox + "/stderr", 100, 0)
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("master", help="host:port")
    parser.add_argument("mode", choices=("executor", "executor-group", "group"))
    parser.add_argument("executor_command", nargs="?")
    parser.add_argument("--operator", action="store_true")
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    deadline = time.monotonic() + args.timeout
    operator = operator_driver = None
    if args.operator:
        operator = Operator()
        operator_driver = MesosOperatorMasterDriver(args.master, operator, use_addict=True)
        operator_driver.start()
        # connected: the stream's headers came (process.py Connection.read)
        while not operator_driver.connected and time.monotonic() < deadline:
            time.sleep(0.01)
        say("operator.connected", connected=operator_driver.connected)
    plan = Plan(args.mode, args.executor_command)
    framework = {"user": getpass.getuser(), "name": "pymesos-" + args.mode}
    driver = MesosSchedulerDriver(plan, framework, args.master, use_addict=True)
    driver.start()
    finished = plan.done.wait(max(0, deadline - time.monotonic()))
    if operator_driver is not None and finished:
        say("operatorCalls", results=operator_calls(operator_driver, driver.framework_id))
    driver.stop()    # not a failover: pymesos sends TEARDOWN (scheduler.py _shutdown)
    driver.join()
    if operator_driver is not None:
        operator.removed.wait(max(0, deadline - time.monotonic()))
        operator_driver.stop()
        operator_driver.join()
    say("stopped", finished=finished, failed=plan.failed)
    return 0 if finished and not plan.failed else 1


if __name__ == "__main__":
    sys.exit(main())
