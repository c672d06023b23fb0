"""Run a command with SIGINT at its default disposition: scripts/test.sh
starts its background test lanes through it.

A script's background jobs start with SIGINT ignored (bash without job
control does so), an exec'd program keeps a signal ignored, and Python
then installs no KeyboardInterrupt handler: a pytest lane would never
see test.sh's ``kill -INT`` (a Ctrl-C, a failed static check) and
test.sh would wait, minutes, for the lane to end by itself.

    python3 scripts/sigint_default.py COMMAND [ARGS...]
"""

import os
import signal
import sys


def main(argv):
    if not argv:
        print("usage: python3 scripts/sigint_default.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
