"""``python -m tfmesos.mesos.local``: run the local master until SIGINT/SIGTERM.

``main(argv=None)`` is the whole command line, so ``tfmesos local-master``
can reuse it. It prints one line, ``tfmesos local master listening on
http://127.0.0.1:PORT``, stops cleanly (killing every task) on SIGINT or
SIGTERM and exits 0; a port already in use is a one-line error and exit 1.
A task that names an image runs in a Docker container (the engine of
``$DOCKER_HOST``, connected on the first such task; ``--no-docker`` refuses
such tasks instead).

Security (README "Security"): ``--credentials FILE`` makes frameworks
authenticate (Mesos' ``--authenticate_http_frameworks --credentials``);
listening beyond the loopback interface without it is a usage error (exit
2). Tasks get ``--executor-environment-variables`` (default: ``PATH``
only), never this process's environment. ``--allow-root`` lets container
tasks run as root when the master itself does not.
"""

import argparse
import ipaddress
import logging
import signal
import sys
import threading

from .agent import AgentSpec, AgentSpecError
from .auth import CredentialsError, read_credentials
from .environment import parse_environment_json
from .errors import LocalMasterError
from .master import LocalMaster

PORT_RANGE = (31000, 32000)


def _positive(kind):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError("expected a number, got %r" % text) from None
        if value < 0:
            raise argparse.ArgumentTypeError("must be >= 0, got %s" % text)
        return value
    return parse


def build_parser(prog="python -m tfmesos.mesos.local"):
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run the embedded single-machine Mesos master: it serves the Mesos v1 "
                    "scheduler HTTP API and runs each task as a local process in its own "
                    "sandbox (a task that names an image in a Docker container). Give "
                    "its URL to a scheduler as the Mesos master. Stops (and kills every "
                    "task) on Ctrl-C or SIGTERM.")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=5050,
                        help="port to listen on, 0 for any free one (default: %(default)s)")
    parser.add_argument("--cpus", type=_positive(float), default=None,
                        help="cpus each agent offers (default: this machine's cpu count)")
    parser.add_argument("--mem", type=_positive(float), default=None,
                        help="memory in MB each agent offers (default: physical memory "
                             "minus 1 GiB)")
    parser.add_argument("--gpus", type=_positive(int), default=None,
                        help="GPUs each agent offers, as fake ids 0..N-1 (default: the "
                             "NVIDIA GPUs 'nvidia-smi -L' lists, else none)")
    parser.add_argument("--agents", type=_positive(int), default=1,
                        help="number of agents; they share this machine and split the "
                             "port range %d-%d between them (default: %%(default)s)"
                             % PORT_RANGE)
    parser.add_argument("--heartbeat-interval", type=_positive(float), default=15.0,
                        metavar="S", help="seconds between HEARTBEAT events "
                                          "(default: %(default)s)")
    parser.add_argument("--work-dir", default=None, metavar="DIR",
                        help="where task sandboxes go; kept after exit (default: a "
                             "temporary directory removed at exit)")
    parser.add_argument("--filter-gpu-resources", action="store_true",
                        help="like the Mesos master flag: offer GPU agents only to "
                             "frameworks with the GPU_RESOURCES capability")
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
                        help="the environment every task starts with, a JSON object of "
                             "strings (or file:///path to one), as the Mesos agent flag "
                             "(default: PATH only, never this process's environment)")
    parser.add_argument("--allow-root", action="store_true",
                        help="let container tasks run as root (default: only when this "
                             "master runs as root itself)")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"],
                        help="log verbosity on stderr (default: %(default)s)")
    return parser


def agent_specs(count, cpus=None, mem=None, gpus=None, port_range=PORT_RANGE):
    """``count`` agents on this machine, each with its own slice of ports."""
    begin, end = port_range
    size = (end - begin + 1) // max(count, 1)
    return [AgentSpec(cpus=cpus, mem=mem, gpus=gpus,
                      ports=((begin + i * size, begin + (i + 1) * size - 1),))
            for i in range(count)]


def is_loopback(host):
    """Whether ``host`` (an address or ``localhost``) is the loopback interface."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def security_options(args):
    """LocalMaster's ``credentials``, ``executor_environment`` and
    ``allow_root`` from the command line; ValueError with a one-line message."""
    if args.credentials is None and not is_loopback(args.host):
        raise ValueError("--host %s lets other machines run commands here: give --credentials "
                         "FILE (Mesos' credentials file) or listen on 127.0.0.1" % args.host)
    options = {"allow_root": True if args.allow_root else None}
    if args.credentials is not None:
        options["credentials"] = read_credentials(args.credentials)
    if args.executor_environment_variables is not None:
        options["executor_environment"] = parse_environment_json(
            args.executor_environment_variables)
    return options


def main(argv=None, prog=None):
    prog = prog or "python -m tfmesos.mesos.local"
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.agents < 1:
        parser.error("--agents must be at least 1")
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        security = security_options(args)
    except (CredentialsError, ValueError) as exc:
        print("%s: error: %s" % (prog, exc), file=sys.stderr)
        return 2
    try:
        specs = agent_specs(args.agents, args.cpus, args.mem, args.gpus)
        container_runner = None
        if args.docker:
            from .docker_runner import DockerRunner
            container_runner = DockerRunner()
        master = LocalMaster(agents=specs, host=args.host, port=args.port,
                             heartbeat_interval=args.heartbeat_interval,
                             work_dir=args.work_dir,
                             filter_gpu_resources=args.filter_gpu_resources,
                             container_runner=container_runner, **security)
        url = master.start()
    except (LocalMasterError, AgentSpecError, ValueError) as exc:
        print("Error: %s" % exc, file=sys.stderr)
        return 1

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print("tfmesos local master listening on %s" % url, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        master.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
