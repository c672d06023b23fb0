"""What reading the run history costs as it grows: ``tfmesos runs`` (the
list) and ``tfmesos show ID`` (one run found by its id) over a runs
directory of ``--runs`` records, against the floor of any reader that has
no index: a Python that parses every run.json of the directory.

    python benchmarks/history.py [--runs 500] [--rounds 3]

The records are made here, alike in shape to what tfrun writes: a
``-w 2 -s 1`` run (3 tasks, one attempt each, their states, usage and its
samples), and one in ten with the metrics of a training run (3 tasks x 4
series x 500 points). Every process is a fresh interpreter (``python -m
tfmesos.cli.main``, as the ``tfmesos`` script), so the floor includes one
interpreter's start too. Times are medians of ``--rounds``.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import goals  # benchmarks/goals.py: this script's folder is first on sys.path

NEUTRAL = tempfile.gettempdir()
FLOOR = ("import json, os, sys\n"
         "root = sys.argv[1]\n"
         "for name in os.listdir(root):\n"
         "    with open(os.path.join(root, name, 'run.json'), encoding='utf-8') as f:\n"
         "        json.load(f)\n")


def at(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1.79e9 + seconds)) + ".000Z"


def make_run(index, metrics):
    from tfmesos.record.schema import (
        Attempt,
        Job,
        Logs,
        MetricSeries,
        Outcome,
        RunFile,
        Sample,
        State,
        Task,
        Timings,
        Usage,
    )
    base = index * 100.0
    run_id = "%08x" % (0x5eed0000 + index)
    tasks = []
    for job, task_index in (("ps", 0), ("worker", 0), ("worker", 1)):
        name = "%s:%d" % (job, task_index)
        usage = Usage(wall_s=60.0, cpu_s=50.0, user_s=45.0, system_s=5.0, peak_rss_mb=300.0,
                      peak_tree_rss_mb=310.0, sample_interval_s=10.0,
                      samples=[Sample(t=10.0 * i, cpu_s=8.0 * i, rss_mb=290.0)
                               for i in range(1, 7)])
        attempt = Attempt(attempt=1, task_id="tfmesos.%s.%s.%d.1" % (run_id, job, task_index),
                          agent_id="S0", hostname="node1", address="node1:%d" % (31000 + index),
                          launched=at(base + 1), registered=at(base + 2),
                          states=[State(state=s, time=at(base + t), source="SOURCE_EXECUTOR")
                                  for s, t in (("TASK_STARTING", 1), ("TASK_RUNNING", 2),
                                               ("TASK_FINISHED", 62))],
                          exit_code=0, exited=at(base + 62),
                          logs=Logs(stdout="%s.%d.attempt1.stdout" % (job, task_index),
                                    stderr="%s.%d.attempt1.stderr" % (job, task_index)),
                          usage=usage)
        tasks.append(Task(name=name, job=job, index=task_index, state="TASK_FINISHED",
                          exit_code=0, attempts=[attempt]))
    series = []
    if metrics:
        for task in ("chief:0", "worker:0", "worker:1"):
            for metric in ("loss", "accuracy", "lr", "steps_per_s"):
                series.append(MetricSeries(task=task, name=metric, last=0.5, last_step=499,
                                           last_time=base + 60, count=500, stride=1,
                                           steps=list(range(500)),
                                           values=[1.0 / (i + 1) for i in range(500)],
                                           times=[base + i * 0.1 for i in range(500)]))
    return RunFile(run_id=run_id, name="train", mode="replica", master="local",
                   command="python train.py --epochs 3",
                   jobs=[Job(name="ps", num=1, cpus=1.0, mem=1024.0),
                         Job(name="worker", num=2, cpus=1.0, mem=1024.0)],
                   framework_id="fw-%d" % index, tasks=tasks,
                   outcome=Outcome(status="succeeded", exit_code=0),
                   timings=Timings(submitted=at(base), first_offer=at(base + 0.1),
                                   all_registered=at(base + 2), finished=at(base + 63)),
                   metrics=series)


def make_history(root, count):
    for index in range(count):
        run = make_run(index, metrics=index % 10 == 0)
        directory = os.path.join(root, "train-%s" % run.run_id)
        os.mkdir(directory)
        with open(os.path.join(directory, "run.json"), "w", encoding="utf-8") as handle:
            json.dump(run.to_dict(), handle, indent=1)


def timed(argv, env):
    started = time.monotonic()
    result = subprocess.run(argv, env=env, cwd=NEUTRAL, capture_output=True,
                            text=True, timeout=600)
    took = time.monotonic() - started
    if result.returncode:
        raise SystemExit("%s failed: %s" % (" ".join(argv), result.stderr[-2000:]))
    return took, result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="tfmesos-history-")
    try:
        make_history(root, args.runs)
        size = sum(os.path.getsize(os.path.join(root, name, "run.json"))
                   for name in os.listdir(root))
        env = dict(os.environ, TFMESOS_RUNS_DIR=root, MESOS_MASTER="", COLUMNS="200")
        tfmesos = [sys.executable, "-m", "tfmesos.cli.main"]
        wanted = "%08x" % (0x5eed0000 + args.runs // 2)
        measures = {"floor": [sys.executable, "-c", FLOOR, root],
                    "tfmesos runs": tfmesos + ["runs"],
                    "tfmesos show ID": tfmesos + ["show", wanted]}
        times = {name: [] for name in measures}
        for _ in range(args.rounds):
            for name, argv in measures.items():
                took, out = timed(argv, env)
                times[name].append(took)
                if name == "tfmesos show ID" and wanted not in out:
                    raise SystemExit("tfmesos show did not show run %s" % wanted)
        print("%d runs, %.1f MB of run.json (one in ten with metrics)" % (args.runs, size / 1e6))
        medians = {name: statistics.median(values) for name, values in times.items()}
        for name, values in times.items():
            print("%-45s %s  median %.2f s" % (
                name + (" (parse every run.json)" if name == "floor" else "") + ":",
                " ".join("%.2f" % v for v in values), medians[name]))
        floor = medians["floor"]
        goals.report("tfmesos runs over %d runs / parsing them" % args.runs,
                     medians["tfmesos runs"] / floor, 2.0)
        goals.report("tfmesos show ID among %d runs / parsing them" % args.runs,
                     medians["tfmesos show ID"] / floor, 1.5)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
