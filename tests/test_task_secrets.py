"""Secrets as Mesos value secrets (``tfrun --secret-env``, the run's key):
the variables tfmesos builds, through the strict schema; what the embedded
master makes of them (as Mesos: resolved for the Mesos containerizer, empty
under the Docker containerizer, a NUL byte refused); and the errors of
``--secret-env``, ``cluster(secret_env=...)`` and ``tfmesos.run(...,
secret_env=...)`` before anything starts."""

import base64
import os
import subprocess
import sys

import pytest
from offers import offer
from taskinfo_helpers import PS_AND_WORKERS, SECRET, identity, launch_all, variables
from tfrun_helpers import REPO

import tfmesos
from mesos_local.api.validation import validate_message
from mesos_local.containerizer.planning import TaskInvalid, plan_task
from tfmesos.core import task_secrets
from tfmesos.core.placement import TaskRequest, place
from tfmesos.core.scheduler_document import RUN_KEY
from tfmesos.core.scheduler_task import scheduler_task
from tfmesos.core.spec import RunSpec
from tfmesos.core.taskinfo import build_task_info
from tfmesos.exceptions import SpecError

TOKEN = "t0ken-\u00e9 with spaces"


def secret_of(info, name):
    [found] = [v for v in info["command"]["environment"]["variables"] if v["name"] == name]
    return found


def data(value):
    return base64.b64encode(value.encode()).decode()


def test_the_tasks_get_the_runs_key_and_the_secrets_as_value_secrets():
    run = RunSpec(name="tfrun", env=("PLAIN=1",), secret_env=("TOKEN",))
    _, infos, _ = launch_all(PS_AND_WORKERS, run, [offer("o1")], secrets={"TOKEN": TOKEN})
    for info in infos.values():   # every ACCEPT passed the strict schema
        assert secret_of(info, "TOKEN") == {
            "name": "TOKEN", "type": "SECRET",
            "secret": {"type": "VALUE", "value": {"data": data(TOKEN)}}}
        key = secret_of(info, "TFMESOS_SECRET")
        assert key["type"] == "SECRET" and "value" not in key
        assert secret_of(info, "PLAIN") == {"name": "PLAIN", "value": "1"}
        # What an agent resolves them to.
        env = plan_task(info).env
        assert env["TOKEN"] == TOKEN and bytes.fromhex(env["TFMESOS_SECRET"]) == SECRET
        assert variables(info)["TOKEN"] == TOKEN


def test_a_secret_wins_over_a_plain_variable_of_the_same_name():
    info = build_task_info("t-1", "n", "a", [], "exec true", {"A": "plain", "B": "b"},
                           secrets={"A": "hidden"})
    assert [v["name"] for v in info["command"]["environment"]["variables"]] == ["A", "B"]
    assert secret_of(info, "A")["type"] == "SECRET"
    validate_message("TaskInfo", info)


def test_under_the_docker_containerizer_the_key_stays_a_plain_variable():
    # Docker's containerizer passes no secrets (docs/secrets.md): the key must be plain.
    run = RunSpec(name="tfrun", image="img", containerizer="DOCKER")
    _, infos, _ = launch_all(PS_AND_WORKERS, run, [offer("o1")])
    for info in infos.values():
        assert secret_of(info, "TFMESOS_SECRET") == {"name": "TFMESOS_SECRET",
                                                     "value": SECRET.hex()}


def scheduler_info(spec, secrets):
    who = identity(framework_id="F-1", principal="alice")
    [assignment] = [a for launches in place([TaskRequest("scheduler", 0.5, 256, 0, port=False)],
                                            [offer("o1")]).launches.values() for a in launches]
    return scheduler_task(spec, who, assignment, [{"value": "http://h/x"}], "exec true",
                          secrets)


def test_the_scheduler_task_gets_its_key_credentials_and_secrets_as_value_secrets():
    spec = RunSpec(master="h:5050", env=("PLAIN=1",), secret_env=("TOKEN",))
    info = scheduler_info(spec, {"TOKEN": TOKEN, "MESOS_PRINCIPAL": "alice",
                                 "MESOS_SECRET": "pw"})
    validate_message("TaskInfo", info)
    kinds = {v["name"]: v.get("type", "VALUE") for v in info["command"]["environment"]["variables"]}
    assert {name for name, kind in kinds.items() if kind == "SECRET"} == {
        RUN_KEY, "TOKEN", "MESOS_PRINCIPAL", "MESOS_SECRET"}
    env = plan_task(info).env
    assert env["MESOS_SECRET"] == "pw" and bytes.fromhex(env[RUN_KEY]) == SECRET
    assert env["PLAIN"] == "1" and env["TFMESOS_FRAMEWORK_ID"] == "F-1"


def test_a_docker_scheduler_task_gets_its_key_as_a_plain_variable():
    info = scheduler_info(RunSpec(master="h:5050", image="img", containerizer="DOCKER"), {})
    assert secret_of(info, RUN_KEY) == {"name": RUN_KEY, "value": SECRET.hex()}


# -- the embedded master, as Mesos -------------------------------------------------------

def task(variable, container=None):
    info = {"name": "t", "task_id": {"value": "t-1"}, "agent_id": {"value": "a"},
            "resources": [], "command": {"value": "true",
                                         "environment": {"variables": [variable]}}}
    if container is not None:
        info["container"] = container
    validate_message("TaskInfo", info)
    return info


DOCKER = {"type": "DOCKER", "docker": {"image": "img"}}
MESOS_IMAGE = {"type": "MESOS", "mesos": {"image": {"type": "DOCKER",
                                                    "docker": {"name": "img"}}}}


def test_the_mesos_containerizer_resolves_a_value_secret():
    for container in (None, MESOS_IMAGE):
        plan = plan_task(task(task_secrets.variable("TOKEN", TOKEN), container))
        assert plan.env["TOKEN"] == TOKEN


def test_the_docker_containerizer_gives_a_secret_variable_empty():
    # src/docker/docker.cpp copies variable.value(): a SECRET variable has none.
    plan = plan_task(task(task_secrets.variable("TOKEN", TOKEN), DOCKER))
    assert plan.env["TOKEN"] == ""


@pytest.mark.parametrize("variable, message", [
    (task_secrets.variable("TOKEN", "a\0b"),
     "Environment variable 'TOKEN' specifies a secret containing null bytes, which is not "
     "allowed in the environment"),
    ({"name": "TOKEN", "type": "SECRET"},
     "Environment variable 'TOKEN' of type 'SECRET' must have a secret set"),
    (dict(task_secrets.variable("TOKEN", "x"), value="x"),
     "Environment variable 'TOKEN' of type 'SECRET' must not have a value set"),
    ({"name": "TOKEN", "type": "SECRET", "secret": {"type": "VALUE"}},
     "Environment variable 'TOKEN' specifies an invalid secret: Secret of type VALUE must "
     "have the 'value' field set"),
    ({"name": "TOKEN", "value": "x", "secret": {"type": "VALUE", "value": {"data": ""}}},
     "Environment variable 'TOKEN' of type 'VALUE' must not have a secret set"),
    ({"name": "TOKEN", "type": "UNKNOWN", "value": "x"},
     "Environment variable of type 'UNKNOWN' is not allowed"),
])
def test_the_embedded_master_refuses_what_mesos_validation_refuses(variable, message):
    # validateEnvironment, src/common/validation.cpp.
    with pytest.raises(TaskInvalid) as raised:
        plan_task(task(variable))
    assert str(raised.value) == message


def test_a_nul_byte_in_a_secret_is_refused_before_anything_starts():
    with pytest.raises(SpecError, match="TOKEN holds a NUL byte"):
        task_secrets.values(RunSpec(secret_env=("TOKEN",)), {"TOKEN": "a\0b"})


# -- the errors, before anything starts ---------------------------------------------------

def tfrun(*args, env=None):
    return subprocess.run([sys.executable, "-m", "tfmesos.cli.tfrun", *args], cwd=REPO,
                          env=dict(os.environ, MESOS_MASTER="", **(env or {})),
                          capture_output=True, text=True, timeout=60)


def test_tfrun_secret_env_names_a_variable_that_is_not_set_in_one_line():
    result = tfrun("--secret-env", "UNSET_TOKEN_OF_THIS_TEST", "-w", "1", "-s", "0", "--",
                   "true")
    assert result.returncode == 2
    [line] = [line for line in result.stderr.splitlines() if "error" in line]
    assert "UNSET_TOKEN_OF_THIS_TEST" in line and "not set" in line, result.stderr
    assert line.startswith("tfrun: error: --secret-env: "), line   # tfrun's words: its flag


def test_tfrun_secret_env_under_the_docker_containerizer_names_the_fix():
    result = tfrun("--secret-env", "TOKEN", "-C", "DOCKER", "-I", "img", "-m", "h:5050",
                   "-w", "1", "-s", "0", "--", "true", env={"TOKEN": "x"})
    assert result.returncode == 2
    assert "-C MESOS" in result.stderr and "secret" in result.stderr, result.stderr


def test_cluster_and_run_name_a_secret_that_is_not_set(monkeypatch):
    monkeypatch.delenv("TOKEN_NOT_SET", raising=False)
    with pytest.raises(SpecError, match="^secret_env: TOKEN_NOT_SET is not set"):
        with tfmesos.cluster([{"name": "worker", "num": 1}], master="h:5050",
                             secret_env=["TOKEN_NOT_SET"]):
            pass
    with pytest.raises(SpecError, match="^secret_env: TOKEN_NOT_SET is not set"):
        tfmesos.run(print, workers=1, ship=None, master="h:5050", python="python3",
                    secret_env=["TOKEN_NOT_SET"])
