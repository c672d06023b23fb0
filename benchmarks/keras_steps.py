"""Does the launcher slow training? Steps per second of the Keras
multi-worker example (2 workers, MultiWorkerMirroredStrategy) launched by
tfrun on the embedded master, against the same two processes started by hand
with the same kind of TF_CONFIG (free ports on 127.0.0.1). Rounds alternate
between the two, so machine noise hits both alike.

    python benchmarks/keras_steps.py [--rounds 3] [--epochs 10]

The rate is what the example prints as ``steps/s: R`` on worker 0: training
steps per second over every epoch but the first (warm-up). Target: the
ratio tfrun / by hand is at least 0.95.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

from startup import free_ports

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(REPO, "examples", "keras_multiworker.py")

RATE = re.compile(r"steps/s: ([0-9.]+)")


def rate_of(text, what):
    match = RATE.search(text)
    if not match:
        raise RuntimeError("%s printed no steps/s line:\n%s" % (what, text[-3000:]))
    return float(match.group(1))


def by_hand(epochs, timeout):
    """Two workers with TF_CONFIG, as TensorFlow's multi-worker guide starts them."""
    cluster = {"worker": ["127.0.0.1:%d" % port for port in free_ports(2)]}
    procs = []
    started = time.monotonic()
    try:
        for index in range(2):
            env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": index}}))
            procs.append(subprocess.Popen(
                [sys.executable, EXAMPLE, "--epochs", str(epochs)], cwd=REPO, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        outputs = [proc.communicate(timeout=timeout)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for index, proc in enumerate(procs):
        if proc.returncode != 0:
            raise RuntimeError("worker %d by hand exited %d" % (index, proc.returncode))
    return rate_of(outputs[0], "worker 0 by hand"), time.monotonic() - started


def tfrun_stdout(options, command, timeout, env=None):
    """Run ``tfrun OPTIONS -- COMMAND`` on the embedded master; its stdout
    (RuntimeError with its stderr's end when it fails)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfmesos.cli.tfrun", *options, "--", *command],
        cwd=REPO, env=dict(os.environ, MESOS_MASTER="", **(env or {})),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.terminate()  # tfrun stops its tasks on SIGTERM
            proc.wait(30)
    if proc.returncode != 0:
        raise RuntimeError("tfrun exited %d:\n%s" % (proc.returncode, err[-3000:]))
    return out


def with_tfrun(epochs, timeout):
    started = time.monotonic()
    out = tfrun_stdout(["-w", "2", "-s", "0", "--worker-logs", "0"],
                       [sys.executable, EXAMPLE, "--epochs", str(epochs)], timeout)
    return rate_of(out, "tfrun's worker 0"), time.monotonic() - started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    args = parser.parse_args(argv)
    hand, tfrun = [], []
    for _ in range(args.rounds):
        hand.append(by_hand(args.epochs, args.timeout))
        tfrun.append(with_tfrun(args.epochs, args.timeout))
    h = statistics.median(rate for rate, _ in hand)
    t = statistics.median(rate for rate, _ in tfrun)
    for name, runs, median in (("by hand:", hand, h), ("tfrun:  ", tfrun, t)):
        print("%s %s  median %.1f steps/s  (runs took %s s)"
              % (name, " ".join("%.1f" % rate for rate, _ in runs), median,
                 " ".join("%.0f" % seconds for _, seconds in runs)))
    print("ratio tfrun/by hand: %.3f (target >= 0.95)" % (t / h))


if __name__ == "__main__":
    main()
