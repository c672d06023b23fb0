"""TensorFlow is quiet in tasks by default: TF_CPP_MIN_LOG_LEVEL=2, no CUDA
probing in tasks without GPUs (no cuInit error), and the lines TensorFlow
logs before it reads its level are held to it too: in fine-grained tasks
while TensorFlow starts, in replica tasks in the command's stderr."""

import glob
import os
import re
import subprocess
import sys
import time

import pytest

from tfmesos.core.taskinfo import tensorflow_env
from tfmesos.task.quiet import tensorflow_noise

PRE_INIT = [
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
    b"I0000 00:00:1795673344.168149   32673 port.cc:153] oneDNN custom operations are on.\n",
    b"I0515 12:34:56.789012   32673 cudart_stub.cc:31] Could not find cuda drivers on your "
    b"machine, GPU will not be used.\n",
]
WARNING = b"W0515 12:34:56.789012    7 loader.cc:9] something to note\n"
ERROR = b"E0000 00:00:1795673347.235997   32673 cuda_platform.cc:52] failed call to cuInit\n"
# What the task entry runs in fine-grained mode, on a one-task cluster spec.
SERVE = """
import os, sys
from tfmesos.task.quiet import min_log_level, tensorflow_startup_filtered
with tensorflow_startup_filtered(min_log_level(os.environ)):
    import tensorflow as tf
    tf.distribute.Server(tf.train.ClusterSpec({"worker": ["127.0.0.1:0"]}), job_name="worker",
                         task_index=0, start=True)
print("up", flush=True)
os._exit(0)
"""


def test_noise_is_what_the_level_drops():
    for line in PRE_INIT:
        assert tensorflow_noise(line, 2) and not tensorflow_noise(line, 0)
    assert tensorflow_noise(WARNING, 2) and not tensorflow_noise(WARNING, 1)
    assert not tensorflow_noise(ERROR, 2) and tensorflow_noise(ERROR, 3)
    for other in (b"Traceback (most recent call last):\n", b"tfmesos task error: x\n",
                  b"Ivan 12 said: hi] there\n", b"/x.py:3: UserWarning: careful\n"):
        assert not tensorflow_noise(other, 3)


def test_the_filter_passes_errors_and_python_output_and_restores_stderr():
    code = """
import os, sys
from tfmesos.task.quiet import tensorflow_startup_filtered
with tensorflow_startup_filtered(2):
    for line in %r:
        os.write(2, line)
    print("from python", file=sys.stderr)
os.write(2, %r)
""" % (PRE_INIT + [WARNING, ERROR], PRE_INIT[1])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    # After the block, fd 2 is the task's stderr again: nothing is filtered.
    assert result.stderr == ERROR + b"from python\n" + PRE_INIT[1]


def test_what_a_crash_wrote_last_still_comes_out():
    fatal = b"F0000 00:00:1.5 7 check.cc:9] Check failed: x\n"
    code = """
import os
from tfmesos.task.quiet import tensorflow_startup_filtered
with tensorflow_startup_filtered(2):
    os.write(2, %r + %r)
    os.abort()
""" % (PRE_INIT[1], fatal)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert result.returncode < 0 and result.stderr == fatal


def tensorflow_stderr(env):
    result = subprocess.run([sys.executable, "-c", SERVE], capture_output=True, text=True,
                            timeout=120, env=dict(os.environ, **env))
    assert result.returncode == 0 and result.stdout == "up\n", result.stderr
    return result.stderr.splitlines()


@pytest.mark.tensorflow
def test_verbose_tasks_show_everything_tensorflow_logs():
    for name in ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLED_DEVICE_TYPES"):
        assert name not in os.environ
    lines = tensorflow_stderr(tensorflow_env(0, quiet=False))
    assert any("InitializeLog" in line for line in lines), lines
    assert any("Device factory 'GPU' disabled by TF_ENABLED_DEVICE_TYPES" in line
               for line in lines), lines
    assert not any("cuInit" in line for line in lines), lines


@pytest.mark.tensorflow
def test_fine_grained_tasks_stderr_has_no_tensorflow_noise(tmp_path, monkeypatch):
    from tfmesos import cluster
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "runs"))
    work = tmp_path / "mesos"
    jobs = [{"name": "ps", "num": 1, "cpus": 0.2, "mem": 1024},
            {"name": "worker", "num": 1, "cpus": 0.2, "mem": 1024}]
    with cluster(jobs, master="local", local_master_options={
            "work_dir": str(work), "keep_sandboxes": True}) as c:
        assert len(c.targets) == 2
        sandboxes = wait_for_servers(work, 2)
    for sandbox in sandboxes:
        with open(os.path.join(sandbox, "stderr"), encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
        assert not any("cuInit" in line for line in lines), lines
        noise = [line for line in lines if tensorflow_noise(line.encode() + b"\n", 0)
                 or "InitializeLog" in line]
        assert len(noise) <= 2, lines


def wait_for_servers(work, count, timeout=240):
    """The sandboxes of ``count`` tasks whose TensorFlow server is up."""
    deadline = time.monotonic() + timeout
    while True:
        up = []
        # Each run's sandbox once: the glob also goes through runs/latest,
        # the link to the newest run (Mesos' layout).
        for path in sorted({os.path.realpath(p) for p in
                            glob.glob(str(work / "**" / "stdout"), recursive=True)}):
            with open(path, encoding="utf-8", errors="replace") as handle:
                if "TensorFlow server" in handle.read():
                    up.append(os.path.dirname(path))
        if len(up) == count:
            return up
        assert time.monotonic() < deadline, "TensorFlow servers up: %s" % up
        time.sleep(0.5)


# -- replica mode: the command's stderr, filtered as it streams ------------------------

def stream_through_filter(chunks, level=2, gpus=None):
    from tfmesos.task.quiet import NoiseFilter
    noise = NoiseFilter(level, gpus=gpus)
    return b"".join([noise.feed(chunk) for chunk in chunks] + [noise.close()])


USER = [b"Traceback (most recent call last):\n",
        b"I0515 12:34:56.789012 140234 train.py:45] the user's absl logging\n",
        b"Epoch 1/10\n", b"WARNING: my own warning\n", b"Infinity\n"]
CUINIT = b"E0000 00:00:1795714032.403062   13654 cuda_platform.cc:52] failed call to cuInit: " \
    b"INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n"


def test_the_command_s_noise_is_dropped_wherever_the_chunks_split_its_lines():
    text = b"".join(PRE_INIT[:1] + USER[:2] + PRE_INIT[1:] + [WARNING] + USER[2:] + [ERROR])
    wanted = b"".join(USER[:2] + USER[2:] + [ERROR])
    for size in (1, 3, 7, 64, len(text)):
        chunks = [text[i:i + size] for i in range(0, len(text), size)]
        assert stream_through_filter(chunks) == wanted, size
    # Everything passes at level 0 (tfrun -v), what is below 1 at level 1.
    assert stream_through_filter([text], level=0) == text
    assert stream_through_filter([text], level=1) == b"".join(
        PRE_INIT[:1] + USER[:2] + [WARNING] + USER[2:] + [ERROR])


def test_an_unfinished_line_passes_unless_it_may_be_noise_and_close_ends_it():
    from tfmesos.task.quiet import NoiseFilter
    noise = NoiseFilter(2)
    assert noise.feed(b"progress 10%") == b"progress 10%"     # not the start of noise
    assert noise.feed(b"\rprogress 20%\n") == b"\rprogress 20%\n"
    assert noise.feed(b"I0000 00:00:17") == b""                 # may be a log line: held
    assert noise.feed(b"95.1 7 train.py:3] mine\n") == b"I0000 00:00:1795.1 7 train.py:3] mine\n"
    assert noise.feed(b"I0000 00:00:1.5 7 port.cc:1] one") == b""
    assert noise.close() == b""
    noise = NoiseFilter(2)
    assert noise.feed(b"WARN") == b"" and noise.close() == b"WARN"


def test_a_cuinit_failure_is_noise_only_in_a_task_without_gpus():
    assert stream_through_filter([CUINIT], gpus=0) == b""
    assert stream_through_filter([CUINIT], gpus=1) == CUINIT
    assert stream_through_filter([CUINIT], level=0, gpus=0) == CUINIT


NOISY = "printf '%s' >&2; echo mine >&2; echo out" % "".join(
    line.decode().replace("%", "%%") for line in PRE_INIT + [CUINIT])


def test_replica_tasks_drop_tensorflow_s_start_up_noise_unless_verbose(tmp_path):
    from tfrun_helpers import SMALL, run_tfrun
    quiet = run_tfrun("-w", "1", "-s", "0", *SMALL, "--run-dir", str(tmp_path / "q"), "--",
                      NOISY)
    assert quiet.returncode == 0, quiet.stderr
    assert "[worker:0] mine\n" in quiet.stderr and "[worker:0] out\n" in quiet.stdout
    for needle in ("InitializeLog", "oneDNN", "cuda drivers", "cuInit"):
        assert needle not in quiet.stderr
        assert needle not in (tmp_path / "q" / "worker.0.stderr").read_text()
    verbose = run_tfrun("-v", "-w", "1", "-s", "0", *SMALL, "--run-dir", str(tmp_path / "v"),
                        "--", NOISY)
    assert verbose.returncode == 0, verbose.stderr
    for needle in ("InitializeLog", "oneDNN", "cuda drivers", "cuInit"):
        assert needle in verbose.stderr


KERAS_NOISE = ("InitializeLog", "oneDNN", "cudart_stub", "Could not find cuda drivers",
               "cuInit", "cpu_feature_guard")


@pytest.mark.tensorflow
def test_the_keras_example_is_quiet_unless_verbose(keras_example):
    from tfrun_helpers import run_tfrun
    from training_helpers import RESOURCES
    quiet = keras_example.result
    assert "[worker:0] final accuracy" in quiet.stdout
    found = [line for line in quiet.stderr.splitlines()
             if any(needle in line for needle in KERAS_NOISE)]
    assert not found, found
    # -v: what TensorFlow logs as it starts comes through (its start is all
    # that logs: the training need not run again).
    verbose = run_tfrun("-v", "-w", "1", "-s", "0", *RESOURCES, "--", sys.executable, "-c",
                        "import tensorflow as tf; print(float(tf.constant(1.0) + 1))",
                        timeout=240)
    assert verbose.returncode == 0, verbose.stderr[-4000:]
    assert "[worker:0] 2.0" in verbose.stdout
    assert "[worker:0] WARNING: All log messages before absl::InitializeLog()" in verbose.stderr
    # TensorFlow's own C++ INFO lines come through (which ones depends on
    # the CPU: oneDNN's note, cpu_feature_guard's, cudart_stub's).
    assert re.search(r"^\[worker:0\] I\d{4} .* \w+\.cc:\d+\] ", verbose.stderr, re.M), \
        verbose.stderr[-4000:]
