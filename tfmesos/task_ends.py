"""What a task's end means: its exit code in Mesos' message, and whether a
launch failure is worth another attempt (docs/architecture.md, failure
policy).

A task that ends before the cluster is complete is relaunched, up to
``max_attempts`` times, unless retrying cannot help. The rule follows
Mesos' ``TaskState`` and ``TaskStatus.Reason`` (include/mesos/v1/mesos.proto):

* ``TASK_ERROR`` means the task description is invalid (its reasons:
  ``REASON_TASK_INVALID``, ``REASON_TASK_UNAUTHORIZED``,
  ``REASON_TASK_GROUP_INVALID``, ``REASON_TASK_GROUP_UNAUTHORIZED``); the
  same TaskInfo is refused again. Unlike it, ``TASK_DROPPED`` (and
  ``TASK_LOST`` with ``REASON_INVALID_OFFERS``: offers rescinded
  meanwhile) is transient and retried.
* ``TASK_FAILED`` with ``REASON_CONTAINER_LAUNCH_FAILED`` whose message says
  the agent cannot run images at all (``Docker is unavailable``, no Docker
  engine) or the image does not exist (``image ... not found``, ``manifest
  unknown``, ``pull access denied``, ``No such image``). Other container
  launch failures (a fetch that timed out, a busy disk) are retried.
  The messages are read whatever the reason, since some agents send none.

Everything else (a command that exited non-zero, a lost agent) is retried.
"""

import re

_EXIT_STATUS = re.compile(r"exited with status (\d+)")
_NO_RUNTIME = re.compile(r"docker is unavailable|no docker engine|cannot run container images",
                         re.IGNORECASE)
_NO_IMAGE = re.compile(r"\bimage\b[^;]*\bnot found|manifest (?:for \S+ )?unknown|"
                       r"pull access denied|no such image|repository \S+ not found",
                       re.IGNORECASE)
INVALID_TASK_REASONS = frozenset(("REASON_TASK_INVALID", "REASON_TASK_UNAUTHORIZED",
                                  "REASON_TASK_GROUP_INVALID", "REASON_TASK_GROUP_UNAUTHORIZED"))


def exit_code_of(status_message):
    """The exit code in Mesos' "Command exited with status N", or None."""
    match = _EXIT_STATUS.search(status_message or "")
    return int(match.group(1)) if match else None


def permanent_failure(state, reason=None, message=""):
    """Why a launch that ended in ``state`` (with Mesos' ``reason`` and
    ``message``) cannot succeed on another attempt, or None when it may."""
    if state == "TASK_ERROR" or reason in INVALID_TASK_REASONS:
        return "Mesos refused the task description"
    if state != "TASK_FAILED":
        return None
    if _NO_RUNTIME.search(message or ""):
        return "the agent cannot run container images"
    if _NO_IMAGE.search(message or ""):
        return "the image cannot be found"
    return None


def launch_failure_message(name, attempts, state, message, why):
    """The one line a run aborts with when ``name`` could not be launched."""
    detail = "%s: %s" % (state, message or "no message from Mesos")
    if why:
        return "%s cannot be launched: %s (%s; retrying cannot help)" % (name, detail, why)
    return "%s failed %d times before the cluster was complete; last: %s" % (
        name, attempts, detail)
