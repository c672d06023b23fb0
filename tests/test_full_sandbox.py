"""A task whose sandbox's disk is full still runs to its end, its output
all forwarded: the task stops writing the sandbox file that failed, says
so once, and goes on reading the command's output (a pump thread that died
of ENOSPC left the command blocked in its next write and the run hanging
after "cluster ready")."""

import os
import subprocess
import sys

import pytest
from tfrun_helpers import SMALL, assert_no_task_processes, run_tfrun
from waiting import wait_until

pytestmark = pytest.mark.timeout(300)

LINES = 6000   # 6 MB to stdout, twice the disk's size
COMMAND = ("import sys; [print('x' * 1000) for _ in range(%d)]; print('done', file=sys.stderr)"
           % LINES)


def mounted(path):
    with open("/proc/self/mounts") as handle:
        return any(line.split()[1] == str(path) for line in handle)


def test_a_full_sandbox_disk_neither_holds_the_run_nor_loses_its_output(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    small = tmp_path / "small"     # the embedded master's sandboxes go to TMPDIR
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(small)], check=True)
    try:
        result = run_tfrun("-w", "1", "-s", "0", *SMALL, "--run-dir", str(tmp_path / "run"),
                           "--", sys.executable, "-c", COMMAND, timeout=240,
                           env={"TMPDIR": str(small), "TFMESOS_RUNS_DIR": str(tmp_path)})
        assert_no_task_processes()
        assert result.returncode == 0, result.stderr[-3000:]
        lines = [line for line in (result.stdout + result.stderr).splitlines()
                 if line == "[worker:0] " + "x" * 1000]
        assert len(lines) == LINES
        assert "[worker:0] done" in result.stderr.splitlines()
        # Once a stream (the stderr file fails too, at "done", on that full disk).
        said = [line for line in result.stderr.splitlines() if "cannot write the sandbox" in line]
        message = ("[worker:0] tfmesos: cannot write the sandbox's %s (No space left on device): "
                   "its output goes on to tfrun only")
        assert said in ([message % "stdout"], [message % "stdout", message % "stderr"]), said
        # What tfrun keeps of it is whole too.
        with open(tmp_path / "run" / "worker.0.stdout") as handle:
            assert handle.read() == ("x" * 1000 + "\n") * LINES
        # The embedded master's cleaner removes the sandboxes after tfrun's end.
        wait_until(lambda: os.listdir(small) == [], 30,
                   message=lambda: "left on the tmpfs: %s" % os.listdir(small))
    finally:
        if mounted(small):
            subprocess.run(["umount", "-l", str(small)], check=False)
