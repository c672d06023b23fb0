"""Warm task starts (``backends/warm_runner.py``, ``task/warm.py``): the
embedded master of a run forks its replica tasks from an interpreter that
imported the task entry already; what the task sees is what the exec'd
command gives it, and the warm interpreter's faults end nothing silently."""

import os
import signal
import subprocess
import sys

import pytest

from mesos_local.containerizer.runner import TaskLaunch
from tfmesos.backends.warm_runner import WarmSpec, matches, python_variables
from tfmesos.core.taskinfo import warm_task_command
from tfrun_helpers import (assert_no_task_processes, run_tfrun, start_tfrun, tfrun_argv,
                           wait_for_line)
from waiting import wait_until

COMMAND = "exec %s -S -m tfmesos.task" % sys.executable
ENV = {"PYTHONPATH": "/somewhere", "PYTHONUNBUFFERED": "1", "PATH": "/bin"}

# What the command sees: the pids and command lines of its task entry (the
# guard's parent) and of the entry's parent, the entry's cwd and cgroups.
PROBE = ("e=$(awk '/^PPid/{{print $2}}' /proc/$PPID/status); "
         "p=$(awk '/^PPid/{{print $2}}' /proc/$e/status); "
         "echo parent: $(tr '\\0' ' ' < /proc/$p/cmdline); "
         "echo entry-cwd: $(readlink /proc/$e/cwd); "
         "echo entry-cgroup: $(grep -c mesos_local /proc/$e/cgroup); "
         "echo entry-cmdline: $(tr '\\0' ' ' < /proc/$e/cmdline); "
         "echo entry-environ: $(tr '\\0' '\\n' < /proc/$e/environ | cut -d= -f1 | grep . | sort "
         "| tr '\\n' ' '); "
         "echo env: $(env | cut -d= -f1 | grep -v '^_$\\|^PWD$\\|^SHLVL$' | sort | tr '\\n' ' ')")


def launch(**fields):
    values = dict(task_id="t", framework_id="f", agent_id="a", sandbox="/tmp/sb",
                  command=COMMAND, env=dict(ENV))
    values.update(fields)
    return TaskLaunch(**values)


def spec():
    return WarmSpec(COMMAND, ENV)


def test_a_launch_of_the_run_s_own_command_and_python_variables_is_forked_warm():
    assert matches(spec(), launch())
    # Variables other than PYTHON* are the task's own: they do not matter.
    assert matches(spec(), launch(env=dict(ENV, TFMESOS_TASK_ID="x", HOME="/root")))


def test_anything_else_is_started_the_ordinary_way():
    assert not matches(spec(), launch(command="exec python3 -m tfmesos.task"))
    assert not matches(spec(), launch(env=dict(ENV, PYTHONPATH="/elsewhere")))
    assert not matches(spec(), launch(env=dict(ENV, PYTHONHASHSEED="0")))
    assert not matches(spec(), launch(env={k: v for k, v in ENV.items()
                                           if k != "PYTHONUNBUFFERED"}))
    assert not matches(spec(), launch(image="busybox", containerizer="MESOS"))
    assert not matches(spec(), launch(netns="tfmesos-agent-0"))
    assert not matches(spec(), launch(hidden_paths=["/work"]))
    assert not matches(spec(), launch(shell=False, command=sys.executable,
                                      arguments=["-S", "-m", "tfmesos.task"]))


def test_the_warm_interpreter_starts_as_the_command_starts_python():
    assert spec().flags == ["-S"]
    assert WarmSpec("exec %s -m tfmesos.task" % sys.executable, ENV).flags == []


def test_only_the_python_variables_are_compared():
    assert python_variables({"PYTHONPATH": "a", "HOME": "/", "PYTHONUNBUFFERED": "1"}) == (
        ("PYTHONPATH", "a"), ("PYTHONUNBUFFERED", "1"))


class _Run:
    master = "local"
    mode = "replica"
    image = None
    ship = None
    env = {}
    python = None


def test_only_plain_replica_runs_on_the_embedded_master_start_warm(monkeypatch):
    monkeypatch.delenv("TFMESOS_WARM_TASKS", raising=False)
    command, env = warm_task_command(_Run())
    assert command in ("exec %s -S -m tfmesos.task" % sys.executable,
                       "exec %s -m tfmesos.task" % sys.executable)
    assert env["PYTHONUNBUFFERED"] == "1"
    for field, value in (("master", "mesos:5050"), ("mode", "fine"), ("image", "img"),
                         ("ship", object()), ("python", "/opt/wrapper/python")):
        run = _Run()
        setattr(run, field, value)
        assert warm_task_command(run) is None, field
    monkeypatch.setenv("TFMESOS_WARM_TASKS", "0")
    assert warm_task_command(_Run()) is None


def probe(env=None):
    result = run_tfrun("-w", "1", "-s", "0", "-Cw", "0.2", "-Mw", "128", "--", PROBE,
                       env=env)
    assert result.returncode == 0, result.stderr
    seen = {}
    for line in result.stdout.splitlines():
        key, _, value = line.partition("] ")[2].partition(": ")
        seen[key] = value
    return seen


def test_a_warm_task_is_what_the_exec_d_command_would_have_been():
    warm = probe()
    cold = probe({"TFMESOS_WARM_TASKS": "0"})
    assert "tfmesos.task.warm" in warm["parent"]
    assert "tfmesos.task.warm" not in cold["parent"]
    # The same working directory (the sandbox), cgroups and environment.
    for seen in (warm, cold):
        assert "/frameworks/" in seen["entry-cwd"] and "/tasks/" in seen["entry-cwd"]
    assert warm["entry-cgroup"] == cold["entry-cgroup"]
    # ps and /proc show the task entry as the exec'd command with the task's environment.
    assert warm["entry-cmdline"] == cold["entry-cmdline"] == "%s -S -m tfmesos.task" % (
        sys.executable)
    assert warm["entry-environ"].split() == [
        n for n in cold["entry-environ"].split() if n != "TFMESOS_WARM_TASKS"]
    assert "MESOS_SANDBOX" in warm["entry-environ"].split()
    # (the cold run's tfrun was given TFMESOS_WARM_TASKS=0, which its tasks inherit)
    assert warm["env"].split() == [n for n in cold["env"].split() if n != "TFMESOS_WARM_TASKS"]
    assert "TFMESOS_TASK_ID" in warm["env"].split()
    assert_no_task_processes()


def test_tasks_that_need_site_are_forked_warm_too(tmp_path):
    # Where only an installed package (or an editable install's finder, which
    # ``site`` sets up) finds tfmesos, tasks run ``python -m tfmesos.task``.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([sys.executable, "-c", "import tfmesos"], cwd=str(tmp_path),
                           env=env, capture_output=True)
    if found.returncode:
        pytest.skip("tfmesos is importable here only from the checkout")
    result = subprocess.run(
        tfrun_argv("-w", "1", "-s", "0", "-Cw", "0.2", "-Mw", "128", "--", PROBE),
        cwd=str(tmp_path), env=dict(env, MESOS_MASTER=""), capture_output=True, text=True,
        timeout=120)
    assert result.returncode == 0, result.stderr
    assert "parent: %s -m tfmesos.task.warm" % sys.executable in result.stdout
    assert "entry-cmdline: %s -m tfmesos.task\n" % sys.executable in result.stdout
    assert_no_task_processes()


def warm_interpreters_of(pid):
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/status" % name) as handle:
                ppid = [line.split()[1] for line in handle if line.startswith("PPid:")][0]
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                cmdline = handle.read()
        except (OSError, IndexError):
            continue
        if int(ppid) == pid and b"tfmesos.task.warm" in cmdline:
            found.append(int(name))
    return found


def test_a_run_killed_takes_its_warm_interpreter_along():
    with start_tfrun("-w", "1", "-s", "0", "-Cw", "0.2", "-Mw", "128", "--",
                     "sleep 60") as proc:
        wait_until(lambda: warm_interpreters_of(proc.pid), 60,
                   message="no warm task interpreter started")
        warm = warm_interpreters_of(proc.pid)[0]
        wait_for_line(proc.stderr, "cluster ready", 60)
        proc.kill()
        proc.wait(30)
        wait_until(lambda: not os.path.exists("/proc/%d" % warm)
                   or _state(warm) == "Z", 30, message="the warm interpreter outlived tfrun")
    assert_no_task_processes()


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_a_dead_warm_interpreter_fails_the_run_and_leaves_nothing():
    # The command kills the warm interpreter (its task entry's parent): the
    # agent cannot learn the task's exit status any more, so it kills the
    # task and reports it killed; the run fails, naming it.
    kill_warm = ("e=$(awk '/^PPid/{{print $2}}' /proc/$PPID/status); "
                 "p=$(awk '/^PPid/{{print $2}}' /proc/$e/status); kill -9 $p; sleep 60")
    result = subprocess.run(
        tfrun_argv("-w", "1", "-s", "0", "-Cw", "0.2", "-Mw", "128", "--", kill_warm),
        env=dict(os.environ, MESOS_MASTER=""), capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "worker:0" in result.stderr
    assert "signal" in result.stderr.lower() or "killed" in result.stderr.lower(), result.stderr
    assert_no_task_processes()


def test_an_interrupted_run_leaves_no_warm_task_behind():
    # The master stops a task by signalling its group: a warm task leads its
    # own session and group as the exec'd one does.
    with start_tfrun("-w", "1", "-s", "0", "-Cw", "0.2", "-Mw", "128", "--",
                     "sleep 60") as proc:
        wait_for_line(proc.stderr, "cluster ready", 60)
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    assert_no_task_processes()


def test_a_warm_interpreter_that_cannot_start_leaves_tasks_to_the_ordinary_way(
        tmp_path, caplog):
    from tfmesos.backends.warm_runner import WarmProcessRunner, _WarmTask

    command = "exec /bin/false -S -m tfmesos.task"
    runner = WarmProcessRunner(WarmSpec(command, ENV))
    try:
        wait_until(lambda: not runner.warm.alive, 30, message="the warm interpreter lives")
        assert "the warm task interpreter ended (exit code 1); tasks start the ordinary way" \
            in caplog.text
        task = runner.launch(launch(command=command, sandbox=str(tmp_path)))
        assert not isinstance(task, _WarmTask)
        assert task.wait(30) == 1
    finally:
        runner.close()
