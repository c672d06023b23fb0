"""``python -m tfmesos.task``: the entry point of every Mesos task of a
tfmesos run (``entry`` has what it does)."""

from .entry import run

if __name__ == "__main__":
    run()
