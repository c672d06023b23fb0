"""Role names: tfmesos accepts exactly what Mesos accepts (src/common/roles.cpp)."""

import pytest

from tfmesos.core.spec import RunSpec
from tfmesos.exceptions import SpecError
from tfmesos.mesos.roles import role_error

VALID = ["*", "ml", "ml/team", "a/b/c", "team-1", "a.b", "ml/.hidden", "x*", "ä"]
INVALID = {
    "": "cannot be the empty string",
    "/ml": "cannot start with a slash",
    "ml/": "cannot end with a slash",
    "a//b": "two adjacent slashes",
    ".": "cannot include '.'",
    "..": "cannot include '..'",
    "a/./b": "cannot include '.'",
    "a/../b": "cannot include '..'",
    "a/*": "cannot include '*'",
    "-ml": "starts with a dash",
    "ml/-x": "starts with a dash",
    "has space": "whitespace",
    "tab\there": "whitespace",
    "del\x7f": "whitespace",
}


@pytest.mark.parametrize("role", VALID)
def test_valid_roles(role):
    assert role_error(role) is None
    assert RunSpec(role=role).role == role


@pytest.mark.parametrize("role, why", sorted(INVALID.items()))
def test_invalid_roles_are_refused_with_mesos_reason(role, why):
    assert why in role_error(role)
    with pytest.raises(SpecError, match="invalid Mesos role"):
        RunSpec(role=role)


@pytest.mark.parametrize("role", VALID + sorted(INVALID) + ["ml/a b", "a/-", "*/x", "x/*"])
def test_the_embedded_master_judges_a_role_as_tfmesos_does(role):
    # Two copies of Mesos' rule on purpose: mesos_local imports nothing of
    # tfmesos (a stand-in master, as Mesos' own is to its clients). This
    # keeps them from drifting apart.
    from mesos_local.frameworks import role_error as masters_role_error
    assert masters_role_error(role) == role_error(role)
