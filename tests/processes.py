"""What identifies a task entry's process in a command line: the module
every Mesos task of a run executes (``python -m tfmesos.task``). Its
TensorFlow log filter, started with ``-c "... tfmesos.task.quiet ..."``,
carries it too."""

TASK_ENTRY = "tfmesos.task"

# The embedded master's warm task interpreter (``python -m tfmesos.task.warm``),
# which forks a run's replica task entries: their parent, not one of them.
WARM_ENTRY = "tfmesos.task.warm"


def is_task_entry(cmdline):
    """Whether ``cmdline`` (words joined by spaces) runs the task entry
    itself, ``python [-S] -m tfmesos.task`` (or its old name): not the warm
    interpreter, nor the TensorFlow log filter (``-c ...tfmesos.task.quiet...``)."""
    words = cmdline.split()
    return any(first == "-m" and second in (TASK_ENTRY, "tfmesos.server")
               for first, second in zip(words, words[1:]))
