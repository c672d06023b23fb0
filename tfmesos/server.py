"""``python -m tfmesos.server``: the task entry point's former name, kept as
an alias of ``python -m tfmesos.task`` (TaskInfos of older schedulers name it)."""

from .task.entry import run

if __name__ == "__main__":
    run()
