"""``LocalMaster``: the local master's public face. It starts and stops the
master (HTTP server, loop thread, tasks, sandboxes), adds agents, offers
fault injection (``remove_agent``, ``drop_subscription``,
``stall_subscription``, ``set_leader``: ``faults.py``) and hands calls to
its parts:

* ``records.Records``: all state, behind one lock;
* ``allocator.Allocator``: allocation rounds, offers, filters, rescinds;
* ``updates.StatusUpdates``: the reliable status update queue;
* ``tasks.TaskLauncher``: launching, killing and reaping tasks;
* ``executors.Executors``: custom executors and their tasks (task groups of
  the default executor: ``task_groups``);
* ``frameworks.Frameworks``: SUBSCRIBE, failover, removal;
* ``calls.SchedulerCalls``: every other scheduler call;
* ``loop.MasterLoop``: the thread that runs timers and allocation rounds.

All state sits behind one lock. Nothing that can block on the network or on
a process runs under it: events go into each subscription's queue (written
by that stream's own thread), tasks run on their own threads
(``executor.py``), and timers (status update retries, failover timeouts,
allocation rounds) run on the master's loop thread, which takes the lock
only for short updates.

With ``isolation`` (``cgroups/cpu,cgroups/mem``, as root) each task runs
in cgroups of its own that hold it to its cpus and mem, as a Mesos agent
with the cgroups isolators does (``cgroups.py``).

With ``network_namespaces`` each agent lives in its own Linux network
namespace and address (``netns.py``) and the master listens in the hub
namespace too, so tasks and a scheduler run there talk as across hosts.

Mesos behaviour reproduced here (see ``master/master.cpp``): status updates
of one task are delivered in order, one at a time, re-sent with backoff until
acknowledged; master-generated updates (TASK_ERROR, invalid offers, lost
agents, reconciliation) carry no uuid and need no acknowledgement; a
disconnected framework keeps its tasks for ``failover_timeout`` seconds;
decline/accept filters refuse a subset of an agent's resources for
``refuse_seconds``; a task's processes are all gone (its group, and any that
left it with setsid(), found by their ``MESOS_SANDBOX``) before its terminal
update goes out, as when Mesos destroys a container; the tasks of a master
that died end as its executors end them when a Mesos agent dies
(``watchdog.Watchdog``, a process of its own from the first task's launch).
"""

import itertools
import logging
import math
import os
import shutil
import threading
import time
from typing import Optional

from .agent import LATEST, Agent, AgentSpec
from .allocator import Allocator
from .api import stout, validation
from .api.agent_http import AgentHTTPServer, AgentListeners
from .api.auth import Authenticator, credentials_table
from .api.http_server import MasterHTTPServer
from .api.operator_json import event_agent_added, event_subscribed
from .api.state_json import render_master_info, render_state, render_version
from .call_handlers import SchedulerCalls
from .cleanup import make_work_dir, pid_namespace, remove_stale_work_dirs, start_cleaner
from .containerizer import fs_isolation
from .containerizer.cgroup_limits import parse_isolation
from .containerizer.cgroups import INITIAL_PID_NAMESPACE, Isolator
from .containerizer.environment import executor_environment as base_environment
from .containerizer.fetch_cache import DEFAULT_FETCHER_CACHE_SIZE, MAX_FETCHER_CACHE_SIZE
from .containerizer.netns import AgentNetwork, call_in_namespace, check_supported, remove_stale
from .containerizer.runner import ProcessRunner
from .containerizer.users import WORK_DIR_MODE, UserSwitch, root_submissions_error
from .errors import CallError, LocalMasterError
from .executors import REGISTRATION_TIMEOUT, SHUTDOWN_GRACE_PERIOD, Executors
from .faults import FaultInjection
from .frameworks import Frameworks
from .ids import uuid4_text
from .loop import MasterLoop
from .records import Records
from .subscribers import DEFAULT_BUFFER_BYTES, DEFAULT_MAX_SUBSCRIBERS
from .tasks import TaskLauncher
from .updates import StatusUpdates
from .watchdog import RECOVERY_TIMEOUT, Watchdog

log = logging.getLogger(__name__)


MIN_INTERVAL = 0.01        # seconds: a shorter period would keep a core busy
MAX_INTERVAL = 86400.0     # a day
STREAM_END_WAIT = 5.0      # seconds stop() gives the open streams to write their end


def _seconds(value, low=MIN_INTERVAL):
    """Whether ``value`` is a finite number of seconds from ``low`` to a day."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) \
        and math.isfinite(value) and low <= value <= MAX_INTERVAL


def _check_settings(heartbeat_interval, allocation_interval, status_update_retry,
                    kill_grace_period, agents, port=0):
    """The AgentSpecs to start with; ValueError/TypeError for bad settings."""
    for name, value in (("heartbeat_interval", heartbeat_interval),
                        ("allocation_interval", allocation_interval),
                        ("status_update_retry", status_update_retry)):
        if not _seconds(value):
            raise ValueError("LocalMaster(%s=%r): must be a number of seconds from %g to %g"
                             % (name, value, MIN_INTERVAL, MAX_INTERVAL))
    if not _seconds(kill_grace_period, 0):
        raise ValueError("LocalMaster(kill_grace_period=%r): must be a number of seconds from 0 "
                         "to %g" % (kill_grace_period, MAX_INTERVAL))
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError("LocalMaster(port=%r): must be a port from 0 to 65535 (0: any free "
                         "one)" % (port,))
    specs = [AgentSpec()] if agents is None else list(agents)
    for spec in specs:
        if not isinstance(spec, AgentSpec):
            raise TypeError("LocalMaster(agents=...) takes AgentSpec objects, got %r"
                            % (spec,))
    return specs


def _check_network(specs):
    """LocalMasterError unless agents can get network namespaces."""
    check_supported()
    default = AgentSpec.__dataclass_fields__["hostname"].default
    for spec in specs:
        if spec.hostname != default:
            raise LocalMasterError("AgentSpec(hostname=%r) with network namespaces: each "
                                   "agent's hostname is its address; drop the hostname"
                                   % spec.hostname)


class LocalMaster(FaultInjection):
    """A single-process Mesos master speaking the v1 scheduler HTTP API.

    ``agents``: AgentSpecs (default: one agent sized to this machine).
    ``heartbeat_interval``: seconds between HEARTBEAT events, on the
    scheduler API's streams and the operator API's alike (Mesos' one
    ``DEFAULT_HEARTBEAT_INTERVAL``, 15 s, src/master/constants.hpp).
    ``max_operator_event_stream_subscribers``: the Mesos master flag of
    that name (default 1000): past it, a new operator SUBSCRIBE closes the
    oldest stream. ``operator_event_buffer``: bytes of events that may wait
    for one operator subscriber (default 16 MiB; Mesos has no bound): one
    that reads too slowly is dropped, the others go on.
    ``allocation_interval``: seconds between allocation rounds (a round also
    runs promptly after SUBSCRIBE, REVIVE and freed resources).
    ``status_update_retry``: first re-send of an unacknowledged status
    update, doubling up to 10 minutes. ``kill_grace_period``: SIGTERM to
    SIGKILL, unless the task's or the call's kill policy says otherwise.
    ``work_dir``: where sandboxes go (default a temporary directory, removed
    by ``stop()`` unless ``keep_sandboxes``). ``runner``: runs plain command
    tasks (default ``ProcessRunner()``); ``container_runner``: runs tasks
    that name an image (default none: such tasks fail).
    ``filter_gpu_resources``: the Mesos master flag of that name, with its
    default (True, src/master/flags.cpp): GPU agents are offered only to
    frameworks with the GPU_RESOURCES capability; False offers them to
    every framework, GPUs included (``isCapableOfReceivingAgent`` in
    src/master/allocator/mesos/hierarchical.cpp).
    ``network_namespaces``: as root, give each agent its own network
    namespace and address (``netns.py``); the master then also listens at
    ``hub_url`` inside the hub namespace (``network.hub``).
    ``hidden_paths``: what the tasks of ``AgentSpec(isolate=("fs",))``
    agents do not see (default ``fs_isolation.default_hidden_paths()``).
    ``isolation``: the agents' isolators, as Mesos' ``--isolation`` flag
    (``"cgroups/cpu,cgroups/mem"``; default none, Mesos' ``posix/cpu,
    posix/mem``: nothing enforced); ``cgroups_enable_cfs``: also cap each
    task's cpus with the CFS quota, as Mesos' ``--cgroups_enable_cfs``
    (default off there too). Needs root (``cgroups.py``).

    Security (README "Security"): ``credentials`` (``{principal: secret}``
    or pairs) makes every scheduler request authenticate with HTTP basic
    authentication, as Mesos' ``--authenticate_http_frameworks`` with
    ``--credentials``. ``executor_environment``: the variables every
    executor and command task starts with, as the agent flag
    ``--executor_environment_variables`` (default none: ``PATH`` only; never
    the master's own environment); a task group's tasks, nested containers,
    get none of them, as on Mesos.
    ``allow_root``: whether container tasks may run as root (default: only
    when this master runs as root itself). ``switch_user``: as the Mesos
    agent flag ``--switch_user`` (default on, as in Mesos): a plain task runs
    as its ``CommandInfo.user``, else its ``FrameworkInfo.user``, in a
    sandbox of that user's, its URIs fetched as that user; an unknown user's
    task never launches (TASK_LOST, or TASK_DROPPED). That needs this master
    to run as root (then anyone who can reach it runs tasks as any user,
    root included, unless ``credentials`` keep them out); not as root, only
    tasks of its own user launch, as on a Mesos agent. False runs every task
    as this master's user (``containerizer/users.py``). ``root_submissions``:
    as the Mesos master flag ``--root_submissions`` (default on, as in
    Mesos); False refuses a framework whose user is root (its SUBSCRIBE
    answered with Mesos' ERROR) and a task whose user is root by name or
    uid (TASK_ERROR, ``REASON_TASK_UNAUTHORIZED``); ValueError where every
    task would run as root anyway (as root, with ``switch_user=False``).

    ``strict``: False reads calls as real Mesos does (stout's parser:
    unknown fields skipped, ``null`` unset, ``"true"``/``"5"`` converted,
    unknown optional enum values dropped; ``stout.py``), logging each kind
    of deviation once per framework at WARNING; True refuses all that with
    400 naming the field (``api/validation.py``), to catch a framework's protocol
    mistakes. None (default): ``$MESOS_LOCAL_STRICT``, else False.

    Custom executors (``TaskInfo.executor``, ``executors.py``): as the Mesos
    agent flags ``--executor_registration_timeout`` (seconds an executor
    may take to subscribe before it is killed; default 60) and
    ``--executor_shutdown_grace_period`` (seconds between SHUTDOWN and its
    destruction; default 5; an ExecutorInfo's ``shutdown_grace_period``
    wins), ``executor_registration_timeout`` and
    ``executor_shutdown_grace_period``. With ``credentials`` the agents
    authenticate their custom executors, as with Mesos'
    ``--authenticate_http_executors``: each gets a token of its own
    (``MESOS_EXECUTOR_AUTHENTICATION_TOKEN``) that its calls carry as
    ``Authorization: Bearer <token>``.

    Should this master's process die (SIGKILL, a crash: no ``stop()``),
    its tasks (processes, containers) end as a Mesos agent's do when it dies
    (``watchdog.py``): at once, or, for a framework that checkpoints
    (``FrameworkInfo.checkpoint``), once ``recovery_timeout`` seconds
    passed, as Mesos' agent flag ``--recovery_timeout`` (default 900, 15
    minutes): no master recovers them.

    ``fetcher_cache_size``: the bytes each agent's fetcher cache holds at
    most, as Mesos' agent flag ``--fetcher_cache_size`` (default 2 GiB, as
    Mesos): the least recently used entries no fetch is using are evicted
    (``containerizer/fetch_cache.py``).
    """

    def __init__(self, agents=None, host="127.0.0.1", port=0, heartbeat_interval=15.0,
                 allocation_interval=0.25, status_update_retry=10.0, kill_grace_period=3.0,
                 work_dir=None, keep_sandboxes=False, runner=None, container_runner=None,
                 filter_gpu_resources=True, credentials=None, executor_environment=None,
                 allow_root=None, network_namespaces=False, strict=None, hidden_paths=None,
                 isolation=None, cgroups_enable_cfs=False, switch_user=True,
                 root_submissions=True,
                 max_operator_event_stream_subscribers=DEFAULT_MAX_SUBSCRIBERS,
                 operator_event_buffer=DEFAULT_BUFFER_BYTES,
                 executor_registration_timeout=REGISTRATION_TIMEOUT,
                 executor_shutdown_grace_period=SHUTDOWN_GRACE_PERIOD,
                 recovery_timeout=RECOVERY_TIMEOUT,
                 fetcher_cache_size=DEFAULT_FETCHER_CACHE_SIZE):
        refused = root_submissions_error(switch_user, root_submissions)
        if refused is not None:
            raise ValueError(refused)
        if isinstance(fetcher_cache_size, bool) or not isinstance(fetcher_cache_size, int) \
                or not 0 <= fetcher_cache_size <= MAX_FETCHER_CACHE_SIZE:
            raise ValueError("LocalMaster(fetcher_cache_size=%r): must be a whole number of "
                             "bytes from 0 to %d" % (fetcher_cache_size, MAX_FETCHER_CACHE_SIZE))
        for name, value in (("max_operator_event_stream_subscribers",
                             max_operator_event_stream_subscribers),
                            ("operator_event_buffer", operator_event_buffer)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError("LocalMaster(%s=%r): must be a whole number of at least 1"
                                 % (name, value))
        for name, value in (("executor_registration_timeout", executor_registration_timeout),
                            ("executor_shutdown_grace_period", executor_shutdown_grace_period),
                            ("recovery_timeout", recovery_timeout)):
            if not _seconds(value, 0):
                raise ValueError("LocalMaster(%s=%r): must be a number of seconds from 0 to %g"
                                 % (name, value, MAX_INTERVAL))
        self._specs = _check_settings(heartbeat_interval, allocation_interval,
                                      status_update_retry, kill_grace_period, agents, port)
        if network_namespaces:
            _check_network(self._specs)
        if any("fs" in spec.isolate for spec in self._specs):
            fs_isolation.check_supported()
        self.hidden_paths = list(fs_isolation.default_hidden_paths() if hidden_paths is None
                                 else hidden_paths)
        isolators = parse_isolation(isolation)
        if cgroups_enable_cfs and "cgroups/cpu" not in isolators:
            raise ValueError("cgroups_enable_cfs (--cgroups-enable-cfs) needs the cgroups/cpu "
                             "isolator: add isolation='cgroups/cpu' (--isolation cgroups/cpu)")
        self.isolator = Isolator(isolators, cgroups_enable_cfs) if isolators else None
        table = credentials_table(credentials)
        self._authenticator = Authenticator(table) if table else None
        base_env = base_environment(executor_environment)
        self.allow_root = os.geteuid() == 0 if allow_root is None else bool(allow_root)
        self.user_switch = UserSwitch(switch_user)
        self.root_submissions = bool(root_submissions)
        self.host = host
        self.port = port
        self.heartbeat_interval = float(heartbeat_interval)
        self.allocation_interval = float(allocation_interval)
        self.status_update_retry = float(status_update_retry)
        self.kill_grace_period = float(kill_grace_period)
        self.keep_sandboxes = keep_sandboxes
        self.filter_gpu_resources = bool(filter_gpu_resources)
        self.network_namespaces = bool(network_namespaces)
        self.strict = stout.strict_default() if strict is None else bool(strict)
        self._deviations = stout.DeviationLog()
        self.network: Optional[AgentNetwork] = None   # while running
        self.hub_url = None
        self._hub_http: Optional[MasterHTTPServer] = None
        self._network_lock = threading.Lock()
        self.id = uuid4_text()
        self.url = None
        self.work_dir = work_dir
        self.master_info = None
        self._own_work_dir = work_dir is None
        self._agent_counter = itertools.count()
        self._leader = None              # None: this master leads
        self._http: Optional[MasterHTTPServer] = None
        # Each agent's own HTTP server (and its twin in the hub namespace).
        self._agent_servers: list[AgentHTTPServer] = []
        self._agent_listeners = AgentListeners()   # one thread accepts for them all
        self._start_time = None

        records = self._records = Records()
        subscribers = records.subscribers
        subscribers.heartbeat_interval = self.heartbeat_interval
        subscribers.max_subscribers = max_operator_event_stream_subscribers
        self.max_operator_event_stream_subscribers = max_operator_event_stream_subscribers
        subscribers.buffer_bytes = operator_event_buffer
        # glog's verbosity (FLAGS_v) as the operator API's GET_LOGGING_LEVEL and
        # SET_LOGGING_LEVEL see it (libprocess' Logging, src/logging.cpp).
        self._verbosity = 0
        self._verbosity_until = 0.0
        self._logger_level: Optional[int] = None     # the level toggled from, while toggled
        self.recovery_timeout = float(recovery_timeout)
        self._watchdog = Watchdog(self.recovery_timeout,
                                  owner=self.isolator.name if self.isolator else None)
        allocator = self._allocator = Allocator(records, self.id, self.allocation_interval,
                                                filter_gpu_resources)
        loop = self._loop = MasterLoop(records, allocator)
        updates = self._updates = StatusUpdates(records, loop, allocator,
                                                self.status_update_retry)
        tasks = self._tasks = TaskLauncher(
            records, allocator, updates, loop, self.kill_grace_period,
            runner if runner is not None else ProcessRunner(), container_runner, base_env,
            self.allow_root, self.isolator, hidden_paths=self.hidden_paths,
            user_switch=self.user_switch, root_submissions=self.root_submissions,
            watchdog=self._watchdog, fetcher_cache_size=fetcher_cache_size)
        self.fetcher_cache_size = fetcher_cache_size
        self.executor_registration_timeout = float(executor_registration_timeout)
        self.executor_shutdown_grace_period = float(executor_shutdown_grace_period)
        executors = self._executors = Executors(
            records, allocator, updates, loop, tasks, self._executor_endpoint,
            self.executor_registration_timeout, self.executor_shutdown_grace_period,
            authenticate=self._authenticator is not None, recovery_timeout=self.recovery_timeout)
        tasks.executors = executors
        frameworks = self._frameworks = Frameworks(records, allocator, updates, tasks, loop,
                                                   self.id, self.heartbeat_interval,
                                                   self.root_submissions)
        self._calls = SchedulerCalls(records, allocator, updates, tasks, frameworks)

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        """Start serving; returns the URL (``http://127.0.0.1:PORT``)."""
        records = self._records
        with records.lock:
            if records.status != "new":
                raise LocalMasterError("a LocalMaster can be started only once "
                                       "(this one is %s)" % records.status)
            records.status = "starting"
        try:
            agents, http = self._prepare()
        except BaseException:
            with records.lock:
                records.status = "stopped"
            self._close_listeners()
            self._remove_network()
            self._remove_cgroups()
            self._remove_work_dir()
            self._close_runner()
            raise
        self.port = http.server_port
        url_host = http.url_host
        self.url = "http://%s:%d" % (url_host, self.port)
        self._start_time = time.time()
        self.master_info = render_master_info(self.id, url_host, self.port)
        self._frameworks.master_info = self.master_info
        with records.lock:
            records.files_address = (url_host.strip("[]"), self.port)
            for agent in agents:
                records.agents[agent.id] = agent
            records.status = "running"
            self._allocator.next_round = time.monotonic()
        try:
            self._loop.start()
            http.start()
            for server in list(self._agent_servers):
                server.start()
            hub_http, network = self._hub_http, self.network
            if hub_http is not None and network is not None:   # both or neither
                hub_http.start()
                self.hub_url = "http://%s:%d" % (network.hub_address, hub_http.server_port)
        except BaseException:
            # A thread that could not start ("can't start new thread": ulimit
            # -u reached): nobody holds this master to stop it; its work
            # directory, listeners and runner go now.
            self.stop()
            raise
            log.info("local master %s: network namespaces, %s; listening on %s there",
                     self.id, network.describe(), self.hub_url)
        log.info("local master %s listening on %s with %d agent(s), work dir %s, %s%s",
                 self.id, self.url, len(agents), self.work_dir,
                 "strict calls" if self.strict else "tolerant calls (as Mesos parses them)",
                 ", isolation %s" % self.isolator.describe() if self.isolator else "")
        note = self.user_switch.describe()
        if note is not None:
            log.info("local master %s: %s", self.id, note)
        return self.url

    def _prepare(self):
        """Make the work dir and the agents, bind the port; returns the
        agents and the server listening there (``_http``, not started)."""
        if self.work_dir is None:
            # Those of masters killed before they (or their cleaners) removed them.
            remove_stale_work_dirs()
            # Named after this process, unless kept: then no later master removes it.
            self.work_dir = make_work_dir(named=not self.keep_sandboxes)
            if self.user_switch.switches:
                # The tasks' users pass through to their sandboxes (0750 each).
                os.chmod(self.work_dir, WORK_DIR_MODE)
        else:
            self.work_dir = os.path.abspath(self.work_dir)
            try:
                # One it makes is as its own temporary one: only the tasks'
                # users pass through (one that exists keeps its mode).
                if not os.path.isdir(self.work_dir):
                    os.makedirs(self.work_dir)
                    # chmod, not makedirs' mode, which the umask cuts (077: 0700)
                    os.chmod(self.work_dir,
                             WORK_DIR_MODE if self.user_switch.switches else 0o700)
            except OSError as exc:
                raise LocalMasterError("cannot create the work directory %s: %s; choose another"
                                       % (self.work_dir, exc.strerror or exc)) from None
        if self.network_namespaces:
            remove_stale()   # of masters killed before they could clean up
            self.network = AgentNetwork().create()
        if self.isolator is not None:
            self.isolator.start()   # after removing the cgroups of killed masters
        agents = [self._new_agent(spec) for spec in self._specs]
        http = self._http = self._listen(self.host, self.port)
        if self.network is not None:
            # The same port in the hub's own port space; the socket stays there.
            self._hub_http = call_in_namespace(self.network.hub, self._listen,
                                               self.network.hub_address, http.server_port)
        for agent in agents:
            self._agent_listen(agent, http.url_host)
        return agents, http

    def _agent_listen(self, agent, url_host):
        """Bind ``agent``'s own HTTP server (``agent_http.py``) on the
        master's host, on a free port (in the hub namespace too, on the same
        port, as the master's); its ``address`` names it from then on.
        Returns the servers, not started."""
        servers: list[AgentHTTPServer] = []
        try:
            servers.append(AgentHTTPServer(self, agent, self.host, 0, self._agent_listeners))
            if self.network is not None:
                servers.append(call_in_namespace(
                    self.network.hub, AgentHTTPServer, self, agent, self.network.hub_address,
                    servers[0].server_port, self._agent_listeners))
        except OSError as exc:
            for server in servers:
                server.server_close()
            raise LocalMasterError("agent %s cannot listen on %s: %s"
                                   % (agent.id, self.host, exc.strerror or exc)) from exc
        self._agent_servers.extend(servers)
        agent.address = (url_host.strip("[]"), servers[0].server_port)
        return servers

    def _listen(self, host: str, port: int) -> MasterHTTPServer:
        try:
            return MasterHTTPServer(self, host, port)
        except OSError as exc:
            raise LocalMasterError("the local master cannot listen on %s:%s: %s"
                                   % (host, port, exc.strerror or exc)) from exc

    def _close_listeners(self):
        for server in [self._http, self._hub_http] + self._agent_servers:
            if server is not None:
                server.stop()
        self._agent_listeners.close()

    def _remove_network(self):
        with self._network_lock:
            network, self.network = self.network, None
        if network is not None:
            network.destroy()

    def _remove_cgroups(self):
        if self.isolator is not None:
            self.isolator.stop()

    def stop(self, detached_cleanup=False):
        """Kill every task (SIGTERM, SIGKILL after the grace period), close
        every stream, free the port, remove the tasks' cgroups and the work
        directory (unless given or ``keep_sandboxes``). Idempotent.

        ``detached_cleanup``: the cgroups and the work directory are removed
        by a process of their own that outlives this one (``cleanup.py``),
        not before stop() returns: for a process that exits once its master
        stopped (tfmesos' tfrun). The tasks are gone before stop() returns
        either way; what that cleaner does not get to (killed with SIGKILL)
        the next master's start removes."""
        records = self._records
        with records.lock:
            if records.status in ("new", "stopped"):
                records.status = "stopped"
                self._close_runner()
                return
            if records.status == "stopping":
                return
            records.status = "stopping"
            procs = list(records.procs)
            streams = list(records.subscribers.subscribed.values())
            for framework in records.frameworks.values():
                if framework.subscription is not None:
                    streams.append(framework.subscription)
                    framework.subscription.close()
                framework.connected = framework.active = False
            records.subscribers.close_all()
            self._loop.timers.clear()
            records.cond.notify_all()
        grace = self.kill_grace_period
        for proc in procs:
            proc.kill(grace)
        self._loop.join(5)
        # Each stream ends with its HTTP end (the last chunk) before the
        # listeners shut the connections down, however slowly its handler
        # thread gets to it; one whose reader does not read waits no longer
        # than STREAM_END_WAIT in all.
        deadline = time.monotonic() + STREAM_END_WAIT
        for stream in streams:
            stream.wait_ended(max(0.0, deadline - time.monotonic()))
        self._close_listeners()
        with records.lock:  # anything launched while the first kills went out
            late = [proc for proc in records.procs if proc not in procs]
        for proc in late:
            proc.kill(grace)
        procs += late
        deadline = time.monotonic() + grace + 10
        stuck = False
        for proc in procs:
            if not proc.join(max(0.0, deadline - time.monotonic())):
                stuck = True
                log.warning("task %s did not end within %.0f s of stop()",
                            proc.launch.task_id, grace + 10)
        remove_own = getattr(self._tasks.container_runner, "remove_own", None)
        if stuck and remove_own is not None:
            # A launch its engine has not answered: the container it made goes
            # now, not with the next master on the engine (remove_orphans).
            for name in remove_own():
                log.warning("removed container %s, whose launch had not ended", name)
        if not self._tasks.escapes.drain():
            log.warning("local master %s: processes that left their tasks' cgroups were "
                        "still being killed as it stopped", self.id)
        self._watchdog.close(wait=not detached_cleanup)
        with records.lock:
            records.status = "stopped"
            self._set_verbosity(0)
        self._close_runner()
        self._remove_network()
        if detached_cleanup and self._clean_up_detached():
            return
        self._remove_cgroups()
        if not self.keep_sandboxes:
            self._remove_work_dir()

    def _clean_up_detached(self):
        """Hand the cgroups and the work directory to a detached cleaner;
        False when none could start (then stop() removes them itself)."""
        tree = None if self.keep_sandboxes else self._removable_work_dir()
        if self.isolator is None and tree is None:
            return True
        if os.getpid() == 1 or pid_namespace() != INITIAL_PID_NAMESPACE:
            # A pid namespace of its own (unshare -fp, a container): the
            # kernel kills every process of the namespace as its init exits,
            # a cleaner too (pid_namespaces(7)), and that init may be this
            # process or exit right after it (tini, a shell that did not
            # exec); what a killed cleaner left is named for a namespace no
            # later master runs in.
            return False
        isolator = self.isolator
        try:
            start_cleaner(list(isolator.directories.values()) if isolator else [], tree)
        except OSError as exc:
            log.warning("local master %s: cannot start a cleaner (%s); removing its cgroups "
                        "and sandboxes now", self.id, exc)
            return False
        if isolator is not None:
            isolator.release()   # the cleaner's now
        return True

    def _close_runner(self):
        close = getattr(self._tasks.runner, "close", None)   # warm_tasks.WarmProcessRunner
        if close is not None:
            close()

    def _removable_work_dir(self):
        """The work directory this master made, where it (still) is, else None."""
        if self._own_work_dir and self.work_dir and os.path.isdir(self.work_dir):
            return self.work_dir
        return None

    def _remove_work_dir(self):
        work_dir = self._removable_work_dir()
        if work_dir is not None:
            shutil.rmtree(work_dir, ignore_errors=True)

    # ------------------------------------------------------------------ the HTTP layer's calls

    @property
    def authenticates(self):
        """Whether scheduler requests must authenticate (credentials given)."""
        return self._authenticator is not None

    def authenticate(self, header):
        """The principal an ``Authorization`` header authenticates, or None."""
        return self._authenticator.principal(header) if self._authenticator else None

    def parse_call(self, call):
        """A Call (parsed JSON) as this master reads it: strict, checked
        against the Mesos messages; tolerant, as Mesos' parser leaves it.
        Raises validation.SchemaError (400) either way for what Mesos refuses."""
        if self.strict:
            validation.validate_message("Call", call)
            return call
        parsed, deviations = stout.parse("Call", call)
        self._deviations.report(call, deviations)
        return parsed

    def parse_message(self, name, value):
        """Any message of ``messages.py`` (an operator API ``master.Call``)
        read as ``parse_call`` reads a Call; deviations are logged as the
        operator's."""
        if self.strict:
            validation.validate_message(name, value)
            return value
        parsed, deviations = stout.parse(name, value)
        self._deviations.report(value, deviations, source="an operator")
        return parsed

    def teardown(self, framework_id):
        """Remove a registered framework and kill its tasks (the operator
        API's TEARDOWN, ``/master/teardown``); False when none has that id."""
        with self._records.lock:
            framework = self._records.frameworks.get(framework_id)
            if framework is None or not self._records.running:
                return False
            log.info("framework %s torn down by an operator", framework_id)
            self._frameworks.remove(framework)
            return True

    def subscribe(self, call, principal=None, address=None):
        """Handle a SUBSCRIBE call (of the authenticated ``principal``, that
        reached this master at ``address``, (host, port): its offers' ``url``
        names it); returns the Subscription to stream. A refused
        subscription streams an ERROR event and ends."""
        return self._frameworks.subscribe(call, principal, address)

    def attached(self, framework_id, executor_id, run=LATEST):
        """The sandbox directory of ``executor_id``'s run ``run`` (a container
        id, or ``latest``: its newest), as a Mesos agent attaches it to
        ``/files`` (``files.resolve``; a command task's executor id is its
        task id), or None."""
        with self._records.lock:
            if run == LATEST:
                return self._records.sandboxes.get((framework_id, executor_id))
            return self._records.runs.get((framework_id, executor_id, run))

    def agent_sandboxes(self, agent_id):
        """``attached`` (as above) of the sandboxes of ``agent_id``'s tasks
        only: what that agent's own ``/files`` and ``READ_FILE`` serve."""
        directory = os.path.join(self.work_dir or "", "agents", agent_id) + os.sep

        def attached(framework_id, executor_id, run=LATEST):
            path = self.attached(framework_id, executor_id, run)
            return path if path is not None and path.startswith(directory) else None
        return attached

    def stream_ended(self, subscription, reason):
        """The HTTP layer reports that a SUBSCRIBE stream ended."""
        self._frameworks.stream_ended(subscription, reason)

    def scheduler_call(self, call, stream_id, principal=None):
        """Handle any call but SUBSCRIBE (of the authenticated ``principal``);
        returns (HTTP status, content type, body) or raises CallError."""
        return self._calls.handle(call, stream_id, principal)

    def _executor_endpoint(self, agent):
        """``MESOS_AGENT_ENDPOINT`` of ``agent``'s executors: its server's
        ``ip:port`` where they run (the hub namespace's address for an agent
        in a network namespace of its own)."""
        host, port = agent.address
        network = self.network
        if agent.netns is not None and network is not None:
            host = network.hub_address
        return "%s:%d" % ("[%s]" % host if ":" in host else host, port)

    def executor_principal(self, token):
        """The executor a bearer ``token`` authenticates (``executors.py``),
        or None."""
        with self._records.lock:
            return self._executors.principal(token)

    def executor_call(self, agent, call, principal=None):
        """A (parsed, validated) v1 executor Call to ``agent``'s
        ``/api/v1/executor`` (``api/executor_api.py``) of the authenticated
        executor ``principal`` (None: executors are not authenticated): a
        Subscription to stream for SUBSCRIBE, else None (202); CallError
        otherwise."""
        with self._records.lock:
            if not self._records.running:
                raise CallError(503, "Agent is terminating")
            executors = self._executors
            executor = executors.find(agent, call)
            if principal is not None:
                executors.check_claims(principal, call, executor)
            kind = call["type"]
            if kind == "SUBSCRIBE":
                return executors.subscribe(agent, call)
            executors.check_subscribed(executor)
            if kind == "UPDATE":
                executors.update(agent, executor, call["update"]["status"])
            elif kind == "MESSAGE":
                executors.message(agent, executor, call["message"]["data"])
            return None

    def executor_stream_ended(self, subscription, reason):
        """The HTTP layer reports that an executor's SUBSCRIBE stream ended."""
        with self._records.lock:
            self._executors.stream_ended(subscription)

    def operator_subscribe(self):
        """An operator API SUBSCRIBE: the Subscription to stream (SUBSCRIBED,
        HEARTBEAT, then every event; ``subscribers.py``), or None when the
        master is stopping."""
        records = self._records
        with records.lock:
            if not records.running:
                return None
            return records.subscribers.subscribe(
                event_subscribed(records, self.heartbeat_interval))

    def operator_stream_ended(self, subscription, reason):
        """The HTTP layer reports that an operator SUBSCRIBE stream ended."""
        with self._records.lock:
            self._records.subscribers.ended(subscription)

    @property
    def logging_level(self):
        """The verbosity GET_LOGGING_LEVEL reports (glog's ``FLAGS_v``, 0 by default)."""
        with self._records.lock:
            return self._verbosity

    def set_logging_level(self, level, duration):
        """SET_LOGGING_LEVEL (libprocess' ``Logging::set_level``): this
        verbosity for ``duration`` seconds, then back to 0 (a later call's
        duration replaces an earlier one's). Above 0 the master logs at
        DEBUG (its ``mesos_local`` loggers), as glog's ``VLOG`` prints then."""
        with self._records.lock:
            self._set_verbosity(level)
            if level != 0:
                self._verbosity_until = time.monotonic() + max(0.0, duration)
                if self._records.running:
                    self._loop.schedule(max(0.0, duration), self._revert_verbosity)

    def _revert_verbosity(self):
        with self._records.lock:    # Logging::revert: only once the latest timeout expired
            if time.monotonic() >= self._verbosity_until:
                self._set_verbosity(0)

    def _set_verbosity(self, level):
        logger = logging.getLogger("mesos_local")
        if level > 0 and self._logger_level is None:
            self._logger_level = logger.level
            logger.setLevel(logging.DEBUG)
        elif level == 0 and self._logger_level is not None:
            logger.setLevel(self._logger_level)
            self._logger_level = None
        self._verbosity = level

    def state(self, files_address=None):
        """The /master/state document; ``files_address``: (host, port) its
        agents' endpoints are named at (default: the master's URL)."""
        with self._records.lock:
            return render_state(self, self._records, self._start_time, files_address)

    def read(self, render, *args):
        """``render(self, records, *args)`` under the master's lock (the read
        endpoints build their documents so)."""
        with self._records.lock:
            return render(self, self._records, *args)

    @property
    def start_time(self):
        """When the master started (time.time()), None before."""
        return self._start_time

    def version_json(self):
        """The /version document, as a real master serves it (tools and humans
        read it; nothing in tfmesos does)."""
        return render_version()

    def leader(self):
        with self._records.lock:
            return self._leader

    # ------------------------------------------------------------------ agents

    def add_agent(self, spec):
        """Add an agent (an AgentSpec) while running; returns its id."""
        if not isinstance(spec, AgentSpec):
            raise TypeError("add_agent takes an AgentSpec, got %r" % (spec,))
        if self.work_dir is None:
            raise LocalMasterError("start the master before adding agents")
        http = self._http
        if http is None:
            raise LocalMasterError("start the master before adding agents")
        agent = self._new_agent(spec)
        servers = self._agent_listen(agent, http.url_host)
        with self._records.lock:
            if not self._records.running:
                for server in servers:
                    server.server_close()
                raise LocalMasterError("the master is %s: start a new one"
                                       % self._records.status)
            for server in servers:
                server.start()
            self._records.agents[agent.id] = agent
            # Master::addSlave (src/master/master.cpp)
            self._records.subscribers.send(lambda: event_agent_added(agent))
            self._allocator.request()
        return agent.id

    def _new_agent(self, spec):
        with self._network_lock:
            index = next(self._agent_counter)
            hostname = netns = None
            if self.network_namespaces:
                if self.network is None:
                    raise LocalMasterError("the master is stopped: start a new one")
                netns, hostname = self.network.add_agent(index)
            return Agent("%s-S%d" % (self.id, index), spec, self.work_dir, index,
                         hostname=hostname, netns=netns)


__all__ = ["LocalMaster", "LocalMasterError"]
