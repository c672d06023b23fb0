"""The ``TFMesosError`` tree: the drawing in ``tfmesos.exceptions`` is the
truth, and every error that reaches a caller has its place in it."""

import builtins
import importlib
import re

import pytest

import tfmesos
from tfmesos import exceptions

# Where the classes of the tree that are not in tfmesos.exceptions live.
_ELSEWHERE = ("tfmesos.ship.contents", "mesos_local.containerizer.docker_engine", "mesos_local.errors",
              "mesos_local.agent", "mesos_local.api.auth")


def _find(name):
    for module in ("tfmesos.exceptions",) + _ELSEWHERE:
        found = getattr(importlib.import_module(module), name, None)
        if isinstance(found, type):
            return found
    raise AssertionError("%s is drawn in the tree of tfmesos.exceptions but defined nowhere"
                         % name)


def _drawn_tree():
    """[(class name, parent name, extra bases)] from the docstring's drawing."""
    lines = exceptions.__doc__.split("TFMesosError\n", 1)[1].splitlines()
    parents, edges = {0: "TFMesosError"}, []
    for line in lines:
        match = re.match(r"^([│ ]*)[├└]── (\w+)(?: \(([\w, ]+)\))?", line)
        if not match:
            continue
        depth = len(match.group(1)) // 4   # the branch at column 4 is depth 1
        name = match.group(2)
        extra = tuple(b.strip() for b in (match.group(3) or "").split(","))
        extra = tuple(b for b in extra if b)
        edges.append((name, parents[depth - 1], extra))
        parents[depth] = name
    return edges


def test_the_drawn_tree_is_the_class_tree():
    edges = _drawn_tree()
    assert len(edges) >= 11
    for name, parent, extra in edges:
        cls = _find(name)
        assert _find(parent) in cls.__bases__, "%s is drawn under %s" % (name, parent)
        for base in extra:
            assert issubclass(cls, getattr(builtins, base, None) or _find(base)), \
                "%s is drawn as a %s" % (name, base)
    drawn = {name for name, _, _ in edges}
    defined = {name for name, value in vars(exceptions).items()
               if isinstance(value, type) and issubclass(value, exceptions.TFMesosError)}
    assert defined - {"TFMesosError"} <= drawn, "not drawn: %s" % (defined - drawn)


@pytest.mark.parametrize("name", ["LocalMasterError", "AgentSpecError", "CredentialsError",
                                  "DockerEngineError", "CallError"])
def test_the_embedded_master_has_a_tree_of_its_own(name):
    error = getattr(importlib.import_module("mesos_local.errors"), name)
    assert not issubclass(error, exceptions.TFMesosError)


def test_its_errors_become_tfmesos_errors_where_tfmesos_starts_it():
    from mesos_local.errors import CredentialsError
    from tfmesos.backends.sizing import start_local_master
    from tfmesos.core.jobs import Job

    with pytest.raises(exceptions.SpecError, match="principal must be a non-empty string") \
            as info:
        start_local_master([Job("worker", num=1, cpus=0.1, mem=32)], ("run", "secret"),
                           isolation=None, credentials={"": "secret"})
    assert isinstance(info.value.__cause__, CredentialsError)


def test_public_names_include_every_error_of_tfmesos_exceptions():
    for name, value in vars(exceptions).items():
        if isinstance(value, type) and issubclass(value, exceptions.TFMesosError):
            assert getattr(tfmesos, name) is value
