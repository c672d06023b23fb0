"""What ``tfrun --ship`` costs: pack a directory, serve it, and have 8 tasks
fetch it at once through one local agent's fetcher and its cache (one
download, a copy per task), then check and extract it as each task's
command does (``ship/fetch_check.py``: sha256sum, tar), for a 10 MB and a
100 MB directory; and the packing time of this repository (``--ship`` of the
tfmesos checkout itself).

    python benchmarks/ship.py [--tasks 8] [--sizes 10,100] [--rounds 3]

Each directory is half source-like text (compresses well) and half random
bytes (model files, data: does not compress), in 256 kB files. Times are
the best of ``--rounds``; the floor of a fetch is copying the archive's
bytes, measured as one local file copy per task. ``cpu``: the CPU seconds
of the fetch (this process and the tasks' shells, tar, openssl), steadier
than its wall time on a machine others load.

The tasks' sandboxes are in the temporary directory (``$TMPDIR``), as the
embedded master's are by default.
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import goals  # benchmarks/goals.py: this script's folder is first on sys.path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mesos_local.containerizer.fetch_cache import FetcherCache
from mesos_local.containerizer.fetcher import fetch_uris
from tfmesos.ship import bundle
from tfmesos.ship.bundle_server import BundleServer
from tfmesos.ship.fetch_check import Fetched, check_command

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE_SIZE = 256 * 1024
TEXT = (b"def step(model, batch):\n    loss = model.train_on_batch(batch)\n"
        b"    return {'loss': float(loss)}\n\n")


def make_directory(root, megabytes):
    """``megabytes`` MB in 256 kB files, alternately text and random."""
    os.makedirs(root)
    count = max(1, megabytes * 1000 * 1000 // FILE_SIZE)
    for index in range(count):
        if index % 2:
            data = os.urandom(FILE_SIZE)
        else:
            data = (TEXT * (FILE_SIZE // len(TEXT) + 1))[:FILE_SIZE]
        with open(os.path.join(root, "part%04d.%s" % (index, "bin" if index % 2 else "py")),
                  "wb") as handle:
            handle.write(data)
    return count * FILE_SIZE


def cpu_seconds():
    """CPU seconds of this process and its waited-for children so far."""
    return sum(getattr(resource.getrusage(who), field)
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for field in ("ru_utime", "ru_stime"))


def fetch_all(server, packed, sandboxes, cache_dir):
    """(seconds, CPU seconds) until every task has fetched, checked and extracted the bundle,
    as tfrun's TaskInfos ask (``Shipment.uris``: through the agent's fetcher
    cache, so one download for the agent; ``Shipment.command``'s check)."""
    url = server.url("127.0.0.1", packed.name)
    cache = FetcherCache(cache_dir)
    check = check_command([Fetched(packed.name, packed.sha256, unpack=True,
                                   size=packed.archive_size)]) + "exit 0"
    errors = []

    def task(box):
        try:
            os.makedirs(box)
            fetch_uris([{"value": url, "extract": False, "cache": True}], box, cache=cache,
                       user="root")
            subprocess.run(["sh", "-c", check], cwd=box, check=True, capture_output=True)
            if not os.path.isdir(os.path.join(box, bundle.TOP)):
                raise RuntimeError("task %s: the bundle was not extracted" % box)
        except Exception as exc:   # reported below
            errors.append(exc)
    began, cpu = time.perf_counter(), cpu_seconds()
    threads = [threading.Thread(target=task, args=(box,)) for box in sandboxes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed, cpu = time.perf_counter() - began, cpu_seconds() - cpu
    if errors:
        raise errors[0]
    return elapsed, cpu


def copy_floor(path, work, tasks):
    began = time.perf_counter()
    for index in range(tasks):
        shutil.copyfile(path, os.path.join(work, "copy%d" % index))
    return time.perf_counter() - began


def measure(megabytes, tasks, rounds, work):
    source = os.path.join(work, "dir%d" % megabytes)
    size = make_directory(source, megabytes)
    best = {}
    for _ in range(rounds):
        out = tempfile.mkdtemp(dir=work)
        began = time.perf_counter()
        packed = bundle.pack(source, out, max_size=None)
        pack_s = time.perf_counter() - began
        began = time.perf_counter()
        server = BundleServer({packed.name: packed.path}, bind_host="127.0.0.1")
        serve_s = time.perf_counter() - began
        try:
            boxes = [os.path.join(out, "sandbox%d" % i) for i in range(tasks)]
            fetch_s, fetch_cpu = fetch_all(server, packed, boxes, os.path.join(out, "cache"))
        finally:
            server.stop()
        floor_s = copy_floor(packed.path, out, tasks)
        archive = packed.archive_size
        shutil.rmtree(out)
        for key, value in (("pack", pack_s), ("serve", serve_s), ("fetch", fetch_s),
                           ("fetch_cpu", fetch_cpu), ("floor", floor_s)):
            best[key] = min(best.get(key, value), value)
    total = best["pack"] + best["serve"] + best["fetch"]
    print("%4d MB (%d files): archive %.1f MB (%.2f of the files)  pack %.2f s  serve %.3f s  "
          "fetch+check+extract by %d tasks %.2f s (cpu %.2f s; %.0f MB/s of archive; copying it "
          "%d times: %.2f s)  total %.2f s"
          % (megabytes, size // FILE_SIZE, archive / 1e6, archive / size, best["pack"],
             best["serve"], tasks, best["fetch"], best["fetch_cpu"],
             tasks * archive / 1e6 / best["fetch"], tasks, best["floor"], total))
    if megabytes == 100 and tasks == 8:
        goals.report("--ship 100 MB to 8 tasks, seconds", total, 1.5, unit=" s")
    shutil.rmtree(source)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--sizes", default="10,100", help="directory sizes in MB")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="tfmesos-ship-bench-")
    try:
        times = []
        for _ in range(args.rounds):
            began = time.perf_counter()
            packed = bundle.pack(REPO, tempfile.mkdtemp(dir=work))
            times.append(time.perf_counter() - began)
        print("this repository: %s, archive %.2f MB, packed in %.3f s (best of %d)"
              % (packed.summary(), packed.archive_size / 1e6, min(times), args.rounds))
        for megabytes in (int(size) for size in args.sizes.split(",")):
            measure(megabytes, args.tasks, args.rounds, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
