"""Finding and killing a task's processes, as a failing machine would. Only
processes of this test session (its leak marker, ``conftest.MARKER``) are
considered: other sessions on the machine may run tasks of the same names."""

import os
import signal
import time

from conftest import MARKER
from processes import TASK_ENTRY, is_task_entry, task_id_of


def _read(pid, name):
    with open("/proc/%s/%s" % (pid, name), "rb") as handle:
        return handle.read()


def _task_of(pid, environ):
    """(job, index, attempt) of a tfmesos task's process, else None."""
    task_id = task_id_of(pid, environ)
    parts = task_id.split(".") if task_id else []
    if len(parts) == 5 and parts[0] == "tfmesos":
        return parts[2], int(parts[3]), int(parts[4])
    return None


def task_processes(job, index, command=TASK_ENTRY):
    """{pid: attempt} of this session's live processes of task ``job:index``
    (its ``TFMESOS_TASK_ID``, or its sandbox: ``processes.task_id_of``)
    whose command line contains ``command`` (the task entry: is exactly it,
    not its TensorFlow log filter); not the guards of replica commands
    (forks of the task entry: its command line, its environment)."""
    session = ("%s=%s" % (MARKER, os.environ[MARKER])).encode()
    found = {}
    cmdlines = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            environ = _read(pid, "environ").split(b"\0")
            cmdline = _read(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace")
            state = _read(pid, "stat").rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        task = _task_of(pid, environ) if session in environ else None
        matches = is_task_entry(cmdline) if command == TASK_ENTRY else command in cmdline
        if task and task[:2] == (job, index) and matches and state != b"Z":
            found[int(pid)] = task[2]
            cmdlines[int(pid)] = cmdline
    return {pid: attempt for pid, attempt in found.items()
            if cmdlines.get(_parent(pid)) != cmdlines[pid]}


def _parent(pid):
    try:
        return int(_read(pid, "stat").rsplit(b")", 1)[1].split()[1])
    except OSError:
        return None


def kill_task(job, index, command=TASK_ENTRY, timeout=30):
    """SIGKILL the process of task ``job:index`` (see ``task_processes``; of
    a shell and its child, or a guard and its command, the innermost);
    returns (pid, attempt)."""
    deadline = time.monotonic() + timeout
    while True:
        found = task_processes(job, index, command)
        parents = {_parent(pid) for pid in found}
        found = {pid: attempt for pid, attempt in found.items() if pid not in parents}
        if len(found) == 1:
            [(pid, attempt)] = found.items()
            os.kill(pid, signal.SIGKILL)
            return pid, attempt
        if time.monotonic() > deadline:
            raise AssertionError("expected one process of %s:%d (%s), found %s"
                                 % (job, index, command, found))
        time.sleep(0.1)
