"""``tfmesos.run(fn, *args, ...)``: a Python function run in every task of
a replica run (cloudpickled, shipped with the run, ``TF_CONFIG`` set); the
chief's (else worker 0's) return value comes back, a task's exception is
raised in the caller with its remote traceback. From a script, on agents
that share no files with the submitter, and from a notebook kernel."""

import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time

import cloudpickle
import pytest
from fixtures_netns import namespaces, netns_master, root_only
from installed import require
from local_users import nobody, python_for
from processes import alive
from tfrun_helpers import REPO, finished_record
from waiting import wait_until

import tfmesos
from tfmesos.core import caller, function_run, launch
from tfmesos.core.remote_errors import remote_error
from tfmesos.core.result_inbox import ResultInbox
from tfmesos.exceptions import RemoteTaskError, SpecError, TaskFailed
from tfmesos.task.result_file import CHUNK

pytestmark = pytest.mark.timeout(240)

# The functions below travel by value, as those of a script's __main__ or a
# notebook do: the agents cannot import this test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SMALL = {"cpus": 0.1, "mem": 128, "launch_timeout": 120}


def where_am_i(offset):
    import json
    import os
    config = json.loads(os.environ["TF_CONFIG"])
    return {"task": config["task"], "cluster": sorted(config["cluster"]),
            "workers": len(config["cluster"]["worker"]), "answer": offset + 41}


def fails_on_worker_1(text):
    import os
    if os.environ["TFMESOS_JOB_NAME"] == "worker" and os.environ["TFMESOS_TASK_INDEX"] == "1":
        raise ValueError("bad input: %s" % text)
    return "fine"


def ps_dies_saying_why():
    import json
    import os
    import sys
    import time
    if json.loads(os.environ["TF_CONFIG"])["task"]["type"] == "ps":
        print("ps: the real reason", file=sys.stderr, flush=True)
        os._exit(9)
    time.sleep(600)


def too_large(size):
    return b"x" * size


def test_returns_worker_0s_value_and_every_task_has_its_tf_config(tmp_path):
    value = tfmesos.run(where_am_i, 1, workers=2, ship=None, run_dir=str(tmp_path / "run"),
                        **SMALL).value
    assert value == {"task": {"type": "worker", "index": 0}, "cluster": ["worker"],
                     "workers": 2, "answer": 42}
    # Named after the script that called it (pytest's), its command the function's.
    with open(tmp_path / "run" / "run.json", encoding="utf-8") as handle:
        record = json.load(handle)
    assert (record["name"], record["command"]) == (caller.script_name(),
                                                   "tfmesos.run(where_am_i)")


def test_a_second_ctrl_c_as_run_stops_its_run_waits_for_the_stop(tmp_path, monkeypatch):
    """As cluster()'s (test_cluster): a Ctrl-C interrupts run()'s wait, a
    second one as the run stops used to cut the stop short (run.json said
    running, the tasks outlived the caller); it now comes after the stop."""
    import signal

    from tfmesos.core.launch import ClusterRun
    real_stop = ClusterRun.stop

    def interrupted(self):
        raise KeyboardInterrupt   # the first Ctrl-C, in run()'s wait

    def stop_with_a_second_ctrl_c(self):
        signal.raise_signal(signal.SIGINT)
        real_stop(self)

    monkeypatch.setattr(ClusterRun, "wait_finished", interrupted)
    monkeypatch.setattr(ClusterRun, "stop", stop_with_a_second_ctrl_c)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)   # Ctrl-C as in a script
    try:
        with pytest.raises(KeyboardInterrupt):
            tfmesos.run(where_am_i, 1, workers=1, ship=None, run_dir=str(tmp_path / "run"),
                        **SMALL)
    finally:
        signal.signal(signal.SIGINT, before)
    with open(tmp_path / "run" / "run.json", encoding="utf-8") as handle:
        record = json.load(handle)
    assert record["outcome"]["status"] == "interrupted"
    assert all(task["state"] in ("TASK_KILLED", "TASK_FINISHED", "TASK_FAILED")
               for task in record["tasks"]), record["tasks"]


def test_a_task_that_failed_without_an_exception_has_its_last_stderr_lines_said(tmp_path,
                                                                                  capfd):
    # A ps's output is not shown: its failure was "task ps:0 exited with code
    # 9" and nothing else, where tfrun says the last lines it wrote to stderr.
    with pytest.raises(TaskFailed, match="ps:0 exited with code 9"):
        tfmesos.run(ps_dies_saying_why, workers=1, ps=1, ship=None,
                    run_dir=str(tmp_path / "run"), **SMALL)
    err = capfd.readouterr().err
    assert "tfmesos: the last lines ps:0 wrote to stderr:\n[ps:0] ps: the real reason\n" in err, \
        err


def eats_memory(megabytes):
    block = bytearray(megabytes << 20)
    block[::4096] = b"x" * len(block[::4096])   # touched: resident, charged to its cgroup
    return len(block)


@pytest.mark.waits
def test_a_task_killed_for_its_memory_names_the_keyword_that_gives_it_more(tmp_path, capfd):
    # The caller gave mem=: the failure said "raise -Mw" and the hint "e.g.
    # tfrun -Mw 4096", options of a command the caller never ran (found by
    # a review helper).
    with pytest.raises(TaskFailed) as caught:
        tfmesos.run(eats_memory, 600, workers=1, ship=None, mem=256, cpus=0.5,
                    run_dir=str(tmp_path / "run"))
    assert str(caught.value).startswith("worker:0 was killed for using more than its 256 MB"), \
        caught.value
    assert str(caught.value).endswith(": raise mem="), caught.value
    err = capfd.readouterr().err
    assert "-Mw" not in err and "e.g. mem=4096 (MB" in err, err


def test_tfruns_resource_flags_read_as_the_keywords_of_tfmesos_run():
    from tfmesos.core.function_options import flags_as_keywords
    assert flags_as_keywords("give it more, e.g. tfrun -Mw 4096 (MB; the default is 1024)") \
        == "give it more, e.g. mem=4096 (MB; the default is 1024)"
    assert flags_as_keywords("ps:0 was killed ...: raise -Ms") == "ps:0 was killed ...: raise ps_mem="
    assert flags_as_keywords("e.g. -Gc") == "e.g. chief_gpus="
    assert flags_as_keywords("-Cw 2 and --job x:1:1:4096") == "cpus=2 and --job x:1:1:4096"
    assert flags_as_keywords("run-Mwx and a-Mw") == "run-Mwx and a-Mw"   # no flag of its own


def test_with_a_chief_the_chief_returns(tmp_path):
    value = tfmesos.run(where_am_i, 0, workers=1, chief=True, ship=None,
                        run_dir=str(tmp_path / "run"), **SMALL).value
    assert value["task"] == {"type": "chief", "index": 0}
    assert value["cluster"] == ["chief", "worker"] and value["answer"] == 41


def test_a_remote_exception_is_raised_with_the_task_and_its_traceback(tmp_path, capfd):
    with pytest.raises(RemoteTaskError) as caught:
        tfmesos.run(fails_on_worker_1, "seven", workers=2, ship=None,
                    run_dir=str(tmp_path / "run"), **SMALL)
    error = caught.value
    assert isinstance(error, TaskFailed) and error.task == "worker:1" and error.exit_code == 1
    text = str(error)
    assert text.startswith("worker:1 raised ValueError: bad input: seven")
    assert "Traceback (most recent call last)" in text and "in fails_on_worker_1" in text
    # cloudpickle (3.1) names the file of a function pickled by value
    # <dynamic-code>: the caller names its own, and shows the line.
    line = fails_on_worker_1.__code__.co_firstlineno + 3
    assert 'File "%s", line %d, in fails_on_worker_1\n    raise ValueError("bad input: %%s" ' \
        '%% text)\n' % (__file__, line) in error.remote_traceback
    assert error.remote_traceback.endswith("ValueError: bad input: seven\n")
    assert type(error.__cause__) is ValueError and error.__cause__.args == ("bad input: seven",)
    # The task's stderr, shown as it came, names the caller's file too: it
    # said File "<dynamic-code>" with no source line (found by a review helper).
    err = capfd.readouterr().err
    assert '[worker:1]   File "%s", line %d, in fails_on_worker_1\n' % (__file__, line) in err, err
    assert "<dynamic-code>" not in err, err


async def async_answer(offset):
    import asyncio
    await asyncio.sleep(0)
    return {"answer": offset + 41, "loop": asyncio.get_running_loop() is not None}


async def async_fails(text):
    import asyncio
    await asyncio.sleep(0)
    raise ValueError("async: %s" % text)


def test_an_async_function_runs_in_an_event_loop_of_its_own(tmp_path):
    """``async def fn``: each task runs ``asyncio.run(fn(*args))`` (it was
    refused in every task as a value that cannot be pickled: coroutine)."""
    value = tfmesos.run(async_answer, 1, workers=1, ship=None, run_dir=str(tmp_path / "run"),
                        **SMALL).value
    assert value == {"answer": 42, "loop": True}
    with pytest.raises(RemoteTaskError) as caught:
        tfmesos.run(async_fails, "seven", workers=1, ship=None,
                    run_dir=str(tmp_path / "failed"), **SMALL)
    error = caught.value
    assert str(error).startswith("worker:0 raised ValueError: async: seven")
    assert type(error.__cause__) is ValueError
    # Its traceback starts at the function, as a plain function's does.
    frames = error.remote_traceback.split("\n  File ")[1:]
    assert frames and "in async_fails" in frames[0], error.remote_traceback
    assert "runners.py" not in error.remote_traceback, error.remote_traceback
    assert "base_events.py" not in error.remote_traceback, error.remote_traceback


async def async_items():
    yield 1


def items():
    yield 1


def test_a_generator_function_is_refused_before_the_run():
    # A plain generator function was launched, then failed in every task:
    # "cannot pickle 'generator' object" and cloudpickle's traceback.
    for function, kind in ((async_items, "an async"), (items, "a")):
        with pytest.raises(SpecError) as caught:
            tfmesos.run(function, workers=1, ship=None, **SMALL)
        assert str(caught.value) == (
            "tfmesos.run cannot run %s: %s generator function returns a generator, which "
            "cannot come back from a task; run one that returns what it collects (a list)"
            % (function.__qualname__, kind))


def test_a_string_for_ship_exclude_is_refused_before_the_run(tmp_path):
    # ship_exclude="*.pyc" was read a character at a time ("*", ".", ...):
    # every file left out, and a ShipError that read oddly.
    with pytest.raises(SpecError) as caught:
        tfmesos.run(print, workers=1, ship=str(tmp_path), ship_exclude="*.pyc", **SMALL)
    assert str(caught.value) == ("ship_exclude takes a list of patterns, got the string "
                                 "'*.pyc': give ['*.pyc']")


@pytest.mark.parametrize("logs, words", [
    (5, "logs=5: give 'all', 'none', or a list of JOB or JOB:INDEX,..."),
    ("worker:7", "logs 'worker:7': worker has no task 7 (its tasks: 0 to 0)"),
])
def test_logs_that_name_no_task_are_refused_before_the_run(logs, words):
    # logs=5 was "TypeError: 'int' object is not iterable"; logs="worker:7"
    # of one worker showed nothing, silently.
    with pytest.raises(SpecError) as caught:
        tfmesos.run(print, workers=1, ship=None, logs=logs, **SMALL)
    assert str(caught.value).startswith(words), str(caught.value)


def leaves_a_thread_and_a_process(release):
    """Returns at once, leaving a thread and a child process running until
    ``release`` exists: its process' pid and the child's."""
    import multiprocessing
    import os
    import threading
    import time

    def until_released():
        while not os.path.exists(release):
            time.sleep(0.1)

    threading.Thread(target=until_released).start()
    child = multiprocessing.get_context("fork").Process(target=until_released)
    child.start()
    return [os.getpid(), child.pid]



def test_what_fn_leaves_running_neither_holds_the_run_nor_outlives_it(tmp_path):
    # The runner ended by sys.exit: the interpreter's shutdown joined fn's
    # thread and child process, and the run waited for them (here until
    # released). It leaves once the outcome is written; the guard kills
    # what is left in the task's process group.
    release = tmp_path / "release"
    call = tfmesos.submit(leaves_a_thread_and_a_process, str(release), workers=1, ship=None,
                          run_dir=str(tmp_path / "run"), **SMALL)
    try:
        pids = call.result(timeout=90).value
        assert not release.exists()
        wait_until(lambda: not any(alive(pid) for pid in pids),
                   message=lambda: "left running: %s" % [p for p in pids if alive(p)])
    finally:
        release.touch()   # without the fix the run ends only now
        call.result(timeout=120)


def test_a_value_over_the_bound_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(function_run, "MAX_RESULT", 1 << 20)
    with pytest.raises(RemoteTaskError) as caught:
        tfmesos.run(too_large, 2 << 20, workers=1, ship=None, run_dir=str(tmp_path / "run"),
                    **SMALL)
    assert str(caught.value).startswith(
        "worker:0 returned a value that pickles to 2.0 MiB, over the 1.0 MiB bound of "
        "tfmesos.run's results: return less, and write large results to shared storage")


def many_bytes(size):
    return b"x" * size


def drop_each_connection_once_at(monkeypatch, frame):
    """Each task's rendezvous connection is dropped once, right after the
    scheduler took the first of its result's frames ``frame(message)``
    says; the task ids dropped (a set, filled as the run goes)."""
    runs, dropped = [], set()
    start, feed = launch.ClusterRun.start, ResultInbox.feed

    def recording(self, *args, **kwargs):
        runs.append(self)
        return start(self, *args, **kwargs)

    def dropping(self, task_id, message):
        whole = feed(self, task_id, message)
        if frame(message) and task_id not in dropped:
            dropped.add(task_id)
            runs[-1].rendezvous._connections[task_id].sock.shutdown(socket.SHUT_RDWR)
        return whole

    monkeypatch.setattr(launch.ClusterRun, "start", recording)
    monkeypatch.setattr(ResultInbox, "feed", dropping)
    return dropped


def test_results_come_whole_through_a_dropped_connection(monkeypatch):
    # Each task's connection drops once the scheduler took 4 of its result's
    # data frames: those the kernels held then are lost, the task registers
    # again and sends its result again.
    dropped = drop_each_connection_once_at(
        monkeypatch, lambda message: message.get("offset") == 4 * CHUNK)
    result = tfmesos.run(many_bytes, 80 * CHUNK, workers=2, ship=None, logs="none", **SMALL)
    assert {name: len(value) for name, value in result.items()} == \
        {"worker:0": 80 * CHUNK, "worker:1": 80 * CHUNK}
    assert result.missing == {} and len(dropped) == 2


def test_unknown_options_name_the_valid_ones():
    with pytest.raises(TypeError) as caught:
        tfmesos.run(where_am_i, 1, wokers=2)
    assert "unexpected option 'wokers'" in str(caught.value)
    assert "cpus" in str(caught.value) and "python_env" in str(caught.value)
    with pytest.raises(SpecError):
        tfmesos.run(where_am_i, workers=0)
    with pytest.raises(TypeError):
        tfmesos.run("not callable")


def test_an_exception_that_does_not_unpickle_is_raised_as_its_text():
    inbox = ResultInbox(limit=1000)
    inbox.feed("t1", {"type": "result", "status": "error", "error": "raised Odd: it broke",
                      "traceback": "Traceback (most recent call last):\n  ...\nOdd: it broke\n",
                      "size": 5})
    inbox.feed("t1", {"type": "result_data", "offset": 0, "data": "bm9wZQ=="})   # b"nope"
    inbox.exited("t1")
    result = inbox.wait("t1", 0)
    assert result.broken == "its data has 4 of the 5 bytes announced"
    error = remote_error("worker:1", result, TaskFailed("x", "worker:1", None, 1))
    assert error.__cause__ is None and str(error).startswith("worker:1 raised Odd: it broke")
    inbox.feed("t2", {"type": "result", "status": "error", "error": "raised Odd: it broke",
                      "traceback": "", "size": 4})
    inbox.feed("t2", {"type": "result_data", "offset": 0, "data": "bm9wZQ=="})
    result = inbox.wait("t2", 0)
    assert result.complete and bytes(result.data) == b"nope"
    error = remote_error("worker:1", result, TaskFailed("x", "worker:1", None, 1))
    assert error.__cause__ is None   # b"nope" is no pickle: the text is all there is
    inbox.feed("t3", {"type": "result", "status": "ok", "size": 2000})
    assert inbox.wait("t3", 0).broken == "it announced 2000 bytes, over the 1000 byte bound"


# -- agents that share nothing with the submitter ------------------------------

WORK = '''\
import os, sys
from helpers.answer import ANSWER


def work(plus):
    import cloudpickle
    return {"answer": ANSWER + plus, "cwd": os.path.basename(os.getcwd()),
            "python": sys.executable, "cloudpickle": cloudpickle.__file__,
            "hidden": [sorted(os.listdir(path)) if os.path.isdir(path) else "gone"
                       for path in sys.argv[1:] or HIDDEN]}

HIDDEN = []
'''


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"),
                    reason="agents hiding files need root; the task needs /usr/bin/python3")
@pytest.mark.waits
def test_ship_runs_the_function_on_agents_that_share_no_files(tmp_path, monkeypatch):
    from mesos_local import AgentSpec

    # The function is in the shipped project (pickled by reference, imported
    # there); the agents' tasks see neither it, nor this checkout, nor the
    # home directory; their Python (/usr/bin/python3) has no cloudpickle.
    project = tmp_path / "proj"
    (project / "helpers").mkdir(parents=True)
    (project / "helpers" / "__init__.py").write_text("")
    (project / "helpers" / "answer.py").write_text("ANSWER = 40\n")
    hidden = [str(project), REPO, os.path.expanduser("~")]
    (project / "shipped_work.py").write_text(WORK.replace("HIDDEN = []", "HIDDEN = %r" % hidden))
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.chdir(project)
    import shipped_work
    agent = AgentSpec(cpus=2, mem=1000, gpus=0, isolate=("fs",))
    value = tfmesos.run(shipped_work.work, 2, workers=2, ship=str(project),
                        python="/usr/bin/python3", run_dir=str(tmp_path / "run"),
                        local_master_options={"agents": [agent], "hidden_paths": hidden},
                        **SMALL).value
    assert value["answer"] == 42 and value["cwd"] == "project"
    assert value["python"] == "/usr/bin/python3"
    assert ".zip/cloudpickle/" in value["cloudpickle"]     # the submitter's, shipped
    assert value["hidden"] == [[], [], []]


SUBMIT = """\
import json, sys
import tfmesos
from shipped_work import work

value = tfmesos.run(work, 2, workers=2, master=sys.argv[1], python=sys.argv[2], cpus=0.5,
                    mem=128, launch_timeout=90, run_dir=sys.argv[3]).value
print("value", json.dumps(value))
"""


@root_only
@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"),
                    reason="needs a Python outside the home directory: /usr/bin/python3")
def test_ship_runs_the_function_on_network_namespace_agents_that_share_nothing(tmp_path,
                                                                              namespaces):
    # tfmesos.run in a script on the hub of a `tfmesos local-master --netns`
    # (this checkout's): agents on hosts of their own whose tasks see neither
    # the project, nor this checkout, nor the home directory; their Python,
    # a venv of /usr/bin/python3, has neither tfmesos nor cloudpickle.
    project, venv = tmp_path / "proj", tmp_path / "venv"
    (project / "helpers").mkdir(parents=True)
    (project / "helpers" / "__init__.py").write_text("")
    (project / "helpers" / "answer.py").write_text("ANSWER = 40\n")
    hidden = [str(project), REPO, os.path.expanduser("~")]
    (project / "shipped_work.py").write_text(WORK.replace("HIDDEN = []", "HIDDEN = %r" % hidden))
    (project / "submit.py").write_text(SUBMIT)
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    agent = "cpus=2,mem=1000,gpus=0,isolate=fs"
    env = dict(os.environ, MESOS_MASTER="", PYTHONPATH=REPO)
    with netns_master(namespaces, tmp_path / "master.log", [agent] * 2, hidden=hidden) as master:
        try:
            result = subprocess.run(
                ["ip", "netns", "exec", master.hub, sys.executable, "submit.py", master.address,
                 str(venv / "bin" / "python"), str(tmp_path / "run")],
                cwd=project, env=env, capture_output=True, text=True, timeout=150)
        except subprocess.TimeoutExpired as exc:
            pytest.fail("tfmesos.run did not finish within 150 s: %s" % exc.stderr)
    assert result.returncode == 0, result.stderr + (tmp_path / "master.log").read_text()[-3000:]
    [line] = [line for line in result.stdout.splitlines() if line.startswith("value ")]
    value = json.loads(line[len("value "):])
    assert value["answer"] == 42 and value["cwd"] == "project"
    assert value["python"] == str(venv / "bin" / "python")
    assert ".zip/cloudpickle/" in value["cloudpickle"] and value["hidden"] == [[], [], []]


# -- a notebook kernel -----------------------------------------------------------

CELL = """\
import tfmesos

def plus_one(x):
    import json, os
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    print("hello from the task", flush=True)
    return task["type"], task["index"], x + 1

result = tfmesos.run(plus_one, 41, workers=1, ship=None, cpus=0.1, mem=128, run_dir=%r).value
print("result", result)
assert result == ("worker", 0, 42), result
"""


@pytest.mark.notebook   # its kernel imports IPython (hidden from the others' by tests/process_site)
def test_from_a_notebook_kernel(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    # The kernel is a fresh python3 process: this checkout first on its path.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_code_cell(CELL % str(tmp_path / "run")))
    client = nbclient.NotebookClient(notebook, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = notebook.cells[0].outputs
    text = "".join(output.get("text", "") for output in outputs)
    assert "result ('worker', 0, 42)" in text, outputs
    # The task's output, written by the printer's console thread, in the cell that ran it.
    assert "[worker:0] hello from the task\n" in text, outputs
    assert "Traceback" not in text, outputs
    with open(tmp_path / "run" / "run.json", encoding="utf-8") as handle:
        record = json.load(handle)
    assert (record["name"], record["command"]) == ("notebook", "tfmesos.run(plus_one)")


UNREAD = """\
import os, sys, tfmesos

def chatty(flag):
    import os, sys, time
    if os.environ["TFMESOS_TASK_INDEX"] == "0":
        sys.stdout.write("y\\n" * 1000000)   # 2 MB: far more than a pipe holds
        sys.stdout.flush()
        open(flag, "w").close()
        time.sleep(613)
    while not os.path.exists(flag):
        time.sleep(0.1)
    raise ValueError("worker 1 gives up")

try:
    tfmesos.run(chatty, sys.argv[1], workers=2, ship=None, cpus=0.1, mem=128,
                run_dir=sys.argv[2])
except Exception as exc:
    with open(sys.argv[3], "w") as handle:
        handle.write("%s: %s" % (type(exc).__name__, str(exc).splitlines()[0]))
    raise SystemExit(3)
"""


def test_a_failed_task_fails_the_call_while_nobody_reads_the_callers_output(tmp_path):
    # As tfrun's (test_tfrun.py): before the printer's console, the caller's
    # thread waited in print for a reader (a script piped to a pager) and
    # took worker:1's failure in only once the output was read: here, never.
    script, raised = tmp_path / "unread.py", tmp_path / "raised"
    script.write_text(UNREAD)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "written"),
                             str(run_dir), str(raised)], cwd=str(tmp_path),
                            env=dict(os.environ, MESOS_MASTER=""),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        record = wait_until(lambda: finished_record(run_dir), timeout=120,
                            message="the run did not end while its output was not read")
        assert record["outcome"]["status"] == "failed" and \
            record["outcome"]["task"] == "worker:1", record["outcome"]
        assert all(task["state"] != "TASK_RUNNING" for task in record["tasks"]), \
            record["tasks"]   # worker:0 was stopped too
        out, err = proc.communicate(timeout=120)   # read at last: the call raises
    finally:
        if proc.poll() is None:   # stopped as a user stops a script: its run with it
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 3, err[-2000:]
    assert raised.read_text() == "RemoteTaskError(ValueError): worker:1 raised ValueError: " \
        "worker 1 gives up", raised.read_text()
    lines = out.splitlines()   # what worker:0 forwarded before it was stopped, in whole lines
    assert lines and set(lines) == {b"[worker:0] y"}, out[-200:]
    assert b"ValueError: worker 1 gives up" in err, err[-2000:]


@pytest.mark.tensorflow
@pytest.mark.timeout(300)
def test_the_example_trains_the_keras_digits_model_and_returns_its_accuracy(tmp_path):
    require("tf_keras")
    require("sklearn")
    env = dict(os.environ, MESOS_MASTER="", PYTHONPATH=os.pathsep.join(
        filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "run_function.py"),
                             "--epochs", "4"], cwd=str(tmp_path), env=env, capture_output=True,
                            text=True, timeout=280)
    assert result.returncode == 0, result.stderr[-3000:]
    [line] = [line for line in result.stdout.splitlines() if line.startswith("final accuracy")]
    assert float(line.split()[2]) >= 0.85 and "(2 workers," in line, result.stdout
    trained = [line for line in result.stdout.splitlines() if "trained 4 epochs" in line]
    assert sorted(line.split("]")[0] for line in trained) == ["[worker:0", "[worker:1"]


def runner_environment(tmp_path, fn, args, **packing):
    """The environment of a function runner started by hand: ``fn(*args)``
    packed into a sandbox under ``tmp_path``, its result file there too."""
    from tfmesos.ship.function_payload import pack_function
    payload = pack_function(fn, args, str(tmp_path), **packing)
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    os.replace(payload.path, sandbox / payload.name)
    return dict(os.environ, PYTHONPATH=REPO, MESOS_SANDBOX=str(sandbox),
                TFMESOS_FUNCTION=payload.name, TFMESOS_RESULT_FILE=str(tmp_path / "result"),
                TFMESOS_JOB_NAME="worker", TFMESOS_TASK_INDEX="0", TFMESOS_CHIEF_HOSTS="")


def raises_or_returns(value):
    if value is None:
        raise ValueError("fn failed")
    return value


@pytest.mark.parametrize("value", [None, b"x" * 100000], ids=["raises", "returns 100 kB"])
def test_a_runner_that_cannot_write_its_outcome_says_so_in_one_line(tmp_path, value):
    # A full sandbox disk (RLIMIT_FSIZE stands in for it): one line naming
    # it, fn's own traceback kept, no traceback of tfmesos', no partial file.
    env = runner_environment(tmp_path, raises_or_returns, (value,))
    limit = "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64)); "
    result = subprocess.run(
        [sys.executable, "-c", limit + "import runpy, signal; signal.signal(signal.SIGXFSZ, "
         "signal.SIG_IGN); runpy.run_module('tfmesos.task.function_runner', "
         "run_name='__main__')"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("tfmesos: cannot write the function's outcome to %s ("
                                % (tmp_path / "result")), result.stderr
    assert lines[-1].endswith("): free space in the task's sandbox"), result.stderr
    assert "result_file.py" not in result.stderr, result.stderr
    assert ("ValueError: fn failed" in result.stderr) == (value is None), result.stderr
    assert sorted(os.listdir(tmp_path)) == ["sandbox"]


def test_the_runner_refuses_a_payload_from_another_python(tmp_path):
    env = runner_environment(tmp_path, len, ("abc",), python_version=(2, 7))
    result = subprocess.run([sys.executable, "-m", "tfmesos.task.function_runner"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    header, _, data = (tmp_path / "result").read_bytes().partition(b"\n")
    assert b"was pickled by Python 2.7" in header
    assert "was pickled by Python 2.7" in str(cloudpickle.loads(data))


@pytest.mark.parametrize("line", [b"[" * 100000, b"not json", b"[1]"],
                         ids=["nested past the parser", "not JSON", "not an object"])
def test_a_malformed_result_file_is_a_failed_result_not_a_crash(tmp_path, line):
    # A header nested past the parser's depth raised RecursionError in the
    # task entry (json.loads); now it is a result that failed, as any other.
    from tfmesos.task.result_file import read_outcome
    path = tmp_path / "result"
    path.write_bytes(line + b"\n")
    header, data = read_outcome(str(path), 1 << 20)
    assert header["status"] == "error" and data == b""
    assert "malformed" in header["error"]


@pytest.mark.parametrize("make", ["fifo", "link"])
def test_a_result_path_that_is_no_file_is_a_failed_result_at_once(tmp_path, make):
    # fn (its user) made a FIFO where the runner writes: the entry's open
    # waited for a writer forever, and tfmesos.run with it.
    from tfmesos.task.result_file import read_outcome
    path = tmp_path / "result"
    if make == "fifo":
        os.mkfifo(path)
    else:
        (tmp_path / "elsewhere").write_bytes(b'{"status": "ok"}\n')
        os.symlink(tmp_path / "elsewhere", path)
    header, data = read_outcome(str(path), 1 << 20)
    assert (header["status"], data) == ("error", b"")
    assert header["error"].startswith("left no usable result: the runner's result file "), header


# A script's module for local_sources: a class, a decorated function.
SCRIPT = '''
import functools


class Trainer:
    def __init__(self, lr):
        self.lr = lr

    def step(self):
        return 1 / self.lr

    @staticmethod
    def scale(x):
        return x / 0

    @property
    def rate(self):
        return 1 / self.lr


def logged(f):
    @functools.wraps(f)
    def wrapper(*args):
        return f(*args)
    return wrapper


@logged
def train(lr):
    return Trainer(lr).step()


measure = functools.wraps(len)(lambda *args: len(*args))   # wraps a builtin: no code
'''


def test_a_methods_and_a_decorated_functions_frames_name_the_callers_file(tmp_path):
    # cloudpickle carries a script's functions by value: their frames say
    # File "<dynamic-code>". The caller named its own file for the plain
    # functions of the script only: a method's, and the function a
    # decorator wraps, stayed "<dynamic-code>" with no source line.
    import importlib.util

    from tfmesos.core.remote_errors import local_sources, readable
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    spec = importlib.util.spec_from_file_location("script_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sources = local_sources(module.train)
    lines = SCRIPT.splitlines()
    for name, source in (("step", "return 1 / self.lr"), ("scale", "return x / 0"),
                         ("train", "return Trainer(lr).step()"), ("wrapper", "return f(*args)"),
                         ("rate", "return 1 / self.lr")):
        number = next(i for i, line in enumerate(lines, 1)
                      if line.strip() == source and (name != "rate" or i > 17))
        remote = ('Traceback (most recent call last):\n'
                  '  File "<dynamic-code>", line %d, in %s\n'
                  'ZeroDivisionError: division by zero\n' % (number, name))
        assert readable(remote, sources) == (
            'Traceback (most recent call last):\n'
            '  File "%s", line %d, in %s\n'
            '    %s\n'
            'ZeroDivisionError: division by zero\n' % (path, number, name, source)), name


def test_a_result_all_sent_before_its_connection_dropped_still_comes(monkeypatch):
    # Each task's connection drops once the scheduler took its result's
    # header: a small result's frames, and the exit frame after them, were
    # all in the kernels by then, and the task had no drop to notice while
    # it sent them.
    dropped = drop_each_connection_once_at(
        monkeypatch, lambda message: message.get("type") == "result")
    result = tfmesos.run(many_bytes, 1000, workers=2, ship=None, logs="none", **SMALL)
    assert {name: len(value) for name, value in result.items()} == \
        {"worker:0": 1000, "worker:1": 1000}
    assert result.missing == {} and len(dropped) == 2


def connect_to(host, port):
    """A connection to worker 0's server, tried for up to 60 s (it starts too)."""
    import socket
    import time
    deadline = time.monotonic() + 60
    while True:
        try:
            return socket.create_connection((host, int(port)), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def worker_1_raises_and_its_exit_fails_worker_0(abort=False):
    """Worker 1 raises; its exit closes its connection to worker 0, which
    fails on that ("closed by peer", as a collective does; ``abort``: with
    no exception, as NCCL's watchdog aborts the process), and lingers
    after (an exit function), as a loaded machine makes an exit."""
    import atexit
    import json
    import os
    import socket
    import time
    config = json.loads(os.environ["TF_CONFIG"])
    host, port = config["cluster"]["worker"][0].rsplit(":", 1)
    if config["task"]["index"] == 0:
        with socket.create_server(("", int(port))) as server:
            peer, _ = server.accept()
            if not peer.recv(1):
                if abort:
                    import resource
                    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # no core file
                    os.abort()
                raise ConnectionError("worker 1 closed the connection")
        return "never"
    peer = connect_to(host, port)
    atexit.register(lambda: (peer.close(), time.sleep(5)))
    import pwd
    raise RuntimeError("worker 1 failed as %s" % pwd.getpwuid(os.getuid()).pw_name)


@pytest.mark.parametrize("user", [None, "nobody"])
def test_the_task_that_raised_is_the_failure_not_the_peer_its_exit_failed(tmp_path, user):
    # Its outcome reaches tfmesos before its exit closes the peer's
    # connection (task/outcome_channel.py), also as another user, whose
    # task entry and command run as that user.
    options = dict(SMALL)
    if user is not None:
        nobody("running tasks as another user needs root")
        options.update(user=user, python=python_for(user, same_version=True))
    with pytest.raises(RemoteTaskError) as caught:
        tfmesos.run(worker_1_raises_and_its_exit_fails_worker_0, workers=2, ship=None,
                    run_dir=str(tmp_path / "run"), **options)
    assert str(caught.value).startswith("worker:1 raised RuntimeError: worker 1 failed as %s"
                                        % (user or pwd.getpwuid(os.getuid()).pw_name)), \
        str(caught.value)[:2000]
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["outcome"]["task"] == "worker:1", record["outcome"]


def test_the_task_that_raised_is_the_failure_not_the_peer_aborted_by_its_exit(tmp_path):
    # The peer sends no outcome of its own (SIGABRT, 134): the outcome that
    # came before its exit frame is the cause.
    with pytest.raises(RemoteTaskError) as caught:
        tfmesos.run(worker_1_raises_and_its_exit_fails_worker_0, True, workers=2, ship=None,
                    run_dir=str(tmp_path / "run"), **SMALL)
    assert str(caught.value).startswith("worker:1 raised RuntimeError: worker 1 failed as "), \
        str(caught.value)[:2000]
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["outcome"]["task"] == "worker:1", record["outcome"]


def worker_0_is_killed_and_worker_1_raises_on_it():
    """Worker 0 is SIGKILLed (an OOM kill's shape) once worker 1 connected;
    worker 1 raises on the connection it closed."""
    import json
    import os
    import signal
    import socket
    import time
    config = json.loads(os.environ["TF_CONFIG"])
    host, port = config["cluster"]["worker"][0].rsplit(":", 1)
    if config["task"]["index"] == 0:
        with socket.create_server(("", int(port))) as server:
            server.accept()
            os.kill(os.getpid(), signal.SIGKILL)
    peer = connect_to(host, port)
    if not peer.recv(1):
        time.sleep(1)   # its error comes well after worker 0's exit
        raise ConnectionError("worker 0 closed the connection")
    return "never"


@pytest.mark.waits
def test_a_task_killed_first_is_the_failure_not_the_peer_that_raised_on_it(tmp_path,
                                                                          monkeypatch):
    # The other way round: the killed task's exit came before the peer's
    # failed outcome, which is no cause of it, though it came before the
    # run looked for a cause (here: 3 s after the kill was known).
    late = function_run.remote_failure

    def looking_late(*args, **kwargs):
        time.sleep(3)
        return late(*args, **kwargs)
    monkeypatch.setattr(function_run, "remote_failure", looking_late)
    with pytest.raises(TaskFailed) as caught:
        tfmesos.run(worker_0_is_killed_and_worker_1_raises_on_it, workers=2, ship=None,
                    run_dir=str(tmp_path / "run"), **SMALL)
    assert not isinstance(caught.value, RemoteTaskError), caught.value
    assert caught.value.task == "worker:0" and "137" in str(caught.value), caught.value
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["outcome"]["task"] == "worker:0", record["outcome"]


class LoadsBadly:
    """Pickles in the task; its unpickling here raises (int("not a number"))."""

    def __reduce__(self):
        return (int, ("not a number",))


def returns_what_does_not_load_here():
    return LoadsBadly()


def test_a_value_that_does_not_unpickle_here_fails_the_call_and_its_record(tmp_path):
    # The run's trainers were done (wait_finished recorded "succeeded") when
    # the value failed the call: run.json said succeeded of a call that raised.
    from tfmesos.exceptions import ClusterError
    with pytest.raises(ClusterError, match="return value does not unpickle here"):
        tfmesos.run(returns_what_does_not_load_here, workers=1, ship=None,
                    run_dir=str(tmp_path / "run"), **SMALL)
    with open(tmp_path / "run" / "run.json", encoding="utf-8") as handle:
        outcome = json.load(handle)["outcome"]
    assert outcome["status"] == "failed", outcome
    assert "worker:0's return value does not unpickle here: ValueError" in outcome["message"]
    assert outcome["exit_code"] == 1, outcome
