"""Runs that outlive their scheduler, timed on an embedded master that
outlives tfrun (``mesos_local.LocalMaster`` in this process):

* submit to first step: ``tfrun --detach --ship`` against a foreground
  ``tfrun`` of the same run (``--ship`` too), each from its start until
  worker 0's first step is in its Mesos sandbox; and how long the detached
  tfrun itself takes to return;
* a lost scheduler: a detached run's scheduler task is SIGKILLed mid-run
  and ``tfmesos attach`` started at once: the time until every worker's
  steps reach a scheduler again (the new one, through attach's output),
  and how many steps each worker made meanwhile (training never paused);
  the same for a foreground ``tfrun --failover`` SIGKILLed and taken over.

    python benchmarks/detached.py [--rounds 3] [--bytecode]

``--bytecode``: tfmesos compiled first and put on PYTHONPATH, as ``pip
install .`` installs it (``startup.with_bytecode``); without it, under
``PYTHONDONTWRITEBYTECODE`` (as on this project's machines) each tfrun and
``tfmesos attach`` compiles tfmesos' sources anew as it starts (the
scheduler task imports compiled modules either way: its zip has them),
which slows the foreground run the ratios divide by more than the detached one.

Each figure is the median of ``--rounds``; ratios are against the
foreground run of the same round, in this process.
"""

import argparse
import glob
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import goals  # benchmarks/goals.py: this script's folder is first on sys.path
from startup import pythonpath_with, with_bytecode

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from mesos_local import AgentSpec, LocalMaster

TRAIN = (
    "import os, sys, time\n"
    "step = 0\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    print('step', step, time.time(), flush=True)\n"
    "    step += 1\n"
    "    time.sleep(0.05)\n")
STEP = re.compile(r"^\[(worker:\d)\] step (\d+) ")
JOBS = ["-w", "2", "-s", "0", "-Cw", "0.2", "-Mw", "128"]


class Lines:
    """A process's output, read in a thread; ``first(pattern, since)``."""

    def __init__(self, stream):
        self.lines, self.lock = [], threading.Lock()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in iter(stream.readline, ""):
            with self.lock:
                self.lines.append((time.monotonic(), line.rstrip("\n")))

    def steps(self):
        with self.lock:
            return [(at, m.group(1), int(m.group(2))) for at, line in self.lines
                    for m in [STEP.match(line)] if m]


def wait(predicate, timeout=120.0, what="a condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise SystemExit("benchmark: %s did not happen within %.0f s" % (what, timeout))


def sandbox_stdouts(work_dir):
    """Every task's sandbox stdout (Mesos' layout under each agent's work
    directory, src/slave/paths.cpp; ``mesos_local.agent``):
    looked up level by level, not by a recursive glob, which walked every
    file of every sandbox (a detached run's scheduler side alone is ~500) on
    the embedded master's interpreter every 20 ms, slowing it down; each
    run's own directory, not its ``runs/latest`` link to it (each file once)."""
    return [path for path in glob.glob(os.path.join(
        work_dir, "agents", "*", "slaves", "*", "frameworks", "*", "executors", "*", "runs", "*",
        "stdout")) if os.path.basename(os.path.dirname(path)) != "latest"]


def first_step_in_sandbox(work_dir, since_files):
    """Whether a new worker 0 sandbox's stdout shows a step."""
    for path in sandbox_stdouts(work_dir):
        if path in since_files or ".worker.0." not in path:
            continue
        try:
            with open(path) as handle:
                if "\nstep 0 " in "\n" + handle.read():
                    return True
        except OSError:
            pass
    return False


def tfrun(*args, env):
    return subprocess.Popen([sys.executable, "-m", "tfmesos.cli.tfrun", *args], cwd=env["PROJ"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def submit_to_first_step(master, env, detached):
    flag = os.path.join(env["PROJ"], "stop-%d" % time.monotonic_ns())
    before = set(sandbox_stdouts(master.work_dir))
    started = time.monotonic()
    proc = tfrun(*(["--detach"] if detached else []), "--ship", "-m", master.url, *JOBS, "--",
                 "python3", "train.py", flag, env=env)
    returned = None
    if detached:
        out, err = proc.communicate(timeout=120)
        returned = time.monotonic() - started
        if proc.returncode != 0:
            raise SystemExit("benchmark: tfrun --detach failed: %s" % err)
    wait(lambda: first_step_in_sandbox(master.work_dir, before) or (
        not detached and exited(proc)), what="the first step")
    first = time.monotonic() - started
    open(flag, "w").close()
    if not detached:
        proc.communicate(timeout=120)
    else:
        wait(lambda: not master.state()["frameworks"], what="the detached run's end")
    return first, returned


def exited(proc):
    """False while a foreground tfrun runs; ends the benchmark, with its
    stderr, once it has exited (rather than waiting out the timeout)."""
    if proc.poll() is None:
        return False
    raise SystemExit("benchmark: tfrun exited with code %s before the first step: %s"
                     % (proc.returncode, proc.stderr.read()[-2000:]))


def scheduler_pid():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                if b"tfmesos.cli.detached_scheduler" in handle.read():
                    return int(pid)
        except OSError:
            continue
    return None


def lost_scheduler(master, env, detached):
    """Seconds from the SIGKILL until every worker's steps reach the new
    scheduler (the first ones are those the tasks kept meanwhile: training
    itself never paused)."""
    flag = os.path.join(env["PROJ"], "stop-%d" % time.monotonic_ns())
    run_dir = os.path.join(env["PROJ"], "run-%d" % time.monotonic_ns())
    if detached:
        proc = tfrun("--detach", "--ship", "-m", master.url, *JOBS, "--", "python3", "train.py",
                     flag, env=env)
        out, err = proc.communicate(timeout=120)
        run_id = re.search(r"^run (\w+) detached", out, re.M).group(1)
        attach_args = [run_id, "--master", master.url]
        wait(lambda: sum(1 for f in master.state()["frameworks"] for t in f["tasks"]
                         if t["state"] == "TASK_RUNNING") == 3, what="the detached run")
        time.sleep(1.0)   # let it train a while
        victim = scheduler_pid()
    else:
        proc = tfrun("--failover", "-m", master.url, *JOBS, "--run-dir", run_dir, "--",
                     "python3", "train.py", flag, env=env)
        output = Lines(proc.stdout)
        wait(lambda: len(output.steps()) > 20, what="the foreground run's steps")
        attach_args = [run_dir]
        victim = proc.pid
    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()
    if not detached:
        proc.wait()
    attach = subprocess.Popen([sys.executable, "-m", "tfmesos.cli.main", "attach", *attach_args],
                              cwd=env["PROJ"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    lines = Lines(attach.stdout)
    # The first line from each worker that a step made after the kill.
    back = wait(lambda: (lambda seen: max(seen.values()) if len(seen) == 2 else None)(
        {task: at for at, task, _ in lines.steps()}), what="the steps through attach")
    open(flag, "w").close()
    attach.communicate(timeout=120)
    wait(lambda: not master.state()["frameworks"], what="the run's end")
    return back - killed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bytecode", action="store_true",
                        help="tfmesos compiled to bytecode first, on PYTHONPATH (as installed)")
    args = parser.parse_args()
    compiled = with_bytecode() if args.bytecode else None
    with tempfile.TemporaryDirectory(prefix="tfmesos-bench-detached-") as tmp:
        proj = os.path.join(tmp, "proj")
        os.makedirs(proj)
        with open(os.path.join(proj, "train.py"), "w") as handle:
            handle.write(TRAIN)
        env = dict(os.environ, MESOS_MASTER="", PROJ=proj,
                   PYTHONPATH=os.environ["PYTHONPATH"] if compiled else pythonpath_with(REPO),
                   TFMESOS_KEYS_DIR=os.path.join(tmp, "keys"),
                   TFMESOS_RUNS_DIR=os.path.join(tmp, "runs"))
        master = LocalMaster(agents=[AgentSpec(cpus=2, mem=4096, ports=((31000, 31009),))],
                             work_dir=os.path.join(tmp, "work"))
        master.start()
        try:
            rows = {"foreground": [], "detached": [], "returned": [], "attach detached": [],
                    "attach failover": []}
            for _ in range(args.rounds):
                rows["foreground"].append(submit_to_first_step(master, env, False)[0])
                first, returned = submit_to_first_step(master, env, True)
                rows["detached"].append(first)
                rows["returned"].append(returned)
                rows["attach detached"].append(lost_scheduler(master, env, True))
                rows["attach failover"].append(lost_scheduler(master, env, False))
        finally:
            master.stop()
            if compiled:
                shutil.rmtree(compiled, ignore_errors=True)
    base = statistics.median(rows["foreground"])
    print("submit to worker 0's first step (median of %d rounds):" % args.rounds)
    print("  foreground tfrun --ship          %6.2f s" % base)
    detached = statistics.median(rows["detached"])
    print("  tfrun --detach --ship            %6.2f s  (%.2fx the foreground)"
          % (detached, detached / base))
    print("  tfrun --detach returned after    %6.2f s" % statistics.median(rows["returned"]))
    print("scheduler SIGKILLed, tfmesos attach at once: until every worker's steps reach "
          "the new scheduler")
    for name, what in (("attach detached", "a detached run (new scheduler task)"),
                       ("attach failover", "tfrun --failover (attach carries on)")):
        seconds = statistics.median(rows[name])
        print("  %-36s %6.2f s  (%.2fx a foreground submit to first step)"
              % (what, seconds, seconds / base))
        goals.report("scheduler SIGKILLed -> progress after attach, %s / foreground submit"
                     % what.split(" (")[0], seconds / base, 1.5)
    goals.report("detached submit -> first step / foreground", detached / base, 1.2)


if __name__ == "__main__":
    main()
