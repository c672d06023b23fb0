"""Bad input, one row each (issue 26, items 5 and 7): numbers that are not
finite or beyond their documented maxima, names that cannot work, a
``$DOCKER_HOST`` nobody can read, a reader of the output that went away,
a run whose tfrun is gone, a symbolic link among the runs, a crafted
run.json. Each is answered within seconds with its exit status and one
line on stderr (none for a closed pipe), never a traceback, and leaves
nothing behind: no process, no cgroup of the process, nothing in its
temporary directory, no run directory for a usage error.

Every command runs as a user runs it (a subprocess of this checkout), in
a directory of its own with ``TMPDIR`` and ``TFMESOS_RUNS_DIR`` of its own."""

import dataclasses
import glob
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import traceback
import types
from typing import Callable, Optional

import pytest
from conftest import marked_processes
from processes import TASK_ENTRY
from run_dirs import attempt, write_run
from tfrun_helpers import REPO, run_tfrun
from waiting import wait_until

from tfmesos.exceptions import SpecError, TFMesosError
from tfmesos.record import liveness

BOUND = 30.0   # seconds: generous on a loaded machine; what this catches hangs for good
PROGRAMS = {"tfrun": ["-m", "tfmesos.cli.tfrun"], "tfmesos": ["-m", "tfmesos.cli.main"],
            "mesos-local": ["-m", "mesos_local"]}
TFRUN_BASE = ["-s", "0", "-Cw", "0.1", "-Mw", "64"]   # a run that would start at once
SIGPIPE_EXIT = 141
CGROUPS = ("/sys/fs/cgroup/*/mesos_local/*", "/sys/fs/cgroup/mesos_local/*")


@dataclasses.dataclass
class Row:
    """``program args`` exits ``code`` with ``message`` in its one line on
    stderr (None: stderr says nothing; ``lines`` None: any lines, no
    traceback). ``setup(place)`` makes what the command reads and returns
    the values ``args`` name (``{runs}``, ``{run}``); ``check(place,
    result)`` looks at what it did."""

    id: str
    program: str
    args: list
    code: int
    message: Optional[str]
    env: dict = dataclasses.field(default_factory=dict)
    setup: Optional[Callable] = None
    check: Optional[Callable] = None
    stdout_closed: bool = False
    lines: Optional[int] = 1
    needs_docker: bool = False


# -- what some rows read ----------------------------------------------------------

def finished_run(place):
    """A finished run with a few lines of output under the row's runs directory."""
    run = write_run(place["runs"], "aaaa0001")
    with open(os.path.join(run, "worker.0.stdout"), "w") as handle:
        handle.write("".join("line %d\n" % i for i in range(2000)))
    open(os.path.join(run, "worker.0.stderr"), "w").close()
    return {"run": run}


def runs_others_may_write(place):
    """The row's runs directory, writable by every user (no sticky bit)."""
    os.chmod(place["runs"], 0o777)
    return {}


def deep_hooks(place):
    """An --extra_config file nested past the JSON parser's depth."""
    path = os.path.join(place["outside"], "hooks.json")
    with open(path, "w") as handle:
        handle.write("[" * 100000 + "]" * 100000)
    return {"hooks": path}


def hooks_fifo(place):
    """An --extra_config FIFO nobody writes: read, it would wait for good."""
    path = os.path.join(place["outside"], "hooks.fifo")
    os.mkfifo(path)
    return {"hooks": path}


def big_hooks(place):
    """An --extra_config file past its bound (1 MB): blanks, valid JSON's start."""
    path = os.path.join(place["outside"], "hooks.json")
    with open(path, "w") as handle:
        handle.write(" " * 1000001 + "{}")
    return {"hooks": path}


def keys_under_a_file(place):
    """A file where the keys directory's parent would be: none can be made there."""
    open(os.path.join(place["outside"], "file"), "w").close()
    return {}


def dead_process():
    """The scheduler record of a process that ran here and is gone."""
    child = subprocess.Popen(["true"])
    child.wait()
    return dataclasses.replace(liveness.this_process(), pid=child.pid, start_ticks=1)


def run_of_a_gone_tfrun(place):
    """run.json says running, worker:0 is running; the tfrun that wrote it is gone."""
    tasks = {"worker:0": [attempt("worker:0")]}
    run = write_run(place["runs"], "dead0001", status="running", exit_code=None, tasks=tasks,
                    scheduler=dead_process())
    with open(os.path.join(run, "worker.0.stdout"), "w") as handle:
        handle.write("the last words\n")
    return {"run": run}


def runs_with_a_link(place):
    """A finished run and, newer, a symbolic link to a run directory elsewhere."""
    write_run(place["runs"], "real0001", start=0)
    target = write_run(place["outside"], "ext00001", start=10)
    os.symlink(target, os.path.join(place["runs"], "linked-ext00001"))
    return {"target": target}


def check_link_left_alone(place, result):
    assert os.listdir(place["runs"]) == ["linked-ext00001"]
    assert os.path.isfile(os.path.join(place["outside"], "tfrun-ext00001", "run.json"))
    assert result.stdout.startswith("removed 1 run from ")


def crafted_logs(name):
    """A run whose run.json names ``name`` as worker:0's stdout log."""
    def setup(place):
        crafted = attempt("worker:0", end=1.0)
        crafted.logs.stdout = name
        return {"run": write_run(place["runs"], "evil0001", tasks={"worker:0": [crafted]})}
    return setup


def check_report_links(place, result):
    [run] = os.listdir(place["runs"])
    with open(os.path.join(place["runs"], run, "report.html"), encoding="utf-8") as handle:
        page = handle.read()
    assert 'href="javascript' not in page and 'href="worker.0.stderr"' in page


def planted_report_link(place):
    """A finished run whose report.html.tmp is a link to a file elsewhere."""
    values = finished_run(place)
    victim = os.path.join(place["outside"], "victim")
    with open(victim, "w") as handle:
        handle.write("untouched\n")
    os.symlink(victim, os.path.join(values["run"], "report.html.tmp"))
    return values


def check_link_not_written_through(place, result):
    with open(os.path.join(place["outside"], "victim")) as handle:
        assert handle.read() == "untouched\n"
    [run] = os.listdir(place["runs"])
    assert os.path.isfile(os.path.join(place["runs"], run, "report.html"))


def check_tfrun_stopped(place, result):
    [run] = os.listdir(place["runs"])
    assert "went away" in result.stderr
    with open(os.path.join(place["runs"], run, "run.json"), encoding="utf-8") as handle:
        outcome = json.load(handle)["outcome"]
    assert (outcome["status"], outcome["exit_code"]) == ("interrupted", SIGPIPE_EXIT)


# -- the table --------------------------------------------------------------------

def tfrun(id, args, code, message, **extra):
    return Row(id, "tfrun", TFRUN_BASE + args + ["--", "true"], code, message, **extra)


ROWS = [
    # tfrun: numbers
    tfrun("job-count-huge", ["--job", "worker:99999999999999999999"], 2,
          "num (-w or --job worker:COUNT) must be a whole number from 1 to 10000 (tasks per "
          "run)"),
    tfrun("workers-100000", ["-w", "100000"], 2,
          "argument -w/--nworker: must be a whole number from 0 to 10000, got 100000"),
    tfrun("local-tasks-beyond-the-embedded-masters-bound", ["-w", "1001"], 2,
          "the cluster has 1001 tasks but the embedded master runs at most 1000"),
    tfrun("launch-timeout-nan", ["--launch-timeout", "nan"], 2,
          "argument --launch-timeout: must be a number above 0, at most 2592000, got nan"),
    tfrun("connect-timeout-inf", ["--connect-timeout", "inf"], 2, "argument --connect-timeout"),
    tfrun("restart-backoff-nan", ["--restart-backoff", "nan"], 2, "argument --restart-backoff"),
    # options for another one, given without it: they would do nothing
    *[tfrun("%s-without-%s" % (option.strip("-"), needs.split()[0].strip("-")),
            [option, value, *also], 2,
            "tfrun: error: %s is for runs with %s: add it, or drop %s" % (option, needs, option))
      for option, value, needs, also in (
          ("--scheduler-cpus", "1", "--detach", []), ("--scheduler-mem", "64", "--detach", []),
          ("--restart-on", "failure", "--max-restarts N", []),
          ("--restart-backoff", "5", "--max-restarts N", ["--max-restarts", "0"]),
          ("--sticky-timeout", "5", "--sticky-workers", ["-c"]))],
    # a name tfmesos or Mesos sets in every task: tfmesos' value replaced
    # the user's without a word (-E TFMESOS_RUN_ID=mine: the task saw the
    # run's id), MESOS_SANDBOX=/x failed three launches ("cannot enter the
    # sandbox /x")
    tfrun("env-a-name-tfmesos-sets", ["-E", "TFMESOS_RUN_ID=mine"], 2,
          "tfrun: error: -E: TFMESOS_RUN_ID is a name tfmesos sets in every task: give your "
          "variable another name"),
    tfrun("env-a-name-mesos-sets", ["-E", "MESOS_SANDBOX=/x"], 2,
          "tfrun: error: -E: MESOS_SANDBOX is a name Mesos sets in every task: give your "
          "variable another name"),
    tfrun("ship-max-size-without-ship", ["--ship-max-size", "5"], 2,
          "tfrun: error: --ship-max-size needs --ship"),
    tfrun("sticky-timeout-1e400", ["-c", "--sticky-workers", "--sticky-timeout", "1e400"], 2,
          "argument --sticky-timeout"),
    tfrun("max-attempts-huge", ["--max-attempts", "99999999999"], 2,
          "argument --max-attempts: must be a whole number from 1 to 1000"),
    tfrun("max-restarts-huge", ["--max-restarts", "99999999999"], 2, "argument --max-restarts"),
    tfrun("cpus-inf", ["-Cw", "inf"], 2, "argument -Cw: must be a number above 0"),
    tfrun("mem-nan", ["-Mw", "nan"], 2, "argument -Mw: must be a number above 0"),
    tfrun("gpus-huge", ["-Gw", "100000000"], 2, "argument -Gw: must be a whole number from 0 "
          "to 1024"),
    # int() and float() took them: worker:1_0 ran 10 workers (found by a review helper)
    *[tfrun("job-count-%s" % name, ["--job", spec], 2,
            "--job %r: COUNT and GPUS must be integers, CPUS and MEM numbers" % spec)
      for name, spec in (("underscore", "worker:1_0"), ("plus", "worker:+1"),
                         ("cpus-underscore", "worker:1:0_5"), ("gpus-spaces", "worker:1:1:64: 1"))],
    tfrun("job-cpus-nan", ["--job", "worker:1:nan"], 2, "job 'worker': cpus (-Cw or --job "
          "worker:COUNT:CPUS) must be a number above 0"),
    tfrun("job-mem-inf", ["--job", "worker:1:1:inf"], 2,
          "job 'worker': mem (-Mw or --job worker:COUNT:CPUS:MEM) must be"),
    tfrun("ship-max-size-nan", ["--ship", "--ship-max-size", "nan"], 2,
          "argument --ship-max-size: must be a number above 0"),
    # tfrun: names and addresses
    tfrun("python-env-url-with-a-space", ["--python-env", "http://a b/env.tar.gz"], 2,
          "a URL cannot hold spaces"),
    tfrun("env-name-with-a-space", ["-E", "A B=1"], 2, "invalid environment variable name"),
    tfrun("advertise-address-malformed", ["--advertise-address", "not an addr"], 2,
          "--advertise-address 'not an addr' is neither an IP address nor a host name"),
    tfrun("name-too-long", ["-n", "x" * 300], 2, "must be at most 200 characters"),
    # launched three times, each '/bin/sh: exec: /nonexistent: not found', then
    # told to "give its full path"
    tfrun("python-that-is-not-here", ["--python", "/nonexistent/python3"], 2,
          "--python /nonexistent/python3: no such program on this machine, whose embedded "
          "master runs the tasks: give an interpreter it has, e.g. --python "),
    tfrun("python-not-on-the-path", ["--python", "python2.1"], 2,
          "--python python2.1: not on the tasks' PATH on this machine"),
    tfrun("run-dir-impossible", ["--run-dir", "/proc/1/x"], 2,
          "--run-dir /proc/1/x: cannot create it"),
    tfrun("runs-dir-others-may-write", [], 2,
          "is writable by others (mode 0777), who could redirect this run's record: use a "
          "directory of your own (--run-dir, $TFMESOS_RUNS_DIR)", setup=runs_others_may_write),
    tfrun("docker-host-unreadable", ["-I", "tfmesos/tfmesos"], 2,
          "DOCKER_HOST='::::' is not a Docker engine's address", env={"DOCKER_HOST": "::::"},
          needs_docker=True),
    # the embedded master's isolation options, with another master, did nothing
    tfrun("no-isolation-with-a-mesos-master", ["-m", "127.0.0.1:1", "--no-isolation"], 2,
          "--no-isolation is for the embedded master (no -m): a Mesos agent isolates its tasks "
          "as its operator set it (--isolation, --cgroups_enable_cfs); drop --no-isolation"),
    tfrun("cfs-with-a-mesos-master", ["-m", "127.0.0.1:1", "--cgroups-enable-cfs"], 2,
          "--cgroups-enable-cfs is for the embedded master (no -m)"),
    # an image name the engine cannot parse failed three launches, "Docker is unavailable"
    tfrun("image-name-not-a-reference", ["-I", "Bad/Image"], 2,
          "-I: 'Bad/Image' is not a Docker image name: [HOST[:PORT]/]NAME[:TAG][@DIGEST]"),
    tfrun("image-digest-too-short", ["-I", "tfmesos/tfmesos@sha256:00"], 2,
          "-I: 'tfmesos/tfmesos@sha256:00' is not a Docker image name"),
    # tfrun: the flags of image tasks, given to a run of plain tasks, did nothing
    tfrun("docker-containerizer-without-an-image", ["-C", "DOCKER"], 2,
          "-C DOCKER is for image tasks, and the run has no image: add -I IMAGE (or set "
          "$DOCKER_IMAGE), or drop -C DOCKER"),
    tfrun("force-pull-without-an-image", ["-f", "-V", "/tmp:/data"], 2,
          "-f and -V are for image tasks, and the run has no image: add -I IMAGE (or set "
          "$DOCKER_IMAGE), or drop -f and -V"),
    # -q hid the status line and the usage table, -v printed the scheduler's lines
    tfrun("quiet-and-verbose", ["-q", "-v"], 2,
          "-q and -v contradict each other: drop one"),
    # --master-scheme is the scheme of masters found through zk:// only
    tfrun("master-scheme-https-on-the-embedded-master", ["--master-scheme", "https"], 2,
          "--master-scheme https is for masters found through zk://, and the master (local) "
          "is none: give an https master as https://HOST:PORT, or drop --master-scheme"),
    tfrun("master-scheme-https-with-a-host-port", ["--master-scheme", "https", "-m",
                                                   "127.0.0.1:1"], 2,
          "--master-scheme https is for masters found through zk://, and the master "
          "(127.0.0.1:1) is none: give an https master as https://HOST:PORT, or drop "
          "--master-scheme"),
    # --ca-bundle and --no-verify are for https masters only (mesos.http_transport)
    tfrun("ca-bundle-on-the-embedded-master", ["--ca-bundle", "/etc/passwd"], 2,
          "--ca-bundle is for https masters, and the master (local) is reached over http: "
          "give the master as https://HOST:PORT, or drop --ca-bundle"),
    tfrun("no-verify-with-a-host-port", ["--no-verify", "-m", "127.0.0.1:1",
                                         "--connect-timeout", "1"], 2,
          "--no-verify is for https masters, and the master (127.0.0.1:1) is reached over "
          "http: give the master as https://HOST:PORT, or drop --no-verify"),
    tfrun("ca-bundle-and-no-verify-with-an-http-url",
          ["--ca-bundle", "/etc/passwd", "--no-verify", "-m", "http://127.0.0.1:1",
           "--connect-timeout", "1"], 2,
          "--ca-bundle and --no-verify are for https masters, and the master "
          "(http://127.0.0.1:1) is reached over http: give the master as https://HOST:PORT, or "
          "drop --ca-bundle and --no-verify"),
    tfrun("ca-bundle-with-zk-masters-over-http",
          ["--ca-bundle", "/etc/passwd", "-m", "zk://127.0.0.1:1/mesos", "--connect-timeout",
           "1"], 2,
          "--ca-bundle is for https masters, and the masters found through zk:// are reached "
          "over http: add --master-scheme https, or drop --ca-bundle"),
    # tfrun: runs that outlive tfrun need a master that outlives it
    tfrun("failover-on-the-embedded-master", ["--failover"], 2,
          "--failover needs a master that outlives tfrun, and the embedded one dies with it"),
    tfrun("detach-on-the-embedded-master", ["--detach", "--ship"], 2,
          "--detach needs a master that outlives tfrun"),
    tfrun("failover-timeout-alone", ["--failover-timeout", "60"], 2,
          "--failover-timeout is for runs that outlive tfrun: add --failover or --detach"),
    tfrun("failover-timeout-nan", ["--failover", "--failover-timeout", "nan"], 2,
          "argument --failover-timeout: must be a number above 0"),
    tfrun("failover-and-detach", ["--failover", "--detach", "-m", "127.0.0.1:1"], 2,
          "--failover and --detach both keep the run going without tfrun"),
    # a keys directory that cannot be written: refused before the launch, as
    # --detach's is (the run went on with a warning, and nothing could attach it)
    tfrun("failover-keys-directory-unwritable", ["--failover", "-m", "127.0.0.1:1"], 2,
          "cannot keep the run's key in {outside}/file/keys (Not a directory): set "
          "$TFMESOS_KEYS_DIR to a directory you can write",
          env={"TFMESOS_KEYS_DIR": "{outside}/file/keys"}, setup=keys_under_a_file),
    tfrun("extra-config-nested-too-deep", ["-e", "{hooks}"], 2, "--extra_config ",
          setup=deep_hooks),
    # -e, as every other file flag: a regular file, not waited on, bounded
    tfrun("extra-config-fifo", ["-e", "{hooks}"], 2,
          "--extra_config {hooks}: a FIFO, not a regular file: give a JSON file",
          setup=hooks_fifo),
    tfrun("extra-config-dev-zero", ["-e", "/dev/zero"], 2,
          "--extra_config /dev/zero: a device or socket, not a regular file: give a JSON file"),
    tfrun("extra-config-directory", ["-e", "{outside}"], 2,
          "--extra_config {outside}: a directory, not a regular file: give a JSON file"),
    tfrun("extra-config-past-its-bound", ["-e", "{hooks}"], 2,
          "--extra_config {hooks}: larger than 1 MB", setup=big_hooks),
    tfrun("extra-config-empty", ["-e", ""], 2, "--extra_config '': give a JSON file's path"),
    # whose output is shown: an index the run has not is refused, as --logs worker:9 is
    tfrun("worker-logs-beyond-the-workers", ["-w", "2", "--worker-logs", "7"], 2,
          "--worker-logs 7: the run has no worker task 7 (workers: 0 to 1)"),
    tfrun("worker-logs-negative", ["-w", "2", "--worker-logs=-1"], 2,
          "--worker-logs -1: the run has no worker task -1 (workers: 0 to 1)"),
    tfrun("worker-logs-without-workers", ["-w", "0", "-c", "--worker-logs", "0"], 2,
          "--worker-logs 0: the run has no workers"),
    tfrun("tensorboard-empty", ["--tensorboard", ""], 2,
          "--tensorboard '': give the LOGDIR TensorBoard reads"),
    tfrun("detach-without-code", ["--detach", "-m", "127.0.0.1:1"], 2,
          "--detach runs the run's scheduler on an agent, which needs the run's code: add "
          "--ship"),
    tfrun("detach-with-mlflow", ["--detach", "--ship", "--mlflow", "-m", "127.0.0.1:1"], 2,
          "--mlflow logs from tfrun's own process, which --detach runs on an agent"),
    # tfrun: placeholders filled only once the cluster is formed (a traceback then)
    # A directory was "no such file", "no such program" though it exists.
    Row("ca-bundle-a-directory", "tfrun", ["--ca-bundle", "/tmp", "-m", "https://127.0.0.1:1"]
        + TFRUN_BASE + ["--", "true"], 2,
        "--ca-bundle /tmp: a directory, not a file of certificates"),
    Row("python-a-directory", "tfrun", ["--python", "/tmp"] + TFRUN_BASE + ["--", "true"], 2,
        "--python /tmp: a directory, not a program on this machine"),
    # Blank: sh -c ran nothing and the run 'succeeded' (an empty one is refused).
    Row("command-of-blanks", "tfrun", TFRUN_BASE + ["--", "   "], 2,
        "replica mode needs a command to run in every task"),
    Row("placeholder-with-a-bad-format", "tfrun", TFRUN_BASE + ["--", "echo {{task_index:zz}}"],
        2, "the command's placeholders cannot be filled in (ValueError: Unknown format code "
        "'z' for object of type 'int')"),
    Row("placeholder-with-an-attribute", "tfrun", TFRUN_BASE + ["--", "echo {{job_name.upper}}"],
        2, "the placeholder {job_name.upper} in the command takes no attribute or index: write "
        "{job_name}"),
    Row("attach-without-a-master", "tfmesos", ["attach", "abcd"], 2, "which master?"),
    Row("attach-an-unknown-run", "tfmesos", ["attach", "abcd", "--master", "127.0.0.1:1"], 1,
        "cannot reach the Mesos master at"),
    # An empty RUN is a usage error, as a missing one is: show and logs said
    # 1, kill and attach went to the master first (1, or 2 for no master).
    *[Row("%s-an-empty-run-id" % " ".join([command, *more[:1]]).replace(" --", "-"),
          "tfmesos", [command, "", *more], 2,
          "argument RUN: '' names no run: give a run's id (tfmesos runs lists them)")
      for command, more in (("show", []), ("logs", []), ("report", []),
                            ("kill", ["--master", "127.0.0.1:1"]),
                            ("attach", ["--master", "127.0.0.1:1"]),
                            ("show", ["--master", "127.0.0.1:1"]),
                            ("logs", ["--master", "127.0.0.1:1"]))],
    Row("runs-of-a-zookeeper-that-refuses", "tfmesos",
        ["runs", "--master", "zk://127.0.0.1:1/mesos"], 1,
        "nothing listens at 127.0.0.1:1, the ZooKeeper of zk://127.0.0.1:1/mesos: check the "
        "zk:// address"),
    # tfrun: the reader of its output goes away: every task stops
    Row("tfrun-output-closed", "tfrun", ["-q", *TFRUN_BASE, "--", "echo hi; sleep 600"],
        SIGPIPE_EXIT, None, stdout_closed=True, lines=None, check=check_tfrun_stopped),
    # ... while the tasks write much: the lines still coming as it stops raise no more
    Row("tfrun-output-closed-amid-much-output", "tfrun",
        ["-q", *TFRUN_BASE, "--", "seq 1 200000; sleep 600"],
        SIGPIPE_EXIT, None, stdout_closed=True, lines=None, check=check_tfrun_stopped),
    # tfmesos
    Row("runs-limit-negative", "tfmesos", ["runs", "-n", "-1"], 2,
        "argument -n/--limit: must be a whole number from 1 to 1000000"),
    Row("runs-limit-huge", "tfmesos", ["runs", "-n", "99999999999"], 2, "argument -n/--limit"),
    Row("runs-limit-and-all", "tfmesos", ["runs", "-n", "1", "--all"], 2,
        "-n and --all both say how many runs to show: give one"),
    Row("runs-of-a-master-and-a-runs-directory", "tfmesos",
        ["runs", "--master", "127.0.0.1:1", "--runs-dir", "{runs}"], 2,
        "--runs-dir names local run directories: it does not go with --master"),
    Row("runs-keep-negative", "tfmesos", ["runs", "--prune", "--keep", "-1"], 2,
        "argument --keep"),
    Row("logs-attempt-zero", "tfmesos", ["logs", "x", "--attempt", "0"], 2, "argument --attempt"),
    Row("local-master-heartbeat-nan", "tfmesos",
        ["local-master", "--port", "0", "--heartbeat-interval", "nan"], 2,
        "argument --heartbeat-interval: must be a number from 0.01 to 86400, got nan"),
    Row("docker-env-name-with-a-space", "tfmesos", ["docker", "-e", "A B=1", "--", "true"], 2,
        "invalid environment entry 'A B=1'"),
    Row("docker-image-name-with-a-space", "tfmesos",
        ["docker", "-i", "tfmesos/tfmesos:bad tag", "--", "true"], 2,
        "'tfmesos/tfmesos:bad tag' is not a Docker image name"),
    Row("docker-docker-host-unreadable", "tfmesos", ["docker", "--", "true"], 2,
        "DOCKER_HOST='::::' is not a Docker engine's address", env={"DOCKER_HOST": "::::"},
        needs_docker=True),
    Row("logs-output-closed", "tfmesos", ["logs", "{run}"], SIGPIPE_EXIT, None,
        setup=finished_run, stdout_closed=True, lines=0),
    Row("runs-output-closed", "tfmesos", ["runs"], SIGPIPE_EXIT, None, setup=finished_run,
        stdout_closed=True, lines=0),
    Row("help-output-closed", "tfmesos", ["--help"], SIGPIPE_EXIT, None, stdout_closed=True,
        lines=0),
    # a run of its tfrun's embedded master: no --master reaches it, and no "which master?"
    Row("kill-a-run-of-an-embedded-master", "tfmesos", ["kill", "aaaa0001"], 2,
        "tfmesos kill: error: run aaaa0001 ran on the embedded master of its tfrun, which no "
        "other process reaches: Ctrl-C there stops the run; tfmesos show aaaa0001 reads its "
        "record", setup=finished_run),
    Row("attach-a-run-directory-of-an-embedded-master", "tfmesos", ["attach", "{run}"], 2,
        "tfmesos attach: error: run aaaa0001 ran on the embedded master of its tfrun, which",
        setup=finished_run),
    Row("kill-a-run-of-a-gone-tfrun-names-its-pid", "tfmesos", ["kill", "dead0001"], 2,
        "run dead0001 ran on the embedded master of its tfrun (pid ", setup=run_of_a_gone_tfrun),
    Row("logs-follow-of-a-gone-tfrun", "tfmesos", ["logs", "{run}", "--follow"], 0,
        "run dead0001 is over: the process that ran it", setup=run_of_a_gone_tfrun),
    Row("prune-with-a-symbolic-link", "tfmesos", ["runs", "--prune", "--keep", "0"], 0,
        "linked-ext00001: a symbolic link (not followed: remove it by hand)",
        setup=runs_with_a_link, check=check_link_left_alone),
    Row("logs-name-out-of-the-run-directory", "tfmesos", ["logs", "{run}", "worker:0"], 1,
        "'../../../../../../etc/hostname' as the stdout log of worker:0, which is not a file "
        "name in the run directory", setup=crafted_logs("../../../../../../etc/hostname")),
    Row("report-link-to-javascript", "tfmesos", ["report", "{run}"], 0, None,
        setup=crafted_logs("javascript:alert(1)"), check=check_report_links, lines=0),
    Row("report-through-a-planted-link", "tfmesos", ["report", "{run}"], 0, None,
        setup=planted_report_link, check=check_link_not_written_through, lines=0),
    # mesos-local
    Row("host-that-names-no-address", "mesos-local",
        ["--port", "0", "--host", "nonexistent.invalid"], 2,
        "--host nonexistent.invalid: no such address here ("),
    Row("agent-gpus-huge", "mesos-local", ["--port", "0", "--agent", "gpus=100000000"], 2,
        "'gpus=100000000': gpus must be from 0 to 1024"),
    Row("agent-cpus-inf", "mesos-local", ["--port", "0", "--agent", "cpus=inf"], 2,
        "'cpus=inf': cpus must be from 0 to"),
    Row("agent-mem-1e400", "mesos-local", ["--port", "0", "--agent", "mem=1e400"], 2,
        "'mem=1e400': mem must be from 0 to"),
    Row("agent-ports-beyond", "mesos-local", ["--port", "0", "--agent", "ports=1-99999"], 2,
        "ports=1-99999 is not a range"),
    Row("agents-100000", "mesos-local", ["--port", "0", "--agents", "100000"], 2,
        "argument --agents: must be a whole number from 1 to 100"),
    Row("cpus-nan", "mesos-local", ["--port", "0", "--cpus", "nan"], 2, "argument --cpus"),
    Row("port-99999", "mesos-local", ["--port", "99999"], 2,
        "argument --port: must be a whole number from 0 to 65535, got 99999"),
    Row("port-negative", "mesos-local", ["--port", "-1"], 2, "argument --port"),
    Row("host-malformed", "mesos-local", ["--port", "0", "--host", "not an addr"], 2,
        "argument --host: 'not an addr' is neither an IP address nor a host name"),
    Row("work-dir-impossible", "mesos-local", ["--port", "0", "--work-dir", "/proc/1/x"], 2,
        "--work-dir /proc/1/x: cannot create it"),
    Row("heartbeat-nan", "mesos-local", ["--port", "0", "--heartbeat-interval", "nan"], 2,
        "argument --heartbeat-interval"),
    Row("heartbeat-zero", "mesos-local", ["--port", "0", "--heartbeat-interval", "0"], 2,
        "argument --heartbeat-interval"),
    Row("mesos-local-docker-host-unreadable", "mesos-local", ["--port", "0"], 2,
        "DOCKER_HOST='::::' is not a Docker engine's address", env={"DOCKER_HOST": "::::"},
        needs_docker=True),
    Row("mesos-local-output-closed", "mesos-local", ["--port", "0", "--log-level", "warning"],
        SIGPIPE_EXIT, None, stdout_closed=True, lines=0),
]


# -- running a row ----------------------------------------------------------------

def message_lines(stderr):
    """stderr's lines but argparse's usage (``usage: ...`` and its indented
    continuation lines) and empty ones."""
    lines = stderr.splitlines()
    if lines and lines[0].startswith("usage:"):
        lines.pop(0)
        while lines and lines[0][:1].isspace():
            lines.pop(0)
    return [line for line in lines if line.strip()]


def cgroups_of(pid):
    """mesos_local cgroups a master in process ``pid`` made (named PID-START-ID)."""
    return [path for pattern in CGROUPS for path in glob.glob(pattern)
            if os.path.basename(path).startswith("%d-" % pid)]


def run_row(row, place):
    values = row.setup(place) if row.setup else {}
    values.update(runs=place["runs"], outside=place["outside"])
    place["runs_set_up"] = sorted(os.listdir(place["runs"]))
    args = [arg.format(**values) for arg in row.args]
    env = dict(os.environ, MESOS_MASTER="", TMPDIR=place["tmp"], TFMESOS_RUNS_DIR=place["runs"],
               PYTHONPATH=REPO, COLUMNS="100",
               **{name: value.format(**values) for name, value in row.env.items()})
    if "DOCKER_HOST" not in row.env:
        env.pop("DOCKER_HOST", None)
    stdout = subprocess.PIPE
    if row.stdout_closed:   # a pipe nobody reads any more: tfmesos logs RUN | head
        reader, stdout = os.pipe()
        os.close(reader)
    before = {pid for pid, _ in marked_processes()}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, *PROGRAMS[row.program], *args], cwd=place["cwd"],
                            env=env, stdout=stdout, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    if row.stdout_closed:
        os.close(stdout)
    try:
        out, err = proc.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        proc.terminate()   # first as Ctrl-C would: what it started is stopped too
        try:
            proc.communicate(timeout=BOUND)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        pytest.fail("%s %s did not finish within %d s" % (row.program, " ".join(args), BOUND))
    took = time.monotonic() - started
    result = subprocess.CompletedProcess(args, proc.returncode, out or "", err)
    result.values = values   # what the row's message names ({hooks}: its file)
    return result, took, proc.pid, before


@pytest.fixture
def place(tmp_path):
    paths = {name: str(tmp_path / name) for name in ("cwd", "tmp", "runs", "outside")}
    for path in paths.values():
        os.makedirs(path)
    yield paths
    # A crafted run.json is not one the schema takes (conftest checks every one left).
    for crafted in glob.glob(os.path.join(paths["runs"], "*-evil*")):
        shutil.rmtree(crafted)


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_input_gets_one_line_at_once_and_leaves_nothing(row, place):
    if row.needs_docker:
        pytest.importorskip("docker", reason="DOCKER_HOST is read by the docker package")
    result, took, pid, before = run_row(row, place)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == row.code, result.stderr
    assert took < BOUND
    lines = message_lines(result.stderr)
    if row.lines is not None:
        assert len(lines) == row.lines, result.stderr
    if row.message is not None:
        message = row.message
        for name, value in result.values.items():
            message = message.replace("{%s}" % name, value)
        assert any(message in line for line in lines), result.stderr
    if row.check:
        row.check(place, result)
    # Nothing left behind.
    left = []

    def none_left():
        left[:] = [p for p in marked_processes() if p[0] not in before]
        return not left
    wait_until(none_left, 20, interval=0.1, message=lambda: "left running: %s" % left)
    # An embedded master's cgroups and sandboxes go in a cleaner of their own
    # that outlives the command (LocalMaster.stop(detached_cleanup=True)).
    wait_until(lambda: cgroups_of(pid) == [] and os.listdir(place["tmp"]) == [], 20,
               interval=0.05, message=lambda: "left: cgroups %s, in TMPDIR %s" % (
                   cgroups_of(pid), os.listdir(place["tmp"])))
    assert os.listdir(place["cwd"]) == [], "left in the working directory"
    if row.code == 2:
        assert sorted(os.listdir(place["runs"])) == place["runs_set_up"], \
            "a run directory for a usage error"


# -- cluster()'s arguments, and the embedded master's own -------------------------

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("arguments, error", [
    ({"launch_timeout": NAN}, "launch_timeout must be a number above 0"),
    ({"connect_timeout": INF}, "connect_timeout must be"),
    ({"sticky_timeout": NAN}, "sticky_timeout must be"),
    ({"restart_backoff": NAN}, "restart_backoff must be"),
    ({"max_restarts": 10 ** 20}, "max_restarts must be a whole number from 0"),
    ({"max_attempts": 10 ** 20}, "max_attempts must be a whole number from 1 to 1000"),
    ({"jobs": [{"name": "worker", "cpus": INF}]}, "job 'worker': cpus must be"),
    ({"jobs": [{"name": "worker", "mem": NAN}]}, "job 'worker': mem must be"),
    ({"jobs": [{"name": "worker", "num": 10 ** 20}]}, "num must be a whole number from 1"),
    ({"jobs": [{"name": "worker", "gpus": 10 ** 9}]}, "gpus must be a whole number from 0"),
    ({"jobs": [{"name": "worker", "start": 10 ** 20}]}, "start must be a whole number"),
    ({"jobs": [{"name": "worker", "num": 6000}, {"name": "ps", "num": 6000}]},
     "the run asks for 12000 tasks; at most 10000 per run"),
    ({"jobs": [{"name": "worker", "num": 1001}]}, "the embedded master runs at most 1000"),
    ({"advertise_address": "not an addr"}, "is neither an IP address nor a host name"),
    ({"name": "a\nb"}, "none of them a control character"),
    # Not a bool: "no" was taken as True (found by a review helper).
    ({"verify": "no", "master": "https://127.0.0.1:1"}, "verify must be True or False, got 'no'"),
    ({"coordinator": "x"}, "coordinator must be True or False, got 'x'"),
    ({"force_pull_image": "1"}, "force_pull must be True or False, got '1'"),
    # Not a string: a TypeError from deep inside.
    ({"volumes": [5]}, "volumes: each is a HOST:CONTAINER[:ro|rw] string (or a (host, "
     "container, mode) triple); got 5"),
])
def test_cluster_refuses_what_is_not_finite_or_beyond_its_bounds(arguments, error, tmp_path,
                                                                 monkeypatch):
    import tfmesos
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path))
    arguments = dict({"jobs": [{"name": "worker"}], "master": "local"}, **arguments)
    started = time.monotonic()
    with pytest.raises(SpecError, match=re.escape(error)):
        with tfmesos.cluster(**arguments):
            pytest.fail("the cluster must not start")
    assert time.monotonic() - started < BOUND and os.listdir(tmp_path) == []


@pytest.mark.parametrize("make, error", [
    (lambda: __import__("mesos_local").AgentSpec(cpus=INF), "AgentSpec.cpus must be"),
    (lambda: __import__("mesos_local").AgentSpec(mem=NAN), "AgentSpec.mem must be"),
    (lambda: __import__("mesos_local").AgentSpec(gpus=10 ** 8), "AgentSpec.gpus must be from 0"),
    (lambda: __import__("mesos_local").AgentSpec(gpus=range(10 ** 8)), "more than 1024 GPUs"),
    (lambda: __import__("mesos_local").LocalMaster(heartbeat_interval=NAN),
     "heartbeat_interval=nan"),
    (lambda: __import__("mesos_local").LocalMaster(port=99999), "port=99999"),
    (lambda: __import__("mesos_local").LocalMaster(kill_grace_period=INF), "kill_grace_period"),
])
def test_the_embedded_master_refuses_what_is_not_finite_or_beyond_its_bounds(make, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        make()


@pytest.mark.parametrize("sent", [None, "nan", float("nan"), float("inf"), 0, -3, "soon", 1e12])
def test_a_masters_heartbeat_interval_that_is_not_finite_or_positive_is_not_taken(sent):
    from tfmesos.mesos.subscribe_answer import heartbeat_interval as _heartbeat_interval
    interval = _heartbeat_interval(sent)
    assert interval == (86400.0 if sent == 1e12 else 15.0)


# -- one check, three callers: each error names what its caller wrote (issue 32) -----

BIG = 120 * 1000 * 1000   # bytes: over the 100 MB a run ships at most by default


def big_project(where):
    """``where`` as a project holding a 120 MB file (sparse: it takes no disk)."""
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, "train.py"), "w") as handle:
        handle.write("print(1)\n")
    with open(os.path.join(where, "data.bin"), "wb"):
        pass
    os.truncate(os.path.join(where, "data.bin"), BIG)
    return where


def over_the_limit(where, limit, exclude):
    """The size check's message (``bundle.check_size``) in a caller's words."""
    return ("%s: 120.0 MB is over %s; biggest: data.bin (120.0 MB), train.py (9 bytes) (drop "
            "them with %s or .gitignore, or read large data from shared storage)"
            % (where, limit, exclude))


def works(value):
    return value


def raised_by_the_call(error, module):
    """The error is the documented one, raised by the API call itself: one
    line, nothing of tfmesos' internals below the call in its traceback,
    no chained error shown."""
    assert isinstance(error, TFMesosError) and "\n" not in str(error)
    assert "--" not in str(error), "a flag named to a library caller: %s" % error
    frames = traceback.extract_tb(error.__traceback__)
    assert os.path.basename(frames[-1].filename) == module, frames
    assert error.__suppress_context__ and error.__cause__ is None


@pytest.fixture
def in_big_project(tmp_path, monkeypatch):
    """The working directory is a project with a 120 MB file; runs go elsewhere."""
    project = big_project(str(tmp_path / "project"))
    monkeypatch.chdir(project)
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("MESOS_MASTER", "")
    return project


def test_cluster_names_its_keywords_for_the_shipped_size(in_big_project):
    import tfmesos
    from tfmesos.ship.contents import ShipError
    with pytest.raises(ShipError) as caught:
        with tfmesos.cluster([{"name": "worker", "cpus": 0.1, "mem": 64}], master="local",
                             ship=in_big_project):
            pytest.fail("the cluster must not start")
    assert str(caught.value) == over_the_limit(
        "ship=%s" % in_big_project, "ShipSpec.max_size=100.0 MB",
        "ShipSpec(exclude=[PATTERN, ...])")
    raised_by_the_call(caught.value, "fine_grained.py")


def test_run_names_its_keywords_for_the_shipped_size(in_big_project):
    import tfmesos
    from tfmesos.ship.contents import ShipError
    with pytest.raises(ShipError) as caught:   # ship: the current directory, by default
        tfmesos.run(works, 1, workers=1, cpus=0.1, mem=64)
    assert str(caught.value) == over_the_limit(
        "ship=%s (the current directory, the default; ship=None ships none)" % in_big_project,
        "ship_max_size=100.0 MB", "ship_exclude=[PATTERN, ...]")
    raised_by_the_call(caught.value, "function_run.py")
    # A directory named, the error names it alone.
    with pytest.raises(ShipError, match=r"^ship=%s: 120\.0 MB is over ship_max_size=110\.0 MB"
                       % re.escape(in_big_project)):
        tfmesos.run(works, 1, ship=in_big_project, workers=1, cpus=0.1, mem=64,
                    ship_max_size=110)


def test_tfrun_names_its_flags_for_the_shipped_size(place):
    big_project(place["cwd"])
    row = tfrun("ship-120-mb", ["--ship"], 1, None)
    result, took, _, _ = run_row(row, place)
    assert "Traceback" not in result.stderr and result.returncode == 1, result.stderr
    errors = [line for line in message_lines(result.stderr) if "error" in line]
    assert errors == ["tfrun: error: " + over_the_limit(
        "--ship %s" % place["cwd"], "--ship-max-size 100.0 MB", "--ship-exclude PATTERN")], \
        result.stderr
    assert os.listdir(place["tmp"]) == [], "left in TMPDIR"


def test_cluster_names_the_key_of_its_job(tmp_path, monkeypatch):
    import tfmesos
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path))
    with pytest.raises(SpecError) as caught:
        with tfmesos.cluster([{"name": "worker"}, {"name": "ps", "mem": INF}], master="local"):
            pytest.fail("the cluster must not start")
    assert str(caught.value) == ("job 'ps': mem must be a number above 0, at most 100000000 "
                                 "(MB), got inf")
    raised_by_the_call(caught.value, "fine_grained.py")


@pytest.mark.parametrize("jobs", ["worker:2", b"worker:2", 2, {"worker": 2}, {}])
def test_cluster_given_no_list_of_jobs_says_how_to_give_them(jobs, tmp_path, monkeypatch):
    """cluster("worker:2") said "a job must be a tfmesos.Job or a dict, got
    'w'" (a string's characters taken as the jobs); 2 raised a TypeError."""
    import tfmesos
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path))
    with pytest.raises(SpecError) as caught:
        with tfmesos.cluster(jobs, master="local"):
            pytest.fail("the cluster must not start")
    assert str(caught.value) == (
        "jobs: give a list of jobs, e.g. [{'name': 'worker', 'num': 2}] or "
        "[tfmesos.Job('worker', 2)], got %r" % (jobs,))
    raised_by_the_call(caught.value, "fine_grained.py")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("python, error", [
    ("/nonexistent/python3", "python /nonexistent/python3: no such program on this machine, "
                             "whose embedded master runs the tasks: give an interpreter it "
                             "has, e.g. python=%s" % sys.executable),
    ("/tmp", "python /tmp: a directory, not a program on this machine"),
    ("python2.1", "python python2.1: not on the tasks' PATH on this machine"),
], ids=["no-such-program", "a-directory", "not-on-the-path"])
def test_a_python_the_embedded_master_has_not_is_refused_before_anything_launches(
        python, error, tmp_path, monkeypatch):
    """tfmesos.run(..., python="/nonexistent") launched its tasks three times,
    each '/bin/sh: exec: /nonexistent: not found', before raising TaskFailed;
    tfrun --python refuses it before the run (the same check, the same words)."""
    import tfmesos
    from tfmesos.core import launch
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("MESOS_MASTER", "")

    def no_run(*args, **kwargs):
        raise AssertionError("a run was made")
    monkeypatch.setattr(launch.ClusterRun, "__init__", no_run)
    with pytest.raises(SpecError) as caught:
        tfmesos.run(works, 1, workers=1, ship=None, python=python)
    assert str(caught.value).startswith(error), str(caught.value)
    raised_by_the_call(caught.value, "function_run.py")
    with pytest.raises(SpecError) as caught:
        tfmesos.submit(works, 1, workers=1, ship=None, python=python)
    assert str(caught.value).startswith(error), str(caught.value)
    raised_by_the_call(caught.value, "function_submit.py")
    assert os.listdir(tmp_path) == []


NO_IMAGE = ("is for image tasks, and the run has no image: add image=IMAGE (or set "
            "$DOCKER_IMAGE), or drop ")
SCHEME_AWAY = ("master_scheme=https is for masters found through zk://, and the master (%s) is "
               "none: give an https master as https://HOST:PORT, or drop master_scheme")
OVER_HTTP = ("%s for https masters, and the master (%s) is reached over http: give the "
             "master as https://HOST:PORT, or drop %s")


@pytest.mark.parametrize("cluster_given, run_given, cluster_error, run_error", [
    ({"containerizer_type": "DOCKER"}, {"containerizer": "docker"},
     "containerizer_type=DOCKER " + NO_IMAGE + "containerizer_type=DOCKER",
     "containerizer=DOCKER " + NO_IMAGE + "containerizer=DOCKER"),
    ({"force_pull_image": True, "volumes": ["/tmp:/data"]},
     {"force_pull": True, "volumes": ["/tmp:/data"]},
     "force_pull_image=True and volumes are" + NO_IMAGE[2:] + "force_pull_image=True and volumes",
     "force_pull=True and volumes are" + NO_IMAGE[2:] + "force_pull=True and volumes"),
    ({"master_scheme": "https"}, {"master_scheme": "https"},
     SCHEME_AWAY % "local", SCHEME_AWAY % "local"),
    ({"master_scheme": "https", "master": "127.0.0.1:1"},
     {"master_scheme": "https", "master": "127.0.0.1:1"},
     SCHEME_AWAY % "127.0.0.1:1", SCHEME_AWAY % "127.0.0.1:1"),
    ({"verify": False}, {"verify": False},
     OVER_HTTP % ("verify=False is", "local", "verify=False"),
     OVER_HTTP % ("verify=False is", "local", "verify=False")),
    ({"ca_bundle": "{bundle}", "verify": False, "master": "http://127.0.0.1:1"},
     {"ca_bundle": "{bundle}", "master": "127.0.0.1:1"},
     OVER_HTTP % ("ca_bundle and verify=False are", "http://127.0.0.1:1",
                  "ca_bundle and verify=False"),
     OVER_HTTP % ("ca_bundle is", "127.0.0.1:1", "ca_bundle")),
], ids=["docker-containerizer", "force-pull-and-volumes", "master-scheme-on-the-embedded-master",
        "master-scheme-with-a-host-port", "no-verify-on-the-embedded-master",
        "ca-bundle-over-http"])
def test_the_apis_refuse_settings_that_would_do_nothing_before_anything_launches(
        cluster_given, run_given, cluster_error, run_error, tmp_path, monkeypatch):
    """cluster(..., containerizer_type="DOCKER") without an image, run(...,
    master_scheme="https") on the embedded master, verify=False or a
    ca_bundle with a master reached over http: taken, and nothing came of
    them (plain tasks have no container; only masters found through zk:// take
    the scheme; only https masters a CA bundle); tfrun refuses its flags for
    them, in the same words."""
    import tfmesos
    from tfmesos.core import launch
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("MESOS_MASTER", "")
    monkeypatch.delenv("DOCKER_IMAGE", raising=False)
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")

    def no_run(*args, **kwargs):
        raise AssertionError("a run was made")
    monkeypatch.setattr(launch.ClusterRun, "__init__", no_run)

    def given(settings):
        return {key: str(bundle) if value == "{bundle}" else value
                for key, value in settings.items()}
    with pytest.raises(SpecError) as caught:
        with tfmesos.cluster([{"name": "worker", "cpus": 0.1, "mem": 64}],
                             **dict({"master": "local"}, **given(cluster_given))):
            pytest.fail("the cluster must not start")
    assert str(caught.value) == cluster_error
    raised_by_the_call(caught.value, "fine_grained.py")
    with pytest.raises(SpecError) as caught:
        tfmesos.run(works, 1, workers=1, ship=None, **given(run_given))
    assert str(caught.value) == run_error
    raised_by_the_call(caught.value, "function_run.py")
    with pytest.raises(SpecError) as caught:
        tfmesos.submit(works, 1, workers=1, ship=None, **given(run_given))
    assert str(caught.value) == run_error
    raised_by_the_call(caught.value, "function_submit.py")
    assert not os.path.exists(tmp_path / "runs") or os.listdir(tmp_path / "runs") == []


def test_the_rules_of_settings_that_would_do_nothing_keep_what_does_something():
    """An image takes -C DOCKER, -f and -V; an https master (given, in a
    list, or found through zk:// with master_scheme="https") takes the scheme,
    a CA bundle and verify=False."""
    from tfmesos.core import unused_settings
    unused_settings.check_image_settings("img", "DOCKER", True, ("/tmp:/data",))
    unused_settings.check_image_settings(None, "MESOS", False, ())
    for master, scheme in (("zk://h:2181/mesos", "https"), ("https://m:5050", "http"),
                           ("HTTPS://m:5050", "http"), ("http://a:5050,https://b:5050", "http"),
                           ("ZK://h:2181/mesos", "https"),
                           # an https:// master with the scheme: redundant, not refused
                           # (it was: "give an https master as https://HOST:PORT")
                           ("https://m:5050", "https"), ("http://a:5050,https://b:5050", "https")):
        unused_settings.check_master_scheme(scheme, master)
        unused_settings.check_tls_settings(master, scheme, False, "/ca.pem")
    for master in ("zk://h:2181/mesos", "local", "m:5050"):
        unused_settings.check_tls_settings(master, "http", True, None)
    with pytest.raises(SpecError) as caught:
        unused_settings.check_tls_settings("zk://h:2181/mesos", "http", True, "/ca.pem")
    assert str(caught.value) == ("ca_bundle is for https masters, and the masters found through "
                                 "zk:// are reached over http: add master_scheme=https, or drop "
                                 "ca_bundle")


@pytest.mark.parametrize("env, error", [
    ({"B": None}, "env: the value of B must be a string, got None (leave B out to leave it "
                  "unset)"),
    ({"N": 4}, "env: the value of N must be a string, got 4 (give '4')"),
])
def test_an_env_value_that_is_no_string_is_refused_not_sent_as_its_repr(env, error, tmp_path,
                                                                         monkeypatch):
    """env={"B": None} gave the tasks B=None, the string."""
    import tfmesos
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path))
    with pytest.raises(SpecError) as caught:
        with tfmesos.cluster([{"name": "worker"}], master="local", env=env):
            pytest.fail("the cluster must not start")
    assert str(caught.value) == error
    raised_by_the_call(caught.value, "fine_grained.py")
    with pytest.raises(SpecError) as caught:
        tfmesos.cluster([{"name": "worker", "env": env}]).__enter__()
    assert str(caught.value) == "job 'worker': " + error
    with pytest.raises(SpecError) as caught:
        tfmesos.run(works, 1, workers=1, env=env)
    assert str(caught.value) == error
    raised_by_the_call(caught.value, "function_run.py")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("given, error", [
    ({"env": "A=1"}, "env takes a mapping of variable names to values, or a list of NAME=VALUE "
                     "strings; got 'A=1'"),
    ({"env": 5}, "env takes a mapping of variable names to values"),
    ({"volumes": "/tmp:/data"}, "volumes takes a list of HOST:CONTAINER[:ro|rw] strings (or a "
                                "mapping of host paths to container paths); got '/tmp:/data'"),
    ({"volumes": 5}, "volumes takes a list of HOST:CONTAINER[:ro|rw] strings"),
    ({"master": 5}, "master takes a master's address as a string (host:port, zk://..., or "
                    "local); got 5"),
    ({"secret_env": 5}, "secret_env takes variable names (a list of strings); got 5"),
    ({"run_dir": 5}, "run_dir takes a directory (a path); got 5"),
    ({"local_master_options": ["x"]}, "local_master_options takes a mapping of option names "
                                      "to values; got ['x']"),
    ({"local_master_options": {"bogus": 1}}, "local_master_options has no option 'bogus': "
                                             "the embedded master takes agents, "),
    ({"local_master_options": [("agent_cpu", 4)]}, "local_master_options has no option "
                                                   "'agent_cpu': the embedded master takes "),
])
def test_an_argument_of_the_wrong_kind_is_one_line_naming_the_keyword(given, error, tmp_path,
                                                                       monkeypatch):
    """env="A=1" read as the entries 'A', '=', '1' ("environment entry 'A'
    must look like NAME=VALUE"), volumes="/tmp:/data" as volumes '/', 't'...,
    and cluster() took env=["A=1"] (which tfmesos.run() takes) to a
    traceback; master=5, secret_env=5, run_dir=5, local_master_options=['x']
    were tracebacks of both."""
    import tfmesos
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path))
    with pytest.raises(SpecError) as caught:
        with tfmesos.cluster([{"name": "worker"}], **given):
            pytest.fail("the cluster must not start")
    assert str(caught.value).startswith(error), str(caught.value)
    raised_by_the_call(caught.value, "fine_grained.py")
    with pytest.raises(SpecError) as caught:
        tfmesos.run(works, 1, workers=1, **given)
    assert str(caught.value).startswith(error), str(caught.value)
    raised_by_the_call(caught.value, "function_run.py")
    assert os.listdir(tmp_path) == []


def test_an_unknown_local_master_option_is_refused_before_anything_starts(tmp_path,
                                                                          monkeypatch):
    """local_master_options={"agent_cpu": 4} was a TypeError of
    LocalMaster.__init__, deep in the run's start, its run directory left."""
    import inspect

    import tfmesos
    from mesos_local.master import LocalMaster
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path))
    valid = [name for name in inspect.signature(LocalMaster.__init__).parameters
             if name != "self"]
    with pytest.raises(SpecError) as caught:
        tfmesos.submit(works, 1, workers=1, local_master_options={"agent_cpu": 4,
                                                                  "isolation": None})
    assert str(caught.value) == ("local_master_options has no option 'agent_cpu': the embedded "
                                 "master takes %s" % ", ".join(valid))
    raised_by_the_call(caught.value, "function_submit.py")
    assert os.listdir(tmp_path) == []


def test_any_mapping_and_a_list_of_settings_are_taken_as_env_and_volumes():
    """os.environ (no dict) was read as its names alone ("environment entry
    'IS_SANDBOX' must look like NAME=VALUE"); cluster() took no list of
    NAME=VALUE strings."""
    import types

    from tfmesos.core.cluster_arguments import run_spec_of
    from tfmesos.core.spec_fields import env_given, volumes_given
    proxy = types.MappingProxyType({"A": "1"})
    for env in (proxy, ["A=1"], [("A", "1")], {"A": "1"}):
        assert run_spec_of([{"name": "worker"}], env=env, environ={}).env == (("A", "1"),)
        assert env_given(env) == [("A", "1")] or env_given(env) == ["A=1"]
    assert run_spec_of([{"name": "worker"}], env=os.environ, environ={}).env \
        == tuple(os.environ.items())
    for volumes in (types.MappingProxyType({"/tmp": "/data"}), ["/tmp:/data"]):
        assert run_spec_of([{"name": "worker"}], volumes=volumes, environ={}).volumes \
            == (("/tmp", "/data", "RW"),)
        assert volumes_given(volumes) == ("/tmp:/data",)


@pytest.mark.parametrize("env, error", [
    ({"A": "x\0y"}, "the run: the value of A holds a NUL character, which no environment "
                     "variable can"),
    ({"A": "x" * (128 << 10)}, "the run: the value of A is over 127 KiB, more than an "
                               "environment variable may hold: pass it in a file"),
    ([("A", "1", "2")], "the run: environment entry ('A', '1', '2') must be a NAME=VALUE "
                        "string or a (name, value) pair"),
    ([5], "the run: environment entry 5 must be a NAME=VALUE string or a (name, value) pair"),
], ids=["NUL", "over exec's bound", "a triple", "a number"])
def test_an_environment_no_task_can_have_is_one_line_before_anything_launches(env, error):
    # A NUL, or a value over Linux's MAX_ARG_STRLEN, failed every launch (3
    # tracebacks of the embedded master's); a triple or a number was a
    # bare unpacking error naming no keyword.
    from tfmesos.core.cluster_arguments import run_spec_of
    with pytest.raises(SpecError) as caught:
        run_spec_of([{"name": "worker"}], env=env, environ={})
    assert str(caught.value).startswith(error), str(caught.value)


def test_an_environment_over_exec_s_bound_in_all_is_one_line_before_anything_launches(
        tmp_path):
    # tfmesos.run(env={18 variables of 120,000 bytes}): each under the bound
    # of one variable, together over Linux's ARG_MAX (a quarter of ulimit -s):
    # every attempt failed with E2BIG ("cannot start '<the command>':
    # [Errno 7] Argument list too long").
    from tfmesos.core.cluster_arguments import run_spec_of
    from tfmesos.core.function_options import OPTIONS
    from tfmesos.core.function_run import run_spec
    from tfmesos.core.jobs import Job
    from tfmesos.ship.bundle import ShipSpec
    limit = min(max(os.sysconf("SC_ARG_MAX"), 128 << 10), 6 << 20)
    count = limit // 120000 + 1
    big = {"V%02d" % i: "x" * 120000 for i in range(count)}
    (tmp_path / "payload.pickle").write_bytes(b"")
    payload = types.SimpleNamespace(name="payload.pickle", path=str(tmp_path / "payload.pickle"))
    half = dict(list(big.items())[:count // 2])
    rest = dict(list(big.items())[count // 2:])
    for make in (lambda: run_spec_of([{"name": "worker"}], env=big, environ={}),
                 # the run's and a job's together: what its tasks get
                 lambda: run_spec_of([{"name": "worker", "env": rest}], env=half, environ={}),
                 lambda: run_spec(len, [Job("worker", 1)], dict(OPTIONS, env=big), ShipSpec(),
                                  payload, 1)):
        with pytest.raises(SpecError) as caught:
            make()
        said = str(caught.value)
        assert "\n" not in said and re.search(r"\(\d+ variables, \d+ bytes\)", said), said
        assert "ARG_MAX" in said and "pass big values in a file" in said, said
    # Under the bound in all, and the jobs' own env each apart: taken.
    fewer = dict(list(big.items())[:count - 2])
    assert len(run_spec_of([{"name": "worker"}], env=fewer, environ={}).env) == count - 2
    run_spec_of([{"name": "worker", "env": half}, {"name": "ps", "env": rest}], environ={})


@pytest.mark.parametrize("where", ["run", "job", "function"])
@pytest.mark.parametrize("name", ["TFMESOS_SECRET", "TFMESOS_FUNCTION", "MESOS_DIRECTORY"])
def test_a_name_tfmesos_or_mesos_sets_is_refused_in_every_env_a_user_gives(where, name,
                                                                          tmp_path):
    # cluster(env=), a job's env and tfmesos.run(env=) took them: tfmesos'
    # own value replaced the user's, or the user's broke the task (a
    # function run's payload name, Mesos' sandbox).
    from tfmesos.core.cluster_arguments import run_spec_of
    from tfmesos.core.function_options import OPTIONS
    from tfmesos.core.function_run import run_spec
    from tfmesos.core.jobs import Job
    with pytest.raises(SpecError) as caught:
        if where == "run":
            run_spec_of([{"name": "worker"}], env={name: "x"}, environ={})
        elif where == "job":
            run_spec_of([{"name": "worker", "env": {name: "x"}}], environ={})
        else:
            from tfmesos.ship.bundle import ShipSpec
            (tmp_path / "payload.pickle").write_bytes(b"")
            payload = types.SimpleNamespace(name="payload.pickle",
                                            path=str(tmp_path / "payload.pickle"))
            run_spec(len, [Job("worker", 1)], dict(OPTIONS, env={name: "x"}), ShipSpec(),
                     payload, 1)
    assert "%s is a name %s sets in every task" % (
        name, "Mesos" if name.startswith("MESOS_") else "tfmesos") in str(caught.value)
    assert "give your variable another name" in str(caught.value)


def test_the_names_a_user_may_set_for_tfmesos_stay_allowed():
    # TFMESOS_TASK_HOST (the address a task gives), TFMESOS_USAGE_INTERVAL
    # and TFMESOS_GPUS are the user's to set (README); MESOS_MASTER is no
    # name Mesos sets in a task (env=os.environ passes it on).
    from tfmesos.core.cluster_arguments import run_spec_of
    env = {"TFMESOS_TASK_HOST": "10.0.0.5", "TFMESOS_USAGE_INTERVAL": "1", "TFMESOS_GPUS": "0",
           "MESOS_MASTER": "zk://zk:2181/mesos"}
    assert dict(run_spec_of([{"name": "worker"}], env=env, environ={}).env) == env


@pytest.mark.parametrize("argv, offered, suggested", [
    (["--detach", "--ship", "-w", "2", "-s", "0"], 2, " --cpus 3"),   # 2 + the scheduler's 0.5
    (["--detach", "--ship", "-w", "1", "-s", "0", "-Cw", "0.5"], 2, ""),
    (["--failover", "-w", "2", "-s", "1"], 2, " --cpus 3"),
    (["--failover", "-w", "2", "-s", "1"], 4, ""),
])
def test_the_master_suggested_for_a_run_that_outlives_tfrun_can_hold_it(argv, offered,
                                                                          suggested,
                                                                          monkeypatch):
    # The hint gave `tfmesos local-master --port 5050 &`, which offers this
    # machine's CPU count: on 2 cores a detached run of 2 workers waited for
    # good, its own scheduler task holding the cpus a worker needed (found
    # by a review helper following the hint).
    from tfmesos.cli.tfrun_options import build_parser, read_options
    monkeypatch.setattr(os, "cpu_count", lambda: offered)
    monkeypatch.delenv("MESOS_MASTER", raising=False)
    args = build_parser().parse_options(argv, ["true"])
    with pytest.raises(SpecError) as caught:
        read_options(args, "true")
    assert "(tfmesos local-master --port 5050%s &)" % suggested in str(caught.value)


def test_cluster_refuses_a_first_index_its_servers_would_not_know():
    # Its servers' cluster spec numbers each job's tasks from 0: worker:3
    # exited 1 ("Task 3 was not defined in job worker"), the run failed.
    from tfmesos.core.cluster_arguments import run_spec_of
    with pytest.raises(SpecError, match="job 'worker': start=3: cluster\\(\\) numbers each "
                                        "job's tasks from 0"):
        run_spec_of([{"name": "worker", "start": 3}], environ={})


def test_cluster_refuses_a_jobs_cmd_it_would_not_run(tmp_path, monkeypatch):
    """A job's cmd (tfrun's, replica mode) was taken by cluster() and never
    run: each task started a TensorFlow server instead, and the block ran."""
    import tfmesos
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path))
    for job in ({"name": "worker", "num": 1, "cmd": "echo from-cmd; exit 3"},
                tfmesos.Job("worker", 1, cmd="echo from-cmd; exit 3")):
        with pytest.raises(SpecError) as caught:
            with tfmesos.cluster([job], master="local"):
                pytest.fail("the cluster must not start")
        assert str(caught.value) == (
            "job 'worker': cmd is a command for tfrun's replica mode; a cluster() task runs a "
            "TensorFlow server: drop cmd and drive the servers from the with block, or run the "
            "command with tfrun")
        raised_by_the_call(caught.value, "fine_grained.py")
    assert os.listdir(tmp_path) == []


def test_run_names_its_keyword_for_a_jobs_memory():
    import tfmesos
    with pytest.raises(SpecError) as caught:
        tfmesos.run(works, 1, workers=1, ps=1, ps_mem=INF)
    assert str(caught.value) == ("job 'ps': ps_mem must be a number above 0, at most "
                                 "100000000 (MB), got inf")
    raised_by_the_call(caught.value, "function_run.py")


def test_tfrun_names_its_flags_for_a_jobs_memory(place):
    result, _, _, _ = run_row(tfrun("job-ps-mem-inf", ["--job", "ps:1:1:inf"], 2, None), place)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    [line] = message_lines(result.stderr)
    assert line.startswith(
        "tfrun: error: job 'ps': mem (-Ms or --job ps:COUNT:CPUS:MEM) must be a number above "
        "0, at most 100000000 (MB), got inf"), result.stderr
    assert os.listdir(place["runs"]) == []


CALLERS = {"tfrun": ("tfmesos.cli.tfrun_flags", "FLAGS"),
           "cluster()": ("tfmesos.core.cluster_arguments", "KEYWORDS"),
           "tfmesos.run()": ("tfmesos.core.function_options", "KEYWORDS")}


@pytest.mark.parametrize("caller", sorted(CALLERS))
def test_every_field_an_error_may_name_has_its_callers_words(caller):
    import importlib

    from tfmesos.error_fields import FIELDS, render
    module, name = CALLERS[caller]
    words = getattr(importlib.import_module(module), name)
    assert sorted(words) == sorted(FIELDS), "fields without words (or words of no field)"
    for field in words:
        for value in (None, "V"):
            for job in ("worker", "ps", "chief", "evaluator", "tensorboard"):
                text = render("{%s}" % field if value is None else "{%s=%s}" % (field, value),
                              (), {"job": job}, words)
                assert text and "{" not in text and "%" not in text, (field, text)
                assert value is None or value in text, (field, text)


def test_every_field_an_error_template_names_is_a_known_field():
    """What ``about`` checks when an error is made, read from every template
    written out in tfmesos' sources."""
    import ast

    from tfmesos.error_fields import FIELDS, fields_of
    found = {}
    for path in glob.glob(os.path.join(REPO, "tfmesos", "**", "*.py"), recursive=True):
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "about" and node.args \
                    and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                for field in fields_of(node.args[0].value):
                    found.setdefault(field, os.path.relpath(path, REPO))
    assert found, "no error template found"
    unknown = {field: path for field, path in found.items() if field not in FIELDS}
    assert not unknown


def test_user_text_in_an_error_is_never_read_as_a_field():
    error = SpecError.about("{ship.directory=%s}: not a directory (%s)", "/p/{launch_timeout}",
                            "100%")
    assert str(error) == "ship.directory=/p/{launch_timeout}: not a directory (100%)"
    worded = error.in_words({"ship.directory": "--ship", "launch_timeout": "--launch-timeout"})
    assert str(worded) == "--ship /p/{launch_timeout}: not a directory (100%)"
    assert type(worded) is SpecError and worded.fields == ("ship.directory",)
    with pytest.raises(ValueError, match="no_such_field"):
        SpecError.about("{no_such_field} is wrong")


GONE = ("the current directory no longer exists (deleted or moved away): cd to one that does, "
        "then run again")
# Each entry point, started in a directory removed under it (a shell left in
# a directory that a checkout or a clean-up removed).
FROM_A_GONE_DIRECTORY = {
    "tfrun": "import runpy, sys; sys.argv = ['tfrun', %s]; "
             "runpy.run_module('tfmesos.cli.tfrun', run_name='__main__')",
    "cluster": "import tfmesos\ntry:\n    tfmesos.cluster([{'name': 'worker', 'num': 1}])"
               ".__enter__()\nexcept tfmesos.SpecError as exc:\n    print('SpecError:', exc)",
    "run": "import tfmesos\ntry:\n    tfmesos.run(print, workers=1)\n"
           "except tfmesos.SpecError as exc:\n    print('SpecError:', exc)",
}


@pytest.mark.parametrize("entry, args", [
    ("tfrun", ["-w", "1", "-s", "0", "--", "true"]),
    ("tfrun", ["--ship", "-w", "1", "-s", "0", "--", "true"]),
    ("tfrun", ["--detach", "-m", "127.0.0.1:1", "-w", "1", "-s", "0", "--", "true"]),
    ("cluster", []), ("run", []),
])
def test_a_working_directory_that_is_gone_is_one_line(entry, args, tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    code = FROM_A_GONE_DIRECTORY[entry]
    if args:
        code %= ", ".join(repr(arg) for arg in args)
    # cd into it, remove it, then start Python there.
    script = "cd %s && rmdir %s && exec %s -c \"$0\"" % (gone, gone, sys.executable)
    result = subprocess.run(["sh", "-c", script, code], capture_output=True, text=True,
                            timeout=60, env=dict(os.environ, MESOS_MASTER="",
                                                 PYTHONPATH=REPO,
                                                 TFMESOS_RUNS_DIR=str(tmp_path / "runs")))
    assert "Traceback" not in result.stderr, result.stderr
    if entry == "tfrun":
        assert result.returncode == 2
        assert result.stderr.splitlines()[-1] == (
            "tfrun: error: %s (tfrun --help explains every option)" % GONE)
    else:
        assert result.returncode == 0 and result.stdout == "SpecError: %s\n" % GONE
    assert not (tmp_path / "runs").exists()   # nothing started


def test_the_apis_refuse_more_tasks_than_the_hard_open_files_limit_allows(tmp_path):
    # cluster() with a hard limit of 100 and 40 tasks launched them all:
    # tasks failed to start (EMFILE), were relaunched three times, and the
    # run ended in TaskFailed naming a sandbox path, its record unwritten.
    script = tmp_path / "api.py"
    script.write_text(
        "import sys, tfmesos\n"
        "jobs = [tfmesos.Job('worker', 40, cpus=0.01, mem=16)]\n"
        "for call in (lambda: tfmesos.cluster(jobs).__enter__(),\n"
        "             lambda: tfmesos.run(print, workers=40, ship=None)):\n"
        "    try:\n"
        "        call()\n"
        "    except tfmesos.SpecError as exc:\n"
        "        print('refused:', exc)\n")
    done = subprocess.run(
        ["sh", "-c", 'ulimit -n 100 && exec "$@"', "sh", sys.executable, str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, MESOS_MASTER="", PYTHONPATH=REPO))
    refusal = ("refused: 40 tasks need at least 152 open files at once, and this process may "
               "open 100 at most (ulimit -Hn): raise the hard limit (limits.conf, "
               "LimitNOFILE=), or run at most 22 tasks")
    assert done.stdout.splitlines() == [refusal, refusal], (done.stdout, done.stderr[-3000:])
    assert "Traceback" not in done.stderr and not os.path.exists(tmp_path / "tfmesos-runs")
    # (other tests' servers, a ZooKeeper, run beside this one under xdist)
    assert not [p for p in marked_processes() if TASK_ENTRY in p[1]]


@pytest.mark.parametrize("given, error", [
    ({"chief": "yes"}, "tfmesos.run: chief must be True or False, got 'yes'"),
    ({"evaluator": 2}, "tfmesos.run: evaluator must be True or False, got 2"),
    ({"verify": "no"}, "tfmesos.run: verify must be True or False, got 'no'"),
    ({"no_isolation": "no"}, "tfmesos.run: no_isolation must be True or False, got 'no'"),
    ({"sticky_workers": 2}, "tfmesos.run: sticky_workers must be True or False, got 2"),
    ({"python": 5}, "tfmesos.run: python must be a path (a string), got 5"),
    ({"ship_exclude": [5]}, "tfmesos.run: ship_exclude takes a list of patterns (strings), "
     "got 5 in it"),
    ({"volumes": [5]}, "volumes: each is a HOST:CONTAINER[:ro|rw] string"),
])
def test_run_refuses_a_setting_of_the_wrong_type_naming_it(given, error, tmp_path,
                                                           monkeypatch):
    # A bare TypeError from deep inside, or a truthy value taken as True:
    # verify="no" kept verification on, no_isolation="no" turned it off
    # (found by a review helper).
    import tfmesos
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path))
    with pytest.raises(SpecError) as caught:
        tfmesos.run(len, [1], ship=None, **given)
    assert error in str(caught.value), str(caught.value)


def test_the_type_checks_take_what_the_api_took_before(tmp_path, monkeypatch):
    # numpy's bools and Path parts of a volume were refused by the checks of
    # 5c415b1, and a generator of ship_exclude patterns was used up by them,
    # so what it left out was shipped (found by a review helper).
    import numpy

    from tfmesos.core.function_options import OPTIONS
    from tfmesos.core.function_run import checked_settings
    from tfmesos.core.spec import RunSpec
    settings = checked_settings("tfmesos.run", dict(
        OPTIONS, verbose=numpy.True_, ship_exclude=(p for p in ["*.dat"]),
        python=pathlib.Path("/usr/bin/python3")), chief=numpy.bool_(False), evaluator=1)
    assert (settings["verbose"], settings["chief"], settings["evaluator"]) == (True, False, True)
    assert type(settings["verbose"]) is bool
    assert settings["ship_exclude"] == ("*.dat",) and settings["python"] == "/usr/bin/python3"
    spec = RunSpec(volumes=[(pathlib.Path("/tmp"), "/data", "ro")], verify=numpy.True_,
                   master="https://127.0.0.1:1")
    assert spec.volumes == (("/tmp", "/data", "RO"),) and spec.verify is True


@pytest.mark.parametrize("where", ["run", "job"])
def test_a_task_host_that_is_no_host_is_refused_before_anything_launches(where):
    # -E TFMESOS_TASK_HOST=localhost:9999: each task refused it in one line
    # and tfrun relaunched it twice more (read-through of 3736e29).
    from tfmesos.core.cluster_arguments import run_spec_of
    with pytest.raises(SpecError, match="TFMESOS_TASK_HOST=localhost:9999 is neither an IP "
                                        "address nor a host name: set it to the address this "
                                        "task's host is reached at, without a port"):
        if where == "run":
            run_spec_of([{"name": "worker"}], env={"TFMESOS_TASK_HOST": "localhost:9999"},
                        environ={})
        else:
            run_spec_of([{"name": "worker", "env": {"TFMESOS_TASK_HOST": "localhost:9999"}}],
                        environ={})
    for host in ("[::1]", "node-7.example.com", "myproj_worker_1", "10.1.2.3"):
        run_spec_of([{"name": "worker"}], env={"TFMESOS_TASK_HOST": host}, environ={})


def test_tfrun_refuses_a_task_host_that_is_no_host_in_one_line():
    done = run_tfrun("-w", "1", "-s", "0", "-E", "TFMESOS_TASK_HOST=localhost:9999", "--", "true")
    assert done.returncode == 2 and done.stderr.splitlines()[-1].startswith(
        "tfrun: error: -E: TFMESOS_TASK_HOST=localhost:9999 is neither an IP address nor a "
        "host name"), done.stderr
