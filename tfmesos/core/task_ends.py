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

An archive the local master's fetcher refuses to extract (``TASK_FAILED``,
``Failed to fetch 'URI': the local master's fetcher refuses this archive:
...``: a member that would leave the sandbox, a link out of it, more than
it may expand to; mesos_local/containerizer/archives.py, ``REFUSED``) is
not retried: every fetch brings the same archive, refused by the same rule.
A fetch that failed on the way (an HTTP error, a timeout, a file that is no
readable archive) is.

A task whose command refused a file it fetched (``ship.fetch_check``: its
sha256 is not the one in the command, exit status ``REFUSED`` and the
line saying so in its sandbox's stderr) is not retried either: a relaunch
fetches it through the same path, often from the same fetcher cache.

A task whose tfmesos speaks another rendezvous protocol than the
scheduler (``protocol.wire.ProtocolMismatch``: exit status
``MISMATCH_EXIT`` and its line on stderr) is not retried: a relaunch runs
the same tfmesos.

Everything else (a command that exited non-zero, a lost agent) is retried.
"""

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ..record.hints import resource_flag

_NO_RUNTIME = re.compile(r"docker is unavailable|no docker engine|cannot run container images",
                         re.IGNORECASE)
_NO_IMAGE = re.compile(r"\bimage\b[^;]*\bnot found|manifest (?:for \S+ )?unknown|"
                       r"pull access denied|no such image|repository \S+ not found|"
                       r"invalid image name|invalid reference format",
                       re.IGNORECASE)
# A container description the runtime refuses however often it is launched.
_BAD_CONTAINER = re.compile(r"Duplicate mount point|invalid volume specification|"
                            r"volume path .+ must be absolute", re.IGNORECASE)
NO_RUNTIME = "the agent cannot run container images"
# The local master's fetcher's refusal of an archive (archives.REFUSED, after
# the fetcher's "Failed to fetch 'URI': "); not imported: the scheduler reads
# the message of any master.
_ARCHIVE_REFUSED = re.compile(r"Failed to fetch '.*': the local master's fetcher refuses this "
                              r"archive: ")
INVALID_TASK_REASONS = frozenset(("REASON_TASK_INVALID", "REASON_TASK_UNAUTHORIZED",
                                  "REASON_TASK_GROUP_INVALID", "REASON_TASK_GROUP_UNAUTHORIZED"))


def permanent_failure(state: Optional[str], reason: Optional[str] = None,
                      message: Optional[str] = "") -> Optional[str]:
    """Why a launch that ended in ``state`` (with Mesos' ``reason`` and
    ``message``) cannot succeed on another attempt, or None when it may."""
    if state == "TASK_ERROR" or reason in INVALID_TASK_REASONS:
        return "Mesos refused the task description"
    if state != "TASK_FAILED":
        return None
    if _NO_RUNTIME.search(message or ""):
        return NO_RUNTIME
    if _NO_IMAGE.search(message or ""):
        return "the image cannot be found"
    if _BAD_CONTAINER.search(message or ""):
        return "the container runtime refuses its volumes"
    if _ARCHIVE_REFUSED.search(message or ""):
        return "the archive is refused on every fetch"
    return None


# Written into the tfmesos image (docker/Dockerfile).
IMAGE_MARKER = "/etc/tfmesos-image"


def refused_fetch(code: Optional[int], lines: Sequence[str]) -> Optional[str]:
    """The line of a task whose command refused what it fetched
    (``ship.fetch_check``): its exit ``code`` says so and ``lines`` (its
    sandbox's last stderr lines) hold it; else None."""
    from ..ship.fetch_check import REFUSED, refusal
    return refusal(lines) if code == REFUSED else None


# The line of a task that met a scheduler of another protocol (wire.ProtocolMismatch).
_PROTOCOL_MISMATCH = re.compile(r"the scheduler speaks rendezvous protocol \d+ and this task's "
                                r"tfmesos speaks \d+: .*")


def protocol_mismatch(code: Optional[int], lines: Sequence[str]) -> Optional[str]:
    """What a task said when its tfmesos speaks another rendezvous protocol
    than the scheduler: its exit ``code`` says so and ``lines`` (its
    sandbox's last stderr lines) hold it; else None."""
    from ..protocol.wire import MISMATCH_EXIT
    if code != MISMATCH_EXIT:
        return None
    found = None
    for line in lines:
        match = _PROTOCOL_MISMATCH.search(line)
        found = match.group(0).strip() if match else found
    return found


def launch_failure_message(name: str, attempts: int, state: Optional[str],
                           message: Optional[str], why: Optional[str]) -> str:
    """The one line a run aborts with when ``name`` could not be launched."""
    detail = "%s: %s" % (state, message or "no message from Mesos")
    if why == NO_RUNTIME and os.path.exists(IMAGE_MARKER):
        # tfrun under ``tfmesos docker`` with no master given: the engine is
        # out of reach by design (not /.dockerenv: CI machines are often
        # containers themselves).
        detail += ("; this process runs inside the tfmesos image: run the master outside it "
                   "(a Mesos master, or 'tfmesos local-master' on the host) and pass it with "
                   "-m/MESOS_MASTER")
    if why:
        return "%s cannot be launched: %s (%s; retrying cannot help)" % (name, detail, why)
    return "%s failed %d times before the cluster was complete; last: %s" % (
        name, attempts, detail)


# -- a task killed for its memory --------------------------------------------------------

MEMORY_REASON = "REASON_CONTAINER_LIMITATION_MEMORY"
# Mesos' message (isolators/cgroups/subsystems/memory.cpp), sizes as stout's Bytes.
_MAX_USED = re.compile(r"Maximum Used: (\d+)(B|KB|MB|GB|TB)\b")
_UNIT_MB = {"B": 1.0 / (1 << 20), "KB": 1.0 / 1024, "MB": 1.0, "GB": 1024.0, "TB": 1024.0 ** 2}


def memory_kill_peak(reason: Optional[str] = None, message: Optional[str] = "",
                     usage: Optional[Mapping[str, Any]] = None) -> Optional[float]:
    """None unless the task was killed for outgrowing its memory: Mesos
    said so (``REASON_CONTAINER_LIMITATION_MEMORY``), or the task saw the OOM
    killer in its own memory cgroup (``usage["cgroup"]["oom_kills"]``). Then
    the best known peak in MB (Mesos' "Maximum Used", the cgroup's peak, the
    task's own peak RSS), 0.0 when none is known."""
    cgroup = (usage or {}).get("cgroup") or {}
    if reason != MEMORY_REASON and not cgroup.get("oom_kills"):
        return None
    peaks = [cgroup.get("peak_mb"), (usage or {}).get("peak_tree_rss_mb")]
    match = _MAX_USED.search(message or "")
    if match:
        peaks.append(int(match.group(1)) * _UNIT_MB[match.group(2)])
    return max([float(p) for p in peaks if isinstance(p, (int, float))] or [0.0])


def memory_kill_message(name: str, job: str, asked_mb: float, peak_mb: float,
                        mode: str = "replica") -> str:
    """``worker:1 was killed for using more than its 1024 MB (peak 1310 MB):
    raise -Mw`` (in fine-grained mode: the job's mem)."""
    peak = " (peak %.0f MB)" % peak_mb if peak_mb else ""
    fix = resource_flag(job) if mode == "replica" else "the %s job's mem" % job
    return "%s was killed for using more than its %.0f MB%s: raise %s" % (
        name, asked_mb, peak, fix)
