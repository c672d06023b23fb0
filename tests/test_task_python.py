"""``--python`` is the task's interpreter: it runs the task entry, and
``python`` / ``python3`` in the command are its too (its directory comes
first on the task's PATH; the rest of PATH stays as the task has it)."""

import os
import subprocess
import sys

import pytest
from tfrun_helpers import SMALL, run_tfrun

from tfmesos.core.spec import RunSpec
from tfmesos.core.taskinfo import task_command, warm_task_command

ENTRY = "-m tfmesos.task"


def venv_with_marker(tmp_path):
    """A virtual environment whose site-packages alone holds ``marker``."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True, timeout=60)
    with open(os.path.join(purelib.stdout.strip(), "marker.py"), "w") as handle:
        handle.write("WHERE = 'the venv'\n")
    return venv


def test_the_command_s_python_is_the_python_option_s(tmp_path):
    venv = venv_with_marker(tmp_path)
    probe = "import marker, sys; print(marker.WHERE, sys.prefix == %r)" % str(venv)
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "--python", str(venv / "bin" / "python"),
                       "--",
                       "python3 -c \"%s\" && python -c \"%s\" && echo PATH=$PATH" % (probe, probe),
                       timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines.count("[worker:0] the venv True") == 2, result.stdout
    # The rest of PATH is the task's own: the venv's bin/ comes before it.
    [path] = [line.split("=", 1)[1] for line in lines if line.startswith("[worker:0] PATH=")]
    assert path == "%s:%s" % (venv / "bin", os.environ["PATH"])


def test_the_python_option_s_directory_comes_first_on_path():
    assert task_command(None, "/opt/py/bin/python3") == (
        'PATH=/opt/py/bin"${PATH:+:$PATH}" exec /opt/py/bin/python3 ' + ENTRY)
    assert task_command(None, "/opt/my py/bin/python3", no_site=True) == (
        "PATH='/opt/my py/bin'\"${PATH:+:$PATH}\" exec '/opt/my py/bin/python3' -S " + ENTRY)
    # A name looked up on PATH changes nothing; an image has its own python3.
    assert task_command(None, "python3.11") == "exec python3.11 " + ENTRY
    assert task_command("tfmesos/tfmesos", "/opt/py/bin/python3") == "exec python3 " + ENTRY
    # Without --python: this interpreter, its directory first too.
    assert task_command(None) == 'PATH=%s"${PATH:+:$PATH}" exec %s %s' % (
        os.path.dirname(sys.executable), sys.executable, ENTRY)


@pytest.mark.parametrize("warm", ["1", "0"])
def test_without_the_python_option_the_command_s_python_is_the_one_running_tfrun(warm):
    # The README's promise ("default: the one running tfrun ... so python
    # and python3 in your command are that interpreter too"): PATH was left
    # as it was, so tfrun run by its path from a virtual environment not
    # activated (or a PATH without it) gave `python: not found` (exit 127),
    # or another Python without the packages (found by a review helper).
    path = "/usr/bin:/bin"
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "--",
                       "python -c 'import sys; print(sys.prefix)' && echo PATH=$PATH",
                       env={"PATH": path, "TFMESOS_WARM_TASKS": warm}, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "[worker:0] %s" % sys.prefix in lines, result.stdout
    assert "[worker:0] PATH=%s:%s" % (os.path.dirname(sys.executable), path) in lines, lines


def test_a_run_with_the_python_option_does_not_start_warm(monkeypatch):
    # Another interpreter (a wrapper, perhaps) is the user's to run at each
    # task start.
    monkeypatch.delenv("TFMESOS_WARM_TASKS", raising=False)
    run = RunSpec(jobs=[{"name": "worker"}], mode="replica", command="true", master="local")
    assert warm_task_command(run) is not None
    for python in (sys.executable, "/opt/py/bin/python3"):
        run = RunSpec(jobs=[{"name": "worker"}], mode="replica", command="true", master="local",
                      python=python)
        assert warm_task_command(run) is None, python


def test_a_pythonpath_the_user_gives_comes_after_the_one_tfrun_gives(tmp_path):
    # -E PYTHONPATH=/mine was replaced by tfrun's own without a word (found
    # by a review helper); a shipped task's command keeps it after its bundle.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "my_module.py").write_text("WHERE = 'mine'\n")
    result = run_tfrun("-w", "1", "-s", "0", *SMALL, "-E", "PYTHONPATH=%s" % mine, "--",
                       "python -c 'import my_module; print(my_module.WHERE)'", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "[worker:0] mine" in result.stdout.splitlines()
