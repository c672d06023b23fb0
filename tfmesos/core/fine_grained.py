"""Fine-grained mode: ``with tfmesos.cluster(jobs) as c:`` starts TensorFlow
servers as Mesos tasks and hands their addresses to the calling script."""

import atexit
import contextlib
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union, cast

from ..exceptions import ClusterError, SpecError, TFMesosError
from ..protocol.metric_points import Batcher
from ..record import times
from ..task import user_metrics as task_metrics
from . import config
from .cluster_arguments import Volumes, check_local, in_keywords, run_spec_of
from .events import TaskMetrics
from .jobs import JobsGiven
from .launch import ClusterRun
from .phase import ENDING, Phase
from .signals import deferring_signals
from .spec import STICKY_TIMEOUT

if TYPE_CHECKING:   # annotations only: imported when a run ships, logs to MLflow
    from ..record.mlflow_mapping import MlflowSpec
    from ..ship.bundle import ShipSpec

logger = logging.getLogger(__name__)
_E = TypeVar("_E", bound=BaseException)

# The runs whose caller's block is still open, with their LocalMetrics: what
# is open when the program ends is stopped then (``stop_open``).
_open: "dict[ClusterRun, LocalMetrics]" = {}
_open_lock = threading.Lock()
_hooked = False


def _forked() -> None:
    """In a forked child, the runs open in its parent are the parent's:
    none of them is stopped at the child's exit (``stop_open``)."""
    global _open_lock
    _open_lock = threading.Lock()   # perhaps held by another thread at the fork
    _open.clear()


os.register_at_fork(after_in_child=_forked)
LEFT_OPEN = "the program exited with the cluster() block still open"


class Cluster:
    """A running cluster: ``targets`` maps ``/job:worker/task:0`` to
    ``grpc://host:port``; ``spec`` is the plain cluster spec dict. Both
    name the servers of the latest whole restart (``restarts`` counts them)."""

    def __init__(self, run: ClusterRun) -> None:
        self._run = run
        self.run_dir: Optional[str] = run.record.directory   # the logs and run.json
        self._manager: Optional[object] = None   # what cluster() returned (_RunsOnce)

    @property
    def spec(self) -> dict[str, list[str]]:
        if getattr(self._manager, "ended", False):
            # Its servers are stopped: a session on one of their addresses
            # would wait for ever (TensorFlow's CreateSession retries).
            raise ClusterError("this cluster's with block has ended and its servers are "
                               "stopped: use c.spec and c.targets inside the block")
        if self._run.failure is not None:
            # A failed server's address hangs a session the same way.
            raise ClusterError("this cluster failed (%s): a session on its servers' addresses "
                               "would wait for ever; end the with block (c.failure says why)"
                               % self._run.failure)
        cluster = self._run.cluster_spec
        assert cluster is not None, "a Cluster is made once its run formed"
        return {job: list(addresses) for job, addresses in cluster.items()}

    @property
    def targets(self) -> dict[str, str]:
        return {"/job:%s/task:%d" % (job, index): "grpc://" + address
                for job, addresses in self.spec.items()
                for index, address in enumerate(addresses)}

    @property
    def restarts(self) -> int:
        """Whole restarts begun so far (``max_restarts``)."""
        return self._run.recovery.restarts

    def wait_ready(self, timeout: Optional[float] = None) -> dict[str, list[str]]:
        """Wait until the cluster runs (again, after a whole restart) and
        return its spec; raises its failure, ``ClusterError`` after ``timeout``."""
        began = time.monotonic()
        while self._run.phase != Phase.RUNNING or self._run.cluster_spec is None:
            self.check()
            if self.finished():
                raise ClusterError("the cluster has stopped")
            if timeout is not None and time.monotonic() > began + timeout:
                raise ClusterError("the cluster was not running again within %.0f s" % timeout)
            time.sleep(0.1)
        return self.spec

    @property
    def cluster_spec(self) -> Any:   # tf.train.ClusterSpec
        import tensorflow as tf
        return tf.train.ClusterSpec(self.spec)

    @property
    def cluster_def(self) -> Any:   # tf.train.ClusterDef
        return self.cluster_spec.as_cluster_def()

    @property
    def failure(self) -> Optional[BaseException]:
        """The error that ended the cluster early, or None."""
        return self._run.failure

    def finished(self) -> bool:
        """True once the cluster has stopped or a task has failed."""
        return self._run.failure is not None or self._run.phase in ENDING

    def cluster_resolver(self) -> Any:   # tf.distribute's SimpleClusterResolver
        """A TensorFlow cluster resolver naming this process the chief: give it
        to ``tf.distribute.ParameterServerStrategy`` (needs ``coordinator=True``)."""
        import tensorflow as tf
        if "chief" not in self.spec:
            raise ClusterError("this cluster has no chief for the calling process: "
                               "use tfmesos.cluster(jobs, coordinator=True)")
        return tf.distribute.cluster_resolver.SimpleClusterResolver(
            self.cluster_spec, task_type="chief", task_id=0, rpc_layer="grpc")

    def check(self) -> None:
        """Raise the cluster's failure, if there is one, in the caller's thread."""
        if self._run.failure is not None:
            raise self._run.failure


class LocalMetrics:
    """``tfmesos.log_metrics`` in the process that runs ``cluster()``: its
    points go to the run's record as ``TaskMetrics`` events (kept under
    ``source``), batched as a task's are (``Batcher``: bounded, at most a
    batch every half second), from any thread."""

    def __init__(self, events: "queue.SimpleQueue[object]", source: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._events = events
        self._source = source
        self._clock = clock
        self._batcher = Batcher()
        self._lock = threading.Lock()

    def __call__(self, point: Sequence[Any]) -> None:
        # Stamped by the caller's time.time(): moved onto the record's clock
        # (``record.times.now``), which a step of the wall clock leaves alone.
        at = point[1] + times.now() - time.time()
        with self._lock:
            self._batcher.add((point[0], at, point[2]))
        self.flush(due_only=True)

    def flush(self, due_only: bool = False) -> None:
        with self._lock:
            now = self._clock()
            if due_only and not self._batcher.due(now):
                return
            batch = self._batcher.take(now)
        if batch is not None:
            points, dropped = batch
            self._events.put(TaskMetrics(None, tuple(points), dropped, self._source))


class Watcher:
    """Handles ``run``'s events in a thread of its own once the cluster is
    up (the caller's thread runs the user's ``with`` block): a failure, or
    any error while handling an event, becomes the run's failure, which
    ``Cluster`` raises in the caller's thread."""

    def __init__(self, run: ClusterRun, metrics: Optional[LocalMetrics] = None) -> None:
        self._run = run
        self._metrics = metrics   # LocalMetrics: what is due goes out every loop
        self._thread = threading.Thread(target=self._loop, name="tfmesos-watch", daemon=True)

    def start(self) -> "Watcher":
        self._thread.start()
        return self

    def _loop(self) -> None:
        run = self._run
        try:
            while run.phase in (Phase.RUNNING, Phase.RESTARTING, Phase.FORMING):
                if run.phase == Phase.FORMING:   # a whole restart
                    run.form()
                run.step(0.5)
                if self._metrics is not None:
                    self._metrics.flush(due_only=True)
        except BaseException as exc:
            self._failed(exc)

    def _failed(self, error: BaseException) -> None:
        run = self._run
        if not isinstance(error, TFMesosError):
            # A bug in tfmesos (an event without a handler, an illegal phase
            # move): the run fails with it rather than being left unwatched.
            wrapped = ClusterError("tfmesos failed handling the run's events: %s: %s"
                                   % (type(error).__name__, error))
            wrapped.__cause__ = error
            error = wrapped
        run.state.fail(error)
        if run.failure is error:
            run.record.ended(error, Phase.RUNNING)
            logger.error("%s", error)
        # Said now, not when the block ends: the block may run on for long
        # (or hang in TensorFlow on the failed server, and be killed there).
        run.record.save()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)


def _refuse_unsupported(protocol: str, **original_options: object) -> None:
    if protocol != "grpc":
        raise SpecError("protocol %r is not supported: TensorFlow servers speak grpc" % protocol)
    for option, value in original_options.items():
        if value:
            raise SpecError("%s of the original TFMesos is not supported; run that part in "
                            "your script (tasks reach it through coordinator=True)" % option)


_ALREADY = "this tfmesos.cluster(...) %s; make a new tfmesos.cluster(...) for another run"


class _RunsOnce:
    """What ``cluster()`` returns: a run starts, stops and is recorded once,
    so its ``with`` block runs once; a second ``with`` (nested or after) is
    a ``ClusterError`` saying so."""

    def __init__(self, manager: "contextlib.AbstractContextManager[Cluster]") -> None:
        self._manager = manager
        self._state = "new"   # then "open" (the block runs), "ended"

    @property
    def ended(self) -> bool:
        """Whether its block has ended (its servers are stopped)."""
        return self._state == "ended"

    def __enter__(self) -> Cluster:
        if self._state != "new":
            raise ClusterError(_ALREADY % ("is running its with block already"
                                           if self._state == "open" else
                                           "has run its with block"))
        self._state = "open"
        try:
            entered = self._manager.__enter__()
        except BaseException:
            self._state = "ended"
            raise
        # The Cluster holds its manager: entered as cluster(...).__enter__(),
        # nothing else did, and the garbage collector closed the generator
        # under the caller's Cluster (the run stopped, recorded "succeeded").
        entered._manager = self
        return entered

    def __exit__(self, *exc_info: Any) -> Optional[bool]:
        self._state = "ended"
        return self._manager.__exit__(*exc_info)


_Maker = TypeVar("_Maker", bound=Callable[..., Any])


def _runs_once(make: _Maker) -> _Maker:
    """``make`` (a ``contextlib.contextmanager``) whose manager is entered once."""
    @functools.wraps(make)
    def once(*args: Any, **kwargs: Any) -> _RunsOnce:
        return _RunsOnce(make(*args, **kwargs))
    return cast(_Maker, once)


@_runs_once
@contextlib.contextmanager
def cluster(jobs: JobsGiven, master: Optional[str] = None, name: Optional[str] = None,
            quiet: bool = False, volumes: Volumes = None, local_task: object = None,
            extra_config: object = None, protocol: str = "grpc",
            env: Optional[Mapping[str, str]] = None, role: Optional[str] = None,
            containerizer_type: Optional[str] = None, force_pull_image: bool = False,
            forward_addresses: object = None, *, image: Optional[str] = None,
            launch_timeout: float = 600.0, max_attempts: int = 3,
            advertise_address: Optional[str] = None, connect_timeout: Optional[float] = None,
            local_master_options: Optional[Mapping[str, Any]] = None, coordinator: bool = False,
            user: Optional[str] = None, verify: bool = True, ca_bundle: Optional[str] = None,
            master_scheme: str = "http", run_dir: Optional[str] = None, max_restarts: int = 0,
            restart_on: str = "lost", restart_backoff: float = 2.0,
            sticky_timeout: float = STICKY_TIMEOUT,
            ship: Union[str, "os.PathLike[str]", "ShipSpec", None] = None,
            mlflow: Union[bool, str, "os.PathLike[str]", "MlflowSpec", None] = None,
            secret_env: Union[str, Iterable[str]] = ()) -> Iterator[Cluster]:
    """Start ``jobs`` (``tfmesos.Job`` or dicts) as TensorFlow servers.

    The positional parameters are the original TFMesos ones. ``master``
    defaults to ``$MESOS_MASTER``, else the embedded local master; ``image``
    to ``$DOCKER_IMAGE`` (no image: plain command tasks); ``volumes`` is a
    list of ``host:container[:ro|rw]`` strings or a ``{host: container}``
    dict. On exit every task is killed and the framework torn down; a task
    that failed while the block ran is raised as ``TaskFailed`` there.

    ``verify=False`` / ``ca_bundle`` set how ``https`` masters are checked;
    ``master_scheme="https"`` for masters found through ``zk://``.
    ``run_dir`` is where run.json goes (default
    ``./tfmesos-runs/<name>-<run id>``, ``$TFMESOS_RUNS_DIR`` instead of
    ``./tfmesos-runs``); ``Cluster.run_dir`` names it.
    ``user`` (default: yours) is the user the tasks run as; it must exist on
    the agents. ``coordinator=True`` adds a ``chief`` entry for the calling process (a
    free port on the advertised address): the script then coordinates
    ``ParameterServerStrategy`` through ``c.cluster_resolver()``, and a failed
    worker is relaunched at its address. ``max_restarts`` restarts every
    server (new addresses in ``c.spec``): README, "When tasks fail".
    ``ship`` (a directory, or a ``tfmesos.ship.bundle.ShipSpec``) sends it and the
    task side of tfmesos to every task: README, "Run on a Mesos cluster".
    While the block runs, ``tfmesos.log_metrics`` in this process records
    into the run (as ``client``; ``chief:0`` with ``coordinator=True``).
    ``mlflow`` (True: ``$MLFLOW_TRACKING_URI``, else MLflow's default here,
    ``sqlite:///mlflow.db``; a tracking URI or path; a
    ``tfmesos.record.mlflow_mapping.MlflowSpec``) logs the run to MLflow,
    its metrics as they come: README, "MLflow".
    ``secret_env`` (names of variables of this process's environment) gives
    every task those variables as Mesos secrets: README, "Security".

    What cannot start (a bad argument, a shipped directory over its limit)
    is raised here as a ``SpecError``, a ``ShipError``, ...: a
    ``TFMesosError`` naming the keyword arguments to change.
    What ``cluster()`` returns runs one block: a second ``with`` on it is a
    ``ClusterError``; make a new ``tfmesos.cluster(...)`` for another run.
    """
    del quiet  # accepted for compatibility: tfmesos logs through ``logging``
    try:
        config.working_directory()   # every relative path of the run starts there
        _refuse_unsupported(protocol, local_task=local_task, extra_config=extra_config,
                            forward_addresses=forward_addresses)
        spec = run_spec_of(
            jobs, master=master, name=name, volumes=volumes, env=env, role=role,
            containerizer_type=containerizer_type, force_pull_image=force_pull_image,
            image=image, launch_timeout=launch_timeout, max_attempts=max_attempts,
            advertise_address=advertise_address, connect_timeout=connect_timeout,
            local_master_options=local_master_options, coordinator=coordinator, user=user,
            verify=verify, ca_bundle=ca_bundle, master_scheme=master_scheme, run_dir=run_dir,
            max_restarts=max_restarts, restart_on=restart_on, restart_backoff=restart_backoff,
            sticky_timeout=sticky_timeout, ship=ship, mlflow=mlflow,
            secret_env=secret_env or ())
        check_local(spec)
    except TFMesosError as exc:
        worded: BaseException = in_keywords(exc)
        if worded is exc:
            raise
        raise worded from None   # the caller's mistake, not tfmesos': raised by the call
    run = ClusterRun(spec)
    owner = os.getpid()   # a forked child ending in the block leaves the run alone
    watcher = None
    metrics = LocalMetrics(run.events, "chief:0" if coordinator else "client")
    _hook_exit()
    with _open_lock:
        _open[run] = metrics
    recording = task_metrics.record_locally(metrics)
    inside = False   # the caller's block runs: what it raises is its own
    try:
        run.start()
        run.wait_ready()
        watcher = Watcher(run, metrics).start()
        inside = True
        yield Cluster(run)
    except BaseException as exc:
        if os.getpid() != owner:
            raise
        if not (inside and isinstance(exc, SystemExit) and exc.code in (None, 0)):
            # sys.exit() / sys.exit(0) in the block: the program ends well,
            # and the run, stopped as after any block, with it ("succeeded").
            run.record.ended(exc, run.phase if run.phase != Phase.RUNNING else "block")
        worded = exc if inside else in_keywords(exc)
        if worded is exc:
            raise
        raise worded from None
    finally:
        if os.getpid() == owner:
            _end(run, metrics, recording, watcher)
    if run.failure is not None and os.getpid() == owner:
        raise run.failure


def _end(run: ClusterRun, metrics: LocalMetrics, recording: object,
         watcher: Optional[Watcher]) -> None:
    """Stop ``run`` as its block ends, in the process that started it."""
    with _open_lock:
        stopped_at_exit = _open.pop(run, None) is None
    # A second Ctrl-C (the first ended the block) waits for the stop.
    with deferring_signals():
        task_metrics.stop_recording(recording)
        if not stopped_at_exit:   # else the interpreter is finalizing: nothing is left to do
            metrics.flush()   # recorded by the stop with what else is queued
            run.stop()
            if watcher is not None:
                watcher.join(5)
            if run.record.directory and run.record.outcome_status != "succeeded":
                logger.warning("logs and run record: %s", run.record.directory)


def _hook_exit() -> None:
    global _hooked
    with _open_lock:
        if _hooked:
            return
        _hooked = True
    # atexit, not threading's: a non-daemon thread of the caller's may still use
    # the cluster until it is joined; and the block's own finally, run as the
    # interpreter finalizes, could no longer start a thread nor reach the master.
    atexit.register(stop_open)


def stop_open() -> None:
    """Stop every run whose block is still open (at exit: a generator never
    closed, ``__enter__`` without ``__exit__``): its tasks killed, its
    framework torn down, its run.json finished, "interrupted"."""
    with _open_lock:
        left = list(_open.items())
        _open.clear()
    for run, metrics in left:
        logger.warning("%s: stopping it%s", LEFT_OPEN, "; logs and run record: %s"
                       % run.record.directory if run.record.directory else "")
        with deferring_signals():
            if run.failure is None:
                run.record.outcome("interrupted", LEFT_OPEN)
            metrics.flush()
            run.stop()


