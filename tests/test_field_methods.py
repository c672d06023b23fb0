"""field_methods' __eq__, __hash__ and __repr__ behave as those
@dataclasses.dataclass writes, field options included."""

import dataclasses
import math
import subprocess
import sys
from typing import Any, Optional

import pytest

from tfmesos.core.events import TaskDisconnected, TaskExited
from tfmesos.core.identity import RunIdentity
from tfmesos.field_methods import FieldMethods, FrozenFieldMethods
from tfmesos.record.schema import Scheduler


def pair(frozen):
    """The same class twice: the decorator's methods, and field_methods'."""
    def body():
        return {"__annotations__": {"a": int, "b": Any, "secret": str, "clock": float,
                                    "salt": Optional[int]},
                "b": None, "secret": dataclasses.field(default="s", repr=False),
                "clock": dataclasses.field(default=0.0, compare=False),
                "salt": dataclasses.field(default=None, hash=False)}
    theirs = dataclasses.dataclass(frozen=frozen)(type("Point", (), body()))
    ours = dataclasses.dataclass(frozen=frozen, eq=False, repr=False)(
        type("Point", (FrozenFieldMethods if frozen else FieldMethods,), body()))
    return theirs, ours


NAN = math.nan
CASES = [((1, 2), (1, 2)), ((1, 2), (1, 3)), ((1, [1]), (1, [1])), ((1, NAN), (1, NAN)),
         ((1, 2, "x"), (1, 2, "y")), ((1, 2, "s", 1.0), (1, 2, "s", 2.0)),
         ((1, 2, "s", 0.0, 5), (1, 2, "s", 0.0, 6))]


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("left,right", CASES)
def test_the_same_as_the_decorator_s(frozen, left, right):
    theirs, ours = pair(frozen)
    expected = (theirs(*left) == theirs(*right), theirs(*left) != theirs(*right),
                repr(theirs(*left)), repr(theirs(*right)))
    assert (ours(*left) == ours(*right), ours(*left) != ours(*right),
            repr(ours(*left)), repr(ours(*right))) == expected
    same = theirs(*left)   # one instance: NaN is itself (tuples compare by identity first)
    mine = ours(*left)
    assert (mine == mine) == (same == same)
    if frozen and not any(isinstance(v, list) for v in left + right):
        assert hash(ours(*left)) == hash(theirs(*left))
        assert (hash(ours(*left)) == hash(ours(*right))) == \
            (hash(theirs(*left)) == hash(theirs(*right)))
    if not frozen:
        with pytest.raises(TypeError):
            hash(ours(*left))


@pytest.mark.parametrize("frozen", [False, True])
def test_another_class_is_not_equal_and_a_frozen_one_stays_frozen(frozen):
    theirs, ours = pair(frozen)
    assert ours(1, 2) != theirs(1, 2)
    assert ours(1, 2).__eq__(theirs(1, 2)) is NotImplemented
    sub = dataclasses.dataclass(frozen=frozen, eq=False, repr=False)(type("Sub", (ours,), {}))
    assert ours(1, 2) != sub(1, 2)
    if frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            ours(1, 2).a = 3   # type: ignore[misc]


def test_an_instance_that_holds_itself_is_shown_as_the_decorator_shows_it():
    theirs, ours = pair(False)
    one, other = theirs(1), ours(1)
    one.b, other.b = [one], [other]
    assert repr(other) == repr(one) == "Point(a=1, b=[...], clock=0.0, salt=None)"


def test_tfmesos_classes_keep_their_equality_hash_and_secrets():
    assert TaskExited("t", 1, at=1.0) == TaskExited("t", 1, at=2.0)   # at: compare=False
    assert hash(TaskDisconnected("t", since=1.0)) == hash(TaskDisconnected("t", since=2.0))
    assert repr(TaskExited("t", 1, at=1.0)) == \
        "TaskExited(task_id='t', code=1, usage=None, at=1.0, stopped=None)"
    identity = RunIdentity.new("someone")
    assert "key=" not in repr(identity) and repr(identity.key) not in repr(identity)
    assert identity == RunIdentity.new("someone").__class__(**vars(identity))
    assert Scheduler() == Scheduler() and Scheduler(pid=1) != Scheduler()
    with pytest.raises(TypeError):
        hash(Scheduler())


WALK = r"""
import dataclasses, importlib, inspect, pkgutil, tfmesos
from tfmesos.field_methods import FieldMethods, FrozenFieldMethods
for found in pkgutil.walk_packages(tfmesos.__path__, "tfmesos."):
    if found.name.endswith("__main__") or found.name in ("tfmesos.keras", "tfmesos.torch",
                                                         "tfmesos.lightning"):
        continue
    module = importlib.import_module(found.name)
    for name, cls in vars(module).items():
        if not (inspect.isclass(cls) and dataclasses.is_dataclass(cls)
                and cls.__module__ == module.__name__):
            continue
        if cls.__eq__ is object.__eq__ or cls.__repr__ is object.__repr__:
            print(found.name, name, "has object's __eq__ or __repr__")
        if (cls.__dataclass_params__.frozen and issubclass(cls, FieldMethods)
                and not issubclass(cls, FrozenFieldMethods)):
            print(found.name, name, "is frozen, its methods FieldMethods'")
"""


def test_every_dataclass_of_tfmesos_has_its_field_methods():
    """A class declared ``@dataclass(eq=False, repr=False)`` must inherit
    the methods from here (a frozen one the frozen ones): else it would
    compare by identity and show as ``<... object at 0x...>``, unseen."""
    found = subprocess.run([sys.executable, "-c", WALK], capture_output=True, text=True,
                           timeout=120)
    assert found.returncode == 0, found.stderr[-2000:]
    assert found.stdout == "", found.stdout
