"""The task's environment: the names the scheduler side sets (the TaskInfo's
``command.environment``, the start message's ``env``) and the task side
reads, in one place both import."""

# Set in the TaskInfo (core.taskinfo, ship.shipping), read by the task entry.
# A stopped task's command: SIGTERM, then SIGKILL this long after (the task
# entry, task.replica); the scheduler's stop waits as long (core.runtime).
STOP_GRACE = 5.0
# What follows DIR in the PATH=DIR"${PATH:+:$PATH}" a plain task's command may
# start with (core.taskinfo.python_first), which the warm runner reads back.
PATH_REST = "${PATH:+:$PATH}"
# A task that hears nothing from its scheduler this long (it pings every
# 10 s) takes it for gone (task.connection's IDLE_TIMEOUT).
SCHEDULER_SILENCE = 60.0
# A task of a --failover run whose master knows no framework of its run (a
# new leader's, which learns them as they come back) waits this long, then
# stops (task.rediscover).
FRAMEWORK_UNKNOWN_GRACE = 600

RENDEZVOUS = "TFMESOS_RENDEZVOUS"       # host:port of the run's rendezvous
SECRET = "TFMESOS_SECRET"               # the run's secret, hex
TASK_ID = "TFMESOS_TASK_ID"             # the Mesos task id it registers as
RUN_ID = "TFMESOS_RUN_ID"
OFFER_HOST = "TFMESOS_OFFER_HOST"       # the agent's hostname, from the offer
TASK_HOST = "TFMESOS_TASK_HOST"         # overrides OFFER_HOST (set by the user)
# Why a TASK_HOST is refused, by the submitter's check and by the task alike
# ("TFMESOS_TASK_HOST=VALUE " comes first).
NOT_A_HOST = ("is neither an IP address nor a host name: set it to the address this task's "
              "host is reached at, without a port")
PORT = "TFMESOS_PORT"                   # the port Mesos gave it (absent: pick one)
COORDINATOR_PORT = "TFMESOS_COORDINATOR_PORT"   # worker 0's second port (Keras)
GPUS = "TFMESOS_GPUS"                   # the task measures GPU memory when > 0
USAGE_INTERVAL = "TFMESOS_USAGE_INTERVAL"   # seconds between usage samples
BUNDLE = "TFMESOS_BUNDLE"               # tfrun --ship: the bundle's file name
BUNDLE_DIR = "TFMESOS_BUNDLE_DIR"       # and the directory it unpacks to
FUNCTION = "TFMESOS_FUNCTION"           # tfmesos.run: the payload's file name in the sandbox,
MAX_RESULT = "TFMESOS_MAX_RESULT"       # and the bound of a pickled result, bytes: the
MAX_OTHER_RESULT = "TFMESOS_MAX_OTHER_RESULT"  # chief's (else worker 0's), the others'
FRAMEWORK = "TFMESOS_FRAMEWORK"         # tfmesos.run(framework=): whose distributed
                                        # environment the runner sets up (task.process_group)

# A run that survives its scheduler (tfrun --failover, --detach): for this
# many seconds after losing the scheduler the task keeps its command running
# and registers again, at the address the framework's label
# ``labels.RENDEZVOUS`` names on the master (absent or 0: the task stops
# when the scheduler goes, the default).
FAILOVER_TIMEOUT = "TFMESOS_FAILOVER_TIMEOUT"
MASTER = "TFMESOS_MASTER"               # the leading master's URL, http(s)://host:port
FRAMEWORK_ID = "TFMESOS_FRAMEWORK_ID"   # the run's framework
FAILOVER_TASKS = "TFMESOS_FAILOVER_TASKS"   # the run's tasks: how often each may ask the master

REQUIRED = (RENDEZVOUS, SECRET, TASK_ID)

# Set by the task entry for tfmesos.run's runner: where it writes the outcome,
# and the descriptor it says a failure's is written on (task/outcome_channel.py).
RESULT_FILE = "TFMESOS_RESULT_FILE"
OUTCOME_FD = "TFMESOS_OUTCOME_FD"

# Set in the start message of a replica task, read by the user's command.
RESTART = "TFMESOS_RESTART"             # whole restarts so far
DISTRIBUTED = "TFMESOS_DISTRIBUTED"
PS_HOSTS = "TFMESOS_PS_HOSTS"
WORKER_HOSTS = "TFMESOS_WORKER_HOSTS"
CHIEF_HOSTS = "TFMESOS_CHIEF_HOSTS"
JOB_NAME = "TFMESOS_JOB_NAME"
TASK_INDEX = "TFMESOS_TASK_INDEX"

# Set by a replica task entry for its hooks and command: where
# ``tfmesos.log_metrics`` sends each point (a unix datagram socket).
METRICS_SOCKET = "TFMESOS_METRICS_SOCKET"

# The names above that tfmesos gives every task whatever the user set (its
# value replaces the user's, or the user's would break the task): a user's
# -E, env or job env naming one is refused (core.spec_fields). The user's
# own: TASK_HOST, GPUS, USAGE_INTERVAL.
FUNCTION_RUN = (FUNCTION, MAX_RESULT, MAX_OTHER_RESULT, FRAMEWORK)   # tfmesos.run's own
SET_BY_TFMESOS = frozenset((
    RENDEZVOUS, SECRET, TASK_ID, RUN_ID, OFFER_HOST, PORT, COORDINATOR_PORT, BUNDLE,
    BUNDLE_DIR, *FUNCTION_RUN, FAILOVER_TIMEOUT, MASTER, FRAMEWORK_ID, FAILOVER_TASKS,
    RESULT_FILE, OUTCOME_FD, RESTART, DISTRIBUTED, PS_HOSTS, WORKER_HOSTS, CHIEF_HOSTS,
    JOB_NAME, TASK_INDEX, METRICS_SOCKET))
# Mesos' own, in every executor's environment (a command task's too): src/slave/
# slave.cpp executorEnvironment, src/slave/containerizer/mesos/containerizer.cpp
# (MESOS_SANDBOX, MESOS_ALLOCATION_ROLE), the network isolators' MESOS_CONTAINER_IP,
# the Docker containerizer's MESOS_CONTAINER_NAME. Not MESOS_MASTER: the
# submitter's, which a user may pass on.
SET_BY_MESOS = frozenset((
    "MESOS_SANDBOX", "MESOS_DIRECTORY", "MESOS_FRAMEWORK_ID", "MESOS_EXECUTOR_ID",
    "MESOS_SLAVE_ID", "MESOS_SLAVE_PID", "MESOS_AGENT_ENDPOINT", "MESOS_CHECKPOINT",
    "MESOS_HTTP_COMMAND_EXECUTOR", "MESOS_DOMAIN_SOCKET", "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD",
    "MESOS_RECOVERY_TIMEOUT", "MESOS_SUBSCRIPTION_BACKOFF_MAX",
    "MESOS_EXECUTOR_AUTHENTICATION_TOKEN", "MESOS_ALLOCATION_ROLE", "MESOS_CONTAINER_IP",
    "MESOS_CONTAINER_NAME"))
