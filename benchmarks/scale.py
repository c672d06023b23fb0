"""Many tasks on one machine: ``tfrun -w N-1 -s 1 -- true`` on the
embedded master against N bare Pythons that connect to a socket and exit,
both measured in this one run (goal: <= 1.2 times, exec'd as a Mesos agent
does, on a machine with 16 cores; the warm path at or below the floor).

Every task asks for 0.01 cpus and 64 MB, so that N tasks fit any machine's
offer; N interpreters start either way, so on 2 cores the ratio says more
about the scheduler's share of the CPUs than on 16.

``--bytecode``: tfmesos compiled first and put on PYTHONPATH, as
``pip install .`` installs it (``startup.with_bytecode``): plain tasks then
start without ``site`` (``-S``), as they do from an installed tfmesos; from
an editable install's finder every task needs ``site``.

    python benchmarks/scale.py [--tasks 210] [--rounds 3] [--bytecode]
"""

import argparse
import os
import shutil
import statistics

import goals  # benchmarks/goals.py: this script's folder is first on sys.path
import startup


def options(count):
    return ("-q", "-w", str(count - 1), "-s", "1", "-Cw", "0.01", "-Cs", "0.01", "-Mw", "64",
            "-Ms", "64")


def tfrun_true(count, warm):
    return startup.tfrun_true({"TFMESOS_WARM_TASKS": "1" if warm else "0"}, timeout=900,
                              options=options(count))


def cpu_breakdown(count):
    """Where the CPU goes, one more run of each (not timed): on many cores
    tfrun's own process is the part that does not spread (its threads
    share one interpreter), and the tasks' CPU against the floor's says
    what each task costs beyond a bare Python. tfrun's own CPU by thread
    (``thread_cpu.py``: the main thread, the embedded master's HTTP
    handlers, its agent's task threads, the rendezvous' connections, the
    driver's) says which of its parts grew when it grows."""
    floor = startup.bare_cpu(count)
    print("CPU, one more run of each (not timed): floor %.2f s (%.0f ms a Python)"
          % (floor, 1e3 * floor / count))
    for warm in (False, True):
        user, system, tasks, by_thread = startup.tfrun_cpu_by_thread(
            {"TFMESOS_WARM_TASKS": "1" if warm else "0"}, options(count), timeout=900)
        print("  tfrun, %s: its process %.2f s (user %.2f, system %.2f), its tasks %.2f s "
              "(%.0f ms a task, %.2fx a bare Python)" % (
                  "warm task starts" if warm else "exec'd", user + system, user, system, tasks,
                  1e3 * tasks / count, tasks / floor if floor else float("nan")))
        print("    its threads: %s" % startup.thread_shares(by_thread))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=210)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bytecode", action="store_true",
                        help="tfmesos compiled to bytecode first, on PYTHONPATH (as installed)")
    args = parser.parse_args()
    cache = startup.with_bytecode() if args.bytecode else None
    print("%d tasks on %d cores; tfmesos %s" % (args.tasks, os.cpu_count(),
                                               startup.how_tfmesos_loads(args.bytecode)))
    contenders = [("%d bare pythons connecting to a socket (floor)" % args.tasks,
                   lambda: startup.bare_processes(args.tasks)),
                  ("tfrun, tasks exec'd as a Mesos agent does", lambda: tfrun_true(
                      args.tasks, warm=False)),
                  ("tfrun, warm task starts", lambda: tfrun_true(args.tasks, warm=True))]
    times = {name: [] for name, _ in contenders}
    for _ in range(args.rounds):
        for name, measure in contenders:
            times[name].append(measure())
    floor = statistics.median(times[contenders[0][0]])
    width = max(len(name) for name in times) + 1
    for name, values in times.items():
        print("%s %s  median %.2f s" % ((name + ":").ljust(width),
                                        " ".join("%.2f" % x for x in values),
                                        statistics.median(values)))
    for (name, _), goal in zip(contenders[1:], (1.2, 1.0)):
        goals.report("%d tasks: %s / floor (%d cores)" % (args.tasks, name[len("tfrun, "):],
                                                           os.cpu_count()),
                     statistics.median(times[name]) / floor, goal)
    cpu_breakdown(args.tasks)
    if cache:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
