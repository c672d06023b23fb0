"""``python -m tfmesos.server``: the task entry point's former name, kept as
an alias of ``python -m tfmesos.task`` (TaskInfos of older schedulers name it)."""

from .task.entry import main, run  # noqa: F401

if __name__ == "__main__":
    run()
