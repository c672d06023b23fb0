"""A stand-in for the task entry, for tests of warm task starts: it prints,
as one JSON line on its stdout, what its interpreter's start decided (hash
seed, encodings, the coerced locale) and what /proc shows of it.

``python [-S] -m warm_probe``: as an exec'd task (``ProcessRunner``).
``python [-S] -m warm_probe FD``: as a warm task interpreter
(``tfmesos.task.warm``) whose task entry is this report: the tests start
it in place of ``tfmesos.task.warm`` (``warm_runner.ENTRY_MODULE``)."""

import json
import locale
import os
import sys


def _proc(name):
    with open("/proc/self/%s" % name, "rb") as handle:
        return [os.fsdecode(word) for word in handle.read().split(b"\0") if word]


def report():
    sys.stdout.write(json.dumps({
        "hash": hash("x"),
        "stdout": sys.stdout.encoding,
        "stderr": sys.stderr.encoding,
        "filesystem": sys.getfilesystemencoding(),
        "preferred": locale.getpreferredencoding(),
        "utf8_mode": sys.flags.utf8_mode,
        "LC_CTYPE": os.environ.get("LC_CTYPE"),
        "environ": sorted(os.environ),
        "cwd": os.getcwd(),
        "sandbox": os.environ.get("MESOS_SANDBOX"),
        "path0": sys.path[0],
        "argv": sys.argv,
        "proc_cmdline": _proc("cmdline"),
        "proc_environ": sorted(entry.split("=", 1)[0] for entry in _proc("environ")),
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "sid": os.getsid(0),
        "ppid": os.getppid(),
        "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        "version": list(sys.version_info[:2]),
    }) + "\n")
    sys.stdout.flush()
    os._exit(0)     # as the task entry leaves (entry.run)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        from tfmesos.task import entry, warm

        entry.run = report
        warm.serve(int(sys.argv[1]))
        os._exit(0)
    report()
