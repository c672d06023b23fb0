"""Which jobs a tfrun runs (``-w``, ``-s``, ``-c``, ``--evaluator``,
``--job``) and whose output it shows live (``--logs``, ``--worker-logs``);
each mistake a usage error (SpecError)."""

import re
from typing import Optional

from ..core.jobs import REPLICA_JOBS, parse_jobs
from ..core.training_frameworks import TENSORFLOW
from ..exceptions import SpecError

_WHOLE = re.compile(r"[0-9]+\Z")
_NUMBER = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z|nan\Z|inf\Z", re.I)


def parse_job_option(text):
    parts = text.split(":")
    if not 2 <= len(parts) <= 5 or not parts[0]:
        raise SpecError("--job %r: expected NAME:COUNT[:CPUS[:MEM[:GPUS]]]" % text)
    fields = {"name": parts[0]}
    try:
        # Digits as written: int() and float() take '1_0' (10) and '+1'.
        if not all(_WHOLE.match(part) for part in parts[1:2] + parts[4:5]) or \
                not all(_NUMBER.match(part) for part in parts[2:4]):
            raise ValueError(text)
        fields["num"] = int(parts[1])
        for key, value in zip(("cpus", "mem", "gpus"), parts[2:]):
            fields[key] = int(value) if key == "gpus" else float(value)
    except ValueError:
        raise SpecError("--job %r: COUNT and GPUS must be integers, CPUS and MEM numbers"
                        % text) from None
    return fields


def jobs_from_args(args, framework=TENSORFLOW):
    """The run's jobs; ``-s`` given or not (None): 1 ps task, none in a
    torch or jax run (``framework``)."""
    jobs = {}
    nserver = args.nserver if args.nserver is not None else int(framework == TENSORFLOW)
    counts = (("ps", nserver), ("worker", args.nworker), ("chief", 1 if args.chief else 0),
              ("evaluator", 1 if args.evaluator else 0))
    for name, count in counts:
        if count < 0:
            raise SpecError("the number of %s tasks cannot be negative" % name)
        if count:
            resources = name if name != "evaluator" else "worker"
            jobs[name] = {"name": name, "num": count,
                          "cpus": getattr(args, "cpus_" + resources),
                          "mem": getattr(args, "mem_" + resources),
                          "gpus": getattr(args, "gpus_" + resources)}
    for text in args.job:
        fields = parse_job_option(text)
        if fields["num"] == 0:
            jobs.pop(fields["name"], None)
        else:
            jobs[fields["name"]] = dict(jobs.get(fields["name"], {}), **fields)
    if not any(name in jobs for name in ("worker", "chief")):
        # a torch or jax run refuses a chief: its group is the workers
        raise SpecError("nothing to run: ask for at least one worker (-w N)%s"
                        % (" or a chief (-c)" if framework == TENSORFLOW else ""))
    return parse_jobs(list(jobs.values()), allowed=REPLICA_JOBS)


def worker_logs_choice(text, jobs):
    """The original ``--worker-logs`` ('*', 'none', '0,2') as ``--logs``
    choices: those workers, and the chief and evaluator (() for the default)."""
    text = (text or "*").strip()
    if text == "*":
        return ()
    if text.lower() in ("", "none"):
        indices = set()
    else:
        try:
            indices = {int(part) for part in text.split(",")}
        except ValueError:
            raise SpecError("--worker-logs %r: use '*', 'none' or indices like 0,2" % text) from None
    names = {job.name: job for job in jobs}
    choices = [name for name in ("chief", "evaluator") if name in names]
    known = set(names["worker"].task_indices()) if "worker" in names else set()
    wrong = sorted(indices - known)
    if wrong:   # as --logs worker:9: refused, not silently nothing shown
        raise SpecError("--worker-logs %s: %s" % (text, "the run has no worker task %d "
                        "(workers: 0 to %d)" % (wrong[0], max(known)) if known else
                        "the run has no workers"))
    shown = sorted(indices)
    if shown:
        choices.append("worker:" + ",".join(map(str, shown)))
    return tuple(choices) or ("none",)


def default_logs(slot):
    """What is shown without --logs: every worker, the chief and the evaluator."""
    return slot.job.name in ("worker", "chief", "evaluator")


def logs_filter(options, jobs):
    """``--logs`` options -> predicate on task slots (their union)."""
    chosen: set[tuple[str, Optional[int]]] = set()   # (job, None): all of the job's tasks
    by_name = {job.name: job for job in jobs}
    for text in options:
        text = text.strip()
        if text.lower() in ("all", "none"):
            chosen.update((name, None) for name in by_name if text.lower() == "all")
            continue
        name, _, indices = text.partition(":")
        if name not in by_name:
            raise SpecError("--logs %s: no job %r in this run; jobs: %s (or 'all', 'none')"
                            % (text, name, ", ".join(by_name)))
        if not indices:
            chosen.add((name, None))
            continue
        try:
            numbers = {int(part) for part in indices.split(",")}
        except ValueError:
            raise SpecError("--logs %s: use JOB or JOB:INDEX,... like worker:0,2" % text) from None
        wrong = sorted(numbers - set(by_name[name].task_indices()))
        if wrong:
            raise SpecError("--logs %s: %s has no task %s" % (text, name, wrong[0]))
        chosen.update((name, index) for index in numbers)
    return lambda slot: (slot.job.name, None) in chosen or slot.key in chosen


def shown_logs(spec):
    """The predicate of what is shown live, from the run's ``logs`` choices."""
    return logs_filter(spec.logs, spec.jobs) if spec.logs else default_logs
