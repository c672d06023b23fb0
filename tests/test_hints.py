"""The hints tfrun prints after a failed task's failure line: a table of what
tasks printed (real error lines of TensorFlow 2.21, Keras 3.15, Python, JAX
and Mesos) and the hint each gets; then a run whose worker prints the ps
error."""

import io
import json
import shlex

import pytest
from run_dirs import validate_run_json
from tfrun_helpers import SMALL, run_tfrun

from tfmesos.cli.runs import show_run
from tfmesos.record.hints import hint_for, matching_rule, memory_option
from tfmesos.record.history import Run
from tfmesos.ship import fetch_check

PER_REPLICA = [
    "  File \"/usr/lib/python3/keras/src/backend/tensorflow/trainer.py\", line 120, in "
    "one_step_on_data",
    "ValueError: Attempt to convert a value (PerReplica:{",
    "  0: <tf.Tensor: shape=(32, 64), dtype=float32, numpy=",
    "array([[0.    , 0.    , 0.5   , ..., 0.4375, 0.    , 0.    ],",
    "      shape=(32, 64), dtype=float32)>",
    "}) with an unsupported type (<class 'tensorflow.python.distribute.values.PerReplica'>) "
    "to a Tensor.",
]
# Only the last line left in the tail (the tensor dump pushed the first out).
PER_REPLICA_END = PER_REPLICA[-1:]

CASES = [
    # (what the task printed, exit code, Mesos' message, job) -> the rule that answers
    (PER_REPLICA, 1, "", "worker", "keras3-multi-worker"),
    (PER_REPLICA_END, 1, "", "worker", "keras3-multi-worker"),
    (["Traceback (most recent call last):",
      "ValueError: There is no id for task_type 'ps'"], 1, "", "worker",
     "ps-with-multi-worker-mirrored"),
    (["ModuleNotFoundError: No module named 'sklearn'"], 1, "", "worker", "missing-module"),
    # tfrun in the root namespace, its agents in network namespaces of their own
    (["tfmesos: cannot register with the tfmesos scheduler at 127.0.0.1:34747: [Errno 111] "
      "Connection refused"], 1, "", "worker", "rendezvous-unreachable"),
    (["ImportError: No module named 'foo.bar'"], 1, "", "ps", "missing-module"),
    (["E0000 server.cc:80] Could not start gRPC server",
      "tensorflow.python.framework.errors_impl.UnknownError: Could not start gRPC server"],
     1, "", "worker", "address-in-use"),
    (["OSError: [Errno 98] Address already in use"], 1, "", "worker", "address-in-use"),
    # The engine gone under a container: its output broke off as a peer's would.
    (["ConnectionResetError: [Errno 104] Connection reset by peer"], None,
     "Docker container run error: ('Connection aborted.', ConnectionResetError(104, "
     "'Connection reset by peer'))", "worker", "docker-engine-gone"),
    (["RuntimeError: Failed to add port to server"], 1, "", "worker", "address-in-use"),
    (["tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
      "tensor with shape[4096,4096] on /job:worker/replica:0/task:0/device:GPU:0"], 1, "",
     "worker", "gpu-memory"),
    (["ResourceExhaustedError: OOM when allocating tensor with shape[8192,8192] and type "
      "float on /job:worker/replica:0/task:1/device:CPU:0 by allocator cpu"], 1, "", "worker",
     "memory"),
    (["MemoryError"], 1, "", "ps", "memory"),
    (["terminate called after throwing an instance of 'std::bad_alloc'"], 134, "", "worker",
     "memory"),
    ([], 137, "", "worker", "killed"),
    # a path given (--python /opt/py/bin/python3.12) is not "not on the PATH: give its path"
    (["/bin/sh: 1: exec: /opt/env/bin/trainer: not found"], 127, "", "worker",
     "path-not-found"),
    # sh's word for a command SIGKILLed, by whomever: not "it ran out of memory"
    (["Killed"], 137, "Command exited with status 137", "worker", "killed"),
    (["epoch 1/10 loss 0.4"], None,
     "Memory limit exceeded: Requested: 1024MB Maximum Used: 1024MB", "chief", "memory"),
    (["tensorflow.python.framework.errors_impl.DeadlineExceededError: Collective ops is "
      "aborted by: ..."], 1, "", "worker", "peer-gone"),
    (["tensorflow.python.framework.errors_impl.UnavailableError: {{function_node "
      "__wrapped__CollectiveReduceV2}} Socket closed"], 1, "", "worker", "peer-gone"),
    (["jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out"], 1, "",
     "worker", "peer-gone"),
    (["UNAVAILABLE: failed to connect to all addresses; last error: UNKNOWN: "
      "ipv4:10.0.0.8:31001: Failed to connect to remote host: Connection refused"], 1, "",
     "worker", "peer-gone"),
    (["Collective ops timed out waiting for peers"], 1, "", "worker", "peer-gone"),
    # Before the task reached tfrun: its sandbox's stderr (Python 3.11, dash, bash, the
    # Mesos fetcher and agent, Docker).
    (["/usr/bin/python3: Error while finding module specification for 'tfmesos.task' "
      "(ModuleNotFoundError: No module named 'tfmesos')"], 1,
     "Command exited with status 1", "worker", "no-tfmesos"),
    (["/opt/venv/bin/python: No module named tfmesos"], 1, "", "ps", "no-tfmesos"),
    (["sh: 1: exec: python: not found"], 127, "Command exited with status 127", "worker",
     "python-not-found"),
    (["sh: 1: python: not found"], 127, "", "worker", "python-not-found"),
    (["bash: line 1: python3.9: command not found"], 127, "", "worker", "python-not-found"),
    (["/bin/sh: 1: exec: /opt/conda/bin/python: not found"], 127, "", "worker",
     "python-not-found"),
    (["sh: 1: horovodrun: not found"], 127, "", "worker", "command-not-found"),
    (["bash: nvidia-smi: command not found"], 127, "", "worker", "command-not-found"),
    ([], None, "Failed to fetch 'http://10.0.0.1:41234/Zt0k/bundle.tar.gz': <urlopen error "
     "[Errno 111] Connection refused>", "worker", "fetch-unreachable"),
    (["E0412 fetcher.cpp:613] EXIT with status 1: Failed to fetch "
      "'http://10.0.0.1:41234/b.tar.gz': Error downloading resource: Failed to connect to "
      "10.0.0.1 port 41234: Connection refused"], None,
     "Failed to launch container: Failed to fetch all URIs for container 'c1': exited with "
     "status 1", "worker", "fetch-unreachable"),
    (["Failed to fetch 'http://h:80/env.tar.gz': <urlopen error timed out>"], None, "",
     "worker", "fetch-unreachable"),
    (["Failed to fetch 'hdfs://nn/envs/env.tar.gz': No such file or directory"], None, "",
     "worker", "fetch-failed"),
    (["Failed to fetch 'http://h/tfenv.tar.gz': the local master's fetcher refuses this "
      "archive: member 'bin/python3' is a link to an absolute path, and only links that stay "
      "inside the sandbox are extracted here"], None,
     "Failed to fetch 'http://h/tfenv.tar.gz': the local master's fetcher refuses this "
     "archive: member 'bin/python3' is a link to an absolute path", "worker",
     "fetch-archive-refused"),
    ([], None, "Failed to fetch 'http://h/big.tar.gz': the local master's fetcher refuses this "
     "archive: it expands to more than 4096 MB (200 times its size)", "worker",
     "fetch-archive-refused"),
    (["Failed to fetch 'http://h/env.tar.gz': HTTP Error 404: Not Found"], None, "", "worker",
     "fetch-failed"),
    (["tfmesos: tfmesos-bundle-0123456789abcdef.tar.gz sha256 %s != expected %s: refusing "
      "to run it" % ("1" * 64, "0" * 64)], 65, "Command exited with status 65", "worker",
     "fetch-changed"),
    (["tfmesos: this agent has no sha256sum (coreutils) to check the files the task fetched: "
      "refusing to run them"], 65, "Command exited with status 65", "worker", "no-sha256sum"),
    ([], None, "Failed to create sandbox: Failed to chown directory to 'bob': No such user "
     "'bob'", "worker", "unknown-user"),
    ([], None, "Failed to get user information for 'carol': Success", "ps", "unknown-user"),
    ([], None, "container user 'dave' is not a user of this host, so the image could not "
     "run as it", "worker", "unknown-user"),
    (["docker: Error response from daemon: unable to find user erin: no matching entries in "
      "passwd file."], 125, "", "worker", "unknown-user"),
    (["Traceback (most recent call last):", "  File \"train.py\", line 1, in <module>",
      "    import numpy", "ModuleNotFoundError: No module named 'numpy'"], 1, "", "worker",
     "missing-module"),
]


@pytest.mark.parametrize("lines, code, message, job, rule", CASES,
                         ids=["%s-%d" % (case[-1], i) for i, case in enumerate(CASES)])
def test_each_failure_gets_its_hint(lines, code, message, job, rule):
    assert matching_rule(lines, code, message)[0].name == rule
    hint = hint_for(lines, code, message, job)
    assert hint and "\n" not in hint and "{" not in hint.replace("{worker_hosts}", "")


@pytest.mark.parametrize("lines, code, message", [
    ([], 1, ""),
    (["Traceback (most recent call last):", "ZeroDivisionError: division by zero"], 1, ""),
    (["everything went fine"], 0, ""),
    (["Killed by my own hand"], 3, "Command exited with status 3"),
    (["ZOOM into the model"], 2, ""),
    ([], None, ""),
    (["ERROR: checkpoint file: not found"], 1, ""),      # not a shell's words
    (["sh: 1: ./train.sh: Permission denied"], 126, ""),
    ([], 127, "Command exited with status 127"),
    (["fetched 3 files"], 0, ""),
])
def test_failures_it_does_not_know_get_no_hint(lines, code, message):
    assert hint_for(lines, code, message, "worker") is None


def test_the_hints_say_what_to_do():
    assert "-s 0" in hint_for(["ValueError: There is no id for task_type 'ps'"], 1)
    keras = hint_for(PER_REPLICA_END, 1)
    assert "tf_keras" in keras and "keras.distribution" in keras and "Which Keras?" in keras
    assert "module 'sklearn' is missing" in hint_for(
        ["ModuleNotFoundError: No module named 'sklearn'"], 1)
    in_use = hint_for(["OSError: [Errno 98] Address already in use"], 1)
    assert "{worker_hosts}" in in_use
    # A task that did listen where tfrun said found its offered port held by
    # another program (an agent's ports overlapping a service): the hint only
    # told it to do what it did.
    assert "another program on the agent holds a port Mesos offers" in in_use, in_use
    assert "other tasks' logs" in hint_for(["DEADLINE_EXCEEDED"], 1)


def test_what_a_hint_quotes_of_the_tasks_output_is_escaped():
    # An initializer that ran "\x1b]0;title\a" put a raw BEL (and could put
    # any escape) into tfrun's hint line.
    hint = hint_for(["sh: 1: \x1b]0;title\x07: not found"], 127)
    assert "'\\x1b]0;title\\x07' is not on the agent's PATH" in hint, hint


def test_the_hints_for_failures_before_tfrun_say_what_to_do():
    lines = ["/usr/bin/python3: Error while finding module specification for 'tfmesos.task' "
             "(ModuleNotFoundError: No module named 'tfmesos')"]
    tfmesos = hint_for(lines, 1)
    assert "--ship" in tfmesos and "install tfmesos on the agents" in tfmesos
    # Not "Python module 'tfmesos' is missing": the more specific rule wins.
    assert matching_rule(lines, 1)[0].name == "no-tfmesos"
    python = hint_for(["sh: 1: exec: python: not found"], 127)
    assert python.startswith("'python' does not exist on the agent") and "python3" in python \
        and "--python" in python
    assert hint_for(["sh: 1: horovodrun: not found"], 127).startswith(
        "'horovodrun' is not on the agent's PATH")
    module = hint_for(["ModuleNotFoundError: No module named 'tensorflow'"], 1)
    assert "'tensorflow'" in module and "--python-env" in module and "image" in module
    refused = hint_for([], None, "Failed to fetch 'http://10.0.0.1:41234/x/b.tar.gz': "
                                 "<urlopen error [Errno 111] Connection refused>")
    assert "--advertise-address" in refused and "firewalls" in refused
    assert "exists" in hint_for(["Failed to fetch 'x': HTTP Error 404: Not Found"], None)
    archive = hint_for([], None, "Failed to fetch 'http://h/e.tar.gz': the local master's "
                                 "fetcher refuses this archive: member '../x' leaves the sandbox")
    assert "stays inside the sandbox" in archive and "links" in archive and \
        "--python-env" in archive and "conda-pack" in archive and "exists" not in archive
    user = hint_for([], None, "Failed to chown directory to 'bob': No such user 'bob'")
    assert user.startswith("user 'bob' does not exist on the agent") and "-u USER" in user


def test_the_same_lines_always_get_the_same_hint():
    lines = ["/venv/bin/python: No module named tfmesos"]
    assert len({hint_for(list(lines), 1, "Command exited with status 1", "worker")
                for _ in range(3)}) == 1


def test_the_memory_hint_names_the_jobs_option():
    assert "tfrun -Mw 4096" in hint_for([], 137, "", "worker")
    assert "tfrun -Ms 4096" in hint_for(["MemoryError"], 1, "", "ps")
    assert "tfrun -Mc 4096" in hint_for([], None, "Memory limit exceeded: ...", "chief")
    assert memory_option("evaluator") == "-Mw 4096"
    assert memory_option("tensorboard") == "--job tensorboard:COUNT:CPUS:4096"
    assert memory_option(None) == "-Mw 4096"


def test_the_most_specific_rule_wins():
    # A Keras 3 script started with a ps fails on the ps first.
    assert "-s 0" in hint_for(["ValueError: There is no id for task_type 'ps'"] + PER_REPLICA, 1)
    # What the task said wins over its exit code.
    assert "ran out of memory" in hint_for(["MemoryError"], 137)
    # The last matching line of a rule names the module.
    assert "'b'" in hint_for(["ModuleNotFoundError: No module named 'a'",
                              "ModuleNotFoundError: No module named 'b'"], 1)


# What the local agents said of a task whose sh could not start: the whole
# command quoted (the fetch check's prefix, with its own words for a missing
# sha256sum, then the task's command).
def cannot_start(why, command=None):
    if command is None:
        command = fetch_check.check_command([fetch_check.Fetched(
            "tfmesos-task-3c24f90a5233576a.zip", "3c24" + "0" * 60)]) + \
            "exec python3 -m tfmesos.task"
    return "cannot start %r: %s" % (command, why)


def test_a_failure_gets_the_hint_for_its_cause_not_for_words_of_its_quoted_command():
    # 18 variables of 120 kB (tfmesos.run(env=...)): every attempt failed
    # with E2BIG, and the hint said to install coreutils, from the echo in
    # the quoted command.
    e2big = cannot_start("[Errno 7] Argument list too long: '/bin/sh'")
    assert "tfmesos: this agent has no sha256sum" in e2big
    assert matching_rule([], None, e2big)[0].name == "argument-list-too-long"
    hint = hint_for([], None, e2big, "worker")
    assert "environment" in hint and "128 KiB" in hint and "ARG_MAX" in hint, hint
    assert "coreutils" not in hint, hint
    emfile = cannot_start("[Errno 24] Too many open files")
    assert matching_rule([], None, emfile)[0].name == "too-many-open-files"
    # The local agents' words, a long command's start quoted.
    from mesos_local.containerizer.runner import TaskLaunch, start_failure
    launch = TaskLaunch(task_id="t", framework_id="f", agent_id="a", sandbox="/tmp",
                        command=e2big.split("'", 1)[1], env={"V": "x" * 120000})
    said = start_failure(launch, OSError(7, "Argument list too long"))
    assert "tfmesos: this agent has no sha256sum" in said and "bytes)" in said, said
    assert matching_rule([], None, said)[0].name == "argument-list-too-long", said
    # Whatever the command says, only the failure is read.
    for words in ("ModuleNotFoundError: No module named 'foo'", "Failed to fetch 'x'",
                  "sh: 1: python: not found", "MemoryError"):
        quoting = cannot_start("[Errno 13] Permission denied: '/bin/sh'",
                               "echo %s >&2; exit 1" % shlex.quote(words))
        assert matching_rule([], None, quoting) == (None, None), (words, quoting)
        assert matching_rule([quoting], None) == (None, None), (words, quoting)


def test_tfmesos_own_lines_match_only_as_its_lines():
    # A trace of the command (sh -x) or any other line quoting them is not them.
    quoted_line = "+ echo 'tfmesos: this agent has no sha256sum (coreutils) to check the " \
        "files the task fetched: refusing to run them'"
    assert matching_rule([quoted_line], 1)[0] is None
    changed = "tfmesos: f.zip sha256 %s != expected %s: refusing to run it" % ("1" * 64,
                                                                               "0" * 64)
    assert matching_rule(["+ echo '%s'" % changed], 1)[0] is None
    assert matching_rule([changed], 65)[0].name == "fetch-changed"


def test_out_of_file_descriptors_is_named_wherever_it_struck():
    # ulimit -n 64 and 4 workers: the bundle server, the fetcher, the
    # sandbox and the task's start each ran out; the hint said "check that
    # it exists and that the agents may read it".
    url = "'http://127.0.0.1:44673/Ct/tfmesos-task-3c24f90a5233576a.zip'"
    for message in (
            "Failed to fetch %s: HTTP Error 503: cannot open the file to serve: Too many open "
            "files (this process is out of file descriptors: raise ulimit -n, or run fewer "
            "tasks)" % url,
            "Failed to fetch %s: <urlopen error [Errno 24] Too many open files>" % url,
            "Failed to fetch %s: [Errno 24] Too many open files: '/tmp/mesos-local-1/x.zip'"
            % url,
            "cannot prepare the sandbox /tmp/mesos-local-1/runs/5716: [Errno 24] Too many "
            "open files: 'stdout'",
            cannot_start("[Errno 24] Too many open files")):
        assert matching_rule([], None, message)[0].name == "too-many-open-files", message
        hint = hint_for([], None, message, "worker")
        assert "ulimit -n" in hint and "\n" not in hint, hint
        assert "exists" not in hint, hint
        # The process that serves the shipped files and runs the embedded
        # master's tasks is tfrun's, or the program that calls tfmesos.run.
        assert "tfrun" in hint and "tfmesos.run" in hint, hint
    assert matching_rule(["OSError: [Errno 24] Too many open files: 'data/shard-0311'"],
                         1)[0].name == "too-many-open-files"


def test_a_full_disk_is_named_not_a_missing_file():
    # --ship, TMPDIR on a full tmpfs: the local agents' sandboxes are there.
    message = "Failed to fetch 'http://127.0.0.1:4/t/tfmesos-bundle-0123.tar': [Errno 28] No " \
        "space left on device: '/tmp/mesos-local-1/runs/5/tfmesos-bundle-0123.tar'"
    assert matching_rule([], None, message)[0].name == "no-space"
    hint = hint_for([], None, message, "worker")
    assert "full" in hint and "sandbox" in hint and "TMPDIR" in hint, hint
    assert "exists" not in hint, hint
    assert matching_rule(["OSError: [Errno 28] No space left on device"], 1)[0].name == \
        "no-space"


# -- tfrun -------------------------------------------------------------------------

@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "tfmesos-runs"))
    return tmp_path / "tfmesos-runs"


def test_tfrun_prints_the_hint_after_the_failure_line_and_keeps_it_in_run_json(runs_dir):
    # No TensorFlow: the worker prints what MultiWorkerMirroredStrategy does with a ps task.
    cmd = "echo \"ValueError: There is no id for task_type 'ps'\" >&2; exit 1"
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "--", cmd, timeout=90)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    at = lines.index("tfrun: task worker:0 exited with code 1")
    assert lines[at + 1] == "tfrun: hint: MultiWorkerMirroredStrategy takes no ps tasks: run " \
        "with -s 0 (tfrun starts 1 ps unless told otherwise)"
    assert sum(line.startswith("tfrun: hint: ") for line in lines) == 1
    [run_dir] = list(runs_dir.iterdir())
    with open(run_dir / "run.json", encoding="utf-8") as handle:
        outcome = json.load(handle)["outcome"]
    assert outcome["status"] == "failed" and outcome["task"] == "worker:0"
    assert outcome["hint"] == lines[at + 1][len("tfrun: hint: "):]


def test_a_failure_without_a_known_cause_has_no_hint(runs_dir):
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "--", "echo broken >&2; exit 3", timeout=90)
    assert result.returncode == 3, result.stderr
    assert "hint:" not in result.stderr
    [run_dir] = list(runs_dir.iterdir())
    with open(run_dir / "run.json", encoding="utf-8") as handle:
        assert json.load(handle)["outcome"]["hint"] is None


def test_a_command_killed_with_sigkill_gets_the_memory_hint(runs_dir):
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "--", "kill -9 $$", timeout=90)
    assert result.returncode == 137, result.stderr
    assert "tfrun: hint: the task was killed with SIGKILL (exit code 137)" in result.stderr
    assert "tfrun -Mw 4096" in result.stderr


@pytest.mark.waits
def test_a_failure_a_restart_recovered_keeps_its_hint_in_its_attempt(runs_dir):
    cmd = "if [ \"$TFMESOS_RESTART\" = 0 ]; then " \
          "echo \"ModuleNotFoundError: No module named 'sklearn'\" >&2; exit 1; fi"
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "--max-restarts", "1", "--restart-on",
                       "failure", "--restart-backoff", "0.1", "--", cmd, timeout=90)
    assert result.returncode == 0, result.stderr
    [run_dir] = list(runs_dir.iterdir())
    data = validate_run_json(run_dir / "run.json")
    missing = hint_for(["ModuleNotFoundError: No module named 'sklearn'"], 1)
    assert [(a["exit_code"], a["hint"]) for a in data["tasks"][0]["attempts"]] == [
        (1, missing), (0, None)]
    assert data["outcome"]["hint"] is None
    out = io.StringIO()
    show_run(Run.load(str(run_dir)), out)
    assert "  hint       worker:0 attempt 1: %s\n" % missing in out.getvalue()
