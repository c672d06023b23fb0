"""Do thread pools sized to the task's cpus help? Steps per second of the
Keras multi-worker example (2 workers, MultiWorkerMirroredStrategy) under
tfrun on the embedded master, each worker held to ``-Cw 1`` by the CFS
quota (``--cgroups-enable-cfs``, as a Mesos agent with
``--cgroups_enable_cfs``), with the thread variables tfrun sets
(``TF_NUM_INTRAOP_THREADS`` = round(cpus), ``TF_NUM_INTEROP_THREADS`` = 2,
``OMP_NUM_THREADS`` to match) against TensorFlow's defaults (pools sized to
every core of the machine: ``-E TF_NUM_INTRAOP_THREADS=0 -E
TF_NUM_INTEROP_THREADS=0 -E OMP_NUM_THREADS=<cores>``, which is also how a
user overrides them). Rounds alternate, so machine noise hits both alike.

    sudo python benchmarks/threads.py [--rounds 3] [--epochs 8] [--cpus 1]
        [--batch-size 32] [--as-cores N]

``--as-cores N`` gives the "default" runs TensorFlow's pools of an N-core
agent (``TF_NUM_INTRAOP_THREADS=N`` ...) instead of this machine's, to see
on a small machine what a 1-cpu task meets on a large one.

Needs what the CFS quota needs: root and writable cgroups. The rate is the
example's ``steps/s: R`` of worker 0 (every epoch but the first). The gain
grows with the machine's cores: on 2 cores the defaults oversubscribe a
1-cpu task by 2x, on 64 cores by 64x.
"""

import argparse
import os
import statistics
import sys
import time

from keras_steps import EXAMPLE, REPO, rate_of, tfrun_stdout  # benchmarks/keras_steps.py
from startup import pythonpath_with


def defaults_env(cores, as_cores=None):
    """tfrun options that give TensorFlow its own defaults back (0: size the
    pools to this machine), or those of an ``as_cores``-core machine."""
    pools = as_cores or 0
    return ["-E", "TF_NUM_INTRAOP_THREADS=%d" % pools, "-E", "TF_NUM_INTEROP_THREADS=%d" % pools,
            "-E", "OMP_NUM_THREADS=%d" % (as_cores or cores)]


def one_run(epochs, cpus, extra, timeout, batch_size=32):
    """worker 0's steps/s and the run's wall time."""
    started = time.monotonic()
    out = tfrun_stdout(
        ["-w", "2", "-s", "0", "-Cw", str(cpus), "-Mw", "2048", "--cgroups-enable-cfs",
         "--worker-logs", "0", *extra],
        [sys.executable, EXAMPLE, "--epochs", str(epochs), "--batch-size", str(batch_size)],
        timeout, env={"PYTHONPATH": pythonpath_with(REPO)})
    return rate_of(out, "worker 0"), time.monotonic() - started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--cpus", type=float, default=1.0, help="-Cw of each worker")
    parser.add_argument("--batch-size", type=int, default=32, help="per worker (default 32)")
    parser.add_argument("--as-cores", type=int, default=None, metavar="N",
                        help="the default runs get the pools of an N-core machine")
    parser.add_argument("--timeout", type=float, default=600.0, help="per run, seconds")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    sized, default = [], []
    for _ in range(args.rounds):
        sized.append(one_run(args.epochs, args.cpus, [], args.timeout, args.batch_size))
        default.append(one_run(args.epochs, args.cpus, defaults_env(cores, args.as_cores),
                               args.timeout, args.batch_size))
    s = statistics.median(rate for rate, _ in sized)
    d = statistics.median(rate for rate, _ in default)
    print("2 workers, -Cw %g each under the CFS quota, batch %d, %d cores on this machine%s"
          % (args.cpus, args.batch_size, cores,
             ", defaults as on %d cores" % args.as_cores if args.as_cores else ""))
    for name, runs, median in (("sized to cpus:     ", sized, s),
                               ("TensorFlow default:", default, d)):
        print("%s %s  median %.1f steps/s  (runs took %s s)"
              % (name, " ".join("%.1f" % rate for rate, _ in runs), median,
                 " ".join("%.0f" % seconds for _, seconds in runs)))
    print("ratio sized/default: %.3f" % (s / d))


if __name__ == "__main__":
    main()
