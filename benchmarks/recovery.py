"""How long training takes to progress again after a worker dies: a sticky
relaunch against a whole restart, on the embedded master, each against a
plain cold start of the same cluster.

    python benchmarks/recovery.py [--steps 3000] [--kill-at 1000]

The cluster: a chief (the ParameterServerStrategy coordinator, this file's
``task`` part, run by tfrun), 1 ps and 2 workers (TensorFlow servers), on
scikit-learn's digits. The chief prints ``step N TIME`` every
``--report`` steps and keeps a checkpoint every ``--checkpoint`` steps, from
which it resumes after a whole restart. Once ``--kill-at`` steps are done,
worker:0's process is SIGKILLed.

* sticky: ``tfrun -c -w 2 -s 1 --sticky-workers``: worker:0 comes back at its
  address, the coordinator keeps dispatching to worker:1 meanwhile.
* whole restart: ``tfrun -c -w 2 -s 1 --max-restarts 1``: every task stops,
  the cluster starts again (default back-off, 2 s), the chief resumes from
  its checkpoint. The back-off is printed apart, with what the restart
  costs besides it.

Recovered: the first window of two reports after the kill whose steps/s is
back above 80% of the rate before the kill; the same read from a moment
halfway to the kill, when nothing happened, is the measure's own floor
(printed: reports every 25 steps, ~0.1 s at ~250 steps/s, put it near
0.3 s, 0.03x of a cold start; every 50 steps it was 0.06-0.07x, above
the sticky goal of 0.05x). Cold start: from tfrun's start to
the first such window of the first attempt. Prints both and their ratios.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import goals  # benchmarks/goals.py: this script's folder is first on sys.path

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
THRESHOLD = 0.8
REPORT = re.compile(r"^\[chief:0\] step (\d+) ([0-9.]+)$")


# -- the task side (run by tfrun in every task) ---------------------------------

def task(args):
    import tensorflow as tf
    config = json.loads(os.environ["TF_CONFIG"])
    kind, index = config["task"]["type"], config["task"]["index"]
    if kind != "chief":
        tf.distribute.Server(tf.train.ClusterSpec(config["cluster"]), job_name=kind,
                             task_index=index, protocol="grpc", start=True).join()
        return
    sys.path.insert(0, os.path.join(REPO, "examples"))
    from digits import SEED, load_data
    from ps_coordinator import MLP

    (x_train, y_train), _ = load_data()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model, step = MLP(), tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(model=model, step=step)
    manager = tf.train.CheckpointManager(checkpoint, args.model_dir, max_to_keep=1)
    checkpoint.restore(manager.latest_checkpoint)

    def dataset_fn():
        return (tf.data.Dataset.from_tensor_slices((x_train, y_train))
                .shuffle(len(x_train), seed=SEED).repeat().batch(32))

    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(lambda _: dataset_fn())

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    @tf.function
    def train_step(iterator):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=y, logits=model(x)))
            for variable, grad in zip(model.trainable_variables,
                                      tape.gradient(loss, model.trainable_variables)):
                variable.assign_sub(0.5 * grad)
            return loss
        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    done = int(step.numpy())
    print("resuming at step %d" % done, flush=True)
    while done < args.steps:
        for _ in range(args.report):
            coordinator.schedule(train_step, args=(iterator,))
        coordinator.join()
        done += args.report
        step.assign(done)
        print("step %d %.3f" % (done, time.time()), flush=True)
        if done % args.checkpoint == 0:
            manager.save()
    os._exit(0)   # the strategy's threads do not end by themselves


# -- the driver -----------------------------------------------------------------

def innermost(run_id, job, index, needle="recovery.py"):
    """Pid of the innermost process of task ``job:index`` of run ``run_id``."""
    marker = ("TFMESOS_TASK_ID=tfmesos.%s.%s.%d." % (run_id, job, index)).encode()
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as handle:
                if not any(v.startswith(marker) for v in handle.read().split(b"\0")):
                    continue
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                if needle.encode() not in handle.read():
                    continue
            with open("/proc/%s/stat" % pid, "rb") as handle:
                found[int(pid)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except OSError:
            continue
    leaves = [pid for pid in found if pid not in found.values()]
    return leaves[0] if len(leaves) == 1 else None


def first_recovered(reports, since, baseline):
    """Time of the first report closing a two-interval window after ``since``
    whose steps/s is at least THRESHOLD * baseline (None if none)."""
    after = [(s, t) for s, t in reports if t > since]
    for (s0, t0), (s1, t1) in zip(after, after[2:]):
        if s1 > s0 and (s1 - s0) / (t1 - t0) >= THRESHOLD * baseline:
            return t1
    return None


def one_run(scenario, args):
    """Run the cluster once, kill worker:0 at --kill-at; returns the timings."""
    tmp = tempfile.mkdtemp(prefix="tfmesos-recovery-")
    run_dir, model_dir = os.path.join(tmp, "run"), os.path.join(tmp, "model")
    # The tasks' temporary files too (TensorFlow's autograph writes its
    # generated code there and removes it at exit, which the chief's
    # os._exit and a killed worker skip): a Mesos agent sets no TMPDIR.
    tasks_tmp = os.path.join(tmp, "tasks-tmp")
    os.mkdir(tasks_tmp)
    extra = ["--sticky-workers"] if scenario == "sticky" else ["--max-restarts", "1"]
    argv = [sys.executable, "-m", "tfmesos.cli.tfrun", "-c", "-w", "2", "-s", "1", "-q",
            "-Cw", "0.5", "-Cs", "0.5", "-Cc", "0.5", "--logs", "chief", "--run-dir", run_dir,
            "--env", "TMPDIR=" + tasks_tmp, *extra,
            "--", sys.executable, os.path.join(HERE, "recovery.py"), "task",
            "--model-dir", model_dir, "--steps", str(args.steps), "--report", str(args.report),
            "--checkpoint", str(args.checkpoint)]
    try:
        return _measure(scenario, argv, run_dir, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)   # the run's record and the checkpoints


def _measure(scenario, argv, run_dir, args):
    """``one_run``'s run of ``argv`` and the timings read from it."""
    started = time.time()
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, MESOS_MASTER=""))
    reports, killed = [[]], None
    try:
        for line in proc.stdout:
            if "resuming at step" in line and reports[-1]:
                reports.append([])
            match = REPORT.match(line.strip())
            if not match:
                continue
            reports[-1].append((int(match.group(1)), float(match.group(2))))
            if killed is None and int(match.group(1)) >= args.kill_at:
                with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as handle:
                    run_id = json.load(handle)["run_id"]
                pid = innermost(run_id, "worker", 0)
                os.kill(pid, signal.SIGKILL)
                killed = time.time()
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
    if code != 0 or killed is None:
        raise SystemExit("%s run failed (exit %s): %s" % (scenario, code, proc.stderr.read()))
    first = reports[0]
    before = [(s, t) for s, t in first if t <= killed and s >= args.kill_at // 4]
    baseline = (before[-1][0] - before[0][0]) / (before[-1][1] - before[0][1])
    cold = first_recovered(first, started, baseline) - started
    later = [r for attempt in reports for r in attempt if r[1] > killed]
    recovered = first_recovered(later, killed, baseline)
    # The measure's own floor: the same window from a moment nothing
    # happened (the report halfway to the kill), so that a recovery is read
    # against what the reports' spacing allows at all.
    calm = next(t for s, t in first if s >= args.kill_at // 2)
    floor = first_recovered(first, calm, baseline)
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as handle:
        record = json.load(handle)
    back = [r["back"] for r in record["relaunches"] if r["back"]]
    backoff = record["restarts"][0]["delay"] if record["restarts"] else None
    return {"scenario": scenario, "baseline": baseline, "cold": cold, "backoff": backoff,
            "recovery": recovered - killed if recovered else None,
            "floor": floor - calm if floor else None,
            "back": seconds(back[0]) - killed if back else None,
            "restarts": len(record["restarts"]), "relaunches": len(record["relaunches"])}


def seconds(iso):
    """time.time() of a run.json time."""
    moment = datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", default="driver", choices=["driver", "task"])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--kill-at", type=int, default=1000)
    parser.add_argument("--report", type=int, default=25)
    parser.add_argument("--checkpoint", type=int, default=200)
    parser.add_argument("--model-dir")
    args = parser.parse_args(argv)
    if args.part == "task":
        return task(args)
    results = [one_run(scenario, args) for scenario in ("sticky", "restart")]
    for result in results:
        recovery = result["recovery"]
        print("%-8s steps/s before %.0f; cold start %.1f s; back above %d%% %s after the "
              "kill%s (restarts %d, relaunches %d)" % (
                  result["scenario"], result["baseline"], result["cold"], THRESHOLD * 100,
                  "%.1f s" % recovery if recovery is not None else "never",
                  "; %.2f x the cold start" % (recovery / result["cold"])
                  if recovery is not None else "", result["restarts"], result["relaunches"]))
        if result["back"] is not None:
            print("%-8s worker:0 registered again at its address %.1f s after the kill"
                  % ("", result["back"]))
        if result["backoff"] is not None and recovery is not None:
            print("%-8s of which the back-off before the relaunch (--restart-backoff, default): "
                  "%.1f s; the rest %.1f s, %.2f x the cold start"
                  % ("", result["backoff"], recovery - result["backoff"],
                     (recovery - result["backoff"]) / result["cold"]))
        if result["floor"] is not None:
            print("%-8s the measure's floor: from a moment without a kill, %.2f s (%.3f x the "
                  "cold start; --report %d steps)" % ("", result["floor"],
                                                     result["floor"] / result["cold"],
                                                     args.report))
    for result, target in zip(results, (0.05, 1.0)):
        if result["recovery"] is not None:
            goals.report("%s / cold start" % ("sticky relaunch" if result["scenario"] == "sticky"
                                              else "whole restart"),
                         result["recovery"] / result["cold"], target)
    sticky, restart = (r["recovery"] for r in results)
    if sticky and restart:
        print("sticky relaunch recovers in %.2f x the time of a whole restart"
              % (sticky / restart))
    return 0


if __name__ == "__main__":
    sys.exit(main())
