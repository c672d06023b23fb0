"""run.json's schema (tfmesos.record.schema): the classes' dict forms round
trip, version 1 files read as the current classes, the committed
docs/run.schema.json is the one the classes make, and a real run's
run.json is valid against it."""

import dataclasses
import json
import os
import subprocess
import sys

import jsonschema
import pytest
from run_dirs import FORMAT_1, at, load_schema, validate_run_json
from tfrun_helpers import REPO, run_tfrun

from tfmesos.record import json_schema, record_codec, schema
from tfmesos.record.schema import (
    Attempt,
    CgroupUsage,
    Job,
    Logs,
    MetricSeries,
    Outcome,
    Relaunch,
    Restart,
    RunFile,
    Sample,
    SandboxTail,
    Scheduler,
    SchemaError,
    Shipped,
    ShippedBundle,
    State,
    Takeover,
    Task,
    Timings,
    Usage,
    read_run_file,
)


def every_field_set():
    """A RunFile in which no field of any class holds its default."""
    usage = Usage(wall_s=3.5, cpu_s=2.25, user_s=2.0, system_s=0.25, peak_rss_mb=120.5,
                  peak_tree_rss_mb=130.0, peak_gpu_mb=512.0, sample_interval_s=0.5,
                  samples=[Sample(t=0.5, cpu_s=0.4, rss_mb=100.0, gpu_mb=256.0),
                           Sample(t=1.0, cpu_s=0.9, rss_mb=110.0, gpu_mb=300.0)],
                  cgroup=CgroupUsage(limit_mb=256.0, peak_mb=140.0, oom_kills=1))
    attempt = Attempt(attempt=2, restart=1, task_id="tfmesos.r.worker.1.2", agent_id="S1",
                      hostname="node1", address="node1:31001", launched=at(1.0),
                      registered=at(1.5), states=[State(
                          state="TASK_FAILED", time=at(4.0), source="SOURCE_EXECUTOR",
                          reason="REASON_COMMAND_EXECUTOR_FAILED", message="exited 137")],
                      exit_code=137, exited=at(3.9),
                      logs=Logs(stdout="worker.1.attempt2.stdout",
                                stderr="worker.1.attempt2.stderr"),
                      usage=usage, hint="the task was killed with SIGKILL",
                      sandbox_tail=SandboxTail(stdout=["starting"], stderr=["sh: 1: x: not found"]))
    return RunFile(
        schema_version=9, run_id="5eed0001", name="train", mode="fine", framework="torch",
        elastic="1:3",
        master="zk://zk:2181",
        command="python train.py", jobs=[Job(name="ps", num=2, start=1, cpus=0.5, mem=256.0,
                                             gpus=1)],
        framework_id="fw-1", tasks=[Task(name="worker:1", job="worker", index=1,
                                         state="TASK_FAILED", exit_code=137,
                                         attempts=[attempt])],
        outcome=Outcome(status="killed", message="worker:1 was killed", task="worker:1",
                        exit_code=137, hint="give it more memory", by="alice"),
        timings=Timings(submitted=at(0), first_offer=at(0.1), all_registered=at(1.6),
                        finished=at(5.0)),
        restarts=[Restart(restart=2, time=at(2.0), cause="lost", task="ps:0", message="lost",
                          delay=4.0)],
        relaunches=[Relaunch(task="worker:0", time=at(2.5), cause="lost", message="gone",
                             agent_id="S2", address="node2:31000", back=at(3.0))],
        takeovers=[Takeover(time=at(2.7), scheduler_attempt=3, how="tfmesos attach")],
        shipped=Shipped(bundle=ShippedBundle(source="/src", files=3, bytes=30,
                                             archive_bytes=20, sha256="ab" * 32,
                                             name="bundle.zip"),
                        task_side="tfmesos-task-1.zip", python_env="env.tgz"),
        scheduler=Scheduler(host="node0", pid=4242, boot_id="b00t", pid_namespace="pid:[1]",
                            start_ticks=77),
        metrics=[MetricSeries(task="worker:1", name="loss", last=0.25, last_step=40,
                              last_time=3.5, count=41, stride=2, steps=[0, 2, 40],
                              values=[2.5, None, 0.25], times=[1.0, 1.1, 3.5])],
        metrics_dropped=7)


def records_in(value):
    if isinstance(value, schema.Record):
        yield value
        for field in dataclasses.fields(value):
            yield from records_in(getattr(value, field.name))
    elif isinstance(value, list):
        for item in value:
            yield from records_in(item)


def test_every_class_round_trips_with_values_other_than_its_defaults():
    run = every_field_set()
    classes = set()
    for record in records_in(run):
        classes.add(type(record))
        fresh = type(record)()
        for field in dataclasses.fields(record):
            assert getattr(record, field.name) != getattr(fresh, field.name), \
                "%s.%s holds its default" % (type(record).__name__, field.name)
    assert classes == {cls for cls in vars(schema).values()
                       if isinstance(cls, type) and issubclass(cls, schema.Record)
                       and cls is not schema.Record}
    data = run.to_dict()
    assert RunFile.from_dict(json.loads(json.dumps(data))) == run
    assert RunFile.from_dict(data).to_dict() == data


def test_dict_forms_hold_every_field_in_order():
    data = RunFile().to_dict()
    assert list(data) == [field.name for field in dataclasses.fields(RunFile)]
    assert data["schema_version"] == 8 and data["outcome"]["status"] == "running"
    assert Sample(t=1.0, cpu_s=0.5).to_dict() == {"t": 1.0, "cpu_s": 0.5, "rss_mb": None,
                                                  "gpu_mb": None}


def test_integers_read_as_floats_and_unknown_keys_are_ignored():
    job = Job.from_dict({"name": "w", "cpus": 1, "mem": 512, "gpus": 1.0, "future": True})
    assert (job.cpus, job.mem, job.gpus) == (1.0, 512.0, 1)
    assert type(job.cpus) is float and type(job.gpus) is int


@pytest.mark.parametrize("data, where", [
    ({"tasks": [{"attempts": [{"exit_code": "1"}]}]},
     "run.json.tasks[0].attempts[0].exit_code: expected integer, got str"),
    ({"tasks": {}}, "run.json.tasks: expected a list, got dict"),
    ({"outcome": None}, "run.json.outcome: expected an object, got null"),
    ({"jobs": [{"num": True}]}, "run.json.jobs[0].num: expected integer, got bool"),
    ({"jobs": [{"gpus": 0.5}]}, "run.json.jobs[0].gpus: expected integer, got float"),
    ({"metrics": [{"steps": [1], "values": [1.0], "times": []}]},
     "run.json.metrics[0]: its steps, values and times differ in length (1, 1, 0)"),
    # Exit codes are what a wait status holds; every other integer an int64.
    ({"tasks": [{"attempts": [{"exit_code": 10 ** 400}]}]},
     "run.json.tasks[0].attempts[0].exit_code: expected integer from -255 to 255, got int "
     "out of range"),
    ({"tasks": [{"exit_code": -256}]},
     "run.json.tasks[0].exit_code: expected integer from -255 to 255, got int out of range"),
    ({"outcome": {"exit_code": 256}},
     "run.json.outcome.exit_code: expected integer from -255 to 255, got int out of range"),
    ({"outcome": {"exit_code": 1e300}},
     "run.json.outcome.exit_code: expected integer from -255 to 255, got float out of range"),
    ({"jobs": [{"num": 2 ** 63}]},
     "run.json.jobs[0].num: expected integer from -9223372036854775808 to "
     "9223372036854775807, got int out of range"),
    ({"jobs": [{"cpus": 10 ** 400}]},   # an OverflowError traceback before
     "run.json.jobs[0].cpus: expected number, got int out of range"),
    ({"metrics": [{"steps": [10 ** 400], "values": [1.0], "times": [1.0]}]},
     "run.json.metrics[0].steps[0]: expected integer from -9223372036854775808 to "
     "9223372036854775807, got int out of range"),
])
def test_a_value_of_the_wrong_type_says_where(data, where):
    with pytest.raises(SchemaError) as error:
        read_run_file(dict(data, schema_version=2))
    assert str(error.value) == where


@pytest.mark.parametrize("data, message", [
    ([], "expected an object, got list"),
    ({"tasks": []}, "no schema_version (nor format 1)"),
    ({"format": 7}, "no schema_version (nor format 1)"),
    ({"schema_version": 9}, "schema_version 9 is newer than this tfmesos reads (8)"),
    ({"schema_version": "2"}, "schema_version '2' is not a version"),
])
def test_files_it_cannot_read(data, message):
    with pytest.raises(SchemaError, match="^%s$" % message.replace("(", r"\(").replace(")", r"\)")):
        read_run_file(data)


def test_a_version_1_file_reads_as_the_current_classes():
    """tests/data/run-format1: a run.json tfrun wrote before the schema
    (format 1), of a run whose worker:1 failed once and was restarted."""
    with open(os.path.join(FORMAT_1, "run.json"), encoding="utf-8") as handle:
        data = json.load(handle)
    assert data["format"] == 1 and "schema_version" not in data
    run = read_run_file(data)
    assert run.schema_version == 8 and run.shipped is None and run.scheduler is None
    assert run.metrics == [] and run.takeovers == [] and run.framework == "tensorflow"
    [worker_0, worker_1] = run.tasks
    assert [a.attempt for a in worker_1.attempts] == [1, 2] and run.restarts[0].task == "worker:1"
    failed = worker_1.attempts[0]
    assert (failed.exit_code, failed.hint, failed.exited) == (1, None, None)
    assert failed.usage.samples[0] == Sample(t=1.0, cpu_s=0.96, rss_mb=66.7, gpu_mb=None)
    assert failed.usage.cgroup == CgroupUsage(limit_mb=256.0, peak_mb=53.1, oom_kills=0)
    assert failed.logs.named("stderr") == "worker.1.stderr"
    # What it becomes is a valid version 8 file.
    jsonschema.validate(run.to_dict(), load_schema(), cls=jsonschema.Draft202012Validator)


def test_a_version_2_file_reads_as_version_8():
    """Version 3 only added the attempts' ``sandbox_tail``, version 4 the
    run's ``scheduler``, version 5 the ``metrics``, version 6 the outcome's
    ``by`` and the ``takeovers``, version 7 the ``framework``, version 8
    ``elastic``: a version 2 file reads with them null, empty and
    ``tensorflow``, and becomes a valid version 8 file."""
    current = RunFile(tasks=[Task(name="worker:0", attempts=[Attempt(task_id="t1")])]).to_dict()
    old = dict(current, schema_version=2)
    del old["tasks"][0]["attempts"][0]["sandbox_tail"]
    del old["scheduler"], old["metrics"], old["metrics_dropped"], old["takeovers"]
    del old["outcome"]["by"], old["framework"], old["elastic"]
    run = read_run_file(old)
    assert run.schema_version == 8 and run.tasks[0].attempts[0].sandbox_tail is None
    assert run.framework == "tensorflow" and run.elastic is None
    assert run.scheduler is None and run.metrics == [] and run.metrics_dropped == 0
    assert run.takeovers == [] and run.outcome.by is None
    jsonschema.validate(run.to_dict(), load_schema(), cls=jsonschema.Draft202012Validator)
    tail = SandboxTail(stdout=["a"], stderr=["b"])
    assert Attempt.from_dict(Attempt(sandbox_tail=tail).to_dict()).sandbox_tail == tail


def test_the_json_schema_is_a_draft_2020_12_schema_that_requires_every_field():
    generated = json_schema.json_schema()
    jsonschema.Draft202012Validator.check_schema(generated)
    assert generated["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert generated["required"] == [field.name for field in dataclasses.fields(RunFile)]
    attempt = generated["$defs"]["Attempt"]
    assert attempt["additionalProperties"] is False
    assert attempt["properties"]["usage"]["anyOf"] == [{"$ref": "#/$defs/Usage"},
                                                       {"type": "null"}]
    assert attempt["properties"]["exit_code"]["type"] == ["integer", "null"]
    assert generated["properties"]["mode"]["enum"] == ["replica", "fine"]
    validator = jsonschema.Draft202012Validator(generated)
    assert not list(validator.iter_errors(RunFile().to_dict()))
    wrong = dict(RunFile().to_dict(), extra=1, mode="coarse")
    assert len(list(validator.iter_errors(wrong))) == 2


def test_the_committed_schema_is_the_generated_one():
    """docs/run.schema.json cannot drift from the classes: regenerate it with
    ``python -m tfmesos.record.json_schema > docs/run.schema.json``."""
    with open(os.path.join(REPO, "docs", "run.schema.json"), encoding="utf-8") as handle:
        assert handle.read() == json_schema.schema_text()
    printed = subprocess.run([sys.executable, "-m", "tfmesos.record.json_schema"], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0 and printed.stdout == json_schema.schema_text()


def test_a_real_runs_run_json_is_valid(tmp_path):
    run_dir = tmp_path / "run"
    result = run_tfrun("-w", "1", "-s", "0", "-Cw", "0.1", "-Mw", "128", "--run-dir",
                       str(run_dir), "--", "true")
    assert result.returncode == 0, result.stderr
    data = validate_run_json(run_dir / "run.json")
    assert data["schema_version"] == 8 and data["outcome"]["status"] == "succeeded"
    assert data["framework"] == "tensorflow"
    assert data["scheduler"]["pid"] > 0 and data["scheduler"]["host"]
    [task] = data["tasks"]
    assert task["attempts"][0]["exited"] and task["attempts"][0]["usage"]["wall_s"] >= 0


PROBES = [None, True, False, 0, 1, -3, 2.0, 2.5, float("nan"), float("inf"), "", "x", [], [1],
          [None], [2.5, None], ["x"], {}, {"state": "TASK_RUNNING"}, 255, -256, 10 ** 400,
          1e300, [10 ** 400], [2.5, 10 ** 400]]


def value_paths(data, path=()):
    """The path of every value in ``data``, objects and lists included."""
    yield path
    items = data.items() if isinstance(data, dict) else enumerate(data) \
        if isinstance(data, list) else ()
    for key, value in items:
        yield from value_paths(value, path + (key,))


def replaced(data, path, value):
    copy = node = json.loads(json.dumps(data))
    *parents, last = path
    for key in parents:
        node = node[key]
    node[last] = value
    return copy


def test_the_fast_decoders_answer_as_the_checked_decoding_does():
    # from_dict decodes by decoders made once per type (tfmesos runs reads
    # every record); _checked is the decoding that says where a value is
    # wrong. Every value of a full record, replaced by each probe: both
    # refuse it, or both read the same (types included: 1 is not 1.0).
    base = every_field_set().to_dict()
    fast_decode = record_codec._record_decoder(RunFile)
    taken = refused = 0
    for path in list(value_paths(base))[1:]:
        for probe in PROBES:
            data = replaced(base, path, probe)
            try:
                fast = fast_decode(data)
            except record_codec._Mismatch:
                fast = None
            try:
                checked = RunFile._checked(data, "run.json")
            except SchemaError:
                checked = None
            assert (fast is None) == (checked is None), (path, probe)
            if fast is None:
                refused += 1
                continue
            taken += 1
            assert repr(fast.to_dict()) == repr(checked.to_dict()), (path, probe)
            assert fast == RunFile.from_dict(data)
    assert taken > 500 and refused > 2000   # (544 and 2,268 of them)
    # and a refused one's error still says where
    with pytest.raises(SchemaError, match=r"^run\.json\.metrics\[0\]\.values\[1\]: expected "
                                          r"number, got str$"):
        RunFile.from_dict(replaced(base, ("metrics", 0, "values", 1), "x"), "run.json")
