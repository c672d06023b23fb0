"""What identifies a task entry's process in a command line: the module
every Mesos task of a run executes (``python -m tfmesos.task``). Its
TensorFlow log filter, started with ``-c "... tfmesos.task.quiet ..."``,
carries it too."""

TASK_ENTRY = "tfmesos.task"
