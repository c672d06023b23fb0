"""tfrun gives every worker the variables of Keras 3's multi-process
``keras.distribution`` (the coordinator on worker 0's host, at a second port
Mesos reserved in worker 0's offer)."""

import re

import pytest

from tfrun_helpers import SMALL, run_tfrun

# Every task writes what it got to a file of its own; the workers wait (at
# most a minute) for the ps's file, so the run cannot end before the ps ran.
SHOW = ('echo "keras=[$KERAS_DISTRIBUTION_JOB_ADDRESSES|$KERAS_DISTRIBUTION_NUM_PROCESSES|'
        '$KERAS_DISTRIBUTION_PROCESS_ID] own=[$TFMESOS_PORT] '
        'coordinator=[$TFMESOS_COORDINATOR_PORT] workers=[{worker_hosts}]" > %(dir)s/tmp.{job_name}{task_index} && '
        'mv %(dir)s/tmp.{job_name}{task_index} %(dir)s/{job_name}:{task_index}; '
        'n=0; while [ {job_name} = worker ] && [ ! -e %(dir)s/ps:0 ] && [ $n -lt 600 ]; '
        'do sleep 0.1; n=$((n + 1)); done')
LINE = re.compile(r"^keras=\[(.*)\|(.*)\|(.*)\] own=\[(\d*)\] coordinator=\[(\d*)\] "
                  r"workers=\[(.*)\]$")


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TFMESOS_RUNS_DIR", str(tmp_path / "tfmesos-runs"))


def test_workers_get_the_keras_distribution_variables_and_other_jobs_do_not(tmp_path):
    result = run_tfrun("-w", "2", "-s", "1", *SMALL, "--", SHOW % {"dir": tmp_path})
    assert result.returncode == 0, result.stderr
    seen = {name: LINE.match((tmp_path / name).read_text()).groups()
            for name in ("worker:0", "worker:1", "ps:0")}
    address, processes, process_id, own, port, workers = seen["worker:0"]
    worker0 = workers.split(",")[0]
    host = worker0.rpartition(":")[0]
    assert address == "%s:%s" % (host, port)          # worker 0's host, its second port
    assert port and port != own and worker0 == "%s:%s" % (host, own)
    assert (processes, process_id) == ("2", "0")
    assert seen["worker:1"][:3] == (address, "2", "1")
    assert seen["worker:1"][4] == ""                  # only worker 0 reserves a second port
    assert seen["ps:0"][:3] == ("", "", "")

