"""A custom executor written with pymesos' ``MesosExecutorDriver`` (the
executor side of douban/pymesos 0.3.15, which speaks the v1 executor HTTP
API): for tests of the local master's /api/v1/executor with a real client.

A task whose ``data`` is ``finish`` runs and finishes; any other runs until
killed; each task of a group likewise. A framework message is answered ``echo <data>``.
"""

import threading

from pymesos import Executor, MesosExecutorDriver, decode_data, encode_data


class EchoExecutor(Executor):
    def launchTask(self, driver, task):
        def run():
            driver.sendStatusUpdate({"task_id": task["task_id"], "agent_id": task["agent_id"],
                                     "state": "TASK_RUNNING"})
            if decode_data(task.get("data", "")) == b"finish":
                driver.sendStatusUpdate({"task_id": task["task_id"],
                                         "agent_id": task["agent_id"],
                                         "state": "TASK_FINISHED"})
        # pymesos calls back on its IO thread: updates go from another.
        threading.Thread(target=run, daemon=True).start()

    def launchTaskGroup(self, driver, tasks):
        """A task group (LAUNCH_GROUP): each task as ``launchTask`` runs it."""
        for task in tasks:
            self.launchTask(driver, task)

    def killTask(self, driver, task_id):
        driver.sendStatusUpdate({"task_id": task_id, "state": "TASK_KILLED"})

    def frameworkMessage(self, driver, message):
        driver.sendFrameworkMessage(encode_data(b"echo " + decode_data(message)))


if __name__ == "__main__":
    MesosExecutorDriver(EchoExecutor(), use_addict=True).run()
