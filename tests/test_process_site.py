"""The suite's own process site (tests/process_site/sitecustomize.py): the
processes tests start hide JAX unless their test is marked ``jax``, and
freeze the garbage collector at exit."""

import importlib.metadata
import subprocess
import sys

import pytest

PROBE = "try:\n    import jax\nexcept ImportError as e:\n    print(e)\nelse:\n    print('imported')"


def _probe():
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120).stdout.strip()


def test_a_tests_processes_do_not_see_jax():
    assert "hidden from this test's processes" in _probe()


@pytest.mark.jax
def test_a_test_marked_jax_lets_its_processes_import_it():
    # Installed? Asked of its metadata, not by importing it: a pytest-xdist
    # worker is itself one of the suite's processes, with JAX hidden.
    try:
        importlib.metadata.distribution("jax")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("JAX is not installed")
    assert _probe() == "imported"


def test_a_process_freezes_the_collector_as_its_last_exit_handler():
    code = ("import atexit, gc\natexit.register(lambda: print('frozen before mine:', "
            "gc.get_freeze_count() > 0))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60).stdout
    # Registered first, it runs last: the user's exit handlers still see a
    # collector that was not frozen.
    assert out.strip() == "frozen before mine: False"
    code = "import atexit, gc, os\natexit._run_exitfuncs()\nprint(gc.get_freeze_count() > 0)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60).stdout
    assert out.strip() == "True"
