"""What identifies a task entry's process in a command line: the module
every Mesos task of a run executes (``python -m tfmesos.task``). Its
TensorFlow log filter, started with ``-c "... tfmesos.task.quiet ..."``,
carries it too."""

TASK_ENTRY = "tfmesos.task"

# The embedded master's warm task interpreter (``python -m tfmesos.task.warm``),
# which forks a run's replica task entries: their parent, not one of them.
WARM_ENTRY = "tfmesos.task.warm"


def is_task_entry(cmdline):
    return TASK_ENTRY in cmdline and WARM_ENTRY not in cmdline
