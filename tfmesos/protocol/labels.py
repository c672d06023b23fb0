"""How a run shows itself on its Mesos master, in one place both sides
import: the framework's labels (``FrameworkInfo.labels``), and the
scheduler task of a detached run (``tfrun --detach``).

* ``RUN_ID``, ``JOBS``, ``MODE``, ``COMMAND``: what ``tfmesos runs
  --master`` lists (``core.taskinfo.run_labels``).
* ``RENDEZVOUS``: ``host:port`` of the run's current rendezvous. A
  scheduler that takes a framework over (a detached run's scheduler task,
  ``tfmesos attach``) subscribes with its new address here; tasks that lost
  their scheduler read it from the master (``/master/frameworks``) to
  register again.
* ``OUTCOME``: how the run ended (``succeeded``, ``failed: ...``), set by
  the scheduler with ``UPDATE_FRAMEWORK`` before it tears the framework down,
  so that a finished framework still says it.
* ``REASON``: beside a failed or aborted ``OUTCOME``, its one line of
  evidence (``worker:0: /bin/sh: 1: python: not found``: the last line the
  failing task wrote on stderr, else the run's advice), which ``tfmesos
  runs --master`` and ``tfmesos attach`` print under the outcome.
* ``DETACHED``: ``"1"`` on a run whose scheduler is a task of its own
  framework.
* ``PROOF``: the run key's signature of the framework's id, the run's id,
  principal and user (``core.identity.RunIdentity.framework_proof``): who
  holds the key can tell the run's framework from a look-alike that copied
  its labels; set once the framework id is known (``UPDATE_FRAMEWORK``
  after the first subscription, in the SUBSCRIBE of a takeover).
"""

from typing import Any, Optional

RUN_ID = "tfmesos.run_id"
JOBS = "tfmesos.jobs"
MODE = "tfmesos.mode"
COMMAND = "tfmesos.command"
RENDEZVOUS = "tfmesos.rendezvous"
OUTCOME = "tfmesos.outcome"
REASON = "tfmesos.reason"
MAX_REASON = 300    # characters of a reason label at most
DETACHED = "tfmesos.detached"
PROOF = "tfmesos.proof"

# A detached run's scheduler is the Mesos task
# ``tfmesos.<run id>.scheduler.0.<attempt>`` (the shape of the task ids
# ``core.scheduler`` makes: ``tfmesos.<run id>.<job>.<index>.<attempt>``);
# its run directory is ``run/`` in its sandbox, so ``run/run.json`` is the
# run's record, as /files serves it.
SCHEDULER_JOB = "scheduler"
SCHEDULER_RUN_DIR = "run"
SCHEDULER_RECORD = SCHEDULER_RUN_DIR + "/run.json"

Json = dict[str, Any]   # a JSON object of the master's (a framework, a task)


def scheduler_task_id(run_id: str, attempt: int) -> str:
    return "tfmesos.%s.%s.0.%d" % (run_id, SCHEDULER_JOB, attempt)


def is_scheduler_task(task_id: str) -> bool:
    parts = task_id.split(".")
    return len(parts) == 5 and parts[0] == "tfmesos" and parts[2] == SCHEDULER_JOB


def label_map(labels: Any) -> dict[str, str]:
    """``{key: value}`` of a Mesos ``Labels`` message as JSON (``{"labels":
    [...]}``) or its list; anything malformed is left out."""
    if isinstance(labels, dict):
        labels = labels.get("labels")
    if not isinstance(labels, list):
        return {}
    return {label["key"]: str(label.get("value", "")) for label in labels
            if isinstance(label, dict) and isinstance(label.get("key"), str)}


def task_attempt(task_id: object) -> Optional[int]:
    """The attempt number that ends a tfmesos task id, or None."""
    last = str(task_id).rsplit(".", 1)[-1]
    return int(last) if last.isdigit() else None


def tasks_of(framework: Optional[Json]) -> list[Json]:
    """Every task of a framework (state JSON), completed ones first."""
    if not framework:
        return []
    return [task for task in (framework.get("completed_tasks") or []) +
            (framework.get("tasks") or []) if isinstance(task, dict) and "id" in task]


def scheduler_tasks(framework: Optional[Json], run_id: str) -> list[tuple[int, Json]]:
    """[(attempt, task)] of the scheduler tasks of run ``run_id`` in its
    framework (``labels.scheduler_task_id``), the newest attempt first."""
    found: list[tuple[int, Json]] = []
    for task in tasks_of(framework):
        task_id = str(task["id"])
        attempt = task_attempt(task_id)
        if is_scheduler_task(task_id) and task_id.split(".")[1] == run_id \
                and attempt is not None:
            found.append((attempt, task))
    found.sort(key=lambda pair: pair[0], reverse=True)
    return found
