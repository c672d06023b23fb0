"""What the training tests share: the accuracy every example must reach
(``THRESHOLD``), the resources its tasks ask for, reading the accuracy it
prints, and checking that no process outlives a run."""

import re

from conftest import marked_processes
from processes import TASK_ENTRY
from waiting import wait_until

THRESHOLD = 0.85
RESOURCES = ["-Cw", "0.5", "-Mw", "1024", "-Cs", "0.5", "-Ms", "1024", "-Cc", "0.5",
             "-Mc", "1024"]


def accuracy(output, prefix=""):
    match = re.search(r"^%sfinal accuracy: ([0-9.]+)$" % re.escape(prefix), output, re.M)
    assert match, "no %sfinal accuracy line in:\n%s" % (prefix, output[-3000:])
    return float(match.group(1))


def assert_nothing_left(timeout=30):
    """No task entry point and no example process outlives its run."""
    left = []

    def none_left():
        left[:] = [p for p in marked_processes()
                   if TASK_ENTRY in p[1] or "examples/" in p[1]]
        return not left

    wait_until(none_left, timeout, interval=0.2,
               message=lambda: "processes survived the run: %s" % left)
