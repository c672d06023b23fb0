"""``tfrun --ship`` with image tasks (real Docker): the shipped project is
the container's working directory, with no volume, under both
containerizers."""

import os
import subprocess

import pytest
from fixtures_docker import docker_engine, no_leaked_containers, tfmesos_image
from tfrun_helpers import REPO, SMALL, tfrun_argv

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300, func_only=True)]

SCRIPT = """\
import os, sys
import tfmesos
from mylib import GREETING
print(GREETING, os.getcwd() == os.path.join(os.environ["MESOS_SANDBOX"], "project"))
print("tfmesos", tfmesos.__file__)
"""


@pytest.mark.parametrize("containerizer", ["MESOS", "DOCKER"])
def test_an_image_task_runs_the_shipped_script_without_volumes(
        tfmesos_image, no_leaked_containers, tmp_path, containerizer):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "myscript.py").write_text(SCRIPT)
    (project / "mylib.py").write_text("GREETING = 'hello from the bundle'\n")
    env = dict(os.environ, MESOS_MASTER="",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    try:
        result = subprocess.run(tfrun_argv("--ship", "-C", containerizer, "-I", tfmesos_image,
                                           "-w", "1", "-s", "0", *SMALL, "--", "python",
                                           "myscript.py"),
                                cwd=str(project), env=env, capture_output=True, text=True,
                                timeout=180)
    except subprocess.TimeoutExpired as exc:
        pytest.fail("tfrun --ship -I did not finish within 180 s: %s" % exc.stderr)
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert "[worker:0] hello from the bundle True" in out
    loaded = [line for line in out if line.startswith("[worker:0] tfmesos ")]
    # From the zip in the sandbox: its bytecode where the image's Python is the packer's.
    assert len(loaded) == 1 and loaded[0].endswith((".zip/tfmesos/__init__.py",
                                                    ".zip/tfmesos/__init__.pyc")), out
