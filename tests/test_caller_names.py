"""``cluster()`` and ``tfmesos.run()`` runs are named after the script that
made them (``train.py``; ``python -c``; ``notebook``), and say what it
called (``tfmesos.run(train_fn)``, ``tfmesos.cluster(worker:2,ps:1)``) as
their command: in run.json, ``tfmesos runs`` and the master's labels. An
explicit ``name=`` wins. (No processes: the specs and records built by hand;
test_run_function checks a real ``tfmesos.run()`` and a notebook's.)"""

import functools
import io
import json
import os
import types

import pytest

from tfmesos.cli.runs import runs_main
from tfmesos.core import caller, cluster_arguments, function_run
from tfmesos.core.cluster_arguments import run_spec_of
from tfmesos.core.run_setup import make_record
from tfmesos.core.slots import make_slots
from tfmesos.core.taskinfo import run_labels
from tfmesos.protocol import labels


def module(name="__main__", file=None, spec=None):
    made = types.ModuleType(name)
    if file is not None:
        made.__file__ = file
    made.__spec__ = None if spec is None else types.SimpleNamespace(name=spec)
    return made


@pytest.mark.parametrize("modules, argv, name", [
    ({"__main__": module(file="/home/me/project/train.py")}, ["/home/me/project/train.py"],
     "train.py"),
    ({"__main__": module(file="train.py")}, ["train.py", "--epochs", "3"], "train.py"),
    ({"__main__": module(file="/x/pkg/trainer.py", spec="pkg.trainer")}, ["/x/pkg/trainer.py"],
     "pkg.trainer"),                                       # python -m pkg.trainer
    ({"__main__": module(file="/x/pkg/__main__.py", spec="pkg.__main__")}, ["/x/pkg"],
     "pkg"),                                               # python -m pkg
    ({"__main__": module()}, ["-c"], "python -c"),
    ({"__main__": module()}, ["-"], "python -"),          # the script on stdin
    ({"__main__": module()}, [""], "python"),             # the interactive prompt
    ({"__main__": module(), "ipykernel": module("ipykernel")},
     ["/usr/lib/python3/dist-packages/ipykernel_launcher.py", "-f", "kernel.json"],
     "notebook"),
    ({"__main__": module(file="/x/train\n.py")}, ["train"], "train .py"),
])
def test_the_script_names_the_run(modules, argv, name):
    assert caller.script_name(modules, argv) == name


def train_fn():
    return 1


class Trainer:
    def fit(self):
        return 2

    def __call__(self):
        return 3


def test_the_callable_is_named_by_its_qualified_name():
    def step():
        return 4
    assert caller.run_command(train_fn) == "tfmesos.run(train_fn)"
    assert caller.run_command(Trainer.fit) == "tfmesos.run(Trainer.fit)"
    assert caller.run_command(Trainer().fit) == "tfmesos.run(Trainer.fit)"
    assert caller.run_command(Trainer()) == "tfmesos.run(Trainer)"
    assert caller.run_command(functools.partial(train_fn)) == "tfmesos.run(train_fn)"
    assert caller.run_command(step) == ("tfmesos.run(test_the_callable_is_named_by_its_"
                                        "qualified_name.<locals>.step)")
    assert caller.run_command(lambda: 5).startswith("tfmesos.run(")


def recorded(spec, tmp_path, run_id="c0ffee01"):
    """run.json as the run of ``spec`` begins it."""
    record = make_record(spec, types.SimpleNamespace(run_id=run_id), make_slots(spec.jobs),
                         {"TFMESOS_RUNS_DIR": str(tmp_path / "runs")})
    record.save()
    with open(os.path.join(record.directory, "run.json"), encoding="utf-8") as handle:
        return record.directory, json.load(handle)


def test_a_cluster_run_is_named_after_its_script_and_says_its_jobs(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster_arguments, "script_name", lambda: "train.py")
    spec = run_spec_of([{"name": "ps", "num": 1}, {"name": "worker", "num": 2}],
                       master="local", environ={})
    assert (spec.name, spec.recorded_command) == ("train.py",
                                                  "tfmesos.cluster(ps:1,worker:2)")
    directory, data = recorded(spec, tmp_path)
    assert os.path.basename(directory) == "train.py-c0ffee01"
    assert (data["name"], data["mode"], data["command"]) == (
        "train.py", "fine", "tfmesos.cluster(ps:1,worker:2)")
    found = {label["key"]: label["value"] for label in run_labels(spec, spec.jobs, "c0ffee01")}
    assert found[labels.COMMAND] == "tfmesos.cluster(ps:1,worker:2)"
    out = io.StringIO()
    assert runs_main([], environ={"TFMESOS_RUNS_DIR": str(tmp_path / "runs")}, out=out) == 0
    assert out.getvalue().splitlines()[1].split()[:3] == ["c0ffee01", "train.py", "fine"]
    assert out.getvalue().rstrip().endswith("tfmesos.cluster(ps:1,worker:2)")
    # An explicit name wins.
    assert run_spec_of([{"name": "worker"}], master="local", name="mine", environ={}).name \
        == "mine"


def test_a_function_run_is_named_after_its_script_and_says_its_function(tmp_path,
                                                                      monkeypatch):
    from tfmesos.core.function_options import OPTIONS
    from tfmesos.core.jobs import Job
    from tfmesos.ship.bundle import ShipSpec
    monkeypatch.setattr(function_run, "script_name", lambda: "python -c")
    (tmp_path / "function.pkl").write_bytes(b"payload")
    payload = types.SimpleNamespace(name="function.pkl", sha256="0" * 64,
                                    path=str(tmp_path / "function.pkl"))
    settings = dict(OPTIONS, master="local")
    spec = function_run.run_spec(train_fn, [Job("worker", 1)], settings, ShipSpec(None), payload,
                             1024)
    assert spec.name == "python -c"
    assert spec.command.endswith("-m tfmesos.task.function_runner")   # what the tasks run
    _, data = recorded(spec, tmp_path)
    assert (data["name"], data["mode"], data["command"]) == (
        "python -c", "replica", "tfmesos.run(train_fn)")
    spec = function_run.run_spec(train_fn, [Job("worker", 1)], dict(settings, name="nightly"),
                             ShipSpec(None), payload, 1024)
    assert spec.name == "nightly" and spec.recorded_command == "tfmesos.run(train_fn)"


def test_a_tfrun_run_still_records_its_command_template():
    from tfmesos.core.jobs import Job
    from tfmesos.core.spec import RunSpec
    spec = RunSpec(name="train.py", mode="replica", command="python train.py {job_name}",
                   jobs=(Job("worker", 1),))
    assert spec.recorded_command == "python train.py {job_name}"
    assert RunSpec(jobs=(Job("worker", 1),)).recorded_command is None   # fine mode, by hand
