"""What Mesos' master refuses in a task beyond its ids
(``task::internal::validateTask``, src/master/validation.cpp:1676-1698),
checked as it does, in its order: ``check_task_fields`` raises
``TaskInvalid`` (TASK_ERROR) with Mesos' words. Pure functions."""

from .planning import TaskInvalid, _plan_environment, duration_seconds


def check_task_fields(info):
    """TaskInvalid for what ``task::internal::validateTask`` refuses, in its
    order, after the ids (src/master/validation.cpp:1676-1698): a negative
    kill policy grace period (1454) or ``max_completion_time`` (1466), an
    invalid check (1478) or health check (1492), no resources (1503). Every
    task of LAUNCH and LAUNCH_GROUP."""
    grace = info.get("kill_policy", {}).get("grace_period")
    if grace is not None and duration_seconds(grace) < 0:
        raise TaskInvalid("Task's 'kill_policy.grace_period' must be non-negative")
    if "max_completion_time" in info and duration_seconds(info["max_completion_time"]) < 0:
        raise TaskInvalid("Task's `max_completion_time` must be non-negative")
    if "check" in info:
        error = _check_info_error(info["check"])
        if error is not None:
            raise TaskInvalid("Task uses invalid check: " + error)
    if "health_check" in info:
        error = _health_check_error(info["health_check"])
        if error is not None:
            raise TaskInvalid("Task uses invalid health check: " + error)
    if not info.get("resources"):
        raise TaskInvalid("Task uses no resources")


def _check_command_error(command, what, prefix):
    """``validateHealthCheck``'s and ``validateCheckInfo``'s COMMAND checks."""
    if "value" not in command:
        return "Command %s must contain %s" % (
            what, "'shell command'" if command.get("shell", True) else "'executable path'")
    try:
        _plan_environment(command)
    except TaskInvalid as exc:
        return "%s's `CommandInfo` is invalid: %s" % (prefix, exc)
    return None


def _negative_seconds(message, names):
    for name in names:
        if name in message and float(message[name]) < 0.0:
            return "Expecting '%s' to be non-negative" % name
    return None


def _health_check_error(health_check):
    """``validateHealthCheck`` (src/common/validation.cpp:335-423)."""
    kind = health_check.get("type")
    if kind is None:
        return "HealthCheck must specify 'type'"
    if kind == "COMMAND":
        if "command" not in health_check:
            return "Expecting 'command' to be set for COMMAND health check"
        error = _check_command_error(health_check["command"], "health check", "Health check")
        if error is not None:
            return error
    elif kind == "HTTP":
        if "http" not in health_check:
            return "Expecting 'http' to be set for HTTP health check"
        http = health_check["http"]
        if "scheme" in http and http["scheme"] not in ("http", "https"):
            return "Unsupported HTTP health check scheme: '%s'" % http["scheme"]
        if "path" in http and not http["path"].startswith("/"):
            return "The path '%s' of HTTP health check must start with '/'" % http["path"]
    elif kind == "TCP":
        if "tcp" not in health_check:
            return "Expecting 'tcp' to be set for TCP health check"
    else:
        return "'%s' is not a valid health check type" % kind
    return _negative_seconds(health_check, ("delay_seconds", "grace_period_seconds",
                                            "interval_seconds", "timeout_seconds"))


def _check_info_error(check):
    """``validateCheckInfo`` (src/common/validation.cpp:426-499)."""
    kind = check.get("type")
    if kind is None:
        return "CheckInfo must specify 'type'"
    if kind == "COMMAND":
        if "command" not in check:
            return "Expecting 'command' to be set for COMMAND check"
        error = _check_command_error(check["command"].get("command", {}), "check", "Check")
        if error is not None:
            return error
    elif kind == "HTTP":
        if "http" not in check:
            return "Expecting 'http' to be set for HTTP check"
        path = check["http"].get("path")
        if path is not None and not path.startswith("/"):
            return "The path '%s' of HTTP check must start with '/'" % path
    elif kind == "TCP":
        if "tcp" not in check:
            return "Expecting 'tcp' to be set for TCP check"
    else:
        return "'%s' is not a valid check type" % kind
    return _negative_seconds(check, ("delay_seconds", "interval_seconds", "timeout_seconds"))


__all__ = ["check_task_fields"]
