"""The whole TaskInfo path without a master: offers -> scheduler -> the pure
TaskInfo builder -> ACCEPT calls through the strict schema."""

import base64
import json
import queue

from mesos_local.api.validation import validate
from tfmesos.core.identity import RunIdentity
from tfmesos.core.jobs import Job
from tfmesos.core.scheduler import TFMesosScheduler
from tfmesos.core.slots import make_slots
from tfmesos.core.taskinfo import build_task
from tfmesos.mesos import calls


def variables(info):
    """A TaskInfo's environment, its value secrets resolved (as an agent does)."""
    return {v["name"]: base64.b64decode(v["secret"]["value"]["data"]).decode()
            if v.get("type") == "SECRET" else v["value"]
            for v in info["command"]["environment"]["variables"]}


SECRET = b"k" * 32
RENDEZVOUS = "127.0.0.1:40123"


def identity(run_id="0000abcd", **fields):
    """A run's identity whose key is ``SECRET``."""
    return RunIdentity(run_id=run_id, key=SECRET, user=fields.pop("user", "alice"), **fields)


class RecordingDriver:
    """The driver's methods, building their Calls with ``calls`` as the real
    driver does, recorded instead of sent."""

    def __init__(self):
        self.calls = []

    def _record(self, call):
        self.calls.append(json.loads(json.dumps(dict(call, framework_id={"value": "fw-1"}))))

    def launchTasks(self, offer_ids, tasks, filters=None):
        self._record(calls.launch(offer_ids, tasks, filters))

    def declineOffer(self, offer_ids, filters=None):
        self._record(calls.decline(offer_ids, filters))

    def suppressOffers(self):
        self._record(calls.suppress())

    def accepts(self):
        return [c for c in self.calls if c["type"] == "ACCEPT"]

    def task_infos(self):
        return [info for call in self.accepts() for op in call["accept"]["operations"]
                for info in op["launch"]["task_infos"]]


def launch_all(jobs, run, offers, extra_ports=None, **options):
    """Run the scheduler on ``offers`` with the pure TaskInfo builder (given
    ``options``); returns (the jobs, TaskInfos by slot name, driver). Every
    call it made passed the strict schema."""
    jobs = [Job(**job) for job in jobs]

    who = identity(options.pop("run_id", "0000abcd"))

    def build(slot, assignment):
        return build_task(run, slot, assignment, RENDEZVOUS, who, **options)
    scheduler = TFMesosScheduler(make_slots(jobs), build, queue.Queue(), who.run_id,
                                 extra_ports=extra_ports)
    driver = RecordingDriver()
    scheduler.resourceOffers(driver, offers)
    for call in driver.calls:
        validate(call)
    names = {}
    for info in driver.task_infos():
        names[scheduler.slot_of(info["task_id"]["value"]).name] = info
    assert len({i["task_id"]["value"] for i in names.values()}) == len(names)
    return jobs, names, driver


PS_AND_WORKERS = [{"name": "ps", "num": 1, "cpus": 0.5, "mem": 256},
                  {"name": "worker", "num": 2, "cpus": 1, "mem": 512}]
