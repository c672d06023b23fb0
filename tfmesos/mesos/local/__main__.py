"""``python -m tfmesos.mesos.local``: see ``cli.py``. Importing this module
(``from tfmesos.mesos.local.__main__ import main``) runs nothing."""

import sys

from .cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
