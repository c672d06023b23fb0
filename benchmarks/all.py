"""Every quick benchmark, one after another, each printing its own ratios
against the floor it measures in the same process: paste its output into
an issue's note before and after a change, so that a slowdown is seen
where it happens.

* ``startup.py --bytecode``: ``tfrun -w 2 -s 1 -- true`` against three
  bare Pythons, tfmesos loaded from bytecode as ``pip install .`` installs it;
* ``scale.py --bytecode``: 210 tasks on the embedded master against 210
  bare Pythons, tfmesos loaded as installed;
* ``detached.py --bytecode``: ``tfrun --detach`` and ``--failover`` (submit to first
  step, progress again after ``tfmesos attach``) against a foreground run,
  tfmesos loaded as installed;
* ``ship.py``: ``--ship`` of a 100 MB directory to 8 tasks against copying it;
* ``placement.py``: placing 1,000 tasks against a naive reference;
* ``offers.py``: the driver's subscribe latency and offer throughput;
* ``simulate.py``: 10, 100 and 1,000 tasks over as many simulated agents,
  the scheduler's cost per task;
* ``history.py``: ``tfmesos runs`` and ``tfmesos show ID`` over 500 run
  records against parsing their run.json files (not in issue 33's table:
  reading the history slowed with every run kept, unseen until stop 51).

``--tensorflow`` adds the ones that train (minutes each): ``startup.py
--tensorflow``, ``keras_steps.py``, ``recovery.py`` (``threads.py`` needs
root and cgroups: run it by hand).

At the end, one table: every goal a benchmark measured (``goals.py``), its
value and whether it is met.

    python benchmarks/all.py [--tensorflow] [--only startup,detached]
"""

import argparse
import os
import subprocess
import sys
import time

import goals  # benchmarks/goals.py: this script's folder is first on sys.path
from startup import pythonpath_with

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

QUICK = (("startup", ["--bytecode", "--rounds", "5"]),
         ("scale", ["--bytecode", "--tasks", "210", "--rounds", "2"]),
         ("detached", ["--bytecode", "--rounds", "3"]), ("ship", ["--sizes", "10,100", "--rounds", "2"]),
         ("placement", ["--rounds", "5"]), ("offers", ["--agents", "500", "--rounds", "5"]),
         ("simulate", ["--tasks", "10,100,1000"]), ("history", ["--runs", "500", "--rounds", "3"]))
TRAINING = (("startup", ["--tensorflow", "--rounds", "3"]), ("keras_steps", ["--rounds", "2"]),
            ("recovery", []))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tensorflow", action="store_true",
                        help="also the benchmarks that train (minutes each)")
    parser.add_argument("--only", metavar="NAMES",
                        help="comma-separated benchmark names (e.g. startup,detached)")
    args = parser.parse_args(argv)
    chosen = list(QUICK) + (list(TRAINING) if args.tensorflow else [])
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {name for name, _ in QUICK + TRAINING}
        if unknown:
            parser.error("unknown benchmark(s): %s" % ", ".join(sorted(unknown)))
        # startup is in both lists: its training variant only with --tensorflow
        quick = {name for name, _ in QUICK}
        chosen = [(name, extra) for name, extra in QUICK + TRAINING if name in names and (
            args.tensorflow or (name, extra) in QUICK or name not in quick)]
    # The benchmarks measure the tfmesos of this checkout, whatever this
    # Python has installed (an editable install may point elsewhere).
    env = dict(os.environ, PYTHONPATH=pythonpath_with(REPO))
    failed, measured = [], []
    for name, extra in chosen:
        command = [sys.executable, os.path.join(HERE, name + ".py")] + extra
        print("== %s %s" % (name + ".py", " ".join(extra)), flush=True)
        began = time.monotonic()
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                print(line, end="", flush=True)
                goal = goals.parse(line)
                if goal is not None:
                    measured.append(goal)
        code = proc.returncode
        print("== %s: %.0f s%s\n" % (name, time.monotonic() - began,
                                     "" if code == 0 else ", exit %d" % code), flush=True)
        if code:
            failed.append(name)
    print_table(measured)
    if failed:
        print("failed: %s" % ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


def print_table(measured):
    if not measured:
        return
    rows = [("measure", "now", "goal", "")] + measured
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    print("== goals (issue 33), this machine: %d cores" % os.cpu_count())
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


if __name__ == "__main__":
    sys.exit(main())
