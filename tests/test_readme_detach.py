"""The README's long-run example runs as written (issue 35, item 1): its
lines under "Long runs: detach and attach", read from README.md (so that
this test breaks when they change), run verbatim against the background
``tfmesos local-master`` they start, only the master's address changed (a
free port for 5050). ``python`` in the command is then the interpreter
running tfrun, packages and all, for a shipped and detached run too (the
master's agents run here: ``cli.tfrun_python``); a python3 from the agents'
PATH (``/usr/bin/python3``, no TensorFlow; no ``python`` beside it) was.

And a detached run that fails at once says so where one looks next:
``tfmesos runs --master`` (its outcome, and why under the table) and
``tfmesos attach`` (the same, exit 1), whether attach finds it going or
finished."""

import os
import re
import shlex
import shutil
import signal
import subprocess

import pytest
from installed import require
from tfrun_helpers import REPO, background_master, free_port, reaped, release
from waiting import wait_until

pytestmark = pytest.mark.timeout(300)

HEADING = "### Long runs: detach and attach"
ADDRESS = "127.0.0.1:5050"

# A long run in miniature: it says which interpreter runs it, then works
# until the file FLAG exists (the test's word that it may end).
TRAIN = """\
import os, sys, time
print("python", os.path.realpath(sys.executable), flush=True)
while not os.path.exists(FLAG):
    time.sleep(0.1)
print("done", flush=True)
"""

# What the tensorflow test's train.py does: what python3 on the agents lacked.
TRAIN_TF = """\
import tensorflow as tf
print("tensorflow", tf.__version__, flush=True)
"""


def readme_block():
    """The lines of the first code block under HEADING in README.md."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    section = text.split(HEADING, 1)[1]
    found = re.search(r"^```\n(.*?)^```$", section, re.S | re.M)
    assert found, "no code block under %r in README.md" % HEADING
    return found.group(1).splitlines()


def readme_lines():
    """(the master's command line, tfrun's, the output lines tfrun prints
    as the README shows them)."""
    lines = readme_block()
    [master] = [line for line in lines if line.startswith("tfmesos local-master ")]
    [tfrun] = [line for line in lines if line.startswith("tfrun ")]
    output = [line for line in lines if line not in (master, tfrun)]
    return master, tfrun, output


def at(text, address):
    """``text`` with the README's master address (and port) replaced."""
    port = address.rsplit(":", 1)[1]
    return text.replace(ADDRESS, address).replace("--port 5050", "--port %s" % port)


def printed_pattern(lines, address):
    """A pattern that tfrun's output matches where it prints the README's
    ``lines`` (the run id and framework id being this run's)."""
    run_id = re.search(r"^run (\w+) detached", lines[0]).group(1)
    pattern = re.escape(at("\n".join(lines), address)).replace(re.escape(run_id), r"(\w+)")
    pattern = re.sub(r"framework\\ \S+?\\\)", r"framework\\ [\\w-]+\\)", pattern)
    return pattern.replace(r"(\w+)", r"(?P<run>\w+)", 1).replace(r"(\w+)", r"(?P=run)")


@pytest.fixture(scope="module")
def readme_master(tmp_path_factory):
    """The README's ``tfmesos local-master`` line, run in the background at
    a free port (its tasks marked as this session's, ``marked_tasks``);
    its address. Stopped at the end, with every task it runs."""
    line, _, _ = readme_lines()
    address = "127.0.0.1:%d" % free_port()
    words = shlex.split(at(line, address), comments=True)
    assert words[-1] == "&", line     # the README starts it in the background
    log = tmp_path_factory.mktemp("readme-master") / "master.log"
    with background_master(words[:-1], log, REPO):
        yield address


def run(words, cwd, timeout=120):
    return subprocess.run(words, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, MESOS_MASTER=""))


def tfmesos(*args, address, cwd, timeout=60):
    return run(["tfmesos", *args, "--master", address], cwd, timeout)


def submit(address, project):
    """Run the README's tfrun line verbatim in ``project``; the run id,
    checking that tfrun printed what the README shows."""
    _, line, output = readme_lines()
    submitted = run(shlex.split(at(line, address)), project)
    assert submitted.returncode == 0, submitted.stderr
    found = re.search(printed_pattern(output, address), submitted.stdout)
    assert found, "tfrun printed:\n%s\nthe README shows:\n%s" % (submitted.stdout,
                                                                 "\n".join(output))
    return found.group("run"), submitted.stdout


def interpreter_of(script):
    """The real path of the interpreter that runs the console script ``script``."""
    with open(shutil.which(script), encoding="utf-8") as handle:
        first = handle.readline()
    assert first.startswith("#!"), first
    return os.path.realpath(shlex.split(first[2:])[0])


def commands_printed(stdout):
    """{what: argv} of the commands tfrun printed after its first line."""
    return {what: shlex.split(command) for what, command in
            re.findall(r"^  (.+?):\s+(tfmesos .+)$", stdout, re.M)}


def test_the_readme_lines_run_as_written_with_the_interpreter_running_tfrun(readme_master,
                                                                            tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    flag = tmp_path / "finish"
    (project / "train.py").write_text("FLAG = %r\n" % str(flag) + TRAIN)
    run_id, stdout = submit(readme_master, project)
    printed = commands_printed(stdout)
    assert set(printed) == {"follow it", "its output", "its record", "stop it"}, stdout
    # tfmesos attach RUN --master M, as tfrun printed it: it follows the run.
    attach = subprocess.Popen(printed["follow it"], cwd=project, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    with reaped(attach):
        def started():    # both workers said which python runs them, or the run ended
            logs = run(printed["its output"], project).stdout
            return logs if logs.count("] python ") == 2 or attach.poll() is not None else None
        logs = wait_until(started, timeout=120, message="the workers never started")
        assert logs.count("] python ") == 2, attach.communicate()
        out, err = release(flag, attach)
    assert attach.returncode == 0, err
    assert "run %s ended: succeeded" % run_id in err
    assert "[worker:0] done" in out and "[worker:1] done" in out, out
    # Both workers ran python train.py with the interpreter running tfrun.
    tfrun = interpreter_of("tfrun")
    for task in ("worker:0", "worker:1"):
        assert "[%s] python %s" % (task, tfrun) in logs, logs
    shown = run(printed["its record"], project)
    assert shown.returncode == 0 and "succeeded" in shown.stdout, shown.stderr
    listed = tfmesos("runs", address=readme_master, cwd=project)
    assert re.search(r"^%s +train\.py +succeeded " % run_id, listed.stdout, re.M), listed.stdout


def test_a_detached_run_that_fails_at_once_says_why_in_runs_and_attach(readme_master,
                                                                       tmp_path):
    # As the README's run, but its command fails at once, saying why on stderr.
    _, line, _ = readme_lines()
    words = shlex.split(at(line, readme_master))
    words = words[:words.index("--")] + [
        "-Cw", "0.2", "-Mw", "128", "--", "python", "-c",
        "import sys; sys.exit('no data in /data/train')"]
    words[words.index("-w") + 1] = "1"
    submitted = run(words, tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    [run_id] = re.findall(r"^run (\w+) detached", submitted.stdout, re.M)
    reason = "worker:0: no data in /data/train"
    # attach at once (the run going, or already over): the failure, exit 1.
    attached = tfmesos("attach", run_id, address=readme_master, cwd=tmp_path)
    assert attached.returncode == 1, attached.stdout + attached.stderr
    assert reason in attached.stdout + attached.stderr
    assert "failed (exit 1, worker:0)" in attached.stdout + attached.stderr
    listed = tfmesos("runs", address=readme_master, cwd=tmp_path)
    assert re.search(r"^%s +\S+ +failed \(exit 1, worker:0\) " % run_id, listed.stdout,
                     re.M), listed.stdout
    assert re.search(r"^%s: %s$" % (run_id, re.escape(reason)), listed.stdout, re.M), \
        listed.stdout
    # attach of the finished run: the same, at once.
    again = tfmesos("attach", run_id, address=readme_master, cwd=tmp_path)
    assert again.returncode == 1, again.stderr
    assert again.stdout.splitlines()[:2] == [
        "run %s has finished: failed (exit 1, worker:0)" % run_id, "  " + reason]


@pytest.mark.tensorflow
def test_the_readme_lines_run_a_tensorflow_script(readme_master, tmp_path):
    # The issue's case: train.py imports TensorFlow, which the agents'
    # python3 lacks; the interpreter running tfrun has it.
    require("tensorflow")
    (tmp_path / "train.py").write_text(TRAIN_TF)
    run_id, stdout = submit(readme_master, tmp_path)
    attached = run(commands_printed(stdout)["follow it"], tmp_path, timeout=240)
    assert attached.returncode == 0, attached.stderr
    logs = tfmesos("logs", run_id, address=readme_master, cwd=tmp_path)
    assert len(re.findall(r"^\[worker:\d\] tensorflow 2\.", logs.stdout, re.M)) == 2, \
        logs.stdout + logs.stderr


def test_a_detached_run_whose_scheduler_cannot_start_says_why_in_runs_and_attach(
        readme_master, tmp_path):
    _, line, _ = readme_lines()
    words = shlex.split(at(line, readme_master))
    words[words.index("--"):words.index("--")] = ["--python", "/nonexistent/bin/python"]
    submitted = run(words, tmp_path)
    assert submitted.returncode == 1, submitted.stderr
    assert "the scheduler task ended before it took the run over" in submitted.stderr
    listed = tfmesos("runs", address=readme_master, cwd=tmp_path)
    # Its id: in tfrun's line about its scheduler task, else the newest run.
    named = set(re.findall(r"tfmesos\.(\w+)\.scheduler\.", submitted.stderr))
    run_id = named.pop() if named else listed.stdout.splitlines()[1].split()[0]
    assert re.search(r"^%s +train\.py +aborted: the scheduler task " % run_id, listed.stdout,
                     re.M), listed.stdout
    assert re.search(r"^%s: scheduler: .*/nonexistent/bin/python: not found$" % run_id,
                     listed.stdout, re.M), listed.stdout
    attached = tfmesos("attach", run_id, address=readme_master, cwd=tmp_path)
    assert attached.returncode == 1, attached.stderr
    assert "run %s has finished: aborted: the scheduler task" % run_id in attached.stdout
