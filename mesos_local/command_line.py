"""``mesos-local`` (``python -m mesos_local``): run the local master until
SIGINT/SIGTERM.

``main(argv=None, prog=None)`` is the whole command line, so a framework's
own command (``tfmesos local-master``) can reuse it. It prints one line,
``local Mesos master listening on http://127.0.0.1:PORT``, stops cleanly (killing every task) on SIGINT or
SIGTERM and exits 0; a port already in use is a one-line error and exit 1.
A task that names an image runs in a Docker container (the engine of
``$DOCKER_HOST``, connected on the first such task; ``--no-docker`` refuses
such tasks instead).

Agents: ``--agents N`` alike, or ``--agent cpus=2,mem=4096,gpus=2`` once per
agent. ``--netns`` (root) puts each agent in its own network namespace and
prints two more lines: the hub namespace with the master's URL there, and
how to run a scheduler in it. GPU agents are offered only to frameworks
with GPU_RESOURCES unless ``--no-filter-gpu-resources`` (Mesos' default).

Calls are read as real Mesos reads them (unknown fields skipped, ``null``
unset, ...: each such deviation logged once per framework at WARNING);
``--strict`` refuses them with 400 instead, naming the field, to test a
framework's own calls (default: ``$MESOS_LOCAL_STRICT``, else off).

Isolation: ``--isolation cgroups/cpu,cgroups/mem`` (as root) holds every
task to its cpus and mem with cgroups, as Mesos' agent flag of that name
(default: none, Mesos' ``posix/cpu,posix/mem``); ``--cgroups-enable-cfs``
also caps its cpus with the CFS quota, as Mesos' ``--cgroups_enable_cfs``.

Killed with SIGKILL, the master's tasks end after it, as a Mesos agent's
when the agent dies (``watchdog.py``): at once, or, for a framework that
checkpoints, after ``--recovery-timeout`` (Mesos' agent flag, 15 minutes).

Every number is finite and bounded (a usage error, exit 2, says which):
cpus, mem and disk at most 10^15 (Mesos' fixed-point scalars), at most 1024
GPUs and 100 agents, ports 0-65535, intervals from 0.01 s to a day, the
fetcher cache (``--fetcher-cache-size``, Mesos' agent flag) 1024TB;
``--work-dir`` is made before the master starts, and ``$DOCKER_HOST`` read
(``docker_host``). A reader of its output that went away (``mesos-local |
head``) ends it quietly, as SIGPIPE would, status 141.

Security (README "Security"): ``--credentials FILE`` makes frameworks
authenticate (Mesos' ``--authenticate_http_frameworks --credentials``);
listening beyond the loopback interface without it is a usage error (exit
2). Tasks get ``--executor-environment-variables`` (default: ``PATH``
only), never this process's environment. ``--allow-root`` lets container
tasks run as root when the master itself does not. Plain tasks run as
their ``CommandInfo.user``, else their ``FrameworkInfo.user``, as Mesos'
agent with ``--switch_user`` (root needed; ``--no-switch-user`` runs every
task as this process's user). ``--no-root-submissions`` refuses root's
frameworks and tasks (Mesos' master flag ``--root_submissions=false``). A
master run as root without ``--credentials`` says at its start, in one
warning line on stderr, that any framework can run tasks as any user it
names, and how to stop that (``root_warning``).
"""

import argparse
import ipaddress
import logging
import math
import os
import re
import signal
import sys
import threading

from .agent import MAX_GPUS, MAX_SCALAR, AgentSpec, AgentSpecError
from .api.auth import CredentialsError, read_credentials
from .containerizer.environment import parse_environment_json
from .containerizer.fetch_cache import DEFAULT_FETCHER_CACHE_SIZE, MAX_FETCHER_CACHE_SIZE
from .containerizer.users import WORK_DIR_MODE, root_submissions_error
from .docker_host import docker_host_error
from .errors import LocalMasterError
from .executors import REGISTRATION_TIMEOUT, SHUTDOWN_GRACE_PERIOD
from .master import MAX_INTERVAL, MIN_INTERVAL, LocalMaster
from .watchdog import RECOVERY_TIMEOUT

PORT_RANGE = (31000, 32000)
AGENT_KEYS = ("cpus", "mem", "disk", "gpus", "ports", "hostname", "isolate")
MAX_AGENTS = 100
SIGPIPE_EXIT = 128 + 13   # a shell's status for a process SIGPIPE killed


def _within(kind, low, high):
    """An argparse type: a finite ``kind`` from ``low`` to ``high``."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError("expected %s, got %r" % (
                "a whole number" if kind is int else "a number", text)) from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError("must be %s from %g to %g, got %s" % (
                "a whole number" if kind is int else "a number", low, high, text))
        return value
    parse.__name__ = kind.__name__
    return parse


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(r"^(?=.{1,253}$)%s(?:\.%s)*\.?$" % (_LABEL, _LABEL))


def _host(text):
    """An argparse type: an IP address (IPv6 with a zone too) or a host name
    (RFC 1123); "" listens on every address, as the socket calls read it."""
    if not text or _HOST_NAME.match(text):
        return text
    try:
        ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        raise argparse.ArgumentTypeError("%r is neither an IP address nor a host name: give "
                                         "an address of this machine, e.g. 127.0.0.1"
                                         % text) from None
    return text


# stout's Bytes::parse units (binary), as Mesos reads --fetcher_cache_size.
_BYTE_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
_BYTES = re.compile(r"([0-9]+)([A-Za-z]*)")


def _bytes(text):
    """An argparse type: a whole number of bytes, in Mesos' form (2GB,
    512MB, 4096B; units B, KB, MB, GB, TB, binary; a unit is needed, as
    stout's ``Bytes::parse`` reads it)."""
    match = _BYTES.fullmatch(text)
    unit = _BYTE_UNITS.get(match.group(2).upper()) if match else None
    if match is None or unit is None:
        raise argparse.ArgumentTypeError("expected a whole number of bytes with a unit of B, "
                                         "KB, MB, GB or TB, e.g. 2GB, got %r" % text)
    value = int(match.group(1)) * unit
    if value > MAX_FETCHER_CACHE_SIZE:
        raise argparse.ArgumentTypeError("must be at most %dTB, got %s"
                                         % (MAX_FETCHER_CACHE_SIZE >> 40, text))
    return value


def _positive(kind):
    return _within(kind, 0, MAX_GPUS if kind is int else MAX_SCALAR)


def add_agent_options(parser):
    """--cpus, --mem, --gpus, --agents, --agent and --netns."""
    parser.add_argument("--cpus", type=_positive(float), default=None,
                        help="cpus each agent offers, at most 10^15 (default: this machine's cpu "
                             "count)")
    parser.add_argument("--mem", type=_positive(float), default=None,
                        help="memory in MB each agent offers, at most 10^15 (default: physical "
                             "memory minus 1 GiB)")
    parser.add_argument("--gpus", type=_positive(int), default=None,
                        help="GPUs each agent offers, as fake ids 0..N-1, at most %d (default: the "
                             "NVIDIA GPUs 'nvidia-smi -L' lists, else none)" % MAX_GPUS)
    parser.add_argument("--agents", type=_within(int, 1, MAX_AGENTS), default=None, metavar="N",
                        help="number of agents, 1 to %d; they share this machine and split the "
                             "port range %d-%d between them (default: 1)"
                             % ((MAX_AGENTS,) + PORT_RANGE))
    parser.add_argument("--agent", dest="agent_specs", action="append", type=parse_agent,
                        metavar="SPEC", default=None,
                        help="an agent, e.g. cpus=2,mem=4096,gpus=0,ports=31000-31099,"
                             "hostname=node1 (keys: %s; gpus=N gives N fake GPUs); "
                             "repeat for several, up to %d agents; keys left out come from --cpus, --mem, "
                             "--gpus and a slice of the port range; isolate=fs (root) runs "
                             "its tasks with the --hide directories hidden, as on another "
                             "host" % (", ".join(AGENT_KEYS), MAX_AGENTS))
    parser.add_argument("--hide", action="append", default=None, metavar="DIR",
                        help="with isolate=fs agents: a directory their tasks do not see "
                             "(repeatable; default: this master's working directory, the "
                             "home directory and the directory mesos_local is installed in)")
    parser.add_argument("--netns", action="store_true",
                        help="as root: put each agent in its own Linux network namespace "
                             "with its own address (10.X.Y.2, .3, ...), as hosts of a "
                             "cluster; the master also listens at 10.X.Y.1 in a hub "
                             "namespace, where schedulers run (ip netns exec HUB "
                             "SCHEDULER --master 10.X.Y.1:PORT)")


def build_parser(prog="python -m mesos_local"):
    parser = argparse.ArgumentParser(
        prog=prog, allow_abbrev=False,   # --heart must not pass for --heartbeat-interval
        description="Run the embedded single-machine Mesos master: it serves the Mesos v1 "
                    "scheduler HTTP API and runs each task as a local process in its own "
                    "sandbox (a task that names an image in a Docker container). Give "
                    "its URL to a scheduler as the Mesos master. Stops (and kills every "
                    "task) on Ctrl-C or SIGTERM.")
    parser.add_argument("--host", type=_host, default="127.0.0.1",
                        help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=_within(int, 0, 65535), default=5050,
                        help="port to listen on, 0 to 65535; 0 for any free one (default: "
                             "%(default)s)")
    add_agent_options(parser)
    parser.add_argument("--heartbeat-interval", type=_within(float, MIN_INTERVAL, MAX_INTERVAL),
                        default=15.0,
                        metavar="S", help="seconds between HEARTBEAT events, %g to %g "
                                          "(default: %%(default)s)"
                                          % (MIN_INTERVAL, MAX_INTERVAL))
    parser.add_argument("--executor-registration-timeout",
                        type=_within(float, 0, MAX_INTERVAL), default=REGISTRATION_TIMEOUT,
                        metavar="S", help="seconds a custom executor may take to subscribe "
                                          "before it is killed, as Mesos' agent flag "
                                          "(default: %(default)s)")
    parser.add_argument("--executor-shutdown-grace-period",
                        type=_within(float, 0, MAX_INTERVAL), default=SHUTDOWN_GRACE_PERIOD,
                        metavar="S", help="seconds from an executor's SHUTDOWN to its "
                                          "destruction, as Mesos' agent flag (default: "
                                          "%(default)s)")
    parser.add_argument("--recovery-timeout",
                        type=_within(float, 0, MAX_INTERVAL), default=RECOVERY_TIMEOUT,
                        metavar="S", help="seconds the tasks of a framework that checkpoints "
                                          "outlive this master if it dies (SIGKILL), as "
                                          "Mesos' agent flag; other tasks end at once "
                                          "(default: %(default)s)")
    parser.add_argument("--fetcher-cache-size", type=_bytes, default=DEFAULT_FETCHER_CACHE_SIZE,
                        metavar="BYTES",
                        help="the most each agent's fetcher cache holds, e.g. 500MB (units B, "
                             "KB, MB, GB, TB), as Mesos' agent flag --fetcher_cache_size: the "
                             "least recently used entries no fetch is using are evicted "
                             "(default: 2GB, as Mesos)")
    parser.add_argument("--work-dir", default=None, metavar="DIR",
                        help="where task sandboxes go; kept after exit (default: a "
                             "temporary directory removed at exit)")
    parser.add_argument("--filter-gpu-resources", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="as the Mesos master flag --filter_gpu_resources (default: "
                             "on, as in Mesos): offer GPU agents only to frameworks with "
                             "the GPU_RESOURCES capability; --no-filter-gpu-resources "
                             "offers them, GPUs included, to every framework")
    parser.add_argument("--no-docker", dest="docker", action="store_false",
                        help="run plain command tasks only: a task that names an image "
                             "fails (default: run it in Docker, through the engine of "
                             "$DOCKER_HOST, connected on the first such task)")
    parser.add_argument("--credentials", metavar="FILE", default=None,
                        help="authenticate frameworks (HTTP basic authentication) against "
                             "this Mesos credentials file: JSON {\"credentials\": "
                             "[{\"principal\": ..., \"secret\": ...}]} or one 'principal "
                             "secret' per line; required with a --host other than loopback")
    parser.add_argument("--executor-environment-variables", metavar="JSON", default=None,
                        help="the environment every executor and command task starts "
                             "with (a task group's tasks get none of it), a JSON object of "
                             "strings (or file:///path to one), as the Mesos agent flag "
                             "(default: PATH only, never this process's environment)")
    parser.add_argument("--allow-root", action="store_true",
                        help="let container tasks run as root (default: only when this "
                             "master runs as root itself)")
    parser.add_argument("--switch-user", action=argparse.BooleanOptionalAction, default=True,
                        help="as the Mesos agent flag --switch_user (default: on, as in "
                             "Mesos): run each task as its CommandInfo.user, else its "
                             "FrameworkInfo.user, in a sandbox of that user's, fetching its "
                             "URIs as that user (needs root; not as root only tasks of this "
                             "master's own user run); --no-switch-user runs every task as "
                             "this master's user")
    # Mesos' master flag --root_submissions ("Can root submit frameworks?",
    # src/master/flags.cpp; refused in Master::validateFramework,
    # src/master/master.cpp).
    parser.add_argument("--root-submissions", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="as the Mesos master flag --root_submissions (default: on, as "
                             "in Mesos): --no-root-submissions refuses a framework whose "
                             "FrameworkInfo.user is root (an ERROR event, Mesos' words) and "
                             "a task whose user is root (TASK_ERROR, "
                             "REASON_TASK_UNAUTHORIZED); as root without --credentials this "
                             "master warns at start that any framework may run tasks as any "
                             "user it names")
    parser.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                        help="refuse with 400 what real Mesos' JSON parser tolerates "
                             "(unknown fields, null, \"true\" for true, unknown enum "
                             "values), naming the field: to test a framework's own calls "
                             "(default: $MESOS_LOCAL_STRICT, else tolerant, as "
                             "Mesos, with a WARNING per tolerated deviation)")
    parser.add_argument("--isolation", default=None, metavar="ISOLATORS",
                        help="as the Mesos agent flag: cgroups/cpu,cgroups/mem (root) holds "
                             "each task to its cpus (cpu.shares) and mem (a task over it is "
                             "killed: TASK_FAILED, REASON_CONTAINER_LIMITATION_MEMORY); "
                             "default: none (posix/cpu,posix/mem), nothing enforced")
    parser.add_argument("--cgroups-enable-cfs", action="store_true",
                        help="with --isolation cgroups/cpu: also cap each task at its cpus "
                             "with the CFS quota, as Mesos' --cgroups_enable_cfs (default "
                             "off, as in Mesos)")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"],
                        help="log verbosity on stderr (default: %(default)s)")
    return parser


def parse_agent(text):
    """``--agent cpus=2,mem=4096,gpus=0,ports=31000-31099,hostname=h``: the
    AgentSpec fields it names (a dict); ArgumentTypeError naming the fix."""
    fields = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not key or not value:
            raise argparse.ArgumentTypeError(
                "%r: expected KEY=VALUE items separated by commas, e.g. "
                "cpus=2,mem=4096,gpus=0" % text)
        if key not in AGENT_KEYS:
            raise argparse.ArgumentTypeError("%r: unknown key %r (keys: %s)"
                                             % (text, key, ", ".join(AGENT_KEYS)))
        if key in fields:
            raise argparse.ArgumentTypeError("%r: %s given twice" % (text, key))
        fields[key] = _agent_value(text, key, value)
    return fields


def _agent_value(text, key, value):
    try:
        if key == "hostname":
            return value
        if key == "isolate":
            if value != "fs":
                raise ValueError(value)
            return ("fs",)
        if key == "ports":
            begin, sep, end = value.partition("-")
            if not sep or not 0 < int(begin) <= int(end) <= 65535:
                raise ValueError(value)
            return ((int(begin), int(end)),)
        number = int(value) if key == "gpus" else float(value)
    except ValueError:
        example = {"ports": "a range like 31000-31099 within 1-65535", "gpus": "a whole number",
                   "isolate": "fs"}.get(key, "a number")
        raise argparse.ArgumentTypeError("%r: %s=%s is not %s" % (text, key, value, example)) \
            from None
    most = MAX_GPUS if key == "gpus" else MAX_SCALAR
    if not math.isfinite(number) or not 0 <= number <= most:
        raise argparse.ArgumentTypeError("%r: %s must be from 0 to %g" % (text, key, most))
    return number


def agent_specs(count, cpus=None, mem=None, gpus=None, port_range=PORT_RANGE, given=None):
    """The agents: ``given`` (dicts of ``parse_agent``) or ``count`` alike;
    keys left out take ``cpus``, ``mem``, ``gpus`` and a slice of the
    ports, each agent its own."""
    given = list(given or ({} for _ in range(count)))
    begin, end = port_range
    size = (end - begin + 1) // max(len(given), 1)
    specs = []
    for i, fields in enumerate(given):
        options = dict(cpus=cpus, mem=mem, gpus=gpus,
                       ports=((begin + i * size, begin + (i + 1) * size - 1),))
        options.update(fields)
        specs.append(AgentSpec(**options))
    return specs


def is_loopback(host):
    """Whether ``host`` (an address or ``localhost``) is the loopback interface."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host):
    """ValueError, one line, for a ``--host`` that names no address (said
    before what listening on it would need)."""
    import socket
    try:
        socket.getaddrinfo(host.strip("[]"), None)
    except (OSError, UnicodeError) as exc:
        raise ValueError("--host %s: no such address here (%s): give an address or name of "
                         "this machine, e.g. 127.0.0.1" % (host, getattr(exc, "strerror", None)
                                                           or exc)) from None


def security_options(args):
    """LocalMaster's ``credentials``, ``executor_environment`` and
    ``allow_root`` from the command line; ValueError with a one-line message."""
    check_host(args.host)
    if args.credentials is None and not is_loopback(args.host):
        raise ValueError("--host %s lets other machines run commands here: give --credentials "
                         "FILE (Mesos' credentials file) or listen on 127.0.0.1" % args.host)
    refused = root_submissions_error(args.switch_user, args.root_submissions)
    if refused is not None:
        raise ValueError(refused)
    options = {"allow_root": True if args.allow_root else None}
    if args.credentials is not None:
        options["credentials"] = read_credentials(args.credentials)
    if args.executor_environment_variables is not None:
        options["executor_environment"] = parse_environment_json(
            args.executor_environment_variables)
    return options


def root_warning(args, euid):
    """The warning a master of effective uid ``euid`` prints at its start
    when it runs as root without ``--credentials``: whoever reaches it
    chooses the user its tasks run as; None otherwise."""
    if euid != 0 or args.credentials is not None:
        return None
    line = "warning: running as root without --credentials: any framework that reaches this "
    admit = "give --credentials FILE to admit only the frameworks it names"
    if not args.switch_user:
        return line + "master runs its tasks as root (--no-switch-user); " + admit
    if not args.root_submissions:
        return (line + "master can run tasks as any user it names but root "
                "(--no-root-submissions); " + admit)
    return (line + "master can run tasks as any user it names, root included; " + admit
            + ", or --no-root-submissions to refuse root")


def make_master(args, security):
    """The LocalMaster the command line asks for (not started)."""
    specs = agent_specs(args.agents or 1, args.cpus, args.mem, args.gpus,
                        given=args.agent_specs)
    container_runner = None
    if args.docker:
        from .containerizer.docker_runner import DockerRunner
        container_runner = DockerRunner()
    return LocalMaster(agents=specs, host=args.host, port=args.port,
                       heartbeat_interval=args.heartbeat_interval, work_dir=args.work_dir,
                       filter_gpu_resources=args.filter_gpu_resources,
                       container_runner=container_runner, network_namespaces=args.netns,
                       strict=args.strict, hidden_paths=args.hide,
                       isolation=args.isolation, cgroups_enable_cfs=args.cgroups_enable_cfs,
                       switch_user=args.switch_user, root_submissions=args.root_submissions,
                       executor_registration_timeout=args.executor_registration_timeout,
                       executor_shutdown_grace_period=args.executor_shutdown_grace_period,
                       recovery_timeout=args.recovery_timeout,
                       fetcher_cache_size=args.fetcher_cache_size, **security)


def network_lines(master):
    """What ``--netns`` prints: the hub, the master's URL there, the agents."""
    network = master.network
    address = master.hub_url[len("http://"):]
    return ["local Mesos master network namespaces: hub %s, master %s there, agents %s"
            % (network.hub, master.hub_url,
               " ".join(addr for _, addr in sorted(network.agents.values()))),
            "run schedulers in the hub: ip netns exec %s SCHEDULER, with the master at %s "
            "(e.g. MESOS_MASTER=%s)" % (network.hub, address, address)]


def main(argv=None, prog=None):
    """The command line's exit status; a reader of its output that went
    away ends it quietly (``SIGPIPE_EXIT``), as SIGPIPE ends ``cat``."""
    try:
        try:
            return _main(argv, prog)
        finally:
            sys.stdout.flush()   # --help's text may still be in the buffer
    except BrokenPipeError:
        _quiet_stdout()
        return SIGPIPE_EXIT


def _main(argv, prog):
    prog = prog or "mesos-local"
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    try:
        os.getcwd()   # where relative paths start (its isolation keeps it visible)
    except FileNotFoundError:
        parser.error("the current directory no longer exists (deleted or moved away): cd to "
                     "one that does, then run again")
    if args.agents is not None and args.agent_specs:
        parser.error("give either --agents N or --agent SPEC (once per agent), not both")
    if args.agent_specs and len(args.agent_specs) > MAX_AGENTS:
        parser.error("at most %d agents (--agent given %d times)"
                     % (MAX_AGENTS, len(args.agent_specs)))
    if args.docker:
        why = docker_host_error(os.environ)
        if why:
            parser.error("%s (or --no-docker)" % why)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        security = security_options(args)
    except (CredentialsError, ValueError) as exc:
        print("%s: error: %s" % (prog, exc), file=sys.stderr)
        return 2
    if args.work_dir is not None:   # last: it is made, and kept as --work-dir is
        try:
            if not os.path.isdir(args.work_dir):
                # As the master makes it (users.WORK_DIR_MODE): pass through,
                # list nothing; chmod, which no umask cuts.
                os.makedirs(args.work_dir)
                os.chmod(args.work_dir, WORK_DIR_MODE)
        except OSError as exc:
            parser.error("--work-dir %s: cannot create it (%s): give a directory you can "
                         "write" % (args.work_dir, exc.strerror or exc))
        if not os.access(args.work_dir, os.W_OK | os.X_OK):
            parser.error("--work-dir %s: you cannot write there: give a directory you can "
                         "write" % args.work_dir)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    # Before start(): a signal while namespaces are being made still cleans up.
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _serve(args, security, stop, prog)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _serve(args, security, stop, prog):
    try:
        master = make_master(args, security)
        url = master.start()
    except (LocalMasterError, AgentSpecError, ValueError) as exc:
        print("%s: error: %s" % (prog, exc), file=sys.stderr)
        return 1
    try:
        lines = ["local Mesos master listening on %s" % url]
        if master.network is not None:
            lines += network_lines(master)
        try:
            print("\n".join(lines), flush=True)
        except BrokenPipeError:   # nobody reads what we print: stop, as SIGPIPE would
            _quiet_stdout()
            return SIGPIPE_EXIT
        warning = root_warning(args, os.geteuid())
        if warning is not None:
            print("%s: %s" % (prog, warning), file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        master.stop()
    return 0


def _quiet_stdout():
    """Point stdout at /dev/null: its closed pipe is not written again (at exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
