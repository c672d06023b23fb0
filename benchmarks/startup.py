"""tfrun's start-up against its floor, both measured in this one run.

By default: ``tfrun -w 2 -s 1 -- true`` from start to exit (the embedded
master, three tasks that register, run ``true`` and are torn down) against
three bare Python processes that connect to a socket and exit (target:
<= 1.5 times, issue 33's, as ``goals`` reports it). With ``--tensorflow``:
bringing up 1 ps + 2 workers that import TensorFlow and start a gRPC
server, against the same three processes started by hand with the same
kind of TF_CONFIG (target: <= 1.2 times).

How tfmesos loads comes first in the output: installed as the README says
(``pip install .``, which compiles it), from its bytecode; from an editable
checkout under ``PYTHONDONTWRITEBYTECODE`` (as on this project's machines),
compiled anew at every start (about 540 KB of source); ``--bytecode``
measures a compiled copy of whatever tfmesos this Python imports.
The embedded master hands replica tasks to interpreters started ahead of
them (``backends/warm_runner.py``); the last row shows the cost of
exec'ing each task, as a Mesos agent does. Then the CPU of one more run of
each: the floor's, tfrun's process by thread (``thread_cpu.py``) and its
tasks': where a slower start-up went.

    python benchmarks/startup.py [--rounds 5] [--tensorflow] [--bytecode]
"""

import argparse
import contextlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import goals  # benchmarks/goals.py: this script's folder is first on sys.path

HERE = os.path.dirname(os.path.abspath(__file__))

READY = os.path.join(HERE, "ready_server.py")
THREAD_CPU = os.path.join(HERE, "thread_cpu.py")
TASKS = [("ps", 0), ("worker", 0), ("worker", 1)]
# Every process starts here: ``python -m`` puts its working directory first on
# sys.path, which from the checkout would find its sources before the
# compiled copy --bytecode puts on PYTHONPATH.
NEUTRAL = tempfile.gettempdir()


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
            procs.append(subprocess.Popen([sys.executable, READY, directory], env=env, cwd=NEUTRAL,
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
        stderr=subprocess.DEVNULL, start_new_session=True, cwd=NEUTRAL)
    try:
        return wait_ready(directory, started)
    finally:
        stop([proc])
        shutil.rmtree(directory, ignore_errors=True)


CONNECT = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1]))).close()"


def bare_processes(count=3):
    """``count`` Pythons (one per task: three) that connect to a socket and
    exit: seconds until all did."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=min(max(count, 16), 4096))
    port = str(listener.getsockname()[1])
    try:
        started = time.monotonic()
        procs = [subprocess.Popen([sys.executable, "-c", CONNECT, port], cwd=NEUTRAL)
                 for _ in range(count)]
        for _ in procs:
            listener.accept()[0].close()
        codes = [proc.wait(600) for proc in procs]
        took = time.monotonic() - started
    finally:
        listener.close()
    if any(codes):
        raise RuntimeError("a bare process failed: %s" % codes)
    return took


SMALL_CLUSTER = ("-w", "2", "-s", "1", "-Cw", "0.5", "-Cs", "0.5")


def children_cpu():
    """CPU seconds of this process's children that have been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def tfrun_process(extra_env, options, stderr, threads_to=None):
    """A running ``tfrun OPTIONS -- true`` on the embedded master, its run
    records in a runs directory of its own (removed after); with
    ``threads_to``, run by ``thread_cpu.py``, which writes its threads' CPU
    to that file as it leaves."""
    runs = tempfile.mkdtemp()
    tfrun = [THREAD_CPU, threads_to] if threads_to else ["-m", "tfmesos.cli.tfrun"]
    try:
        with subprocess.Popen(
                [sys.executable, *tfrun, *options, "--", "true"],
                env=dict(os.environ, MESOS_MASTER="", TFMESOS_RUNS_DIR=runs,
                         **(extra_env or {})),
                stdout=subprocess.DEVNULL, stderr=stderr, cwd=NEUTRAL) as proc:
            try:
                yield proc
            except BaseException:
                proc.kill()
                raise
    finally:
        shutil.rmtree(runs, ignore_errors=True)


def tfrun_cpu(extra_env=None, options=SMALL_CLUSTER, timeout=120, threads_to=None):
    """Where the CPU of one ``tfrun OPTIONS -- true`` goes: (its own
    process' user and system seconds, its children's: the tasks, with
    whatever they started), read from /proc/PID/stat once it has exited and
    before it is reaped (its pidfd is readable then); ``threads_to``: its
    threads' too, into that file (``thread_cpu.py``). Not timed: a run of
    its own."""
    with tempfile.TemporaryFile() as errors, \
            tfrun_process(extra_env, options, errors, threads_to) as proc:
        exited = os.pidfd_open(proc.pid)
        try:
            if not select.select([exited], [], [], timeout)[0]:
                raise RuntimeError("tfrun did not end within %d s" % timeout)
            with open("/proc/%d/stat" % proc.pid) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        finally:
            os.close(exited)
        if proc.wait():
            errors.seek(0)
            raise RuntimeError("tfrun failed: %s" % errors.read()[-2000:].decode(errors="replace"))
    tick = os.sysconf("SC_CLK_TCK")
    user, system, children = (int(fields[11]) / tick, int(fields[12]) / tick,
                              (int(fields[13]) + int(fields[14])) / tick)
    return user, system, children


def tfrun_cpu_by_thread(extra_env=None, options=SMALL_CLUSTER, timeout=120):
    """``tfrun_cpu`` and tfrun's threads' CPU, ``thread_cpu.py``'s rows."""
    with tempfile.NamedTemporaryFile(suffix=".json") as threads:
        user, system, tasks = tfrun_cpu(extra_env, options, timeout, threads_to=threads.name)
        return user, system, tasks, json.load(threads)["threads"]


def thread_shares(rows, shown=6):
    """``thread_cpu.py``'s rows as one line: the ``shown`` largest groups of
    threads (their count past one) and the rest."""
    def part(name, cpu, threads):
        return "%s%s %.2f s" % (name, " x%d" % threads if threads > 1 else "", cpu)
    parts = [part(*row) for row in rows[:shown]]
    rest = rows[shown:]
    if rest:
        parts.append(part("others", sum(row[1] for row in rest), sum(row[2] for row in rest)))
    return "; ".join(parts)


def bare_cpu(count=3):
    """The CPU seconds of one more run of the floor's ``count`` Pythons."""
    before = children_cpu()
    bare_processes(count)
    return children_cpu() - before


def cpu_breakdown():
    """Where the CPU of one more run of each goes (not timed): the floor's
    three Pythons; tfrun's process, by thread (its main thread imports and
    starts the run: most of it), and its tasks."""
    floor = bare_cpu()
    user, system, tasks, by_thread = tfrun_cpu_by_thread()
    print("CPU, one more run of each (not timed): floor %.2f s; tfrun: its process %.2f s "
          "(user %.2f, system %.2f), its tasks %.2f s" % (floor, user + system, user, system,
                                                          tasks))
    print("  its threads: %s" % thread_shares(by_thread))


def tfrun_true(extra_env=None, options=SMALL_CLUSTER, timeout=120):
    """``tfrun OPTIONS -- true`` (``-w 2 -s 1``) from start to exit."""
    started = time.monotonic()
    with tfrun_process(extra_env, options, subprocess.PIPE) as proc:
        _, errors = proc.communicate(timeout=timeout)
        took = time.monotonic() - started
    if proc.returncode:
        raise RuntimeError("tfrun failed: %s" % errors[-2000:].decode(errors="replace"))
    return took


def compare(rounds, floor, contenders, target):
    """``floor`` and ``contenders`` are (name, callable returning seconds);
    each round runs them all, interleaved, so machine noise hits all alike."""
    times = {name: [] for name, _ in [floor] + contenders}
    for _ in range(rounds):
        for name, measure in [floor] + contenders:
            times[name].append(measure())
    width = max(len(name) for name in times) + 1
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print("%s %s  median %.2f s  best %.2f s" % ((name + ":").ljust(width), " ".join(
            "%.2f" % x for x in values), medians[name], min(values)))
    for name, _ in contenders:
        print("ratio %s / floor: %.2f of the medians, %.2f of the best (target <= %s)"
              % (name, medians[name] / medians[floor[0]],
                 min(times[name]) / min(times[floor[0]]), target))
    return medians


def pythonpath_with(first):
    """``$PYTHONPATH`` with ``first`` before what it holds: tfmesos' own
    needs may lie only there (a machine without them installed)."""
    return os.pathsep.join(
        [first] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def with_bytecode():
    """A copy of tfmesos compiled to bytecode, first on PYTHONPATH for every
    process of the benchmark: as an installed package has its .pyc files,
    also where PYTHONDONTWRITEBYTECODE keeps Python from writing them (then
    every start compiles tfmesos' sources anew). Copies this checkout's
    tfmesos, installed or not. Returns the copy's folder."""
    import compileall

    sys.path.insert(0, os.path.dirname(HERE))

    import mesos_local
    import tfmesos

    copy = tempfile.mkdtemp(prefix="tfmesos-bytecode-")
    for package in (tfmesos, mesos_local):
        target = os.path.join(copy, package.__name__)
        shutil.copytree(os.path.dirname(package.__file__), target,
                        ignore=shutil.ignore_patterns("__pycache__"))
        compileall.compile_dir(target, quiet=1)
    os.environ["PYTHONPATH"] = pythonpath_with(copy)
    return copy


def how_tfmesos_loads(bytecode):
    import importlib.util

    import tfmesos

    if bytecode:
        return "from bytecode compiled first"
    where = os.path.dirname(tfmesos.__file__)
    sources = [os.path.join(folder, name) for folder, _, names in os.walk(where)
               for name in names if name.endswith(".py")]
    stale = [path for path in sources
             if not os.path.exists(importlib.util.cache_from_source(path))
             or os.path.getmtime(importlib.util.cache_from_source(path))
             < os.path.getmtime(path)]
    if not stale:
        return "from its bytecode (%s, as pip installs it)" % where
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return ("compiled from source at every start (%s: %d of %d modules have no bytecode)"
                % (where, len(stale), len(sources)))
    return "with Python's bytecode cache (%s)" % where


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tensorflow", action="store_true",
                        help="TensorFlow servers instead of 'true' and bare processes")
    parser.add_argument("--bytecode", action="store_true",
                        help="tfmesos compiled to bytecode first (as installed), also under "
                        "PYTHONDONTWRITEBYTECODE")
    args = parser.parse_args()
    cache = with_bytecode() if args.bytecode else None
    print("Python %s; tfmesos %s" % (sys.version.split()[0], how_tfmesos_loads(args.bytecode)))
    if args.tensorflow:
        compare(args.rounds, ("by hand (floor)", by_hand), [("tfrun", with_tfrun)], 1.2)
    else:
        floor = "3 bare pythons connecting to a socket (floor)"
        medians = compare(args.rounds, (floor, bare_processes),
                          [("tfrun -w 2 -s 1 -- true", tfrun_true),
                           ("the same, tasks exec'd as a Mesos agent does "
                            "(TFMESOS_WARM_TASKS=0)",
                            lambda: tfrun_true({"TFMESOS_WARM_TASKS": "0"}))], 1.5)
        goals.report("tfrun -w 2 -s 1 -- true / 3 bare Pythons%s"
                     % (" (bytecode)" if args.bytecode else " (compiled at start)"),
                     medians["tfrun -w 2 -s 1 -- true"] / medians[floor], 1.5)
        cpu_breakdown()
    if cache:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
