"""What the tests of runs that outlive their scheduler share (``tfrun
--failover``, ``tfrun --detach``, ``tfmesos attach``): a task that trains
until told to end, the master's framework, tfmesos' commands."""

import subprocess
import sys

from tfrun_helpers import REPO, reaped
from waiting import wait_until

# Each task prints a step every 0.2 s, with its pid, until the test lets it end.
TRAIN = (
    "import os, sys, time\n"
    "step = 0\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    print('step', step, os.getpid(), flush=True)\n"
    "    step += 1\n"
    "    time.sleep(0.2)\n"
    "print('done', os.getpid(), flush=True)\n")


def logged(path, what):
    """[(value, pid)] of the lines ``what VALUE PID`` a task's log shows."""
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return []
    return [(words[1], int(words[2])) for words in (line.split() for line in lines)
            if len(words) == 3 and words[0] == what]


def steps(path):
    """[(step, pid)] a task's log shows."""
    return [(int(step), pid) for step, pid in logged(path, "step")]


def tfmesos(*args, env, timeout=60):
    return subprocess.run([sys.executable, "-m", "tfmesos.cli.main", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def attached_to_the_end(master, finish, args, env):
    """``tfmesos attach ARGS`` until it took the run over, then the run's
    training let end (``finish``): the attach process, its output and
    its errors."""
    with subprocess.Popen([sys.executable, "-m", "tfmesos.cli.main", "attach", *args],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as attach:
        with reaped(attach):
            wait_until(lambda: framework_of(master)[0]["connected"], timeout=120,
                       message="attach never took the run over")
            finish.write_text("")
            out, err = attach.communicate(timeout=120)
    return attach, out, err


def framework_of(master):
    state = master.state()
    return (state["frameworks"] or [None])[0], state


def trained(run_dir, tfrun):
    """Wait until worker 0 of ``tfrun`` (its run directory ``run_dir``)
    made three steps."""
    wait_until(lambda: len(steps(run_dir / "worker.0.stdout")) >= 3, timeout=120,
               message=lambda: "the worker never trained: %s" % tfrun.stderr.read())
