"""Run directories for the tests of what reads them (tfmesos
runs/show/logs/report): written from run.json's classes
(``tfmesos.record.schema``), or the version 1 run directory that tfrun
wrote before the schema (``FORMAT_1``); and validating a run.json against
``docs/run.schema.json``."""

import datetime
import functools
import json
import os
import shutil

import jsonschema

from tfmesos.record.schema import Attempt, Job, Logs, Outcome, RunFile, State, Task, Timings

TESTS = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(os.path.dirname(TESTS), "docs", "run.schema.json")
# A real run of tfrun before the schema: worker:1 failed with code 1 ("No
# module named 'sklearn'") and the cluster restarted once; usage sampled
# every second.
FORMAT_1 = os.path.join(TESTS, "data", "run-format1")
BASE = datetime.datetime(2026, 11, 26, 10, 0, 0, tzinfo=datetime.timezone.utc)


def at(seconds):
    """run.json's time ``seconds`` after BASE."""
    moment = BASE + datetime.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (moment.microsecond // 1000)


def attempt(task, number=1, restart=0, launched=0.1, running=0.2, registered=0.3, end=None,
            state="TASK_FINISHED", source="SOURCE_EXECUTOR", exit_code=0, **extra):
    states = [State(state="TASK_RUNNING", time=at(running), source="SOURCE_EXECUTOR")]
    if end is not None:
        states.append(State(state=state, time=at(end), source=source))
    base = task.replace(":", ".") + ("" if number == 1 else ".attempt%d" % number)
    return Attempt(attempt=number, restart=restart,
                   task_id="tfmesos.r.%s.%d" % (task.replace(":", "."), number),
                   agent_id="agent-S0", hostname="127.0.0.1",
                   address="127.0.0.1:%d" % (31000 + number), launched=at(launched),
                   registered=at(registered), states=states,
                   exit_code=exit_code if end is not None else None,
                   logs=Logs(stdout=base + ".stdout", stderr=base + ".stderr"), **extra)


def write_run(root, run_id, name="tfrun", status="succeeded", exit_code=0, start=0.0,
              took=2.0, tasks=None, message=None, restarts=(), command="python train.py",
              mode="replica", **extra):
    """A run directory ``<root>/<name>-<run_id>`` whose tasks are
    ``{name: [Attempt, ...]}`` (default: worker:0 that finished)."""
    tasks = tasks if tasks is not None else {
        "worker:0": [attempt("worker:0", end=start + took - 0.1)]}
    records = []
    for task_name, attempts in tasks.items():
        last = attempts[-1] if attempts else None
        records.append(Task(name=task_name, job=task_name.split(":")[0],
                            index=int(task_name.split(":")[1]),
                            state=(last.states[-1].state if last.states else "TASK_STAGING")
                            if last else "PENDING",
                            exit_code=last.exit_code if last else None, attempts=attempts))
    run = RunFile(
        run_id=run_id, name=name, mode=mode, master=extra.pop("master", "local"),
        framework_id=extra.pop("framework_id", "fw-0000"),
        command=command,
        jobs=[Job(name="worker", num=len(tasks), start=0, cpus=1.0, mem=1024.0, gpus=0)],
        tasks=records, outcome=Outcome(status=status, message=message, exit_code=exit_code),
        timings=Timings(submitted=at(start), first_offer=at(start + 0.1),
                        all_registered=at(start + 0.4),
                        finished=None if status == "running" else at(start + took)),
        restarts=list(restarts), **extra)
    directory = os.path.join(str(root), "%s-%s" % (name, run_id))
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "run.json"), "w", encoding="utf-8") as handle:
        json.dump(run.to_dict(), handle, indent=1)
    return directory


def copy_format_1(root, name="tfrun-7f369b42"):
    """A copy of the version 1 run directory under ``root``; its path."""
    return shutil.copytree(FORMAT_1, os.path.join(str(root), name))


@functools.cache
def load_schema():
    with open(SCHEMA, encoding="utf-8") as handle:
        return json.load(handle)


def schema_errors(data):
    """What makes ``data`` (a parsed run.json) invalid, one line each."""
    validator = jsonschema.Draft202012Validator(load_schema())
    return ["%s: %s" % ("/".join(str(p) for p in error.absolute_path) or "(top)", error.message)
            for error in validator.iter_errors(data)]


def validate_run_json(path):
    """``path``'s data, after checking it against docs/run.schema.json."""
    with open(str(path), encoding="utf-8") as handle:
        data = json.load(handle)
    errors = schema_errors(data)
    assert not errors, "%s is not valid: %s" % (path, "; ".join(errors[:10]))
    return data


def bare_environ():
    """An environment with none of the user's settings for a run to read,
    but the tests' runs directory (conftest: $TFMESOS_RUNS_DIR), so that its
    record is not written into ./tfmesos-runs of the checkout."""
    return {"TFMESOS_RUNS_DIR": os.environ["TFMESOS_RUNS_DIR"]}
