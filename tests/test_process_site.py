"""The suite's own process site (tests/process_site/sitecustomize.py): the
processes tests start hide JAX unless their test is marked ``jax`` and
IPython unless it is marked ``notebook``, and freeze the garbage collector
at exit; so do the tasks that ``cluster()`` in the test's own process starts."""

import ast
import importlib.metadata
import os
import subprocess
import sys

import pytest

from tfmesos.core.taskinfo import submitter_pythonpath

PROBE = "try:\n    import %s\nexcept ImportError as e:\n    print(e)\nelse:\n    print('imported')"


def _probe(package="jax", env=None):
    return subprocess.run([sys.executable, "-c", PROBE % package], capture_output=True,
                          text=True, timeout=120, env=env).stdout.strip()


def test_a_tests_processes_do_not_see_jax():
    assert "hidden from this test's processes" in _probe()


def test_a_tests_processes_do_not_see_ipython():
    # Installed for the notebook test (ipykernel); Keras imports it where it
    # can (keras/src/saving/file_editor.py): ~0.4 s of CPU a TensorFlow process.
    assert "hidden from this test's processes" in _probe("IPython")


def test_the_tasks_of_a_cluster_in_the_tests_own_process_have_the_process_site():
    # A plain task's PYTHONPATH is its submitter's sys.path (taskinfo): the
    # fine-grained tasks of ``cluster()`` run in the test's own process
    # (whose PYTHONPATH the suite set after it started) run the site too.
    env = dict(os.environ, PYTHONPATH=submitter_pythonpath())
    assert "hidden from this test's processes" in _probe(env=env)


@pytest.mark.parametrize("package, distribution", [
    pytest.param("jax", "jax", marks=pytest.mark.jax),
    pytest.param("IPython", "ipython", marks=pytest.mark.notebook)])
def test_a_test_marked_for_a_package_lets_its_processes_import_it(package, distribution):
    # Installed? Asked of its metadata, not by importing it: a pytest-xdist
    # worker is itself one of the suite's processes, with the package hidden.
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("%s is not installed" % package)
    assert _probe(package) == "imported"


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


def _imports_tensorflow(tree):
    """Whether a test module's code (not its strings), but for what is
    marked ``tensorflow`` (the training lane, without pytest-xdist),
    imports TensorFlow."""
    if any(isinstance(node, ast.Assign) and "tensorflow" in ast.unparse(node.value)
           and any(getattr(target, "id", None) == "pytestmark" for target in node.targets)
           for node in tree.body):
        return False
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.ClassDef)) and any(
                "tensorflow" in ast.unparse(decorator) for decorator in top.decorator_list):
            continue
        for node in ast.walk(top):
            if isinstance(node, ast.Import) and any(
                    alias.name.partition(".")[0] == "tensorflow" for alias in node.names):
                return True
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tensorflow"):
                return True
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip"
                    and node.args and getattr(node.args[0], "value", None) == "tensorflow"):
                return True
    return False


def test_modules_that_import_tensorflow_into_pytest_run_on_one_worker():
    """Each pytest-xdist worker that runs such a test imports TensorFlow
    (~8 s of CPU): their modules are grouped onto one (conftest)."""
    import conftest
    here = os.path.dirname(os.path.abspath(__file__))
    importing = set()
    for name in sorted(os.listdir(here)):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(here, name), encoding="utf-8") as handle:
                tree = ast.parse(handle.read())
            if _imports_tensorflow(tree):
                importing.add(name[:-3])
    assert importing and importing <= conftest.TENSORFLOW_IN_PROCESS, importing
