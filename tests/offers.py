"""Synthetic Mesos offers for unit tests, and a driver that records what a
scheduler does with them."""


def scalar(name, value, role="*", reservations=None):
    res = {"name": name, "type": "SCALAR", "scalar": {"value": value},
           "allocation_info": {"role": role}}
    if reservations is not None:
        res["reservations"] = reservations
    return res


def offer(offer_id, cpus=4.0, mem=8192.0, gpus=None, gpu_set=None, ports=((31000, 31009),),
          agent=None, hostname=None, role="*", extra=()):
    """One offer; ``extra`` resource entries are appended as given."""
    resources = [scalar("cpus", cpus, role), scalar("mem", mem, role), scalar("disk", 1000.0, role)]
    if ports:
        resources.append({"name": "ports", "type": "RANGES", "allocation_info": {"role": role},
                          "ranges": {"range": [{"begin": b, "end": e} for b, e in ports]}})
    if gpus:
        resources.append(scalar("gpus", gpus, role))
    if gpu_set:
        resources.append({"name": "gpus", "type": "SET", "set": {"item": list(gpu_set)},
                          "allocation_info": {"role": role}})
    resources.extend(extra)
    return {"id": {"value": offer_id}, "framework_id": {"value": "fw"},
            "agent_id": {"value": agent or "agent-" + offer_id},
            "hostname": hostname or "host-" + offer_id, "resources": resources,
            "allocation_info": {"role": role}}


class FakeDriver:
    def __init__(self, fail_launch=None):
        self.calls = []
        self.fail_launch = fail_launch

    def launchTasks(self, offer_ids, tasks, filters=None):
        if self.fail_launch:
            raise self.fail_launch
        self.calls.append(("launch", [o["value"] for o in offer_ids], tasks, filters))

    def declineOffer(self, offer_ids, filters=None):
        self.calls.append(("decline", [o["value"] for o in offer_ids], filters))

    def suppressOffers(self):
        self.calls.append(("suppress",))

    def reviveOffers(self):
        self.calls.append(("revive",))

    def reconcileTasks(self, tasks):
        self.calls.append(("reconcile", [(t["task_id"]["value"], t["agent_id"]["value"])
                                         for t in tasks]))
