"""``python -m mesos_local``: see ``cli.py``. Importing this module
(``from mesos_local.__main__ import main``) runs nothing."""

import sys

from .command_line import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
