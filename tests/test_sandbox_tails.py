"""A task that fails before it reaches tfrun is explained: tfrun reads the
last lines of its Mesos sandbox through its agent's ``/files`` (at the
offer's ``url``), prints them under the failure with one hint, and keeps
them in run.json. Mostly on agents in network namespaces whose tasks see
none of the submitter's files (``isolate=fs``), as on a cluster."""

import datetime
import json
import os
import subprocess
import sys

import pytest
from fixtures_netns import parse_network, read_lines, root_only
from tfrun_helpers import REPO, marked_tasks, run_tfrun, tfrun_argv

from mesos_local.containerizer import netns
from tfmesos.protocol.hostport import free_port

pytestmark = pytest.mark.timeout(180)

SHIP_HINT = "run with --ship, which sends tfmesos' task side with every task"
NO_TFMESOS = "No module named 'tfmesos'"
TINY = ["-w", "1", "-s", "0", "-Cw", "0.5", "-Mw", "128"]


@pytest.fixture(scope="module")
def isolated(tmp_path_factory):
    """A ``tfmesos local-master --netns`` (this checkout's) with two agents
    whose tasks see neither the project, nor this checkout, nor the home
    directory; a venv without tfmesos. Yields (hub, master address, project,
    venv python)."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    netns.remove_stale()
    base = tmp_path_factory.mktemp("tails")
    project, venv = base / "proj", base / "venv"
    project.mkdir()
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    agent = "cpus=2,mem=1000,gpus=0,isolate=fs"
    hidden = [str(project), REPO, os.path.expanduser("~")]
    argv = [sys.executable, "-m",
            "tfmesos.cli.main", "local-master", "--port", "0", "--netns", "--no-docker",
            "--agent", agent, "--agent", agent,
            *(flag for path in hidden for flag in ("--hide", path)), *marked_tasks()]
    with open(base / "master.log", "w") as log:
        master = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True,
                                  cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
    try:
        hub, address, _, _ = parse_network(read_lines(master.stdout, 3, timeout=60))
        yield hub, address, project, str(venv / "bin" / "python")
    finally:
        master.terminate()
        master.wait(30)
        master.stdout.close()
        left = [name for name in netns.namespace_names()
                if netns.master_pid(name) == master.pid]
        for name in left:
            netns.remove_namespace(name, kill=True)
    assert master.returncode == 0 and not left, left


def tfrun_in_hub(isolated, *args, run_dir):
    """tfrun (this checkout's) in the hub namespace, as a submitter on the
    cluster's network; returns (CompletedProcess, run.json)."""
    hub, address, project, _ = isolated
    argv = ["ip", "netns", "exec", hub] + tfrun_argv("-m", address, "--run-dir", str(run_dir),
                                                     *args)
    env = dict(os.environ, MESOS_MASTER="", PYTHONPATH=REPO)
    try:
        result = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True,
                                timeout=120)
    except subprocess.TimeoutExpired as exc:
        pytest.fail("tfrun did not finish within 120 s: %s" % exc.stderr)
    with open(run_dir / "run.json", encoding="utf-8") as handle:
        return result, json.load(handle)


def seconds(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def shown_tail(stderr):
    """The sandbox lines tfrun printed (``tfrun:   | ...``)."""
    return [line[len("tfrun:   | "):] for line in stderr.splitlines()
            if line.startswith("tfrun:   | ")]


def hint_line(stderr):
    [hint] = [line for line in stderr.splitlines() if line.startswith("tfrun: hint: ")]
    return hint[len("tfrun: hint: "):]


@root_only
def test_without_ship_isolated_agents_say_tfmesos_is_missing_and_tfrun_shows_it(isolated,
                                                                              tmp_path):
    python = isolated[3]
    result, data = tfrun_in_hub(isolated, "--python", python, *TINY, "--", "true",
                                run_dir=tmp_path / "run")
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    at = lines.index("tfrun: worker:0 failed 3 times before the cluster was complete; last: "
                     "TASK_FAILED: Command exited with status 1")
    assert lines[at + 1].startswith("tfrun: hint: tfmesos cannot be imported") and \
        SHIP_HINT in lines[at + 1]
    assert lines[at + 2] == "tfrun: the last lines worker:0 wrote to stderr in its Mesos " \
                            "sandbox (attempt 3):"
    tail = shown_tail(result.stderr)
    assert tail and NO_TFMESOS in tail[-1] and tail[-1].startswith(python)
    # Each relaunch says it too.
    assert sum("it said: %s" % tail[-1] in line for line in lines) == 2
    # run.json keeps each attempt's tail and hint, and the outcome's hint.
    attempts = data["tasks"][0]["attempts"]
    assert [a["sandbox_tail"]["stderr"] for a in attempts] == [tail] * 3
    assert all(SHIP_HINT in a["hint"] for a in attempts)
    assert data["outcome"]["hint"] == hint_line(result.stderr)
    # Promptly: the run ended within seconds of the last attempt's end.
    ended = seconds(attempts[-1]["states"][-1]["time"])
    assert seconds(data["timings"]["finished"]) - ended < 15, data["timings"]


@root_only
def test_the_same_failure_gets_the_same_hint_and_tail_every_time(isolated, tmp_path):
    seen = []
    for number in range(3):
        result, data = tfrun_in_hub(isolated, "--python", isolated[3], "--max-attempts", "1",
                                    *TINY, "--", "true", run_dir=tmp_path / str(number))
        assert result.returncode == 1, result.stderr
        seen.append((hint_line(result.stderr), shown_tail(result.stderr),
                     data["outcome"]["hint"], data["tasks"][0]["attempts"][0]["sandbox_tail"]))
    assert seen[0][1] and NO_TFMESOS in seen[0][1][-1] and SHIP_HINT in seen[0][0]
    assert seen == [seen[0]] * 3


@root_only
def test_python_that_the_agent_lacks(isolated, tmp_path):
    # The agents' PATH has python3 only (the home directory's Pythons are hidden).
    result, data = tfrun_in_hub(isolated, "--python", "python", *TINY, "--", "true",
                                run_dir=tmp_path / "run")
    assert result.returncode == 127, result.stderr
    assert shown_tail(result.stderr)[-1].endswith("python: not found")
    assert hint_line(result.stderr).startswith("'python' does not exist on the agent")
    assert "write python3, or give --python" in data["outcome"]["hint"]


@root_only
def test_a_module_the_agents_python_lacks(isolated, tmp_path):
    # Shipped, tfmesos runs on the agent; the command's import fails there.
    result, data = tfrun_in_hub(isolated, "--ship", "--python", isolated[3], *TINY, "--",
                                "python3 -c 'import numpy'", run_dir=tmp_path / "run")
    assert result.returncode == 1, result.stderr
    hint = hint_line(result.stderr)
    assert hint.startswith("Python module 'numpy' is missing where the task runs") and \
        "--python-env" in hint
    assert data["outcome"]["hint"] == hint


def test_a_refused_fetch_is_explained(tmp_path):
    # Nothing listens where the environment is to be fetched from.
    url = "http://127.0.0.1:%d/env.tar.gz" % free_port("127.0.0.1")
    result = run_tfrun(*TINY, "--max-attempts", "2", "--python-env", url, "--run-dir",
                       str(tmp_path / "run"), "--", "true", timeout=90)
    assert result.returncode == 1, result.stderr
    assert "Failed to fetch '%s'" % url in shown_tail(result.stderr)[-1]
    hint = hint_line(result.stderr)
    assert hint.startswith("the agent could not connect to the URL it fetches") and \
        "--advertise-address" in hint
    with open(tmp_path / "run" / "run.json", encoding="utf-8") as handle:
        [first, second] = json.load(handle)["tasks"][0]["attempts"]
    assert first["sandbox_tail"] == second["sandbox_tail"] and first["hint"] == hint
