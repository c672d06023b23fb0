"""What the endpoints show of an environment that may hold secrets: a
variable of type ``SECRET`` keeps its name and type, never its value (the
``secret`` whose ``value.data`` is the bytes themselves; a ``reference``
names a secret store's entry, which is no secret). The master's
``/master/state`` leaves environments out altogether (``state_json``);
the master's and the agents' v1 API (``GET_EXECUTORS``, ``GET_STATE``)
show ExecutorInfos through ``executor_info``: README promises that the
embedded master never serves the values of a run's secrets (its key, its
``--secret-env``), to any principal."""

from collections.abc import Mapping
from typing import Any


def environment(env: Mapping[str, Any]) -> dict:
    """``Environment`` with its secrets' values left out."""
    shown = dict(env)
    shown["variables"] = [_variable(v) for v in env.get("variables", ())]
    return shown


def _variable(variable: Mapping[str, Any]) -> Mapping[str, Any]:
    secret = variable.get("secret")
    if not isinstance(secret, Mapping) or "value" not in secret:
        return variable
    return dict(variable, secret={key: value for key, value in secret.items() if key != "value"})


def command(info: Mapping[str, Any]) -> dict:
    """``CommandInfo`` with its environment's secret values left out."""
    shown = dict(info)
    if isinstance(info.get("environment"), Mapping):
        shown["environment"] = environment(info["environment"])
    return shown


def executor_info(info: Mapping[str, Any]) -> dict:
    """``ExecutorInfo`` with its command's secret values left out."""
    shown = dict(info)
    if isinstance(info.get("command"), Mapping):
        shown["command"] = command(info["command"])
    return shown


__all__ = ["environment", "command", "executor_info"]
