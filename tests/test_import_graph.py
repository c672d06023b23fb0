"""Who imports whom, read from the source with ``ast`` (imports inside
functions included): no circle among the modules of ``tfmesos`` and of the
embedded master ``mesos_local``, nor among tfmesos' subpackages; the
embedded master imports nothing of tfmesos; and no test module imports
another (shared helpers live in the tests' helper modules)."""

import ast
import json
import os
import subprocess
import sys

from tfrun_helpers import RARE_PATHS, REPO, assert_no_task_processes

TESTS = os.path.join(REPO, "tests")


def _modules(root, package):
    """{dotted name: (path, is a package)} of the .py files under ``root/package``."""
    found = {}
    for directory, _, files in os.walk(os.path.join(root, package)):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                parts = os.path.relpath(path, root)[:-3].split(os.sep)
                is_package = parts[-1] == "__init__"
                found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def imports(path, package=""):
    """Every import in ``path``, anywhere in the file, as (module, name):
    ``import X`` is (X, None); ``from X import Y`` is (X, Y), Y being a
    module or a name in X. Relative imports are resolved in ``package``."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.extend((base, alias.name) for alias in node.names)
    return found


PACKAGES = ("tfmesos", "mesos_local")


def import_graph():
    """{module: the modules it imports}, over ``PACKAGES``; ``from P import M``
    imports the module ``P.M`` when there is one, else ``P``."""
    modules = {}
    for package in PACKAGES:
        modules.update(_modules(REPO, package))
    graph = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        edges = set()
        for module, member in imports(path, package):
            if member is not None and "%s.%s" % (module, member) in modules:
                edges.add("%s.%s" % (module, member))
            elif module in modules:
                edges.add(module)
        graph[name] = edges - {name}
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_imports_in_functions():
    graph = import_graph()
    assert "tfmesos.mesos.detection" in graph["tfmesos.mesos.transport"]
    assert "tfmesos.mesos.zookeeper" in graph["tfmesos.mesos.detection"]
    # Imported inside functions only:
    assert "tfmesos.backends.embedded" in graph["tfmesos.core.runtime"]
    assert "tfmesos.backends.sizing" in graph["tfmesos.backends.embedded"]
    assert "tfmesos.cli.docker_wrapper" in graph["tfmesos.cli.main"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_among_modules():
    found = cycles(import_graph())
    assert not found, "import cycles: %s" % "; ".join(" <-> ".join(c) for c in found)


def room(module):
    """The part of tfmesos ``module`` belongs to: its subpackage
    (``tfmesos.core``), else the module itself; ``mesos_local`` is one."""
    parts = module.split(".")
    if parts[0] != "tfmesos" or len(parts) == 1:
        return parts[0]
    candidate = ".".join(parts[:2])
    return candidate if os.path.isdir(os.path.join(REPO, *parts[:2])) else module


def test_tfmesos_subpackages_import_each_other_one_way_only():
    rooms = {}
    for module, targets in import_graph().items():
        rooms.setdefault(room(module), set()).update(room(t) for t in targets)
    graph = {name: targets - {name} for name, targets in rooms.items()}
    found = cycles(graph)
    assert not found, "subpackages importing each other: %s" % "; ".join(
        " <-> ".join(c) for c in found)


def test_the_embedded_master_imports_nothing_of_tfmesos():
    wrong = sorted("%s -> %s" % (module, target)
                   for module, targets in import_graph().items() if module.startswith("mesos_local")
                   for target in targets if target.split(".")[0] == "tfmesos")
    assert not wrong, "mesos_local imports tfmesos: %s" % ", ".join(wrong)


def test_test_modules_import_helpers_not_other_test_modules():
    wrong = {}
    for name in sorted(os.listdir(TESTS)):
        if name.startswith("test_") and name.endswith(".py"):
            imported = {module.split(".")[0] for module, _ in imports(os.path.join(TESTS, name))}
            others = sorted(m for m in imported if m.startswith("test_") and m != name[:-3])
            if others:
                wrong[name] = others
    assert not wrong, ("test modules importing other test modules (move what they share "
                       "into a helper module such as tfrun_helpers.py): %s" % wrong)


def test_no_two_modules_share_a_name():
    names = {}
    for package in PACKAGES:
        for module in _modules(REPO, package):
            leaf = module.rsplit(".", 1)[-1]
            if leaf != "__main__" and "." in module:
                names.setdefault(leaf, []).append(module)
    shared = {leaf: found for leaf, found in names.items() if len(found) > 1}
    assert not shared, "modules of the same name: %s" % shared


def test_tfmesos_uses_only_the_public_names_of_mesos_local():
    # mesos_local is a package of its own: tfmesos is one of its users and
    # imports what its __init__ exports (__all__), never an internal module.
    import mesos_local
    public = set(mesos_local.__all__)
    wrong = []
    for module, (path, is_package) in sorted(_modules(REPO, "tfmesos").items()):
        package = module if is_package else module.rpartition(".")[0]
        for imported, member in imports(path, package):
            if imported.split(".")[0] != "mesos_local":
                continue
            if imported != "mesos_local" or (member is not None and member not in public):
                wrong.append("%s: %s" % (module, imported if member is None
                                         else "from %s import %s" % (imported, member)))
    assert not wrong, ("tfmesos imports mesos_local beyond its public names (export what "
                       "it needs from mesos_local/__init__.py): %s" % "; ".join(wrong))


def test_mesos_local_s_public_names_are_there_and_imported_on_first_use():
    # Each exported name resolves; importing the package imports none of
    # its modules (PEP 562), so a user of one name pays for that one.
    script = ("import sys; import mesos_local; loaded = sorted(m for m in sys.modules "
              "if m.startswith('mesos_local.')); "
              "missing = [n for n in mesos_local.__all__ if getattr(mesos_local, n, None) is None]; "
              "print(loaded, missing, sorted(dir(mesos_local)) == sorted(mesos_local.__all__))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]", "[]", "True"], result.stdout


def test_mesos_local_s_own_tests_import_no_tensorflow():
    # `pytest -m mesos_local` (conftest's MESOS_LOCAL_MODULES): the
    # embedded master's tests, through the helpers they import (anywhere in
    # a file), reach neither TensorFlow, Keras, PyTorch nor JAX, and of
    # tfmesos only its TensorFlow-free Mesos client and wire names.
    from conftest import MESOS_LOCAL_MODULES
    allowed = ("tfmesos.mesos", "tfmesos.protocol")
    absent = ("tensorflow", "tf_keras", "keras", "torch", "jax", "jaxlib")
    helpers = {name[:-3] for name in os.listdir(TESTS) if name.endswith(".py")} - {"conftest"}
    wrong = []
    for test_module in sorted(MESOS_LOCAL_MODULES):
        assert test_module in helpers, "no tests/%s.py" % test_module
        seen, pending = set(), [test_module]
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            for module, _ in imports(os.path.join(TESTS, current + ".py")):
                top = module.split(".")[0]
                if top in helpers:
                    pending.append(top)
                elif top in absent or (top == "tfmesos" and not any(
                        module == a or module.startswith(a + ".") for a in allowed)):
                    wrong.append("%s (through %s): %s" % (test_module, current, module))
    assert not wrong, "mesos_local's own tests importing TensorFlow or tfmesos: %s" % wrong


def test_a_plain_tfrun_run_imports_none_of_the_rare_paths():
    # tfrun -q -w 2 -s 1 -- true on the embedded master, to its end, in a
    # process that then lists what it imported: functions' imports too
    # (test_startup checks the modules' own, without a run).
    script = ("import json, sys; from tfmesos.cli.tfrun import main; "
              "code = main(['-q', '-w', '2', '-s', '1', '--', 'true']); "
              "print(json.dumps([code, sorted(sys.modules)]), flush=True)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=240, cwd=REPO, env=dict(os.environ, MESOS_MASTER=""))
    assert result.returncode == 0, result.stderr[-4000:]
    code, modules = json.loads(result.stdout.splitlines()[-1])
    assert code == 0, result.stderr[-4000:]
    assert [m for m in modules if any(m == r or m.startswith(r + ".") for r in RARE_PATHS)] == []
    assert_no_task_processes()
