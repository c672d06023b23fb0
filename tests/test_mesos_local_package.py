"""mesos_local is a package of its own: it installs alone from this
repository (``pip install ./mesos_local``: mesos_local/pyproject.toml) with
its ``mesos-local`` command, runs with nothing of tfmesos importable, speaks
of Mesos rather than of tfmesos in what it says to users, and its own tests
(``pytest -m mesos_local``, conftest's ``MESOS_LOCAL_MODULES``) run with
TensorFlow absent."""

import ast
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import MESOS_LOCAL_MODULES

try:
    import tomllib
except ImportError:     # Python < 3.11: the package list is checked where it runs
    tomllib = None

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "mesos_local")
# Packages a framework's tests may lack; a user of mesos-local needs none.
ABSENT = ("tensorflow", "tf_keras", "keras", "torch", "jax", "jaxlib")

pytestmark = pytest.mark.timeout(300)


def _python_files(root):
    """The .py files under ``root``, relative to it (what the package is)."""
    found = set()
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.endswith(".egg-info")]
        found.update(os.path.relpath(os.path.join(directory, name), root)
                     for name in files if name.endswith(".py"))
    return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``pip install --target DIR --no-deps`` of a copy of mesos_local/ (so
    the build leaves nothing in the checkout); yields DIR. No build
    isolation: the test runs where nothing can be downloaded."""
    base = tmp_path_factory.mktemp("mesos-local")
    source = base / "src" / "mesos_local"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns(
        "__pycache__", "*.pyc", "*.egg-info"))
    target = base / "target"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-cache-dir", "--disable-pip-version-check", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=240, cwd=str(base))
    assert result.returncode == 0, result.stdout + result.stderr
    return target


def _alone(target, *argv, timeout=120):
    """Run ``python -S ARGV`` with only ``target`` on the path: no site
    packages, so neither tfmesos nor anything else installed is importable."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(target),
           "HOME": os.environ.get("HOME", "/root")}
    marker = "TFMESOS_TEST_SESSION"      # conftest's leak check finds what it starts
    env[marker] = os.environ[marker]
    return subprocess.run([sys.executable, "-S", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(target))


def test_it_installs_alone_with_every_module(installed):
    assert _python_files(installed / "mesos_local") == _python_files(PACKAGE)
    assert (installed / "bin" / "mesos-local").is_file()


def test_it_runs_alone_and_imports_nothing_of_tfmesos(installed):
    script = (
        "import json, sys, urllib.request\n"
        "import mesos_local\n"
        "from mesos_local import AgentSpec, LocalMaster\n"
        "with LocalMaster(agents=[AgentSpec(cpus=1, mem=256)], strict=True) as master:\n"
        "    with urllib.request.urlopen(master.url + '/version', timeout=30) as answer:\n"
        "        version = json.load(answer)['version']\n"
        "print(json.dumps({'file': mesos_local.__file__, 'version': version,\n"
        "                  'names': [n for n in mesos_local.__all__\n"
        "                            if getattr(mesos_local, n, None) is None],\n"
        "                  'foreign': sorted(m for m in sys.modules\n"
        "                                    if m.split('.')[0] in ('tfmesos',) + %r)}))\n"
        % (ABSENT,))
    result = _alone(installed, "-c", script)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["file"] == str(installed / "mesos_local" / "__init__.py")
    assert seen["version"].startswith("1.")
    assert seen["names"] == [] and seen["foreign"] == []


def test_its_command_runs_alone(installed):
    result = _alone(installed, str(installed / "bin" / "mesos-local"), "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: mesos-local ")
    assert "tfmesos" not in result.stdout and "tfrun" not in result.stdout


@pytest.mark.skipif(tomllib is None, reason="tomllib: Python 3.11")
def test_the_distribution_lists_every_subpackage():
    with open(os.path.join(PACKAGE, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)
    subpackages = sorted(
        "mesos_local" + ("." + os.path.relpath(d, PACKAGE).replace(os.sep, ".")
                         if d != PACKAGE else "")
        for d, dirs, files in os.walk(PACKAGE) if "__init__.py" in files)
    assert sorted(project["tool"]["setuptools"]["packages"]) == subpackages
    assert project["project"]["scripts"] == {"mesos-local": "mesos_local.command_line:main"}


def _user_facing_strings(path):
    """The string constants of ``path`` that are not docstrings (comments
    are not in the tree): what the module may say to a user."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_what_mesos_local_says_names_mesos_not_tfmesos():
    # Errors and help speak of Mesos' flags and concepts and mesos-local's
    # options; a framework that starts the master adds its own advice
    # where it catches an error (tfmesos: backends/sizing.py).
    wrong = []
    for name in sorted(_python_files(PACKAGE)):
        for line, text in _user_facing_strings(os.path.join(PACKAGE, name)):
            if "tfmesos" in text.lower() or "tfrun" in text.lower():
                wrong.append("mesos_local/%s:%d: %r" % (name, line, text))
    assert not wrong, "user-facing strings naming tfmesos:\n" + "\n".join(wrong)


def test_its_own_tests_are_collected_with_tensorflow_absent():
    # `pytest -m mesos_local` imports only the listed modules (conftest's
    # pytest_ignore_collect), and none of them needs TensorFlow, Keras,
    # PyTorch or JAX: hidden here as tests/process_site hides JAX.
    env = dict(os.environ, TFMESOS_TEST_HIDDEN_PACKAGES=",".join(ABSENT),
               PYTHONPATH=os.pathsep.join(
                   [os.path.join(REPO, "tests", "process_site")]
                   + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", "mesos_local", "tests"],
        capture_output=True, text=True, timeout=240, cwd=REPO, env=env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    ids = [line for line in result.stdout.splitlines() if "::" in line]
    modules = {i.split("::")[0].rsplit("/", 1)[-1][:-3] for i in ids}
    assert modules == set(MESOS_LOCAL_MODULES), sorted(modules ^ set(MESOS_LOCAL_MODULES))
