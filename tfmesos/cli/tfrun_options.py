"""tfrun's options: the parser (``--help`` and its epilog) and the options
read into a ``RunSpec`` (each mistake a usage error: SpecError). Which jobs
and whose output: ``tfrun_jobs``; what some options become (the run's
lifetime, ship, MLflow, hooks, options given only with another):
``tfrun_values``; what is checked before anything starts: ``tfrun_checks``."""

import argparse
import os
import shlex

from .. import __version__
from ..core import config
from ..core.inputs import (
    MAX_ATTEMPTS,
    MAX_CPUS,
    MAX_GPUS,
    MAX_MEM_MB,
    MAX_NAME,
    MAX_SECONDS,
    MAX_SHIP_MB,
    MAX_TASKS,
)
from ..core.restarts import RESTART_ON, RestartPolicy
from ..core.spec import AUTO, STICKY_TIMEOUT, RunSpec
from ..core.spec_fields import pairs, user_env
from ..core.training_frameworks import MAX_NPROC_PER_TASK, TENSORFLOW
from ..core.unused_settings import (
    check_image_settings,
    check_master_scheme,
    check_tls_settings,
)
from ..exceptions import SpecError
from .common import (
    CommandParser,
    bounded,
)
from .run_name import default_name
from .tensorboard import tensorboard_job
from .tfrun_jobs import jobs_from_args, worker_logs_choice
from .tfrun_values import (
    DETACHED_DEFAULT,
    FAILOVER_DEFAULT,
    RESTART_BACKOFF,
    RESTART_ON_LOST,
    SCHEDULER_CPUS,
    SCHEDULER_MEM,
    SHIP_MAX_MB,
    check_options_for,
    failover_timeout,
    given_or,
    mlflow_option,
    read_hooks,
    ship_spec,
)

EPILOG = """\
Placeholders in the command: {ps_hosts} {worker_hosts} {chief_hosts} {job_name}
{task_index}; every task also gets TF_CONFIG and TFMESOS_* variables. With
--torch, MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, ... instead of
TF_CONFIG, and {master_addr} {master_port} {node_rank} {nnodes}
{nproc_per_task} for a command that runs torchrun; with --jax,
jax.distributed.initialize() needs no arguments (README "PyTorch and JAX").
Environment: MESOS_MASTER (default master), DOCKER_IMAGE (default image),
TFMESOS_ADVERTISE_ADDRESS, MESOS_PRINCIPAL / MESOS_SECRET, TFMESOS_RUNS_DIR;
TFMESOS_WARM_TASKS=0: the embedded master execs every task as a Mesos agent
does, instead of handing plain tasks to Pythons started ahead of them (each
its own interpreter: same environment, encodings and own hash seed).
Every task's output and run.json go to ./tfmesos-runs/NAME-RUNID (--run-dir).
Exit status: 0 when every worker (or the chief) exited 0; the failing task's
exit code when one failed; 1 for other errors; 2 for usage errors; 130 when
interrupted; 141 when the reader of its output went away (tfrun ... | head);
143 when the run was killed (tfmesos kill, or an operator tore its framework
down).
Numbers are finite and bounded: at most 10000 tasks per run, 10000 cpus,
100000000 MB and 1024 GPUs per task, 1000 attempts or restarts, 30 days
(2592000 s) for any timeout.
The embedded master (no MESOS_MASTER) runs at most 1000 tasks, each its own
process on this machine: its one agent offers the machine's cpus and memory
or, when the cluster asks for more, the cluster's sum; a port window of
2 ports per task (at least 101) from 20000-30999 (TFMESOS_LOCAL_PORTS=LOW-HIGH:
from there), less the ports another program holds; the tasks' cpus and mem
held by cgroups where root can (--no-isolation); the last 1000 ended tasks
of a run kept in its state, as Mesos' --max_completed_tasks_per_framework.
Open files: a run raises tfrun's soft limit (ulimit -n) to 128 plus 4 per task
where it is lower, within the hard limit (ulimit -Hn), and warns when that is
too low; a hard limit under 32 plus 3 per task (what runs surely take) is a
usage error. The embedded master's tasks inherit it, as a Mesos agent's do.
"""

SECONDS = bounded(float, 0, MAX_SECONDS, low_open=True)


def build_parser():
    parser = CommandParser(
        prog="tfrun", usage="%(prog)s [options] -- COMMAND [ARGS...]", takes_command=True,
        description="Run a distributed TensorFlow command on Mesos (replica mode).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--version", action="version", version="tfrun (tfmesos) %s" % __version__)
    add("-w", "--nworker", type=bounded(int, 0, MAX_TASKS), default=1, metavar="N",
        help="worker tasks (default 1)")
    add("-s", "--nserver", type=bounded(int, 0, MAX_TASKS), metavar="N",
        help="parameter server (ps) tasks (default 1, 0 with --torch or --jax; 0 for none)")
    add("-c", "--chief", action="store_true", help="add one chief task (TF2 strategies)")
    add("--evaluator", action="store_true", help="add one evaluator task")
    add("--job", action="append", default=[], metavar="NAME:COUNT[:CPUS[:MEM[:GPUS]]]",
        help="add or override a job, e.g. --job worker:4:2:4096:1 (repeatable)")
    add("-m", "--master", help="Mesos master: host:port, zk://host:port/mesos or 'local' "
        "(default: $MESOS_MASTER, else the embedded local master); a ZooKeeper password "
        "(zk://user:password@...) belongs in $MESOS_MASTER, as ps shows command lines: "
        "tfmesos writes and prints it as ***")
    add("-n", "--name", help="the run's name: the Mesos framework's and its run directory's "
        "(default: the command's script, e.g. train.py for python train.py)")
    add("-C", "--containerizer_type", "--containerizer", dest="containerizer",
        type=str.upper, choices=["MESOS", "DOCKER"],
        default="MESOS", help="containerizer for image tasks: MESOS (default; a Docker "
        "image under the Mesos containerizer, the one that isolates GPUs) or DOCKER")
    add("-I", "--image", help="Docker image for the tasks (default $DOCKER_IMAGE; none: plain "
        "command tasks)")
    add("-f", "--force_pull_image", "--force-pull", dest="force_pull", action="store_true",
        help="pull the image even when the agent has it")
    for flag, job in (("w", "worker"), ("s", "ps"), ("c", "chief")):
        add("-C" + flag, dest="cpus_" + job, type=bounded(float, 0, MAX_CPUS, low_open=True),
            default=1.0, metavar="CPUS",
            help="cpus per %s task (default 1)" % job)
        add("-G" + flag, dest="gpus_" + job, type=bounded(int, 0, MAX_GPUS), default=0,
            metavar="GPUS",
            help="GPUs per %s task (default 0)" % job)
        add("-M" + flag, dest="mem_" + job, type=bounded(float, 0, MAX_MEM_MB, low_open=True),
            default=1024.0, metavar="MB",
            help="memory per %s task in MB (default 1024)" % job)
    add("-V", "--volume", action="append", default=[], metavar="HOST:CONTAINER[:ro|rw]",
        help="volume for container tasks (repeatable)")
    add("-E", "--env", action="append", default=[], metavar="NAME=VALUE",
        help="environment variable for every task (repeatable); its value is in the run's "
        "spec and the TaskInfos: use --secret-env for secrets; not a name Mesos "
        "(MESOS_SANDBOX, ...) or tfmesos (TFMESOS_RUN_ID, ...) sets in every task")
    add("--secret-env", action="append", default=[], metavar="NAME",
        help="give every task (and a detached run's scheduler) NAME with its value from your "
        "environment, as a Mesos secret: never written to a file, a run record or an "
        "endpoint (repeatable; not with -C DOCKER, which passes no secrets)")
    add("-r", "--role", help="Mesos role to take resources from")
    add("-u", "--user", help="user the tasks run as (default: you); it must exist on every "
        "agent; on the embedded master, a user other than you needs tfrun run as root, "
        "that user must be able to run --python (see --ship), and its tasks get only the "
        "start-up variables of your environment (PATH, LANG, LC_*, PYTHON*, TFMESOS_*: "
        "give them more with -E or --secret-env)")
    add("-e", "--extra_config", "--extra-config", dest="extra_config", metavar="FILE",
        help="JSON file with 'initializer' and/or 'finalizer' shell commands run in each task "
        "before/after the command (a regular file of at most 1 MB)")
    add("--python", metavar="PATH", help="Python interpreter that runs plain (image-less) tasks "
        "on the agents; its directory comes first on the task's PATH, so python and python3 "
        "in the command are it too where that directory has them (a virtual environment's "
        "bin/python: yes; /usr/bin/python3: python3 only). Default: the "
        "one running tfrun; with --ship or --detach, python3 from the agents' PATH, but on a "
        "master whose agents are on this machine (the embedded one, a tfmesos local-master "
        "of yours here), where it is the one running tfrun too")
    add("--advertise-address", help="address of this machine that tasks use to reach tfrun "
        "(default: the local address towards the master; $TFMESOS_ADVERTISE_ADDRESS), "
        "checked before anything starts; not loopback when the agents are on other hosts")
    add("--launch-timeout", type=SECONDS, default=600.0, metavar="SECONDS",
        help="abort when the cluster is not complete in time (default 600)")
    add("--max-attempts", type=bounded(int, 1, MAX_ATTEMPTS), default=3, metavar="N",
        help="launch attempts per task before the cluster is complete (default 3); also "
        "how often a --sticky-workers worker is relaunched where it ran")
    add("--connect-timeout", type=SECONDS, metavar="SECONDS",
        help="give up when no Mesos master answers for this long (default 60)")
    add("--master-scheme", choices=["http", "https"], default="http",
        help="scheme of the masters found through zk:// (default http)")
    add("--ca-bundle", metavar="FILE", help="CA certificates to verify https masters with "
        "(default: the system's)")
    add("--no-verify", action="store_true",
        help="do not verify https masters' certificates (insecure)")
    add_framework_options(parser)
    add_output_options(add)
    add_recovery_options(add)
    add_ship_options(add)
    add_isolation_options(add)
    add_lifetime_options(add)
    return parser


def add_framework_options(parser):
    """PyTorch and JAX process groups (``core.training_frameworks``)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--torch", dest="framework", action="store_const", const="torch",
        help="PyTorch: the workers are one process group; each gets MASTER_ADDR and "
        "MASTER_PORT (worker 0's host, a port reserved in its offer), RANK, WORLD_SIZE, "
        "LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK (torch.distributed's env:// and "
        "torchrun's variables) instead of TF_CONFIG; workers only (-s is 0)")
    group.add_argument(
        "--jax", dest="framework", action="store_const", const="jax",
        help="JAX: the workers are one process group, jax.distributed.initialize() with no "
        "arguments joins it (worker 0's host runs the coordinator); workers only (-s is 0)")
    parser.add_argument(
        "--torch-elastic", type=elastic_nodes, metavar="MIN:MAX",
        help="elastic PyTorch (implies --torch): the command runs torchrun, whose "
        "--nnodes MIN:MAX, --rdzv-backend c10d, --rdzv-endpoint (worker 0's reserved port) "
        "and --rdzv-id tfrun sets (PET_* variables; or {nnodes} {rdzv_endpoint} {rdzv_id}); "
        "a failed task is relaunched alone on its agent and rejoins (README \"Elastic\")")
    parser.add_argument(
        "--nproc-per-task", type=bounded(int, 1, MAX_NPROC_PER_TASK), default=1, metavar="N",
        help="--torch: processes the command starts in each task, e.g. torchrun "
        "--nproc-per-node {nproc_per_task}, one per GPU (default 1); WORLD_SIZE counts them")


def elastic_nodes(text):
    """``--torch-elastic MIN:MAX`` (or ``N``: N:N) as (MIN, MAX)."""
    low, _, high = text.partition(":")
    try:
        nodes = (int(low), int(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError("expected MIN:MAX nodes, e.g. 1:4, got %r"
                                         % text) from None
    if not 1 <= nodes[0] <= nodes[1] <= MAX_TASKS:
        raise argparse.ArgumentTypeError("expected 1 <= MIN <= MAX <= %d, got %r"
                                         % (MAX_TASKS, text))
    return nodes


def framework_option(args):
    """The run's ``RunSpec.framework``; SpecError for the TensorFlow jobs a
    torch or jax run cannot have (``training_frameworks``: one group of workers)."""
    framework = args.framework or TENSORFLOW
    if args.torch_elastic is not None:
        if framework == "jax":
            raise SpecError("--torch-elastic runs torchrun: drop --jax")
        framework = "torch"
    if framework != TENSORFLOW:
        asked = [flag for flag, given in (("-s %s" % args.nserver, args.nserver),
                                          ("--chief", args.chief),
                                          ("--evaluator", args.evaluator)) if given]
        if asked:
            raise SpecError("--%s runs workers only, one process group: drop %s"
                            % (framework, " and ".join(asked)))
    return framework


def add_lifetime_options(add):
    """Runs that outlive tfrun (a master that outlives it: not the embedded one)."""
    add("--failover", action="store_true",
        help="the tasks outlive tfrun: if tfrun dies (killed, its machine gone; Ctrl-C still "
        "stops the run) they keep running for --failover-timeout, and `tfmesos attach RUN` "
        "takes the run over where it was. Needs a master that outlives tfrun (-m)")
    add("--detach", action="store_true",
        help="submit and leave: the run's scheduler runs as a Mesos task of the run (with "
        "--ship or an image, so an agent has its code), and tfrun exits once it took over; "
        "follow it with tfmesos attach/logs/show RUN --master M, stop it with tfmesos kill")
    add("--failover-timeout", type=SECONDS, metavar="SECONDS",
        help="how long the tasks keep running without a scheduler (Mesos' "
        "FrameworkInfo.failover_timeout; default %d with --failover, %d with --detach)"
        % (FAILOVER_DEFAULT, DETACHED_DEFAULT))
    add("--scheduler-cpus", type=bounded(float, 0, MAX_CPUS, low_open=True),
        metavar="CPUS", help="--detach: cpus of the scheduler's task (default %g)"
        % SCHEDULER_CPUS)
    add("--scheduler-mem", type=bounded(float, 0, MAX_MEM_MB, low_open=True),
        metavar="MB", help="--detach: memory of the scheduler's task in MB (default %g)"
        % SCHEDULER_MEM)


def add_ship_options(add):
    """tfrun --ship: send the user's code to the tasks (README "Run on a Mesos cluster")."""
    add("--ship", nargs="?", const=".", metavar="DIR",
        help="pack DIR (default: the current directory; in a git work tree what git would "
        "commit) and send it to every task through the Mesos fetcher: the command runs in "
        "it, with tfmesos' task side, and plain tasks run python3 from the agent's PATH "
        "(the one running tfrun where the agents are on this machine; --python to change "
        "it); agents need no shared filesystem. Run directories "
        "(--run-dir, tfmesos-runs/) are never shipped")
    add("--ship-exclude", action="append", default=[], metavar="PATTERN",
        help="leave files matching PATTERN (a glob on the path or any part of it, "
        "relative to DIR: ./data and DIR/data are data; **/X is also X) out of the bundle "
        "(repeatable)")
    add("--ship-max-size", type=bounded(float, 0, MAX_SHIP_MB, low_open=True),
        metavar="MB",
        help="refuse a bundle larger than this (default %g)" % SHIP_MAX_MB)
    add("--ship-follow-links", action="store_true",
        help="ship what symbolic links leading out of DIR point to (default: such a link is "
        "refused, naming it; links inside DIR ship as links)")
    add("--ship-allow-secrets", action="store_true",
        help="ship files that look like secrets (.env*, .envrc, id_rsa* and other SSH keys, "
        "*.pem, *.key, *.p12, .ssh/, .aws/, .netrc, .git-credentials, .pypirc, "
        ".docker/config.json, ...; default: refused, naming them; --ship-exclude leaves them "
        "out instead)")
    add("--python-env", metavar="ARCHIVE",
        help="a conda-pack or venv-pack archive (a file here, or an http(s):// or hdfs:// "
        "URL) each agent fetches once (Mesos' fetcher cache): its bin/python3 runs the "
        "tasks and its bin/ comes first on the command's PATH")


def add_isolation_options(add):
    """How the embedded master holds tasks to their resources."""
    add("--no-isolation", action="store_true",
        help="embedded master: do not hold tasks to their cpus and mem (default: as root "
        "with writable cgroups, a task over its -M is killed, as on Mesos agents with "
        "cgroups isolation)")
    add("--cgroups-enable-cfs", action="store_true",
        help="embedded master: also cap each task at its cpus with the CFS quota, as Mesos' "
        "--cgroups_enable_cfs (default: cpu shares only)")


def isolation_options(args, master):
    """The embedded master's isolation options (``LocalMaster``'s); SpecError
    for them with another master (a Mesos agent's are its operator's:
    --isolation, --cgroups_enable_cfs), where they did nothing."""
    if args.no_isolation and args.cgroups_enable_cfs:
        raise SpecError("--no-isolation and --cgroups-enable-cfs contradict each other: "
                        "drop one")
    given = [flag for flag, on in (("--no-isolation", args.no_isolation),
                                   ("--cgroups-enable-cfs", args.cgroups_enable_cfs)) if on]
    if given and master != config.LOCAL:
        raise SpecError("%s is for the embedded master (no -m): a Mesos agent isolates its "
                        "tasks as its operator set it (--isolation, --cgroups_enable_cfs); "
                        "drop %s" % (given[0], given[0]))
    if args.no_isolation:
        return {"isolation": None}
    return {"cgroups_enable_cfs": True} if args.cgroups_enable_cfs else {}


def add_recovery_options(add):
    """What happens when a task fails once the cluster is up."""
    add("--max-restarts", type=bounded(int, 0, MAX_ATTEMPTS), default=0, metavar="N",
        help="restart the whole cluster up to N times when a task fails after the cluster "
        "is up (default 0: the failure ends the run)")
    add("--restart-on", choices=RESTART_ON,
        help="lost (default): restart only for infrastructure losses (a lost agent or task, "
        "a command killed by a signal tfrun did not send); failure: for any non-zero exit too")
    add("--restart-backoff", type=bounded(float, 0, MAX_SECONDS),
        metavar="SECONDS",
        help="wait before the first restart, twice as long before each next (default 2)")
    add("--sticky-workers", action="store_true",
        help="with a chief (ParameterServerStrategy): relaunch a failed worker on its agent "
        "at its address while the rest keeps running")
    add("--sticky-timeout", type=SECONDS, metavar="SECONDS",
        help="a worker not back within this long falls back to a restart (default 120)")


def add_output_options(add):
    """What tfrun shows and where it keeps the logs."""
    add("--logs", action="append", default=[], metavar="JOB[:INDEX,...]",
        help="tasks whose output is shown: e.g. --logs worker:0,2 --logs ps, 'all' or 'none' "
        "(repeatable; default: every worker, the chief and the evaluator). Every task's "
        "output goes to the run directory either way")
    add("--worker-logs", metavar="INDICES",
        help="the original flag: workers whose output is shown, '*' (default), a comma list "
        "like 0,2, or 'none' (the chief and the evaluator are shown too)")
    add("--tensorboard", metavar="LOGDIR", help="also run TensorBoard on LOGDIR (a path the "
        "agents see) as a task of the run; its URL is printed once it answers")
    add("--mlflow", nargs="?", const="", metavar="TRACKING_URI",
        help="also log the run to MLflow, from tfrun (the tasks need no MLflow): parameters, "
        "the tasks' metrics as they come, tags, and run.json, report.html and the logs "
        "as artifacts; TRACKING_URI: a server (http://host:5000), sqlite:///FILE.db, a "
        "directory (a file store); default $MLFLOW_TRACKING_URI, else MLflow's default, "
        "sqlite:///mlflow.db here. Needs the mlflow extra: pip install 'tfmesos[mlflow]'")
    add("--mlflow-experiment", metavar="NAME",
        help="the MLflow experiment (default $MLFLOW_EXPERIMENT_NAME, else tfmesos)")
    add("--run-dir", metavar="DIR", help="where the logs and run.json go (default "
        "./tfmesos-runs/NAME-RUNID; $TFMESOS_RUNS_DIR instead of ./tfmesos-runs)")
    add("-q", "--quiet", action="store_true",
        help="only the command's output, what went wrong and where the run put things "
             "(what --ship shipped, the --mlflow run): no status line while the "
             "cluster forms, no cluster addresses, no usage table or metrics at the end "
             "(all of it is in the run record)")
    add("-v", "--verbose", action="store_true",
        help="say what the scheduler does, and where the run directory is")


def split_command(argv):
    """Options before ``--``, the command after it."""
    if "--" in argv:
        index = argv.index("--")
        return argv[:index], argv[index + 1:]
    return argv, []


def command_string(words):
    return words[0] if len(words) == 1 else shlex.join(words)


def read_options(args, command):
    """The run's ``RunSpec``: every option parsed and checked once; SpecError,
    MasterAddressError."""
    check_options_for(args)
    framework = framework_option(args)
    jobs = jobs_from_args(args, framework)
    image = config.resolve(args.image, os.environ, "DOCKER_IMAGE")
    check_image_settings(image, args.containerizer, args.force_pull, args.volume)
    ship = ship_spec(args)
    if args.quiet and args.verbose:   # -q hid what -v adds to (the status, the table)
        raise SpecError("-q and -v contradict each other: drop one")
    if args.logs and args.worker_logs is not None:
        raise SpecError("--logs and --worker-logs both choose what is shown: use --logs only "
                        "(e.g. --logs worker:0,2 --logs chief)")
    master = config.resolve_master(args.master, os.environ)
    check_master_scheme(args.master_scheme, master)
    check_tls_settings(master, args.master_scheme, not args.no_verify, args.ca_bundle)
    # Shipped: python3 on the agents, unless they run here.
    from .tfrun_python import default_python
    python = default_python(args, master, image, ship)
    if args.tensorboard is not None:
        if not args.tensorboard.strip():
            raise SpecError("--tensorboard %r: give the LOGDIR TensorBoard reads (a path the "
                            "agents see)" % args.tensorboard)
        jobs.append(tensorboard_job(args.tensorboard, image,
                                    python or ("python3" if ship else None)))
    return RunSpec(
        name=args.name or default_name([command])[:MAX_NAME], role=args.role,
        image=image, containerizer=args.containerizer, force_pull=args.force_pull,
        volumes=tuple(args.volume), env=tuple(user_env(args.env)), secret_env=tuple(args.secret_env),
        launch_timeout=args.launch_timeout,
        max_attempts=args.max_attempts, python=python, user=args.user,
        jobs=tuple(jobs), mode="replica", command=command,
        hooks=pairs(read_hooks(args.extra_config)), master=master,
        verify=not args.no_verify, ca_bundle=args.ca_bundle, master_scheme=args.master_scheme,
        advertise_address=args.advertise_address, connect_timeout=args.connect_timeout,
        quiet_tensorflow=not args.verbose,
        restart_policy=RestartPolicy(args.max_restarts,
                                     given_or(args.restart_on, RESTART_ON_LOST),
                                     given_or(args.restart_backoff, RESTART_BACKOFF)),
        sticky_jobs=("worker",) if args.sticky_workers else (),
        sticky_timeout=given_or(args.sticky_timeout, STICKY_TIMEOUT),
        run_dir=args.run_dir or AUTO,
        local_master=pairs(isolation_options(args, master)),
        logs=tuple(args.logs) or worker_logs_choice(args.worker_logs, jobs), ship=ship,
        mlflow=mlflow_option(args), framework=framework, nproc_per_task=args.nproc_per_task,
        elastic=args.torch_elastic,
        failover_timeout=failover_timeout(args, master, jobs))
