"""``tfrun --tensorboard``: TensorBoard runs as a task of the run, answers
HTTP at the URL tfrun prints, and is gone when the run ends."""

import ipaddress
import os
import re
import shlex
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest
from conftest import marked_processes
from local_addresses import non_loopback_address
from tfrun_helpers import SMALL, start_tfrun, wait_for_line

from tfmesos.cli.tensorboard import RUN_TENSORBOARD, tensorboard_job, url_of
from tfmesos.core.clusterspec import tf_config

pytestmark = pytest.mark.tensorflow


def until_exists(path):
    """A worker's command that runs until the test creates ``path``: the run
    goes on while the test looks at TensorBoard (a ``sleep 20`` held the
    suite 20 s, and ended the run too soon where TensorBoard took longer
    to start)."""
    return "until [ -e %s ]; do sleep 0.1; done" % shlex.quote(str(path))


def test_tensorboard_answers_while_the_run_goes_and_stops_with_it(tmp_path):
    done = tmp_path / "done"
    with start_tfrun("--tensorboard", str(tmp_path), "-w", "1", "-s", "0", *SMALL,
                     "--", until_exists(done)) as proc:
        lines = wait_for_line(proc.stderr, "TensorBoard at", timeout=240)
        url = re.search(r"TensorBoard at (http://\S+)", lines[-1]).group(1)
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200 and b"TensorBoard" in page.read()
        done.touch()
        assert proc.wait(60) == 0
    with pytest.raises((urllib.error.URLError, OSError)):
        urllib.request.urlopen(url, timeout=5)
    assert not [p for p in marked_processes() if "tensorboard" in p[1]]


def test_tensorboard_is_not_part_of_the_tensorflow_cluster():
    spec = {"worker": ["h:1"], "ps": ["h:2"], "tensorboard": ["h:3"]}
    assert "tensorboard" not in tf_config(spec, "worker", 0)["cluster"]
    assert url_of(spec) == "http://h:3/" and url_of({"worker": ["h:1"]}) is None


def test_tensorboard_job_uses_the_tasks_port_and_a_quoted_logdir():
    job = tensorboard_job("/data/logs {run}", python="/opt/py/bin/python")
    assert job.name == "tensorboard" and job.num == 1
    command = job.cmd.format(tensorboard_hosts="10.0.0.5:31007")
    assert command.startswith("address=10.0.0.5:31007; ")
    assert ("exec /opt/py/bin/python -c %s --logdir='/data/logs {run}' --host "
            % shlex.quote(RUN_TENSORBOARD) in command)
    assert "exec python3 -c" in tensorboard_job("/logs", image="img").cmd


def test_tensorboard_takes_a_logdir_that_starts_with_a_dash_and_ignores_the_cwd_s_modules(
        tmp_path):
    # --tensorboard=--logs failed in the task ('argument --logdir: expected
    # one argument', exit 2), and a cmd.py in the directory tfrun ran from
    # shadowed the standard library's (python -m puts it first on sys.path:
    # 'module cmd has no attribute Cmd', the run failed) (found by a review helper).
    lib = tmp_path / "lib"   # stands in for tensorboard.main
    lib.mkdir()
    (lib / "probe.py").write_text("import cmd, sys\nprint(sys.argv[1:])\nprint(cmd.Cmd)\n")
    (tmp_path / "cmd.py").write_text("raise SystemExit('the cwd shadowed the stdlib')\n")
    command = tensorboard_job("--logs").cmd.format(tensorboard_hosts="127.0.0.1:31007")
    command = command.replace("tensorboard.main", "probe")
    done = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(lib)), timeout=60)
    assert done.stdout.splitlines() == [
        "['--logdir=--logs', '--host', '127.0.0.1', '--port', '31007']",
        "<class 'cmd.Cmd'>"], done


@pytest.mark.parametrize("address, host", [("10.0.0.5:31007", "10.0.0.5"),
                                           ("[fd00::5]:31007", "fd00::5"),
                                           ("agent-1.example:31007", "agent-1.example")])
def test_tensorboard_binds_the_host_of_its_task_address_only(address, host, tmp_path):
    # Before: --bind_all (every interface), whatever address tfrun printed.
    echo = tmp_path / "python"   # stands in for the interpreter: prints its arguments
    echo.write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"\n")
    echo.chmod(0o755)
    command = tensorboard_job("/logs", python=str(echo)).cmd.format(tensorboard_hosts=address)
    argv = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          check=True, timeout=10).stdout.splitlines()
    assert argv == ["-c", RUN_TENSORBOARD, "--logdir=/logs", "--host", host, "--port", "31007"]


def _listening_addresses(port):
    """The local addresses (``ipaddress`` objects) that sockets of this
    machine's network namespace listen on at TCP ``port``
    (``/proc/net/tcp`` and ``tcp6``: "ADDR:PORT" in hex, the address as
    the kernel holds it, in 32-bit words of host byte order)."""
    found = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            address, _, hex_port = fields[1].partition(":")
            if fields[3] != "0A" or int(hex_port, 16) != port:   # 0A: TCP_LISTEN
                continue
            raw = b"".join(int(address[i:i + 8], 16).to_bytes(4, sys.byteorder)
                           for i in range(0, len(address), 8))
            found.append(ipaddress.ip_address(raw))
    return found


def test_tensorboard_listens_on_the_address_tfrun_prints_and_nowhere_else(tmp_path):
    # Before: --bind_all, TensorBoard listened on every interface (*:PORT)
    # though tfrun printed http://127.0.0.1:PORT/ (the embedded master).
    with start_tfrun("--tensorboard", str(tmp_path), "-w", "1", "-s", "0", *SMALL,
                     "--", until_exists(tmp_path / "done")) as proc:
        lines = wait_for_line(proc.stderr, "TensorBoard at", timeout=240)
        url = re.search(r"TensorBoard at (http://\S+)", lines[-1]).group(1)
        parts = urllib.parse.urlsplit(url)
        assert parts.hostname == "127.0.0.1"
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200
        listening = _listening_addresses(parts.port)
        assert listening == [ipaddress.ip_address("127.0.0.1")], listening
        elsewhere = non_loopback_address()
        if elsewhere is not None:
            with pytest.raises(OSError):
                socket.create_connection((elsewhere, parts.port), timeout=5).close()
