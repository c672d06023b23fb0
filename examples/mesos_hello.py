"""The Mesos layer on its own: subscribe, launch `echo hello`, print the
task's final state. Start a master first, then point this script at it:

    tfmesos local-master --port 5050 &
    python examples/mesos_hello.py 127.0.0.1:5050
"""

import getpass
import sys
import threading

from tfmesos.mesos import MesosSchedulerDriver, Scheduler

TERMINAL = {"TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST",
            "TASK_DROPPED", "TASK_GONE"}


class Hello(Scheduler):
    def __init__(self):
        self.launched = False
        self.final = None
        self.done = threading.Event()

    def resourceOffers(self, driver, offers):
        for offer in offers:
            if self.launched:
                driver.declineOffer([offer.id])
                continue
            task = {"name": "hello", "task_id": {"value": "hello"}, "agent_id": offer.agent_id,
                    "command": {"value": "echo hello"},
                    "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                                  {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}]}
            driver.launchTasks([offer.id], [task])
            self.launched = True

    def statusUpdate(self, driver, update):
        print("task %s is %s" % (update.task_id.value, update.state), flush=True)
        if update.state in TERMINAL:
            self.final = update
            self.done.set()


def main(master):
    hello = Hello()
    # GPU_RESOURCES: Mesos offers GPU agents only to frameworks that declare it.
    framework = {"user": getpass.getuser(), "name": "hello",
                 "capabilities": [{"type": "GPU_RESOURCES"}]}
    driver = MesosSchedulerDriver(hello, framework, master)
    driver.start()
    finished = hello.done.wait(60)
    driver.stop()
    driver.join(10)
    if not finished:
        sys.exit("no final state within 60 s")
    print("final state: %s %s" % (hello.final.state, hello.final.get("message", "")))
    return 0 if hello.final.state == "TASK_FINISHED" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:5050"))
