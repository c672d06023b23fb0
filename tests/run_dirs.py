"""Run directories written by hand (run.json format 1, as run_record writes
it), for the tests of what reads them: tfmesos runs/show/logs/report."""

import datetime
import json
import os

BASE = datetime.datetime(2026, 11, 26, 10, 0, 0, tzinfo=datetime.timezone.utc)


def at(seconds):
    """run.json's time ``seconds`` after BASE."""
    moment = BASE + datetime.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (moment.microsecond // 1000)


def attempt(task, number=1, restart=0, launched=0.1, running=0.2, registered=0.3, end=None,
            state="TASK_FINISHED", source="SOURCE_EXECUTOR", exit_code=0, **extra):
    states = [{"state": "TASK_RUNNING", "time": at(running), "source": "SOURCE_EXECUTOR",
               "reason": None, "message": ""}]
    if end is not None:
        states.append({"state": state, "time": at(end), "source": source, "reason": None,
                       "message": ""})
    base = task.replace(":", ".") + ("" if number == 1 else ".attempt%d" % number)
    return dict({"attempt": number, "restart": restart,
                 "task_id": "tfmesos.r.%s.%d" % (task.replace(":", "."), number),
                 "agent_id": "agent-S0", "hostname": "127.0.0.1",
                 "address": "127.0.0.1:%d" % (31000 + number), "launched": at(launched),
                 "registered": at(registered), "states": states,
                 "exit_code": exit_code if end is not None else None,
                 "logs": {"stdout": base + ".stdout", "stderr": base + ".stderr"}}, **extra)


def write_run(root, run_id, name="tfrun", status="succeeded", exit_code=0, start=0.0,
              took=2.0, tasks=None, message=None, restarts=(), **extra):
    """A run directory ``<root>/<name>-<run_id>`` whose tasks are
    ``{name: [attempt, ...]}`` (default: worker:0 that finished)."""
    tasks = tasks if tasks is not None else {
        "worker:0": [attempt("worker:0", end=start + took - 0.1)]}
    records = []
    for task_name, attempts in tasks.items():
        last = attempts[-1] if attempts else None
        records.append({"name": task_name, "job": task_name.split(":")[0],
                        "index": int(task_name.split(":")[1]),
                        "state": last["states"][-1]["state"] if last else "PENDING",
                        "exit_code": last["exit_code"] if last else None,
                        "attempts": attempts})
    data = dict({
        "format": 1, "run_id": run_id, "name": name, "mode": "replica", "master": "local",
        "framework_id": "fw-0000", "command": "python train.py",
        "jobs": [{"name": "worker", "num": len(tasks), "start": 0, "cpus": 1.0, "mem": 1024.0,
                  "gpus": 0}],
        "tasks": records,
        "outcome": {"status": status, "message": message, "task": None,
                    "exit_code": exit_code},
        "timings": {"submitted": at(start), "first_offer": at(start + 0.1),
                    "all_registered": at(start + 0.4),
                    "finished": None if status == "running" else at(start + took)},
        "restarts": list(restarts), "relaunches": []}, **extra)
    directory = os.path.join(str(root), "%s-%s" % (name, run_id))
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "run.json"), "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
    return directory
