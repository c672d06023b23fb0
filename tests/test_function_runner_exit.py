"""How ``function_runner`` ends a task (``leave``): a failed ``fn`` in a
JAX group leaves without JAX's exit function ``jax._src.api.clean_up``,
whose ``jax.distributed.shutdown()`` waits at the group's shutdown barrier
for every other process (``shutdown_timeout_seconds``, 300 s by default):
the rank that raised would run on, its error unseen, until its peers end.
Other exit functions still run, and a ``fn`` that returned keeps JAX's.
(A stand-in ``jax._src.api`` module: no JAX imported; the two-rank run is
tests/test_run_frameworks.py's.)"""

import subprocess
import sys

import pytest
from tfrun_helpers import REPO

SCRIPT = """
import atexit, contextlib, sys, types
from tfmesos.task import function_runner

api = types.ModuleType("jax._src.api")
def clean_up():
    print("jax clean_up: distributed.shutdown()", flush=True)
api.clean_up = clean_up
sys.modules.update({"jax": types.ModuleType("jax"), "jax._src": types.ModuleType("jax._src"),
                    "jax._src.api": api})
atexit.register(clean_up)
atexit.register(print, "the script's own exit function", flush=True)

def fn():
    if sys.argv[1] == "raises":
        raise RuntimeError("fn failed")
    return 1

function_runner.load = lambda environ: (fn, ())
function_runner.framework_group = lambda environ: contextlib.nullcontext()
function_runner.leave(function_runner.main({"TFMESOS_RESULT_FILE": sys.argv[2],
                                            "TFMESOS_FRAMEWORK": "jax",
                                            "TFMESOS_JOB_NAME": "worker",
                                            "TFMESOS_TASK_INDEX": "0"}))
"""


@pytest.mark.parametrize("outcome, code, clean_up", [("raises", 1, False), ("returns", 0, True)])
def test_a_failed_fn_in_a_jax_group_leaves_without_jax_s_shutdown(tmp_path, outcome, code,
                                                                  clean_up):
    result = subprocess.run([sys.executable, "-c", SCRIPT, outcome, str(tmp_path / "result")],
                            capture_output=True, text=True, timeout=60, cwd=REPO,
                            env={"PYTHONPATH": REPO, "PATH": "/usr/bin:/bin"})
    assert result.returncode == code, result.stderr
    assert "the script's own exit function" in result.stdout
    assert ("jax clean_up" in result.stdout) is clean_up, result.stdout
