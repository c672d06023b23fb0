"""The commands the README shows, run as a user runs them."""

import os
import subprocess
import sys
import time

from tfrun_helpers import REPO, free_port, marked_tasks, wait_for_line


def test_mesos_hello_against_a_standalone_local_master():
    port = free_port()
    master = subprocess.Popen(["tfmesos", "local-master", "--port", str(port), *marked_tasks()],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_line(master.stdout, "listening on http://127.0.0.1:%d" % port, timeout=30)
        result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "mesos_hello.py"),
                                 "127.0.0.1:%d" % port], capture_output=True, text=True, timeout=90)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [
            "task hello is TASK_STARTING", "task hello is TASK_RUNNING",
            "task hello is TASK_FINISHED", "final state: TASK_FINISHED Command exited with status 0"]
    finally:
        master.terminate()
        master.wait(30)
    assert master.returncode == 0


def test_the_readme_s_own_framework_test_against_mesos_local():
    """The README's "Test your own framework against it", as written there."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    start = readme.index("### Test your own framework against it")
    code = readme[readme.index("```python\n", start) + 10:readme.index("```", readme.index(
        "```python\n", start) + 10)]
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        namespace["test_mesos_hello_runs_its_task"]()
    finally:
        os.chdir(cwd)


def test_mesos_local_is_a_command_of_its_own():
    result = subprocess.run(["mesos-local", "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout.startswith("usage: mesos-local")


def test_tfmesos_command_help_and_errors():
    assert "local-master" in subprocess.run(["tfmesos", "--help"], capture_output=True,
                                            text=True).stdout
    bad = subprocess.run(["tfmesos", "frobnicate"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown command 'frobnicate'" in bad.stderr
    version = subprocess.run(["tfmesos", "version"], capture_output=True, text=True)
    assert version.stdout.startswith("tfmesos ")


def test_malformed_master_is_a_one_line_usage_error():
    started = time.monotonic()
    result = subprocess.run(["tfrun", "-m", "foo:bar", "--", "true"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("tfrun: error: invalid Mesos master 'foo:bar'")
    assert "zk://host:port" in last and "Traceback" not in result.stderr
    assert time.monotonic() - started < 20
