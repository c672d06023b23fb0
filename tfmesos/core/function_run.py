"""``tfmesos.run(fn, *args, ...)``: a Python function in every task of a
replica run; the chief's (else worker 0's) return value comes back, and the
first failing task's exception is raised with its remote traceback.

It is tfrun's replica run with a runner for the command: ``fn`` and
``args`` are cloudpickled into a payload (``ship/function_payload.py``)
that the run ships beside the user's directory (``ShipSpec.extra_files``:
served by the run's bundle server, fetched into every sandbox, so agents
need share nothing with the caller); each task runs ``python -m
tfmesos.task.function_runner``, which calls ``fn(*args)`` with the task's
``TF_CONFIG`` set and writes the outcome for the task entry, which sends it
over its authenticated rendezvous connection before its exit frame
(``task/result_file.py``, ``core/result_inbox.py``). Only this module unpickles
it, in the calling process: what the caller's own function returned.
"""

import os
import pickle
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from ..exceptions import ClusterError, RemoteTaskError, SpecError, TaskFailed, TFMesosError
from ..protocol import task_env
from ..task.result_file import MAX_RESULT
from . import config
from .function_options import OPTIONS, Ship, in_keywords
from .remote_errors import Sources, local_sources, remote_error
from .restarts import RestartPolicy
from .spec import AUTO, Job, RunSpec, pairs, parse_jobs

if TYPE_CHECKING:   # annotations only: a run imports them as it goes
    from ..ship.bundle import ShipSpec
    from ..ship.function_payload import Payload
    from .launch import ClusterRun
    from .slots import TaskSlot

RUNNER = "-m tfmesos.task.function_runner"
RESULT_WAIT = 30.0     # for the value after the trainers ended
ERROR_WAIT = 5.0       # for a failed task's exception after its failure
MAX_LINE = 64 * 1024   # characters of an unfinished output line held back

def run(fn: Callable[..., Any], *args: Any, workers: int = 2, ps: int = 0, chief: bool = False,
        evaluator: bool = False, ship: Ship = ".", **options: Any) -> Any:
    """Run ``fn(*args)`` in every task of a cluster of ``workers`` workers,
    ``ps`` parameter servers, a chief and an evaluator if asked, each with
    its ``TF_CONFIG`` (and tfrun's ``TFMESOS_*`` variables) set; return the
    chief's return value, else worker 0's.

    ``fn`` and ``args`` travel with cloudpickle: functions of a script's
    ``__main__`` or of a notebook by value, those of modules by reference
    (the modules must import on the agents: ship them). ``ship`` (default
    the current directory; None: nothing but the function) is packed and
    each task runs in it, as ``tfrun --ship``. The tasks' Python must be
    the caller's version: ``python=`` (default: this interpreter on the
    embedded master, ``python3`` elsewhere) or ``python_env=`` (a
    conda-pack/venv-pack archive).

    A task whose ``fn`` raised fails the run: the first failing task's
    exception is raised here as ``RemoteTaskError`` (a ``TaskFailed``)
    naming the task, with the remote traceback in its message and the
    exception as ``__cause__`` when it unpickles here. A return value is
    bounded (``MAX_RESULT``, 64 MiB pickled).

    ``options``: ``OPTIONS``, tfrun's flags by name (``cpus``, ``mem``,
    ``gpus`` for workers and the evaluator; ``ps_*``, ``chief_*``;
    ``master``, ``image``, ``python_env``, ``max_restarts``, ...); another
    name is a TypeError naming the valid ones. What cannot start (a bad
    option, a shipped directory over its limit) is raised here as a
    ``SpecError``, a ``ShipError``, ...: a ``TFMesosError`` naming the
    keyword arguments to change.
    """
    if not callable(fn):
        raise TypeError("tfmesos.run needs a function to run, got %r" % (fn,))
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError("tfmesos.run() got an unexpected option %r; valid options: workers, "
                        "ps, chief, evaluator, ship, %s" % (unknown[0], ", ".join(sorted(OPTIONS))))
    settings = dict(OPTIONS, **options)
    try:
        jobs = run_jobs(workers, ps, chief, evaluator, settings)
        return ship_and_run(fn, args, jobs, ship, settings)
    except TFMesosError as exc:
        worded = in_keywords(exc, ship)
        if worded is exc:
            raise
        raise worded from None   # the caller's mistake, not tfmesos': raised by the call


def ship_and_run(fn: Callable[..., Any], args: tuple[Any, ...], jobs: Sequence[Job], ship: Ship,
                 settings: Mapping[str, Any]) -> Any:
    """``run``'s run of ``jobs``: its payload packed, shipped and run."""
    from ..ship import work_dirs
    from ..ship.function_payload import pack_function
    limit = MAX_RESULT
    work = work_dirs.make("function")
    try:
        ship_spec = make_ship_spec(ship, settings)
        payload = pack_function(fn, args, work, max_size=ship_spec.max_size)
        spec = run_spec(fn, jobs, settings, ship_spec, payload, limit)
        return execute(spec, logs_choice(settings["logs"], jobs), local_sources(fn))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_jobs(workers: int, ps: int, chief: bool, evaluator: bool, settings: Mapping[str, Any]
             ) -> list[Job]:
    """The run's jobs (``tfrun -w -s -c --evaluator``), checked."""
    jobs: list[dict[str, Any]] = []
    worker = {"cpus": settings["cpus"], "mem": settings["mem"], "gpus": settings["gpus"]}
    for name, count, resources in (
            ("chief", 1 if chief else 0, {key: worker[key] if settings["chief_" + key] is None
                                          else settings["chief_" + key] for key in worker}),
            ("worker", workers, worker),
            ("ps", ps, {key: settings["ps_" + key] for key in worker}),
            ("evaluator", 1 if evaluator else 0, worker)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise SpecError("tfmesos.run: %s must be a whole number of tasks, at least 0, got %r"
                            % ({"worker": "workers", "ps": "ps"}.get(name, name), count))
        if count:
            jobs.append(dict(resources, name=name, num=count))
    if not any(job["name"] in ("worker", "chief") for job in jobs):
        raise SpecError("tfmesos.run: nothing to run the function in: ask for at least one "
                        "worker (workers=N) or a chief (chief=True)")
    return parse_jobs(jobs)


def make_ship_spec(ship: Ship, settings: Mapping[str, Any]) -> "ShipSpec":
    """What the run ships: ``ship`` (a directory, or None for none), as tfrun's --ship."""
    from ..ship.bundle import ShipSpec
    max_size = settings["ship_max_size"]
    if isinstance(max_size, bool) or not isinstance(max_size, (int, float)):
        raise SpecError("ship_max_size is a number of MB, got %r" % (max_size,))
    return ShipSpec(None if ship is None else os.fspath(ship), tuple(settings["ship_exclude"]),
                    int(max_size * 1000 * 1000), settings["python_env"],
                    follow_links=settings["ship_follow_links"],
                    allow_secrets=settings["ship_allow_secrets"])


def task_python(settings: Mapping[str, Any], master: str) -> Optional[str]:
    """The tasks' interpreter: the one given; on the embedded master without
    an image or an environment, this one (the tasks are on this machine,
    and the pickles need this Python); else None (python3 on the agents)."""
    if settings["python"] is not None:
        return settings["python"]
    if master == config.LOCAL and not settings["image"] and not settings["python_env"]:
        return sys.executable
    return None


def run_spec(fn: Callable[..., Any], jobs: Sequence[Job], settings: Mapping[str, Any],
             ship_spec: "ShipSpec", payload: "Payload", limit: int) -> RunSpec:
    """The ``RunSpec`` of a run of ``fn``, its payload shipped."""
    import dataclasses
    environ = os.environ
    master = config.resolve_master(settings["master"], environ)
    image = config.resolve(settings["image"], environ, "DOCKER_IMAGE")
    python = task_python(dict(settings, image=image), master)
    env = settings["env"] or {}
    env = list(env.items()) if isinstance(env, dict) else list(env)
    env += [(task_env.FUNCTION, payload.name), (task_env.FUNCTION_SHA256, payload.sha256),
            (task_env.MAX_RESULT, str(limit))]
    local = dict(settings["local_master_options"] or {})
    if settings["no_isolation"] and settings["cgroups_enable_cfs"]:
        raise SpecError("no_isolation and cgroups_enable_cfs contradict each other: drop one")
    if settings["no_isolation"]:
        local["isolation"] = None
    elif settings["cgroups_enable_cfs"]:
        local["cgroups_enable_cfs"] = True
    name = settings["name"] or run_name(fn)
    interpreter = python if python and os.path.isabs(python) else "python3"
    import shlex
    return RunSpec(
        name=name, role=settings["role"], image=image, containerizer=settings["containerizer"],
        force_pull=settings["force_pull"], volumes=tuple(settings["volumes"]), env=tuple(env),
        secret_env=settings["secret_env"],
        launch_timeout=settings["launch_timeout"], max_attempts=settings["max_attempts"],
        user=settings["user"], python=python, jobs=tuple(jobs), mode="replica",
        command="%s %s" % (shlex.quote(interpreter), RUNNER), master=master,
        verify=settings["verify"], ca_bundle=settings["ca_bundle"],
        master_scheme=settings["master_scheme"], advertise_address=settings["advertise_address"],
        connect_timeout=settings["connect_timeout"], quiet_tensorflow=not settings["verbose"],
        restart_policy=RestartPolicy(settings["max_restarts"], settings["restart_on"],
                                     settings["restart_backoff"]),
        sticky_jobs=("worker",) if settings["sticky_workers"] else (),
        sticky_timeout=settings["sticky_timeout"], run_dir=settings["run_dir"] or AUTO,
        local_master=pairs(local), mlflow=settings["mlflow"],
        ship=dataclasses.replace(ship_spec, extra_files=((payload.name, payload.path),)))


def run_name(fn: object) -> str:
    """The run's default name: the function's."""
    name = getattr(fn, "__name__", "")
    return name if isinstance(name, str) and name.isidentifier() else "tfmesos-run"


def logs_choice(logs: Union[str, Iterable[object], None], jobs: Iterable[Job]
                ) -> "Callable[[TaskSlot], bool]":
    """Which tasks' output is shown (as tfrun's ``--logs``): None, every
    worker, the chief and the evaluator; "all", "none", or a list of
    ``job`` / ``job:i,j``."""
    if logs is None:
        return lambda slot: slot.job.name in ("worker", "chief", "evaluator")
    if isinstance(logs, str):
        logs = [logs]
    names = {job.name for job in jobs}
    chosen: set[tuple[str, Optional[int]]] = set()   # (job, None): all of its tasks
    for text in logs:
        text = str(text).strip()
        if text in ("all", "none"):
            chosen.update((name, None) for name in names if text == "all")
            continue
        name, _, indices = text.partition(":")
        if name not in names:
            raise SpecError("logs %r: no job %r in this run; jobs: %s (or 'all', 'none')"
                            % (text, name, ", ".join(sorted(names))))
        try:
            chosen.update((name, int(i)) for i in indices.split(",")) if indices \
                else chosen.add((name, None))
        except ValueError:
            raise SpecError("logs %r: use JOB or JOB:INDEX,... like worker:0,2" % text) from None
    return lambda slot: (slot.job.name, None) in chosen or slot.key in chosen


class Printer:
    """The tasks' output, each line prefixed ``[job:index] ``, on this
    process' stdout or stderr as they are when it comes (a notebook's cell)."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], str] = {}   # (task, stream) -> its unfinished line

    def __call__(self, slot: "TaskSlot", stream: str, text: str) -> None:
        key = (slot.name, stream)
        *lines, rest = (self._open.pop(key, "") + text).split("\n")
        if len(rest) > MAX_LINE:
            lines, rest = lines + [rest], ""
        if rest:
            self._open[key] = rest
        if lines:
            self._write(stream, "".join("[%s] %s\n" % (slot.name, line) for line in lines))

    def close(self) -> None:
        for (name, stream), rest in sorted(self._open.items()):
            self._write(stream, "[%s] %s\n" % (name, rest))
        self._open.clear()

    @staticmethod
    def _write(stream: str, text: str) -> None:
        target = sys.stderr if stream == "stderr" else sys.stdout
        try:
            target.write(text)
            target.flush()
        except (OSError, ValueError):
            pass    # nobody reads it any more; the run directory has it


def say(text: str) -> None:
    try:
        print("tfmesos: %s" % text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def execute(spec: RunSpec, show: "Callable[[TaskSlot], bool]", sources: Optional[Sources] = None
            ) -> Any:
    """Run ``spec``; the returning task's value, or the failure raised
    (``sources``: ``local_sources``, to make remote tracebacks readable)."""
    from ..backends.sizing import check_local
    from .launch import ClusterRun

    if spec.master == config.LOCAL and "agents" not in spec.local_master_options:
        check_local(spec.jobs, spec.local_master_options)
    printer = Printer()
    run = ClusterRun(spec, on_log=printer, forward_logs=show, notify=say)
    try:
        run.start()
        run.wait_ready()
        run.wait_finished()
        return returned_value(run)
    except TaskFailed as failure:
        error = remote_failure(run, failure, sources)
        if error is None:
            raise
        run.record.ended(error, run.phase)
        raise error from error.__cause__
    except BaseException as exc:
        run.record.ended(exc, run.phase)
        raise
    finally:
        try:
            run.stop()
        finally:
            printer.close()
            if run.record.directory and run.record.outcome_status != "succeeded":
                say("logs and run record: %s" % run.record.directory)


def returning_slot(run: "ClusterRun") -> "TaskSlot":
    slots = list(run.slots)
    return next((s for s in slots if s.job.name == "chief"), None) or \
        next(s for s in slots if s.job.name == "worker" and s.index == s.job.start)


def returned_value(run: "ClusterRun") -> Any:
    """The returning task's value, once its result came."""
    slot = returning_slot(run)
    rendezvous = run.rendezvous
    assert rendezvous is not None and slot.task_id is not None, "its trainers are done"
    result = rendezvous.results.wait(slot.task_id, RESULT_WAIT)
    if result is None:
        raise ClusterError("%s ended without sending its function's result (did it leave with "
                           "os._exit?)" % slot.name)
    if result.broken or result.status != "ok":
        raise ClusterError("%s's result cannot be used: %s" % (slot.name, result.broken
                                                             or result.error))
    try:
        return pickle.loads(bytes(result.data))
    except Exception as exc:
        raise ClusterError("%s's return value does not unpickle here: %s: %s (is its class "
                           "importable in this process?)" % (slot.name, type(exc).__name__,
                                                             exc)) from exc


def remote_failure(run: "ClusterRun", failure: TaskFailed, sources: Optional[Sources] = None
                   ) -> Optional[RemoteTaskError]:
    """``RemoteTaskError`` of the task that ``failure`` (a ``TaskFailed``)
    names, when its function's exception came; else None."""
    slot = next((s for s in run.slots if s.name == failure.task), None)
    if slot is None or slot.task_id is None or run.rendezvous is None:
        return None
    # A task that never registered never ran fn: nothing to wait for.
    result = run.rendezvous.results.wait(slot.task_id, ERROR_WAIT if slot.address else 0)
    if result is None or result.status == "ok":
        return None
    return remote_error(slot.name, result, failure, sources)
