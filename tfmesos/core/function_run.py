"""``tfmesos.run(fn, *args, ...)``: a Python function in every task of a
replica run; every task's return value comes back (a ``RunResult``, the
chief's, else worker 0's, as ``.value``), and the first failing task's
exception is raised with its remote traceback. ``tfmesos.submit``
(``function_submit``) runs the same call in a thread of its own
(``FunctionCall``), which another thread may cancel (``Cancel``).

It is tfrun's replica run with a runner for the command: ``fn`` and
``args`` are cloudpickled into a payload (``ship/function_payload.py``)
that the run ships beside the user's directory (``ShipSpec.extra_files``:
served by the run's bundle server, fetched into every sandbox, so agents
need share nothing with the caller); each task runs ``python -m
tfmesos.task.function_runner``, which calls ``fn(*args)`` with the task's
``TF_CONFIG`` set and writes the outcome for the task entry, which sends it
over its authenticated rendezvous connection before its exit frame
(``task/result_file.py``, ``core/result_inbox.py``); ``function_results``
turns them into the call's value or its failure, in the calling process.
"""

import inspect
import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..exceptions import SpecError, TaskFailed, TFMesosError
from ..protocol import task_env
from ..task.result_file import MAX_OTHER_RESULTS, MAX_RESULT
from . import config
from .caller import run_command, script_name
from .function_options import OPTIONS, Ship, flags_as_keywords, in_keywords
from .function_output import Printer, logs_choice
from .function_results import collect, remote_failure
from .inputs import as_switch
from .jobs import Job, parse_jobs
from .remote_errors import DYNAMIC_CODE, Sources, local_sources, readable
from .restarts import RestartPolicy
from .run_cancel import Cancel
from .run_result import RunResult
from .signals import deferring_signals
from .spec import AUTO, RunSpec
from .spec_fields import local_master_pairs, pairs, user_env, volumes_given
from .thread_runs import cancelled_at_exit

if TYPE_CHECKING:   # annotations only: a run imports them as it goes
    from ..ship.bundle import ShipSpec
    from ..ship.function_payload import Payload
    from .launch import ClusterRun
    from .slots import TaskSlot

RUNNER = "-m tfmesos.task.function_runner"

def run(fn: Callable[..., Any], *args: Any, workers: int = 2, ps: int = 0, chief: bool = False,
        evaluator: bool = False, ship: Ship = ".", **options: Any) -> RunResult:
    """Run ``fn(*args)`` in every task of a cluster of ``workers`` workers,
    ``ps`` parameter servers, a chief and an evaluator if asked, each with
    its ``TF_CONFIG`` (and tfrun's ``TFMESOS_*`` variables) set; return a
    ``RunResult``: every task's return value by task name
    (``result["worker:1"]``, ``.values``), and as ``.value`` the chief's,
    else worker 0's: what ``run`` returned before it returned them all.

    ``framework="torch"`` or ``"jax"`` (workers only, as ``tfrun --torch``
    and ``--jax``: ``training_frameworks``) runs ``fn`` in the framework's
    distributed environment instead of with ``TF_CONFIG``: torch's default
    process group initialised before it (``env://``; backend "nccl" where
    the task has GPUs and CUDA, else "gloo") and destroyed after;
    ``jax.distributed.initialize()`` before it and
    ``jax.distributed.shutdown()`` after (``task/process_group.py``); a
    task where it raised ends without the teardown, its error first. The
    default, "tensorflow", sets up nothing.

    The run ends once the chief (else every worker) returned, as tfrun's
    does: a task still running then (a ps serving, a worker after the
    chief) is stopped and has no value (``.missing`` says why).

    An ``async def`` fn runs in each task as ``asyncio.run(fn(*args))``, an
    event loop of its own; an async generator function is refused here.

    ``fn`` and ``args`` travel with cloudpickle: functions of a script's
    ``__main__`` or of a notebook by value, those of modules by reference
    (the modules must import on the agents: ship them). ``ship`` (default
    the current directory; None: nothing but the function) is packed and
    each task runs in it, as ``tfrun --ship``. The tasks' Python must be
    the caller's version: ``python=`` (default: this interpreter on the
    embedded master, ``python3`` elsewhere) or ``python_env=`` (a
    conda-pack/venv-pack archive).

    A task whose ``fn`` raised fails the run: the first failing task's
    exception is raised here as a ``RemoteTaskError`` (a ``TaskFailed``)
    naming the task, with the remote traceback in its message and the
    exception as ``__cause__``; when it unpickles here (an ``Exception``),
    the error is also of its type (``except ZeroDivisionError`` catches
    it, ``remote_errors``). A return value is bounded: 64 MiB pickled
    (``MAX_RESULT``) for ``.value``'s task, and the other tasks share 256
    MiB (``MAX_OTHER_RESULTS``); another task's value that cannot come
    back (too big, not picklable) is in ``.missing``, not a failure.

    ``options``: ``OPTIONS``, tfrun's flags by name (``cpus``, ``mem``,
    ``gpus`` for workers and the evaluator; ``ps_*``, ``chief_*``;
    ``master``, ``image``, ``python_env``, ``max_restarts``, ...); another
    name is a TypeError naming the valid ones. What cannot start (a bad
    option, a shipped directory over its limit) is raised here as a
    ``SpecError`` (a ``ValueError``), a ``ShipError``, ...: a
    ``TFMesosError`` naming the keyword arguments to change.
    ``tfmesos.submit`` starts the same run without waiting for it.
    """
    try:
        call = FunctionCall.make("tfmesos.run", fn, args, workers, ps, chief, evaluator, ship,
                                 options)
        what = "tfmesos.run(%s)" % (getattr(fn, "__qualname__", None) or type(fn).__name__)
        with cancelled_at_exit(what) as cancel:
            return call.execute(cancel)
    except TFMesosError as exc:
        worded = in_keywords(exc, ship)
        if worded is exc:
            raise
        raise worded from None   # the caller's mistake, not tfmesos': raised by the call


class FunctionCall:
    """One call's run of ``fn``, checked and packed (``make``), to
    ``execute`` once: ``run`` at once, ``submit`` in a thread of its own.
    ``work``: the temporary directory of its payload, removed at the end."""

    def __init__(self, spec: RunSpec, show: "Callable[[TaskSlot], bool]",
                 sources: Optional[Sources], work: str) -> None:
        self.spec, self.show, self.sources, self.work = spec, show, sources, work

    @classmethod
    def make(cls, caller: str, fn: Callable[..., Any], args: tuple[Any, ...], workers: int,
             ps: int, chief: bool, evaluator: bool, ship: Ship, options: Mapping[str, Any]
             ) -> "FunctionCall":
        """The call of ``caller`` ("tfmesos.run"): its options checked, the
        function and its arguments pickled into its payload."""
        from ..ship import work_dirs
        from ..ship.function_payload import pack_function
        from .cluster_arguments import check_local
        if not callable(fn):
            raise TypeError("%s needs a function to run, got %r" % (caller, fn))
        if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
            raise SpecError("%s cannot run %s: a%s generator function returns a generator, "
                            "which cannot come back from a task; run one that returns what "
                            "it collects (a list)" % (
                                caller, getattr(fn, "__qualname__", fn),
                                "n async" if inspect.isasyncgenfunction(fn) else ""))
        config.working_directory()   # every relative path of the run starts there
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError("%s() got an unexpected option %r; valid options: workers, ps, chief, "
                            "evaluator, ship, %s" % (caller, unknown[0], ", ".join(sorted(OPTIONS))))
        settings = checked_settings(caller, dict(OPTIONS, **options), chief=chief,
                                    evaluator=evaluator)
        chief, evaluator = settings.pop("chief"), settings.pop("evaluator")
        jobs = run_jobs(workers, ps, chief, evaluator, settings, caller)
        work = work_dirs.make("function")
        try:
            ship_spec = make_ship_spec(ship, settings)
            payload = pack_function(fn, args, work, max_size=ship_spec.max_size)
            spec = run_spec(fn, jobs, settings, ship_spec, payload, MAX_RESULT)
            check_local(spec)   # submit's too: raised by the call, before anything starts
            show = logs_choice(settings["logs"], jobs)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        return cls(spec, show, local_sources(fn), work)

    def execute(self, cancel: Optional["Cancel"] = None) -> RunResult:
        """Run it (``cancel``: how another thread stops it); its ``RunResult``."""
        try:
            return execute(self.spec, self.show, self.sources, cancel)
        finally:
            self.discard()

    def discard(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


def checked_settings(caller: str, settings: dict[str, Any], **flags: Any) -> dict[str, Any]:
    """``settings`` and ``flags`` (chief, evaluator) with their types
    checked (SpecError naming the one of the wrong type) and made plain: a
    switch (an option whose default is True or False) True or False
    ("no" would be True; numpy's bools are taken), ``python`` a string,
    ``ship_exclude`` a tuple of strings (a generator read once, here)."""
    switches = [name for name, default in OPTIONS.items() if isinstance(default, bool)]
    checked = dict(settings, **flags)
    for name in switches + list(flags):
        value = as_switch(checked[name])
        if value is None:
            raise SpecError("%s: %s must be True or False, got %r" % (caller, name,
                                                                      checked[name]))
        checked[name] = value
    python = checked["python"]
    if python is not None:
        if not isinstance(python, (str, os.PathLike)):
            raise SpecError("%s: python must be a path (a string), got %r" % (caller, python))
        checked["python"] = os.fspath(python)
    exclude = checked["ship_exclude"]
    if not isinstance(exclude, (str, bytes)) and isinstance(exclude, Iterable):
        exclude = checked["ship_exclude"] = tuple(exclude)
        for pattern in exclude:
            if not isinstance(pattern, str):
                raise SpecError("%s: ship_exclude takes a list of patterns (strings), got %r "
                                "in it" % (caller, pattern))
    return checked


def run_jobs(workers: int, ps: int, chief: bool, evaluator: bool, settings: Mapping[str, Any],
             caller: str = "tfmesos.run") -> list[Job]:
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
            raise SpecError("%s: %s must be a whole number of tasks, at least 0, got %r"
                            % (caller, {"worker": "workers", "ps": "ps"}.get(name, name), count))
        if count:
            jobs.append(dict(resources, name=name, num=count))
    if not any(job["name"] in ("worker", "chief") for job in jobs):
        raise SpecError("%s: nothing to run the function in: ask for at least one worker "
                        "(workers=N) or a chief (chief=True)" % caller)
    return parse_jobs(jobs)


def make_ship_spec(ship: Ship, settings: Mapping[str, Any]) -> "ShipSpec":
    """What the run ships: ``ship`` (a directory, or None for none), as tfrun's --ship."""
    from ..ship.bundle import ShipSpec
    max_size = settings["ship_max_size"]
    if isinstance(max_size, bool) or not isinstance(max_size, (int, float)):
        raise SpecError("ship_max_size is a number of MB, got %r" % (max_size,))
    if isinstance(ship, os.PathLike):
        ship = os.fspath(ship)
    exclude = settings["ship_exclude"]
    if isinstance(exclude, (str, bytes)):   # read a character at a time: every file left out
        raise SpecError("ship_exclude takes a list of patterns, got the string %r: give [%r]"
                        % (exclude, exclude))
    return ShipSpec(ship, tuple(exclude),
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
    env = user_env(settings["env"])
    env += [(task_env.FUNCTION, payload.name),
            (task_env.MAX_RESULT, str(limit)),
            (task_env.MAX_OTHER_RESULT, str(other_limit(limit, jobs))),
            (task_env.FRAMEWORK, str(settings["framework"]))]
    local = dict(local_master_pairs(settings["local_master_options"]))
    if settings["no_isolation"] and settings["cgroups_enable_cfs"]:
        raise SpecError("no_isolation and cgroups_enable_cfs contradict each other: drop one")
    if settings["no_isolation"]:
        local["isolation"] = None
    elif settings["cgroups_enable_cfs"]:
        local["cgroups_enable_cfs"] = True
    # Unnamed: after the script that called it (core.caller), as tfrun names its runs.
    name = settings["name"] or script_name()
    interpreter = python if python and os.path.isabs(python) else "python3"
    import shlex
    return RunSpec(
        name=name, shown_command=run_command(fn), role=settings["role"], image=image,
        containerizer=settings["containerizer"],
        force_pull=settings["force_pull"], volumes=volumes_given(settings["volumes"]), env=tuple(env),
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
        local_master=pairs(local), mlflow=settings["mlflow"], framework=settings["framework"],
        ship=dataclasses.replace(ship_spec, extra_files=((payload.name, payload.path),)))


def other_limit(limit: int, jobs: Sequence[Job]) -> int:
    """The bound of the value of a task other than the returning one: the
    others share ``MAX_OTHER_RESULTS`` (each at most ``limit``), so that
    the caller holds at most ``limit + MAX_OTHER_RESULTS`` bytes of pickles."""
    others = sum(job.num for job in jobs) - 1
    return min(limit, MAX_OTHER_RESULTS // others) if others > 0 else limit


def execute(spec: RunSpec, show: "Callable[[TaskSlot], bool]", sources: Optional[Sources] = None,
            cancel: Optional[Cancel] = None) -> RunResult:
    """Run ``spec``; every task's value, or the failure raised (``sources``:
    ``local_sources``, to make remote tracebacks readable; ``cancel``: how
    another thread stops the run)."""
    from .launch import ClusterRun

    printer = Printer()
    # Every task's output reaches the run directory (tfmesos logs, the tail
    # said of a failed task), as tfrun's; ``show``'s is printed.
    def shown(slot: "TaskSlot", stream: str, text: str) -> None:
        if show(slot):
            if sources and DYNAMIC_CODE in text:   # a traceback's frame of the caller's code
                text = readable(text, sources)
            printer(slot, stream, text)
    run = ClusterRun(spec, on_log=shown, notify=printer.say)
    failed: Optional[str] = None   # a task that failed without its function's exception
    try:
        if cancel is not None:
            cancel.attach(run)
        run.start()
        run.wait_ready()
        run.wait_finished()
        return collect(run)
    except TaskFailed as failure:
        error = remote_failure(run, failure, sources)
        if error is None:
            failed = failure.task
            failure.args = (flags_as_keywords(str(failure)),)   # its words: mem=, not -Mw
            raise
        if error.task != failure.task:
            run.record.caused_by(error, run.phase)
        else:
            run.record.ended(error, run.phase)
        raise error from error.__cause__
    except BaseException as exc:
        # Also once its trainers were done (wait_finished recorded it
        # succeeded): what collect raises fails the call, and its record.
        run.record.failed_after_all(exc, run.phase)
        raise
    finally:
        # A second Ctrl-C (the first interrupted the wait) waits for the stop,
        # not for a reader of the output (the printer's close).
        try:
            with deferring_signals():
                run.stop()
                if failed is not None:   # after the stop, which records its last lines
                    say_why(run, failed, show, printer)
                if run.record.directory and run.record.outcome_status != "succeeded":
                    printer.say("logs and run record: %s" % run.record.directory)
        finally:
            printer.close()


def say_why(run: "ClusterRun", task_name: str, show: "Callable[[TaskSlot], bool]",
            printer: Printer, lines: int = 10) -> None:
    """What tells why ``task_name`` failed without an exception of its
    function (it exited, was killed, ran out of memory), as tfrun says it:
    the run's hint, and the last lines it wrote to stderr unless they were
    shown (a ps, ``logs="none"``)."""
    if run.record.hint:
        printer.say("hint: %s" % flags_as_keywords(run.record.hint))
    slot = next((slot for slot in run.slots if slot.name == task_name), None)
    tail = run.record.tail(task_name, "stderr", lines) if slot and not show(slot) else []
    if tail:
        printer.say("the last lines %s wrote to stderr:" % task_name)
        for line in tail:
            printer.say_as(task_name, line)
