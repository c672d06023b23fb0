"""Launch failures that retrying cannot help abort at once, and the
'missing' message compares the cluster's totals with what offers held."""

import subprocess
import tarfile
import time

import pytest
from addict import Dict
from offers import FakeDriver, offer
from tfrun_helpers import free_port, marked_tasks, run_tfrun, wait_for_line

from tfmesos.core.events import StatusUpdate
from tfmesos.core.jobs import Job, parse_jobs
from tfmesos.core.launch import ClusterRun
from tfmesos.core.scheduler import TFMesosScheduler
from tfmesos.core.slots import make_slots
from tfmesos.core.spec import RunSpec
from tfmesos.core.task_ends import launch_failure_message, permanent_failure
from tfmesos.exceptions import TaskFailed


@pytest.mark.parametrize("state, reason, message, permanent", [
    ("TASK_ERROR", "REASON_TASK_INVALID", "Task uses more resources than available", True),
    ("TASK_ERROR", None, "", True),
    ("TASK_FAILED", "REASON_TASK_UNAUTHORIZED", "not allowed", True),
    ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED",
     "Docker is unavailable: Error while fetching server API version", True),
    ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED",
     "image tfmesos/nope not found on the Docker engine; build it", True),
    ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED", "Failed to launch container: Failed to "
     "get image: manifest for registry.example.com/ml:0.1 unknown", True),
    ("TASK_FAILED", None, "pull access denied for nope, repository does not exist", True),
    ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED", "Failed to fetch URIs: timed out", False),
    # Docker refuses the container's volumes however often it is launched
    ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED", "Docker container run error: 400 Client "
     "Error: Bad Request (Duplicate mount point: /etc/passwd)", True),
    ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED", "invalid invalid volume specification: "
     "'/:/:rw'", True),
    ("TASK_FAILED", "REASON_COMMAND_EXECUTOR_FAILED", "Command exited with status 1", False),
    # an archive the local master's fetcher refuses, whatever the rule; not
    # a fetch that failed on the way, nor a file that was no archive
    ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED", "Failed to fetch 'http://h/e.tar.gz': "
     "the local master's fetcher refuses this archive: member '../x' leaves the sandbox", True),
    ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED", "Failed to fetch 'http://h/e.tar.gz': "
     "the local master's fetcher refuses this archive: it expands to more than 4096 MB "
     "(200 times its size)", True),
    ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED",
     "Failed to fetch 'http://h/e.tar.gz': HTTP Error 503: Service Unavailable", False),
    ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED",
     "Failed to fetch 'http://h/e.tar.gz': nothing came for 60 s", False),
    ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED", "Failed to fetch 'http://h/e.tar.gz': "
     "it is not a readable archive: not a gzip file", False),
    ("TASK_LOST", "REASON_INVALID_OFFERS", "Task launched with invalid offers", False),
    ("TASK_DROPPED", None, "", False),
    ("TASK_LOST", "REASON_AGENT_REMOVED", "image not found", False),
])
def test_the_rule_follows_mesos_states_reasons_and_messages(state, reason, message, permanent):
    assert (permanent_failure(state, reason, message) is not None) == permanent


def test_an_archive_the_local_fetcher_refuses_is_not_fetched_again(tmp_path):
    # The fetcher's own message (mesos_local/containerizer/archives.py, the
    # phrase tfrun reads): a venv-pack archive given as a URL.
    from mesos_local.containerizer.fetcher import FetchError, fetch_uris
    archive = tmp_path / "tfenv.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        link = tarfile.TarInfo("bin/python3")
        link.type, link.linkname = tarfile.SYMTYPE, "/usr/bin/python3"
        tar.addfile(link)
    box = tmp_path / "sandbox"
    box.mkdir()
    with pytest.raises(FetchError) as caught:
        fetch_uris([{"value": str(archive)}], str(box))
    message = str(caught.value)
    why = permanent_failure("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED", message)
    assert why == "the archive is refused on every fetch"
    line = launch_failure_message("worker:0", 1, "TASK_FAILED", message, why)
    assert line.startswith("worker:0 cannot be launched: TASK_FAILED: Failed to fetch '%s': "
                           "the local master's fetcher refuses this archive: member "
                           "'bin/python3' is a link to an absolute path" % archive)
    assert line.endswith("give it to the task as a file that the task extracts itself, or "
                         "make it with conda-pack (the archive is refused on every fetch; "
                         "retrying cannot help)")


def _never_registering_python(tmp_path):
    script = tmp_path / "slow-python"
    script.write_text("#!/bin/sh\nexec sleep 60\n")
    script.chmod(0o755)
    return str(script)


def test_task_error_is_not_retried(tmp_path):
    run = ClusterRun(RunSpec(jobs=[Job("worker", cpus=0.1, mem=64)], launch_timeout=60,
                             max_attempts=3, python=_never_registering_python(tmp_path),
                             mode="replica", command="true", master="local",
                             run_dir=str(tmp_path / "run")), environ={})
    try:
        run.start()
        deadline = time.monotonic() + 20
        while run.slots[0].task_id is None and time.monotonic() < deadline:
            time.sleep(0.05)
        run.events.put(StatusUpdate(Dict(
            task_id={"value": run.slots[0].task_id}, state="TASK_ERROR",
            reason="REASON_TASK_INVALID", source="SOURCE_MASTER",
            message="Task uses invalid agent: S9")))
        started = time.monotonic()
        with pytest.raises(TaskFailed, match="worker:0 cannot be launched: TASK_ERROR: Task uses "
                                             "invalid agent: S9 \\(Mesos refused the task "
                                             "description; retrying cannot help\\)"):
            run.wait_ready()
        assert time.monotonic() - started < 30   # at once, not at the launch timeout (60 s)
        assert run.slots[0].attempts == 1
    finally:
        run.stop()
    record = run.record.snapshot()
    assert record["outcome"]["status"] == "aborted"
    [attempt] = record["tasks"][0]["attempts"]
    assert attempt["states"][-1]["state"] == "TASK_ERROR"
    assert attempt["states"][-1]["reason"] == "REASON_TASK_INVALID"


def test_a_master_that_cannot_run_images_aborts_at_the_first_attempt(tmp_path):
    port = free_port()
    master = subprocess.Popen(["tfmesos", "local-master", "--port", str(port), "--cpus", "2",
                               "--no-docker", *marked_tasks()], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_line(master.stdout, "listening on", timeout=30)
        result = run_tfrun("-m", "127.0.0.1:%d" % port, "-w", "1", "-s", "0", "-Mw", "128",
                           "-I", "tfmesos/none", "-v", "--run-dir", str(tmp_path / "run"),
                           "--", "true", timeout=60)
    finally:
        master.terminate()
        master.wait(30)
    assert result.returncode == 1
    assert "worker:0 cannot be launched: TASK_FAILED: the local master cannot run container " \
           "images" in result.stderr
    assert "relaunching" not in result.stderr and "Traceback" not in result.stderr


def _scheduler(jobs):
    slots = make_slots(parse_jobs(jobs))
    return TFMesosScheduler(slots, lambda slot, a: {"task_id": {"value": slot.task_id}},
                            None, "run1"), slots


def test_missing_message_compares_the_totals():
    sched, slots = _scheduler([{"name": "ps", "cpus": 1, "mem": 1024},
                               {"name": "worker", "num": 2, "cpus": 1, "mem": 1024}])
    sched.resourceOffers(FakeDriver(), [Dict(offer("o1", cpus=2, mem=4000, agent="a1",
                                                   hostname="agent-1"))])
    assert [s.state for s in slots].count("PENDING") == 1
    slots[0].address, slots[1].address = "h:1", "h:2"   # ps:0 and worker:0 registered
    # Another agent offers what is left there; the first one is busy with our tasks.
    sched.resourceOffers(FakeDriver(), [Dict(offer("o2", cpus=0.5, mem=1952, agent="a2",
                                                   hostname="agent-2"))])
    text = sched.missing_message(600, "m:5050")
    assert "missing: worker:1 (no offer fits cpus=1 mem=1024 gpus=0); the cluster needs " \
           "cpus=3 mem=3072 gpus=0 in total; offers held at most cpus=2.5 mem=4000 gpus=0; " \
           "largest offer seen: cpus=2 mem=4000 gpus=0 on agent-1" in text
    assert sched.first_offer_at is not None


def test_missing_message_without_offers_names_the_master():
    sched, _ = _scheduler([{"name": "worker", "cpus": 1, "mem": 1024}])
    assert sched.missing_message(3, "m:5050").endswith(
        "the cluster needs cpus=1 mem=1024 gpus=0 in total; no offer received from m:5050")
