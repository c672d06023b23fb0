"""Scale past one machine, by simulation: a replica run of N tasks over N
agents of the embedded master, each task a cheap stand-in, so that 1,000
tasks run on this machine; what the scheduler's side costs per task, from
10 to 1,000 tasks (goal: flat within 1.5 times).

The scheduler is tfrun's own (``ClusterRun``, in this process, with the
embedded master and its N agents, as ``tfrun -w N-1 -s 1 -- true``). The
agents run their tasks through ``StandInRunner``: every task is handed to
one stand-in host process, which says on a thread of its own what the
task entry says (``stand_in``: register with the authenticated rendezvous,
take the start message, report the exit of a command that did nothing)
instead of starting an interpreter. What a task costs the host is not counted;
what it costs the scheduler and the embedded master is: offers, launches,
status updates, the rendezvous' fan-in, the record.

Each size runs in a fresh process (its peak memory is its own) and prints:
time to all registered, to the end, the scheduler's CPU seconds (its
process: scheduler, rendezvous and embedded master), its peak memory, the
events it handled per second, run.json's size and the cost of one save.

    python benchmarks/simulate.py [--tasks 10,100,1000]
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import goals  # benchmarks/goals.py: this script's folder is first on sys.path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from mesos_local import AgentSpec
from mesos_local.containerizer.runner import RunningTask

# -- the stand-in host: one process, a thread per task ---------------------------------


def stand_in(environ):
    """One task, cheaply: what the task entry says to the scheduler
    (``tfmesos.task.entry``: register, take the start message, the exit
    message of a command that did nothing), over the real authenticated
    connection that answers the scheduler's pings, and no process, no
    command, no usage sampling, no output relay."""
    from tfmesos.protocol.hostport import free_port
    from tfmesos.task.connection import Connection
    from tfmesos.task.task_environ import TaskEnv

    env = TaskEnv.from_environ(environ)
    conn = Connection(env)
    conn.register(env.host, env.port or free_port())
    start = conn.receive()
    if start["type"] != "start":
        return 1
    conn.send({"type": "exit", "code": 0, "stopped": False})
    conn.close()
    return 0


def host_main():
    """Read ``{"id", "env"}`` lines on stdin, run each task's stand-in on a
    thread; answer ``{"id", "code"}`` lines on the original stdout."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    lock = threading.Lock()

    def task(task_id, environ):
        try:
            code = stand_in(environ)
        except BaseException:   # a stand-in's failure is its task's
            code = 1
        with lock:
            replies.write(json.dumps({"id": task_id, "code": code}) + "\n")

    threading.stack_size(512 * 1024)
    for line in sys.stdin:
        request = json.loads(line)
        threading.Thread(target=task, args=(request["id"], request["env"]), daemon=True).start()


class StandInTask(RunningTask):
    def __init__(self):
        self.code = None
        self.ended = threading.Event()

    def wait(self, timeout=None):
        self.ended.wait(timeout)
        return self.code

    def terminate(self):
        self._end(-15)

    def kill(self):
        self._end(-9)

    def _end(self, code):
        if not self.ended.is_set():
            self.code = code
            self.ended.set()


class StandInRunner:
    """The agents' runner: each launch goes to the stand-in host."""

    def __init__(self):
        self.host = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--host"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1)
        self.tasks = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def launch(self, launch):
        task = StandInTask()
        with self.lock:
            self.tasks[launch.task_id] = task
            self.host.stdin.write(json.dumps({"id": launch.task_id, "env": launch.env}) + "\n")
        return task

    def _read(self):
        for line in self.host.stdout:
            reply = json.loads(line)
            with self.lock:
                task = self.tasks.get(reply["id"])
            if task is not None:
                task._end(reply["code"])

    def close(self):   # idempotent
        if not self.host.stdin.closed:
            self.host.stdin.close()
        self.host.kill()
        self.host.wait()


# -- one size, in a process of its own -------------------------------------------------


def agents(count):
    return [AgentSpec(hostname="agent%d" % i, cpus=1, mem=1024, disk=1000,
                      ports=((20000 + 2 * i, 20001 + 2 * i),), gpus=0) for i in range(count)]


def measure(tasks):
    from tfmesos.core.jobs import Job
    from tfmesos.core.launch import ClusterRun
    from tfmesos.core.spec import RunSpec

    os.environ["TFMESOS_WARM_TASKS"] = "0"   # the agents run their tasks through the stand-ins
    work = tempfile.mkdtemp(prefix="tfmesos-simulate-")
    runner = StandInRunner()
    spec = RunSpec(jobs=(Job("ps", num=1, cpus=0.5, mem=64),
                         Job("worker", num=tasks - 1, cpus=0.5, mem=64)),
                   mode="replica", command="true", run_dir=os.path.join(work, "run"),
                   launch_timeout=600,
                   local_master=(("agents", agents(tasks)), ("runner", runner),
                                 ("isolation", None), ("work_dir", os.path.join(work, "mesos"))))
    run = ClusterRun(spec)
    events = [0]
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    try:
        run.start()
        handle = run.reactions.handle

        def counted(event):
            events[0] += 1
            return handle(event)
        run.reactions.handle = counted
        run.wait_ready()
        registered = time.perf_counter() - started
        run.wait_finished()
        ended = time.perf_counter() - started
        used = resource.getrusage(resource.RUSAGE_SELF)
        saves = 5
        began = time.perf_counter()
        for _ in range(saves):
            run.record.save()
        save_s = (time.perf_counter() - began) / saves
        size = os.path.getsize(os.path.join(run.record.directory, "run.json"))
    finally:
        run.stop()
        runner.close()   # the master's stop closed it, unless the run never started
        shutil.rmtree(work, ignore_errors=True)
    return {"tasks": tasks, "registered_s": registered, "ended_s": ended,
            "cpu_s": used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime,
            "peak_mb": used.ru_maxrss / 1024, "events": events[0],
            "events_per_s": events[0] / ended, "run_json_bytes": size, "save_s": save_s}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="10,100,1000")
    parser.add_argument("--host", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.host:
        return host_main()
    if args.one:
        print(json.dumps(measure(args.one)))
        return None
    env = dict(os.environ, MESOS_MASTER="", TFMESOS_WARM_TASKS="0")
    rows = []
    for tasks in (int(n) for n in args.tasks.split(",")):
        result = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", str(tasks)],
                                env=env, capture_output=True, text=True, timeout=1800)
        if result.returncode:
            sys.exit("simulate %d tasks failed: %s" % (tasks, result.stderr[-3000:]))
        rows.append(json.loads(result.stdout.strip().splitlines()[-1]))
    print("%6s %12s %8s %9s %12s %8s %9s %10s %12s %9s" % (
        "tasks", "registered", "ended", "cpu s", "cpu ms/task", "peak MB", "events",
        "events/s", "run.json kB", "save ms"))
    for row in rows:
        print("%6d %11.2fs %7.2fs %9.2f %12.1f %8.0f %9d %10.0f %12.0f %9.1f" % (
            row["tasks"], row["registered_s"], row["ended_s"], row["cpu_s"],
            1000 * row["cpu_s"] / row["tasks"], row["peak_mb"], row["events"],
            row["events_per_s"], row["run_json_bytes"] / 1000, 1000 * row["save_s"]))
    first, last = rows[0], rows[-1]
    goals.report("scheduler cpu per task, %d tasks / %d tasks (simulated agents)"
                 % (last["tasks"], first["tasks"]),
                 (last["cpu_s"] / last["tasks"]) / (first["cpu_s"] / first["tasks"]), 1.5)
    return None


if __name__ == "__main__":
    main()
