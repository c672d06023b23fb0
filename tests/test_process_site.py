"""The suite's own process site (tests/process_site/sitecustomize.py): the
processes tests start hide JAX unless their test is marked ``jax`` and
IPython unless it is marked ``notebook``, and freeze the garbage collector
at exit; so do the tasks that ``cluster()`` in the test's own process starts."""

import ast
import importlib.metadata
import os
import subprocess
import sys
import types

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


def test_a_tfrun_a_test_starts_runs_its_task_entries_without_site(tmp_path):
    # As from a pip install: the checkout is on the processes' PYTHONPATH
    # (an editable install's finder alone made every task entry run site).
    probe = ("from tfmesos.core.taskinfo import package_on_path, submitter_pythonpath\n"
             "print(package_on_path(submitter_pythonpath()))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert result.stdout.strip() == "True", result.stderr


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


def _imported(nodes, into_bodies=True):
    """The top-level packages ``nodes`` (statements) import, by ``import``,
    ``from ... import`` or ``pytest.importorskip``; ``into_bodies``: also
    in the bodies of the functions and classes among them."""
    found = set()
    pending = list(nodes)
    while pending:
        node = pending.pop()
        if not into_bodies and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.ClassDef)):
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip"
              and node.args and isinstance(getattr(node.args[0], "value", None), str)):
            found.add(node.args[0].value)
        pending.extend(ast.iter_child_nodes(node))
    return {name.partition(".")[0] for name in found}


def _runs_in_pytest(node):
    """Whether a module's top-level ``node`` runs in pytest: the module's
    own statements, its tests and fixtures; not its other functions and
    classes, which a test may ship to a task (``tfmesos.run``)."""
    if isinstance(node, ast.ClassDef):
        return node.name.startswith("Test")
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name.startswith("test_") or any(
            "fixture" in ast.unparse(decorator) for decorator in node.decorator_list)
    return True


def _imports(tree, framework):
    """Whether a test module's code (not its strings) imports ``framework``
    into pytest, but for what is marked ``tensorflow`` (TensorFlow's tests
    run in the training lane, without pytest-xdist)."""
    exempt = framework == "tensorflow"
    if exempt and any(isinstance(node, ast.Assign) and framework in ast.unparse(node.value)
                      and any(getattr(target, "id", None) == "pytestmark"
                              for target in node.targets)
                      for node in tree.body):
        return False
    return framework in _imported(
        top for top in tree.body if _runs_in_pytest(top) and not (
            exempt and isinstance(top, (ast.FunctionDef, ast.ClassDef)) and any(
                framework in ast.unparse(decorator) for decorator in top.decorator_list)))


@pytest.mark.parametrize("framework", ["tensorflow", "torch"])
def test_modules_that_import_a_framework_into_pytest_run_on_one_worker(framework):
    """Each pytest-xdist worker that runs such a test imports the framework
    (TensorFlow ~8 s of CPU, torch ~2 s): their modules are grouped onto
    one (conftest.IN_PROCESS)."""
    import conftest
    here = os.path.dirname(os.path.abspath(__file__))
    importing = set()
    for name in sorted(os.listdir(here)):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(here, name), encoding="utf-8") as handle:
                tree = ast.parse(handle.read())
            if _imports(tree, framework):
                importing.add(name[:-3])
    assert importing and importing <= conftest.IN_PROCESS[framework], importing


def test_collecting_the_suite_imports_no_training_framework():
    # Not as it collects either (conftest.FRAMEWORKS): every session (each
    # xdist worker, each lane) collects every module, and torch alone was ~2 s
    # of CPU a session, then a heavier garbage collector for the rest of it.
    import conftest
    here = os.path.dirname(os.path.abspath(__file__))
    helpers = {name[:-3] for name in os.listdir(here) if name.endswith(".py")}
    pending = {name for name in helpers if name.startswith("test_") or name == "conftest"}
    seen, importing = set(), {}
    while pending:
        module = pending.pop()
        seen.add(module)
        with open(os.path.join(here, module + ".py"), encoding="utf-8") as handle:
            imported = _imported(ast.parse(handle.read()).body, into_bodies=False)
        if imported & conftest.FRAMEWORKS:
            importing[module] = sorted(imported & conftest.FRAMEWORKS)
        pending |= (imported & helpers) - seen
    assert len(seen) > 100 and importing == {}


def test_a_test_that_imports_a_framework_into_pytest_is_named():
    """conftest's check after every test (indirect imports too: a
    cluster()'s ``c.cluster_spec`` made the training lane's pytest import
    TensorFlow), but in the modules IN_PROCESS names. (sys.modules is put
    back by hand: the check runs before monkeypatch's undo.)"""
    import conftest
    real = sys.modules.pop("sklearn", None)
    before = {name for name in conftest.FRAMEWORKS if name in sys.modules}
    sys.modules["sklearn"] = types.ModuleType("sklearn")
    try:
        said = conftest.frameworks_imported(before, "test_anything")
        assert said.startswith("this test imported sklearn into pytest's own process: "), said
        assert conftest.frameworks_imported(before, "test_metrics_torch") is None
        assert conftest.frameworks_imported(before | {"sklearn"}, "test_anything") is None
    finally:
        del sys.modules["sklearn"]
        if real is not None:
            sys.modules["sklearn"] = real
