"""Mesos role names, checked as Mesos checks them (``roles::validate`` in
src/common/roles.cpp): ``*``, or ``/``-separated components (hierarchical
roles such as ``ml/team``) with no leading, trailing or doubled slash, no
``.``, ``..`` or ``*`` component, no component starting with ``-``, and no
whitespace or DEL anywhere."""

from typing import Optional

_INVALID_CHARACTERS = "\t\n\x0b\x0c\r \x7f"


def role_error(role: str) -> Optional[str]:
    """Why Mesos refuses ``role``, or None when it is valid."""
    if role == "*":
        return None
    if role.startswith("/"):
        return "Role '%s' cannot start with a slash" % role
    if role.endswith("/"):
        return "Role '%s' cannot end with a slash" % role
    if "//" in role:
        return "Role '%s' cannot contain two adjacent slashes" % role
    components = [part for part in role.split("/") if part]
    if not components:
        return "Role names cannot be the empty string"
    for component in components:
        if component in (".", "..", "*"):
            return "Role '%s' cannot include '%s' as a component" % (role, component)
        if component.startswith("-"):
            return ("Role component '%s' is invalid because it starts with a dash"
                    % component)
        if any(char in _INVALID_CHARACTERS for char in component):
            return ("Role component '%s' is invalid because it contains backspace or "
                    "whitespace" % component)
    return None
