"""Warm task starts (``backends/warm_runner.py``, ``task/warm.py``): the
embedded master of a run hands its replica tasks to task interpreters
started ahead of them, each of which becomes one task; what the task sees
is what the exec'd command gives it (its own hash seed, the encodings its
environment decides), /proc shows the pre-started process as it is, and
the faults of a pre-started interpreter end nothing silently."""

import getpass
import json
import os
import signal
import subprocess
import sys
import threading

import pytest
from conftest import MARKER
from processes import WARM_ENTRY, is_task_entry
from tfrun_helpers import REPO, assert_no_task_processes, run_tfrun, start_tfrun, tfrun_argv, wait_for_line
from waiting import wait_until

from mesos_local.containerizer.runner import ProcessRunner, RunnerError, TaskLaunch
from mesos_local.containerizer.users import TaskUser
from tfmesos.backends import warm_runner
from tfmesos.backends.warm_runner import WarmProcessRunner, WarmSpec, interpreter_variables, matches
from tfmesos.core.taskinfo import warm_task_command

COMMAND = "exec %s -S -m tfmesos.task" % sys.executable
ENV = {"PYTHONPATH": "/somewhere", "PYTHONUNBUFFERED": "1", "PATH": "/bin"}
TESTS = os.path.dirname(os.path.abspath(__file__))
PYTHON39 = "/root/.pyenv/versions/3.9.18/bin/python3"
PYTHONS = [sys.executable] + [PYTHON39] * (os.path.exists(PYTHON39)
                                           and sys.version_info[:2] != (3, 9))

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


def test_a_launch_of_the_run_s_own_command_and_interpreter_variables_is_started_warm():
    assert matches(spec(), launch())
    # Variables the interpreter does not read at its start are the task's own.
    assert matches(spec(), launch(env=dict(ENV, TFMESOS_TASK_ID="x", TZ="UTC", TMPDIR="/t")))


def test_anything_else_is_started_the_ordinary_way():
    assert not matches(spec(), launch(command="exec python3 -m tfmesos.task"))
    assert not matches(spec(), launch(env=dict(ENV, PYTHONPATH="/elsewhere")))
    assert not matches(spec(), launch(env=dict(ENV, PYTHONHASHSEED="0")))
    assert not matches(spec(), launch(env={k: v for k, v in ENV.items()
                                           if k != "PYTHONUNBUFFERED"}))
    # What decides the locale, the encodings, the dynamic linker and malloc.
    for name, value in (("LANG", "C"), ("LC_ALL", "C"), ("LC_CTYPE", "C.UTF-8"),
                        ("LANGUAGE", "de"), ("LD_PRELOAD", "/x.so"),
                        ("LD_LIBRARY_PATH", "/opt/lib"), ("GLIBC_TUNABLES", "glibc.malloc.x=1"),
                        ("MALLOC_ARENA_MAX", "2"), ("HOME", "/elsewhere")):
        assert not matches(spec(), launch(env=dict(ENV, **{name: value}))), name
    assert not matches(spec(), launch(image="busybox", containerizer="MESOS"))
    assert not matches(spec(), launch(netns="tfmesos-agent-0"))
    assert not matches(spec(), launch(hidden_paths=["/work"]))
    assert not matches(spec(), launch(shell=False, command=sys.executable,
                                      arguments=["-S", "-m", "tfmesos.task"]))
    # A task of another user than this process's: exec'd as that user.
    assert not matches(spec(), launch(run_as=TaskUser("nobody", 65534, 65534, (65534,))))


def test_the_warm_interpreter_starts_as_the_command_starts_python():
    assert spec().flags == ["-S"]
    assert WarmSpec("exec %s -m tfmesos.task" % sys.executable, ENV).flags == []


def test_only_the_variables_an_interpreter_reads_as_it_starts_are_compared():
    assert interpreter_variables({
        "PYTHONPATH": "a", "HOME": "/", "PYTHONUNBUFFERED": "1", "LANG": "C", "LC_ALL": "C",
        "LD_PRELOAD": "x", "MALLOC_ARENA_MAX": "2", "TFMESOS_TASK_ID": "t", "PATH": "/bin",
        "TZ": "UTC"}) == (("HOME", "/"), ("LANG", "C"), ("LC_ALL", "C"), ("LD_PRELOAD", "x"),
                          ("MALLOC_ARENA_MAX", "2"), ("PYTHONPATH", "a"),
                          ("PYTHONUNBUFFERED", "1"))


def test_the_pool_holds_one_interpreter_per_expected_task_up_to_a_cap():
    assert WarmSpec(COMMAND, ENV, tasks=3).size == 3
    assert WarmSpec(COMMAND, ENV, tasks=200).size == warm_runner.POOL_CAP
    assert WarmSpec(COMMAND, ENV).size == 1


class _Job:
    def __init__(self, num):
        self.num = num


class _Run:
    master = "local"
    mode = "replica"
    image = None
    ship = None
    env = {}
    python = None
    user = None
    jobs = (_Job(2), _Job(1))
    local_master_options = {}


def test_only_plain_replica_runs_on_the_embedded_master_start_warm(monkeypatch):
    monkeypatch.delenv("TFMESOS_WARM_TASKS", raising=False)
    command, env, tasks = warm_task_command(_Run())
    first = 'PATH=%s"${PATH:+:$PATH}" ' % os.path.dirname(sys.executable)
    assert command in (first + "exec %s -S -m tfmesos.task" % sys.executable,
                       first + "exec %s -m tfmesos.task" % sys.executable)
    assert WarmSpec(command, env).path_first == os.path.dirname(sys.executable)
    assert env["PYTHONUNBUFFERED"] == "1"
    assert tasks == 3
    other = "nobody" if getpass.getuser() != "nobody" else "root"
    for field, value in (("master", "mesos:5050"), ("mode", "fine"), ("image", "img"),
                         ("ship", object()), ("python", "/opt/wrapper/python"),
                         ("user", other)):
        run = _Run()
        setattr(run, field, value)
        assert warm_task_command(run) is None, field
    mine = _Run()
    mine.user = getpass.getuser()       # -u naming the submitter: started warm still
    assert warm_task_command(mine) is not None
    monkeypatch.setenv("TFMESOS_WARM_TASKS", "0")
    assert warm_task_command(_Run()) is None


def test_the_tasks_environment_is_predicted_from_the_master_s_executor_environment(
        monkeypatch):
    monkeypatch.delenv("TFMESOS_WARM_TASKS", raising=False)
    run = _Run()
    run.local_master_options = {"executor_environment": {"LANG": "C", "PATH": "/bin"}}
    run.env = (("LC_ALL", "C"),)
    _, env, _ = warm_task_command(run)
    assert env["LANG"] == "C" and env["LC_ALL"] == "C"
    assert MARKER not in env      # this process's own environment is not the tasks'


# -- what a task started warm gets, against the same task exec'd ------------

def probe_command(python):
    return "exec %s -S -m warm_probe" % python


def probe_env(**extra):
    """A task's environment for ``tests/warm_probe.py``."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join([REPO, TESTS]),
           "PYTHONUNBUFFERED": "1", MARKER: os.environ[MARKER], "LANG": "C.UTF-8",
           "HOME": os.environ.get("HOME", "/root"), "TFMESOS_TASK_ID": "probe"}
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def probe_launch(tmp_path, name, python, env):
    sandbox = tmp_path / name
    sandbox.mkdir()
    for output in ("stdout", "stderr"):
        (sandbox / output).touch()
    return launch(task_id=name, sandbox=str(sandbox), command=probe_command(python),
                  env=dict(env, MESOS_SANDBOX=str(sandbox)))


def read_probe(task, launched):
    status = task.wait(60)
    with open(launched.stdout_path) as out, open(launched.stderr_path) as err:
        text, errors = out.read(), err.read()
    assert status == 0, (status, text, errors)
    return json.loads(text)


@pytest.fixture
def warm_probes(monkeypatch, tmp_path):
    """``probe(python, spec_env, task_envs)``: the probes' reports, each
    task started by a WarmProcessRunner whose interpreters were started for
    ``spec_env`` and which run ``warm_probe`` instead of the task entry."""
    monkeypatch.setattr(warm_runner, "ENTRY_MODULE", "warm_probe")
    runners = []

    def probe(python, spec_env, task_envs):
        runner = WarmProcessRunner(WarmSpec(probe_command(python), spec_env,
                                            tasks=len(task_envs)))
        runners.append(runner)
        launches = [probe_launch(tmp_path, "warm%d-%d" % (len(runners), i), python, env)
                    for i, env in enumerate(task_envs)]
        tasks = [runner.launch(one) for one in launches]
        return [read_probe(task, one) for task, one in zip(tasks, launches)]

    yield probe
    for runner in runners:
        runner.close()


def exec_probe(tmp_path, python, env, name="exec"):
    launched = probe_launch(tmp_path, name, python, env)
    return read_probe(ProcessRunner().launch(launched), launched)


def was_warm(report):
    return report["proc_cmdline"][-3:-1] == ["-m", "warm_probe"]


@pytest.mark.parametrize("python", PYTHONS)
def test_warm_tasks_of_one_run_have_hash_seeds_of_their_own(warm_probes, python):
    first, second = warm_probes(python, probe_env(), [probe_env(), probe_env()])
    assert was_warm(first) and was_warm(second)
    assert first["hash"] != second["hash"]


@pytest.mark.parametrize("python", PYTHONS)
def test_a_hash_seed_the_task_s_environment_sets_is_the_one_it_gets(warm_probes, python,
                                                                      tmp_path):
    env = probe_env(PYTHONHASHSEED="123")
    reports = warm_probes(python, env, [env, env])
    assert all(was_warm(report) for report in reports)
    assert [r["hash"] for r in reports] == [exec_probe(tmp_path, python, env)["hash"]] * 2


ENCODING_KEYS = ("stdout", "stderr", "filesystem", "preferred", "utf8_mode", "LC_CTYPE")
LOCALES = [dict(LANG="C"), dict(LANG=None, LC_ALL="C", PYTHONUTF8="0"),
           dict(LANG=None, LC_ALL="POSIX", PYTHONCOERCECLOCALE="0"),
           dict(PYTHONIOENCODING="latin-1"), dict(LANG="C.UTF-8", LC_ALL="C")]


@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("variables", LOCALES, ids=lambda v: ",".join(
    "%s=%s" % item for item in sorted(v.items())))
def test_a_warm_task_gets_the_encodings_its_environment_gives_an_exec_d_one(
        warm_probes, tmp_path, python, variables):
    env = probe_env(**variables)
    exec_d = exec_probe(tmp_path, python, env)
    # Interpreters started for the tasks' environment: the task starts warm.
    [warm] = warm_probes(python, env, [env])
    assert was_warm(warm)
    assert {k: warm[k] for k in ENCODING_KEYS} == {k: exec_d[k] for k in ENCODING_KEYS}
    assert warm["environ"] == exec_d["environ"]     # LC_CTYPE as PEP 538 coerced it
    # Interpreters started for another environment: the task is exec'd.
    [other] = warm_probes(python, probe_env(), [env])
    assert not was_warm(other)
    assert {k: other[k] for k in ENCODING_KEYS} == {k: exec_d[k] for k in ENCODING_KEYS}


@pytest.mark.parametrize("python", PYTHONS)
def test_a_warm_task_is_set_up_as_the_exec_d_one_and_proc_shows_it_as_it_is(
        warm_probes, tmp_path, python):
    env = probe_env()
    exec_d = exec_probe(tmp_path, python, env)
    [warm] = warm_probes(python, env, [env])
    for key in ("environ", "fds", "version"):
        assert warm[key] == exec_d[key], key
    assert warm["cwd"] == warm["path0"] == warm["sandbox"]
    assert warm["pid"] == warm["pgid"] == warm["sid"]        # its own session
    assert warm["ppid"] == exec_d["ppid"] == os.getpid()     # the agent's child
    assert warm["argv"] == [os.path.join(REPO, "tfmesos", "task", "__main__.py")]
    # /proc is not rewritten: the interpreter's own command line and
    # environment, started before the task was known.
    assert warm["proc_cmdline"][:4] == [python, "-S", "-m", "warm_probe"]
    assert "TFMESOS_TASK_ID" in warm["environ"] and "MESOS_SANDBOX" in warm["environ"]
    assert "TFMESOS_TASK_ID" not in warm["proc_environ"]
    assert "MESOS_SANDBOX" not in warm["proc_environ"]
    assert "MESOS_SANDBOX" in exec_d["proc_environ"]


# -- end to end: tfrun ------------------------------------------------------

def probe(env=None, python=None, extra_path=None):
    argv = tfrun_argv("-w", "1", "-s", "0", "-Cw", "0.2", "-Mw", "128", "--", PROBE)
    if python is not None:
        argv[0] = python
    full_env = dict(os.environ, MESOS_MASTER="", **(env or {}))
    if extra_path:
        full_env["PYTHONPATH"] = os.pathsep.join([REPO, extra_path])
    result = subprocess.run(argv, cwd=REPO, env=full_env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    seen = {}
    for line in result.stdout.splitlines():
        key, _, value = line.partition("] ")[2].partition(": ")
        seen[key] = value
    return seen


def test_a_warm_task_is_what_the_exec_d_command_would_have_been():
    warm = probe()
    cold = probe({"TFMESOS_WARM_TASKS": "0"})
    # The task entry is a child of the agent (tfrun) either way; a warm one
    # shows the command it was started with, its environment the one it was
    # started with: /proc is not rewritten.
    assert "tfmesos.cli.tfrun" in warm["parent"] and "tfmesos.cli.tfrun" in cold["parent"]
    assert warm["entry-cmdline"].startswith("%s -S -m %s " % (sys.executable, WARM_ENTRY))
    assert cold["entry-cmdline"] == "%s -S -m tfmesos.task" % sys.executable
    assert is_task_entry(warm["entry-cmdline"]) and is_task_entry(cold["entry-cmdline"])
    assert "MESOS_SANDBOX" in cold["entry-environ"].split()
    assert "MESOS_SANDBOX" not in warm["entry-environ"].split()
    # The same working directory (the sandbox), cgroups and environment.
    for seen in (warm, cold):
        assert "/frameworks/" in seen["entry-cwd"] and "/executors/" in seen["entry-cwd"]
    assert warm["entry-cgroup"] == cold["entry-cgroup"]
    # (the cold run's tfrun was given TFMESOS_WARM_TASKS=0, which its tasks inherit)
    assert warm["env"].split() == [n for n in cold["env"].split() if n != "TFMESOS_WARM_TASKS"]
    assert "TFMESOS_TASK_ID" in warm["env"].split()
    assert_no_task_processes()


def addict_path(tmp_path):
    """A folder that gives another Python this one's ``addict`` (pure Python:
    tfrun's one dependency a local run imports) and nothing else."""
    import addict

    folder = tmp_path / "deps"
    folder.mkdir()
    (folder / "addict").symlink_to(os.path.dirname(addict.__file__))
    return str(folder)


@pytest.mark.skipif(not os.path.exists(PYTHON39), reason="no Python 3.9 here")
def test_warm_tasks_start_on_python_3_9(tmp_path):
    # setup.py promises 3.9: tfrun and its tasks there, warm.
    seen = probe(python=PYTHON39, extra_path=addict_path(tmp_path))
    assert seen["entry-cmdline"].startswith("%s -S -m %s " % (PYTHON39, WARM_ENTRY))
    assert "TFMESOS_TASK_ID" in seen["env"].split()
    assert_no_task_processes()


def test_tasks_that_need_site_are_started_warm_too(tmp_path):
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
    assert "entry-cmdline: %s -m %s " % (sys.executable, WARM_ENTRY) in result.stdout
    assert_no_task_processes()


def warm_interpreters_of(pid, module=WARM_ENTRY):
    """The pre-started interpreters tfrun ``pid`` holds (idle, or tasks by now)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/status" % name) as handle:
                ppid = [line.split()[1] for line in handle if line.startswith("PPid:")][0]
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                cmdline = handle.read()
        except (OSError, IndexError):
            continue
        if int(ppid) == pid and b"\0-m\0%s\0" % module.encode() in cmdline \
                and _state(int(name)) != "Z":
            found.append(int(name))
    return found


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _gone(pid):
    return _state(pid) in ("gone", "Z")


@pytest.mark.waits
def test_a_run_killed_takes_its_idle_warm_interpreters_along():
    with start_tfrun("-w", "1", "-s", "0", "-Cw", "0.2", "-Mw", "128", "--",
                     "sleep 60") as proc:
        wait_until(lambda: warm_interpreters_of(proc.pid), 60,
                   message="no warm task interpreter started")
        wait_for_line(proc.stderr, "cluster ready", 60)
        # The task's interpreter and a spare one for a relaunch.
        held = wait_until(lambda: len(warm_interpreters_of(proc.pid)) >= 2
                          and warm_interpreters_of(proc.pid), 30)
        proc.kill()
        proc.wait(30)
        wait_until(lambda: all(_gone(pid) for pid in held), 30,
                   message="a warm interpreter outlived tfrun")
    assert_no_task_processes()


def test_a_killed_warm_task_fails_the_run_and_leaves_nothing():
    # The command kills its task entry, a pre-started interpreter: the agent
    # sees its child end by the signal, as it would an exec'd one.
    kill_entry = "e=$(awk '/^PPid/{{print $2}}' /proc/$PPID/status); kill -9 $e; sleep 60"
    result = run_tfrun("-w", "1", "-s", "0", "-Cw", "0.2", "-Mw", "128", "--max-attempts",
                       "1", "--", kill_entry)
    assert result.returncode != 0
    assert "worker:0" in result.stderr
    assert "signal Killed" in result.stderr, result.stderr
    assert_no_task_processes()


def test_without_cgroups_a_warm_task_s_escaped_processes_are_found_by_its_sandbox(tmp_path):
    # The agent finds what left the task's group by the MESOS_SANDBOX in its
    # environment: a warm task's children have the task's, not the one /proc
    # shows for the task entry.
    pid_file = tmp_path / "escaped.pid"
    command = "setsid sleep 300 & echo $! > %s; wait" % pid_file
    with start_tfrun("--no-isolation", "-w", "1", "-s", "0", "-Cw", "0.2", "-Mw", "128",
                     "--", command) as proc:
        wait_until(pid_file.exists, 60, message="the command did not start")
        escaped = int(wait_until(lambda: pid_file.read_text().strip(), 10))
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    wait_until(lambda: _gone(escaped), 30, message="the escaped process outlived its task")
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


# -- faults of the interpreters themselves ----------------------------------

def test_a_warm_interpreter_that_cannot_start_leaves_tasks_to_the_ordinary_way(
        tmp_path, caplog):
    command = "exec /bin/false -S -m tfmesos.task"
    runner = WarmProcessRunner(WarmSpec(command, ENV))
    try:
        # the warning follows the switch-off (after the idle ones stopped)
        said = "a warm task interpreter ended (exit code 1); tasks start the ordinary way"
        wait_until(lambda: said in caplog.text, 30, message="the warm interpreters live")
        assert not runner.warm.alive
        task = runner.launch(launch(command=command, sandbox=str(tmp_path)))
        assert task.wait(30) == 1
        assert "ordinary way" in caplog.text
    finally:
        runner.close()


def test_an_idle_warm_interpreter_killed_is_noticed_and_tasks_start_the_ordinary_way(
        monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(warm_runner, "ENTRY_MODULE", "warm_probe")
    env = probe_env()
    runner = WarmProcessRunner(WarmSpec(probe_command(sys.executable), env, tasks=2))
    try:
        assert runner.warm.started(30)
        idle = runner.warm.idle_pids
        assert len(idle) == 2
        # (/proc shows a command line once the exec is through)
        wait_until(lambda: sorted(warm_interpreters_of(os.getpid(), "warm_probe"))
                   == sorted(idle), 10, message="the idle interpreters are not children")
        os.kill(idle[0], signal.SIGKILL)
        wait_until(lambda: "a warm task interpreter ended (killed by signal 9)" in caplog.text,
                   30, message="the death went unnoticed")
        assert not runner.warm.alive
        wait_until(lambda: all(_gone(pid) for pid in idle), 30,
                   message="the other idle interpreter was not stopped")
        launched = probe_launch(tmp_path, "after", sys.executable, env)
        report = read_probe(runner.launch(launched), launched)
        assert not was_warm(report)
    finally:
        runner.close()
    assert all(_gone(pid) for pid in idle)


def test_interpreters_taken_are_replaced_by_one_spare_once_launches_pause(
        monkeypatch, tmp_path):
    monkeypatch.setattr(warm_runner, "ENTRY_MODULE", "warm_probe")
    monkeypatch.setattr(warm_runner, "SPARE_DELAY", 0.5)
    env = probe_env()
    runner = WarmProcessRunner(WarmSpec(probe_command(sys.executable), env, tasks=2))
    try:
        launches = [probe_launch(tmp_path, "t%d" % i, sys.executable, env) for i in range(2)]
        tasks = [runner.launch(one) for one in launches]
        assert all(was_warm(read_probe(task, one)) for task, one in zip(tasks, launches))
        assert runner.warm.idle_pids == []
        spare = wait_until(lambda: runner.warm.idle_pids, 30, message="no spare started")
        assert len(spare) == 1
        relaunch = probe_launch(tmp_path, "again", sys.executable, env)
        report = read_probe(runner.launch(relaunch), relaunch)
        assert was_warm(report) and report["pid"] == spare[0]
    finally:
        runner.close()


def test_an_interpreter_that_does_not_take_its_launch_is_stopped_and_the_task_exec_d(
        monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(warm_runner, "ENTRY_MODULE", "warm_probe")
    monkeypatch.setattr(warm_runner, "TAKE_TIMEOUT", 1.0)
    env = probe_env()
    runner = WarmProcessRunner(WarmSpec(probe_command(sys.executable), env))
    try:
        assert runner.warm.started(30)
        [idle] = runner.warm.idle_pids
        os.kill(idle, signal.SIGSTOP)
        launched = probe_launch(tmp_path, "t", sys.executable, env)
        report = read_probe(runner.launch(launched), launched)
        assert not was_warm(report)
        assert "did not answer in 1 s before it took task t" in caplog.text
        assert _gone(idle)
    finally:
        runner.close()


class _Cgroups:
    def procs_files(self):
        return ["/nonexistent/cgroup.procs"]


def test_a_task_whose_cgroups_cannot_be_joined_fails_to_start(monkeypatch, tmp_path):
    monkeypatch.setattr(warm_runner, "ENTRY_MODULE", "warm_probe")
    env = probe_env()
    runner = WarmProcessRunner(WarmSpec(probe_command(sys.executable), env))
    try:
        launched = probe_launch(tmp_path, "t", sys.executable, env)
        launched.cgroups = _Cgroups()
        with pytest.raises(RunnerError, match="cannot join the cgroup /nonexistent"):
            runner.launch(launched)
        assert runner.warm.alive      # the task's fault, not the pool's
    finally:
        runner.close()


def test_the_first_interpreters_start_off_the_thread_that_makes_the_pool(monkeypatch):
    """Each start (a Popen) held tfrun's main thread ~6 ms while it had its
    imports still to do: they start on the pool's refill thread."""
    monkeypatch.setattr(warm_runner, "ENTRY_MODULE", "warm_probe")
    started_on = []
    real = warm_runner._Interpreter

    def recording(*args):
        started_on.append(threading.current_thread().name)
        return real(*args)
    monkeypatch.setattr(warm_runner, "_Interpreter", recording)
    runner = WarmProcessRunner(WarmSpec(probe_command(sys.executable), probe_env(), tasks=3))
    try:
        assert runner.warm.started(30)
        assert len(runner.warm.idle_pids) == 3
        assert started_on == ["warm-refill"] * 3
    finally:
        runner.close()


def test_closing_the_runner_stops_its_idle_interpreters(monkeypatch):
    monkeypatch.setattr(warm_runner, "ENTRY_MODULE", "warm_probe")
    runner = WarmProcessRunner(WarmSpec(probe_command(sys.executable), probe_env(), tasks=3))
    try:
        assert runner.warm.started(30)
        idle = runner.warm.idle_pids
        assert len(idle) == 3
    finally:
        runner.close()
    assert all(_gone(pid) for pid in idle)
