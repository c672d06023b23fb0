"""How long tfrun takes to bring up 1 ps + 2 workers that import TensorFlow
and start a gRPC server, against the floor: the same three processes started
by hand with the same kind of TF_CONFIG. Both measured in this one run.

    python benchmarks/startup.py [--rounds 3]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
READY = os.path.join(HERE, "ready_server.py")
TASKS = [("ps", 0), ("worker", 0), ("worker", 1)]


def free_ports(count):
    socks = [socket.socket() for _ in range(count)]
    for sock in socks:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in socks]
    for sock in socks:
        sock.close()
    return ports


def wait_ready(directory, started, timeout=300):
    while time.monotonic() - started < timeout:
        if len([n for n in os.listdir(directory) if not n.endswith(".tmp")]) == len(TASKS):
            return time.monotonic() - started
        time.sleep(0.02)
    raise RuntimeError("tasks not ready within %d s" % timeout)


def stop(procs):
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def by_hand():
    directory = tempfile.mkdtemp()
    ports = free_ports(3)
    cluster = {"ps": ["127.0.0.1:%d" % ports[0]],
               "worker": ["127.0.0.1:%d" % p for p in ports[1:]]}
    started = time.monotonic()
    procs = []
    try:
        for job, index in TASKS:
            env = dict(os.environ, TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": job, "index": index}}))
            procs.append(subprocess.Popen([sys.executable, READY, directory], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True))
        return wait_ready(directory, started)
    finally:
        stop(procs)
        shutil.rmtree(directory, ignore_errors=True)


def with_tfrun():
    directory = tempfile.mkdtemp()
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfmesos.cli.tfrun", "-w", "2", "-s", "1", "-Cw", "0.5",
         "-Cs", "0.5", "--", sys.executable, READY, directory],
        env=dict(os.environ, MESOS_MASTER=""), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        return wait_ready(directory, started)
    finally:
        stop([proc])
        shutil.rmtree(directory, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    floor, tfrun = [], []
    for _ in range(args.rounds):  # interleaved, so machine noise hits both alike
        floor.append(by_hand())
        tfrun.append(with_tfrun())
    f, t = statistics.median(floor), statistics.median(tfrun)
    print("by hand (floor): %s  median %.2f s" % (" ".join("%.2f" % x for x in floor), f))
    print("tfrun:           %s  median %.2f s" % (" ".join("%.2f" % x for x in tfrun), t))
    print("ratio tfrun/floor: %.2f (target <= 1.2)" % (t / f))


if __name__ == "__main__":
    main()
