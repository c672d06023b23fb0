"""What tfrun's parsed options become beyond their types (``tfrun_options``
parses them): the run's lifetime (``failover_timeout``), the ship and
MLflow specs, the hooks of ``--extra_config``, and the options given only
with another (``check_options_for``; ``given_or`` their defaults)."""

import math
import os

from ..core import config
from ..core.restarts import RestartPolicy
from ..exceptions import SpecError

# Defaults of options given only with another (``check_options_for``):
# None in the parsed options tells one not given.
SCHEDULER_CPUS, SCHEDULER_MEM = 0.5, 512.0      # --detach's scheduler task
SHIP_MAX_MB = 100.0
RESTART_ON_LOST, RESTART_BACKOFF = RestartPolicy().restart_on, RestartPolicy().backoff


FAILOVER_DEFAULT = 3600.0         # --failover: the tasks wait an hour for a scheduler


DETACHED_DEFAULT = 6 * 3600.0     # --detach: six hours


def failover_timeout(args, master, jobs=()):
    """The run's ``RunSpec.failover_timeout`` (None: the tasks stop with
    tfrun); SpecError for what cannot outlive tfrun. ``jobs``: the run's,
    which the master the error suggests must hold."""
    outlives = args.failover or args.detach
    if not outlives:
        if args.failover_timeout is not None:
            raise SpecError("--failover-timeout is for runs that outlive tfrun: add --failover "
                            "or --detach")
        return None
    if args.failover and args.detach:
        raise SpecError("--failover and --detach both keep the run going without tfrun: "
                        "--detach also runs its scheduler on the cluster; give one")
    if master == config.LOCAL:
        raise SpecError("--%s needs a master that outlives tfrun, and the embedded one dies "
                        "with it: start one (tfmesos local-master --port 5050%s &) and add "
                        "-m 127.0.0.1:5050, or use a Mesos cluster"
                        % ("detach" if args.detach else "failover", _cpus_to_offer(args, jobs)))
    if args.failover_timeout is not None:
        return args.failover_timeout
    return DETACHED_DEFAULT if args.detach else FAILOVER_DEFAULT


def _cpus_to_offer(args, jobs):
    """`` --cpus N`` where the tasks of ``jobs`` (and a detached run's
    scheduler task) ask for more than ``tfmesos local-master`` offers by
    default, this machine's CPU count: its agent would hold the scheduler
    task and leave a worker waiting for good; else nothing."""
    needed = sum(job.num * job.cpus for job in jobs) + (
        given_or(args.scheduler_cpus, SCHEDULER_CPUS) if args.detach else 0)
    offered = os.cpu_count() or 1
    return " --cpus %d" % math.ceil(needed) if needed > offered else ""


def mlflow_option(args):
    """The run's ``MlflowSpec`` from --mlflow and --mlflow-experiment, or None."""
    if args.mlflow is None:
        if args.mlflow_experiment is not None:
            raise SpecError("--mlflow-experiment needs --mlflow")
        return None
    import importlib.util

    from ..record.mlflow_mapping import NOT_INSTALLED, mlflow_spec
    if importlib.util.find_spec("mlflow") is None:   # imported only once the run goes
        raise SpecError("--mlflow %s" % NOT_INSTALLED)
    return mlflow_spec(args.mlflow, args.mlflow_experiment)


def ship_spec(args):
    """The run's ``ShipSpec`` from --ship and --python-env, or None."""
    for option, given in (("--ship-exclude", args.ship_exclude),
                          ("--ship-follow-links", args.ship_follow_links),
                          ("--ship-allow-secrets", args.ship_allow_secrets),
                          ("--ship-max-size", args.ship_max_size is not None)):
        if args.ship is None and given:
            raise SpecError("%s needs --ship" % option)
    if args.ship is None and args.python_env is None:
        return None
    from ..ship.bundle import ShipSpec
    return ShipSpec(args.ship, tuple(args.ship_exclude),
                    int(given_or(args.ship_max_size, SHIP_MAX_MB) * 1000 * 1000),
                    args.python_env,
                    follow_links=args.ship_follow_links, allow_secrets=args.ship_allow_secrets)


MAX_EXTRA_CONFIG = 1000 * 1000   # bytes of an --extra_config file: two shell commands


def read_hooks(path):
    """``-e/--extra_config``'s hooks; SpecError naming the flag. Only a
    regular file of at most ``MAX_EXTRA_CONFIG`` bytes is read, as every
    other file flag's: a FIFO or ``/dev/stdin`` is not waited on (opened
    without blocking, then refused), ``/dev/zero`` not read without end,
    a directory named as such."""
    if path is None:
        return {}
    if not path:
        raise SpecError("--extra_config '': give a JSON file's path")
    import stat

    from ..record.takeover_files import NotRegularFile, open_regular
    try:
        with open_regular(path) as handle:
            data = handle.read(MAX_EXTRA_CONFIG + 1)
    except (NotRegularFile, IsADirectoryError) as exc:   # (fdopen refuses a directory itself)
        mode = exc.mode if isinstance(exc, NotRegularFile) else stat.S_IFDIR
        raise SpecError("--extra_config %s: %s, not a regular file: give a JSON file"
                        % (path, "a directory" if stat.S_ISDIR(mode) else
                           "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket")) from None
    except OSError as exc:
        raise SpecError("--extra_config %s: %s" % (path, (exc.strerror or str(exc)).lower())) \
            from None
    if len(data) > MAX_EXTRA_CONFIG:
        raise SpecError("--extra_config %s: larger than %d MB: give a JSON file with the "
                        "'initializer' and/or 'finalizer' commands only"
                        % (path, MAX_EXTRA_CONFIG // 1000 // 1000))
    from ..protocol import json_documents  # (an --extra_config run only: not on tfrun's start)
    try:
        hooks = json_documents.loads(data.decode("utf-8"))
    except ValueError as exc:
        raise SpecError("--extra_config %s: %s" % (path, exc)) from None
    if not isinstance(hooks, dict) or set(hooks) - {"initializer", "finalizer"} \
            or not all(isinstance(v, str) for v in hooks.values()):
        raise SpecError("--extra_config %s: expected a JSON object with string 'initializer' "
                        "and/or 'finalizer' commands" % path)
    return hooks


def given_or(value, default):
    """An option's value, its default when it was not given (None)."""
    return default if value is None else value


def check_options_for(args):
    """SpecError for an option given without the one it is for: taken,
    it did nothing (their siblings' refusals: --failover-timeout,
    --ship-exclude, --mlflow-experiment)."""
    for option, given, missing, needs in (
            ("--scheduler-cpus", args.scheduler_cpus, not args.detach, "--detach"),
            ("--scheduler-mem", args.scheduler_mem, not args.detach, "--detach"),
            ("--restart-on", args.restart_on, not args.max_restarts, "--max-restarts N"),
            ("--restart-backoff", args.restart_backoff, not args.max_restarts,
             "--max-restarts N"),
            ("--sticky-timeout", args.sticky_timeout,
             not (args.sticky_workers or args.torch_elastic), "--sticky-workers")):
        if given is not None and missing:
            raise SpecError("%s is for runs with %s: add it, or drop %s" % (option, needs, option))
