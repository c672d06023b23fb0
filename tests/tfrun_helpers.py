"""Running tfrun as a user would: a subprocess, output captured, always reaped."""

import contextlib
import fcntl
import json
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import threading
import time
import warnings

import pytest
from conftest import marked_processes
from processes import TASK_ENTRY
from waiting import wait_until

from tfmesos.protocol import hostport

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELLO = os.path.join(REPO, "examples", "replica_hello.py")
HELLO_ARGS = ["--ps_hosts", "{ps_hosts}", "--worker_hosts", "{worker_hosts}",
              "--job_name", "{job_name}", "--task_index", "{task_index}"]
SMALL = ["-Cw", "0.2", "-Mw", "128", "-Cs", "0.2", "-Ms", "128", "-Cc", "0.2", "-Mc", "128"]


# What a plain run (replica mode, the embedded master, no failure) has no
# use for: imported where their rare paths need them, never at a module's
# top on the run's path.
RARE_PATHS = ["difflib",                                     # a usage error's suggestion
              "encodings.idna", "stringprep", "unicodedata",   # a host name's idna codec
              "tfmesos.cli.tfrun_flags", "tfmesos.cli.tfrun_detached", "tfmesos.core.detached",
              "tfmesos.record.report", "tfmesos.record.takeover_files", "tfmesos.core.spec_codec",
              "tfmesos.record.mlflow_logger", "mlflow", "tfmesos.cli.progress", "tensorboard",
              "tfmesos.ship.shipping", "tfmesos.ship.bundle", "tfmesos.ship.bundle_server",
              "tfmesos.mesos.zookeeper", "kazoo", "tfmesos.mesos.master_reads",
              "mesos_local.containerizer.docker_runner", "mesos_local.containerizer.docker_engine",
              "mesos_local.containerizer.container_options",
              "docker", "mesos_local.api.proto_parser", "google.protobuf", "tensorflow",
              "urllib.request", "tarfile", "tfmesos.backends.remote"]


def free_port():
    return hostport.free_port("127.0.0.1")


def marked_tasks():
    """``tfmesos local-master`` options that give its tasks the session's leak
    marker (a standalone master gives tasks a clean environment)."""
    marker = "TFMESOS_TEST_SESSION"
    return ["--executor-environment-variables", json.dumps({marker: os.environ[marker]})]


@contextlib.contextmanager
def background_master(argv, log, cwd):
    """A ``tfmesos local-master`` command line ``argv`` run in the background
    with its tasks marked as this session's (``marked_tasks``), one agent
    offering this test lane's ports (conftest), its stderr
    in the file ``log``; yields once it says it listens. SIGTERMed at the
    block's end, which stops every task it runs (killed after 60 s)."""
    ports = os.environ.get("TFMESOS_LOCAL_PORTS")   # this lane's (conftest)
    lane = ["--agent", "ports=" + ports] if ports else []
    with open(log, "w") as handle:
        master = subprocess.Popen(list(argv) + marked_tasks() + lane, stdout=subprocess.PIPE,
                                  stderr=handle, text=True, cwd=cwd)
    try:
        assert "listening on" in master.stdout.readline(), open(log).read()[-3000:]
        yield master
    finally:
        terminated(master, 60)
        master.stdout.close()


def tfrun_argv(*args):
    return [sys.executable, "-m", "tfmesos.cli.tfrun", *args]


def run_tfrun(*args, timeout=120, env=None):
    """Run tfrun to completion; returns CompletedProcess (text)."""
    full_env = dict(os.environ, MESOS_MASTER="", **(env or {}))
    with start_tfrun(*args, env=full_env) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail("tfrun %s did not finish within %d s" % (" ".join(args), timeout))
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def finished_record(run_dir):
    """The run.json of the run directory ``run_dir`` once it says the run
    finished, else None (not written yet, being replaced, still running)."""
    try:
        with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    return record if record["timings"].get("finished") else None


@contextlib.contextmanager
def start_tfrun(*args, env=None):
    proc = subprocess.Popen(tfrun_argv(*args), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=env or dict(os.environ, MESOS_MASTER=""))
    try:
        yield proc
    finally:
        if proc.poll() is None:
            terminated(proc, 30)


def terminated(proc, grace):
    """SIGTERM ``proc`` (which stops what it started), SIGKILL it after
    ``grace`` seconds; reaped either way."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def exited_or_dumped(proc, timeout):
    """Wait (``timeout`` s) for a ``start_tfrun(..., env=dumping_env())``
    process to exit; if it does not, SIGABRT makes Python's faulthandler
    write every thread's stack to its stderr, and the test fails with that
    (where it hung, not only that it did)."""
    try:
        proc.wait(timeout)
        return
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(signal.SIGABRT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    dump = proc.stderr.read()
    raise AssertionError("tfrun did not exit within %s s of the signal; its threads:\n%s"
                         % (timeout, dump[-12000:]))


def dumping_env():
    """tfrun's environment for ``exited_or_dumped`` (its faulthandler on)."""
    return dict(os.environ, MESOS_MASTER="", PYTHONFAULTHANDLER="1")


def wait_for_line(stream, needle, timeout):
    """Read lines from ``stream`` until one contains ``needle``; returns all read.
    (A reader thread, not select(): a buffered stream may hold several lines
    after one read, which select() would not report.)"""
    seen, found = [], threading.Event()

    def read():
        for line in iter(stream.readline, ""):
            seen.append(line)
            if needle in line:
                found.set()
                return
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if found.is_set():
        return seen
    raise AssertionError("%r not seen within %s s; got: %s" % (needle, timeout, "".join(seen)))


def finish_reading(proc, timeout):
    """(stdout, stderr) of ``proc`` to their ends, once it exited. Unlike
    ``communicate()``, which reads the pipes' descriptors, it reads through
    the text streams: lines a ``wait_for_line`` read took into the stream's
    buffer beyond its needle are not lost."""
    texts = {}

    def read(name, stream):
        texts[name] = stream.read()

    readers = [threading.Thread(target=read, args=(name, stream), daemon=True)
               for name, stream in (("out", proc.stdout), ("err", proc.stderr))]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pytest.fail("tfrun did not finish within %d s" % timeout)
    for reader in readers:
        reader.join(timeout)
    return texts.get("out", ""), texts.get("err", "")


def assert_no_task_processes(timeout=30):
    """No task entry point or ``sleep`` of this session outlives its run."""
    left = []

    def none_left():
        left[:] = [p for p in marked_processes() if TASK_ENTRY in p[1] or "sleep" in p[1]]
        return not left

    wait_until(none_left, timeout, interval=0.2,
               message=lambda: "task processes survived: %s" % left)


@contextlib.contextmanager
def reaped(proc):
    """``proc`` killed and reaped at the block's end if it still runs: a
    failed wait or assertion inside leaves nothing behind."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def release(flag, proc, timeout=120):
    """Write ``flag`` (what a run's tasks wait for to end) once ``proc``
    (``tfmesos attach``) says it follows the run, and read it to its end:
    (out, err). Released earlier, a run can end before a loaded machine
    has started attach, which then finds it over and says only that."""
    said = []
    for line in iter(proc.stderr.readline, ""):   # its end: pytest-timeout's
        said.append(line)
        if "tfmesos attach: following run " in line:
            break
    flag.write_text("")
    # Not communicate(): it reads the pipes themselves, and what readline
    # had taken into proc.stderr's buffer past that line was lost (a
    # relaunch said while the test waited: never seen).
    read: dict = {}
    readers = [threading.Thread(target=lambda name=name, stream=stream: read.update(
        {name: stream.read()}), daemon=True)
        for name, stream in (("out", proc.stdout), ("err", proc.stderr))]
    for reader in readers:
        reader.start()
    proc.wait(timeout)    # TimeoutExpired: attach did not end with the run
    for reader in readers:
        reader.join(timeout)
    return read.get("out", ""), "".join(said) + read.get("err", "")


def only_metrics_warnings():
    """In a ``catch_warnings(record=True)`` block: record every
    ``MetricsWarning`` (a ``RuntimeWarning``: whichever module reload made
    it) and nothing else, such as a ``ResourceWarning`` for a file another
    test left open that the garbage collector closes just then."""
    warnings.simplefilter("ignore")
    warnings.simplefilter("always", RuntimeWarning)


def _controlling_terminal():
    """In the child: a session of its own whose controlling terminal is its
    stdin (a pseudo-terminal's slave), as a login shell's commands have."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def hung_up_once_ready(argv, env, ready=b"cluster ready", timeout=60):
    """Run ``argv`` on a pseudo-terminal that is its controlling terminal,
    close the terminal (the ssh session gone, the window closed: the kernel
    hangs up its session) once it printed ``ready``; its exit status."""
    master, slave = pty.openpty()
    with reaped(subprocess.Popen(argv, cwd=REPO, stdin=slave, stdout=slave, stderr=slave,
                                 preexec_fn=_controlling_terminal, env=env)) as proc:
        os.close(slave)
        try:
            said, deadline = b"", time.monotonic() + timeout
            while ready not in said and time.monotonic() < deadline:
                if select.select([master], [], [], 1)[0]:
                    try:
                        said += os.read(master, 4096)
                    except OSError:   # EIO: it ended, and the terminal with it
                        break
            assert ready in said, said
        finally:
            os.close(master)   # the terminal goes away
        return proc.wait(60)
