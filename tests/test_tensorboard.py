"""``tfrun --tensorboard``: TensorBoard runs as a task of the run, answers
HTTP at the URL tfrun prints, and is gone when the run ends."""

import re
import urllib.error
import urllib.request

import pytest
from conftest import marked_processes
from tfrun_helpers import SMALL, start_tfrun, wait_for_line

from tfmesos.cli.tensorboard import tensorboard_job, url_of
from tfmesos.core.clusterspec import tf_config

pytestmark = pytest.mark.tensorflow


def test_tensorboard_answers_while_the_run_goes_and_stops_with_it(tmp_path):
    with start_tfrun("--tensorboard", str(tmp_path), "-w", "1", "-s", "0", *SMALL,
                     "--", "sleep 20") as proc:
        lines = wait_for_line(proc.stderr, "TensorBoard at", timeout=90)
        url = re.search(r"TensorBoard at (http://\S+)", lines[-1]).group(1)
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200 and b"TensorBoard" in page.read()
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
    assert command == ("address=10.0.0.5:31007; exec /opt/py/bin/python -m tensorboard.main "
                       "--logdir '/data/logs {run}' --bind_all --port ${address##*:}")
    assert "exec python3 -m" in tensorboard_job("/logs", image="img").cmd
