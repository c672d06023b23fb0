"""What identifies a task entry's process: the module every Mesos task of
a run executes (``python -m tfmesos.task``), or, on the embedded master, the
pre-started interpreter that became the task (``python -m
tfmesos.task.warm FD``): /proc shows it as it was started, so its command
line and environment are not the task's; its working directory is the
task's sandbox. The TensorFlow log filter of a task entry, started with
``-c "... tfmesos.task.quiet ..."``, carries the name too."""

import os

TASK_ENTRY = "tfmesos.task"

# The embedded master's pre-started task interpreter (``python -m
# tfmesos.task.warm FD``): idle, or the task entry it became.
WARM_ENTRY = "tfmesos.task.warm"


def is_task_entry(cmdline):
    """Whether ``cmdline`` (words joined by spaces) runs the task entry
    itself, ``python [-S] -m tfmesos.task`` (or its old name), or is a
    pre-started interpreter (idle ones too: ``task_id_of`` tells them
    apart); not the TensorFlow log filter (``-c ...tfmesos.task.quiet...``)."""
    words = cmdline.split()
    return any(first == "-m" and second in (TASK_ENTRY, WARM_ENTRY, "tfmesos.server")
               for first, second in zip(words, words[1:]))


def task_id_of(pid, environ=None):
    """The task id of process ``pid``: its environment's ``TFMESOS_TASK_ID``
    (``environ``: its /proc environ entries, when read already), else the
    sandbox it works in (a task entry started warm: the agent's
    ``.../executors/TASK_ID/runs/CONTAINER_ID``, as Mesos lays out a command
    task's); None for no task's."""
    if environ is None:
        try:
            with open("/proc/%s/environ" % pid, "rb") as handle:
                environ = handle.read().split(b"\0")
        except OSError:
            return None
    for entry in environ:
        if entry.startswith(b"TFMESOS_TASK_ID="):
            return entry.split(b"=", 1)[1].decode()
    try:
        cwd = os.readlink("/proc/%s/cwd" % pid)
    except OSError:
        return None
    runs = os.path.dirname(cwd)
    name = os.path.basename(os.path.dirname(runs))
    if os.path.basename(runs) != "runs" or not name.startswith("tfmesos."):
        return None
    return name


def scheduler_pids(run_id):
    """Pids of the scheduler tasks of a detached run ``run_id`` (``python -m
    tfmesos.cli.detached_scheduler``, its ``TFMESOS_RUN_ID`` the run's)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmdline = handle.read()
            with open("/proc/%s/environ" % pid, "rb") as handle:
                environ = handle.read().split(b"\0")
        except OSError:
            continue
        if b"tfmesos.cli.detached_scheduler" in cmdline \
                and ("TFMESOS_RUN_ID=%s" % run_id).encode() in environ:
            found.append(int(pid))
    return found


def alive(pid):
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def zombie(pid):
    """True while ``pid`` is an exited child of this process not reaped yet."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


# For a test script (its text): fork a child that writes to the file
# ``said`` and ends at once with sys.exit (its finally blocks and atexit
# hooks run, as a forked worker's do), then wait for it: prints "the child
# ended", or "the child hung" after 120 s (a bound on a hang, not a timing).
FORK_A_CHILD_THAT_EXITS = '''
def fork_a_child_that_exits(said):
    import os, sys, time
    pid = os.fork()
    if pid == 0:
        fd = os.open(said, os.O_WRONLY | os.O_CREAT)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.exit(0)
    deadline = time.monotonic() + 120
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            print("the child hung", flush=True)
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return
        time.sleep(0.1)
    print("the child ended", flush=True)
'''
